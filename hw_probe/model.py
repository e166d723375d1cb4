"""The hardware report: what `trl-advisor probe --json` prints and what `--hardware FILE` reads back.

Every field the probe may fail to read is Optional: None means "could not be read" (a note says why), never
"zero" or "absent". Sizes are integer bytes. The JSON key names are a contract that other modules read.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_ID = "trl-advisor/hardware/1"

LinkKind = Literal[
    "nvlink", "same-board", "pcie-switch", "pcie-multi-switch", "pcie-host-bridge", "cross-socket", "unknown"
]

LINK_KINDS_FASTEST_FIRST: tuple[str, ...] = (
    "nvlink",
    "same-board",
    "pcie-switch",
    "pcie-multi-switch",
    "pcie-host-bridge",
    "cross-socket",
    "unknown",
)
"""Link kinds from the fastest path to the slowest. "unknown" ranks last so that a planner that reads
`min_link_kind` assumes the worst about a link it could not see."""

_FROZEN = ConfigDict(frozen=True, extra="ignore")
# extra="ignore": a report written by a later version (which may add keys, CONTRACT.md) still loads.


class MigDevice(BaseModel):
    """One MIG slice of a GPU; with MIG on, CUDA sees these instead of the whole GPU."""

    model_config = _FROZEN

    index: int = Field(ge=0)
    memory_total_bytes: int | None = Field(default=None, ge=0)
    name: str | None = None
    """As NVML names it, e.g. `NVIDIA A100-SXM4-80GB MIG 3g.40gb`."""


class GpuProcess(BaseModel):
    """A compute process that holds memory on a GPU."""

    model_config = _FROZEN

    pid: int
    used_bytes: int | None = Field(default=None, ge=0)
    """None where the driver does not report it (Windows WDDM, some containers)."""


class GpuInfo(BaseModel):
    """One physical GPU as NVML sees it."""

    model_config = _FROZEN

    index: int = Field(ge=0)
    """NVML index (PCI bus order, as `nvidia-smi` numbers GPUs)."""
    name: str
    uuid: str | None = None
    memory_total_bytes: int = Field(ge=0)
    """Device memory NVML reports as total; 0 only when it could not be read (a note says so)."""
    memory_free_bytes: int | None = Field(default=None, ge=0)
    memory_used_bytes: int | None = Field(default=None, ge=0)
    compute_capability: str | None = Field(default=None, pattern=r"^\d+\.\d+$")
    bf16: bool | None = None
    """compute capability >= 8.0 (Ampere)."""
    fp8: bool | None = None
    """compute capability >= 8.9 (Ada, Hopper)."""
    pcie_gen: int | None = Field(default=None, ge=1)
    """Current PCIe generation; an idle GPU may drop to gen 1 to save power, so bandwidth estimates read
    `pcie_gen_max`."""
    pcie_gen_max: int | None = Field(default=None, ge=1)
    pcie_width: int | None = Field(default=None, ge=1)
    """Current PCIe link width in lanes."""
    mig_mode: bool | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    other_process_bytes: int | None = Field(default=None, ge=0)
    """Memory held by compute processes other than the probing one, bytes."""
    processes: tuple[GpuProcess, ...] = ()
    power_limit_watts: float | None = Field(default=None, ge=0)
    """The power cap the GPU runs under (NVML enforced limit), watts."""

    @property
    def cc(self) -> tuple[int, int] | None:
        if self.compute_capability is None:
            return None
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)


class LinkInfo(BaseModel):
    """How two GPUs reach each other (one entry per unordered pair, a < b)."""

    model_config = _FROZEN

    a: int = Field(ge=0)
    b: int = Field(ge=0)
    kind: LinkKind
    """nvlink when any NVLink joins them (directly or through NVSwitch), else the PCIe path."""
    nvlink_count: int = Field(default=0, ge=0)
    """NVLinks usable between the pair (`nvidia-smi topo -m` NV#)."""
    nvlink_gen: int | None = Field(default=None, ge=1)
    """NVLink generation (3 = A100, 4 = H100), None without NVLink."""
    p2p: bool | None = None
    """CUDA peer-to-peer reads between the pair are supported (NVML P2P read capability)."""

    @model_validator(mode="after")
    def _ordered(self) -> LinkInfo:
        if self.a >= self.b:
            raise ValueError(f"link {self.a}-{self.b}: a must be smaller than b")
        if self.kind == "nvlink" and self.nvlink_count == 0:
            raise ValueError(f"link {self.a}-{self.b}: kind nvlink needs nvlink_count > 0")
        return self


class HostInfo(BaseModel):
    """The machine around the GPUs: what CPU offload, pinned memory and checkpoints need."""

    model_config = _FROZEN

    ram_total_bytes: int | None = Field(default=None, ge=1)
    """Host RAM, or the container's memory limit when that is lower; None when unread (0 is a broken report: no
    process runs in it, and every plan would be refused for host RAM)."""
    ram_available_bytes: int | None = Field(default=None, ge=0)
    cpu_cores: int | None = Field(default=None, ge=1)
    """Cores this process may run on (its CPU affinity)."""
    numa_nodes: int | None = Field(default=None, ge=1)
    locked_memory_limit_bytes: int | None = Field(default=None, ge=0)
    """`ulimit -l` soft limit in bytes; None means unlimited (or unreadable: a note says which)."""
    shm_bytes: int | None = Field(default=None, ge=0)
    """Size of /dev/shm (Docker's default is 64 MiB)."""
    disk_free_bytes: int | None = Field(default=None, ge=0)
    output_dir: str
    """The output folder whose disk was measured."""


class SoftwareInfo(BaseModel):
    """Installed versions (package metadata; nothing is imported). None = not installed."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    torch: str | None = None
    transformers: str | None = None
    trl: str | None = None
    accelerate: str | None = None
    deepspeed: str | None = None
    peft: str | None = None
    liger_kernel: str | None = Field(default=None, alias="liger-kernel")
    vllm: str | None = None
    unsloth: str | None = None
    flash_attn: str | None = Field(default=None, alias="flash-attn")
    bitsandbytes: str | None = None
    kernels: str | None = None
    datasets: str | None = None

    def by_package(self) -> dict[str, str | None]:
        """{distribution name: version or None}, in declaration order."""
        return self.model_dump(by_alias=True)


class ClusterInfo(BaseModel):
    """Launcher context read from the environment: a SLURM allocation and/or a torchrun-style launch."""

    model_config = _FROZEN

    slurm: bool = False
    slurm_job_id: str | None = None
    slurm_nodes: int | None = Field(default=None, ge=1)
    slurm_gpus_per_node: int | None = Field(default=None, ge=0)
    slurm_node_rank: int | None = Field(default=None, ge=0)
    slurm_nodelist: str | None = None
    torchrun: bool = False
    world_size: int | None = Field(default=None, ge=1)
    local_world_size: int | None = Field(default=None, ge=1)
    rank: int | None = Field(default=None, ge=0)
    master_addr: str | None = None


class HardwareReport(BaseModel):
    """Everything `trl-advisor probe` learned about this machine."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    schema_id: Literal["trl-advisor/hardware/1"] = Field(default=SCHEMA_ID, alias="schema")
    probed_at: str
    """ISO 8601 time of the probe, UTC."""
    hostname: str
    gpus: tuple[GpuInfo, ...] = ()
    links: tuple[LinkInfo, ...] = ()
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    """Newest CUDA version the driver supports (`12.4`), as `nvidia-smi` prints it."""
    nvml_available: bool
    host: HostInfo
    software: SoftwareInfo
    cluster: ClusterInfo
    notes: tuple[str, ...] = ()
    """What could not be read, and why (one line each)."""

    @model_validator(mode="after")
    def _links_name_gpus(self) -> HardwareReport:
        indices = [g.index for g in self.gpus]
        if len(set(indices)) != len(indices):
            raise ValueError(f"GPU indices repeat: {indices}")
        known = set(indices)
        seen: set[tuple[int, int]] = set()
        for link in self.links:
            if link.a not in known or link.b not in known:
                raise ValueError(f"link {link.a}-{link.b} names a GPU that is not in gpus")
            if (link.a, link.b) in seen:
                raise ValueError(f"link {link.a}-{link.b} is listed twice")
            seen.add((link.a, link.b))
        return self

    # ---- serialisation ----
    def to_json(self) -> str:
        """Pretty JSON (2-space indent, keys in declaration order), no trailing newline."""
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=2)

    @classmethod
    def from_json(cls, text: str | bytes) -> HardwareReport:
        """Parse and validate; raises pydantic.ValidationError (or ValueError for bad JSON)."""
        return cls.model_validate_json(text)

    # ---- helpers ----
    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    def gpu(self, index: int) -> GpuInfo | None:
        return next((g for g in self.gpus if g.index == index), None)

    def link(self, a: int, b: int) -> LinkInfo | None:
        """The link between two GPUs, in either order; None for a == b or an unknown pair."""
        lo, hi = min(a, b), max(a, b)
        return next((x for x in self.links if x.a == lo and x.b == hi), None)

    @property
    def all_p2p(self) -> bool | None:
        """True when every GPU pair supports P2P (vacuously for fewer than 2 GPUs), False when any pair does
        not, None when some pair could not be read and none is known to fail."""
        values = [x.p2p for x in self.links]
        if any(v is False for v in values):
            return False
        if any(v is None for v in values):
            return None
        return True

    @property
    def min_link_kind(self) -> str | None:
        """The slowest link kind between any pair of GPUs; None with fewer than two GPUs."""
        if not self.links:
            return None
        return max((x.kind for x in self.links), key=LINK_KINDS_FASTEST_FIRST.index)

    @property
    def has_nvlink(self) -> bool:
        """Some pair of GPUs shares NVLink."""
        return any(x.nvlink_count > 0 for x in self.links)

    @property
    def all_nvlink(self) -> bool:
        """Every pair of GPUs shares NVLink (False with fewer than two GPUs)."""
        return bool(self.links) and all(x.nvlink_count > 0 for x in self.links)
