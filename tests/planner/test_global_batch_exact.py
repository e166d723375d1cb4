"""A pinned --global-batch is what every optimizer step trains: the plan's micro-batch x data-parallel replicas x
accumulation equals it exactly (GRPO/RLOO in whole generation groups), or the request is refused up front (exit 2)
naming the nearest sizes that split. Without the pin the planner aims at its default (64) and may round."""

from __future__ import annotations

import pytest

from advisor.core.errors import AdvisorError
from advisor.core.request import Request
from advisor.search import decide


@pytest.mark.parametrize(("kw", "global_batch"), [
    (dict(model="qwen2.5-7b", trainer="grpo", vllm="server", gpus=8), 48),
    (dict(model="qwen2.5-7b", trainer="grpo", vllm="server", gpus=8), 56),
    (dict(model="qwen2.5-0.5b", trainer="sft", gpus=3), 99),
    (dict(model="qwen2.5-0.5b", trainer="sft", gpus=6), 36),
    (dict(model="qwen2.5-1.5b", trainer="rloo", gpus=4), 24),
    (dict(model="qwen2.5-7b", trainer="dpo", method="lora", gpus=2), 10),
])
def test_the_plan_trains_exactly_the_pinned_global_batch(kw, global_batch):
    decision, _ = decide(Request(gpu="H100-80GB", global_batch=global_batch, **kw))
    p = decision.chosen.plan
    assert p.micro_batch * p.dp_size * p.grad_accum == global_batch
    if p.num_generations:
        assert (p.micro_batch * p.num_processes * p.grad_accum) % p.num_generations == 0
    for alt in decision.alternatives:
        if alt.feasible:
            assert alt.plan.global_batch == global_batch, alt.plan


@pytest.mark.parametrize(("kw", "global_batch", "near"), [
    (dict(model="qwen2.5-7b", trainer="grpo", vllm="server", gpus=8), 50, "--global-batch 48 or --global-batch 56"),
    (dict(model="qwen2.5-0.5b", trainer="sft", gpus=3), 100, "--global-batch 99 or --global-batch 102"),
    (dict(model="qwen2.5-0.5b", trainer="sft", gpus=4, grad_accum=3), 13, "--global-batch 12 or --global-batch 24"),
])
def test_a_global_batch_no_plan_can_split_is_a_usage_error_with_the_nearest(kw, global_batch, near):
    with pytest.raises(AdvisorError) as err:
        decide(Request(gpu="H100-80GB", global_batch=global_batch, **kw))
    assert err.value.exit_code == 2
    assert err.value.message.startswith(f"--global-batch {global_batch} cannot be split on ")
    assert f"use {near}" in err.value.hint


def test_without_the_pin_the_default_is_a_target():
    decision, _ = decide(Request(model="qwen2.5-0.5b", gpus=3, gpu="H100-80GB"))
    assert decision.chosen.plan.global_batch >= 64


def test_the_nearest_sizes_are_computed_not_searched():
    """The nearest splits come from each shape's unit (micro-batch x replicas x the accumulation's step), not from
    counting down from the ask: 99,999,999 with micro-batch 3 and accumulation 5 pinned on 8 GPUs (only 120 splits)
    answers at once with that one size."""
    with pytest.raises(AdvisorError) as err:
        decide(Request(model="qwen2.5-0.5b", gpu="H100-80GB", gpus=8, micro_batch=3, grad_accum=5,
                       global_batch=99_999_999))
    assert err.value.hint.startswith("use --global-batch 120 ")


@pytest.mark.parametrize("kw, micro", [
    (dict(model="qwen2.5-7b", gpu="H100-80GB", gpus=8, global_batch=48, grad_accum=2), 3),
    (dict(model="llama-3.3-70b", trainer="kto", method="full", gpu="H100-80GB", gpus=4, nodes=2, global_batch=48,
          grad_accum=2), 3),
    (dict(model="qwen2.5-1.5b", trainer="grpo", gpu="H100-80GB", gpus=4, global_batch=48, grad_accum=2,
          vllm="colocate"), 6),
])
def test_a_pinned_global_batch_and_accumulation_leave_any_micro_batch(kw, micro):
    # 48 sequences over 8 replicas x 2 accumulation is micro-batch 3: refused as "cannot be split" while TRL takes
    # per_device_train_batch_size=3 like any other (the search scanned powers of two only)
    decision, result = decide(Request(**kw))
    plan = result["plan"]
    assert plan["micro_batch"] == micro and plan["grad_accum"] == kw["grad_accum"]
    assert decision.chosen.plan.global_batch == kw["global_batch"]
    assert "--global-batch" in result["why"]["micro_batch"]


@pytest.mark.parametrize("kw, near", [
    # 100 over 2 replicas x 3 accumulation: 96 (micro 16) and 102 (micro 17), not 96 and 192 (micro 32)
    (dict(model="qwen2.5-1.5b", gpu="H200", gpus=2, grad_accum=3, global_batch=100), (96, 102)),
    (dict(model="qwen2.5-1.5b", trainer="grpo", vllm="colocate", gpu="H100-80GB", gpus=4, grad_accum=2,
          global_batch=50), (48, 56)),
])
def test_a_pinned_accumulation_refusal_names_the_nearest_sizes_of_any_micro_batch(kw, near):
    with pytest.raises(AdvisorError) as err:
        decide(Request(**kw))
    assert err.value.hint.startswith(f"use --global-batch {near[0]} or --global-batch {near[1]} "), err.value.hint
