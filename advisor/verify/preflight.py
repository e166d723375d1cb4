"""Pre-flight: what must hold on this machine before anything launches, each with a clear verdict.

* Free disk for `--random-init`'s checkpoint (2 bytes per parameter, bf16 safetensors; the teacher's too for GKD),
  unless a complete one for this architecture is cached, plus OUTPUT_MARGIN_BYTES for logs and compile caches. A
  full disk used to end the run with a raw SafetensorError after minutes of work.
* GPU memory other processes hold on the GPUs the run uses: the run needs its predicted reserve plus a CUDA
  context on each; less than that fails, any sizeable amount is a warning (they also share the GPU's time).
* Host RAM for what the plan keeps there (offloaded states, pinned buffers, model loading), and the locked-memory
  limit (`ulimit -l`) for offload plans, whose pinned buffers it bounds (a warning, as rule MEM004 says).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from advisor.verify.limits import (
    CUDA_CONTEXT_BYTES,
    GIB,
    HOST_RAM_SPARE_FRACTION,
    OTHER_PROCESS_NOTE_BYTES,
    OUTPUT_MARGIN_BYTES,
    RANDOM_INIT_BYTES_PER_PARAM,
)
from advisor.verify.outcome import FAIL, PASS, StepResult, _gib

ARCH_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
             "num_key_value_heads")
"""model_config.json fields that identify an architecture: a cached checkpoint with the same ones is this model's
(train.py names its folder by a hash of the whole config and tokenizer, which verify does not rebuild)."""


@dataclass
class Preflight:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)

    def step(self) -> StepResult:
        if self.problems:
            return StepResult("preflight", FAIL, "; ".join(self.problems), "; ".join(self.hints) or None,
                              warnings=self.warnings)
        return StepResult("preflight", PASS, "; ".join(self.passed) or "nothing to check", warnings=self.warnings)


def _existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")


def cached_checkpoint(random_init_dir: Path, config_file: Path) -> Path | None:
    """A complete random-init checkpoint of this architecture in `random_init_dir` (train.py marks a finished one
    with a COMPLETE file), or None."""
    try:
        want = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not random_init_dir.is_dir() or not isinstance(want, dict):
        return None
    for folder in sorted(random_init_dir.iterdir()):
        if folder.is_symlink() or not folder.is_dir() or not (folder / "COMPLETE").is_file():
            continue
        try:
            have = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(have, dict) and all(have.get(k) == want.get(k) for k in ARCH_KEYS if k in want):
            return folder
    return None


def check_disk(pf: Preflight, *, random_init: bool, random_init_dir: Path, bundle: Path, params: int,
               teacher_params: int = 0, free_bytes=None) -> None:
    """Room for the checkpoint(s) --random-init writes and for the run's own files."""
    need = OUTPUT_MARGIN_BYTES
    what = [f"{_gib(OUTPUT_MARGIN_BYTES)} for logs and caches"]
    if random_init:
        cached = cached_checkpoint(random_init_dir, bundle / "model_config.json")
        if cached is None:
            ckpt = params * RANDOM_INIT_BYTES_PER_PARAM
            need += ckpt
            what.insert(0, f"{_gib(ckpt)} for the random-init checkpoint ({params / 1e9:.2f}B parameters x "
                           f"{RANDOM_INIT_BYTES_PER_PARAM} bytes)")
        else:
            pf.passed.append(f"random-init checkpoint cached ({cached.name})")
        if teacher_params:
            need += teacher_params * RANDOM_INIT_BYTES_PER_PARAM
            what.append(f"{_gib(teacher_params * RANDOM_INIT_BYTES_PER_PARAM)} for the teacher's")
    where = _existing(random_init_dir if random_init else bundle)
    try:
        free = free_bytes(where) if free_bytes else shutil.disk_usage(where).free
    except OSError as exc:
        pf.warnings.append(f"free disk at {where} unknown ({exc.strerror or exc})")
        return
    if free < need:
        pf.problems.append(f"{_gib(free)} free on {where}, the run needs {_gib(need)} ({', '.join(what)})")
        pf.hints.append("free disk space there, or pass --random-init-dir DIR (a train.py option) on a larger disk"
                        if random_init else "free disk space in the bundle's folder")
    else:
        pf.passed.append(f"disk {_gib(free)} free of {_gib(need)} needed")


