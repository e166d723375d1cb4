"""KTO's KL term needs two examples per device (rule TRN005): the search starts KTO's micro-batch at 2, and takes it
even where it overshoots the default global batch. It used to scan from 1, stop before 2 once 2 x processes passed 64,
and refuse 7B KTO on 64 H100 ("no plan fits") with a hint of a 4,096-sequence step."""

from __future__ import annotations

import pytest

from advisor.core.errors import AdvisorError
from advisor.core.request import Request
from advisor.search import PinnedRuleError, decide


@pytest.mark.parametrize("kw", [
    dict(model="qwen2.5-7b", trainer="kto", gpu="H100-80GB", gpus=8, nodes=8),
    dict(model="qwen2.5-0.5b", trainer="kto", gpu="A100-80GB", gpus=8, nodes=16),
])
def test_kto_on_many_processes_trains_two_per_device(kw):
    _, result = decide(Request(**kw))
    plan = result["plan"]
    assert plan["micro_batch"] == 2 and plan["grad_accum"] == 1
    assert not [f for f in result["findings"] if f["id"] == "TRN005" and f["severity"] == "error"]
    assert "KTO allows" in result["why"]["micro_batch"]


@pytest.mark.parametrize("kw", [
    dict(model="llama-3.1-8b", trainer="kto", method="lora", gpu="RTX-4090", gpus=1, seq_len=4096),
    dict(model="qwen2.5-7b", trainer="kto", gpu="H100-80GB", gpus=8),
    dict(model="llama-3.1-70b", trainer="kto", gpu="A100-80GB", gpus=8, seq_len=2048),
])
def test_kto_never_gets_micro_batch_one_unless_pinned(kw):
    decision, result = decide(Request(**kw))
    assert result["plan"]["micro_batch"] >= 2
    assert all(a.plan.micro_batch >= 2 for a in decision.alternatives)


def test_a_pinned_kto_micro_batch_of_one_is_still_the_rules_refusal():
    with pytest.raises(PinnedRuleError) as err:
        decide(Request(model="qwen2.5-7b", trainer="kto", gpu="H100-80GB", gpus=8, micro_batch=1))
    assert err.value.message.startswith("TRN005"), err.value.message


def test_a_kto_global_batch_below_two_per_device_names_the_nearest_that_splits():
    # 8 sequences over 8 processes is micro-batch 1, which KTO refuses: was "no plan fits" with a memory hint
    with pytest.raises(AdvisorError) as err:
        decide(Request(model="qwen2.5-7b", trainer="kto", gpu="H100-80GB", gpus=8, global_batch=8))
    assert "KTO" in err.value.message and err.value.exit_code == 2
    assert err.value.hint.startswith("use --global-batch 16 "), err.value.hint
