"""The change a refusal names must answer the refusal: a plan refused for hours per optimizer step is not answered by
a shorter step at the same rate, and when no single change makes a plan, the hint names the changes that do
together, or only remedies that were not searched already."""

from __future__ import annotations

import re

import pytest

from advisor.core.errors import NoFeasiblePlanError
from advisor.core.request import Request
from advisor.search import decide
from advisor.search.planner import IMPRACTICAL_STEP_SECONDS


def _refusal(**kw) -> NoFeasiblePlanError:
    with pytest.raises(NoFeasiblePlanError) as err:
        decide(Request(**kw))
    return err.value


def _rate(text: str) -> float:
    return float(re.findall(r"\(([\d,.]+) tokens/s\)", text)[-1].replace(",", ""))


@pytest.mark.parametrize("kw", [
    # QLoRA with everything offloaded on one T4 at ~10 tokens/s: one micro-batch per step (or shorter sequences)
    # at the same rate made the steps short and the job no shorter
    dict(model="405B", gpu="T4", gpus=1),
    dict(model="llama-3.1-405b", trainer="rloo", method="qlora", gpu="H100-80GB", gpus=8, nodes=2, seq_len=4096),
])
def test_hours_per_step_are_answered_by_a_faster_plan_not_a_shorter_step(kw):
    err = _refusal(**kw)
    assert "no practical plan" in err.message, err.message
    hours = float(re.search(r"takes ([\d.]+) h per optimizer step", err.message).group(1))
    refused_tokens = hours * 3600 * _rate(err.message)
    assert not err.hint.startswith(("--grad-accum 1", "--seq-len")), err.hint
    if "make" in err.hint.split(":")[0]:
        # the plan named trains the refused step's tokens within the practical limit (10 % for the rounded hours)
        assert _rate(err.hint) * IMPRACTICAL_STEP_SECONDS >= 0.9 * refused_tokens, err.hint


def test_a_pinned_accumulation_that_makes_the_step_hours_long_is_still_the_change():
    err = _refusal(model="7B", gpu="H100-80GB", gpus=1, grad_accum=1_000_000)
    assert "no practical plan" in err.message
    assert err.hint.startswith("--grad-accum 1 "), err.hint


def test_changes_no_single_flag_makes_are_named_together():
    # 405B full at 32k on 2 nodes x 2 T4: neither QLoRA, a shorter sequence, a full node nor more nodes alone fits
    err = _refusal(model="llama-3.1-405b", method="full", gpu="T4", gpus=2, nodes=2, seq_len=32768)
    assert " together make one: " in err.hint, err.hint
    assert err.hint.startswith("--method qlora, --gpus 8 and --nodes "), err.hint


@pytest.mark.parametrize("kw, searched", [
    (dict(model="llama-3.1-405b", trainer="rloo", method="qlora", gpu="L4", gpus=1, nodes=2, seq_len=512), False),
    (dict(model="llama-3.1-70b", trainer="grpo", gpu="RTX-4090", gpus=1, seq_len=4096), True),
])
def test_the_last_resort_never_suggests_what_was_searched(kw, searched):
    # "try a smaller model, LoRA/QLoRA, or more GPUs" was said with --method qlora pinned, or after the search had
    # tried every method: the hint sent the user back to what had just failed
    err = _refusal(**kw)
    assert err.hint.startswith("no change tried gives a plan"), err.hint
    suggestion = err.hint.rpartition("):")[2]
    assert "LoRA" not in suggestion and "more GPUs" not in suggestion, err.hint
    assert ("LoRA and QLoRA" in err.hint) == searched


def test_pins_that_hold_a_plan_out_together_are_named_together():
    # neither --grad-ckpt, --grad-accum 1 nor another backend alone fits 8B DPO LoRA at 2k on one T4; without the
    # three tuning pins the planner finds a plan
    err = _refusal(model="llama-3.1-8b", trainer="dpo", method="lora", gpu="T4", gpus=1, seq_len=2048,
                   grad_ckpt=False, offload="optimizer", grad_accum=4)
    assert err.hint.startswith("without --offload optimizer --grad-accum 4 --no-grad-ckpt makes one: "), err.hint
