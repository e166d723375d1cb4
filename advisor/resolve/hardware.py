"""The hardware a plan is made for: `--hardware FILE` (a saved `trl-advisor probe --json` report, read back bounded
and validated), `--gpu NAME` (a catalogue target), or this machine's probe, else the built-in default target.

The reading (a regular file, at most MAX_REPORT_BYTES, strict UTF-8, JSON without NaN or deep nesting) happens
here with advisor.core.safeio; hw_probe.report_from_data validates the document. Both errors become InputFileError: a
one-line usage error with a hint, exit 2.
"""

from __future__ import annotations

import os

from advisor.core import safeio
from advisor.core.errors import AdvisorError, InputFileError, UnknownNameError
from advisor.core.request import Request
from advisor.core.target import Target, default_intra_bw, default_link

DEFAULT_GPU = "H100-80GB"
"""The built-in target when no GPU is found and neither --gpu nor --hardware is given (CONTRACT.md)."""

MAX_REPORT_BYTES = 4 * 1024 * 1024
"""4 MiB: a probe report of an 8-GPU machine is about 10 KiB (tests/fixtures/hardware); 1,024 GPUs with every link
listed stay under 4 MiB."""


def load_report(path: str | os.PathLike[str]):
    """The hw_probe.HardwareReport in `path`; InputFileError when the file is missing, not a regular file, too
    large, not UTF-8 JSON, not a report of this schema, or has numbers no real machine has."""
    import hw_probe

    try:
        text = safeio.read_text(path, max_bytes=MAX_REPORT_BYTES, what="hardware file")
        data = safeio.load_json(text, where=os.fspath(path))
    except safeio.UnsafeInputError as exc:
        raise InputFileError(exc.message, hint=hw_probe.PROBE_HINT) from None
    try:
        return hw_probe.report_from_data(data, where=os.fspath(path))
    except hw_probe.ReportError as exc:
        raise InputFileError(exc.message, hint=exc.hint) from None


def resolve_target(req: Request, *, probe=None) -> Target:
    """--hardware FILE, else --gpu NAME, else this machine's probe, else the built-in default (noted)."""
    from advisor import catalog

    nodes = req.nodes or 1
    if req.hardware:
        return target_from_report(load_report(req.hardware), req, origin="file")
    if req.gpu:
        gpu = catalog.resolve_gpu(req.gpu)
        link = default_link(gpu)
        return Target(gpu=gpu, gpus_per_node=req.gpus or 1, nodes=nodes, intra_node_link=link, origin="catalog")
    if probe is None:
        import hw_probe

        probe = hw_probe.probe
    report = probe()
    if report.gpus:
        return target_from_report(report, req, origin="probe")
    gpu = catalog.resolve_gpu(DEFAULT_GPU)
    note = f"no GPU found here: planning for the built-in default target, {req.gpus or 1} x {gpu.id} (use --gpu or --hardware)"
    return Target(gpu=gpu, gpus_per_node=req.gpus or 1, nodes=nodes, intra_node_link=default_link(gpu),
                  origin="default", notes=(note,))


