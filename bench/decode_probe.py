"""Where the time of transformers' `generate` goes when TRL generates without vLLM (GRPO/RLOO), on one GPU.

    python -m bench.decode_probe --out bench/results/decode-probe-h200-DATE.json [--models qwen2.5-0.5b,qwen2.5-3b]

For each model (random weights from the catalogue's architecture, bf16, SDPA) and each prompt length x batch, it
times `generate` as GRPOTrainer calls it (bench.worker's generation kwargs: sampling, top_k 50, min_new_tokens =
max_new_tokens, remove_invalid_values, equal-length prompts so the attention mask is all ones) at two completion
lengths: the difference over the extra tokens is the cost of one decode step, the rest is the call's fixed cost and
the prefill. One call per case also runs under torch.profiler: the GPU kernels' summed time and count per decode step
tell whether a step waits on the GPU or on the host CPU's dispatch. The host's own speed is recorded beside it
(tiny-op dispatch under no_grad and with autograd, a pure-Python loop), so records of different machines can be put
side by side. Results are data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from typing import Any

from bench.host_probe import device as _device
from bench.host_probe import host_probe
from bench.host_probe import sync as _sync
from bench.rows_file import check_models, new_output_problem, probe_header, save_json

DEFAULT_MODELS = ("qwen2.5-0.5b", "qwen2.5-3b")
PROMPTS = (128, 1024, 2048)
BATCHES = (8, 32)
SHORT, LONG = 8, 40
"""Completion lengths timed per case: (t(LONG) - t(SHORT)) / (LONG - SHORT) is one decode step."""
REPEATS = 3


def _profile(torch, call) -> dict[str, float]:
    """Summed GPU kernel time and kernel count of one call (torch.profiler), plus its wall time."""
    from torch.profiler import ProfilerActivity, profile

    _sync(torch)
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        _sync(torch)
    wall = time.perf_counter() - t0
    gpu_us, kernels = 0.0, 0
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            gpu_us += float(e.time_range.elapsed_us())
            kernels += 1
    return {"wall_s": round(wall, 4), "gpu_kernel_s": round(gpu_us / 1e6, 4), "kernels": kernels}


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The bundles' LoRA (train.py: r 16, alpha 32, dropout 0.05, these modules): what a LoRA GRPO/RLOO run generates
through, its adapters unmerged, in train mode (RLOOTrainer/GRPOTrainer's transformers path never calls eval(), so
the adapters' dropout runs in every decode step)."""


def with_lora(model):
    """The model wrapped as the bundles' LoRA run wraps it (peft get_peft_model), in train mode."""
    from peft import LoraConfig, get_peft_model

    wrapped = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=list(LORA_TARGETS),
                                               task_type="CAUSAL_LM"))
    wrapped.train()
    return wrapped


