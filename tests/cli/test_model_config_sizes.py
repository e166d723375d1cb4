"""A local config.json whose sizes are each within range but together make a model no one has (a vocab_size of
10**12, a hidden_size or layer count near 2**40, a vision tower of 2**40-pixel images): `--model` and `--teacher`
refuse it as a usage error naming the parameter count, instead of estimating 10**16 to 10**27 parameters. The
largest real shapes (a few trillion parameters) still load."""

from __future__ import annotations

import json

import pytest
from model_configs import QWEN_SMALL

from advisor.cli import main

GEMMA3 = {"model_type": "gemma3", "text_config": {**QWEN_SMALL, "model_type": "gemma3_text"}}


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))


def model_folder(tmp_path, config: dict) -> str:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


HUGE = {
    "vocab": {**QWEN_SMALL, "vocab_size": 10**12},
    "hidden": {**QWEN_SMALL, "hidden_size": 2**40 // 14 * 14},
    "layers": {**QWEN_SMALL, "num_hidden_layers": 2**40},
    "intermediate": {**QWEN_SMALL, "intermediate_size": 2**40},
    "experts": {**QWEN_SMALL, "model_type": "qwen2_moe", "num_experts": 2**40, "num_experts_per_tok": 2,
                "moe_intermediate_size": 1408},
    "vision": {**GEMMA3, "vision_config": {"image_size": 2**40, "patch_size": 1}},
}


@pytest.mark.parametrize("flag", ["--model", "--teacher"])
@pytest.mark.parametrize("name", sorted(HUGE))
def test_a_config_of_impossible_total_size_is_a_usage_error(tmp_path, capsys, name, flag):
    path = model_folder(tmp_path, HUGE[name])
    request = ["--model", "0.5B", "--trainer", "gkd", "--teacher", path] if flag == "--teacher" else ["--model", path]
    rc = main(["estimate", *request, "--gpu", "H100-80GB"])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    assert "parameters, more than the 1e+14 of any model" in lines[0], err


def test_a_model_of_a_few_trillion_parameters_still_loads(tmp_path, capsys):
    config = {**QWEN_SMALL, "hidden_size": 32768, "num_attention_heads": 128, "num_key_value_heads": 8,
              "intermediate_size": 131072, "num_hidden_layers": 200, "tie_word_embeddings": False}
    rc = main(["estimate", "--model", model_folder(tmp_path, config), "--gpu", "H100-80GB", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert 10**12 < json.loads(out)["model"]["params"] < 10**13
