"""A mixture of experts under PEFT and bitsandbytes, counted on the real libraries with tiny random models: the LoRA
parameters PEFT 0.21 trains (its lora.ParamWrapper on the 3-D expert parameters, the router), that it refuses LoRA
dropout there (the bundle sets 0), and that bitsandbytes leaves the experts unquantized (they are not nn.Linear)."""

from __future__ import annotations

import pytest

from advisor.catalog.hf_config import spec_from_config
from advisor.model.dims import dims

TINY = {"hidden_size": 64, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128}
FAMILIES = {
    "qwen3_moe": {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24},
    "mixtral": {"num_local_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 24},
}


def _tiny(model_type: str):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.AutoConfig.for_model(model_type, **{**TINY, **FAMILIES[model_type]})
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    spec = spec_from_config(cfg.to_dict(), source="file:///tiny/config.json", id=f"tiny-{model_type}")
    return model, spec


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_lora_parameters_are_the_ones_peft_trains(model_type):
    peft = pytest.importorskip("peft")
    model, spec = _tiny(model_type)
    assert spec.is_moe
    adapted = peft.get_peft_model(model, peft.LoraConfig(r=4, lora_dropout=0.0, target_modules="all-linear",
                                                         task_type="CAUSAL_LM"))
    trained = sum(p.numel() for p in adapted.parameters() if p.requires_grad)
    assert spec.lora_params(4) == trained


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_peft_refuses_lora_dropout_on_experts(model_type):
    """Why the bundle's lora_config() sets lora_dropout=0.0 for a MoE (and the memory model counts no dropout)."""
    peft = pytest.importorskip("peft")
    model, _ = _tiny(model_type)
    with pytest.raises(ValueError, match="lora_dropout"):
        peft.get_peft_model(model, peft.LoraConfig(r=4, lora_dropout=0.05, target_modules="all-linear",
                                                   task_type="CAUSAL_LM"))


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_only_nn_linear_weights_count_as_quantized(model_type):
    torch = pytest.importorskip("torch")
    model, spec = _tiny(model_type)
    layer = model.model.layers[0]
    linear = sum(m.weight.numel() for m in layer.modules() if isinstance(m, torch.nn.Linear))
    assert dims(spec).quantized == spec.layers * linear
    experts = sum(p.numel() for n, p in layer.named_parameters() if "experts" in n)
    assert experts > linear  # most of a MoE layer stays 16-bit under QLoRA


def test_the_bundle_sets_no_lora_dropout_for_a_moe(tmp_path):
    from advisor.cli import main

    out = tmp_path / "b"
    assert main(["generate", "--model", "qwen3-30b-a3b", "--method", "lora", "--gpus", "8", "--gpu", "H100-80GB",
                 "--out", str(out)]) == 0
    text = (out / "train.py").read_text(encoding="utf-8")
    assert "lora_dropout=0.0," in text and "lora_dropout=0.05" not in text
