"""When every plan that fits offloads to host memory, the fastest wins whatever its method: full fine-tuning by
offload keeps fp32 Adam states of every weight in host RAM (70B: about 1.1 TiB) at a fraction of an adapter plan's
speed. Where a plan fits without offload, the most faithful method still leads."""

from __future__ import annotations

from advisor.core.request import Request
from advisor.search import decide


def test_all_offloading_plans_are_ranked_by_speed():
    decision, _ = decide(Request(model="70B", gpus=1, gpu="RTX-4090"))
    chosen = decision.chosen
    assert chosen.plan.offload != "none" and chosen.plan.method != "full"
    full = [a for a in decision.alternatives if a.plan.method == "full" and a.memory is not None and a.speed]
    assert full and all(a.tokens_per_second < chosen.tokens_per_second for a in full)
    assert chosen.memory.host_bytes < min(a.memory.host_bytes for a in full)
    assert "all of which offload" in decision.reasons["method"]


def test_a_plan_on_the_gpus_keeps_the_most_faithful_method():
    decision, _ = decide(Request(model="8B", gpus=8, gpu="H100-80GB"))
    assert decision.chosen.plan.method == "full" and decision.chosen.plan.offload == "none"
    assert decision.reasons["method"] == "full: every weight trained, and it fits"