def target_from_report(report, req: Request, *, origin: str) -> Target:
    """A probe report (this machine or a saved file) as a target; --gpus / --nodes may scale it out."""
    from advisor import catalog

    if not report.gpus:
        raise AdvisorError("the hardware report lists no GPU", hint="probe a machine with GPUs, or pass --gpu NAME")
    unusable = [i for i, g in enumerate(report.gpus) if g.mig_mode and not g.mig_devices]
    if unusable:
        # MIG on and no instance made: CUDA sees no device on that GPU (nvidia-smi mig -lgi lists none)
        raise AdvisorError(f"MIG mode is on with no MIG instance on {len(unusable)} of the report's "
                           f"{len(report.gpus)} GPUs (index {', '.join(map(str, unusable[:8]))}): CUDA cannot use them",
                           hint="create instances (nvidia-smi mig -cgi ... -C) or turn MIG off (nvidia-smi -i N -mig 0), "
                                "then probe again")
    first = _slowest(report.gpus, catalog)
    matched = catalog.match_nvml_name(first.name, first.memory_total_bytes)
    notes = list(report.notes)
    kinds = sorted({g.name for g in report.gpus})
    if len(kinds) > 1:
        # one data-parallel run steps at its slowest GPU and fits its smallest: planned as that GPU on every rank
        notes.append(f"the report mixes GPUs ({', '.join(kinds[:4])}): planning every GPU as {first.name} (the "
                     "slowest; the smallest memory) - set CUDA_VISIBLE_DEVICES to one kind for a faster plan")
    if req.gpu:
        # --gpu names the catalogue row for the report's GPUs (a GPU the catalogue does not match by name, or the
        # user knows better); the report still gives their count, links, host and software
        gpu = catalog.resolve_gpu(req.gpu)
        if matched is None or matched.id != gpu.id:
            notes.append(f"GPU = {gpu.id} (--gpu) for the report's {first.name!r}"
                         + (f", which the catalogue reads as {matched.id}" if matched is not None else ""))
    elif matched is None:
        raise UnknownNameError(f"GPU '{first.name}' is not in the catalogue",
                               hint="pass --gpu with the closest catalogue GPU beside --hardware (list: trl-advisor "
                                    "gpus)")
    else:
        gpu = matched
    mig = [d for g in report.gpus for d in (g.mig_devices or []) if d.memory_total_bytes]
    if mig:
        # One training process uses one MIG slice, and NCCL does not run collectives across MIG slices: plan for
        # a single GPU of the largest slice's memory.
        mem, count = max(d.memory_total_bytes for d in mig), 1
        notes.append(f"MIG is on: planning for one slice of {mem / (1 << 30):.0f} GiB (no multi-GPU across slices)")
    else:
        mem, count = min(g.memory_total_bytes for g in report.gpus), len(report.gpus)
    other = max((g.other_process_bytes or 0) for g in report.gpus)
    if other and other >= mem // 4:
        notes.append(f"other processes hold {other / (1 << 30):.1f} GiB of a GPU's {mem / (1 << 30):.1f} GiB (the "
                     "busiest GPU of the report): the plan uses what they leave")
    link = _link_from_report(report, gpu)
    host = report.host
    cluster = report.cluster
    nodes = req.nodes or (cluster.slurm_nodes if cluster.slurm and cluster.slurm_nodes else 1)
    if req.gpus and req.gpus > count and not mig:  # across MIG slices: rule HW008 says why not
        raise AdvisorError(f"--gpus {req.gpus} is more than the {count} GPU(s) per node the hardware report lists",
                           hint=f"use --gpus {count} or fewer (--nodes N for more machines like it), or plan for a "
                                "catalogue machine with --gpu NAME --gpus N instead of the report")
    if req.gpus and req.gpus < count:
        notes.append(f"planning for --gpus {req.gpus} of the report's {count}")
    return Target(
        gpu=gpu, gpus_per_node=req.gpus or count, nodes=nodes, gpu_memory_bytes=mem, other_process_bytes=other,
        intra_node_link=link, intra_node_bw_gbps=default_intra_bw(gpu, link),
        host_ram_bytes=host.ram_total_bytes, host_ram_available_bytes=host.ram_available_bytes,
        locked_memory_limit_bytes=host.locked_memory_limit_bytes, shm_bytes=host.shm_bytes, cpu_cores=host.cpu_cores,
        software=report.software.by_package(), origin=origin, notes=tuple(notes),
    )


def _slowest(gpus, catalog):
    """The report's GPU a data-parallel plan is held to: the catalogue row with the lowest 16-bit peak (unmatched
    names count as slowest, so the caller's "not in the catalogue" error names them), then the least memory."""
    def key(g):
        row = catalog.match_nvml_name(g.name, g.memory_total_bytes)
        peak = (row.bf16_tflops or row.fp16_tflops) if row is not None else -1.0
        return (peak, g.memory_total_bytes)

    return min(gpus, key=key)


def _link_from_report(report, gpu) -> str:
    links = list(report.links or [])
    if not links:
        return default_link(gpu)
    if all(link.kind == "nvlink" for link in links):
        return "nvlink"
    if any(link.p2p is False for link in links):
        return "pcie-nop2p"
    return "pcie"
