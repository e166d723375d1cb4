"""The NVML adapter when single calls fail, when the library is missing, and on topologies the fixtures lack."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from hw_probe import probe
from hw_probe.fake import MACHINES, FakeGpu, FakeMachine, FakeNvml, _bridged_pairs
from hw_probe.nvml import _p2p_read_index, read_nvml

MIB = 1048576
E = FakeNvml  # error codes live on the fake module, as they do on pynvml


def read(machine, errors=None, environ=None, own_pid=1):
    fake = FakeNvml(machine, errors)
    return read_nvml(fake, own_pid=own_pid, environ=environ or {}), fake


# ---- one failing call: that field is None, a note says so, everything else is read ----

def test_power_limit_failure_on_one_gpu() -> None:
    r, _ = read("h100_sxm_x8_nvlink", {"nvmlDeviceGetEnforcedPowerLimit@1": E.NVML_ERROR_NOT_SUPPORTED})
    assert r.gpus[1].power_limit_watts is None
    assert all(g.power_limit_watts == 700.0 for g in r.gpus if g.index != 1)
    assert r.notes == ("power limit unavailable for GPU 1 (Not Supported)",)


def test_memory_failure_reports_zero_total_and_a_note() -> None:
    r, _ = read("t4_x1", {"nvmlDeviceGetMemoryInfo": E.NVML_ERROR_UNKNOWN})
    gpu = r.gpus[0]
    assert (gpu.memory_total_bytes, gpu.memory_free_bytes, gpu.memory_used_bytes) == (0, None, None)
    assert gpu.compute_capability == "7.5"  # the rest is still read
    assert any("memory" in n and "GPU 0" in n and "Unknown Error" in n for n in r.notes)


def test_compute_capability_failure_leaves_dtypes_unknown() -> None:
    r, _ = read("t4_x1", {"nvmlDeviceGetCudaComputeCapability": E.NVML_ERROR_GPU_IS_LOST})
    gpu = r.gpus[0]
    assert (gpu.compute_capability, gpu.bf16, gpu.fp8) == (None, None, None)
    assert any("compute capability" in n and "GPU is lost" in n for n in r.notes)


def test_pcie_and_uuid_and_name_failures() -> None:
    r, _ = read("t4_x1", {"nvmlDeviceGetMaxPcieLinkGeneration": E.NVML_ERROR_NO_PERMISSION,
                          "nvmlDeviceGetUUID": E.NVML_ERROR_UNKNOWN, "nvmlDeviceGetName": E.NVML_ERROR_UNKNOWN})
    gpu = r.gpus[0]
    assert gpu.pcie_gen_max is None and gpu.pcie_gen == 3
    assert gpu.uuid is None
    assert gpu.name == "unknown NVIDIA GPU"
    assert len(r.notes) == 3


def test_same_failure_on_every_pair_is_one_note() -> None:
    r, _ = read("rtx4090_x4_pcie_nop2p", {"nvmlDeviceGetTopologyCommonAncestor": E.NVML_ERROR_UNKNOWN})
    assert all(x.kind == "unknown" for x in r.links)
    topo_notes = [n for n in r.notes if "PCIe topology" in n]
    assert len(topo_notes) == 1
    assert all(f"GPUs {a}-{b}" in topo_notes[0] for a, b in ((0, 1), (0, 3), (2, 3)))


def test_topology_failure_does_not_hide_nvlink() -> None:
    r, _ = read("h100_sxm_x8_nvlink", {"nvmlDeviceGetTopologyCommonAncestor": E.NVML_ERROR_UNKNOWN})
    assert all(x.kind == "nvlink" and x.nvlink_count == 18 for x in r.links)


def test_p2p_failure_is_none_not_false() -> None:
    r, _ = read("h100_sxm_x8_nvlink", {"nvmlDeviceGetP2PStatus@0-1": E.NVML_ERROR_UNKNOWN})
    by_pair = {(x.a, x.b): x.p2p for x in r.links}
    assert by_pair[(0, 1)] is None
    assert sum(v is True for v in by_pair.values()) == 27
    assert r.notes == ("P2P status unavailable for GPUs 0-1 (Unknown Error)",)


def test_nvlink_state_failure_counts_no_links_and_notes_it() -> None:
    r, _ = read("a100_40gb_x8", {"nvmlDeviceGetNvLinkState@3": E.NVML_ERROR_UNKNOWN})
    for link in r.links:
        expected = 0 if 3 in (link.a, link.b) else 12
        assert link.nvlink_count == expected
        if expected == 0:
            assert link.kind in ("pcie-multi-switch", "cross-socket") and link.nvlink_gen is None
    assert any("NVLink state" in n and "GPU 3" in n for n in r.notes)


def test_nvlink_version_failure_keeps_count() -> None:
    r, _ = read("h100_sxm_x8_nvlink", {"nvmlDeviceGetNvLinkVersion": E.NVML_ERROR_NOT_SUPPORTED})
    assert all(x.nvlink_count == 18 and x.nvlink_gen is None for x in r.links)


def test_nvlink_without_remote_type_still_counts_switch_links() -> None:
    # Drivers without nvmlDeviceGetNvLinkRemoteDeviceType: a far end that is not one of our GPUs is a switch.
    r, _ = read("h100_sxm_x8_nvlink", {"nvmlDeviceGetNvLinkRemoteDeviceType": E.NVML_ERROR_FUNCTION_NOT_FOUND})
    assert all(x.nvlink_count == 18 for x in r.links)
    assert r.notes == ()


def test_handle_failure_skips_that_gpu_only() -> None:
    r, _ = read("rtx4090_x4_pcie_nop2p", {"nvmlDeviceGetHandleByIndex@2": E.NVML_ERROR_GPU_IS_LOST})
    assert [g.index for g in r.gpus] == [0, 1, 3]
    assert {(x.a, x.b) for x in r.links} == {(0, 1), (0, 3), (1, 3)}
    assert any("GPU 2" in n and "GPU is lost" in n for n in r.notes)


def test_driver_and_cuda_version_failures() -> None:
    r, _ = read("t4_x1", {"nvmlSystemGetDriverVersion": E.NVML_ERROR_UNKNOWN,
                          "nvmlSystemGetCudaDriverVersion": E.NVML_ERROR_FUNCTION_NOT_FOUND,
                          "nvmlSystemGetCudaDriverVersion_v2": E.NVML_ERROR_FUNCTION_NOT_FOUND})
    assert r.driver_version is None and r.cuda_driver_version is None
    assert len(r.gpus) == 1
    assert len(r.notes) == 2


def test_cuda_version_falls_back_to_v2() -> None:
    r, _ = read("t4_x1", {"nvmlSystemGetCudaDriverVersion": E.NVML_ERROR_FUNCTION_NOT_FOUND})
    assert r.cuda_driver_version == "12.2" and r.notes == ()


def test_process_list_failure() -> None:
    r, _ = read("t4_x1", {"nvmlDeviceGetComputeRunningProcesses": E.NVML_ERROR_NO_PERMISSION})
    assert r.gpus[0].other_process_bytes is None and r.gpus[0].processes == ()
    assert any("running processes" in n for n in r.notes)


def test_process_list_library_mismatch_falls_back_to_v2() -> None:
    class MismatchedNvml(FakeNvml):
        def nvmlDeviceGetComputeRunningProcesses(self, handle):
            raise RuntimeError("pyNVML version does not match the NVML lib")  # pynvml's mismatch is no NVMLError

    r = read_nvml(MismatchedNvml("rtx4090_x4_pcie_nop2p"), own_pid=1, environ={})
    assert r.gpus[0].other_process_bytes == 1840 * MIB


def test_own_process_is_not_other_memory() -> None:
    gpu = replace(MACHINES["t4_x1"].gpus[0], processes=((500, 1000), (777, 200)))
    machine = replace(MACHINES["t4_x1"], gpus=(gpu,))
    r, _ = read(machine, own_pid=500)
    assert r.gpus[0].other_process_bytes == 200 * MIB
    assert len(r.gpus[0].processes) == 2


def test_unreported_process_memory_makes_other_bytes_unknown() -> None:
    gpu = replace(MACHINES["t4_x1"].gpus[0], processes=((500, None),))
    r, _ = read(replace(MACHINES["t4_x1"], gpus=(gpu,)))
    assert r.gpus[0].other_process_bytes is None
    assert r.gpus[0].processes[0].used_bytes is None
    assert any("other processes" in n for n in r.notes)


def test_mig_pending_change_is_noted() -> None:
    gpu = replace(MACHINES["a100_mig"].gpus[0], mig_on=False, mig_pending=True, mig_devices=())
    r, _ = read(replace(MACHINES["a100_mig"], gpus=(gpu,)))
    assert r.gpus[0].mig_mode is False
    assert any("MIG mode change pending" in n for n in r.notes)


def test_mig_mode_failure_is_unknown() -> None:
    r, _ = read("a100_mig", {"nvmlDeviceGetMigMode": E.NVML_ERROR_UNKNOWN})
    assert r.gpus[0].mig_mode is None and r.gpus[0].mig_devices == ()


# ---- the whole library missing or failing: a valid, empty reading ----

@pytest.mark.parametrize(("code", "words"), [
    (FakeNvml.NVML_ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml"),
    (FakeNvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver not loaded"),
    (FakeNvml.NVML_ERROR_NO_PERMISSION, "permission"),
    (FakeNvml.NVML_ERROR_UNKNOWN, "Unknown Error"),
])
def test_init_failures(code: int, words: str) -> None:
    r, fake = read("h100_sxm_x8_nvlink", {"nvmlInit": code})
    assert r.nvml_available is False and r.gpus == ()
    assert len(r.notes) == 1 and words in r.notes[0]
    assert fake.shutdowns == 0


def test_zero_gpus() -> None:
    r, fake = read(FakeMachine(name="empty"))
    assert r.nvml_available is True and r.gpus == ()
    assert r.notes == ("NVML found no NVIDIA GPU",)
    assert fake.shutdowns == 1


def test_shutdown_after_a_full_read() -> None:
    _, fake = read("rtx4090_x4_pcie_nop2p", {"nvmlDeviceGetEnforcedPowerLimit": E.NVML_ERROR_UNKNOWN})
    assert fake.shutdowns == 1 and not fake.initialised


def test_pynvml_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    r = read_nvml(None, environ={})
    assert r.nvml_available is False and "nvidia-ml-py" in r.notes[0]


def test_an_unexpected_bug_in_the_module_is_contained() -> None:
    class Broken(FakeNvml):
        def nvmlDeviceGetCount(self):
            return "eight"  # int("eight") fails inside the reader, outside any NVML call

    r = read_nvml(Broken("t4_x1"), environ={})
    assert r.nvml_available is False and "unexpectedly" in r.notes[0]


def test_probe_with_a_fake_never_raises(tmp_path) -> None:
    report = probe(str(tmp_path / "new" / "dir"), nvml=FakeNvml("no_gpu"), environ={})
    assert report.nvml_available is False and report.gpu_count == 0
    assert report.host.output_dir == str(tmp_path / "new" / "dir")
    assert report.host.disk_free_bytes is not None  # measured on the nearest existing parent


# ---- pynvml's P2P index constant ----

def test_p2p_read_index_is_unwrapped() -> None:
    # nvidia-ml-py defines NVML_P2P_CAPS_INDEX_READ = 0, (a tuple); the fake copies that, and a real run showed
    # ctypes refusing it. Reading every pair of a P2P machine proves the adapter passes a plain 0.
    assert FakeNvml.NVML_P2P_CAPS_INDEX_READ == (0,)
    r, _ = read("a100_40gb_x8")
    assert all(x.p2p is True for x in r.links)


def test_p2p_read_index_of_the_installed_pynvml() -> None:
    pynvml = pytest.importorskip("pynvml")
    index = _p2p_read_index(pynvml)
    assert index == 0 and type(index) is int


def test_fake_constants_match_pynvml() -> None:
    pynvml = pytest.importorskip("pynvml")
    names = [n for n in dir(FakeNvml) if n.startswith("NVML_")]
    assert len(names) > 25
    for name in names:
        assert getattr(FakeNvml, name) == getattr(pynvml, name), name
    for name in ("NVMLError_NotSupported", "NVMLError_LibraryNotFound", "NVMLError_InvalidArgument"):
        assert hasattr(pynvml, name) and hasattr(FakeNvml, name)
        assert getattr(FakeNvml, name)().value == getattr(pynvml, name)().value
        assert str(getattr(FakeNvml, name)()) == str(getattr(pynvml, name)())


# ---- topologies the fixtures do not cover ----

def _a6000_bridged() -> FakeMachine:
    """Four RTX A6000 with NVLink bridges on 0-1 and 2-3 (4 NVLink 3 links per bridge), PCIe otherwise."""
    gpu = dict(name="NVIDIA RTX A6000", memory_mib=49140, cc=(8, 6), pcie_gen=4, pcie_gen_max=4)
    topology = {(0, 1): "NVML_TOPOLOGY_SINGLE", (2, 3): "NVML_TOPOLOGY_SINGLE", (0, 2): "NVML_TOPOLOGY_NODE",
                (0, 3): "NVML_TOPOLOGY_NODE", (1, 2): "NVML_TOPOLOGY_NODE", (1, 3): "NVML_TOPOLOGY_SYSTEM"}
    return FakeMachine(
        name="a6000_bridged",
        gpus=tuple(FakeGpu(pci_bus_id=f"00000000:{b:02X}:00.0", **gpu) for b in (0x1A, 0x1B, 0x3D, 0x3E)),
        topology=topology, nvlinks=_bridged_pairs([(0, 1), (2, 3)], links=4), nvlink_version=4)


def test_bridged_pairs() -> None:
    r, _ = read(_a6000_bridged())
    links = {(x.a, x.b): x for x in r.links}
    assert (links[0, 1].kind, links[0, 1].nvlink_count, links[0, 1].nvlink_gen) == ("nvlink", 4, 3)
    assert (links[2, 3].kind, links[2, 3].nvlink_count) == ("nvlink", 4)
    assert (links[0, 2].kind, links[0, 2].nvlink_count) == ("pcie-host-bridge", 0)
    assert links[1, 3].kind == "cross-socket"
    assert r.notes == ()


def test_bridged_pairs_report_helpers(tmp_path) -> None:
    report = probe(str(tmp_path), nvml=FakeNvml(_a6000_bridged()), environ={})
    assert report.has_nvlink is True and report.all_nvlink is False
    assert report.min_link_kind == "cross-socket"


@pytest.mark.parametrize(("level", "kind"), [
    ("NVML_TOPOLOGY_INTERNAL", "same-board"), ("NVML_TOPOLOGY_SINGLE", "pcie-switch"),
    ("NVML_TOPOLOGY_MULTIPLE", "pcie-multi-switch"), ("NVML_TOPOLOGY_HOSTBRIDGE", "pcie-host-bridge"),
    ("NVML_TOPOLOGY_NODE", "pcie-host-bridge"), ("NVML_TOPOLOGY_SYSTEM", "cross-socket"),
])
def test_topology_levels(level: str, kind: str) -> None:
    machine = replace(MACHINES["rtx4090_x4_pcie_nop2p"], topology={(0, 1): level})
    r, _ = read(machine)
    assert {(x.a, x.b): x.kind for x in r.links}[(0, 1)] == kind


# ---- CUDA_VISIBLE_DEVICES ----

def test_cuda_visible_devices_by_index() -> None:
    r, _ = read("h100_sxm_x8_nvlink", environ={"CUDA_VISIBLE_DEVICES": "2,5"})
    assert [g.index for g in r.gpus] == [2, 5]
    assert [(x.a, x.b) for x in r.links] == [(2, 5)]
    assert any("2 visible GPU(s) of 8" in n for n in r.notes)


def test_cuda_visible_devices_by_uuid() -> None:
    full, _ = read("rtx4090_x4_pcie_nop2p")
    uuid3 = full.gpus[3].uuid
    r, _ = read("rtx4090_x4_pcie_nop2p", environ={"CUDA_VISIBLE_DEVICES": uuid3[:12]})
    assert [g.index for g in r.gpus] == [3]


@pytest.mark.parametrize("spec", ["9", "0,0", "MIG-abc", "-1", ""])
def test_cuda_visible_devices_unmappable_lists_all(spec: str) -> None:
    r, _ = read("rtx4090_x4_pcie_nop2p", environ={"CUDA_VISIBLE_DEVICES": spec})
    assert len(r.gpus) == 4
    assert any("CUDA_VISIBLE_DEVICES" in n for n in r.notes)


def test_cuda_visible_devices_indices_ambiguous_on_mixed_gpus() -> None:
    # CUDA orders mixed GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID: NVML order may not match.
    t4 = MACHINES["t4_x1"].gpus[0]
    h100 = MACHINES["h100_sxm_x8_nvlink"].gpus[0]
    mixed = FakeMachine(name="mixed", gpus=(t4, h100))
    r, _ = read(mixed, environ={"CUDA_VISIBLE_DEVICES": "1"})
    assert len(r.gpus) == 2
    r, _ = read(mixed, environ={"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert [g.name for g in r.gpus] == ["NVIDIA H100 80GB HBM3"]
