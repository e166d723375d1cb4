"""The hardware a plan is made for: one GPU model, so many per node, so many nodes, and the links between them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from advisor.core.specs import GpuSpec

# Effective one-direction bandwidth of a x16 PCIe link, GB/s, after protocol overhead (~80% of the raw
# 16/32/64 GT/s x 16 lanes / 8 bits); PCI-SIG specifications, NCCL busbw on PCIe boxes lands near these.
PCIE_GBPS = {3: 12.0, 4: 25.0, 5: 50.0, 6: 100.0}

DEFAULT_INTER_NODE_GBPS = 50.0
"""Inter-node bandwidth per node, GB/s, when nothing says otherwise: 4 x 100 Gb/s InfiniBand or RoCE NICs.
A conservative middle: DGX H100 nodes have 8 x 400 Gb/s (400 GB/s), cloud Ethernet nodes often 100 Gb/s (12.5 GB/s)."""


LARGEST_NODE_HOST_RAM_BYTES = 4 << 40
"""The host RAM assumed of a node whose RAM is not known (a catalogue GPU, no probe file): the most a GPU server is
built with, 4 TiB (NVIDIA DGX B200's maximum; DGX H100/H200 and the clouds' 8-GPU H100/H200 instances have 2 TiB).
A plan that needs more per node (405B full fine-tuning on one node of 8 with every state offloaded: about 6.5 TB)
runs on no such server: the planner refuses it and rule MEM003 reports it."""


@dataclass(frozen=True)
class Target:
    gpu: GpuSpec
    gpus_per_node: int
    nodes: int = 1
    gpu_memory_bytes: int = 0
    """Memory per GPU to plan with: the probe's total (or the MIG slice), else the catalogue's."""
    other_process_bytes: int = 0
    """Memory already held by other processes on the busiest GPU (probe only)."""
    intra_node_link: str = "nvlink"
    """nvlink | pcie | pcie-nop2p (consumer cards or a probe that found P2P off)."""
    intra_node_bw_gbps: float = 0.0
    """One-direction bandwidth per GPU for collectives inside a node, GB/s."""
    inter_node_bw_gbps: float = DEFAULT_INTER_NODE_GBPS
    host_ram_bytes: int | None = None
    """Host RAM per node; None when not known (a catalogue target)."""
    host_ram_available_bytes: int | None = None
    locked_memory_limit_bytes: int | None = None
    """ulimit -l; None is unlimited (or unknown for a catalogue target: see `host_known`)."""
    shm_bytes: int | None = None
    cpu_cores: int | None = None
    host_op_seconds: float | None = None
    """Seconds this host takes to dispatch one 1-element CUDA op under no_grad, as `trl-advisor verify` measures it
    before its run (advisor/verify/hostspeed.py); None: not measured, the calibration hosts' median is assumed
    (advisor.model.speed.REFERENCE_HOST_OP_SECONDS)."""
    software: dict = field(default_factory=dict)
    """Installed versions by distribution name (probe), empty for a catalogue target."""
    origin: str = "catalog"
    """catalog (--gpu) | probe (this machine) | file (--hardware) | default (no GPU found)."""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.gpu_memory_bytes:
            object.__setattr__(self, "gpu_memory_bytes", self.gpu.memory_bytes)
        if not self.intra_node_bw_gbps:
            object.__setattr__(self, "intra_node_bw_gbps", default_intra_bw(self.gpu, self.intra_node_link))

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def host_known(self) -> bool:
        return self.origin in ("probe", "file")

    def with_(self, **changes) -> Target:
        return replace(self, **changes)

    def describe(self) -> str:
        nodes = f"{self.nodes} nodes x " if self.nodes > 1 else ""
        link = f", {self.intra_node_link}" if self.gpus_per_node > 1 else ""
        return f"{nodes}{self.gpus_per_node} x {self.gpu.id} ({self.gpu_memory_bytes / (1 << 30):.0f} GiB{link})"


def default_intra_bw(gpu: GpuSpec, link: str) -> float:
    """NVLink: half the datasheet's both-directions figure; else the card's PCIe generation."""
    if link == "nvlink" and gpu.nvlink_gbps:
        return gpu.nvlink_gbps / 2
    pcie = PCIE_GBPS.get(gpu.pcie_gen, 25.0)
    # Without P2P, NCCL stages through host memory: about half the PCIe rate (NCCL_P2P_DISABLE=1 measurements
    # on 4090 boxes show 40-60% of P2P busbw).
    return pcie / 2 if link == "pcie-nop2p" else pcie


def default_link(gpu: GpuSpec) -> str:
    if gpu.nvlink_gbps:
        return "nvlink"
    return "pcie-nop2p" if gpu.consumer else "pcie"
