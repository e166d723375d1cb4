"""A fake NVML module built from a short machine description, and the recorded hardware fixtures.

`FakeNvml(machine)` answers the pynvml functions that `hw_probe.nvml` calls, with pynvml's constant values and
pynvml-style `NVMLError`s, so tests run the real adapter code over machines this project has no access to.
`errors={"nvmlDeviceGetEnforcedPowerLimit@1": FakeNvml.NVML_ERROR_NOT_SUPPORTED}` makes one call fail.

The recorded fixtures (tests/fixtures/hardware/<name>.json) are the adapter's output over each machine here,
plus a fixed host, software and cluster section. Regenerate them from the repository root with:

    python -m hw_probe.fake --write-fixtures
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hw_probe import build_report
from hw_probe.model import ClusterInfo, HardwareReport, HostInfo, SoftwareInfo
from hw_probe.nvml import read_nvml

MIB = 1 << 20
GIB = 1 << 30
FIXTURE_DIR = Path("tests/fixtures/hardware")
REGENERATE = "python -m hw_probe.fake --write-fixtures"
FIXTURE_PID = 1000
"""The probing process's pid in every recorded fixture (none of the fake processes use it)."""
FIXTURE_TIME = "2025-06-02T09:30:00+00:00"


# ---------------------------------------------------------------- machine descriptions

@dataclass(frozen=True)
class FakeMig:
    """A MIG device (slot index, profile such as `3g.40gb`, memory)."""

    slot: int
    profile: str
    memory_mib: int


@dataclass(frozen=True)
class FakeGpu:
    """One GPU as NVML answers for it; sizes in MiB as nvidia-smi prints them."""

    name: str
    memory_mib: int
    cc: tuple[int, int]
    pci_bus_id: str
    """`00000000:18:00.0`: NVLink peers are matched by it."""
    pcie_gen: int
    pcie_gen_max: int
    pcie_width: int = 16
    power_watts: int = 300
    used_mib: float = 0
    """What NVML reports as used, processes included (fractions allowed: real readings are not whole MiB)."""
    processes: tuple[tuple[int, int | None], ...] = ()
    """(pid, MiB held or None when the driver does not say)."""
    mig_capable: bool = False
    mig_on: bool = False
    mig_pending: bool | None = None
    """Pending MIG mode when it differs from the current one."""
    mig_devices: tuple[FakeMig, ...] = ()


