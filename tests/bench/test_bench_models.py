"""Catalogue architecture -> transformers config, checked on CPU (meta device for the full sizes)."""

from __future__ import annotations

import pytest

from bench import models as BM
from bench.matrix import FAMILY_MODELS, MODELS
from bench.worker import special_ids

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# Parameter counts published for the real checkpoints (Hugging Face model pages / safetensors metadata);
# an independent source for the configs built here.
PUBLISHED_PARAMS = {"qwen2.5-0.5b": 494_032_768, "qwen2.5-1.5b": 1_543_714_304, "qwen2.5-3b": 3_085_938_688,
                    "qwen2.5-7b": 7_615_616_512, "llama-3.1-8b": 8_030_261_248}


@pytest.mark.parametrize("model_id", MODELS)
def test_full_size_config_has_the_published_parameter_count(model_id):
    arch = BM.arch_dict(BM.resolve(model_id))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(BM.hf_config(arch))
    assert model.num_parameters() == PUBLISHED_PARAMS[model_id]
    assert arch["params"] == PUBLISHED_PARAMS[model_id]


def test_config_fields_follow_the_catalogue():
    q = BM.hf_config(BM.arch_dict(BM.resolve("qwen2.5-0.5b")), special_ids={"bos": 1, "eos": 2, "pad": 3})
    assert type(q).__name__ == "Qwen2Config"
    assert (q.num_hidden_layers, q.hidden_size, q.intermediate_size) == (24, 896, 4864)
    assert (q.num_attention_heads, q.num_key_value_heads, q.vocab_size) == (14, 2, 151936)
    assert q.tie_word_embeddings is True and q.eos_token_id == 2 and q.pad_token_id == 3
    assert q.rope_parameters["rope_theta"] == 1_000_000.0
    q7 = BM.hf_config(BM.arch_dict(BM.resolve("qwen2.5-7b")))
    assert q7.tie_word_embeddings is False and q7.num_key_value_heads == 4 and q7.vocab_size == 152064
    llama = BM.hf_config(BM.arch_dict(BM.resolve("llama-3.1-8b")))
    assert type(llama).__name__ == "LlamaConfig"
    assert (llama.num_hidden_layers, llama.hidden_size, llama.intermediate_size) == (32, 4096, 14336)
    assert (llama.num_attention_heads, llama.num_key_value_heads, llama.head_dim) == (32, 8, 128)
    assert llama.vocab_size == 128256 and llama.attention_bias is False and llama.tie_word_embeddings is False
    assert llama.rope_parameters["rope_theta"] == 500000.0  # render.MODEL_TYPE_DEFAULTS, from Llama-3.1's config


def test_config_fields_are_the_bundles():
    """The benchmark builds from the same config.json fields as a generated bundle's --random-init model."""
    from advisor.bundle.render import model_config_fields

    for model_id in (*MODELS, *FAMILY_MODELS):
        spec = BM.resolve(model_id)
        model_type, kw = BM.hf_config_kwargs(BM.arch_dict(spec))
        assert {"model_type": model_type, **kw} == model_config_fields(spec), model_id


@pytest.mark.parametrize("model_id", FAMILY_MODELS)
def test_every_catalogue_family_builds_with_the_catalogue_parameter_count(model_id):
    """On the meta device (no memory): the parameter count the catalogue states (checked against the published
    counts in tests/catalog/test_param_counts.py) is the one the built model has."""
    spec = BM.resolve(model_id)
    cfg = BM.hf_config(BM.arch_dict(spec))
    assert cfg.model_type == {"gemma3": "gemma3_text"}.get(spec.model_type, spec.model_type)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    assert model.num_parameters() == spec.params
    if spec.is_moe:
        assert cfg.num_experts_per_tok == spec.experts_per_token


def test_catalogue_model_types_are_all_supported():
    from advisor.catalog.lookup import all_models

    types = {spec.model_type for spec in all_models()}
    assert types <= set(BM.SUPPORTED_MODEL_TYPES)
    covered = {BM.resolve(mid).model_type for mid in (*MODELS, *FAMILY_MODELS)}
    assert types - {"gemma3"} <= covered  # gemma3 (multimodal) builds as its text decoder, gemma3_text


