"""ModelSpec.params of every catalogue row against parameter counts published independently of this project.

Sources (exact counts, not derived from our formula):
- HF API `safetensors.total` (parameters stored in the checkpoint), as quoted in public code that pins it;
- keras-hub preset metadata `params` (keras_hub/src/models/*/*_presets.py), counted from the ported weights;
- llama.cpp / GGUF `general.parameter_count` or `n_params` of converted checkpoints.
Caveats, each checked below rather than hidden:
- Tied checkpoints that also store lm_head.weight (Qwen3 0.6B/1.7B on the Hub) report more in safetensors.total;
  the keras-hub count (tied, as the model runs) is used for those.
- keras-hub's Gemma 3 text presets use vocab 262144; the HF text decoder has 262208 rows (64 * hidden more,
  under 0.01 %). Gemma 2/3 also have two more RMSNorms per layer than ModelSpec counts (2 * hidden * layers).
Hence: at most 1 % everywhere, and exact where the layout is exactly the one ModelSpec describes.
"""

from __future__ import annotations

import pytest

from advisor.catalog import all_models, resolve_model

PUBLISHED = {
    # id: (count, where it is published)
    "llama-3.1-8b": (8_030_261_248, "HF API safetensors.total meta-llama/Llama-3.1-8B; keras-hub llama3_8b_en"),
    "llama-3.1-70b": (70_553_706_496, "HF API safetensors.total meta-llama/Llama-3.1-70B"),
    "llama-3.1-405b": (405_853_388_800, "HF API safetensors.total meta-llama/Llama-3.1-405B"),
    "llama-3.2-1b": (1_235_814_400, "HF API safetensors.total meta-llama/Llama-3.2-1B-Instruct"),
    "llama-3.2-3b": (3_212_749_824, "HF API safetensors.total meta-llama/Llama-3.2-3B-Instruct"),
    "llama-3.3-70b": (70_553_706_496, "HF API safetensors.total meta-llama/Llama-3.3-70B-Instruct"),
    "qwen2.5-0.5b": (494_032_768, "keras-hub qwen2.5_0.5b_en; HF API Qwen2.5-0.5B-Instruct"),
    "qwen2.5-1.5b": (1_543_714_304, "keras-hub qwen2.5_math_1.5b_en; HF API Qwen2.5-1.5B-Instruct"),
    "qwen2.5-3b": (3_085_938_688, "keras-hub qwen2.5_3b_en; HF API Qwen2.5-3B-Instruct"),
    "qwen2.5-7b": (7_615_616_512, "HF API Qwen2.5-7B-Instruct; keras-hub qwen2.5_math_7b_en (same layout)"),
    "qwen2.5-14b": (14_770_033_664, "GGUF n_params of Qwen2.5-14B conversions"),
    "qwen2.5-32b": (32_763_876_352, "keras-hub qwen2.5_instruct_32b_en"),
    "qwen2.5-72b": (72_706_203_648, "keras-hub qwen2.5_instruct_72b_en"),
    "qwen3-0.6b": (596_049_920, "keras-hub qwen3_0.6b_en"),
    "qwen3-1.7b": (1_720_574_976, "keras-hub qwen3_1.7b_en"),
    "qwen3-4b": (4_022_468_096, "keras-hub qwen3_4b_en; HF API Qwen/Qwen3-4B"),
    "qwen3-8b": (8_190_735_360, "keras-hub qwen3_8b_en; HF API Qwen/Qwen3-8B"),
    "qwen3-14b": (14_768_307_200, "keras-hub qwen3_14b_en"),
    "qwen3-32b": (32_762_123_264, "keras-hub qwen3_32b_en; HF API Qwen/Qwen3-32B"),
    "qwen3-30b-a3b": (30_532_122_624, "keras-hub qwen3_moe_30b_a3b_en"),
    "qwen3-235b-a22b": (235_093_634_560, "keras-hub qwen3_moe_235b_a22b_en"),
    "mistral-7b-v0.3": (7_248_023_552, "HF API safetensors.total mistralai/Mistral-7B-v0.3"),
    "mixtral-8x7b": (46_702_792_704, "keras-hub mixtral_8_7b_en"),
    "gemma-2-2b": (2_614_341_888, "keras-hub gemma2_2b_en; HF API google/gemma-2-2b-it"),
    "gemma-2-9b": (9_241_705_984, "keras-hub gemma2_9b_en"),
    "gemma-2-27b": (27_227_128_320, "keras-hub gemma2_27b_en"),
    "gemma-3-1b": (999_885_952, "keras-hub gemma3_1b; HF API google/gemma-3-1b-it"),
    "gemma-3-4b": (3_880_099_328, "keras-hub gemma3_4b_text (text decoder only)"),
    "gemma-3-12b": (11_765_788_416, "keras-hub gemma3_12b_text"),
    "gemma-3-27b": (27_009_002_240, "keras-hub gemma3_27b_text"),
    "phi-3-mini": (3_821_079_552, "keras-hub phi3_mini_4k_instruct_en; HF API Phi-3-mini-4k-instruct"),
    "phi-3-medium": (13_960_238_080, "measured model size of Phi-3-medium-4k-instruct in a public fine-tuning table"),
    "phi-4": (14_659_507_200, "GGUF general.parameter_count of microsoft/phi-4; HF API microsoft/phi-4"),
    "deepseek-r1-distill-qwen-7b": (7_615_616_512, "Qwen2.5-Math-7B layout (keras-hub qwen2.5_math_7b_en)"),
    "deepseek-r1-distill-llama-8b": (8_030_261_248, "Llama-3.1-8B layout (HF API)"),
    "smollm2-135m": (134_515_008, "HF API HuggingFaceTB/SmolLM2-135M-Instruct"),
    "smollm2-360m": (361_821_120, "HF API HuggingFaceTB/SmolLM2-360M-Instruct"),
    "smollm2-1.7b": (1_711_376_384, "HF API HuggingFaceTB/SmolLM2-1.7B-Instruct"),
}

