"""A refusal names what the user can change: the rule their own pins break, not one about the planner's choices, and
a change the search would make (accumulation, the global batch) before a smaller model or another method."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from advisor.core.errors import AdvisorError, NoFeasiblePlanError
from advisor.core.request import Request
from advisor.search import PinnedRuleError, decide

HARDWARE = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"


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


@pytest.mark.parametrize("kw, first, fixed", [
    # SP002 (the backend the planner chose for a pinned --sp-size) came first; RLOO's own refusal of sp is the cause
    (dict(model="qwen3-8b", trainer="rloo", gpus=8, gpu="H100-80GB", vllm="colocate", sp_size=2, seq_len=32768,
          max_completion_len=1024), "SP015", dict(sp_size=1, cp_size=1)),
    # SP012's --seq-len for cp 3 came first, then SP016 refused cp 3 itself
    (dict(model="8B", gpu="H100-80GB", gpus=8, cp_size=3, seq_len=65536), "SP016", dict(cp_size=2)),
])
def test_the_first_refusal_is_the_one_whose_fix_ends_it(kw, first, fixed):
    with pytest.raises(PinnedRuleError) as err:
        _decide(**kw)
    assert err.value.message.startswith(first), err.value.message
    _decide(**{**kw, **fixed})  # following the hint plans


def test_a_zero_vllm_gpus_is_refused_not_read_as_unset():
    with pytest.raises(AdvisorError) as err:
        _decide(model="qwen3-8b", trainer="grpo", gpus=8, gpu="H100-80GB", vllm="server", vllm_gpus=0)
    assert err.value.exit_code == 2 and "--vllm-gpus" in err.value.message


def test_unsloth_on_fsdp2_is_refused_with_what_runs():
    with pytest.raises(AdvisorError) as err:
        _decide(model="8B", gpu="H100-80GB", gpus=8, unsloth=True, backend="fsdp2")
    assert err.value.exit_code == 2 and "--backend deepspeed" in err.value.hint


def test_a_pinned_backend_that_is_the_cause_is_named():
    with pytest.raises(NoFeasiblePlanError) as err:
        _decide(model="70B", gpu="H100-80GB", gpus=8, method="full", backend="ddp")
    assert err.value.hint.startswith("another backend (without --backend ddp) makes one: "), err.value.hint
    assert "full" in err.value.hint


def test_host_ram_as_the_limit_is_named_and_fewer_gpus_suggested(tmp_path):
    data = json.loads((HARDWARE / "h100_sxm_x8_nvlink.json").read_text())
    data["host"]["ram_total_bytes"], data["host"]["ram_available_bytes"] = 32 << 30, 31 << 30
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data))
    with pytest.raises(NoFeasiblePlanError) as err:
        _decide(model="8B", hardware=str(path))
    assert "host RAM is the limit" in err.value.message
    gpus = int(re.match(r"--gpus (\d+) ", err.value.hint).group(1))
    _decide(model="8B", hardware=str(path), gpus=gpus)  # following the hint plans
