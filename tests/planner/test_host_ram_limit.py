"""A node whose host RAM is not known (a catalogue GPU, no probe file) is still a real server: a plan that needs more
host RAM per node than the largest GPU servers have (4 TiB) is refused, not chosen with a note that the host RAM was
not checked. 405B full fine-tuning on one node of 8 H100 with every state offloaded needs about 6.8 TiB."""

from __future__ import annotations

import pytest

from advisor.core.errors import NoFeasiblePlanError
from advisor.core.request import Request
from advisor.search import decide
from advisor.search.planner import LARGEST_NODE_HOST_RAM_BYTES


def test_a_plan_no_server_can_hold_is_refused_with_host_ram_named():
    with pytest.raises(NoFeasiblePlanError) as err:
        decide(Request(model="405B", method="full", gpu="H100-80GB", gpus=8))
    assert "host RAM is the limit" in err.value.message, err.value.message
    assert " makes one: " in err.value.hint, err.value.hint
    # the refused family is shown by the candidate the GPUs hold, with the host RAM it needs
    reasons = [a["rejected_because"] for a in err.value.details["alternatives"]]
    assert any("GiB host RAM per node" in r for r in reasons), reasons


@pytest.mark.parametrize("kw", [
    dict(model="405B", gpu="H100-80GB", gpus=8),  # unpinned: an adapter plan, not 6.8 TiB of offloaded states
    dict(model="llama-3.1-70b", method="full", gpu="A100-40GB", gpus=2),  # 70B full by offload: about 1.2 TiB
    dict(model="405B", method="full", gpu="H100-80GB", gpus=8, nodes=4),
])
def test_chosen_plans_fit_the_largest_server(kw):
    _, result = decide(Request(**kw))
    assert result["memory"]["host_bytes"] <= LARGEST_NODE_HOST_RAM_BYTES
