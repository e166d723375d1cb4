"""check --fix applies the rules' automatic fixes to a request until it passes, says each change and which rule
made it, and gives the generate line of the corrected request; the fixed request then passes a plain check.
A fix no flag can express, or none at all, stops with the finding named; --fix refuses a bundle (exit 2), and a
request the flags' own checks refuse stays that usage error (exit 2), as without --fix."""

from __future__ import annotations

import contextlib
import io
import json
import shlex

import pytest

from advisor.cli import main


def _cli(*argv: str) -> tuple[int, str, str]:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", [
    ["--model", "qwen2.5-7b", "--gpus", "8", "--gpu", "H100-80GB", "--sp-size", "3", "--seq-len", "32767",
     "--backend", "deepspeed"],
    ["--model", "qwen2.5-7b", "--gpus", "8", "--gpu", "H100-80GB", "--backend", "fsdp2", "--sp-size", "2"],
    ["--model", "qwen2.5-7b", "--gpus", "4", "--gpu", "H100-80GB", "--trainer", "grpo", "--method", "qlora",
     "--vllm", "server"],
    ["--model", "7B", "--gpus", "2", "--gpu", "H100-80GB", "--backend", "deepspeed", "--zero", "2", "--offload",
     "all"],
])
def test_fixed_request_passes_a_plain_check(argv):
    rc, out, _ = _cli("check", *argv, "--fix", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["auto_fixed"], doc
    assert all(a["rule"] and a["knob"] for a in doc["auto_fixed"])
    command = shlex.split(doc["generate"])
    assert command[:2] == ["trl-advisor", "generate"]
    rc2, _, err = _cli("check", *command[2:])
    assert rc2 == 0, err


def test_text_output_names_each_change_and_the_next_command():
    rc, out, _ = _cli("check", "--model", "qwen2.5-7b", "--gpus", "8", "--gpu", "H100-80GB", "--sp-size", "3",
                      "--backend", "deepspeed", "--fix")
    assert rc == 0
    assert "auto-fix  SP001: sp-size 3 -> 2" in out and "\nnext      trl-advisor generate " in out


def test_a_passing_request_changes_nothing():
    rc, out, _ = _cli("check", "--model", "qwen2.5-0.5b", "--gpu", "H100-80GB", "--fix")
    assert rc == 0 and "auto-fix  nothing to change" in out


def test_fix_refuses_a_bundle(tmp_path):
    rc, _, err = _cli("check", "--bundle", str(tmp_path), "--fix")
    assert rc == 2 and "--fix corrects a request, not a bundle's files" in err


def test_a_usage_error_stays_one():
    rc, _, err = _cli("check", "--model", "qwen2.5-0.5b", "--gpu", "H100-80GB", "--vllm", "colocate", "--fix")
    assert rc == 2 and "--vllm does not apply to --trainer sft" in err


def test_a_fix_other_findings_depend_on_goes_first():
    """SP016 (cp 3 does not divide 8) changes what SP012 (length divisible by 2 x cp) reads: the degree is fixed
    first, and the length is then fitted to the new degree (1030 -> 1028 for cp 2), never to the refused one."""
    rc, out, _ = _cli("check", "--model", "qwen2.5-7b", "--gpus", "8", "--gpu", "H100-80GB", "--cp-size", "3",
                      "--backend", "fsdp2", "--seq-len", "1030", "--fix", "--json")
    doc = json.loads(out)
    assert rc == 0
    assert [(a["rule"], a["knob"], a["from"], a["to"]) for a in doc["auto_fixed"]] == [
        ("SP016", "cp_size", 3, 2), ("SP012", "seq_len", 1030, 1028)]
