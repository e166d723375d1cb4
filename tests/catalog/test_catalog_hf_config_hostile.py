"""Hostile or broken config.json values are refused (exit 2, one line and a hint) or reported, never coerced: booleans
that are not JSON booleans, windows and sizes below 1, an auto_map (the model's own code) and a quantization_config
(a pre-quantized checkpoint). The reader (spec_from_config), the local-folder and hub-cache lookups, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from advisor.catalog import resolve_model
from advisor.catalog.hf_config import spec_from_config
from advisor.core.errors import ExitCode, InputFileError

SMOL = {  # HuggingFaceTB/SmolLM2-135M
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "hidden_size": 576, "intermediate_size": 1536,
    "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30,
    "num_key_value_heads": 3, "rope_theta": 100000, "tie_word_embeddings": True, "vocab_size": 49152,
}
MISTRAL = {**SMOL, "model_type": "mistral", "tie_word_embeddings": False, "sliding_window": 4096}
QWEN3_MOE = {  # Qwen/Qwen3-30B-A3B, the architecture keys
    "head_dim": 128, "hidden_size": 2048, "intermediate_size": 6144, "max_position_embeddings": 40960,
    "model_type": "qwen3_moe", "moe_intermediate_size": 768, "num_attention_heads": 32, "num_experts": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "vocab_size": 151936,
}
MIXTRAL = {**MISTRAL, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": None}
SOURCE = "file:///tmp/model/config.json"


def _refused(cfg: dict, key: str) -> InputFileError:
    with pytest.raises(InputFileError) as info:
        spec_from_config(cfg, source=SOURCE)
    err = info.value
    assert f"'{key}'" in err.message and err.message.startswith(SOURCE), err.message
    assert err.hint and "\n" not in err.message + err.hint
    assert err.exit_code == ExitCode.USAGE
    return err


# ------------------------------------------------------------------------------------------------ booleans


@pytest.mark.parametrize(("cfg", "key", "value"), [
    (SMOL, "tie_word_embeddings", "yes"),
    (SMOL, "tie_word_embeddings", "false"),
    (SMOL, "tie_word_embeddings", 1),
    (SMOL, "attention_bias", "false"),
    (SMOL, "qkv_bias", 0),
    ({**SMOL, "model_type": "gpt_bigcode"}, "multi_query", "true"),
    ({**SMOL, "model_type": "qwen2"}, "use_sliding_window", "no"),
    (MISTRAL, "use_sliding_window", [True]),
])
def test_a_boolean_that_is_not_a_json_boolean_is_refused(cfg, key, value):
    err = _refused({**cfg, key: value}, key)
    assert "not true or false" in err.message and "true or false" in err.hint


def test_a_text_config_boolean_is_checked_too():
    cfg = {"model_type": "gemma3", "text_config": {**SMOL, "model_type": "gemma3_text", "tie_word_embeddings": "no"}}
    _refused(cfg, "tie_word_embeddings")


def test_a_null_boolean_is_the_class_default():
    assert spec_from_config({**SMOL, "tie_word_embeddings": None}, source=SOURCE).tied_embeddings is False  # Llama's
    spec = spec_from_config({**SMOL, "attention_bias": None, "tie_word_embeddings": False}, source=SOURCE)
    assert spec.qkv_bias is False and spec.tied_embeddings is False


# ------------------------------------------------------------------------------------------------ sliding window


@pytest.mark.parametrize("window", [-5, 0, -1])
def test_a_window_below_one_token_is_refused(window):
    err = _refused({**MISTRAL, "sliding_window": window}, "sliding_window")
    assert "null" in err.hint


@pytest.mark.parametrize("window", ["4096", True, 4096.5])
def test_a_window_that_is_not_a_whole_number_is_refused(window):
    _refused({**MISTRAL, "sliding_window": window}, "sliding_window")


@pytest.mark.parametrize("window", [0, -1])
def test_a_window_the_model_never_applies_is_no_window(window):
    # Qwen2/Qwen2-MoE configs with use_sliding_window false carry sliding_window 0, and transformers builds them
    spec = spec_from_config({**SMOL, "model_type": "qwen2", "use_sliding_window": False, "sliding_window": window},
                            source=SOURCE)
    assert (spec.attention, spec.sliding_window) == ("full", None)
    _refused({**SMOL, "model_type": "qwen2", "use_sliding_window": True, "sliding_window": window}, "sliding_window")


def test_null_is_no_window_and_a_real_one_is_kept():
    assert spec_from_config({**MISTRAL, "sliding_window": None}, source=SOURCE).attention == "full"
    spec = spec_from_config(MISTRAL, source=SOURCE)
    assert (spec.attention, spec.sliding_window) == ("sliding", 4096)


# ------------------------------------------------------------------------------------------------ sizes


@pytest.mark.parametrize("key", ["num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                                 "num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings"])
@pytest.mark.parametrize("value", [0, -3])
def test_a_dense_size_below_one_is_refused_naming_its_key(key, value):
    err = _refused({**SMOL, "head_dim": 64, key: value}, key)
    assert f"is {value}, outside 1 to" in err.message


@pytest.mark.parametrize(("cfg", "key"), [
    (QWEN3_MOE, "moe_intermediate_size"), (QWEN3_MOE, "num_experts_per_tok"), (MIXTRAL, "intermediate_size"),
])
def test_a_moe_size_below_one_is_refused_naming_its_key(cfg, key):
    _refused({**cfg, key: 0}, key)


def test_gpt2_spellings_are_named():
    gpt2 = {"model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257}
    for key in ("n_embd", "n_head", "n_layer", "n_inner"):
        _refused({**gpt2, key: 0}, key)


def test_fewer_hidden_units_than_heads_is_refused():
    err = _refused({**SMOL, "hidden_size": 8}, "hidden_size")
    assert "num_attention_heads" in err.message


def test_more_experts_per_token_than_experts_is_refused():
    err = _refused({**QWEN3_MOE, "num_experts_per_tok": 129}, "num_experts_per_tok")
    assert "'num_experts' (128)" in err.message


def test_zero_experts_is_a_dense_model_and_zero_shared_width_no_shared_expert():
    # transformers' Qwen3-MoE builds a dense MLP in every layer when num_experts is 0 (modeling_qwen3_moe.py)
    dense = spec_from_config({**QWEN3_MOE, "num_experts": 0}, source=SOURCE)
    assert not dense.is_moe and dense.intermediate == 6144
    moe = spec_from_config({**QWEN3_MOE, "shared_expert_intermediate_size": 0}, source=SOURCE)
    assert moe.is_moe and moe.shared_expert_intermediate == 0


# ------------------------------------------------------------------------------------------------ auto_map


def test_auto_map_marks_remote_code():
    auto_map = {"AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XForCausalLM"}
    assert spec_from_config({**SMOL, "auto_map": auto_map}, source=SOURCE).remote_code is True
    assert spec_from_config(SMOL, source=SOURCE).remote_code is False
    assert spec_from_config({**SMOL, "auto_map": {}}, source=SOURCE).remote_code is False


def test_an_auto_map_that_is_not_an_object_is_refused():
    _refused({**SMOL, "auto_map": "modeling_x.XForCausalLM"}, "auto_map")


# ------------------------------------------------------------------------------------------------ quantization


@pytest.mark.parametrize(("quant", "method"), [
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "gptq"),
    ({"quant_method": "awq", "bits": 4}, "awq"),
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "bitsandbytes_4bit"),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "bitsandbytes_8bit"),
    ({"quant_method": "bitsandbytes"}, "bitsandbytes"),  # no load_in_*: no quantizer by that name (PEFT009)
    ({}, None),  # transformers treats an empty quantization_config as none
])
def test_quantization_config_names_the_method(quant, method):
    assert spec_from_config({**SMOL, "quantization_config": quant}, source=SOURCE).quant_method == method


def test_a_text_config_quantization_config_counts():
    cfg = {"model_type": "gemma3", "text_config": {**SMOL, "model_type": "gemma3_text",
                                                   "quantization_config": {"quant_method": "fp8"}}}
    assert spec_from_config(cfg, source=SOURCE).quant_method == "fp8"


@pytest.mark.parametrize("quant", [
    "gptq", [1], {"bits": 4}, {"quant_method": 4}, {"quant_method": "gptq\n<img src=x>"},
    {"quant_method": "bitsandbytes", "load_in_4bit": "yes"},
])
def test_a_malformed_quantization_config_is_refused(quant):
    with pytest.raises(InputFileError, match="quantization_config|load_in_4bit") as info:
        spec_from_config({**SMOL, "quantization_config": quant}, source=SOURCE)
    assert info.value.hint and "\n" not in info.value.message


# ------------------------------------------------------------------------------------------------ lookups


def test_a_local_folder_and_the_hub_cache_are_read_the_same_way(tmp_path, monkeypatch):
    folder = tmp_path / "bad-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**SMOL, "tie_word_embeddings": "yes"}))
    with pytest.raises(InputFileError, match="tie_word_embeddings"):
        resolve_model(str(folder))

    cache = tmp_path / "hub"
    snapshot = cache / "models--SomeOrg--Quantized" / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({**SMOL, "quantization_config": {"quant_method": "gptq"}}))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve_model("SomeOrg/Quantized").quant_method == "gptq"


# ------------------------------------------------------------------------------------------------ the CLI


def _generate(tmp_path, cfg: dict, *flags: str) -> tuple[subprocess.CompletedProcess, object]:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "bundle"
    proc = subprocess.run([sys.executable, "-m", "advisor", "generate", "--model", str(model), "--gpu", "H100-80GB",
                           "--out", str(out), *flags], capture_output=True, text=True)
    assert "Traceback" not in proc.stderr
    return proc, out


def _one_line_error(proc: subprocess.CompletedProcess, code: int) -> list[str]:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code, proc.stderr
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), proc.stderr
    return lines


@pytest.mark.parametrize(("key", "value"), [("tie_word_embeddings", "yes"), ("intermediate_size", 0)])
def test_cli_refuses_a_bad_value_with_one_line_and_a_hint(tmp_path, key, value):
    proc, out = _generate(tmp_path, {**SMOL, key: value})
    error, _ = _one_line_error(proc, 2)
    assert f"'{key}'" in error and not out.exists()


def test_cli_refuses_a_window_of_minus_five(tmp_path):
    proc, _ = _generate(tmp_path, {**MISTRAL, "sliding_window": -5})
    error, _ = _one_line_error(proc, 2)
    assert "'sliding_window' is -5" in error


def test_cli_asks_for_trust_remote_code_and_never_turns_it_on_by_itself(tmp_path):
    cfg = {**SMOL, "model_type": "internlm2", "auto_map": {"AutoModelForCausalLM": "modeling_x.XForCausalLM"}}
    proc, out = _generate(tmp_path, cfg)
    error, hint = _one_line_error(proc, 1)
    assert "CFG021" in error and "auto_map" in error
    assert hint == "hint: pass --trust-remote-code if you trust this model's code" and not out.exists()

    proc, out = _generate(tmp_path, cfg, "--trust-remote-code")
    assert proc.returncode == 0, proc.stderr
    assert "TRUST_REMOTE_CODE = True" in (out / "train.py").read_text()


def test_cli_warns_when_a_built_in_class_replaces_the_repositorys_code(tmp_path):
    cfg = {**SMOL, "auto_map": {"AutoModelForCausalLM": "modeling_llama.LlamaForCausalLM"}}
    proc, out = _generate(tmp_path, cfg)
    assert proc.returncode == 0, proc.stderr
    assert "CFG022" in proc.stdout + proc.stderr
    assert "TRUST_REMOTE_CODE = False" in (out / "train.py").read_text()


def test_cli_refuses_full_fine_tuning_of_a_quantized_checkpoint_and_plans_lora(tmp_path):
    cfg = {**SMOL, "quantization_config": {"quant_method": "gptq", "bits": 4}}
    proc, out = _generate(tmp_path, cfg, "--method", "full")
    error, hint = _one_line_error(proc, 1)
    assert "PEFT009" in error and "gptq" in error and "--method lora" in hint and not out.exists()

    proc, out = _generate(tmp_path, cfg)
    assert proc.returncode == 0, proc.stderr
    assert "lora" in proc.stdout.splitlines()[1] and "PEFT010" in proc.stdout + proc.stderr
    assert json.loads((out / "plan.json").read_text())["plan"]["method"] == "lora"
