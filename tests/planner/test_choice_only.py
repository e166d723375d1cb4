"""search(explain=False), what `recommend` runs for every hardware choice, skips the alternatives, the reasons and the
structures that cannot be chosen (offloading ones once a plan without offload is chosen, later methods once a method
gives a plan without offload): the choice must be the one the full search makes, on every kind of request."""

from __future__ import annotations

import pytest

from advisor.catalog import resolve_gpu
from advisor.core.request import Request
from advisor.core.target import Target
from advisor.resolve import resolve_model
from advisor.search.planner import search

CASES = [
    # (request, GPU, GPUs per node, nodes): small and large models, every trainer, pinned and free methods, and
    # targets where only offloading or only an adapter fits
    (dict(model="qwen2.5-0.5b", trainer="grpo"), "H100-80GB", 8, 1),
    (dict(model="qwen2.5-0.5b", trainer="kto"), "A100-80GB", 1, 1),
    (dict(model="llama-3.1-8b", trainer="dpo"), "H200", 8, 1),
    (dict(model="llama-3.1-8b", trainer="sft"), "RTX-4090", 1, 1),
    (dict(model="llama-3.1-8b", trainer="sft", method="full"), "RTX-4090", 2, 1),
    (dict(model="llama-3.1-70b", trainer="sft"), "H100-80GB", 8, 2),
    (dict(model="llama-3.1-70b", trainer="sft", method="full"), "A100-80GB", 4, 1),
    (dict(model="qwen2.5-7b", trainer="rloo", method="lora"), "L40S", 1, 1),
    (dict(model="qwen2.5-0.5b", trainer="gkd", teacher="qwen2.5-1.5b"), "H100-80GB", 2, 1),
    (dict(model="qwen3-30b-a3b", trainer="sft"), "H200", 8, 1),
]


def _key(decision):
    c = decision.chosen
    return None if c is None else (c.plan, c.tokens_per_second, c.memory.per_gpu_reserved_bytes)


@pytest.mark.parametrize(("fields", "gpu", "per_node", "nodes"), CASES)
def test_the_choice_alone_is_the_full_search_choice(fields, gpu, per_node, nodes):
    req = Request(**fields)
    model = resolve_model(req)
    target = Target(gpu=resolve_gpu(gpu), gpus_per_node=per_node, nodes=nodes)
    full = search(req, model, target)
    alone = search(req, model, target, explain=False)
    assert _key(alone) == _key(full)
    assert alone.alternatives == [] and alone.considered <= full.considered


def test_the_choice_alone_estimates_less_where_offload_is_never_chosen():
    req = Request(model="qwen2.5-0.5b", trainer="grpo")
    model = resolve_model(req)
    target = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=8, nodes=1)
    full, alone = search(req, model, target), search(req, model, target, explain=False)
    assert full.chosen.plan.offload == "none"
    assert alone.considered < 0.7 * full.considered
