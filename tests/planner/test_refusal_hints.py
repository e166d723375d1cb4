"""A refusal names what the user can change: the rule their own pins break, not one about the planner's choices, and
a change the search would make (accumulation, the global batch) before a smaller model or another method."""

from __future__ import annotations

import pytest

from advisor.core.errors import NoFeasiblePlanError
from advisor.core.request import Request
from advisor.search import PinnedRuleError, decide


def _decide(**kw):
    return decide(Request(**kw))


def test_the_rule_about_the_users_pins_comes_before_one_about_the_planners_attention():
    # --packing made the planner pick flash_attention_2, which SP011 rejects under context parallelism; the user
    # chose packing and cp 2, which SP013 rejects whatever the attention: following SP011's fix only led to SP013
    with pytest.raises(PinnedRuleError) as err:
        _decide(model="8B", gpu="H100-80GB", gpus=8, backend="fsdp2", cp_size=2, packing=True)
    assert err.value.message.startswith("SP013"), err.value.message
    assert "--no-packing" in err.value.hint


def test_accumulation_that_holds_gradients_does_not_end_the_micro_batch_search():
    # FSDP2 under accumulation keeps unsharded gradients (no_sync): micro-batch 1 x 4 does not fit 70B on 16 H200,
    # micro-batch 4 x 1 does; the search used to stop at the first miss and answer "--method lora"
    decision, result = _decide(model="llama-3.1-70b", method="full", backend="fsdp2", gpus=8, nodes=2, gpu="H200")
    assert result["plan"]["method"] == "full" and result["plan"]["grad_accum"] == 1


def test_a_pinned_accumulation_that_holds_gradients_is_named_as_the_change():
    with pytest.raises(NoFeasiblePlanError) as err:
        _decide(model="llama-3.1-70b", method="full", backend="fsdp2", gpus=8, nodes=2, gpu="H200", grad_accum=4)
    assert err.value.hint.startswith("--grad-accum 1 "), err.value.hint


def test_an_impractical_global_batch_is_named_as_the_change():
    with pytest.raises(NoFeasiblePlanError) as err:
        _decide(model="7B", gpu="H100-80GB", gpus=1, global_batch=100_000_000)
    assert "no practical plan" in err.value.message
    assert err.value.hint.startswith("--global-batch 64 "), err.value.hint


@pytest.mark.parametrize("kw, rule", [
    (dict(model="7B", gpu="H100-80GB", gpus=1, backend="deepspeed", zero=2, offload="all"), "DS003"),
    (dict(model="7B", gpu="H100-80GB", gpus=8, backend="deepspeed", zero=1, offload="all"), "DS003"),
    (dict(model="qwen2.5-1.5b", trainer="grpo", gpu="H100-80GB", gpus=1, vllm="server"), "VLLM002"),
])
def test_pins_the_generator_has_no_structure_for_name_the_rule_they_break(kw, rule):
    # the candidate generator never builds these plans; "searched 0 configurations, try a smaller model" was the
    # answer, while a rule says exactly what is wrong
    with pytest.raises(PinnedRuleError) as err:
        _decide(**kw)
    assert err.value.message.startswith(rule), err.value.message