@dataclass(frozen=True)
class FakeMachine:
    """A whole machine as NVML would see it."""

    name: str
    gpus: tuple[FakeGpu, ...] = ()
    driver: str = "550.54.15"
    cuda: int = 12040
    topology: Mapping[tuple[int, int], str] = field(default_factory=dict)
    """(a, b) with a < b -> NVML topology constant name; missing pairs are NVML_TOPOLOGY_SYSTEM."""
    nvlinks: Mapping[int, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    """GPU index -> one (remote kind, remote id) per NVLink port: ("gpu", peer index) or ("switch", n)."""
    nvlink_version: int = 0
    """nvmlDeviceGetNvLinkVersion's answer (the nvmlNvlinkVersion_t enum)."""
    p2p_status: int = 0
    """nvmlDeviceGetP2PStatus answer for every pair (NVML_P2P_STATUS_*)."""
    library_missing: bool = False


def _switch_fabric(gpus: int, links: int, switches: int) -> dict[int, tuple[tuple[str, int], ...]]:
    """HGX/DGX boards: each GPU's links spread over the NVSwitches."""
    return {g: tuple(("switch", link % switches) for link in range(links)) for g in range(gpus)}


def _bridged_pairs(pairs: list[tuple[int, int]], links: int) -> dict[int, tuple[tuple[str, int], ...]]:
    """NVLink bridges joining GPUs two by two (workstation cards)."""
    ports: dict[int, tuple[tuple[str, int], ...]] = {}
    for a, b in pairs:
        ports[a] = tuple(("gpu", b) for _ in range(links))
        ports[b] = tuple(("gpu", a) for _ in range(links))
    return ports


def _pairs(n: int, level_of: Callable[[int, int], str]) -> dict[tuple[int, int], str]:
    return {(a, b): level_of(a, b) for a in range(n) for b in range(a + 1, n)}


def _bus(n: int) -> str:
    return f"00000000:{n:02X}:00.0"


# Values: marketing names and MiB totals as nvidia-smi prints them, NVLink port counts from the datasheets
# (H100 SXM5: 18 NVLink 4 links; A100 SXM4: 12 NVLink 3 links), power limits from the same datasheets.
# `used_mib` on an idle GPU: NVML's nvmlDeviceGetMemoryInfo (v1) counts the driver's reserve as used; an idle
# H200 read 615 MiB (tests/hw_probe/data/h200_real_probe.json), smaller parts reserve less.
_H100 = dict(name="NVIDIA H100 80GB HBM3", memory_mib=81559, cc=(9, 0), pcie_gen=5, pcie_gen_max=5,
             power_watts=700, used_mib=531, mig_capable=True)
_A100_40 = dict(name="NVIDIA A100-SXM4-40GB", memory_mib=40960, cc=(8, 0), pcie_gen=4, pcie_gen_max=4,
                power_watts=400, used_mib=423, mig_capable=True)
_RTX4090 = dict(name="NVIDIA GeForce RTX 4090", memory_mib=24564, cc=(8, 9), pcie_gen=4, pcie_gen_max=4,
                power_watts=450, used_mib=289)

MACHINES: dict[str, FakeMachine] = {
    # DGX/HGX H100: two sockets with four GPUs each; all 18 NVLinks of every GPU go to the NVSwitches.
    "h100_sxm_x8_nvlink": FakeMachine(
        name="h100_sxm_x8_nvlink",
        gpus=tuple(FakeGpu(pci_bus_id=_bus(b), **_H100)
                   for b in (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)),
        driver="550.54.15", cuda=12040,
        topology=_pairs(8, lambda a, b: "NVML_TOPOLOGY_NODE" if a // 4 == b // 4 else "NVML_TOPOLOGY_SYSTEM"),
        nvlinks=_switch_fabric(8, links=18, switches=4),
        nvlink_version=6,  # NVML_NVLINK_VERSION_4_0
    ),
    # Four GeForce cards on one CPU's host bridge; the driver refuses P2P on GeForce parts. GPU 0 also holds
    # another user's notebook kernel.
    "rtx4090_x4_pcie_nop2p": FakeMachine(
        name="rtx4090_x4_pcie_nop2p",
        gpus=(
            FakeGpu(pci_bus_id=_bus(0x01), **{**_RTX4090, "used_mib": 289 + 1840}, processes=((31337, 1840),)),
            *(FakeGpu(pci_bus_id=_bus(b), **_RTX4090) for b in (0x21, 0x41, 0x61)),
        ),
        driver="550.107.02", cuda=12040,
        topology=_pairs(4, lambda a, b: "NVML_TOPOLOGY_HOSTBRIDGE"),
        p2p_status=1,  # NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED, `CNS` in nvidia-smi topo -p2p r
    ),
    # DGX A100 40GB: GPUs in pairs behind two levels of PCIe switch; 12 NVLinks each to six NVSwitches.
    "a100_40gb_x8": FakeMachine(
        name="a100_40gb_x8",
        gpus=tuple(FakeGpu(pci_bus_id=_bus(b), **_A100_40)
                   for b in (0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD)),
        driver="535.161.08", cuda=12020,
        topology=_pairs(8, lambda a, b: "NVML_TOPOLOGY_MULTIPLE" if a // 2 == b // 2 else "NVML_TOPOLOGY_SYSTEM"),
        nvlinks=_switch_fabric(8, links=12, switches=6),
        nvlink_version=5,  # what an A100 answers (NVML_NVLINK_VERSION_3_1), hwloc issue 658
    ),
    # One A100 80GB split into two 3g.40gb MIG devices (40192 MiB each, `nvidia-smi mig -lgip`).
    "a100_mig": FakeMachine(
        name="a100_mig",
        gpus=(FakeGpu(name="NVIDIA A100-SXM4-80GB", memory_mib=81920, cc=(8, 0), pci_bus_id=_bus(0x07),
                      pcie_gen=4, pcie_gen_max=4, power_watts=400, used_mib=38, mig_capable=True, mig_on=True,
                      mig_devices=(FakeMig(0, "3g.40gb", 40192), FakeMig(1, "3g.40gb", 40192))),),
        driver="550.90.07", cuda=12040,
        nvlinks=_switch_fabric(1, links=12, switches=6),
        nvlink_version=5,
    ),
    # A cloud VM with one T4 (PCIe gen3 x16, 70 W).
    "t4_x1": FakeMachine(
        name="t4_x1",
        gpus=(FakeGpu(name="Tesla T4", memory_mib=15360, cc=(7, 5), pci_bus_id="00000000:00:04.0", pcie_gen=3,
                      pcie_gen_max=3, power_watts=70, used_mib=105),),
        driver="535.183.01", cuda=12020,
    ),
    # A real reading (tests/hw_probe/data/h200_real_probe.json): one H200 passed through to a VM, where NVLink
    # answers NOT_SUPPORTED and MIG is off.
    "h200_x1": FakeMachine(
        name="h200_x1",
        gpus=(FakeGpu(name="NVIDIA H200", memory_mib=143771, cc=(9, 0), pci_bus_id="00000000:00:06.0", pcie_gen=5,
                      pcie_gen_max=5, power_watts=700, used_mib=615.0625, mig_capable=True),),
        driver="580.159.04", cuda=13000,
    ),
    # No NVIDIA driver at all: libnvidia-ml.so.1 cannot be loaded.
    "no_gpu": FakeMachine(name="no_gpu", library_missing=True),
}


# ---------------------------------------------------------------- the fake module

_ERROR_CODES = {
    "UNINITIALIZED": 1, "INVALID_ARGUMENT": 2, "NOT_SUPPORTED": 3, "NO_PERMISSION": 4, "NOT_FOUND": 6,
    "DRIVER_NOT_LOADED": 9, "LIBRARY_NOT_FOUND": 12, "FUNCTION_NOT_FOUND": 13, "GPU_IS_LOST": 15, "UNKNOWN": 999,
}
_ERROR_STRINGS = {
    1: "Uninitialized", 2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions", 6: "Not Found",
    9: "Driver Not Loaded", 12: "NVML Shared Library Not Found", 13: "Function Not Found", 15: "GPU is lost",
    999: "Unknown Error",
}


class NVMLError(Exception):
    """pynvml-style error: `NVMLError(code)` returns the subclass for that code (`NVMLError_NotSupported`...);
    `.value` is the code and str() the text pynvml prints."""

    _by_code: dict[int, type[NVMLError]] = {}

    def __new__(cls, value: int) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._by_code.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return _ERROR_STRINGS.get(self.value, f"NVML Error with code {self.value}")


def _error_class(name: str, code: int) -> type[NVMLError]:
    # Like pynvml: NVML_ERROR_NOT_SUPPORTED -> NVMLError_NotSupported, constructible without arguments.
    class_name = "NVMLError_" + "".join(part.capitalize() for part in name.split("_"))

    def new(cls: type, *args: object) -> NVMLError:
        return NVMLError.__new__(cls, code)

    def init(self: NVMLError, *args: object) -> None:
        Exception.__init__(self, code)

    return type(class_name, (NVMLError,), {"__new__": new, "__init__": init})


ERROR_CLASSES = {name: _error_class(name, code) for name, code in _ERROR_CODES.items()}
for _name, _cls in ERROR_CLASSES.items():
    NVMLError._by_code[_ERROR_CODES[_name]] = _cls


@dataclass(frozen=True)
class _Handle:
    gpu: int
    mig_slot: int | None = None


class FakeNvml:
    """Stands in for the `pynvml` module: same function names, constants and error behaviour."""

    NVMLError = NVMLError

    # Constants: the values nvidia-ml-py defines (tests compare them with the real module).
    NVML_SUCCESS = 0
    NVML_ERROR_UNINITIALIZED = 1
    NVML_ERROR_INVALID_ARGUMENT = 2
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NO_PERMISSION = 4
    NVML_ERROR_NOT_FOUND = 6
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_LIBRARY_NOT_FOUND = 12
    NVML_ERROR_FUNCTION_NOT_FOUND = 13
    NVML_ERROR_GPU_IS_LOST = 15
    NVML_ERROR_UNKNOWN = 999
    NVML_FEATURE_DISABLED = 0
    NVML_FEATURE_ENABLED = 1
    NVML_DEVICE_MIG_DISABLE = 0
    NVML_DEVICE_MIG_ENABLE = 1
    NVML_NVLINK_MAX_LINKS = 36
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
    NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
    NVML_TOPOLOGY_INTERNAL = 0
    NVML_TOPOLOGY_SINGLE = 10
    NVML_TOPOLOGY_MULTIPLE = 20
    NVML_TOPOLOGY_HOSTBRIDGE = 30
    NVML_TOPOLOGY_NODE = 40
    NVML_TOPOLOGY_SYSTEM = 50
    NVML_P2P_CAPS_INDEX_READ = (0,)  # sic: nvidia-ml-py's own definition has a trailing comma
    NVML_P2P_STATUS_OK = 0
    NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED = 1
    NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2
    NVML_P2P_STATUS_NOT_SUPPORTED = 5

    def __init__(self, machine: FakeMachine | str, errors: Mapping[str, int] | None = None) -> None:
        self.machine = MACHINES[machine] if isinstance(machine, str) else machine
        self.errors = dict(errors or {})
        """"fn", "fn@gpu" or "fn@a-b" -> NVML error code that call raises."""
        self.initialised = False
        self.shutdowns = 0
        self.calls: list[str] = []

    # ---- plumbing ----
    def _enter(self, fn: str, *handles: _Handle, init_needed: bool = True) -> None:
        self.calls.append(fn)
        keys = [fn]
        if handles:
            keys.append(f"{fn}@{'-'.join(str(h.gpu) for h in handles)}")
        for key in keys:
            if key in self.errors:
                raise NVMLError(self.errors[key])
        if init_needed and not self.initialised:
            raise NVMLError(self.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, handle: Any, *, mig_ok: bool = False) -> FakeGpu:
        if not isinstance(handle, _Handle) or handle.gpu >= len(self.machine.gpus):
            raise NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        if handle.mig_slot is not None and not mig_ok:
            raise NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)  # a MIG handle where a GPU handle is needed
        return self.machine.gpus[handle.gpu]

    def _mig(self, handle: _Handle) -> FakeMig | None:
        if handle.mig_slot is None:
            return None
        gpu = self.machine.gpus[handle.gpu]
        return next(m for m in gpu.mig_devices if m.slot == handle.mig_slot)

    def _uuid(self, *parts: object) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, "trl-advisor-fake/" + "/".join(map(str, parts))))

    @staticmethod
    def _pci(bus_id: str) -> SimpleNamespace:
        domain, bus, rest = bus_id.split(":")
        device = rest.split(".")[0]
        return SimpleNamespace(busId=bus_id, domain=int(domain, 16), bus=int(bus, 16), device=int(device, 16))

    # ---- library ----
    def nvmlInit(self) -> None:
        self._enter("nvmlInit", init_needed=False)
        if self.machine.library_missing:
            raise NVMLError(self.NVML_ERROR_LIBRARY_NOT_FOUND)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialised = False
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.machine.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.machine.cuda

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return self.machine.cuda

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.machine.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._enter("nvmlDeviceGetHandleByIndex", _Handle(index))
        if not 0 <= index < len(self.machine.gpus):
            raise NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    # ---- one device ----
    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        self._enter("nvmlDeviceGetName", handle)
        gpu, mig = self._gpu(handle, mig_ok=True), self._mig(handle)
        return f"{gpu.name} MIG {mig.profile}" if mig else gpu.name

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        self._enter("nvmlDeviceGetUUID", handle)
        self._gpu(handle, mig_ok=True)
        if handle.mig_slot is not None:
            return "MIG-" + self._uuid(self.machine.name, handle.gpu, "mig", handle.mig_slot)
        return "GPU-" + self._uuid(self.machine.name, handle.gpu)

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle) -> SimpleNamespace:
        self._enter("nvmlDeviceGetMemoryInfo", handle)
        gpu, mig = self._gpu(handle, mig_ok=True), self._mig(handle)
        total = (mig.memory_mib if mig else gpu.memory_mib) * MIB
        used = int((0 if mig else gpu.used_mib) * MIB)
        return SimpleNamespace(total=total, free=total - used, used=used)

    def nvmlDeviceGetCudaComputeCapability(self, handle: _Handle) -> tuple[int, int]:
        self._enter("nvmlDeviceGetCudaComputeCapability", handle)
        return self._gpu(handle, mig_ok=True).cc

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetCurrPcieLinkGeneration", handle)
        return self._gpu(handle).pcie_gen

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetMaxPcieLinkGeneration", handle)
        return self._gpu(handle).pcie_gen_max

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetCurrPcieLinkWidth", handle)
        return self._gpu(handle).pcie_width

    def nvmlDeviceGetPciInfo(self, handle: _Handle) -> SimpleNamespace:
        self._enter("nvmlDeviceGetPciInfo", handle)
        return self._pci(self._gpu(handle).pci_bus_id)

    def nvmlDeviceGetMigMode(self, handle: _Handle) -> list[int]:
        self._enter("nvmlDeviceGetMigMode", handle)
        gpu = self._gpu(handle)
        if not gpu.mig_capable:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        pending = gpu.mig_on if gpu.mig_pending is None else gpu.mig_pending
        return [int(gpu.mig_on), int(pending)]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount", handle)
        if not self._gpu(handle).mig_capable:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return 7  # A100/H100: at most seven MIG slices

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: _Handle, index: int) -> _Handle:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        gpu = self._gpu(handle)
        if not gpu.mig_on:
            raise NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        if not any(m.slot == index for m in gpu.mig_devices):
            raise NVMLError(self.NVML_ERROR_NOT_FOUND)
        return _Handle(handle.gpu, index)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: _Handle) -> list[SimpleNamespace]:
        self._enter("nvmlDeviceGetComputeRunningProcesses", handle)
        return [SimpleNamespace(pid=pid, usedGpuMemory=None if mib is None else mib * MIB)
                for pid, mib in self._gpu(handle).processes]

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: _Handle) -> list[SimpleNamespace]:
        self._enter("nvmlDeviceGetComputeRunningProcesses_v2", handle)
        return [SimpleNamespace(pid=pid, usedGpuMemory=None if mib is None else mib * MIB)
                for pid, mib in self._gpu(handle).processes]

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetEnforcedPowerLimit", handle)
        return self._gpu(handle).power_watts * 1000  # milliwatts

    # ---- NVLink ----
    def _port(self, handle: _Handle, link: int) -> tuple[str, int]:
        self._gpu(handle)
        ports = self.machine.nvlinks.get(handle.gpu, ())
        if not ports:
            raise NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(ports):
            raise NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)  # past this GPU's own link count
        return ports[link]

    def nvmlDeviceGetNvLinkState(self, handle: _Handle, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkState", handle)
        self._port(handle, link)
        return self.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkVersion(self, handle: _Handle, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkVersion", handle)
        self._port(handle, link)
        return self.machine.nvlink_version

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: _Handle, link: int) -> int:
        self._enter("nvmlDeviceGetNvLinkRemoteDeviceType", handle)
        kind, _ = self._port(handle, link)
        return self.NVML_NVLINK_DEVICE_TYPE_SWITCH if kind == "switch" else self.NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: _Handle, link: int) -> SimpleNamespace:
        self._enter("nvmlDeviceGetNvLinkRemotePciInfo", handle)
        kind, remote = self._port(handle, link)
        if kind == "switch":
            return self._pci(f"00000000:{0xC0 + remote:02X}:00.0")  # NVSwitch functions on their own buses
        return self._pci(self.machine.gpus[remote].pci_bus_id)

    # ---- pairs ----
    def nvmlDeviceGetTopologyCommonAncestor(self, first: _Handle, second: _Handle) -> int:
        self._enter("nvmlDeviceGetTopologyCommonAncestor", first, second)
        self._gpu(first), self._gpu(second)
        pair = (min(first.gpu, second.gpu), max(first.gpu, second.gpu))
        return getattr(self, self.machine.topology.get(pair, "NVML_TOPOLOGY_SYSTEM"))

    def nvmlDeviceGetP2PStatus(self, first: _Handle, second: _Handle, index: int) -> int:
        self._enter("nvmlDeviceGetP2PStatus", first, second)
        self._gpu(first), self._gpu(second)
        if not isinstance(index, int):
            # pynvml hands the index to ctypes as is; what a real probe got for pynvml's `(0,)`:
            raise ctypes.ArgumentError("argument 3: TypeError: Don't know how to convert parameter 3")
        return self.machine.p2p_status


