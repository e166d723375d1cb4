"""The hardware probe: GPUs, links, host limits, installed software and launcher context of this machine.

`probe()` never raises for a missing GPU, driver or library: it returns a valid report with notes.
`load_report(path)` reads a `trl-advisor probe --json` file back. This package is the only one that talks
to NVML, and imports `pynvml` only inside `probe()`.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    "build_report",
    "load_report",
    "probe",
    "render_text",
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


def load_report(path: str | os.PathLike[str]) -> HardwareReport:
    """Read a `trl-advisor probe --json` file. Raises advisor.errors.InputFileError (one line plus a hint) when
    the file is missing, unreadable, not JSON, or not a probe report."""
    from pydantic import ValidationError

    from advisor.errors import InputFileError

    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputFileError(f"hardware file not found: {file}", hint=PROBE_HINT) from None
    except IsADirectoryError:
        raise InputFileError(f"hardware file is a folder: {file}", hint=PROBE_HINT) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise InputFileError(f"cannot read hardware file {file}: {reason}", hint=PROBE_HINT) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(f"{file} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                             hint=PROBE_HINT) from None
    if not isinstance(data, dict) or "schema" not in data:
        raise InputFileError(f"{file} is not a trl-advisor hardware report (no \"schema\" key)", hint=PROBE_HINT)
    if data["schema"] != SCHEMA_ID:
        raise InputFileError(f"{file} has schema {data['schema']!r}; this version reads {SCHEMA_ID!r}",
                             hint="re-create it with this version: trl-advisor probe --json > hw.json")
    try:
        return HardwareReport.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the top level"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InputFileError(f"{file} is not a valid hardware report: {where}: {first['msg']}{more}",
                             hint=PROBE_HINT) from None
