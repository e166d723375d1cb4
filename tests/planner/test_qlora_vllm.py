"""QLoRA's policy never feeds a vLLM server (rule VLLM013): TRL merges the adapters and streams every weight to the
server, and PEFT's merge on a bitsandbytes 4-bit base writes packed Params4bit tensors (uint8, [n, 1]) that a bf16
server cannot load; only colocate mode starts its engine with quantization="bitsandbytes". So the planner never
picks a server for QLoRA, a pinned one is refused naming the rule, and check --bundle finds a bundle edited
into one."""

from __future__ import annotations

import contextlib
import io

import pytest

from advisor.cli import main
from advisor.core.errors import AdvisorError
from advisor.core.request import Request
from advisor.search import decide


def _cli(*argv: str) -> tuple[int, str, str]:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("trainer", ["grpo", "rloo"])
@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_the_planner_never_serves_a_quantized_policy(trainer, gpus):
    decision, _ = decide(Request(model="qwen2.5-7b", trainer=trainer, method="qlora", gpus=gpus, gpu="H100-80GB"))
    assert decision.chosen is not None and decision.chosen.plan.vllm_mode != "server"
    assert all(a.plan.vllm_mode != "server" for a in decision.alternatives)


def test_lora_may_still_use_a_server():
    """The rule is about 4-bit weights, not adapters: LoRA on a bf16 base syncs bf16 tensors."""
    decision, _ = decide(Request(model="qwen2.5-7b", trainer="grpo", method="lora", vllm="server", gpus=4,
                                 gpu="H100-80GB"))
    assert decision.chosen is not None and decision.chosen.plan.vllm_mode == "server"


def test_a_pinned_server_is_refused_naming_the_rule():
    """A pinned knob that breaks a rule is a finding (exit 1), as every other pinned-rule refusal."""
    with pytest.raises(AdvisorError) as err:
        decide(Request(model="qwen2.5-7b", trainer="grpo", method="qlora", vllm="server", gpus=4, gpu="H100-80GB"))
    assert err.value.exit_code == 1
    assert "VLLM013" in err.value.message


def test_check_reports_the_request(tmp_path):
    rc, out, _ = _cli("check", "--model", "qwen2.5-7b", "--trainer", "grpo", "--method", "qlora", "--vllm", "server",
                      "--gpus", "4", "--gpu", "H100-80GB")
    assert rc == 1 and "VLLM013" in out and "--vllm colocate" in out