for _cls in ERROR_CLASSES.values():
    setattr(FakeNvml, _cls.__name__, _cls)  # like pynvml: FakeNvml.NVMLError_NotSupported, ...


# ---------------------------------------------------------------- recorded fixtures

_SOFTWARE_GPU_BOX = SoftwareInfo.model_validate({
    "torch": "2.13.0", "transformers": "5.17.0", "trl": "1.16.0", "accelerate": "1.15.0", "deepspeed": "0.19.8",
    "peft": "0.21.2", "liger-kernel": "0.8.5", "vllm": "0.11.0", "unsloth": None, "flash-attn": "2.8.3",
    "bitsandbytes": "0.48.1", "kernels": "0.10.4", "datasets": "5.2.0",
})
_SOFTWARE_SMALL = SoftwareInfo.model_validate({
    "torch": "2.13.0", "transformers": "5.17.0", "trl": "1.16.0", "accelerate": "1.15.0", "deepspeed": None,
    "peft": "0.21.2", "liger-kernel": None, "vllm": None, "unsloth": None, "flash-attn": None,
    "bitsandbytes": "0.48.1", "kernels": None, "datasets": "5.2.0",
})
_NO_CLUSTER = ClusterInfo()

# Host sections: RAM as /proc/meminfo reports it (kB * 1024), memlock None = unlimited, shm = /dev/shm size.
FIXTURE_CONTEXT: dict[str, dict[str, Any]] = {
    "h100_sxm_x8_nvlink": dict(
        hostname="h100-node-01",
        host=HostInfo(ram_total_bytes=2113622964 * 1024, ram_available_bytes=2069887320 * 1024, cpu_cores=224,
                      numa_nodes=2, locked_memory_limit_bytes=None, shm_bytes=1056811482 * 1024,
                      disk_free_bytes=3_298_534_883_328, output_dir="/workspace/runs"),
        software=_SOFTWARE_GPU_BOX, cluster=_NO_CLUSTER),
    "rtx4090_x4_pcie_nop2p": dict(
        hostname="workstation",
        host=HostInfo(ram_total_bytes=131780232 * 1024, ram_available_bytes=118201644 * 1024, cpu_cores=32,
                      numa_nodes=1, locked_memory_limit_bytes=8 * MIB, shm_bytes=65890116 * 1024,
                      disk_free_bytes=1_163_101_028_352, output_dir="/home/ml/runs"),
        software=_SOFTWARE_GPU_BOX.model_copy(update={"vllm": None, "unsloth": "2025.11.1"}),
        cluster=_NO_CLUSTER),
    "a100_40gb_x8": dict(
        hostname="dgx-a100-01",
        host=HostInfo(ram_total_bytes=1056567636 * 1024, ram_available_bytes=1021430500 * 1024, cpu_cores=256,
                      numa_nodes=8, locked_memory_limit_bytes=None, shm_bytes=528283818 * 1024,
                      disk_free_bytes=13_194_139_533_312, output_dir="/raid/runs"),
        software=_SOFTWARE_GPU_BOX,
        cluster=ClusterInfo(slurm=True, slurm_job_id="48213", slurm_nodes=2, slurm_gpus_per_node=8,
                            slurm_node_rank=0, slurm_nodelist="dgx-a100-[01-02]")),
    # A container on a shared MIG node: Docker's defaults for memlock (64 KiB) and /dev/shm (64 MiB).
    "a100_mig": dict(
        hostname="3f9c2a7d81e4",
        host=HostInfo(ram_total_bytes=64 * GIB, ram_available_bytes=60 * GIB, cpu_cores=16, numa_nodes=2,
                      locked_memory_limit_bytes=64 * 1024, shm_bytes=64 * MIB, disk_free_bytes=412_316_860_416,
                      output_dir="/workspace/out"),
        software=_SOFTWARE_SMALL, cluster=_NO_CLUSTER),
    "t4_x1": dict(
        hostname="t4-vm",
        host=HostInfo(ram_total_bytes=30817196 * 1024, ram_available_bytes=29102880 * 1024, cpu_cores=8,
                      numa_nodes=1, locked_memory_limit_bytes=64 * 1024, shm_bytes=15408596 * 1024,
                      disk_free_bytes=71_940_702_208, output_dir="/home/user/out"),
        software=_SOFTWARE_SMALL, cluster=_NO_CLUSTER),
    "h200_x1": dict(
        hostname="vm",
        host=HostInfo(ram_total_bytes=131981020 * 1024, ram_available_bytes=131426876 * 1024, cpu_cores=16,
                      numa_nodes=1, locked_memory_limit_bytes=None, shm_bytes=128 * GIB,
                      disk_free_bytes=68_691_099_648, output_dir="/tmp/o"),
        software=SoftwareInfo(torch="2.11.0", transformers="5.17.0", accelerate="1.15.0", peft="0.21.0"),
        cluster=_NO_CLUSTER),
    "no_gpu": dict(
        hostname="laptop",
        host=HostInfo(ram_total_bytes=16207160 * 1024, ram_available_bytes=9938712 * 1024, cpu_cores=8,
                      numa_nodes=1, locked_memory_limit_bytes=8 * MIB, shm_bytes=8103580 * 1024,
                      disk_free_bytes=201_863_462_912, output_dir="/home/dev/out"),
        software=_SOFTWARE_SMALL.model_copy(update={"bitsandbytes": None}), cluster=_NO_CLUSTER),
}


