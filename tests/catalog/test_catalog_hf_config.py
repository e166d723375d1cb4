"""spec_from_config against real config.json files: parsing each one must reproduce its catalogue row, which checks
the parser and the hand-copied rows against each other. The dicts are the published config.json contents (keys that
do not bear on the architecture left out)."""

from __future__ import annotations

import pytest

from advisor.catalog import resolve_model
from advisor.catalog.hf_config import spec_from_config
from advisor.core.errors import InputFileError

QWEN25_7B = {  # Qwen/Qwen2.5-7B
    "architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu", "hidden_size": 3584, "intermediate_size": 18944,
    "max_position_embeddings": 131072, "max_window_layers": 28, "model_type": "qwen2", "num_attention_heads": 28,
    "num_hidden_layers": 28, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 131072, "tie_word_embeddings": False, "use_sliding_window": False, "vocab_size": 152064,
}
LLAMA32_3B = {  # meta-llama/Llama-3.2-3B
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "head_dim": 128, "hidden_size": 3072,
    "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 24, "num_hidden_layers": 28, "num_key_value_heads": 8, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "tie_word_embeddings": True, "vocab_size": 128256,
}
QWEN3_0_6B = {  # Qwen/Qwen3-0.6B
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "head_dim": 128, "hidden_size": 1024,
    "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rope_theta": 1000000,
    "sliding_window": None, "tie_word_embeddings": True, "use_sliding_window": False, "vocab_size": 151936,
}
QWEN3_30B_A3B = {  # Qwen/Qwen3-30B-A3B
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "decoder_sparse_step": 1, "head_dim": 128,
    "hidden_size": 2048, "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
    "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": True,
    "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
    "num_key_value_heads": 4, "sliding_window": None, "tie_word_embeddings": False, "use_sliding_window": False,
    "vocab_size": 151936,
}
MIXTRAL_8X7B = {  # mistralai/Mixtral-8x7B-v0.1
    "architectures": ["MixtralForCausalLM"], "hidden_size": 4096, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "rope_theta": 1000000.0,
    "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 32000,
}
GEMMA3_4B = {  # google/gemma-3-4b-pt: the text_config lists few keys; the rest are Gemma3TextConfig defaults
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "image_token_index": 262144, "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                      "patch_size": 14, "vision_use_head": False},
}
GEMMA2_9B = {  # google/gemma-2-9b
    "architectures": ["Gemma2ForCausalLM"], "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
    "head_dim": 256, "hidden_size": 3584, "intermediate_size": 14336, "max_position_embeddings": 8192,
    "model_type": "gemma2", "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
    "query_pre_attn_scalar": 256, "sliding_window": 4096, "vocab_size": 256000,
}
PHI3_MINI_4K = {  # microsoft/Phi-3-mini-4k-instruct
    "architectures": ["Phi3ForCausalLM"], "hidden_size": 3072, "intermediate_size": 8192,
    "max_position_embeddings": 4096, "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
    "sliding_window": 2047, "tie_word_embeddings": False, "vocab_size": 32064,
}
PHI4 = {  # microsoft/phi-4
    "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "hidden_size": 5120, "intermediate_size": 17920,
    "max_position_embeddings": 16384, "model_type": "phi3", "num_attention_heads": 40, "num_hidden_layers": 40,
    "num_key_value_heads": 10, "original_max_position_embeddings": 16384, "rope_theta": 250000,
    "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 100352,
}
SMOLLM2_135M = {  # HuggingFaceTB/SmolLM2-135M
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "hidden_size": 576, "intermediate_size": 1536,
    "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30,
    "num_key_value_heads": 3, "rope_theta": 100000, "tie_word_embeddings": True, "vocab_size": 49152,
}
GPT2 = {  # openai-community/gpt2: GPT-2 key names, no n_inner (4 * n_embd), tied
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_ctx": 1024,
    "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257,
}

ARCH_FIELDS = (
    "model_type", "layers", "hidden", "intermediate", "heads", "kv_heads", "head_dim", "vocab", "tied_embeddings",
    "max_positions", "qkv_bias", "qk_norm", "num_experts", "experts_per_token", "moe_intermediate",
    "shared_expert_intermediate", "attention", "sliding_window",
)


