"""Which hardware `recommend` plans for: the catalogue GPU types asked for (or all it supports), and for each the GPU
counts a cloud rents: 1, 2, 4 and 8 in one node, then whole nodes of 8.

Choices, and why:
- GPU types: every catalogue row with `supported = true`. Plan-only rows (AMD MI300X: no NVML, so `probe` and
  `verify` cannot see it, and the bundle's CUDA stack is untested there) are planned only when named in
  --gpu-types.
- Counts: powers of two, so the default global batch (64 sequences) divides evenly over the data-parallel ranks
  and the number of searches grows with log2 of the limit (--max-gpus 4096 is 13 counts per type).
- Nodes: only of 8 GPUs (HGX/DGX boards and the 8-GPU instances clouds rent); smaller nodes would pay the
  inter-node link for no more GPUs than one node holds.
- Consumer cards (GeForce RTX): one node, at most 8 GPUs, over PCIe without peer-to-peer (Target's
  `pcie-nop2p`, the driver's default on GeForce): they are rented as single machines without an inter-node fabric.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from advisor.catalog import all_gpus, resolve_gpu
from advisor.core.errors import AdvisorError
from advisor.core.specs import GpuSpec
from advisor.core.target import Target, default_link

GPUS_PER_NODE = 8
"""Whole nodes are 8 GPUs (HGX H100/H200/B200, DGX, and the 8-GPU cloud instances)."""

MAX_GPUS_LIMIT = 4096
"""512 nodes of 8: beyond the limit of one request's --nodes search here (each count is one plan search)."""
MAX_NODES_LIMIT = 512


@dataclass(frozen=True)
class Hardware:
    gpu: GpuSpec
    gpus_per_node: int
    nodes: int

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    def target(self) -> Target:
        """The catalogue target `--gpu ID --gpus N --nodes M` resolves to (advisor.resolve.hardware)."""
        return Target(gpu=self.gpu, gpus_per_node=self.gpus_per_node, nodes=self.nodes,
                      intra_node_link=default_link(self.gpu), origin="catalog")

    def label(self) -> str:
        """`8 x H100-80GB`, `2 nodes x 8 x H100-80GB`."""
        nodes = f"{self.nodes} nodes x " if self.nodes > 1 else ""
        return f"{nodes}{self.gpus_per_node} x {self.gpu.id}"


def gpu_types(names: Iterable[str] | None) -> list[GpuSpec]:
    """The GPU types named (any name `--gpu` takes, duplicates dropped, in the order given), or every supported
    catalogue type."""
    if names is None:
        return [gpu for gpu in all_gpus() if gpu.supported]
    out: list[GpuSpec] = []
    for name in names:
        if not name.strip():
            raise AdvisorError("--gpu-types has an empty name", hint="for example --gpu-types H100,A100-80GB")
        gpu = resolve_gpu(name)
        if gpu not in out:
            out.append(gpu)
    if not out:
        raise AdvisorError("--gpu-types names no GPU", hint="for example --gpu-types H100,A100-80GB")
    return out


def check_limits(max_gpus: int, max_nodes: int) -> None:
    for flag, value, high in (("--max-gpus", max_gpus, MAX_GPUS_LIMIT), ("--max-nodes", max_nodes, MAX_NODES_LIMIT)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise AdvisorError(f"{flag} must be a whole number, got {value!r:.20}", hint=f"for example {flag} 16")
        if not 1 <= value <= high:
            raise AdvisorError(f"{flag} {value} is outside 1-{high}",
                               hint=f"use at least {flag} 1" if value < 1 else f"use at most {flag} {high}")


def counts(gpu: GpuSpec, max_gpus: int, max_nodes: int) -> list[Hardware]:
    """The GPU counts planned for one type, smallest first: 1, 2, 4, 8 on one node, then 2, 4, 8... nodes of 8, up
    to --max-gpus and --max-nodes (consumer cards: one node)."""
    out = [Hardware(gpu, n, 1) for n in (1, 2, 4, GPUS_PER_NODE) if n <= max_gpus]
    if gpu.consumer:
        return out
    nodes = 2
    while nodes <= max_nodes and nodes * GPUS_PER_NODE <= max_gpus:  # doubles: at most log2(512) = 9 rounds
        out.append(Hardware(gpu, GPUS_PER_NODE, nodes))
        nodes *= 2
    return out
