"""python -m bench.run --out FILE.jsonl [--only NAME,...] [--split fit|holdout|all] [--budget-seconds N]
[--steps N] [--warmup N] ...

The parent process: imports the training stack once (never touching CUDA), then runs each matrix row in a forked
child (see bench.runner and bench.worker), printing one line per row and a table at the end. Rows already in the
output file (or in --resume-from files) are not run again, so a run cut short is continued by running the same
command again.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from typing import Any

from bench import matrix as M
from bench import runner as R
from bench.models import (
    arch_dict,
    complete_arch,
    installed_attention_packages,
    machine_attention,
    row_spec,
    spec_source,
)
from bench.worker import ckpt_keys, clear_build_locks, ds_ops_needed, visible_gpu_index

GIB = 1 << 30
DISTRIBUTIONS = ("torch", "transformers", "trl", "accelerate", "deepspeed", "peft", "liger-kernel", "bitsandbytes",
                 "datasets", "tokenizers", "triton", "nvidia-ml-py", "pydantic")
SPAWN_IMPORT_SECONDS = 15.0
"""A fresh interpreter importing the training stack (added to each row's estimate in spawn mode)."""


def host_cpu() -> dict[str, Any]:
    """The host CPU a row ran on: launch-bound steps (small models, GRPO/RLOO generation without vLLM) take its speed,
    and machines of one GPU kind differ in it (2026-12-01: the same GRPO rows 4-39 % apart on two H200 machines)."""
    out: dict[str, Any] = {"logical_cpus": os.cpu_count()}
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    out["model"] = line.split(":", 1)[1].strip()
                    break
    with contextlib.suppress(OSError, AttributeError):
        out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", help="JSONL file the records are appended to (created if missing)")
    p.add_argument("--only", help="comma-separated row names")
    p.add_argument("--split", choices=("fit", "holdout", "all"), default="all")
    p.add_argument("--backend", choices=("single", "deepspeed", "all"), default="all",
                   help="only the rows of this backend (two harnesses, one per GPU, then share no DeepSpeed op build)")
    p.add_argument("--budget-seconds", type=float, default=None,
                   help="start no row whose estimate would end past this many seconds after start")
    p.add_argument("--steps", type=int, default=3, help="measured optimizer steps per row (GRPO: at most 2)")
    p.add_argument("--warmup", type=int, default=1, help="optimizer steps run before the measured ones")
    p.add_argument("--generation-steps", type=int, default=None,
                   help="measured steps of every GRPO/RLOO row that names none of its own (a rerun of the "
                        "generating rows with more steps than the default 2: their consecutive steps spread 10-40 %%)")
    p.add_argument("--timeout-seconds", type=float, default=None,
                   help="per-row timeout (default: max(120, 4 x the row's estimate))")
    p.add_argument("--resume-from", action="append", default=[], metavar="FILE",
                   help="also treat rows recorded in this JSONL file as done (repeatable)")
    p.add_argument("--redo", default="", help="comma-separated statuses to run again (e.g. error,timeout)")
    p.add_argument("--order", choices=("cost", "coverage"), default="cost",
                   help="cost: cheapest rows first; coverage: the cheapest row of each trainer/method/backend first")
    p.add_argument("--rows-file", help="JSON list of rows to run instead of the built-in matrix")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                   help="cpu is for the harness's own tests (tiny models; memory fields are null)")
    p.add_argument("--runner", choices=("auto", "fork", "spawn"), default="auto",
                   help="auto: fork after a probe shows a forked child can use CUDA, else spawn")
    p.add_argument("--prebuild-ops", choices=("auto", "all", "off"), default="auto",
                   help="build DeepSpeed's JIT ops in the background while the first rows run (auto: those the "
                        "rows load; all: fused_adam and cpu_adam, for a later run on the same machine too)")
    p.add_argument("--ckpt-dir", help="where saved random checkpoints go (QLoRA, GRPO reference); default: a "
                                      "temporary folder in /dev/shm if it has room, else the temp dir")
    p.add_argument("--log", help="combined child log (default: OUT with .log instead of .jsonl)")
    p.add_argument("--list", action="store_true", help="print the selected rows and exit (imports nothing heavy)")
    a = p.parse_args(argv)
    if not a.list and not a.out:
        p.error("--out is required (unless --list)")
    if a.generation_steps is not None and a.generation_steps < 1:
        p.error("--generation-steps must be a positive integer")
    return a


