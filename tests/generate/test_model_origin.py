"""train.py's MODEL_ID line says where the architecture came from (a catalogue row only when it is one), and a
pre-quantized checkpoint's requirements.txt says which package it leaves to the user."""

from __future__ import annotations

import json
import re

from advisor.bundle.generate import generate
from advisor.core.request import Request


def _model_id_line(out) -> str:
    return next(line for line in (out / "train.py").read_text().splitlines() if line.startswith("MODEL_ID = "))


def test_a_catalogue_model_is_labelled_by_its_row(tmp_path):
    generate(Request(model="0.5B", gpu="H100-80GB", gpus=1), out=str(tmp_path / "b"))
    assert re.search(r"# catalogue qwen2\.5-0\.5b: https://huggingface\.co/", _model_id_line(tmp_path / "b"))


def test_a_local_config_is_not_labelled_catalogue(tmp_path):
    folder = tmp_path / "my model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
        "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 2048}))
    generate(Request(model=str(folder), gpu="H100-80GB", gpus=1), out=str(tmp_path / "b"))
    line = _model_id_line(tmp_path / "b")
    assert "catalogue" not in line and "# local config.json: file://" in line


def test_a_pre_quantized_checkpoint_names_the_package_requirements_do_not_list(tmp_path):
    folder = tmp_path / "gptq"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
        "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 2048,
        "quantization_config": {"quant_method": "gptq", "bits": 4}}))
    generate(Request(model=str(folder), gpu="H100-80GB", gpus=1), out=str(tmp_path / "b"))
    requirements = (tmp_path / "b" / "requirements.txt").read_text()
    assert "# Not listed: the package transformers' gptq quantizer needs" in requirements
    generate(Request(model="0.5B", gpu="H100-80GB", gpus=1), out=str(tmp_path / "plain"))
    assert "quantizer" not in (tmp_path / "plain" / "requirements.txt").read_text()
