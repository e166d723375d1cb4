"""A short plain-text summary of a hardware report (`trl-advisor probe` without --json)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hw_probe.model import GpuInfo, HardwareReport, LinkInfo

GIB = 1 << 30

# `nvidia-smi topo -m` codes. NVML folds NODE into the host-bridge kind here, so PHB covers both; BRD (two GPUs
# on one board) has no nvidia-smi code of its own.
LINK_CODES = {
    "same-board": "BRD",
    "pcie-switch": "PIX",
    "pcie-multi-switch": "PXB",
    "pcie-host-bridge": "PHB",
    "cross-socket": "SYS",
    "unknown": "?",
}
LEGEND = {
    "NV": "NV# = # NVLinks",
    "BRD": "BRD = same board",
    "PIX": "PIX = one PCIe switch",
    "PXB": "PXB = several PCIe switches",
    "PHB": "PHB = through the CPU's PCIe host bridge",
    "SYS": "SYS = across CPU sockets",
    "?": "? = unknown",
}


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.1f} GiB"


def _size(value: int | None) -> str:
    """Human size for host figures: KiB/MiB below 1 GiB (memlock limits are often 64 KiB or 8 MiB)."""
    if value is None:
        return "?"
    if value >= GIB:
        return f"{value / GIB:.1f} GiB" if value < 1024 * GIB else f"{value / (1024 * GIB):.1f} TiB"
    if value >= 1 << 20:
        return f"{value / (1 << 20):.0f} MiB"
    return f"{value / 1024:.0f} KiB"


def link_code(link: LinkInfo) -> str:
    if link.nvlink_count:
        return f"NV{link.nvlink_count}"
    return LINK_CODES.get(link.kind, "?")


def _gpu_line(gpu: GpuInfo) -> str:
    parts = [f"GPU {gpu.index}: {gpu.name}", _gib(gpu.memory_total_bytes or None)]
    if gpu.memory_free_bytes is not None:
        parts[-1] += f" ({_gib(gpu.memory_free_bytes)} free)"
    if gpu.compute_capability:
        dtypes = [d for d, ok in (("bf16", gpu.bf16), ("fp8", gpu.fp8)) if ok]
        parts.append(f"cc {gpu.compute_capability}" + (f" ({', '.join(dtypes)})" if dtypes else ""))
    if gpu.pcie_gen_max or gpu.pcie_gen:
        pcie = f"PCIe gen{gpu.pcie_gen or '?'} x{gpu.pcie_width or '?'}"
        if gpu.pcie_gen_max and gpu.pcie_gen != gpu.pcie_gen_max:
            pcie += f" (max gen{gpu.pcie_gen_max})"
        parts.append(pcie)
    if gpu.power_limit_watts is not None:
        parts.append(f"{gpu.power_limit_watts:.0f} W")
    if gpu.other_process_bytes:
        parts.append(f"{_gib(gpu.other_process_bytes)} held by other processes")
    lines = ["  " + ", ".join(parts)]
    if gpu.mig_mode:
        for mig in gpu.mig_devices:
            lines.append(f"    MIG {mig.index}: {mig.name or '?'}, {_gib(mig.memory_total_bytes)}")
    return "\n".join(lines)


def _topology(report: HardwareReport) -> list[str]:
    indices = [g.index for g in report.gpus]
    header = ["", *(f"GPU{i}" for i in indices)]
    rows = [header]
    for a in indices:
        row = [f"GPU{a}"]
        for b in indices:
            link = report.link(a, b)
            row.append("X" if a == b else (link_code(link) if link else "-"))
        rows.append(row)
    width = max(len(cell) for row in rows for cell in row) + 2
    lines = ["Topology:"] + ["  " + "".join(cell.ljust(width) for cell in row).rstrip() for row in rows]
    used = {"NV" if code.startswith("NV") else code for code in map(link_code, report.links)}
    lines.append("  " + ", ".join(text for code, text in LEGEND.items() if code in used))
    p2p = report.all_p2p
    pairs = [f"{x.a}-{x.b}" for x in report.links if x.p2p is False]
    if p2p is True:
        lines.append("  P2P: supported between all pairs")
    elif p2p is False:
        lines.append(f"  P2P: not supported between {len(pairs)} of {len(report.links)} pairs ({', '.join(pairs)})")
    else:
        lines.append("  P2P: unknown for some pairs")
    return lines


def render_text(report: HardwareReport) -> str:
    """Plain text: GPUs, topology, driver, host, software, cluster, notes."""
    lines: list[str] = []
    if report.gpus:
        names = sorted({g.name for g in report.gpus})
        lines.append(f"GPUs: {report.gpu_count} x {' / '.join(names)}")
        lines += [_gpu_line(g) for g in report.gpus]
    else:
        lines.append("GPUs: none found" + ("" if report.nvml_available else " (NVML not available)"))
    if report.gpu_count > 1:
        lines += _topology(report)
    if report.driver_version or report.cuda_driver_version:
        lines.append(f"Driver: {report.driver_version or '?'}, CUDA {report.cuda_driver_version or '?'}")

    host = report.host
    memlock = "unlimited" if host.locked_memory_limit_bytes is None else _size(host.locked_memory_limit_bytes)
    lines.append(
        f"Host: {report.hostname}, RAM {_size(host.ram_total_bytes)} ({_size(host.ram_available_bytes)} available), "
        f"{host.cpu_cores or '?'} CPU cores, {host.numa_nodes or '?'} NUMA node(s)"
    )
    lines.append(f"  locked memory (ulimit -l) {memlock}, /dev/shm {_size(host.shm_bytes)}, "
                 f"disk free {_size(host.disk_free_bytes)} at {host.output_dir}")

    versions = report.software.by_package()
    present = [f"{name} {version}" for name, version in versions.items() if version]
    missing = [name for name, version in versions.items() if not version]
    lines.append("Software: " + (", ".join(present) if present else "none of the training stack"))
    if missing:
        lines.append(f"  not installed: {', '.join(missing)}")

    cluster = report.cluster
    parts = []
    if cluster.slurm:
        parts.append(f"SLURM job {cluster.slurm_job_id}: {cluster.slurm_nodes or '?'} node(s), "
                     f"{cluster.slurm_gpus_per_node if cluster.slurm_gpus_per_node is not None else '?'} GPU(s)/node, "
                     f"node rank {cluster.slurm_node_rank if cluster.slurm_node_rank is not None else '?'}"
                     + (f", nodes {cluster.slurm_nodelist}" if cluster.slurm_nodelist else ""))
    if cluster.torchrun:
        parts.append(f"torchrun: world size {cluster.world_size or '?'}, local {cluster.local_world_size or '?'}, "
                     f"rank {cluster.rank if cluster.rank is not None else '?'}"
                     + (f", master {cluster.master_addr}" if cluster.master_addr else ""))
    lines.append("Cluster: " + ("; ".join(parts) if parts else "none (single machine, no launcher)"))

    if report.notes:
        lines.append("Notes:")
        lines += [f"  - {note}" for note in report.notes]
    return "\n".join(lines)