@pytest.mark.parametrize(
    ("cfg", "row"),
    [
        (QWEN25_7B, "qwen2.5-7b"), (LLAMA32_3B, "llama-3.2-3b"), (QWEN3_0_6B, "qwen3-0.6b"),
        (QWEN3_30B_A3B, "qwen3-30b-a3b"), (MIXTRAL_8X7B, "mixtral-8x7b"), (GEMMA3_4B, "gemma-3-4b"),
        (GEMMA2_9B, "gemma-2-9b"), (PHI3_MINI_4K, "phi-3-mini"), (PHI4, "phi-4"), (SMOLLM2_135M, "smollm2-135m"),
    ],
)
def test_real_config_reproduces_its_catalogue_row(cfg, row):
    expected = resolve_model(row)
    got = spec_from_config(cfg, source=expected.source, id=expected.id, hf_id=expected.hf_id)
    diff = {f: (getattr(got, f), getattr(expected, f)) for f in ARCH_FIELDS if getattr(got, f) != getattr(expected, f)}
    assert not diff, f"{row}: parsed vs catalogue {diff}"
    assert got.params == expected.params


def test_default_ids_come_from_the_config():
    spec = spec_from_config({**SMOLLM2_135M, "_name_or_path": "HuggingFaceTB/SmolLM2-135M"}, source="local:x")
    assert spec.hf_id == "HuggingFaceTB/SmolLM2-135M" and spec.id == "huggingfacetb/smollm2-135m"


def test_gpt2_style_names_and_ungated_mlp():
    spec = spec_from_config(GPT2, source="https://huggingface.co/openai-community/gpt2/blob/main/config.json")
    assert (spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.head_dim) == (12, 768, 12, 12, 64)
    assert spec.max_positions == 1024 and spec.tied_embeddings
    # Two-matrix MLP of width 3072 holds as many weights as a gated one of width 2048.
    assert 3 * spec.hidden * spec.intermediate == 2 * 768 * 3072
    # GPT-2 small has 124,439,808 parameters; learned position embeddings and biases are what ModelSpec leaves out.
    assert abs(spec.params - 124_439_808) <= 0.01 * 124_439_808


def test_mistral_v01_window_applies_to_every_layer():
    cfg = {**MIXTRAL_8X7B, "model_type": "mistral", "num_local_experts": None, "num_experts_per_tok": None,
           "sliding_window": 4096, "vocab_size": 32000}
    spec = spec_from_config(cfg, source="local:mistral-v0.1")
    assert (spec.attention, spec.sliding_window, spec.is_moe) == ("sliding", 4096, False)


def test_layer_types_decide_the_attention_mix():
    cfg = {**QWEN25_7B, "layer_types": ["full_attention"] * 20 + ["sliding_attention"] * 8, "sliding_window": 4096}
    spec = spec_from_config(cfg, source="local:x")
    assert (spec.attention, spec.sliding_window) == ("sliding-mix", 4096)


def test_qwen2_moe_shared_expert():
    cfg = {**QWEN25_7B, "model_type": "qwen2_moe", "num_experts": 60, "num_experts_per_tok": 4,
           "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632}
    spec = spec_from_config(cfg, source="local:x")
    assert (spec.num_experts, spec.moe_intermediate, spec.shared_expert_intermediate, spec.intermediate) == (
        60, 1408, 5632, 0)
    assert spec.qkv_bias


@pytest.mark.parametrize("missing", ["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size",
                                     "max_position_embeddings"])
def test_missing_key_is_named(missing):
    cfg = {k: v for k, v in SMOLLM2_135M.items() if k != missing}
    with pytest.raises(InputFileError, match=missing):
        spec_from_config(cfg, source="file:///tmp/config.json")


def test_non_integer_value_is_named():
    with pytest.raises(InputFileError, match="hidden_size"):
        spec_from_config({**SMOLLM2_135M, "hidden_size": "576"}, source="local:x")


def test_inconsistent_heads_is_an_input_error():
    with pytest.raises(InputFileError, match="kv_heads"):
        spec_from_config({**SMOLLM2_135M, "num_key_value_heads": 2}, source="local:x")


def test_latent_attention_is_refused():
    cfg = {**QWEN25_7B, "model_type": "deepseek_v3", "kv_lora_rank": 512}
    with pytest.raises(InputFileError, match="latent attention"):
        spec_from_config(cfg, source="local:x")


def test_not_a_dict():
    with pytest.raises(InputFileError, match="not a JSON object"):
        spec_from_config([1, 2], source="local:x")  # type: ignore[arg-type]
