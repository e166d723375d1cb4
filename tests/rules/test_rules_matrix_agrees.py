"""The compatibility matrix (rules/data/compat.toml, `trl-advisor rules --matrix`) says what its rule does: a pair it
calls incompatible is one the rule fails, a pair it calls supported is one the rule lets through. A row written
from a maintainer's old comment while the rule follows the library's newer code contradicts the planner (it once
called Unsloth with DeepSpeed incompatible while CMP002 and generate ran Unsloth under ZeRO-2)."""

from __future__ import annotations

import pytest
from rules_harness import build_context

import rules
from rules import get_rule
from rules.engine import run_rule

FEATURE_REQUEST = {
    "deepspeed": {"backend": "deepspeed", "zero": 2}, "zero3": {"backend": "deepspeed", "zero": 3},
    "fsdp2": {"backend": "fsdp2"}, "ddp": {"backend": "ddp"}, "unsloth": {"unsloth": True},
    "lora": {"method": "lora"}, "qlora": {"method": "qlora"}, "liger": {"liger": True},
    "ulysses-sp": {"sp_size": 2}, "ring-cp": {"cp_size": 2}, "packing": {"packing": True},
    "eager": {"attn": "eager"}, "sdpa": {"attn": "sdpa"}, "offload": {"offload": "optimizer"},
    "vllm-colocate": {"vllm": "colocate"}, "vllm-server": {"vllm": "server", "vllm_gpus": 1},
    **{t: {"trainer": t} for t in ("sft", "dpo", "kto", "grpo", "rloo", "gkd")},
}
"""Matrix features a request can ask for (the others, package versions and environments, are not plan knobs)."""



def _one_request(row) -> bool:
    """Both features fit one request (deepspeed + fsdp2 are two values of --backend: a pair of files, not a plan)."""
    a, b = FEATURE_REQUEST[row["a"]], FEATURE_REQUEST[row["b"]]
    return all(a[key] == b[key] for key in set(a) & set(b))


ROWS = [row for row in rules.compat_matrix()["rows"]
        if row["verdict"] in ("incompatible", "supported") and row["a"] in FEATURE_REQUEST
        and row["b"] in FEATURE_REQUEST and _one_request(row)]


def _context(row):
    request = {**FEATURE_REQUEST[row["a"]], **FEATURE_REQUEST[row["b"]]}
    if request.get("vllm") and "trainer" not in request:
        request["trainer"] = "grpo"
    if request.get("sp_size") and request.get("backend") not in ("fsdp2", "ddp"):
        request.setdefault("backend", "deepspeed")
    if request.get("cp_size"):
        request.setdefault("backend", "fsdp2")
    return build_context({"name": f"{row['a']}+{row['b']}", "gpus": 4, "request": request})


def test_enough_rows_are_checked():
    assert len(ROWS) >= 11, [(r["a"], r["b"]) for r in ROWS]
    assert any(r["a"] == "unsloth" and r["b"] == "ddp" for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['a']}+{r['b']}-{r['rule']}" for r in ROWS])
def test_the_rule_does_what_the_matrix_says(row):
    finding = run_rule(get_rule(row["rule"]), _context(row), strict=True)
    if row["verdict"] == "incompatible":
        assert finding.status == "fail", f"{row['a']} + {row['b']}: {finding.status}: {finding.message}"
    else:
        assert finding.status != "fail" or finding.severity != "error", f"{finding.message}"
