"""The host around the GPUs: RAM, CPU cores, NUMA, locked-memory limit, /dev/shm and free disk.

Linux paths (/proc, /sys, /dev/shm) are read under `root` so that tests can point at a made-up tree. What
cannot be read is None plus a note; nothing here raises.
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from hw_probe.model import HostInfo

# cgroup v1 writes "no limit" as the largest page-aligned signed 64-bit number (9223372036854771712 on 4 KiB
# pages); anything above 2**60 bytes is that.
_CGROUP_NO_LIMIT = 1 << 60


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _meminfo(root: Path) -> dict[str, int]:
    """/proc/meminfo fields in bytes (the file says kB, meaning KiB)."""
    text = _read(root / "proc/meminfo") or ""
    values = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if match:
            values[match.group(1)] = int(match.group(2)) * 1024
    return values


def _cgroup_memory(root: Path) -> tuple[int | None, int | None]:
    """(limit, usage) in bytes of this process's memory cgroup (v2, then v1); None where unlimited/unknown."""
    for limit_file, usage_file in (("sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory.current"),
                                   ("sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "sys/fs/cgroup/memory/memory.usage_in_bytes")):
        raw = _read(root / limit_file)
        if raw is None:
            continue
        raw = raw.strip()
        if raw == "max" or not raw.isdigit() or int(raw) >= _CGROUP_NO_LIMIT:
            return None, None
        usage = (_read(root / usage_file) or "").strip()
        return int(raw), int(usage) if usage.isdigit() else None
    return None, None


def _cgroup_cpus(root: Path) -> float | None:
    """CPUs allowed by a cgroup v2 quota (`cpu.max` "200000 100000" = 2 CPUs); None without a quota."""
    raw = (_read(root / "sys/fs/cgroup/cpu.max") or "").split()
    if len(raw) == 2 and raw[0].isdigit() and raw[1].isdigit() and int(raw[1]) > 0:
        return int(raw[0]) / int(raw[1])
    return None


def _memlock_limit(notes: list[str]) -> int | None:
    try:
        import resource  # Unix only
    except ImportError:
        notes.append("locked-memory limit unavailable on this platform")
        return None
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (OSError, ValueError, AttributeError) as exc:
        notes.append(f"locked-memory limit unavailable ({exc})")
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


def _nearest_existing(path: Path) -> Path:
    """The output folder, or the closest parent that exists yet (it is created later)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or ".")


def read_host(output_dir: str = ".", *, root: str = "/",
              cpu_affinity: Callable[[], int | None] | None = None) -> tuple[HostInfo, tuple[str, ...]]:
    """Read the host. Returns (HostInfo, notes)."""
    notes: list[str] = []
    base = Path(root)

    meminfo = _meminfo(base)
    ram_total = meminfo.get("MemTotal")
    ram_available = meminfo.get("MemAvailable")
    if ram_total is None:
        notes.append("host RAM unavailable (no /proc/meminfo)")
    limit, usage = _cgroup_memory(base)
    if limit is not None and (ram_total is None or limit < ram_total):
        # A container sees the host's /proc/meminfo; its own limit is what CPU offload can actually use.
        shown = "unknown" if ram_total is None else f"{ram_total / (1 << 30):.1f} GiB"
        notes.append(f"container memory limit {limit / (1 << 30):.1f} GiB is below host RAM ({shown}); "
                     "host RAM reports the limit")
        ram_total = limit
        if usage is not None:
            room = max(limit - usage, 0)
            ram_available = room if ram_available is None else min(ram_available, room)

    cores = (cpu_affinity or _affinity)()
    quota = _cgroup_cpus(base)
    if quota is not None and cores is not None and math.ceil(quota) < cores:
        notes.append(f"CPU quota allows {quota:g} CPUs of the {cores} this process may run on")
        cores = max(1, math.ceil(quota))
    if cores is None:
        notes.append("CPU core count unavailable")

    node_dir = base / "sys/devices/system/node"
    numa = None
    if node_dir.is_dir():
        numa = sum(1 for p in node_dir.iterdir() if re.fullmatch(r"node\d+", p.name)) or None
    if numa is None:
        notes.append("NUMA node count unavailable (no /sys/devices/system/node)")

    memlock = _memlock_limit(notes)

    shm = None
    try:
        stats = os.statvfs(base / "dev/shm")
        shm = stats.f_blocks * stats.f_frsize
    except (OSError, AttributeError):
        notes.append("/dev/shm size unavailable")

    out = Path(os.path.abspath(output_dir))
    disk_free = None
    try:
        disk_free = shutil.disk_usage(_nearest_existing(out)).free
    except OSError as exc:
        notes.append(f"free disk space of {out} unavailable ({exc.strerror or exc})")

    info = HostInfo(
        ram_total_bytes=ram_total,
        ram_available_bytes=ram_available,
        cpu_cores=cores,
        numa_nodes=numa,
        locked_memory_limit_bytes=memlock,
        shm_bytes=shm,
        disk_free_bytes=disk_free,
        output_dir=str(out),
    )
    return info, tuple(notes)


def _affinity() -> int | None:
    """Cores this process may run on (taskset, SLURM and containers narrow it), else all logical CPUs."""
    try:
        return len(os.sched_getaffinity(0)) or None
    except (AttributeError, OSError):
        return os.cpu_count()
