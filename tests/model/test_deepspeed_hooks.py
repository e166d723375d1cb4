"""DeepSpeed's hooks as host dispatch (advisor.model.speed.deepspeed_hook_seconds): what ZeRO-3 fetches per module,
counted on tiny random models of the real transformers classes, and how the hook time meets the GPU's."""

from __future__ import annotations

from dataclasses import replace

import pytest
from model_fixtures import QWEN_05B, QWEN_7B, make_plan, target

from advisor.catalog.hf_config import spec_from_config
from advisor.model import speed as S
from advisor.model.dims import dims

TINY = {"hidden_size": 64, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128}
FAMILIES = {
    "llama": {"tie_word_embeddings": True},
    "qwen2": {"tie_word_embeddings": False},  # q/k/v biases live inside their Linear
    "qwen3": {},  # q_norm / k_norm are modules of their own
    "gemma2": {},  # four norms per layer
    "phi3": {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},  # fused qkv_proj and gate_up_proj
    "qwen3_moe": {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 24},
    "mixtral": {"num_local_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 24},
}


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_param_modules_are_the_modules_zero3_fetches(model_type):
    # ZeRO-3's pre-forward hook fetches a module's own parameters (iter_params(module, recurse=False)): the modules
    # that hold one are the unit DS_FETCH_SECONDS is paid per
    transformers = pytest.importorskip("transformers")
    cfg = transformers.AutoConfig.for_model(model_type, **{**TINY, **FAMILIES[model_type]})
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    holding = [m for m in model.modules() if any(True for _ in m.parameters(recurse=False))]
    spec = spec_from_config(cfg.to_dict(), source="file:///tiny/config.json", id=f"tiny-{model_type}")
    # a tied LM head lists the embedding's weight as its own parameter too: it is a module whose hook runs
    assert model.get_output_embeddings() in holding
    assert dims(spec).param_modules == len(holding)


def test_hooks_are_host_time_a_gpu_bound_micro_batch_hides():
    t = target(1)
    small = make_plan(seq_len=1024, micro_batch=1, num_processes=1, backend="deepspeed", zero_stage=3)
    big = replace(small, seq_len=4096, micro_batch=16)

    def added(model, plan):
        return (S.estimate_speed(model, plan, t).step_seconds
                - S.estimate_speed(model, replace(plan, backend="single", zero_stage=0), t).step_seconds)

    hooks_small = S.deepspeed_hook_seconds(dims(QWEN_05B), small)
    assert hooks_small > 0
    # a host-bound plain step pays nearly all of the hooks, a GPU-bound one a small part of them
    assert added(QWEN_05B, small) > 0.7 * hooks_small
    assert added(QWEN_7B, big) < 0.3 * S.deepspeed_hook_seconds(dims(QWEN_7B), big)
    # per module and pass: the recompute under checkpointing is one more fetch pass; without DeepSpeed, none
    ckpt = S.deepspeed_hook_seconds(dims(QWEN_05B), replace(small, grad_ckpt=True))
    plain = S.deepspeed_hook_seconds(dims(QWEN_05B), replace(small, grad_ckpt=False))
    assert ckpt - plain == pytest.approx(dims(QWEN_05B).param_modules * S.DS_FETCH_SECONDS)
    assert S.deepspeed_hook_seconds(dims(QWEN_05B), replace(small, backend="single", zero_stage=0)) == 0.0
    # ZeRO-2 has the grad hooks only
    z2 = S.deepspeed_hook_seconds(dims(QWEN_05B), replace(small, zero_stage=2))
    assert z2 == pytest.approx(dims(QWEN_05B).tensors * S.DS_GRAD_HOOK_SECONDS)
