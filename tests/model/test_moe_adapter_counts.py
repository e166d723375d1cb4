"""Per-module host costs of a MoE's LoRA/QLoRA (advisor/model/dims.py adapted_per_layer, nn_linears_per_layer):
transformers 5 keeps a layer's experts as 3-D parameters of one module, so PEFT 0.21 adapts them with three
lora.ParamWrapper targets, not one adapter per expert Linear, and bitsandbytes quantizes the nn.Linear modules
only. Counting an adapter chain per expert put 388 adapted modules in a Qwen3-30B-A3B layer instead of 7, and its
ZeRO-3 QLoRA step at minutes of kernel launches."""

from __future__ import annotations

from model_fixtures import make_plan

from advisor import catalog
from advisor.core.target import Target
from advisor.model import dims as MD
from advisor.model import speed as S


def _dims(model_id: str):
    return MD.dims(catalog.resolve_model(model_id))


def test_a_moe_layer_adapts_its_linears_and_three_expert_parameters():
    d = _dims("qwen3-30b-a3b")
    assert d.linears_per_layer == 4 + 3 * d.num_experts  # as if every expert were three Linears
    assert d.nn_linears_per_layer == 4  # q, k, v, o
    assert d.adapted_per_layer == 4 + MD.MOE_PARAM_TARGETS
    plan = make_plan(method="lora")
    assert S.adapter_tensors(d, plan) == 2 * d.L * (4 + MD.MOE_PARAM_TARGETS)


def test_a_dense_model_counts_every_linear_once():
    for model_id in ("llama-3.2-1b", "phi-3-mini", "gemma-2-2b"):
        d = _dims(model_id)
        assert d.nn_linears_per_layer == d.adapted_per_layer == d.linears_per_layer


def test_a_moe_qlora_step_is_not_set_by_per_expert_launches():
    """The host's share of a MoE QLoRA step stays of the order of its dense twin's, per adapted module."""
    model = catalog.resolve_model("qwen3-30b-a3b")
    gpu = catalog.resolve_gpu("H100-80GB")
    plan = make_plan(method="qlora", micro_batch=1, seq_len=4096, grad_ckpt=True, liger=False)
    speed = S.estimate_speed(model, plan, Target(gpu=gpu, gpus_per_node=1))
    # 48 layers x 7 modules: the launch overhead is seconds at most, not the minutes 388 modules per layer gave
    assert speed.breakdown.get("overhead", 0.0) < 5.0, speed.breakdown
