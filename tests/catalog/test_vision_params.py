"""An image-text model_type that AutoModelForCausalLM loads whole (Gemma 3 4B-27B) brings its vision tower and
projector onto the GPU: the config.json reader counts them as transformers builds them, the catalogue rows carry the
count, and the memory model holds them as frozen weights (in the reference copy too), never as trained states."""

from __future__ import annotations

import importlib.util

import pytest
from plan_defaults import build_plan

from advisor.catalog import resolve_gpu, resolve_model
from advisor.catalog.hf_config import spec_from_config
from advisor.core.errors import InputFileError
from advisor.core.plan import Plan
from advisor.core.specs import ModelSpec, SpecError
from advisor.core.target import Target
from advisor.model.memory import estimate_memory

GEMMA3_4B_VISION = {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                    "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                    "patch_size": 14, "vision_use_head": False}
"""google/gemma-3-4b-pt config.json's vision_config."""


def _config(vision=GEMMA3_4B_VISION, hidden=2560, **top):
    text = {"hidden_size": hidden, "intermediate_size": 4 * hidden, "model_type": "gemma3_text",
            "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
            "sliding_window": 1024, "vocab_size": 262208, "max_position_embeddings": 131072}
    cfg = {"model_type": "gemma3", "text_config": text, **top}
    if vision is not ...:
        cfg["vision_config"] = vision
    return cfg


def _meta_count(cfg: dict) -> int:
    """Vision tower + projector of transformers' own Gemma3ForConditionalGeneration, built on the meta device."""
    import torch
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    body = {k: v for k, v in cfg.items() if k != "model_type"}
    with torch.device("meta"):
        model = Gemma3ForConditionalGeneration(Gemma3Config(**body))
    return sum(p.numel() for n, p in model.named_parameters()
               if "vision_tower" in n or "multi_modal_projector" in n)


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
@pytest.mark.parametrize("vision", [
    GEMMA3_4B_VISION,
    {**GEMMA3_4B_VISION, "vision_use_head": True},           # the pooling head SiglipVisionConfig defaults to
    {"model_type": "siglip_vision_model"},                   # every size from SiglipVisionConfig's defaults
    {**GEMMA3_4B_VISION, "image_size": 448, "patch_size": 16},
    ...,                                                     # no vision_config at all: Gemma3Config's default
], ids=["gemma-3-4b", "pooling-head", "defaults", "other-sizes", "absent"])
@pytest.mark.parametrize("hidden", [2560, 5376])
def test_reader_counts_what_transformers_builds(vision, hidden):
    cfg = _config(vision, hidden)
    spec = spec_from_config(cfg, source="local:test", id="g3")
    assert spec.vision_params == _meta_count(cfg) > 0


def test_catalogue_rows_carry_the_tower_they_load():
    for row, hidden in (("gemma-3-4b", 2560), ("gemma-3-12b", 3840), ("gemma-3-27b", 5376)):
        model = resolve_model(row)
        assert model.loads_vision_tower
        assert model.vision_params == spec_from_config(_config(hidden=hidden), source="local:t").vision_params
        assert model.loaded_params == model.params + model.vision_params
    assert resolve_model("gemma-3-1b").vision_params == 0  # text-only Gemma3ForCausalLM


def test_text_only_types_and_unknown_towers_count_nothing():
    llama = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 128,
             "vision_config": GEMMA3_4B_VISION}
    assert spec_from_config(llama, source="local:t").vision_params == 0
    other = _config({"model_type": "some_other_vision_model", "hidden_size": 64})
    assert spec_from_config(other, source="local:t").vision_params == 0


@pytest.mark.parametrize("bad", ["big", [896, 448], 0, -5, 1.5, True])
def test_a_broken_vision_config_is_named(bad):
    """A size transformers cannot build a tower from (text, a pair: SiglipVisionEmbeddings divides image_size by
    patch_size as numbers) is named, not counted or raised as a traceback."""
    for key in ("hidden_size", "image_size", "patch_size"):
        with pytest.raises(InputFileError, match=key):
            spec_from_config(_config({**GEMMA3_4B_VISION, key: bad}), source="local:t")
    with pytest.raises(InputFileError, match="vision_config"):
        spec_from_config(_config(bad if not isinstance(bad, list) else "x"), source="local:t")


def test_a_row_cannot_claim_a_tower_its_class_does_not_load():
    with pytest.raises(SpecError, match="vision"):
        resolve_model("qwen2.5-0.5b").with_(vision_params=1000)


def _plan(**kw) -> Plan:
    return build_plan(**{"seq_len": 512, "micro_batch": 1, **kw})


@pytest.mark.parametrize("kw, copies, shards", [
    ({}, 1, 1),                                                       # frozen weights, no grads or Adam states
    ({"method": "lora"}, 1, 1),
    ({"trainer": "dpo", "ref_model": "copy"}, 2, 1),                  # the reference copy loads the tower too
    ({"backend": "deepspeed", "zero_stage": 3, "num_processes": 4, "gpus_per_node": 4}, 1, 4),
    ({"backend": "fsdp2", "num_processes": 2, "gpus_per_node": 2}, 1, 2),
])
def test_memory_holds_the_tower_as_frozen_weights(kw, copies, shards):
    model = resolve_model("gemma-3-4b")
    target = Target(gpu=resolve_gpu("H200"), gpus_per_node=max(1, kw.get("gpus_per_node", 1)), nodes=1)
    plan = _plan(**kw)
    with_tower = estimate_memory(model, plan, target)
    without = estimate_memory(model.decoder_only(), plan, target)
    tower = model.vision_params * 2  # bf16
    assert with_tower.per_gpu_peak_bytes - without.per_gpu_peak_bytes == pytest.approx(copies * tower / shards,
                                                                                       rel=0.01)
    assert with_tower.gradients == without.gradients and with_tower.optimizer == without.optimizer
    assert with_tower.host_bytes >= without.host_bytes


def test_decoder_only_is_what_random_init_builds():
    model = resolve_model("gemma-3-4b")
    assert model.decoder_only().vision_params == 0 and model.decoder_only().params == model.params
    plain = resolve_model("qwen2.5-0.5b")
    assert plain.decoder_only() is plain
    assert isinstance(model, ModelSpec)
