"""The text summary, import hygiene, and the real probe on whatever machine runs the tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from advisor.resolve.hardware import load_report
from hw_probe import probe, render_text
from hw_probe.fake import fixture_report
from hw_probe.model import HardwareReport

REPO = Path(__file__).resolve().parents[2]


def _matrix_rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if cells and cells[0].startswith("GPU") and cells[0][3:].isdigit() and not cells[0].endswith(":"):
            rows[cells[0]] = cells[1:]
    return rows


def test_render_h100_matrix() -> None:
    text = render_text(fixture_report("h100_sxm_x8_nvlink"))
    rows = _matrix_rows(text)
    assert len(rows) == 8
    assert rows["GPU0"] == ["X"] + ["NV18"] * 7
    assert rows["GPU5"][5] == "X" and rows["GPU5"].count("NV18") == 7
    assert "8 x NVIDIA H100 80GB HBM3" in text
    assert "cc 9.0" in text and "PCIe gen5 x16" in text and "79.6 GiB" in text  # 81559 MiB = 79.65 GiB
    assert "CUDA 12.4" in text and "550.54.15" in text
    assert "locked memory (ulimit -l) unlimited" in text
    assert "P2P: supported between all pairs" in text


def test_render_pcie_box_without_p2p() -> None:
    text = render_text(fixture_report("rtx4090_x4_pcie_nop2p"))
    rows = _matrix_rows(text)
    assert rows["GPU2"] == ["PHB", "PHB", "X", "PHB"]
    assert "PHB = " in text and "NV# = " not in text
    assert "not supported between 6 of 6 pairs" in text
    assert "1.8 GiB held by other processes" in text  # 1840 MiB
    assert "locked memory (ulimit -l) 8 MiB" in text
    assert "not installed: vllm" in text


def test_render_mig_and_container_limits() -> None:
    text = render_text(fixture_report("a100_mig"))
    assert text.count("MIG 3g.40gb") == 2
    assert "Topology" not in text  # one GPU: no matrix
    assert "locked memory (ulimit -l) 64 KiB, /dev/shm 64 MiB" in text
    assert "Notes:" in text and "MIG is on" in text


def test_render_cluster_and_no_gpu() -> None:
    assert "SLURM job 48213: 2 node(s), 8 GPU(s)/node" in render_text(fixture_report("a100_40gb_x8"))
    text = render_text(fixture_report("no_gpu"))
    assert text.startswith("GPUs: none found (NVML not available)")
    assert "libnvidia-ml.so.1" in text
    assert "Driver" not in text


def test_import_hw_probe_is_light() -> None:
    code = ("import sys, hw_probe; "
            "print(sorted(m for m in ('pynvml', 'torch', 'textual', 'hw_probe.nvml', 'hw_probe.fake') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", f"`import hw_probe` loaded {out.stdout.strip()}"


def test_probe_loads_neither_torch_nor_textual() -> None:
    code = ("import sys, hw_probe; hw_probe.probe('.'); "
            "print(sorted(m for m in ('torch', 'textual', 'transformers', 'trl') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_fixture_writer_cli(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "hw_probe.fake", "--write-fixtures", "--dir", str(tmp_path)],
                         capture_output=True, text=True, check=True, cwd=REPO)
    assert len(out.stdout.split()) == len(list(tmp_path.glob("*.json"))) >= 6
    assert load_report(tmp_path / "t4_x1.json") == fixture_report("t4_x1")


def test_real_probe_on_this_machine(tmp_path: Path) -> None:
    """Whatever this machine is (with or without a GPU), the probe returns a valid, consistent report."""
    report = probe(str(tmp_path / "out"))
    again = HardwareReport.from_json(report.to_json())
    assert again == report
    json.loads(report.to_json())
    if not report.nvml_available:
        assert report.gpus == () and report.links == ()
        assert report.notes, "a machine without NVML must say why"
    for gpu in report.gpus:
        assert gpu.memory_total_bytes > 0
    n = report.gpu_count
    assert len(report.links) == n * (n - 1) // 2
    if sys.platform.startswith("linux"):
        assert report.host.ram_total_bytes and report.host.ram_total_bytes > (1 << 28)
        assert report.host.cpu_cores and report.host.cpu_cores >= 1
    assert report.host.disk_free_bytes is not None
    assert render_text(report)
