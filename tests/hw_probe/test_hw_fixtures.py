"""Every described machine, read by the real NVML adapter through the fake NVML, gives the report its hardware
implies; the committed fixture files are exactly what the fake produces now.

Expected numbers come from the machines' specifications (nvidia-smi MiB totals, datasheet NVLink counts), not
from the code's output.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest

from advisor.resolve.hardware import load_report
from hw_probe.fake import MACHINES, REGENERATE, FakeNvml, fixture_report, fixture_text
from hw_probe.nvml import read_nvml

MIB = 1048576
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"
ALL_PAIRS_OF_8 = 28  # 8 choose 2


def reading(name: str, **kw):
    return read_nvml(FakeNvml(name), own_pid=1, environ={}, **kw)


def test_h100_sxm_x8_nvlink() -> None:
    r = reading("h100_sxm_x8_nvlink")
    assert r.nvml_available
    assert len(r.gpus) == 8
    assert [g.index for g in r.gpus] == list(range(8))
    for gpu in r.gpus:
        assert gpu.name == "NVIDIA H100 80GB HBM3"
        assert gpu.memory_total_bytes == 81559 * MIB
        assert gpu.memory_free_bytes + gpu.memory_used_bytes == gpu.memory_total_bytes
        assert gpu.compute_capability == "9.0"
        assert gpu.bf16 is True and gpu.fp8 is True
        assert (gpu.pcie_gen, gpu.pcie_gen_max, gpu.pcie_width) == (5, 5, 16)
        assert gpu.mig_mode is False and gpu.mig_devices == ()
        assert gpu.power_limit_watts == 700.0
        assert gpu.other_process_bytes == 0
        assert gpu.uuid.startswith("GPU-")
    assert len({g.uuid for g in r.gpus}) == 8
    assert len(r.links) == ALL_PAIRS_OF_8
    assert {(x.a, x.b) for x in r.links} == set(combinations(range(8), 2))
    for link in r.links:
        # All 18 NVLink 4 links of every H100 SXM go to the NVSwitches, so every pair sees NV18.
        assert (link.kind, link.nvlink_count, link.nvlink_gen, link.p2p) == ("nvlink", 18, 4, True)
    assert r.driver_version == "550.54.15"
    assert r.cuda_driver_version == "12.4"
    assert r.notes == ()


def test_rtx4090_x4_pcie_nop2p() -> None:
    r = reading("rtx4090_x4_pcie_nop2p")
    assert len(r.gpus) == 4
    for gpu in r.gpus:
        assert gpu.memory_total_bytes == 24564 * MIB
        assert gpu.compute_capability == "8.9"
        assert gpu.bf16 is True and gpu.fp8 is True  # Ada: fp8 from cc 8.9
        assert gpu.pcie_gen_max == 4
        assert gpu.mig_mode is False  # GeForce answers NOT_SUPPORTED: that means "off", not "unknown"
    assert len(r.links) == 6
    for link in r.links:
        assert (link.kind, link.nvlink_count, link.nvlink_gen, link.p2p) == ("pcie-host-bridge", 0, None, False)
    # GPU 0 holds someone else's 1840 MiB notebook process.
    assert r.gpus[0].other_process_bytes == 1840 * MIB
    assert [(p.pid, p.used_bytes) for p in r.gpus[0].processes] == [(31337, 1840 * MIB)]
    assert r.gpus[1].other_process_bytes == 0
    assert len(r.notes) == 1
    assert "P2P" in r.notes[0] and "6 of 6" in r.notes[0] and "chipset not supported" in r.notes[0]


def test_a100_40gb_x8() -> None:
    r = reading("a100_40gb_x8")
    assert len(r.gpus) == 8
    for gpu in r.gpus:
        assert gpu.name == "NVIDIA A100-SXM4-40GB"
        assert gpu.memory_total_bytes == 40960 * MIB
        assert gpu.compute_capability == "8.0"
        assert gpu.bf16 is True and gpu.fp8 is False
    assert len(r.links) == ALL_PAIRS_OF_8
    for link in r.links:
        assert (link.kind, link.nvlink_count, link.nvlink_gen, link.p2p) == ("nvlink", 12, 3, True)
    assert r.notes == ()


def test_a100_mig() -> None:
    r = reading("a100_mig")
    (gpu,) = r.gpus
    assert gpu.name == "NVIDIA A100-SXM4-80GB"
    assert gpu.memory_total_bytes == 81920 * MIB
    assert gpu.mig_mode is True
    assert [m.index for m in gpu.mig_devices] == [0, 1]
    for mig in gpu.mig_devices:
        assert mig.name.endswith("3g.40gb")
        # 3g.40gb on an A100 80GB: 40192 MiB (`nvidia-smi mig -lgip`), about half the GPU.
        assert mig.memory_total_bytes == 40192 * MIB
    assert r.links == ()
    assert any("MIG is on" in n and "2 MIG device" in n for n in r.notes)


def test_t4_x1() -> None:
    r = reading("t4_x1")
    (gpu,) = r.gpus
    assert gpu.name == "Tesla T4"
    assert gpu.memory_total_bytes == 15360 * MIB
    assert gpu.compute_capability == "7.5"
    assert gpu.bf16 is False and gpu.fp8 is False  # Turing: no bf16
    assert (gpu.pcie_gen, gpu.pcie_gen_max) == (3, 3)
    assert gpu.power_limit_watts == 70.0
    assert r.links == ()
    assert r.notes == ()


def test_no_gpu() -> None:
    r = reading("no_gpu")
    assert r.nvml_available is False
    assert r.gpus == () and r.links == ()
    assert r.driver_version is None and r.cuda_driver_version is None
    assert len(r.notes) == 1 and "libnvidia-ml" in r.notes[0]


def test_h200_machine_reproduces_a_real_probe() -> None:
    """tests/hw_probe/data/h200_real_probe.json was written by `probe()` on a real H200 (pynvml 13.610, driver
    580.159.04; the GPU UUID blanked). The fake machine built from it must give the same GPU section through the
    same adapter."""
    real = json.loads((Path(__file__).parent / "data" / "h200_real_probe.json").read_text())
    fake = json.loads(fixture_report("h200_x1").to_json())
    for real_gpu, fake_gpu in zip(real["gpus"], fake["gpus"], strict=True):
        real_gpu.pop("uuid"), fake_gpu.pop("uuid")
        assert fake_gpu == real_gpu
    for key in ("links", "driver_version", "cuda_driver_version", "nvml_available", "notes"):
        assert fake[key] == real[key], key


# ---- the recorded files ----

@pytest.mark.parametrize("name", sorted(MACHINES))
def test_committed_fixture_is_what_the_fake_produces(name: str) -> None:
    path = FIXTURES / f"{name}.json"
    assert path.exists(), f"{path} is missing; create it with: {REGENERATE}"
    assert path.read_text(encoding="utf-8") == fixture_text(name), (
        f"{path.name} differs from what hw_probe.fake produces now; if the change is intended, regenerate "
        f"from the repository root with: {REGENERATE}   (then read the diff)")


def test_no_stray_fixture_files() -> None:
    on_disk = {p.stem for p in FIXTURES.glob("*.json")}
    assert on_disk == set(MACHINES), f"fixtures without a machine in hw_probe.fake: {sorted(on_disk - set(MACHINES))}"


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_fixture_loads_back_equal(name: str) -> None:
    loaded = load_report(FIXTURES / f"{name}.json")
    assert loaded == fixture_report(name)


def test_fixture_report_helpers() -> None:
    h100 = load_report(FIXTURES / "h100_sxm_x8_nvlink.json")
    assert (h100.gpu_count, h100.has_nvlink, h100.all_nvlink, h100.all_p2p, h100.min_link_kind) == (
        8, True, True, True, "nvlink")
    rtx = load_report(FIXTURES / "rtx4090_x4_pcie_nop2p.json")
    assert (rtx.gpu_count, rtx.has_nvlink, rtx.all_p2p, rtx.min_link_kind) == (4, False, False, "pcie-host-bridge")
    t4 = load_report(FIXTURES / "t4_x1.json")
    assert (t4.gpu_count, t4.has_nvlink, t4.all_nvlink, t4.all_p2p, t4.min_link_kind) == (1, False, False, True, None)
    none = load_report(FIXTURES / "no_gpu.json")
    assert (none.gpu_count, none.nvml_available, none.min_link_kind) == (0, False, None)
    slurm = load_report(FIXTURES / "a100_40gb_x8.json").cluster
    assert (slurm.slurm, slurm.slurm_nodes, slurm.slurm_gpus_per_node) == (True, 2, 8)
