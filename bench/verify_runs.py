"""python -m bench.verify_runs --out FILE.jsonl [--budget-seconds N] [--only A,B] [--list] [--work DIR]

Every `trl-advisor verify` measurement issue 11 asks for, on the GPU of this machine, in one process: bundles the
planner writes (`trl-advisor generate`), some edited as a user would, each checked (`check --bundle --json`) and
verified (`verify --random-init --synthetic-data --json`, quick mode unless the case says --full-steps). One JSON
line per case goes to --out as soon as the case ends (flushed and synced): the case, the bundle's plan, the
estimate of the files current at run time (what verify compared with), what was measured, the check's verdict,
wall times and the installed versions. docs/verify.md is generated from these lines (python -m bench.verify_docs).

Cases run in priority order, and a case whose predicted cost (start-up, random-init write, steps at the predicted
step time, from `verify --dry-run --json`) does not fit in what is left of --budget-seconds is recorded as
`skipped` and not started. The three demonstrations come first:

* oom-edit: a 1.5B SFT bundle at 2048 tokens planned at micro-batch 16 (79 GiB predicted), CONFIG edited to 48
  (213 GiB predicted, 139 GiB usable): check --bundle must predict the OOM,
  verify must report it, that the files exceed the plan, and the next plan.
* lora-8b-16k-full / lora-8b-16k-quick: the planner's 8B LoRA bundle at 16k tokens, run with --full-steps --steps 2
  (the plan's 64 micro-batches per step; it also writes the random-init checkpoint) and then in quick mode (the
  checkpoint cached): the quick run must take under 3 minutes and its scaled step time be within 15 % of the
  full run's.
* every verify here runs on the machine's own transformers (no matching wheel is carried), so the packages step
  shows the version warning.

Then short quick-mode runs of small models, one per kind (trainer, method, backend).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib import metadata
from pathlib import Path

GIB = 1 << 30
REPO = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = ("torch", "transformers", "trl", "accelerate", "deepspeed", "peft", "datasets", "liger-kernel",
                 "bitsandbytes", "triton")
START_SECONDS = 35.0
"""Start-up of one verify run of a small model before its first step (imports in accelerate's launcher and in
train.py, the Trainer's set-up, Liger's compiles): the 0.5B run of bench/results/verify-h200-2026-11-29.jsonl took
54 s for 8 steps of 0.51 s with a 1 GB random-init write, i.e. about 50 s; 35 s once the checkpoint is cached."""
WRITE_BYTES_PER_SECOND = 0.5e9
"""Random-init write rate assumed for the budget (bf16 tensors drawn on the GPU, copied to the host, safetensors
written): the 7B run of the same file spent about 66 s before its first step, about 14 GB written."""
LOAD_BYTES_PER_SECOND = 2e9
"""Loading a cached checkpoint from the page cache."""

# (name, generate flags, edits to train.py CONFIG, verify flags, what the case demonstrates)
CASES: list[dict] = [
    {"name": "oom-edit", "model": "1.5B", "generate": ["--micro-batch", "16", "--seq-len", "2048"],
     "edit": {"micro_batch": 48},
     "verify": [], "shows": "a bundle planned at micro-batch 16 edited to 48: check predicts the OOM, verify "
                            "reports it, that the files exceed the plan, and the next plan"},
    {"name": "lora-8b-16k-full", "model": "8B", "generate": ["--method", "lora", "--seq-len", "16384"],
     "verify": ["--full-steps", "--steps", "2"], "shows": "the plan's own accumulation, for the quick run to be "
                                                          "compared with"},
    {"name": "lora-8b-16k-quick", "model": "8B", "generate": ["--method", "lora", "--seq-len", "16384"],
     "verify": [], "shows": "quick mode on the same bundle: under 3 minutes, scaled step within 15 % of the full "
                            "run"},
    {"name": "dpo-0.5b", "model": "0.5B", "generate": ["--trainer", "dpo"], "verify": [], "shows": "DPO"},
    {"name": "sft-0.5b-zero3", "model": "0.5B", "generate": ["--backend", "deepspeed", "--zero", "3"],
     "verify": [], "shows": "DeepSpeed ZeRO-3"},
    {"name": "sft-0.5b-qlora", "model": "0.5B", "generate": ["--method", "qlora"], "verify": [],
     "shows": "QLoRA (4-bit base loaded from the random-init checkpoint)"},
    {"name": "kto-0.5b", "model": "0.5B", "generate": ["--trainer", "kto"], "verify": [], "shows": "KTO"},
    {"name": "grpo-0.5b", "model": "0.5B",
     "generate": ["--trainer", "grpo", "--seq-len", "512", "--max-completion-len", "128", "--num-generations", "4",
                  "--vllm", "none"], "verify": ["--steps", "4"], "shows": "GRPO with transformers' generate"},
    {"name": "sft-0.5b-zero2", "model": "0.5B", "generate": ["--backend", "deepspeed", "--zero", "2"],
     "verify": [], "shows": "DeepSpeed ZeRO-2"},
    {"name": "sft-0.5b-full", "model": "0.5B", "generate": [], "verify": [], "shows": "SFT full, one GPU"},
    {"name": "sft-1.5b-zero2-offload", "model": "1.5B",
     "generate": ["--backend", "deepspeed", "--zero", "2", "--offload", "optimizer"], "verify": [],
     "shows": "ZeRO-2 with the optimizer offloaded (the Trainer's AdamW mapped to DeepSpeedCPUAdam by accelerate)"},
    {"name": "sft-1.5b-zero3-offload", "model": "1.5B",
     "generate": ["--backend", "deepspeed", "--zero", "3", "--offload", "optimizer"], "verify": [],
     "shows": "ZeRO-3 with the optimizer offloaded"},
    {"name": "sft-0.5b-lora", "model": "0.5B", "generate": ["--method", "lora"], "verify": [], "shows": "LoRA"},
    # the optimisations of the TRL performance guide the bundles now carry
    {"name": "dpo-0.5b-bema", "model": "0.5B", "generate": ["--trainer", "dpo", "--method", "full", "--ref-model",
                                                           "bema"], "verify": [],
     "shows": "DPO whose reference follows the policy by BEMA (trl.experimental.bema_for_ref_model)"},
    {"name": "dpo-0.5b-precompute", "model": "0.5B",
     "generate": ["--trainer", "dpo", "--method", "full", "--ref-model", "precompute"], "verify": [],
     "shows": "DPO with reference log-probs scored before training (no reference copy)"},
    {"name": "sft-gemma2-2b", "model": "gemma-2-2b", "probe": True, "generate": [], "verify": [],
     "shows": "Gemma-2 with the attention the planner chose for this machine (it rejects sdpa)"},
    {"name": "sft-0.5b-liger", "model": "0.5B", "generate": ["--liger"], "verify": [],
     "shows": "Liger's kernels through apply_liger_kernel_to_<model_type> (not TRL's deprecated flag)"},
    {"name": "gkd-0.5b-teacher-1.5b", "model": "0.5B", "generate": ["--trainer", "gkd", "--teacher", "1.5B"],
     "verify": [], "shows": "GKD distilling a 1.5B teacher (its own random weights) into a 0.5B student"},
    {"name": "gkd-0.5b-teacher-1.5b-single", "model": "0.5B",
     "generate": ["--trainer", "gkd", "--teacher", "1.5B", "--backend", "single"], "verify": [],
     "shows": "the same GKD pinned to one GPU without DeepSpeed (logits under bf16 autocast, not DeepSpeed's bf16)"},
    # Unsloth against the plain Hugging Face plan of the same knobs (issue 12). The Unsloth bundle needs its own
    # environment (trl 1.15, transformers <= 5.17, datasets 4.x): run this case with that environment first on
    # PYTHONPATH, and the twin with the TRL 1.16 one (bench/unsloth_h200.sh)
    {"name": "unsloth-7b-qlora", "model": "7B",
     "generate": ["--method", "qlora", "--unsloth", "--seq-len", "2048", "--micro-batch", "8", "--grad-ckpt"],
     "verify": [], "shows": "Unsloth QLoRA (its offloaded checkpointing, its kernels), in its own environment"},
    {"name": "qlora-7b-hf-twin", "model": "7B",
     "generate": ["--method", "qlora", "--seq-len", "2048", "--micro-batch", "8", "--grad-ckpt", "--no-liger"],
     "verify": [], "shows": "the plain Hugging Face QLoRA plan with the Unsloth case's knobs, for comparison"},
    # Workloads none of the cases above or the calibration rows ran: the planner's own pick (only the workload
    # given), so the memory and speed model meets them as a user's run would (docs/verify.md, new workloads)
    {"name": "new-sft-q3b-4k", "model": "qwen2.5-3b", "generate": ["--seq-len", "4096"], "verify": [],
     "shows": "a 3B SFT at 4k tokens, as planned"},
    {"name": "new-sft-l1b-4k", "model": "llama-3.2-1b", "generate": ["--seq-len", "4096"], "verify": [],
     "shows": "a 1B Llama SFT at 4k tokens, as planned"},
    {"name": "new-dpo-q7b-lora", "model": "qwen2.5-7b", "generate": ["--trainer", "dpo", "--method", "lora"],
     "verify": [], "shows": "a 7B LoRA DPO, as planned"},
    {"name": "new-qlora-l3b", "model": "llama-3.2-3b", "generate": ["--method", "qlora"], "verify": [],
     "shows": "a 3B QLoRA SFT, as planned"},
    {"name": "new-kto-q3-1.7b", "model": "qwen3-1.7b", "generate": ["--trainer", "kto"], "verify": [],
     "shows": "a Qwen3 KTO, as planned"},
    {"name": "new-grpo-l1b", "model": "llama-3.2-1b",
     "generate": ["--trainer", "grpo", "--seq-len", "768", "--max-completion-len", "256", "--num-generations", "8",
                  "--vllm", "none"], "verify": ["--steps", "8"],
     "shows": "a 1B Llama GRPO with transformers' generate, as planned"},
    {"name": "new-lora-phi3", "model": "phi-3-mini", "generate": ["--method", "lora", "--seq-len", "2048"],
     "verify": [], "shows": "a Phi-3 LoRA SFT, as planned"},
    {"name": "new-rloo-q3-0.6b", "model": "qwen3-0.6b",
     "generate": ["--trainer", "rloo", "--vllm", "none", "--seq-len", "512", "--max-completion-len", "128"],
     "verify": ["--steps", "8"], "shows": "a Qwen3 RLOO with transformers' generate, as planned"},
    {"name": "new-qlora-m7b", "model": "mistral-7b-v0.3", "generate": ["--method", "qlora"], "verify": [],
     "shows": "a Mistral 7B QLoRA SFT, as planned"},
    {"name": "new-sft-g3-1b", "model": "gemma-3-1b", "generate": ["--seq-len", "2048"], "verify": [],
     "shows": "a Gemma-3 SFT planned near the GPU's capacity"},
    {"name": "new-dpo-sm1.7b", "model": "smollm2-1.7b", "generate": ["--trainer", "dpo"], "verify": [],
     "shows": "a SmolLM2 full DPO, as planned"},
    # Catalogue models no calibration row or earlier case ran (2026-12-06), each the planner's own pick
    {"name": "new-lora-q3-4b-4k", "model": "qwen3-4b", "generate": ["--method", "lora", "--seq-len", "4096"],
     "verify": [], "shows": "a Qwen3-4B LoRA SFT at 4k tokens, as planned"},
    {"name": "new-dpo-g3-4b-lora", "model": "gemma-3-4b", "generate": ["--trainer", "dpo", "--method", "lora"],
     "verify": [], "shows": "a Gemma-3-4B LoRA DPO, as planned"},
    {"name": "new-qlora-q3-8b", "model": "qwen3-8b", "generate": ["--method", "qlora", "--seq-len", "2048"],
     "verify": [], "shows": "a Qwen3-8B QLoRA SFT, as planned"},
    {"name": "new-kto-sm360m", "model": "smollm2-360m", "generate": ["--trainer", "kto"], "verify": [],
     "shows": "a SmolLM2-360M full KTO, as planned"},
    {"name": "new-sft-sm135m-8k", "model": "smollm2-135m", "generate": ["--seq-len", "8192"], "verify": [],
     "shows": "a SmolLM2-135M SFT at 8k tokens, as planned (logits dominate)"},
    {"name": "new-gkd-q3-0.6b", "model": "qwen3-0.6b", "generate": ["--trainer", "gkd", "--teacher", "qwen3-1.7b"],
     "verify": [], "shows": "a Qwen3-0.6B GKD from a Qwen3-1.7B teacher, as planned"},
    {"name": "new-grpo-q3-1.7b", "model": "qwen3-1.7b",
     "generate": ["--trainer", "grpo", "--vllm", "none", "--seq-len", "1024", "--max-completion-len", "256"],
     "verify": ["--steps", "6"], "shows": "a Qwen3-1.7B GRPO with transformers' generate, as planned"},
    # Workloads no calibration row or earlier case ran (2026-12-07): adapters on the preference and online
    # trainers, Gemma-2's eager attention under LoRA, Mistral at 4k, ZeRO-3 with LoRA; each the planner's own pick
    {"name": "new-kto-l1b-lora", "model": "llama-3.2-1b", "generate": ["--trainer", "kto", "--method", "lora"],
     "verify": [], "shows": "a Llama-3.2-1B LoRA KTO, as planned"},
    {"name": "new-lora-g2-2b", "model": "gemma-2-2b", "probe": True, "generate": ["--method", "lora", "--seq-len", "2048"],
     "verify": [], "shows": "a Gemma-2-2B LoRA SFT (eager attention, soft-capping), as planned"},
    {"name": "new-rloo-l1b-lora", "model": "llama-3.2-1b",
     "generate": ["--trainer", "rloo", "--method", "lora", "--vllm", "none", "--seq-len", "512",
                  "--max-completion-len", "128"],
     "verify": ["--steps", "6"], "shows": "a Llama-3.2-1B LoRA RLOO with transformers' generate, as planned"},
    {"name": "new-dpo-q3-4b-qlora", "model": "qwen3-4b", "generate": ["--trainer", "dpo", "--method", "qlora"],
     "verify": [], "shows": "a Qwen3-4B QLoRA DPO, as planned"},
    {"name": "new-lora-m7b-4k", "model": "mistral-7b-v0.3", "generate": ["--method", "lora", "--seq-len", "4096"],
     "verify": [], "shows": "a Mistral-7B LoRA SFT at 4k tokens, as planned"},
    {"name": "new-lora-q1.5b-zero3", "model": "qwen2.5-1.5b",
     "generate": ["--method", "lora", "--backend", "deepspeed", "--zero", "3"], "verify": [],
     "shows": "a Qwen2.5-1.5B LoRA SFT under ZeRO-3, the rest as planned"},
    {"name": "new-sft-phi3-full", "model": "phi-3-mini", "generate": ["--seq-len", "2048"], "verify": [],
     "shows": "a Phi-3-mini full SFT, as planned"},
    # Second set of 2026-12-07: LoRA generation on another model than the LoRA RLOO's (the decode adapters' term),
    # a LoRA GKD student, DPO under ZeRO-2, QLoRA KTO and a 3B SFT at 8k tokens; each the planner's own pick
    {"name": "new-grpo-q3-0.6b-lora", "model": "qwen3-0.6b",
     "generate": ["--trainer", "grpo", "--method", "lora", "--vllm", "none", "--seq-len", "512",
                  "--max-completion-len", "128"],
     "verify": ["--steps", "6"], "shows": "a Qwen3-0.6B LoRA GRPO with transformers' generate, as planned"},
    {"name": "new-gkd-l1b-lora", "model": "llama-3.2-1b",
     "generate": ["--trainer", "gkd", "--method", "lora", "--teacher", "llama-3.2-3b"], "verify": [],
     "shows": "a Llama-3.2-1B LoRA GKD student of a Llama-3.2-3B teacher, as planned"},
    {"name": "new-dpo-q3-1.7b-zero2", "model": "qwen3-1.7b",
     "generate": ["--trainer", "dpo", "--backend", "deepspeed", "--zero", "2"], "verify": [],
     "shows": "a Qwen3-1.7B full DPO under ZeRO-2, the rest as planned"},
    {"name": "new-kto-q1.5b-qlora", "model": "qwen2.5-1.5b", "generate": ["--trainer", "kto", "--method", "qlora"],
     "verify": [], "shows": "a Qwen2.5-1.5B QLoRA KTO, as planned"},
    {"name": "new-sft-q3b-8k", "model": "qwen2.5-3b", "generate": ["--seq-len", "8192"], "verify": [],
     "shows": "a Qwen2.5-3B full SFT at 8k tokens, as planned"},
    # 2026-12-07, third set: a full RLOO under FSDP2, whose train.py hands TRL the model's path and load arguments
    # (device_map None) so that TRL loads the KL reference as it loads the policy
    {"name": "new-rloo-fsdp2-q0.5b", "model": "qwen2.5-0.5b",
     "generate": ["--trainer", "rloo", "--backend", "fsdp2", "--vllm", "none", "--seq-len", "512",
                  "--max-completion-len", "128"],
     "verify": ["--steps", "6"], "shows": "a Qwen2.5-0.5B full RLOO under FSDP2 (reference loaded by TRL), as planned"},
    {"name": "new-rloo-single-q0.5b", "model": "qwen2.5-0.5b",
     "generate": ["--trainer", "rloo", "--vllm", "none", "--seq-len", "512", "--max-completion-len", "128"],
     "verify": ["--steps", "6"], "shows": "the same RLOO as the planner picks it (its twin under FSDP2 beside it)"},
]


def _advisor(*args: str, timeout: float | None = None, log=None) -> subprocess.CompletedProcess:
    """`python -m advisor ARGS` (the trl-advisor of this checkout), stdout captured, stderr to `log`."""
    return subprocess.run([sys.executable, "-m", "advisor", *args], cwd=REPO, stdout=subprocess.PIPE,
                          stderr=log if log is not None else subprocess.PIPE, text=True, timeout=timeout)


def _json(text: str) -> dict | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in DISTRIBUTIONS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    from advisor import __version__

    out["trl-advisor"] = __version__
    return out


def gpu_here() -> tuple[str | None, int]:
    """(catalogue id, count) of this machine's GPUs."""
    import hw_probe
    from advisor.catalog import match_nvml_name

    report = hw_probe.probe()
    if not report.gpus:
        return None, 0
    g = report.gpus[0]
    spec = match_nvml_name(g.name, g.memory_total_bytes or None)
    return (spec.id if spec else None), len(report.gpus)


