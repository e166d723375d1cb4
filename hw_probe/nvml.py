"""A thin adapter over NVML (the `pynvml` module of the nvidia-ml-py package): GPUs, links, driver.

`read_nvml(nv)` takes the NVML module as an argument so that tests hand in `hw_probe.fake.FakeNvml`; with
`nv=None` it imports `pynvml` here, inside the function, so that `import hw_probe` never loads it.

Every failed call leaves its field None and adds a note; a missing library, driver or GPU gives a reading with
`nvml_available=False` (or no GPUs) and a note. Nothing here raises.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hw_probe.model import GpuInfo, GpuProcess, LinkInfo, MigDevice

MIB = 1 << 20

# nvmlDeviceGetTopologyCommonAncestor levels (nvml.h nvmlGpuTopologyLevel_t) -> link kinds. NODE (both GPUs
# under host bridges of one CPU socket) shares the host-bridge kind: either way traffic crosses the CPU's root
# complex. Keyed by constant name and resolved against the module in use.
_TOPOLOGY_KINDS = {
    "NVML_TOPOLOGY_INTERNAL": "same-board",
    "NVML_TOPOLOGY_SINGLE": "pcie-switch",
    "NVML_TOPOLOGY_MULTIPLE": "pcie-multi-switch",
    "NVML_TOPOLOGY_HOSTBRIDGE": "pcie-host-bridge",
    "NVML_TOPOLOGY_NODE": "pcie-host-bridge",
    "NVML_TOPOLOGY_SYSTEM": "cross-socket",
}

# nvmlDeviceGetNvLinkVersion returns the nvmlNvlinkVersion_t enum, not the NVLink generation: an A100
# answers 5 (NVML_NVLINK_VERSION_3_1), an H100 6 (NVML_NVLINK_VERSION_4_0). Sources: nvml.h
# nvmlNvlinkVersion_t; open-mpi/hwloc issue #658 ("A100 returns 5 which is not NVLink 5").
_NVLINK_ENUM_TO_GEN = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}

# NVML's P2P status codes (nvml.h nvmlGpuP2PStatus_t), spelled as `nvidia-smi topo -p2p r` explains them.
_P2P_REASONS = {
    1: "chipset not supported",
    2: "GPU not supported",
    3: "IOH topology not supported",
    4: "disabled by registry key",
    5: "not supported",
    6: "unknown",
}

_FAILED = object()
"""Sentinel: the NVML call failed (a note was recorded)."""


@dataclass(frozen=True)
class NvmlReading:
    """What NVML told us: the GPU half of a HardwareReport."""

    gpus: tuple[GpuInfo, ...] = ()
    links: tuple[LinkInfo, ...] = ()
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_available: bool = False
    notes: tuple[str, ...] = ()


@dataclass
class _Notes:
    """Collects "X unavailable for GPU 0, GPU 3 (reason)" notes, grouped so that 8 GPUs or 28 pairs that
    fail the same way give one line, not 28."""

    groups: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    plain: list[str] = field(default_factory=list)

    def failed(self, what: str, subject: str, reason: str) -> None:
        subjects = self.groups.setdefault((what, reason), [])
        if subject not in subjects:
            subjects.append(subject)

    def add(self, line: str) -> None:
        if line not in self.plain:
            self.plain.append(line)

    def lines(self) -> tuple[str, ...]:
        grouped = [f"{what} unavailable for {', '.join(subjects)} ({reason})"
                   for (what, reason), subjects in self.groups.items()]
        return tuple(self.plain + grouped)


def _text(value: Any) -> str:
    """NVML strings arrive as str (pynvml decodes them) or bytes (older pynvml)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\0")
    return str(value)