# Layouts ModelSpec describes exactly (two norms per layer, separate or fused-but-equal projections): exact match.
EXACT = {k for k in PUBLISHED if not k.startswith("gemma-")}


def test_every_row_has_a_published_count():
    assert {m.id for m in all_models()} <= set(PUBLISHED), "add the published count of the new row here"


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_params_match_published_within_1pct(model_id):
    expected, where = PUBLISHED[model_id]
    got = resolve_model(model_id).params
    assert abs(got - expected) <= 0.01 * expected, f"{model_id}: {got:,} vs {expected:,} ({where})"


@pytest.mark.parametrize("model_id", sorted(EXACT))
def test_params_exact_for_llama_style_layouts(model_id):
    assert resolve_model(model_id).params == PUBLISHED[model_id][0]


@pytest.mark.parametrize("model_id", ["gemma-2-2b", "gemma-2-9b", "gemma-2-27b", "gemma-3-1b"])
def test_gemma_counts_are_exact_with_four_norms_per_layer(model_id):
    # Gemma 2/3 have 4 RMSNorms per layer (input, post-attention, pre- and post-feedforward); the rows say so.
    spec = resolve_model(model_id)
    assert spec.norms_per_layer == 4
    assert PUBLISHED[model_id][0] == spec.params


@pytest.mark.parametrize(
    ("model_id", "active"),
    [
        ("qwen3-30b-a3b", 3.3e9),  # model card: "30.5B total, 3.3B activated"
        ("qwen3-235b-a22b", 22e9),  # model card: "235B total, 22B activated"
        ("mixtral-8x7b", 12.9e9),  # Mistral AI: "12.9B active parameters per token"
    ],
)
def test_moe_active_params_match_model_cards(model_id, active):
    # The cards print one or two significant decimals (3.35B shows as "3.3B"), hence 2 %.
    spec = resolve_model(model_id)
    assert abs(spec.active_params - active) <= 0.02 * active
    assert spec.active_params < spec.params


def test_dense_rows_have_active_equal_total():
    for spec in all_models():
        if not spec.is_moe:
            assert spec.active_params == spec.params, spec.id
