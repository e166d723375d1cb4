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
    # of those, the ones whose every parameter is under stage3_param_persistence_threshold (10 x hidden, as
    # transformers fills "auto") are never partitioned: the norms, and the tiny models' routers of 8 experts
    threshold = 10 * cfg.hidden_size
    persistent = [m for m in holding if all(p.numel() <= threshold for p in m.parameters(recurse=False))]
    assert dims(spec).persistent_modules == len(persistent)


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
    assert ckpt - plain == pytest.approx(S.zero3_fetch_modules(dims(QWEN_05B), small) * S.DS_FETCH_SECONDS)
    assert S.deepspeed_hook_seconds(dims(QWEN_05B), replace(small, backend="single", zero_stage=0)) == 0.0
    # ZeRO-2 has the grad hooks only
    z2 = S.deepspeed_hook_seconds(dims(QWEN_05B), replace(small, zero_stage=2))
    assert z2 == pytest.approx(dims(QWEN_05B).tensors * S.DS_GRAD_HOOK_SECONDS)


def test_a_module_zero3_keeps_gathered_costs_the_probe_s_fraction_of_a_partitioned_one():
    # ZeRO-3's hooks find a persistent module's parameters gathered: what is left of its fetch was timed apart
    # (bench/zero3_hook_probe.py), per module, against a partitioned Linear's
    import json
    from pathlib import Path

    probe = json.loads((Path(__file__).resolve().parents[2] / "bench/results/zero3-hook-probe-h200-2026-12-03.json")
                       .read_text())
    fwd = {c["kind"]: c["added_per_module_forward_s"] for c in probe["cases"]}
    assert S.ZERO3_PERSISTENT_HOOK_FRACTION == pytest.approx(fwd["persistent"] / fwd["partitioned"], abs=0.002)
    # every norm of a stack was persistent, no Linear was (the last Linear of each stack, hidden x 1, is)
    kinds = {c["kind"]: c for c in probe["cases"]}
    assert kinds["persistent"]["persistent_params"] == kinds["persistent"]["modules"] + 1
    assert kinds["partitioned"]["persistent_params"] == 1
    # the fetch count: a Qwen2 layer's seven Linears in full, its two norms at the fraction
    d = dims(QWEN_05B)
    plan = make_plan(backend="deepspeed", zero_stage=3)
    assert d.persistent_modules == 2 * QWEN_05B.layers + 1
    assert S.zero3_fetch_modules(d, plan) == pytest.approx(
        d.param_modules - (1 - S.ZERO3_PERSISTENT_HOOK_FRACTION) * d.persistent_modules)
    # LoRA adds its adapters' lora_A / lora_B, partitioned modules of their own
    lora = replace(plan, method="lora")
    assert S.zero3_fetch_modules(d, lora) - S.zero3_fetch_modules(d, plan) == S.adapter_tensors(d, lora)
