"""The report model (round trip, helpers, validation) and load_report's errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from advisor.core.errors import ExitCode, InputFileError
from advisor.resolve.hardware import load_report
from hw_probe import PROBE_HINT
from hw_probe.fake import fixture_report
from hw_probe.model import LINK_KINDS_FASTEST_FIRST, HardwareReport, LinkInfo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"


def _with_links(links: list[dict], gpus: int = 3) -> HardwareReport:
    data = json.loads(fixture_report("rtx4090_x4_pcie_nop2p").to_json())
    data["gpus"] = data["gpus"][:gpus]
    data["links"] = links
    return HardwareReport.model_validate(data)


# ---- round trip ----

@pytest.mark.parametrize("name", ["h100_sxm_x8_nvlink", "a100_mig", "no_gpu"])
def test_json_round_trip(tmp_path: Path, name: str) -> None:
    report = fixture_report(name)
    path = tmp_path / "hw.json"
    path.write_text(report.to_json())
    assert load_report(path) == report
    assert HardwareReport.from_json(report.to_json()) == report


def test_json_keys_are_the_contract() -> None:
    data = json.loads(fixture_report("a100_mig").to_json())
    assert data["schema"] == "trl-advisor/hardware/1"
    assert set(data) == {"schema", "probed_at", "hostname", "gpus", "links", "driver_version",
                         "cuda_driver_version", "nvml_available", "host", "software", "cluster", "notes"}
    assert set(data["gpus"][0]) == {
        "index", "name", "uuid", "memory_total_bytes", "memory_free_bytes", "memory_used_bytes",
        "compute_capability", "bf16", "fp8", "pcie_gen", "pcie_gen_max", "pcie_width", "mig_mode", "mig_devices",
        "other_process_bytes", "processes", "power_limit_watts"}
    assert set(data["gpus"][0]["mig_devices"][0]) == {"index", "memory_total_bytes", "name"}
    assert set(data["software"]) == {"torch", "transformers", "trl", "accelerate", "deepspeed", "peft",
                                     "liger-kernel", "vllm", "unsloth", "flash-attn", "bitsandbytes", "kernels",
                                     "datasets"}
    assert set(data["host"]) == {"ram_total_bytes", "ram_available_bytes", "cpu_cores", "numa_nodes",
                                 "locked_memory_limit_bytes", "shm_bytes", "disk_free_bytes", "output_dir"}
    assert set(data["cluster"]) == {"slurm", "slurm_job_id", "slurm_nodes", "slurm_gpus_per_node",
                                    "slurm_node_rank", "slurm_nodelist", "torchrun", "world_size",
                                    "local_world_size", "rank", "master_addr"}
    link = json.loads(fixture_report("h100_sxm_x8_nvlink").to_json())["links"][0]
    assert set(link) == {"a", "b", "kind", "nvlink_count", "nvlink_gen", "p2p"}


def test_report_is_frozen() -> None:
    report = fixture_report("t4_x1")
    with pytest.raises(ValidationError):
        report.hostname = "other"  # type: ignore[misc]


def test_unknown_keys_from_a_newer_writer_are_ignored() -> None:
    data = json.loads(fixture_report("t4_x1").to_json())
    data["future_key"] = 1
    data["gpus"][0]["future_gpu_key"] = "x"
    assert HardwareReport.model_validate(data) == fixture_report("t4_x1")


# ---- helpers ----

def test_min_link_kind_is_the_slowest_pair() -> None:
    report = _with_links([
        {"a": 0, "b": 1, "kind": "nvlink", "nvlink_count": 4, "nvlink_gen": 3, "p2p": True},
        {"a": 0, "b": 2, "kind": "cross-socket", "p2p": True},
        {"a": 1, "b": 2, "kind": "pcie-switch", "p2p": True},
    ])
    assert report.min_link_kind == "cross-socket"
    assert report.has_nvlink is True and report.all_nvlink is False
    assert report.all_p2p is True


def test_unknown_link_ranks_slowest() -> None:
    assert LINK_KINDS_FASTEST_FIRST[-1] == "unknown"
    report = _with_links([
        {"a": 0, "b": 1, "kind": "unknown"},
        {"a": 0, "b": 2, "kind": "cross-socket", "p2p": False},
    ])
    assert report.min_link_kind == "unknown"
    assert report.all_p2p is False  # one known refusal outweighs an unknown


def test_all_p2p_unknown_when_a_pair_was_not_read() -> None:
    report = _with_links([{"a": 0, "b": 1, "kind": "pcie-switch", "p2p": True}], gpus=2)
    assert report.all_p2p is True
    report = _with_links([{"a": 0, "b": 1, "kind": "pcie-switch", "p2p": None}], gpus=2)
    assert report.all_p2p is None


def test_link_lookup_either_order() -> None:
    report = fixture_report("rtx4090_x4_pcie_nop2p")
    assert report.link(3, 1) == report.link(1, 3)
    assert report.link(1, 3).a == 1
    assert report.link(2, 2) is None
    assert report.gpu(2).index == 2 and report.gpu(9) is None


# ---- validation ----

def test_link_naming_a_missing_gpu_is_rejected() -> None:
    with pytest.raises(ValidationError, match="not in gpus"):
        _with_links([{"a": 0, "b": 7, "kind": "pcie-switch"}])


def test_link_order_and_nvlink_count_checked() -> None:
    with pytest.raises(ValidationError, match="smaller"):
        LinkInfo(a=2, b=1, kind="pcie-switch")
    with pytest.raises(ValidationError, match="nvlink_count"):
        LinkInfo(a=0, b=1, kind="nvlink", nvlink_count=0)
    with pytest.raises(ValidationError):
        LinkInfo(a=0, b=1, kind="infiniband")


# ---- load_report errors: one line, a hint, exit code 2 ----

def _load_error(path: Path) -> InputFileError:
    with pytest.raises(InputFileError) as info:
        load_report(path)
    err = info.value
    assert "\n" not in err.message
    assert err.hint
    assert err.exit_code == ExitCode.USAGE
    return err


def test_missing_file(tmp_path: Path) -> None:
    err = _load_error(tmp_path / "nope.json")
    assert "not found" in err.message and "nope.json" in err.message
    assert err.hint == PROBE_HINT and "trl-advisor probe --json" in err.hint


def test_folder_instead_of_file(tmp_path: Path) -> None:
    assert "folder" in _load_error(tmp_path).message


def test_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "hw.json"
    path.write_text('{"schema": "trl-advisor/hardware/1",\n  "gpus": [}\n')
    err = _load_error(path)
    assert "not valid JSON" in err.message and "line 2" in err.message


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "hw.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert "cannot read" in _load_error(path).message


@pytest.mark.parametrize("content", ['[1, 2, 3]', '{"request": {}, "memory": {}}', '"text"'])
def test_json_that_is_not_a_report(tmp_path: Path, content: str) -> None:
    path = tmp_path / "hw.json"
    path.write_text(content)
    assert "not a trl-advisor hardware report" in _load_error(path).message


def test_other_schema_version(tmp_path: Path) -> None:
    data = json.loads(fixture_report("t4_x1").to_json())
    data["schema"] = "trl-advisor/hardware/9"
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data))
    err = _load_error(path)
    assert "hardware/9" in err.message and "trl-advisor/hardware/1" in err.message


def test_wrong_shape_names_the_field(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "h100_sxm_x8_nvlink.json").read_text())
    data["gpus"][3]["memory_total_bytes"] = "lots"
    del data["host"]
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data))
    err = _load_error(path)
    assert "not a valid hardware report" in err.message
    assert "gpus.3.memory_total_bytes" in err.message or "host" in err.message
    assert "1 more" in err.message