# ---------------------------------------------------------------------------------------------------------------

def load_rows(a: argparse.Namespace) -> list[dict]:
    if a.rows_file:
        with open(a.rows_file) as f:
            rows = json.load(f)
        for r in rows:
            r.setdefault("split", "fit")
            r.setdefault("expect", "fit")
        problems = M.validate(rows)
        if problems:
            raise ValueError("invalid rows:\n  " + "\n  ".join(problems))
        for r in rows:
            if "arch" in r:
                r["arch"] = complete_arch(r["arch"])
            arch = r.get("arch")
            r.setdefault("est_peak_gib", round(M.estimate_peak_gib(r, arch), 1))
            r.setdefault("est_seconds", round(M.estimate_seconds(r, arch, warmup=a.warmup, steps=a.steps), 1))
    else:
        rows = M.build_matrix(warmup=a.warmup, steps=a.steps)
    only = [n.strip() for n in a.only.split(",") if n.strip()] if a.only else None
    rows = M.select(rows, only=only, split=a.split)
    if a.generation_steps:
        for r in rows:
            if r["trainer"] in M.GENERATING and not r.get("generation_steps"):
                r["generation_steps"] = a.generation_steps
                r["est_seconds"] = round(M.estimate_seconds(r, r.get("arch"), warmup=a.warmup, steps=a.steps), 1)
    if a.backend != "all":
        rows = [r for r in rows if r["backend"] == a.backend]
    rows = M.order_rows(rows, a.order) if not a.rows_file else rows
    resolve_attention(rows, a.device)
    return rows


def resolve_attention(rows: list[dict], device: str = "cuda") -> None:
    """Rows without an attention pin get the advisor's choice for this machine and device
    (bench.models.machine_attention), recorded in the row as run: `attn` and `attn_why`."""
    installed = None
    for r in rows:
        if r.get("attn") in (None, "auto"):
            installed = installed_attention_packages() if installed is None else installed
            r["attn"], r["attn_why"] = machine_attention(r, row_spec(r), installed, device=device)


def print_rows(rows: list[dict]) -> None:
    total = 0.0
    print(f"{'name':72s} {'split':7s} {'expect':6s} {'attn':6s} {'est GiB':>8s} {'est s':>6s} {'cum s':>7s}")
    for r in rows:
        total += r["est_seconds"]
        print(f"{r['name']:72s} {r['split']:7s} {r.get('expect', ''):6s} {str(r.get('attn'))[:6]:6s} "
              f"{r['est_peak_gib']:8.1f} {r['est_seconds']:6.1f} {total:7.0f}")
    print(f"{len(rows)} rows, {sum(r['split'] == 'holdout' for r in rows)} holdout, about {total / 60:.1f} min "
          "(planning guess)")


def setup_env(device: str) -> None:
    """Environment every child inherits. Set before torch is imported."""
    env = {
        # torch.cuda.is_available()/device_count() through NVML, so importing libraries that ask does not
        # initialise the CUDA driver in the parent (a forked child could then not use CUDA)
        "PYTORCH_NVML_BASED_CUDA_CHECK": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    }
    if device == "cuda":
        env["DS_ACCELERATOR"] = "cuda"  # skip DeepSpeed's accelerator probing
    for k, v in env.items():
        os.environ.setdefault(k, v)


