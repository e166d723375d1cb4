"""A checkpoint AutoModelForCausalLM loads as an image-text model (Gemma 3 4B-27B) trains its text decoder only: the
bundle's train.py freezes the vision tower and projector and keeps LoRA off them, so every trainable parameter gets
a gradient from a text batch (DDP with ddp_find_unused_parameters=False would stop at the second step otherwise)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from gen_cases import MODELS, plan, result, target

from advisor.bundle.render import render_bundle
from advisor.catalog import resolve_model

pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None or importlib.util.find_spec("trl") is None,
                                reason="needs the [train] extra (transformers, peft)")


def _train_module(tmp_path, method: str):
    model = resolve_model("gemma-3-4b")
    assert model.loads_vision_tower
    p = plan(method=method, backend="ddp", num_processes=2, gpus_per_node=2)
    files = render_bundle(p, model, target("H100-80GB", 2, 1), result(p))
    assert "ddp_find_unused_parameters=False" in files["train.py"]
    path = tmp_path / "train.py"
    path.write_text(files["train.py"])
    spec = importlib.util.spec_from_file_location(f"bundle_train_{method}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _tiny_image_text_model():
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig, SiglipVisionConfig

    text = Gemma3TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=16, vocab_size=300)
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14)
    cfg = Gemma3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                       image_token_index=299, boi_token_index=297, eoi_token_index=298)
    return Gemma3ForConditionalGeneration(cfg)


@pytest.mark.parametrize("method", ["full", "lora"])
def test_every_trainable_parameter_gets_a_gradient_from_text(tmp_path, method):
    import torch

    train = _train_module(tmp_path, method)
    model = _tiny_image_text_model()
    train.freeze_vision_tower(model)
    if method == "lora":
        from peft import get_peft_model

        model = get_peft_model(model, train.lora_config())
        assert not [n for n, _ in model.named_parameters() if "lora_" in n and "vision_tower" in n]
    ids = torch.randint(0, 290, (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and not [n for n, p in trainable if p.grad is None]
    assert not [n for n, _ in trainable if "vision_tower" in n or "multi_modal_projector" in n]


def test_a_text_only_decoder_is_left_as_it_is(tmp_path):
    """The catalogue's text-only rows (Gemma 3 1B) and random-init decoders have no vision tower: nothing frozen."""
    assert not resolve_model("gemma-3-1b").loads_vision_tower and not MODELS["qwen2.5-7b"].loads_vision_tower