def fsdp2_wrap(torch, model) -> int:
    """Shard the model as a bundle's accelerate.yaml does (TRANSFORMER_BASED_WRAP: each decoder layer, then the
    root; reshard after forward) in a one-process group, and return how many modules FSDP2 now wraps: at every decode
    step of generate each of them unshards (all-gather, copy-out) before its forward and frees after it."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29561")
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=0, world_size=1)
    layers = model.get_decoder().layers
    for layer in layers:
        fully_shard(layer, reshard_after_forward=True)
    fully_shard(model, reshard_after_forward=True)
    return len(layers) + 1


def probe_model(torch, model_id: str, prompts, batches, rows: list[dict[str, Any]], save,
                arch: dict[str, Any] | None = None, padded: bool = False, lora: bool = False,
                fsdp2: bool = False) -> None:
    """Append one record per (batch, prompt) case to `rows`, calling `save` after each. `arch`: an architecture
    dict instead of the catalogue's row for `model_id` (the harness's own tests use a tiny one). `padded`: every other
    prompt is left-padded by one token (its attention mask starts with a 0), as GRPO/RLOO batches of prompts of
    different lengths are, so that generate builds an attention mask at every step."""
    from bench.models import arch_dict, complete_arch, random_causal_lm, resolve
    from bench.worker import GRPO_TOP_K, special_ids

    arch = complete_arch(arch) if arch is not None else arch_dict(resolve(model_id))
    ids = special_ids(arch["vocab"])
    model = random_causal_lm(torch, arch, ids, _device(torch))
    if lora:
        model = with_lora(model)
    wrapped = fsdp2_wrap(torch, model) if fsdp2 else 0
    for g in batches:
        for p in prompts:
            inp = torch.randint(0, ids["unk"], (g, p), device=_device(torch))
            mask = torch.ones_like(inp)
            if padded:
                mask[::2, 0] = 0

            def call(n, inp=inp, mask=mask):
                with torch.no_grad():
                    return model.generate(input_ids=inp, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                                          do_sample=True, top_k=GRPO_TOP_K, top_p=1.0, temperature=1.0,
                                          remove_invalid_values=True, pad_token_id=ids["pad"],
                                          eos_token_id=ids["eos"])

            def timed(n, p=p):
                _sync(torch)
                t0 = time.perf_counter()
                out = call(n)
                _sync(torch)
                assert out.shape[1] == p + n, out.shape
                return time.perf_counter() - t0

            timed(LONG)  # warm-up: the allocator's segments for this shape, cuBLAS handles
            short = statistics.median(timed(SHORT) for _ in range(REPEATS))
            long = statistics.median(timed(LONG) for _ in range(REPEATS))
            step = (long - short) / (LONG - SHORT)
            prof_short = _profile(torch, lambda: call(SHORT))
            prof_long = _profile(torch, lambda: call(LONG))
            n = LONG - SHORT
            rows.append({
                "host": host_probe(torch),  # the host's dispatch speed next to each case: does it drift?
                "model": model_id, "layers": arch["layers"], "batch": g, "prompt": p, "padded": padded, "lora": lora,
                "fsdp2_modules": wrapped,
                "seconds_short": round(short, 4), "seconds_long": round(long, 4),
                "decode_step_ms": round(step * 1e3, 3),
                "fixed_and_prefill_s": round(short - SHORT * step, 4),
                "gpu_decode_step_ms": round((prof_long["gpu_kernel_s"] - prof_short["gpu_kernel_s"]) / n * 1e3, 3),
                "kernels_per_decode_step": round((prof_long["kernels"] - prof_short["kernels"]) / n, 1),
                "profiled": {"short": prof_short, "long": prof_long},
            })
            print(json.dumps(rows[-1]), flush=True)
            save()


def fsdp2_module_seconds(result: dict[str, Any], reference_op_seconds: float) -> float | None:
    """Host seconds FSDP2 adds per wrapped module and decode step, at the reference host: over every case measured
    both plain and wrapped (same model, batch, prompt), (wrapped - plain decode step) / wrapped modules, scaled by
    reference / the case's own 1-element no_grad op time (the hooks are host work, as the dispatch they join);
    the median of the cases. None without a pair."""
    plain = {(r["model"], r["batch"], r["prompt"], r["padded"], r["lora"]): r for r in result["rows"]
             if not r.get("fsdp2_modules")}
    per_module = []
    for r in result["rows"]:
        base = plain.get((r["model"], r["batch"], r["prompt"], r["padded"], r["lora"]))
        if r.get("fsdp2_modules") and base is not None:
            op = (r["host"]["nograd_op_us"] + base["host"]["nograd_op_us"]) / 2 * 1e-6
            extra = (r["decode_step_ms"] - base["decode_step_ms"]) * 1e-3 / r["fsdp2_modules"]
            per_module.append(extra * reference_op_seconds / op)
    return statistics.median(per_module) if per_module else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.decode_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated catalogue ids")
    ap.add_argument("--prompts", default=",".join(map(str, PROMPTS)), help="prompt lengths, tokens")
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)), help="sequences generated at once")
    ap.add_argument("--padded", choices=("no", "yes", "both"), default="no",
                    help="left-pad every other prompt by one token (GRPO/RLOO's padded batches); both: each case twice")
    ap.add_argument("--fsdp2", choices=("no", "yes", "both"), default="no",
                    help="generate through a model FSDP2 wraps as the bundles do (each decoder layer and the root, one "
                         "process); both: each case without, then with")
    ap.add_argument("--lora", choices=("no", "yes", "both"), default="no",
                    help="generate through the bundles' unmerged LoRA adapters in train mode (LORA_TARGETS); both: "
                         "each case without and with")
    a = ap.parse_args(argv)
    problem = new_output_problem(a.out)
    if problem:
        ap.error(problem)
    try:
        prompts = [int(x) for x in a.prompts.split(",")]
        batches = [int(x) for x in a.batches.split(",")]
    except ValueError:
        ap.error("--prompts and --batches take comma-separated integers, e.g. --prompts 128,2048")
    if min(prompts + batches) < 1:
        ap.error("--prompts and --batches must be positive")
    check_models(ap, "--models", [m.strip() for m in a.models.split(",")])
    import torch

    result: dict[str, Any] = {
        **probe_header("bench.decode_probe", argv),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "host_cpu": platform.processor() or platform.machine(),
        "logical_cpus": os.cpu_count(), "load_average": list(os.getloadavg()),
        "short_long": [SHORT, LONG], "repeats": REPEATS,
        "host": host_probe(torch), "rows": [],
    }
    with open("/proc/cpuinfo") as f:
        names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
    result["host_cpu"] = names[0] if names else result["host_cpu"]
    print(json.dumps(result["host"]), flush=True)

    def save() -> None:
        # after every case: a run cut short by its time limit keeps what it measured
        save_json(a.out, result)

    for m in a.models.split(","):
        for padded in {"no": (False,), "yes": (True,), "both": (False, True)}[a.padded]:
            for lora in {"no": (False,), "yes": (True,), "both": (False, True)}[a.lora]:
                for fsdp2 in {"no": (False,), "yes": (True,), "both": (False, True)}[a.fsdp2]:
                    probe_model(torch, m.strip(), prompts, batches, result["rows"], save, padded=padded, lora=lora,
                                fsdp2=fsdp2)
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()  # the model is gone with probe_model's frame
    result["host_after"] = host_probe(torch)
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