def gpu_query() -> dict[str, Any]:
    """One nvidia-smi call (no CUDA, no NVML in this process): name, driver, memory, compute capability."""
    fields = "name,driver_version,memory.total,memory.used,compute_cap"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    if not lines:
        return {}
    index = min(visible_gpu_index(), len(lines) - 1)
    parts = [x.strip() for x in lines[index].split(",")]
    info: dict[str, Any] = {"gpu_count": len(lines), "nvml_index": index}
    with contextlib.suppress(IndexError, ValueError):
        info.update(name=parts[0], driver=parts[1], memory_total_bytes=int(float(parts[2])) << 20,
                    memory_used_bytes=int(float(parts[3])) << 20, compute_cap=parts[4])
    return info


def gpu_used_bytes() -> int | None:
    """Used memory of the GPU the rows run on. Through NVML when DeepSpeed's import already initialised it in this process (no new
    state to hand to the children, and milliseconds instead of an nvidia-smi run), else through nvidia-smi."""
    nvml = sys.modules.get("pynvml")
    if nvml is not None:
        with contextlib.suppress(Exception):
            return int(nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(visible_gpu_index())).used)
    return gpu_query().get("memory_used_bytes")


# Import units in order. A unit lists the modules it imports and the units that import it (skipping a unit must
# skip those too, or they would import it anyway).
IMPORT_UNITS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("transformers", ("transformers", "datasets", "tokenizers", "accelerate",
                      "transformers.models.qwen2.modeling_qwen2", "transformers.models.llama.modeling_llama",
                      "transformers.integrations.deepspeed"), ()),
    ("deepspeed", ("deepspeed", "deepspeed.ops.op_builder"), ()),
    ("liger", ("liger_kernel.transformers",), ()),
    ("bitsandbytes", ("bitsandbytes",), ("peft", "trl")),
    ("peft", ("peft",), ("trl",)),
    ("trl", ("trl", "trl.trainer.sft_trainer", "trl.trainer.dpo_trainer", "trl.trainer.grpo_trainer"), ()),
)
SKIP_ENV = "BENCH_PREIMPORT_SKIP"
T0_ENV = "BENCH_T0"
REEXEC_ENV = "BENCH_REEXECS"
MAX_REEXEC = 2


def units_to_skip(culprit: str) -> set[str]:
    for name, _, dependents in IMPORT_UNITS:
        if name == culprit:
            return {name, *dependents}
    return {culprit}


def preimport(rows: list[dict], device: str, capability: str | None,
              skip: set[str] | frozenset = frozenset()) -> dict[str, Any]:
    """Import the training stack once, in the parent, without creating a CUDA context.

    bitsandbytes (imported by peft) asks torch.cuda.get_device_capability() at import, which would create one; on a
    GPU that call is answered from nvidia-smi's compute capability while the import runs (without a known
    capability, bitsandbytes, peft and trl are left to the children). Should any unit still initialise CUDA, the
    record names it (`initialized_by`) so the caller can start again without it.
    """
    t0 = time.monotonic()
    import torch

    wanted = {"transformers", "bitsandbytes", "peft", "trl"}
    if any(r["backend"] == "deepspeed" for r in rows):
        wanted.add("deepspeed")
    if any(r["liger"] for r in rows):
        wanted.add("liger")
    cap = None
    if device == "cuda" and capability:
        with contextlib.suppress(ValueError):
            cap = tuple(int(x) for x in capability.split(".")[:2])
    skip = set(skip)
    if device == "cuda" and cap is None:
        skip |= units_to_skip("bitsandbytes")
    imported, failed, initialized_by = [], {}, None
    orig = torch.cuda.get_device_capability
    if cap is not None:
        torch.cuda.get_device_capability = lambda device=None: cap
    try:
        for unit, modules, _ in IMPORT_UNITS:
            if unit not in wanted or unit in skip:
                continue
            for m in modules:
                try:
                    importlib.import_module(m)
                    imported.append(m)
                except Exception as exc:  # the child imports (and fails) again, with the full error in its record
                    failed[m] = f"{type(exc).__name__}: {exc}"
            if initialized_by is None and torch.cuda.is_initialized():
                initialized_by = unit
    finally:
        torch.cuda.get_device_capability = orig
    with contextlib.suppress(Exception):
        import datasets

        datasets.disable_progress_bars()
    return {"seconds": round(time.monotonic() - t0, 2), "modules": imported, "failed": failed,
            "skipped_units": sorted(skip), "initialized_by": initialized_by,
            "cuda_initialized_in_parent": bool(torch.cuda.is_initialized())}


