"""The launcher context from environment variables: a SLURM allocation, a torchrun-style launch.

Values are parsed defensively: a malformed variable gives None and a note, never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from hw_probe.limits import MAX_GPUS, MAX_NODES
from hw_probe.model import ClusterInfo


def _first(environ: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    """(name, value) of the first variable that is set and not empty."""
    for name in names:
        value = environ.get(name)
        if value is not None and value.strip() and value.strip() != "(null)":
            return name, value.strip()
    return None


def _int(environ: Mapping[str, str], notes: list[str], *names: str, low: int = 0, high: int) -> int | None:
    """The first set variable as a whole number in [low, high]; anything else is None and a note (the report must
    load back with --hardware, which holds these fields to the same bounds: hw_probe.check_plausible)."""
    found = _first(environ, *names)
    if found is None:
        return None
    name, value = found
    shown = value if len(value) <= 40 else value[:40] + "..."
    if not re.fullmatch(r"\d{1,18}", value):
        notes.append(f"{name}={shown!r} is not a whole number; ignored")
        return None
    number = int(value)
    if not low <= number <= high:
        notes.append(f"{name}={number} is outside {low}-{high:,}; ignored")
        return None
    return number


def parse_gpu_count(value: str) -> int | None:
    """SLURM GPU counts: `8`, `h100:8`, `gpu:h100:8`, or several types `a100:2,v100:2` (summed).
    None when any part has no count."""
    total = 0
    for part in value.split(","):
        match = re.match(r"^(\d+)", part.strip().rsplit(":", 1)[-1])
        if not match:
            return None
        total += int(match.group(1))
    return total


def _gpus_per_node(environ: Mapping[str, str], notes: list[str]) -> int | None:
    found = _first(environ, "SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE")
    if found is None:
        return None
    name, value = found
    count = parse_gpu_count(value[:200])
    if count is None:
        notes.append(f"{name}={value[:40]!r} has no GPU count; ignored")
    elif count > MAX_GPUS:
        notes.append(f"{name} counts {count} GPUs, more than the {MAX_GPUS} one machine may list; ignored")
        return None
    return count


def read_cluster(environ: Mapping[str, str]) -> tuple[ClusterInfo, tuple[str, ...]]:
    """Returns (ClusterInfo, notes)."""
    notes: list[str] = []
    job = _first(environ, "SLURM_JOB_ID", "SLURM_JOBID")
    slurm = {}
    if job is not None:
        nodelist = _first(environ, "SLURM_JOB_NODELIST", "SLURM_NODELIST")
        slurm = dict(
            slurm=True,
            slurm_job_id=job[1],
            slurm_nodes=_int(environ, notes, "SLURM_NNODES", "SLURM_JOB_NUM_NODES", low=1, high=MAX_NODES),
            slurm_gpus_per_node=_gpus_per_node(environ, notes),
            slurm_node_rank=_int(environ, notes, "SLURM_NODEID", high=MAX_NODES - 1),
            slurm_nodelist=nodelist[1] if nodelist else None,
        )
    # torchrun (and `accelerate launch`, which runs it) sets these in every worker it starts.
    launched = any(_first(environ, name) for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"))
    torchrun = {}
    if launched:
        master = _first(environ, "MASTER_ADDR")
        torchrun = dict(
            torchrun=True,
            world_size=_int(environ, notes, "WORLD_SIZE", low=1, high=MAX_GPUS * MAX_NODES),
            local_world_size=_int(environ, notes, "LOCAL_WORLD_SIZE", low=1, high=MAX_GPUS),
            rank=_int(environ, notes, "RANK", high=MAX_GPUS * MAX_NODES - 1),
            master_addr=master[1] if master else None,
        )
    return ClusterInfo(**slurm, **torchrun), tuple(notes)
