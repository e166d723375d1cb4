"""Configurations no machine or library can run are refused or planned for what runs, never written as if they
worked: NVMe offload where the backend has none, MIG GPUs with no instance, more GPUs than the hardware report lists,
a report that mixes GPU kinds; and what check --bundle reads from hand-edited files is held to the flags' grammar."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"


def _errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith(("error: ", "hint: "))]




@pytest.mark.parametrize("flags", [
    ["--gpus", "2", "--backend", "fsdp2", "--offload", "all", "--offload-device", "nvme"],
    ["--gpus", "2", "--backend", "deepspeed", "--zero", "2", "--offload", "optimizer", "--offload-device", "nvme"],
    ["--gpus", "2", "--backend", "deepspeed", "--zero", "1", "--offload", "optimizer", "--offload-device", "nvme"],
])
@pytest.mark.parametrize("command", ["estimate", "check", "generate"])
def test_nvme_offload_is_zero3s_only(tmp_path, capsys, command, flags):
    """FSDP2 offloads to host RAM only; DeepSpeed's ZeRO-1/2 take any offload device as CPU: either would be written
    as "nvme" and run on the CPU's memory."""
    out = ["--out", str(tmp_path / "b")] if command == "generate" else []
    assert main([command, "--model", "qwen2.5-0.5b", "--gpu", "H100-80GB", *flags, *out]) == 2
    assert "nvme" in _errors(capsys)[0] and not (tmp_path / "b").exists()


def test_the_planner_offloads_to_nvme_at_zero3_only(tmp_path, capsys):
    assert main(["generate", "--model", "qwen2.5-0.5b", "--gpu", "H100-80GB", "--gpus", "2", "--offload", "optimizer",
                 "--offload-device", "nvme", "--json", "--out", str(tmp_path / "b")]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert (plan["backend"], plan["zero_stage"], plan["offload_device"]) == ("deepspeed", 3, "nvme")


def test_mig_on_without_an_instance_is_no_gpu(tmp_path, capsys, edited_report):
    def mig_on(d):
        for g in d["gpus"]:
            g["mig_mode"], g["mig_devices"] = True, []
    hw = edited_report(mig_on)
    assert main(["estimate", "--model", "qwen2.5-0.5b", "--hardware", hw]) == 2
    err = _errors(capsys)
    assert "MIG" in err[0] and "no MIG instance" in err[0] and "mig" in err[1]


def test_more_gpus_than_the_report_lists_is_a_usage_error(capsys):
    hw = str(FIXTURES / "h100_sxm_x8_nvlink.json")
    assert main(["estimate", "--model", "qwen2.5-0.5b", "--hardware", hw, "--gpus", "16"]) == 2
    assert "more than the 8" in _errors(capsys)[0]
    assert main(["estimate", "--model", "qwen2.5-0.5b", "--hardware", hw, "--gpus", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hardware"]["gpus_per_node"] == 4


def test_a_report_that_mixes_gpus_is_planned_as_its_slowest(tmp_path, capsys, edited_report):
    a100 = json.loads((FIXTURES / "a100_40gb_x8.json").read_text())["gpus"][0]

    def mix(d):
        d["gpus"][-1] = {**a100, "index": 7}
    hw = edited_report(mix)
    assert main(["estimate", "--model", "qwen2.5-0.5b", "--hardware", hw, "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["hardware"]["gpu"].startswith("A100") and doc["hardware"]["gpu_memory_bytes"] <= a100["memory_total_bytes"]
    assert "mixes GPUs" in captured.err


@pytest.fixture
def bundle(tmp_path):
    out = tmp_path / "b"
    assert main(["generate", "--model", "qwen2.5-0.5b", "--gpu", "H100-80GB", "--out", str(out)]) == 0
    return out


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_check_bundle_holds_attn_in_the_files_to_the_flags_grammar(bundle, capsys):
    _edit(bundle / "train.py", "'attn': 'sdpa'", "'attn': '../../etc'")
    capsys.readouterr()
    assert main(["check", "--bundle", str(bundle)]) == 2
    err = _errors(capsys)
    assert "attn" in err[0] and "neither an attention implementation" in err[0]


def test_check_bundle_refuses_a_model_id_that_is_not_text(bundle, capsys):
    text = (bundle / "train.py").read_text()
    start = text.index("MODEL_ID = ")
    (bundle / "train.py").write_text(text[:start] + "MODEL_ID = 42" + text[text.index("\n", start):])
    capsys.readouterr()
    assert main(["check", "--bundle", str(bundle)]) == 2
    assert _errors(capsys)[0].startswith("error: train.py: MODEL_ID is 42,")  # the number, not the text '42'


def test_model_config_json_of_another_architecture_is_a_files_error(bundle, capsys):
    cfg = json.loads((bundle / "model_config.json").read_text())
    cfg["num_hidden_layers"] = 10 ** 12
    (bundle / "model_config.json").write_text(json.dumps(cfg))
    capsys.readouterr()
    assert main(["check", "--bundle", str(bundle), "--json"]) == 1
    found = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["id"] == "FILES001"]
    assert found and "num_hidden_layers" in found[0]["message"] and "verify --random-init" in found[0]["message"]
    main(["verify", str(bundle), "--dry-run", "--json"])  # a dry run judges nothing: its steps say what fails
    steps = {s["name"]: s for s in json.loads(capsys.readouterr().out)["steps"]}
    assert steps["consistency"]["status"] == "fail" and "model_config.json" in steps["consistency"]["detail"]


def test_a_keyword_set_to_an_expression_is_said_not_read(tmp_path, capsys):
    """A user's train.py whose batch size is a variable: the check says it did not read it, and does not present
    TRL's default as what the files run."""
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "train.py").write_text(
        "import os\nfrom trl import SFTConfig, SFTTrainer\nbs = int(os.environ.get('BS', '32'))\n"
        "cfg = SFTConfig(per_device_train_batch_size=bs, gradient_accumulation_steps=4, max_length=SEQ, bf16=True)\n")
    assert main(["check", "--bundle", str(folder), "--model", "qwen2.5-0.5b", "--gpu", "H100-80GB", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    said = " ".join(doc["assumptions"])
    assert "per_device_train_batch_size = 'bs'" in said and "max_length = 'SEQ'" in said and "not read" in said
    assert not any("TRL default" in a and "batch" in a for a in doc["assumptions"])