def _bus_key(pci: Any) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) parsed from an nvmlPciInfo_t busId such as `00000000:3B:00.0`.
    Parsing to numbers makes the legacy 4-digit domain and the 8-digit one compare equal."""
    bus_id = getattr(pci, "busId", None)
    if bus_id is None:
        return None
    try:
        domain, bus, rest = _text(bus_id).strip().split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        return None


def _cuda_version_text(version: int) -> str:
    """NVML encodes the CUDA version as 1000 * major + 10 * minor (12040 -> "12.4")."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def _p2p_read_index(nv: Any) -> int:
    """NVML_P2P_CAPS_INDEX_READ. nvidia-ml-py 12.x-13.x define it as `(0,)` (a stray comma), which ctypes
    cannot pass as an unsigned int, so unwrap it."""
    index = getattr(nv, "NVML_P2P_CAPS_INDEX_READ", 0)
    if isinstance(index, tuple):
        index = index[0] if index else 0
    return int(index)


class _Reader:
    """One pass over NVML. Holds the module, the notes and the error classification."""

    def __init__(self, nv: Any, own_pid: int) -> None:
        self.nv = nv
        self.own_pid = own_pid
        self.notes = _Notes()
        self.p2p_refusals: dict[str, list[str]] = {}
        """P2P status reason -> the pairs that answered it."""
        self.error_type: type[BaseException] = getattr(nv, "NVMLError", Exception)

    # ---- calling NVML ----
    def _code(self, name: str) -> object:
        return getattr(self.nv, name, object())

    def _reason(self, exc: BaseException) -> str:
        if isinstance(exc, self.error_type):
            try:
                return str(exc) or type(exc).__name__
            except Exception:  # str() of an NVMLError calls back into the library
                return type(exc).__name__
        return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

    def raw(self, fn_name: str, *args: Any) -> Any:
        """Call NVML; raises whatever it raises (AttributeError when this pynvml lacks the function)."""
        fn = getattr(self.nv, fn_name, None)
        if fn is None:
            raise AttributeError(f"pynvml has no {fn_name}")
        return fn(*args)

    def error_code(self, exc: BaseException) -> object:
        return getattr(exc, "value", None) if isinstance(exc, self.error_type) else None

    def call(self, fn_name: str, *args: Any, what: str, subject: str,
             quiet_codes: tuple[str, ...] = (), quiet_value: Any = _FAILED) -> Any:
        """Call NVML; on failure record "what unavailable for subject (reason)" and return _FAILED.
        Errors whose code is named in `quiet_codes` return `quiet_value` without a note: NOT_SUPPORTED for
        MIG mode on a GPU without MIG is an answer ("off"), not a failure."""
        try:
            return self.raw(fn_name, *args)
        except Exception as exc:
            code = self.error_code(exc)
            if code is not None and any(code == self._code(c) for c in quiet_codes):
                return quiet_value
            self.notes.failed(what, subject, self._reason(exc))
            return _FAILED

    # ---- the whole pass ----
    def read(self, environ: Mapping[str, str]) -> NvmlReading:
        try:
            self.raw("nvmlInit")
        except Exception as exc:
            return NvmlReading(nvml_available=False, notes=(self._init_failure_note(exc),))
        try:
            return self._read_initialised(environ)
        finally:
            try:
                self.raw("nvmlShutdown")
            except Exception:  # shutting down is best effort; the reading is already complete
                pass

    def _init_failure_note(self, exc: BaseException) -> str:
        code = self.error_code(exc)
        if code == self._code("NVML_ERROR_LIBRARY_NOT_FOUND"):
            return ("NVML library (libnvidia-ml.so.1) not found: no NVIDIA driver on this machine, or it is not "
                    "visible here (containers need the NVIDIA container toolkit); no GPUs probed")
        if code == self._code("NVML_ERROR_DRIVER_NOT_LOADED"):
            return "NVIDIA driver not loaded (nvidia-smi would fail too); no GPUs probed"
        if code == self._code("NVML_ERROR_NO_PERMISSION"):
            return "no permission to open the NVIDIA devices (/dev/nvidia*); no GPUs probed"
        return f"NVML could not start ({self._reason(exc)}); no GPUs probed"

    def _read_initialised(self, environ: Mapping[str, str]) -> NvmlReading:
        driver = self.call("nvmlSystemGetDriverVersion", what="driver version", subject="the system")
        cuda = self._cuda_driver_version()
        count = self.call("nvmlDeviceGetCount", what="GPU count (no GPUs listed)", subject="the system")
        if count is _FAILED:
            count = 0
        elif int(count) == 0:
            self.notes.add("NVML found no NVIDIA GPU")
        count = int(count)
        handles: dict[int, Any] = {}
        for index in range(count):
            handle = self.call("nvmlDeviceGetHandleByIndex", index, what="GPU handle (GPU skipped)",
                               subject=f"GPU {index}")
            if handle is not _FAILED:
                handles[index] = handle
        handles = self._visible(handles, environ)
        gpus = [self._gpu(index, handle) for index, handle in handles.items()]
        links = self._links(handles)
        return NvmlReading(
            gpus=tuple(gpus),
            links=tuple(links),
            driver_version=None if driver is _FAILED else _text(driver),
            cuda_driver_version=cuda,
            nvml_available=True,
            notes=self.notes.lines(),
        )

    def _cuda_driver_version(self) -> str | None:
        for fn_name in ("nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2"):
            try:
                return _cuda_version_text(int(self.raw(fn_name)))
            except Exception as exc:
                last = exc
        self.notes.failed("CUDA driver version", "the system", self._reason(last))
        return None

    # ---- CUDA_VISIBLE_DEVICES ----
    def _visible(self, handles: dict[int, Any], environ: Mapping[str, str]) -> dict[int, Any]:
        """NVML lists every GPU whatever CUDA_VISIBLE_DEVICES says; keep the ones a training run will see.
        Entries are GPU UUIDs or indices; indices are CUDA's order, which is NVML's PCI-bus order when
        CUDA_DEVICE_ORDER=PCI_BUS_ID or when all GPUs are the same model (CUDA's default FASTEST_FIRST then
        ties and falls back to bus order)."""
        spec = environ.get("CUDA_VISIBLE_DEVICES")
        if spec is None or not handles:
            return handles
        entries = [e.strip() for e in spec.split(",") if e.strip()]
        if not entries or entries[0] in ("-1", "NoDevFiles"):
            self.notes.add(f"CUDA_VISIBLE_DEVICES={spec!r} hides every GPU from CUDA; listing all NVML GPUs")
            return handles
        uuids = {}
        for index, handle in handles.items():
            try:
                uuids[_text(self.raw("nvmlDeviceGetUUID", handle))] = index
            except Exception:
                pass
        order = list(handles)
        names = set()
        for handle in handles.values():
            try:
                names.add(_text(self.raw("nvmlDeviceGetName", handle)))
            except Exception:
                names.add(None)
        bus_order = environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID" or len(names) == 1
        chosen: list[int] = []
        for entry in entries:
            match = next((i for u, i in uuids.items() if u == entry or u.startswith(entry)), None)
            if match is None and entry.isdigit() and bus_order and int(entry) < len(order):
                match = order[int(entry)]
            if match is None or match in chosen:
                self.notes.add(f"CUDA_VISIBLE_DEVICES={spec!r}: could not map {entry!r} to an NVML GPU; "
                               f"listing all {len(handles)} GPUs")
                return handles
            chosen.append(match)
        self.notes.add(f"CUDA_VISIBLE_DEVICES={spec!r}: listing the {len(chosen)} visible GPU(s) of "
                       f"{len(handles)} (NVML indices {', '.join(map(str, sorted(chosen)))})")
        return {i: handles[i] for i in sorted(chosen)}

    # ---- one GPU ----
    def _gpu(self, index: int, handle: Any) -> GpuInfo:
        subject = f"GPU {index}"
        name = self.call("nvmlDeviceGetName", handle, what="name", subject=subject)
        uuid = self.call("nvmlDeviceGetUUID", handle, what="UUID", subject=subject)

        memory = self.call("nvmlDeviceGetMemoryInfo", handle, what="memory (total reported as 0)",
                           subject=subject)
        total = free = used = None
        if memory is not _FAILED:
            total, free, used = int(memory.total), int(memory.free), int(memory.used)

        cc = self.call("nvmlDeviceGetCudaComputeCapability", handle, what="compute capability", subject=subject)
        cc_text = bf16 = fp8 = None
        if cc is not _FAILED:
            major, minor = int(cc[0]), int(cc[1])
            cc_text = f"{major}.{minor}"
            bf16, fp8 = (major, minor) >= (8, 0), (major, minor) >= (8, 9)

        def optional_int(fn_name: str, what: str) -> int | None:
            value = self.call(fn_name, handle, what=what, subject=subject)
            return None if value is _FAILED else int(value)

        pcie_gen = optional_int("nvmlDeviceGetCurrPcieLinkGeneration", "PCIe generation")
        pcie_gen_max = optional_int("nvmlDeviceGetMaxPcieLinkGeneration", "PCIe max generation")
        pcie_width = optional_int("nvmlDeviceGetCurrPcieLinkWidth", "PCIe link width")

        mig_mode, mig_devices = self._mig(subject, handle)
        processes, other_bytes = self._processes(subject, handle)

        power = self.call("nvmlDeviceGetEnforcedPowerLimit", handle, what="power limit", subject=subject)
        power_watts = None if power is _FAILED else int(power) / 1000.0  # NVML reports milliwatts

        return GpuInfo(
            index=index,
            name="unknown NVIDIA GPU" if name is _FAILED else _text(name),
            uuid=None if uuid is _FAILED else _text(uuid),
            memory_total_bytes=0 if total is None else total,
            memory_free_bytes=free,
            memory_used_bytes=used,
            compute_capability=cc_text,
            bf16=bf16,
            fp8=fp8,
            pcie_gen=pcie_gen or None,
            pcie_gen_max=pcie_gen_max or None,
            pcie_width=pcie_width or None,
            mig_mode=mig_mode,
            mig_devices=tuple(mig_devices),
            other_process_bytes=other_bytes,
            processes=tuple(processes),
            power_limit_watts=power_watts,
        )

    def _mig(self, subject: str, handle: Any) -> tuple[bool | None, list[MigDevice]]:
        disabled = getattr(self.nv, "NVML_DEVICE_MIG_DISABLE", 0)
        enabled = getattr(self.nv, "NVML_DEVICE_MIG_ENABLE", 1)
        modes = self.call("nvmlDeviceGetMigMode", handle, what="MIG mode", subject=subject,
                          quiet_codes=("NVML_ERROR_NOT_SUPPORTED",), quiet_value=(disabled, disabled))
        if modes is _FAILED:
            return None, []
        current, pending = int(modes[0]), int(modes[1])
        if current != pending:
            self.notes.add(f"{subject}: MIG mode change pending (now {'on' if current == enabled else 'off'}); "
                           "it takes effect after a GPU reset")
        if current != enabled:
            return False, []
        devices: list[MigDevice] = []
        slots = self.call("nvmlDeviceGetMaxMigDeviceCount", handle, what="MIG devices", subject=subject)
        for slot in range(0 if slots is _FAILED else int(slots)):
            mig = self.call("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot, what="MIG device",
                            subject=f"{subject} slot {slot}", quiet_codes=("NVML_ERROR_NOT_FOUND",),
                            quiet_value=None)  # an empty slot answers NOT_FOUND
            if mig is None or mig is _FAILED:
                continue
            mig_subject = f"{subject} MIG {slot}"
            name = self.call("nvmlDeviceGetName", mig, what="MIG device name", subject=mig_subject)
            memory = self.call("nvmlDeviceGetMemoryInfo", mig, what="MIG device memory", subject=mig_subject)
            devices.append(MigDevice(
                index=slot,
                memory_total_bytes=None if memory is _FAILED else int(memory.total),
                name=None if name is _FAILED else _text(name),
            ))
        names = ", ".join(d.name.rsplit(" ", 1)[-1] if d.name else "?" for d in devices)
        self.notes.add(f"{subject}: MIG is on; CUDA sees {len(devices)} MIG device(s) ({names or 'none'}) instead "
                       "of the whole GPU, and one process uses one MIG device")
        return True, devices

    def _processes(self, subject: str, handle: Any) -> tuple[list[GpuProcess], int | None]:
        try:
            raw = self.raw("nvmlDeviceGetComputeRunningProcesses", handle)
        except Exception as exc:
            if isinstance(exc, self.error_type):  # a real NVML answer (no permission, not supported)
                self.notes.failed("running processes", subject, self._reason(exc))
                return [], None
            # pynvml's unversioned function raises NVMLLibraryMismatchError (not an NVMLError) on drivers that
            # lack its _v3 symbol; _v2 still works there.
            raw = self.call("nvmlDeviceGetComputeRunningProcesses_v2", handle, what="running processes",
                            subject=subject)
            if raw is _FAILED:
                return [], None
        processes = []
        for proc in raw:
            used = getattr(proc, "usedGpuMemory", None)
            processes.append(GpuProcess(pid=int(proc.pid), used_bytes=None if used is None else int(used)))
        others = [p for p in processes if p.pid != self.own_pid]
        if any(p.used_bytes is None for p in others):
            self.notes.failed("memory of other processes", subject, "the driver does not report it")
            return processes, None
        return processes, sum(p.used_bytes or 0 for p in others)

    # ---- pairs ----
    def _links(self, handles: dict[int, Any]) -> list[LinkInfo]:
        if len(handles) < 2:
            return []
        bus_to_index: dict[tuple[int, int, int, int], int] = {}
        for index, handle in handles.items():
            pci = self.call("nvmlDeviceGetPciInfo", handle, what="PCI bus id", subject=f"GPU {index}")
            key = None if pci is _FAILED else _bus_key(pci)
            if key is not None:
                bus_to_index[key] = index
        ends = {index: self._nvlink_ends(index, handle, bus_to_index) for index, handle in handles.items()}
        read_index = _p2p_read_index(self.nv)
        links = []
        indices = sorted(handles)
        for pos, a in enumerate(indices):
            for b in indices[pos + 1:]:
                links.append(self._pair(a, b, handles[a], handles[b], ends[a], ends[b], read_index))
        self._p2p_notes(links)
        return links

    def _nvlink_ends(self, index: int, handle: Any, bus_to_index: dict) -> _NvlinkEnds:
        """Walk the GPU's NVLink ports: count active links to each peer GPU and to NVSwitches."""
        ends = _NvlinkEnds()
        subject = f"GPU {index}"
        max_links = int(getattr(self.nv, "NVML_NVLINK_MAX_LINKS", 18))
        enabled = getattr(self.nv, "NVML_FEATURE_ENABLED", 1)
        switch_type = getattr(self.nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", 2)
        gpu_type = getattr(self.nv, "NVML_NVLINK_DEVICE_TYPE_GPU", 0)
        # NVML_NVLINK_MAX_LINKS (36 in nvidia-ml-py 13) is a ceiling across architectures: a GPU without NVLink
        # answers NOT_SUPPORTED and indices past the GPU's own link count answer INVALID_ARGUMENT (see
        # NVIDIA/TensorRT-LLM PR 17060); neither is a failure.
        absent = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_INVALID_ARGUMENT")
        for link in range(max_links):
            state = self.call("nvmlDeviceGetNvLinkState", handle, link, what="NVLink state", subject=subject,
                              quiet_codes=absent, quiet_value=None)
            if state is None or state is _FAILED or state != enabled:
                continue
            if ends.version_enum is None:
                version = self.call("nvmlDeviceGetNvLinkVersion", handle, link, what="NVLink version",
                                    subject=subject)
                if version is not _FAILED:
                    ends.version_enum = int(version)
            remote_type = None
            try:
                remote_type = self.raw("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
            except Exception:  # older drivers lack it; the remote bus id below still tells GPUs apart
                pass
            pci = self.call("nvmlDeviceGetNvLinkRemotePciInfo", handle, link, what="NVLink remote device",
                            subject=subject)
            peer = None if pci is _FAILED else bus_to_index.get(_bus_key(pci))
            if peer is not None and peer != index and remote_type in (None, gpu_type):
                ends.direct[peer] += 1
            elif remote_type == switch_type or remote_type is None:
                # A link to an NVSwitch (HGX/DGX boards) reaches every GPU on the switch fabric. Without a remote
                # type, a link whose far end is not one of our GPUs is taken to be a switch link.
                ends.switch += 1
            # else: an IBM NPU or a GPU outside the probed set: no GPU-to-GPU path here
        return ends

    def _pair(self, a: int, b: int, ha: Any, hb: Any, ea: _NvlinkEnds, eb: _NvlinkEnds,
              read_index: int) -> LinkInfo:
        pair = f"GPUs {a}-{b}"
        # Links through the NVSwitch fabric: the pair can use as many as the less-connected GPU has.
        count = max(ea.direct[b], eb.direct[a]) + (min(ea.switch, eb.switch) if ea.switch and eb.switch else 0)
        gen = None
        if count:
            gens = [_NVLINK_ENUM_TO_GEN.get(e.version_enum) for e in (ea, eb) if e.version_enum is not None]
            gen = min((g for g in gens if g is not None), default=None)

        level = self.call("nvmlDeviceGetTopologyCommonAncestor", ha, hb, what="PCIe topology", subject=pair)
        kind = "unknown"
        if level is not _FAILED:
            kind = next((k for name, k in _TOPOLOGY_KINDS.items() if getattr(self.nv, name, None) == level),
                        "unknown")
            if kind == "unknown":
                self.notes.failed("PCIe topology", pair, f"unrecognised NVML topology level {level}")
        if count:
            kind = "nvlink"

        status = self.call("nvmlDeviceGetP2PStatus", ha, hb, read_index, what="P2P status", subject=pair)
        p2p = None
        ok = getattr(self.nv, "NVML_P2P_STATUS_OK", 0)
        if status is not _FAILED:
            p2p = status == ok
            if not p2p:
                self.p2p_refusals.setdefault(_P2P_REASONS.get(int(status), f"status {status}"), []).append(pair)
        return LinkInfo(a=a, b=b, kind=kind, nvlink_count=count, nvlink_gen=gen, p2p=p2p)

    def _p2p_notes(self, links: list[LinkInfo]) -> None:
        for reason, pairs in self.p2p_refusals.items():
            self.notes.add(f"P2P reads not available between {len(pairs)} of {len(links)} GPU pair(s) ({reason}): "
                           "GPU-to-GPU traffic goes through host memory")


@dataclass
class _NvlinkEnds:
    """One GPU's active NVLinks: how many reach each peer directly, how many reach an NVSwitch."""

    direct: Counter = field(default_factory=Counter)
    switch: int = 0
    version_enum: int | None = None


def read_nvml(nv: Any = None, *, own_pid: int | None = None,
              environ: Mapping[str, str] | None = None) -> NvmlReading:
    """Read every GPU, every GPU pair and the driver through NVML. Never raises.

    nv: an NVML module (`pynvml`, or a `hw_probe.fake.FakeNvml`); None imports pynvml.
    own_pid: the process whose GPU memory does not count as "other processes" (default: this one).
    environ: for CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER (default: os.environ).
    """
    if nv is None:
        try:
            import pynvml as nv  # only here: `import hw_probe` never loads NVML
        except ImportError:
            return NvmlReading(nvml_available=False, notes=(
                "pynvml is not installed (pip install nvidia-ml-py); no GPUs probed",))
    reader = _Reader(nv, os.getpid() if own_pid is None else own_pid)
    try:
        return reader.read(os.environ if environ is None else environ)
    except Exception as exc:  # a bug or a very odd library must not turn `probe` into a traceback
        return NvmlReading(nvml_available=False, notes=(
            f"GPU probe failed unexpectedly ({type(exc).__name__}: {exc}); no GPUs probed",))
