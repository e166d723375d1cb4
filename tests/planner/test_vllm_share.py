"""Every vLLM engine the planner chooses can start: its share of the GPU holds its weights, start-up profile and one
full-length request's KV cache (advisor.model.vllm_memory.engine_need, rule VLLM011), for colocated engines whose
GRPOConfig default share is too small and for servers of large models."""

from __future__ import annotations

import pytest

from advisor.bundle.render import reasons
from advisor.catalog import resolve_model
from advisor.core.errors import NoFeasiblePlanError
from advisor.core.request import Request
from advisor.model.vllm_memory import SERVER_MEM_FRACTION, engine_need
from advisor.resolve import resolve_target
from advisor.search import PinnedRuleError, decide

CASES = [
    # (model, gpu, gpus, method, vllm): GPUs where TRL's 0.3 colocate share is below an 8B's 15 GiB of weights, and
    # servers that must split a 70B over several GPUs
    ("llama-3.1-8b", "L40S", 1, "lora", "colocate"),
    ("qwen2.5-7b", "A100-40GB", 2, "lora", "colocate"),
    ("qwen2.5-7b", "RTX-4090", 1, "qlora", "colocate"),
    ("qwen2.5-0.5b", "T4", 1, "full", "colocate"),
    ("llama-3.1-70b", "H100-80GB", 8, "lora", "server"),
    ("qwen3-8b", "RTX-3090", 8, "full", None),
    ("llama-3.1-8b", "L40S", 2, "lora", None),
]


@pytest.mark.parametrize("model,gpu,gpus,method,vllm", CASES, ids=lambda v: str(v))
def test_the_chosen_engine_holds_what_it_needs(model, gpu, gpus, method, vllm):
    req = Request(model=model, gpu=gpu, gpus=gpus, trainer="grpo", method=method, vllm=vllm)
    try:
        decision, _ = decide(req)
    except NoFeasiblePlanError:
        return  # no plan at all is an answer; a plan whose engine cannot start is not
    plan = decision.chosen.plan
    if plan.vllm_mode == "none":
        return
    target = resolve_target(req)
    need = engine_need(resolve_model(model), plan, target)
    share = plan.vllm_mem_fraction if plan.vllm_mode == "colocate" else SERVER_MEM_FRACTION
    assert share * target.gpu_memory_bytes >= need.floor, (plan, need)


def test_a_colocated_engine_on_a_48_gib_gpu_gets_more_than_the_default_share():
    req = Request(model="llama-3.1-8b", gpu="L40S", gpus=1, trainer="grpo", method="lora", vllm="colocate")
    decision, result = decide(req)
    plan = decision.chosen.plan
    assert plan.vllm_mem_fraction > 0.3
    why = reasons(plan, resolve_model("llama-3.1-8b"), resolve_target(req), result, req)["vllm_mem_fraction"]
    assert why.startswith("raised from GRPOConfig's 0.3") and "weights 15.0 GiB" in why


def test_a_pinned_share_is_kept_and_judged():
    req = Request(model="llama-3.1-8b", gpu="L40S", gpus=1, trainer="grpo", method="lora", vllm="colocate",
                  vllm_mem_fraction=0.3)
    with pytest.raises(PinnedRuleError) as err:
        decide(req)
    assert "VLLM011" in str(err.value)