def fixture_report(name: str) -> HardwareReport:
    """The report the probe gives on machine `name`: the real adapter over FakeNvml plus a fixed context."""
    context = FIXTURE_CONTEXT[name]
    reading = read_nvml(FakeNvml(MACHINES[name]), own_pid=FIXTURE_PID, environ={})
    return build_report(reading, context["host"], context["software"], context["cluster"],
                        probed_at=FIXTURE_TIME, hostname=context["hostname"])


def fixture_text(name: str) -> str:
    """The exact contents of tests/fixtures/hardware/<name>.json."""
    return fixture_report(name).to_json() + "\n"


def write_fixtures(directory: Path = FIXTURE_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in MACHINES:
        path = directory / f"{name}.json"
        path.write_text(fixture_text(name), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hw_probe.fake", description=__doc__.splitlines()[0])
    parser.add_argument("--write-fixtures", action="store_true",
                        help=f"write every machine's report into {FIXTURE_DIR}/ (run from the repository root)")
    parser.add_argument("--dir", type=Path, default=FIXTURE_DIR, help="fixture folder (default: %(default)s)")
    parser.add_argument("--show", metavar="NAME", choices=sorted(MACHINES), help="print one machine's report")
    args = parser.parse_args(argv)
    if args.show:
        print(fixture_text(args.show), end="")
        return 0
    if not args.write_fixtures:
        parser.print_help(sys.stderr)
        return 2
    for path in write_fixtures(args.dir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