def edit_config(train_py: Path, edits: dict) -> None:
    """Set CONFIG values in train.py as a user would in an editor: the one `'key': value,` line each."""
    text = train_py.read_text(encoding="utf-8")
    for key, value in edits.items():
        text, n = re.subn(rf"^(\s*'{re.escape(key)}': )[^,]+,", rf"\g<1>{value!r},", text, count=1, flags=re.M)
        if n != 1:
            raise SystemExit(f"verify_runs: no CONFIG['{key}'] line in {train_py}")
    train_py.write_text(text, encoding="utf-8")


HOST_PROBE_CODE = ("import json, torch; from bench.host_probe import host_cpus, host_probe; "
                   "print(json.dumps({**host_probe(torch), **host_cpus(torch)}))")


def host_probe_here() -> dict | None:
    """The host's dispatch speed (bench.host_probe) measured in a child process just before a case: a DeepSpeed
    step of a small model is set by the host, and H200 machines of one kind differ in it, so a verify record is only
    comparable with a benchmark record of the same configuration next to this figure. The child keeps the parent
    free of CUDA."""
    try:
        proc = subprocess.run([sys.executable, "-c", HOST_PROBE_CODE], cwd=REPO, capture_output=True, text=True,
                              timeout=120)
    except subprocess.TimeoutExpired:
        return None
    return _json(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 and proc.stdout.strip() else None


def predicted_cost(dry: dict | None, *, cached: bool) -> float:
    """Seconds a verify run is expected to take (module docstring), from its dry run's JSON."""
    if not dry:
        return START_SECONDS * 2
    quick = dry.get("quick") or {}
    step = quick.get("predicted_step_seconds") or (dry.get("predicted") or {}).get("step_seconds") or 1.0
    steps = quick.get("steps") or 6
    ckpt = 2 * int(dry.get("params") or 0)  # bf16 bytes of the checkpoint written, then loaded
    return START_SECONDS + (0 if cached else ckpt / WRITE_BYTES_PER_SECOND) + ckpt / LOAD_BYTES_PER_SECOND \
        + steps * float(step)


def run_case(case: dict, *, gpu: str, work: Path, logs: Path, shared_init: Path, left: float) -> dict:
    started = time.monotonic()
    bundle = work / case["name"]
    record: dict = {"format": 2, "case": case["name"], "shows": case["shows"], "gpu": gpu, "gpus": 1,
                    "date": datetime.date.today().isoformat(), "edits": case.get("edit") or {}}
    # "probe": plan for this machine as its probe reads it (installed packages decide the attention, say), not for
    # the catalogue GPU of the same name
    where = [] if case.get("probe") else ["--gpu", gpu, "--gpus", "1"]
    gen = ["generate", "--model", case["model"], *where, *case["generate"], "--out", str(bundle), "--force", "--json"]
    record["generate"] = "trl-advisor " + " ".join(gen[:-4])
    with open(logs / f"{case['name']}.generate.log", "w") as log:
        proc = _advisor(*gen, log=log)
    result = _json(proc.stdout)
    if proc.returncode != 0 or result is None:
        return {**record, "status": "error", "error": f"generate exited {proc.returncode}"}
    record["planned"] = {"plan": result.get("plan"), "memory": result.get("memory"), "speed": result.get("speed")}
    record["model"] = (result.get("model") or {}).get("id")
    params = int((result.get("model") or {}).get("params") or 0)
    if case.get("edit"):
        edit_config(bundle / "train.py", case["edit"])
    # one random-init folder for every bundle: a model's checkpoint is written once and reused
    link = bundle / "random-init"
    if not link.exists():
        link.symlink_to(shared_init, target_is_directory=True)

    check = _advisor("check", "--bundle", str(bundle), "--json")
    doc = _json(check.stdout) or {}
    record["check"] = {"exit": check.returncode, "ok": doc.get("ok"), "estimate": doc.get("estimate"),
                       "errors": [f.get("id") for f in doc.get("findings", []) if f.get("severity") == "error"
                                  and f.get("status") == "fail"],
                       "differences": doc.get("differences"), "plan": doc.get("plan")}
    base = ["verify", str(bundle), "--random-init", "--synthetic-data", *case["verify"]]
    dry = _json(_advisor(*base, "--dry-run", "--json").stdout)
    if dry is not None:
        dry["params"] = params
    from advisor.verify.preflight import cached_checkpoint

    cached = cached_checkpoint(shared_init, bundle / "model_config.json") is not None
    cost = predicted_cost(dry, cached=cached)
    record["predicted_cost_seconds"] = round(cost, 1)
    if cost > left:
        return {**record, "status": "skipped", "reason": f"predicted {cost:.0f} s, {left:.0f} s left"}
    record["verify_command"] = "trl-advisor " + " ".join(base[:1] + ["BUNDLE"] + base[2:])
    t0 = time.monotonic()
    with open(logs / f"{case['name']}.verify.stderr", "w") as log:
        try:
            proc = _advisor(*base, "--json", "--timeout", str(int(max(60, left - 5))), timeout=max(90, left + 60),
                            log=log)
        except subprocess.TimeoutExpired:
            return {**record, "status": "timeout", "wall_seconds": round(time.monotonic() - t0, 1)}
    record["wall_seconds"] = round(time.monotonic() - t0, 1)
    record["exit"] = proc.returncode
    out = _json(proc.stdout)
    if out is None:
        return {**record, "status": "error", "error": f"verify exited {proc.returncode} without JSON"}
    keep = ("passed", "summary", "steps", "measured", "predicted", "error_pct", "planned", "plan", "differences",
            "quick", "next_plan", "tolerance", "command", "interrupted", "host", "gpu")
    record["verify"] = {k: out.get(k) for k in keep}
    log_file = bundle / "verify.log"
    if log_file.is_file():
        shutil.copy(log_file, logs / f"{case['name']}.verify.log")
    record["status"] = "ok"
    record["case_seconds"] = round(time.monotonic() - started, 1)
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.verify_runs", description=__doc__.split("\n\n")[1])
    p.add_argument("--out", help="JSONL file the records are appended to")
    p.add_argument("--budget-seconds", type=float, default=480.0, help="start no case past this (default 480)")
    p.add_argument("--only", help="comma-separated case names")
    p.add_argument("--list", action="store_true", help="print the cases and exit")
    p.add_argument("--work", help="folder for the bundles (default: a new temporary folder)")
    p.add_argument("--logs", help="folder for each case's logs (default: WORK/logs)")
    args = p.parse_args(argv)
    cases = CASES
    if args.only:
        wanted = args.only.split(",")
        unknown = [w for w in wanted if w not in {c["name"] for c in CASES}]
        if unknown:
            p.error(f"unknown case(s): {', '.join(unknown)}")
        cases = [c for c in CASES if c["name"] in wanted]
    if args.list:
        for c in cases:
            print(f"{c['name']:<20} --model {c['model']} {' '.join(c['generate'])}  verify {' '.join(c['verify'])}")
        return 0
    if not args.out:
        p.error("--out is required")
    t0 = time.monotonic()
    gpu, count = gpu_here()
    if not gpu:
        print("verify_runs: no catalogued GPU here: run it on the GPU machine", file=sys.stderr)
        return 1
    work = Path(args.work or tempfile.mkdtemp(prefix="verify-runs-"))
    logs = Path(args.logs) if args.logs else work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    shared_init = work / "random-init"
    shared_init.mkdir(parents=True, exist_ok=True)
    env_versions = versions()
    print(f"verify_runs: {count} x {gpu}; {len(cases)} case(s), {args.budget_seconds:.0f} s; transformers "
          f"{env_versions.get('transformers')}", file=sys.stderr)
    with open(args.out, "a", encoding="utf-8") as fh:
        for case in cases:
            left = args.budget_seconds - (time.monotonic() - t0)
            probe = host_probe_here()
            record = run_case(case, gpu=gpu, work=work, logs=logs, shared_init=shared_init, left=left)
            record["host_probe"] = probe
            record["versions"] = env_versions
            fh.write(json.dumps(record, sort_keys=True, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            print(summary_line(record), file=sys.stderr)
    with tarfile.open(Path(args.out).with_suffix(".logs.tgz"), "w:gz") as tar:
        tar.add(logs, arcname="logs")
    print(f"verify_runs: done in {time.monotonic() - t0:.0f} s; {args.out}", file=sys.stderr)
    return 0


def summary_line(r: dict) -> str:
    if r.get("status") != "ok":
        return f"{r['case']}: {r.get('status')} {r.get('reason') or r.get('error') or ''}"
    v = r["verify"]
    m, pr = v.get("measured") or {}, v.get("predicted") or {}
    peak, ppeak = m.get("per_gpu_peak_bytes"), pr.get("per_gpu_peak_bytes")
    tps, ptps = m.get("tokens_per_second"), pr.get("tokens_per_second")
    q = v.get("quick") or {}
    mode = f"quick ga {q.get('grad_accum')}/{q.get('plan_grad_accum')}" if q.get("quick") else "full"
    if m.get("out_of_memory"):  # no peak was measured: the demand torch's message gives is a floor
        floor = m.get("per_gpu_peak_at_least_bytes")
        shown = "out of memory" + (f", needed >= {floor / GIB:.1f}" if floor else "")
    else:
        shown = "-" if peak is None else f"{peak / GIB:.1f}"
    return (f"{r['case']}: passed={v.get('passed')} {mode} wall {r.get('wall_seconds')} s; peak "
            f"{shown} vs {(ppeak or 0) / GIB:.1f} GiB; tokens/s {'-' if tps is None else f'{tps:,.0f}'} vs "
            f"{ptps or 0:,.0f}; check exit {r['check']['exit']}")


if __name__ == "__main__":
    sys.exit(main())