@pytest.mark.parametrize("model_id", FAMILY_MODELS)
def test_tiny_version_of_every_family_runs_on_cpu(model_id):
    spec = BM.resolve(model_id)
    changes = dict(layers=2, hidden=64, intermediate=128 if spec.intermediate else 0, heads=4,
                   kv_heads=4 if spec.heads == spec.kv_heads else 2, head_dim=16, vocab=512)
    if spec.is_moe:
        changes.update(num_experts=4, experts_per_token=2, moe_intermediate=32)
    if spec.sliding_window:
        changes.update(sliding_window=8)
    tiny = spec.with_(**changes)
    cfg = BM.hf_config(BM.arch_dict(tiny), special_ids=special_ids(512))  # Phi-3's default pad id is 32000
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    assert model.num_parameters() == tiny.params
    out = model(input_ids=torch.randint(0, 512, (2, 12)))
    assert out.logits.shape == (2, 12, 512)


def test_reduced_depth_rows_build_and_predict_the_same_depth():
    row = {"model": "qwen3-30b-a3b", "layers": 8}
    spec = BM.row_spec(row)
    full = BM.resolve("qwen3-30b-a3b")
    assert spec.layers == 8 and full.layers == 48
    # 8 of 48 layers: the embeddings and head stay, the per-layer parameters scale
    per_layer = (full.params - spec.params) / 40
    assert spec.params == pytest.approx(full.params - 40 * per_layer)
    arch = BM.arch_dict(spec)
    assert arch["layers"] == 8 and arch["params"] == spec.params
    assert BM.hf_config(arch).num_hidden_layers == 8


def test_machine_attention_is_the_advisors_choice_for_the_packages_installed():
    gemma, qwen = BM.resolve("gemma-2-2b"), BM.resolve("qwen3-0.6b")
    row = {"attn": None, "precision": "bf16"}
    assert BM.machine_attention(row, gemma, installed={})[0] == "eager"  # Gemma-2 rejects sdpa; no flash-attn
    assert BM.machine_attention(row, gemma, installed={"kernels": "0.11.1"})[0] == "flash_attention_2"
    # a CPU run cannot load a CUDA kernel, installed or not
    assert BM.machine_attention(row, gemma, installed={"kernels": "0.19.1"}, device="cpu")[0] == "eager"
    assert BM.machine_attention(row, qwen, installed={})[0] == "sdpa"
    assert BM.machine_attention({"attn": "eager", "precision": "bf16"}, qwen, installed={}) == ("eager", "row pin")


_LIGER_SCRIPT = r"""
import json, sys
import torch, transformers
from bench import models as BM
from bench.worker import liger_apply_call, special_ids
out = {}
for model_id in sys.argv[1:]:
    spec = BM.resolve(model_id)
    changes = dict(layers=2, hidden=64, intermediate=128, heads=4, kv_heads=2, head_dim=16, vocab=512)
    if spec.sliding_window:
        changes["sliding_window"] = 8
    called = liger_apply_call(spec.model_type)
    cfg = BM.hf_config(BM.arch_dict(spec.with_(**changes)), special_ids=special_ids(512))
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    out[model_id] = {"called": called, "modules": sorted({type(m).__name__ for m in model.modules()})}
print("RESULT" + json.dumps(out))
"""
LIGER_MODELS = ("qwen3-0.6b", "gemma-2-2b", "gemma-3-1b", "phi-3-mini", "llama-3.2-1b", "mistral-7b-v0.3")


def test_liger_is_applied_the_bundles_way():
    """liger_kernel.transformers.apply_liger_kernel_to_<model_type> before the build (in a subprocess: it patches
    transformers' modules): the model then holds Liger's RMSNorm and gated MLP. Nothing runs (Triton needs a GPU)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("liger_kernel")
    proc = subprocess.run([sys.executable, "-c", _LIGER_SCRIPT, *LIGER_MODELS], capture_output=True, text=True,
                          timeout=600, cwd=Path(__file__).resolve().parents[2])
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert line, proc.stderr[-2000:]
    results = json.loads(line[0][len("RESULT"):])
    for model_id in LIGER_MODELS:
        got = results[model_id]
        spec = BM.resolve(model_id)
        assert got["called"]["path"] == f"liger_kernel.transformers.apply_liger_kernel_to_{spec.model_type}"
        kwargs = got["called"]["kwargs"]
        assert kwargs["rope"] and kwargs["rms_norm"] and not kwargs["fused_linear_cross_entropy"]
        assert not kwargs["cross_entropy"]
        gated = "geglu" if spec.model_type.startswith("gemma") else "swiglu"
        assert kwargs[gated] is True and ({"geglu", "swiglu"} - {gated}).isdisjoint(kwargs), model_id
        assert any(m.startswith("LigerRMSNorm") for m in got["modules"]), (model_id, got["modules"])
        assert any(m.startswith("Liger") and "MLP" in m for m in got["modules"]), (model_id, got["modules"])
