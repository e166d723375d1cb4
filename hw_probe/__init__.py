"""The hardware probe: GPUs, links, host limits, installed software and launcher context of this machine.

`probe()` never raises for a missing GPU, driver or library: it returns a valid report with notes.
`report_from_data(data, where=...)` validates a `trl-advisor probe --json` document read back (the advisor reads the
file: advisor.resolve.hardware.load_report). This package is the only one that talks to NVML, imports `pynvml` only
inside `probe()`, and imports nothing from the advisor.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from hw_probe.limits import MAX_GPUS, MAX_NODES
from hw_probe.model import (
    SCHEMA_ID,
    ClusterInfo,
    GpuInfo,
    HardwareReport,
    HostInfo,
    LinkInfo,
    SoftwareInfo,
)
from hw_probe.render import render_text

if TYPE_CHECKING:
    from hw_probe.nvml import NvmlReading

__all__ = [
    "SCHEMA_ID",
    "ClusterInfo",
    "GpuInfo",
    "HardwareReport",
    "HostInfo",
    "LinkInfo",
    "SoftwareInfo",
    "ReportError",
    "build_report",
    "check_plausible",
    "probe",
    "render_text",
    "report_from_data",
]

PROBE_HINT = "create one with: trl-advisor probe --json > hw.json"


def build_report(reading: NvmlReading, host: HostInfo, software: SoftwareInfo, cluster: ClusterInfo, *,
                 probed_at: str, hostname: str, notes: Iterable[str] = ()) -> HardwareReport:
    """Put the parts together; notes are NVML's first, then the caller's (host, cluster)."""
    return HardwareReport(
        probed_at=probed_at,
        hostname=hostname,
        gpus=reading.gpus,
        links=reading.links,
        driver_version=reading.driver_version,
        cuda_driver_version=reading.cuda_driver_version,
        nvml_available=reading.nvml_available,
        host=host,
        software=software,
        cluster=cluster,
        notes=(*reading.notes, *notes),
    )


def probe(output_dir: str = ".", nvml: Any = None, environ: Mapping[str, str] | None = None) -> HardwareReport:
    """Probe this machine.

    output_dir: the folder a run would write to (its free disk space is reported; it need not exist yet).
    nvml: an NVML module to use instead of `pynvml` (tests pass `hw_probe.fake.FakeNvml`).
    environ: environment to read SLURM / torchrun / CUDA_VISIBLE_DEVICES from (default: os.environ).
    """
    from hw_probe.cluster import read_cluster  # here, so that `import hw_probe` stays small
    from hw_probe.host import read_host
    from hw_probe.nvml import read_nvml
    from hw_probe.software import read_software

    env = os.environ if environ is None else environ
    reading = read_nvml(nvml, environ=env)
    host, host_notes = read_host(output_dir)
    cluster, cluster_notes = read_cluster(env)
    return build_report(
        reading, host, read_software(), cluster,
        probed_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        hostname=socket.gethostname(),
        notes=(*host_notes, *cluster_notes),
    )


class ReportError(ValueError):
    """A hardware report that is not one this version reads, or whose numbers cannot be real. One line in
    `message`, and a `hint` saying how to get a good one. This package stays free of the advisor: the advisor
    reads the file (advisor.resolve.hardware) and turns this into its own usage error."""

    def __init__(self, message: str, *, hint: str = PROBE_HINT) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


MIN_GPU_MEMORY_BYTES = 1 << 30
"""1 GiB: the smallest memory of a GPU (or MIG slice) that can train anything; the smallest MIG slice NVIDIA sells is
5 GB (A100 1g.5gb). A smaller total is a typo (KiB or MiB for bytes) that would plan with negative capacity."""
MAX_GPU_MEMORY_BYTES = 16 << 40
"""16 TiB per GPU: about 60 times the largest GPU memory shipping (B300: 288 GB HBM3e). A larger total is a typo."""


def report_from_data(data: Any, *, where: str) -> HardwareReport:
    """A parsed `trl-advisor probe --json` document as a validated HardwareReport. `where` names the file in the
    messages. Raises ReportError when it is not a report of this schema, does not validate, or has numbers no real
    machine has (see check_plausible)."""
    from pydantic import ValidationError

    if not isinstance(data, dict) or "schema" not in data:
        raise ReportError(f"{where} is not a trl-advisor hardware report (no \"schema\" key)")
    if data["schema"] != SCHEMA_ID:
        shown = data["schema"] if isinstance(data["schema"], str) and len(data["schema"]) <= 60 else "(not text)"
        raise ReportError(f"{where} has schema {shown!r}; this version reads {SCHEMA_ID!r}",
                          hint="re-create it with this version: trl-advisor probe --json > hw.json")
    try:
        report = validate_strictly(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "the top level"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ReportError(f"{where} is not a valid hardware report: {field}: {first['msg']}{more}") from None
    problem = check_plausible(report)
    if problem:
        raise ReportError(f"{where}: {problem}",
                          hint="the numbers are bytes, as `trl-advisor probe --json` writes them; re-create the file "
                               "on the machine with: trl-advisor probe --json > hw.json")
    return report


def validate_strictly(data: dict) -> HardwareReport:
    """A parsed report as a HardwareReport, each value of the JSON type `probe --json` writes. pydantic's default
    (lax) mode would read "80000000000" and 8.0e10 as integers, true as the count 1 and "yes" as true
    (docs.pydantic.dev, Conversion Table): a hand-edited or foreign file would then plan for a GPU whose memory is
    1 byte, or whose memory is a string, without a word. Strict mode is applied to JSON text (model_validate_json),
    where a JSON array still fills a tuple field and an integer a float one; `data` came from
    advisor.core.safeio.load_json, so it dumps back to the same JSON."""
    return HardwareReport.model_validate_json(json.dumps(data), strict=True)


def check_plausible(report: HardwareReport) -> str | None:
    """The first field of a loaded report whose value no real machine has, as `gpus.0.memory_total_bytes is 1024,
    below 1 GiB`; None when every number is plausible. A live probe may report 0 for a total it could not read (a
    note says why); a report read back to plan with must have every GPU's memory."""
    if len(report.gpus) > MAX_GPUS:
        return f"gpus lists {len(report.gpus)} GPUs, more than the {MAX_GPUS} any machine has"
    for i, gpu in enumerate(report.gpus):
        total = gpu.memory_total_bytes
        at = f"gpus.{i}"
        if total < MIN_GPU_MEMORY_BYTES:
            return f"{at}.memory_total_bytes is {total}, below 1 GiB (1073741824): not a GPU's memory in bytes"
        if total > MAX_GPU_MEMORY_BYTES:
            return f"{at}.memory_total_bytes is {total}, above 16 TiB: not a GPU's memory in bytes"
        for name in ("memory_free_bytes", "memory_used_bytes", "other_process_bytes"):
            value = getattr(gpu, name)
            if value is not None and value > total:
                return f"{at}.{name} is {value}, more than the GPU's memory_total_bytes {total}"
        for j, mig in enumerate(gpu.mig_devices):
            size = mig.memory_total_bytes
            if size is not None and size and not MIN_GPU_MEMORY_BYTES <= size <= total:
                return (f"{at}.mig_devices.{j}.memory_total_bytes is {size}: a MIG slice has between 1 GiB and the "
                        f"GPU's {total} bytes")
        for j, process in enumerate(gpu.processes):
            if process.used_bytes is not None and process.used_bytes > total:
                return f"{at}.processes.{j}.used_bytes is {process.used_bytes}, more than the GPU's memory"
        if gpu.power_limit_watts is not None and not math.isfinite(gpu.power_limit_watts):
            return f"{at}.power_limit_watts is {gpu.power_limit_watts}, not a finite number"
    problem = _implausible_host(report.host)
    if problem:
        return problem
    nodes = report.cluster.slurm_nodes
    if nodes is not None and nodes > MAX_NODES:
        return f"cluster.slurm_nodes is {nodes}, more than the {MAX_NODES} nodes of the largest clusters"
    for name in ("slurm_gpus_per_node", "world_size", "local_world_size"):
        value = getattr(report.cluster, name)
        if value is not None and value > MAX_GPUS * MAX_NODES:
            return f"cluster.{name} is {value}, more GPUs than any cluster has"
    return None


