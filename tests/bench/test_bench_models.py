"""Catalogue architecture -> transformers config, checked on CPU (meta device for the full sizes)."""

from __future__ import annotations

import pytest

from bench import models as BM
from bench.matrix import MODELS

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
    assert llama.rope_parameters["rope_type"] == "llama3" and llama.rope_parameters["rope_theta"] == 500000.0


@pytest.mark.parametrize("model_id", MODELS)
def test_tiny_version_instantiates_and_runs_on_cpu(model_id):
    arch = BM.arch_dict(BM.resolve(model_id))
    heads = 4
    kv = 2 if arch["kv_heads"] < arch["heads"] else 4
    tiny = dict(arch, layers=2, hidden=64, intermediate=128, heads=heads, kv_heads=kv, head_dim=16, vocab=512)
    model = transformers.AutoModelForCausalLM.from_config(BM.hf_config(tiny), dtype=torch.float32)
    attn = model.model.layers[0].self_attn
    assert (attn.q_proj.bias is not None) == arch["qkv_bias"]
    assert (model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()) == arch["tied_embeddings"]
    out = model(input_ids=torch.randint(0, 512, (2, 8)))
    assert out.logits.shape == (2, 8, 512)


def test_unsupported_architectures_are_refused():
    arch = BM.arch_dict(BM.resolve("qwen2.5-0.5b"))
    with pytest.raises(ValueError, match="not supported"):
        BM.hf_config_kwargs(dict(arch, model_type="mixtral"))
    with pytest.raises(ValueError, match="without qkv_bias"):
        BM.hf_config_kwargs(dict(arch, qkv_bias=False))
    with pytest.raises(ValueError, match="head_dim"):
        BM.hf_config_kwargs(dict(arch, head_dim=128))


def test_fallback_matches_the_catalogue_when_it_exists():
    catalog = pytest.importorskip("advisor.catalog")
    from advisor.core.specs import ModelSpec

    for model_id, fields in BM.FALLBACK.items():
        ours = ModelSpec(id=model_id, **fields)
        theirs = catalog.resolve_model(model_id)
        for key in ("model_type", "layers", "hidden", "intermediate", "heads", "kv_heads", "head_dim", "vocab",
                    "tied_embeddings", "qkv_bias"):
            assert getattr(ours, key) == getattr(theirs, key), (model_id, key)


def test_complete_arch_counts_parameters():
    a = BM.complete_arch({"model_type": "llama", "layers": 2, "hidden": 64, "intermediate": 128, "heads": 4,
                          "kv_heads": 2, "vocab": 512, "tied_embeddings": False})
    # 2 layers x (q 64x64 + k,v 2x64x32 + o 64x64 + mlp 3x64x128 + 2 norms of 64) + embed and head 2x512x64 + norm
    expected = 2 * (4096 + 4096 + 4096 + 3 * 8192 + 128) + 2 * 512 * 64 + 64
    assert a["params"] == expected and a["head_dim"] == 16


def test_broken_catalogue_falls_back_for_benchmark_models(monkeypatch):
    import types

    broken = types.ModuleType("advisor.catalog")

    def resolve_model(name):
        raise RuntimeError("models.toml is being edited")

    broken.resolve_model = resolve_model
    monkeypatch.setitem(__import__("sys").modules, "advisor.catalog", broken)
    monkeypatch.setattr(BM, "_catalog_error", None)
    spec = BM.resolve("qwen2.5-3b")
    assert (spec.layers, spec.hidden, spec.vocab) == (36, 2048, 151936)
    assert BM.spec_source().startswith("bench-fallback (catalog failed: RuntimeError")
    with pytest.raises(RuntimeError):
        BM.resolve("some-other-model")