def check_gpus(pf: Preflight, report, *, gpus_used: int, reserved_bytes: int | None) -> None:
    """Memory other processes hold on the GPUs the run will use, against the plan's predicted reserve."""
    gpus = list(getattr(report, "gpus", ()) or ())[:max(0, gpus_used)]
    worst = 0
    for g in gpus:
        other = g.other_process_bytes
        if other is None:
            other = g.memory_used_bytes
        if other is None:
            continue
        worst = max(worst, other)
        total = g.memory_total_bytes or 0
        need = (reserved_bytes or 0) + CUDA_CONTEXT_BYTES
        # only what the others hold is pre-flight's business: a plan that does not fit an empty GPU is the
        # estimate's (rule MEM001), and verify runs it to show what happens
        if reserved_bytes and total and other > OTHER_PROCESS_NOTE_BYTES and need <= total < need + other:
            pids = ", ".join(str(p.pid) for p in (g.processes or ())[:5])
            pf.problems.append(f"GPU {g.index}: other processes hold {_gib(other)}"
                               + (f" (pid {pids})" if pids else "")
                               + f"; the run needs {_gib(reserved_bytes)} reserved + {_gib(CUDA_CONTEXT_BYTES)} "
                                 f"context of {_gib(total)}")
            pf.hints.append("stop those processes or wait for them (nvidia-smi lists them)")
        elif other > OTHER_PROCESS_NOTE_BYTES:
            pf.warnings.append(f"GPU {g.index}: other processes hold {_gib(other)}: the run fits, but they share "
                               "the GPU's time (speed may read low)")
    if gpus and not any(p.startswith("GPU ") for p in pf.problems):
        pf.passed.append(f"{len(gpus)} GPU(s) free enough" + (f" (others hold up to {_gib(worst)})"
                                                               if worst > OTHER_PROCESS_NOTE_BYTES else ""))


def check_host(pf: Preflight, report, *, host_bytes: int | None, pinned_bytes: int | None, offload: bool) -> None:
    """Host RAM for what the plan keeps there, and the locked-memory limit for its pinned offload buffers."""
    host = getattr(report, "host", None)
    available = getattr(host, "ram_available_bytes", None)
    if host_bytes and available is not None:
        usable = int(available * HOST_RAM_SPARE_FRACTION)
        if host_bytes > usable:
            pf.problems.append(f"host RAM: the plan needs {_gib(host_bytes)} per node, {_gib(available)} is "
                               f"available ({_gib(usable)} usable, 10 % kept for the OS and page cache)")
            pf.hints.append("free host memory, or choose a plan that offloads less" if offload else
                            f"free host memory, or run on a node with at least {_gib(host_bytes / HOST_RAM_SPARE_FRACTION)} "
                            "of RAM available")
        else:
            pf.passed.append(f"host RAM {_gib(host_bytes)} of {_gib(available)} available")
    limit = getattr(host, "locked_memory_limit_bytes", None)
    if offload and pinned_bytes and limit is not None and pinned_bytes > limit:
        pf.warnings.append(f"locked-memory limit (ulimit -l) {_gib(limit)} is below the {_gib(pinned_bytes)} the "
                           "offload buffers pin: raise it (ulimit -l unlimited, or memlock in "
                           "/etc/security/limits.conf) or DeepSpeed may fail to pin them")


def run_preflight(report, *, bundle: Path, random_init: bool, random_init_dir: Path, params: int,
                  teacher_params: int, gpus_used: int, memory, offload: bool, free_bytes=None) -> StepResult:
    """Every pre-flight check (the module docstring), as one step."""
    pf = Preflight()
    check_disk(pf, random_init=random_init, random_init_dir=random_init_dir, bundle=bundle, params=params,
               teacher_params=teacher_params, free_bytes=free_bytes)
    check_gpus(pf, report, gpus_used=gpus_used,
               reserved_bytes=getattr(memory, "per_gpu_reserved_bytes", None))
    check_host(pf, report, host_bytes=getattr(memory, "host_bytes", None),
               pinned_bytes=getattr(memory, "pinned_bytes", None), offload=offload)
    return pf.step()


__all__ = ["GIB", "Preflight", "cached_checkpoint", "run_preflight"]