MAX_HOST_RAM_BYTES = 1 << 50
"""1 PiB of host RAM: about 30 times the largest single machine sold (HPE Superdome Flex: 48 TB). The planner reads
this to allow CPU offload; a larger figure is a typo (bytes for KiB) that would allow any offload."""
MAX_CPU_CORES = 1 << 16
"""65,536 cores: eight times Linux's largest NR_CPUS (8,192, arch/x86/Kconfig MAXSMP)."""


def _implausible_host(host: HostInfo) -> str | None:
    """The first host figure no real machine has, as check_plausible words it; None when all are plausible."""
    # shm_bytes and locked_memory_limit_bytes stay unchecked: a tmpfs may be mounted larger than RAM, and an
    # administrator may set `ulimit -l` to any finite number to mean "no limit"
    for name in ("ram_total_bytes", "ram_available_bytes"):
        value = getattr(host, name)
        if value is not None and value > MAX_HOST_RAM_BYTES:
            return f"host.{name} is {value}, above 1 PiB: not a machine's memory in bytes"
    total, available = host.ram_total_bytes, host.ram_available_bytes
    if total is not None and available is not None and available > total:
        return f"host.ram_available_bytes is {available}, more than host.ram_total_bytes {total}"
    for name, high in (("cpu_cores", MAX_CPU_CORES), ("numa_nodes", MAX_CPU_CORES)):
        value = getattr(host, name)
        if value is not None and value > high:
            return f"host.{name} is {value}, more than any machine has"
    return None