def _probe_child(row: dict, ctx: dict) -> dict:
    import torch

    from bench.worker import _nvml_handle, _nvml_used

    x = torch.ones(1 << 20, device="cuda")
    torch.cuda.synchronize()
    # NVML was initialised in the parent by imports (DeepSpeed, torch's NVML check): it must still answer here
    return {"status": "ok", "sum": float(x.sum().item()), "nvml_used_bytes": _nvml_used(_nvml_handle())}


def fork_probe(workdir: str) -> tuple[bool, str]:
    """Does a child forked from this parent get a working CUDA context?"""
    opts = R.RunOptions(out_path=os.devnull, mode="fork", workdir=workdir)
    rec = R.run_one({"name": "fork-probe"}, _probe_child, opts, workdir, timeout=60)
    ok = rec.get("status") == "ok" and rec.get("sum") == float(1 << 20)
    if ok:
        detail = f"ok in {rec['wall_seconds']:.1f} s, NVML in child: {rec.get('nvml_used_bytes') is not None}"
    else:
        detail = f"{rec.get('error')} | {' / '.join(rec.get('log_tail', [])[-3:])}"
    return ok, detail


def versions() -> dict[str, str | None]:
    out = {}
    for d in DISTRIBUTIONS:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = None
    return out


def pick_ckpt_root(explicit: str | None, rows: list[dict]) -> str:
    if explicit:
        os.makedirs(explicit, exist_ok=True)
        return tempfile.mkdtemp(prefix="trl-advisor-bench-ckpt-", dir=explicit)
    need = 4 * GIB
    for r in rows:
        for k in ckpt_keys(r):
            need += (4 if k.endswith("fp32") else 2) * r["arch"]["params"]
    for root in ("/dev/shm", tempfile.gettempdir()):
        try:
            if os.path.isdir(root) and shutil.disk_usage(root).free > need:
                return tempfile.mkdtemp(prefix="trl-advisor-bench-ckpt-", dir=root)
        except OSError:
            continue
    return tempfile.mkdtemp(prefix="trl-advisor-bench-ckpt-")


def fmt_gib(x: Any) -> str:
    return f"{x / GIB:6.1f}" if isinstance(x, int | float) and x else "     -"


def result_line(rec: dict) -> str:
    mem = rec.get("memory") or {}
    t = rec.get("timing") or {}
    step = t.get("median_step_seconds")
    step_s = f"{step:7.3f}" if isinstance(step, int | float) else "      -"
    extra = ""
    if rec.get("status") != "ok" and rec.get("error"):
        extra = "  " + str(rec["error"])[:120]
    return (f"{rec['name']:72s} {rec.get('status', '?'):7s} peak {fmt_gib(mem.get('peak_allocated_bytes'))} GiB "
            f"step {step_s} s  wall {rec.get('wall_seconds', 0):5.0f} s{extra}")


def summary_table(summary: R.Summary) -> str:
    lines = [f"{'name':72s} {'status':7s} {'alloc':>6s} {'resv':>6s} {'nvml':>6s} {'step s':>7s} {'tok/s':>8s} "
             f"{'wall':>5s}"]
    for rec in summary.results:
        mem, t = rec.get("memory") or {}, rec.get("timing") or {}
        step = t.get("median_step_seconds")
        tps = t.get("tokens_per_second")
        lines.append(f"{rec['name']:72s} {rec.get('status', '?'):7s} {fmt_gib(mem.get('peak_allocated_bytes'))} "
                     f"{fmt_gib(mem.get('peak_reserved_bytes'))} {fmt_gib(mem.get('nvml_used_peak_bytes'))} "
                     f"{(f'{step:7.3f}' if step else '      -')} {(f'{tps:8.0f}' if tps else '       -')} "
                     f"{rec.get('wall_seconds', 0):5.0f}")
    counts: dict[str, int] = {}
    for rec in summary.results:
        counts[rec.get("status", "?")] = counts.get(rec.get("status", "?"), 0) + 1
    lines.append("ran: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
                 f"; already done: {len(summary.resumed)}; skipped for the budget: {len(summary.skipped)}")
    if summary.skipped:
        lines.append("skipped: " + ", ".join(summary.skipped))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    t_start = time.monotonic()
    if os.environ.get(T0_ENV):  # re-executed (see below): the budget counts from the first start
        with contextlib.suppress(ValueError):
            t_start -= max(0.0, time.time() - float(os.environ[T0_ENV]))
    else:
        os.environ[T0_ENV] = repr(time.time())
    a = parse_args(argv)
    try:
        rows = load_rows(a)
    except (KeyError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = M.validate(rows)
    if problems:
        print("error: invalid rows:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    for r in rows:
        # the architecture the child builds and the advisor predicts: inline or catalogue, at the row's `layers`
        r["arch"] = arch_dict(row_spec(r))
    if a.list:
        if a.out or a.resume_from:
            done = R.done_names([a.out, *a.resume_from], [s for s in a.redo.split(",") if s])
            rows = [r for r in rows if r["name"] not in done]
        M.discount_shared_checkpoints(rows)
        print_rows(rows)
        return 0

    done = R.done_names([a.out, *a.resume_from], [s for s in a.redo.split(",") if s])
    todo = [r for r in rows if r["name"] not in done]
    if not todo:
        print(f"all {len(rows)} selected rows are already recorded in {a.out}; nothing to run")
        return 0
    cuda = a.device == "cuda"
    setup_env(a.device)
    gpu = gpu_query() if cuda else {}
    if cuda and gpu.get("compute_cap"):
        # DeepSpeed's JIT builds read this instead of asking the GPU (which would need a CUDA context); the
        # background build and every row then compile with identical flags and share one build
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", gpu["compute_cap"])
    arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if arch and re.search(r"\d[a-z]", arch):
        # Rule DS012: DeepSpeed 0.19.8's op builder cannot parse arch suffixes ("9.0a"): on 2026-11-29 every
        # DeepSpeed row of the first H200 run failed building FusedAdam because the machine's image set 9.0a.
        os.environ["TORCH_CUDA_ARCH_LIST"] = re.sub(r"(\d)[a-z]+", r"\1", arch)
        print(f"TORCH_CUDA_ARCH_LIST {arch!r} -> {os.environ['TORCH_CUDA_ARCH_LIST']!r} (rule DS012)")
    out_dir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(out_dir, exist_ok=True)
    log_path = a.log or (a.out[:-6] if a.out.endswith(".jsonl") else a.out) + ".log"
    workdir = tempfile.mkdtemp(prefix="trl-advisor-bench-")

    skip = {u for u in os.environ.get(SKIP_ENV, "").split(",") if u}
    imp = preimport(todo, a.device, gpu.get("compute_cap"), skip)
    print(f"imports: {imp['seconds']} s ({len(imp['modules'])} modules"
          f"{', failed: ' + ', '.join(imp['failed']) if imp['failed'] else ''}"
          f"{', left to the children: ' + ', '.join(imp['skipped_units']) if imp['skipped_units'] else ''})",
          flush=True)
    reexecs = int(os.environ.get(REEXEC_ENV, "0") or 0)
    if cuda and imp["initialized_by"] and a.runner in ("auto", "fork") and reexecs < MAX_REEXEC:
        # an import created a CUDA context here, so forked children could not use the GPU: start this program
        # again without that import (the children import it themselves), keeping the budget's start time
        os.environ[SKIP_ENV] = ",".join(sorted(skip | units_to_skip(imp["initialized_by"])))
        os.environ[REEXEC_ENV] = str(reexecs + 1)
        print(f"importing {imp['initialized_by']} initialised CUDA; restarting without it", flush=True)
        shutil.rmtree(workdir, ignore_errors=True)
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-m", "bench.run", *argv])

    mode, probe = a.runner, None
    if a.runner in ("auto", "fork") and cuda:
        if imp["cuda_initialized_in_parent"]:
            ok, probe = False, "CUDA was initialised in the parent by an import"
        else:
            ok, probe = fork_probe(workdir)
        if not ok and a.runner == "fork":
            print(f"error: forked children cannot use CUDA here ({probe}); use --runner spawn", file=sys.stderr)
            return 1
        mode = "fork" if ok else "spawn"
        print(f"runner: {mode} (fork probe: {probe})", flush=True)
    elif a.runner == "auto":
        mode = "fork"

    ckpt_root = pick_ckpt_root(a.ckpt_dir, todo)
    users: dict[str, int] = {}  # rows still to run that read each checkpoint
    for r in todo:
        for k in ckpt_keys(r):
            users[k] = users.get(k, 0) + 1

    bg = None
    ops = sorted({op for r in todo for op in ds_ops_needed(r)})
    if a.prebuild_ops == "all":
        ops = ["cpu_adam", "fused_adam"]
    if ops and cuda and a.prebuild_ops in ("auto", "all"):
        def build() -> None:
            os.environ["MAX_JOBS"] = "4"  # leave cores to the rows running meanwhile
            from bench.worker import prebuild_ops

            prebuild_ops(ops)

        stale = clear_build_locks(ops)
        if stale:
            print(f"removed stale build locks: {', '.join(stale)}", flush=True)
        bg_log = os.path.join(workdir, "prebuild.log")
        if mode == "fork":
            bg = R.Background(build, bg_log)
        else:
            code = ("import os; os.environ['MAX_JOBS']='4'; from bench.worker import prebuild_ops; "
                    f"prebuild_ops({ops!r})")
            bg = R.Background([sys.executable, "-c", code], bg_log)
        print(f"building DeepSpeed ops in the background: {', '.join(ops)}", flush=True)

    env = {"versions": versions(), "python": sys.version.split()[0], "gpu": gpu, "runner": mode,
           "fork_probe": probe, "preimport": imp, "spec_source": spec_source(), "device": a.device,
           "steps": a.steps, "warmup": a.warmup,
           "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
           "TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST"), "host_cpu": host_cpu(),
           # a JIT build beside the rows competes for the CPU that launch-bound rows (GRPO generation) depend on
           "background_build": ops if bg is not None else None}
    with contextlib.suppress(Exception):
        import torch

        env["torch_cuda"] = torch.version.cuda
    baseline_used = gpu.get("memory_used_bytes")

    def before_row(row: dict) -> dict:
        extra: dict[str, Any] = {}
        if bg is not None:
            extra["ops_prebuild_running"] = not bg.done()
            if ds_ops_needed(row) and not bg.done():
                left = None if a.budget_seconds is None else a.budget_seconds - (time.monotonic() - t_start)
                t0 = time.monotonic()
                bg.wait(left)
                extra["ops_prebuild_wait_seconds"] = round(time.monotonic() - t0, 1)
                extra["ops_prebuild_running"] = not bg.done()
            if bg.done():
                extra["ops_prebuild"] = {"ops": ops, "seconds": bg.seconds, "returncode": bg.returncode}
        if cuda and baseline_used is not None:
            # the previous child's memory is returned when its process is reaped; wait until NVML agrees
            used, t0 = gpu_used_bytes(), time.monotonic()
            while used is not None and used > baseline_used + GIB and time.monotonic() - t0 < 20:
                time.sleep(0.5)
                used = gpu_used_bytes()
            extra["gpu_used_before_bytes"] = used
        return extra

    def after_row(row: dict, rec: dict) -> None:
        if rec.get("status") == "timeout" and ds_ops_needed(row) and (bg is None or bg.done()):
            clear_build_locks(ds_ops_needed(row))  # in case the row was killed while building an op
        for k in ckpt_keys(row):  # free /dev/shm (host memory) as soon as no later row needs the checkpoint
            users[k] -= 1
            if users[k] == 0:
                shutil.rmtree(os.path.join(ckpt_root, k), ignore_errors=True)

    counter = {"i": 0}

    def on_result(rec: dict) -> None:
        counter["i"] += 1
        print(f"[{counter['i']:2d}/{len(todo)} {time.monotonic() - t_start:5.0f}s] {result_line(rec)}", flush=True)

    def timeout_for(row: dict) -> float:
        if a.timeout_seconds:
            return a.timeout_seconds
        return max(120.0, 4.0 * row["est_seconds"])

    spawn_extra = SPAWN_IMPORT_SECONDS if mode == "spawn" else 0.0

    def est_for(row: dict) -> float:
        """The row's planning guess; without the checkpoint save when an earlier row already saved it."""
        est = float(row["est_seconds"]) + spawn_extra
        keys = ckpt_keys(row)
        if keys and all(os.path.exists(os.path.join(ckpt_root, k, ".complete")) for k in keys):
            est = max(1.0, est - M.checkpoint_save_seconds(row, row.get("arch")))
        return est

    opts = R.RunOptions(
        out_path=a.out, mode=mode, budget_seconds=a.budget_seconds, timeout_seconds=timeout_for,
        est_seconds=est_for, log_path=log_path,
        resume_from=tuple(a.resume_from), redo_statuses=tuple(s for s in a.redo.split(",") if s),
        ctx={"device": a.device, "steps": a.steps, "warmup": a.warmup, "ckpt_dir": ckpt_root},
        before_row=before_row, after_row=after_row, on_result=on_result, start_time=t_start, workdir=workdir,
        env=env, record_row=lambda r: {k: v for k, v in r.items()},
        # rows that load DeepSpeed's ops wait for the background build, while other rows run
        ready=lambda r: bg is None or not ds_ops_needed(r) or bg.done(),
    )

    def on_signal(signum, frame):  # end our children (by their process groups) before leaving
        R.kill_live()
        raise SystemExit(128 + signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    child = run_config_callable() if mode == "fork" else "bench.worker:run_config"
    print(f"{len(todo)} to run, {len(rows) - len(todo)} already done; budget "
          f"{a.budget_seconds or 'none'} s; output {a.out}", flush=True)
    try:
        summary = R.run_rows(rows, child, opts)
    finally:
        if bg is not None:
            if not bg.done():
                print("stopping the unfinished DeepSpeed op build", flush=True)
            bg.kill()
            with open(log_path, "a") as f:
                f.write(f"===== DeepSpeed op build ({', '.join(ops)}) returncode={bg.returncode} "
                        f"seconds={bg.seconds} =====\n")
                f.write("\n".join(R.tail(bg.log_path, 100)) + "\n")
        R.kill_live()
        for s, h in old.items():
            signal.signal(s, h)
        shutil.rmtree(ckpt_root, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(summary_table(summary))
    print(f"total {time.monotonic() - t_start:.0f} s; records in {a.out}; child logs in {log_path}")
    return 0


def run_config_callable():
    from bench.worker import run_config

    return run_config


if __name__ == "__main__":
    sys.exit(main())
