"""Every case of tests/rules/cases/<ID>.yaml: build the context, run that one rule, compare with the expectation."""

from __future__ import annotations

import pytest
from rules_harness import EXPECT_KEYS, all_cases, build_context

from rules import get_rule
from rules.engine import run_rule

CASES = all_cases()


@pytest.mark.parametrize(("rule_id", "case"), CASES, ids=[f"{r}-{c['name']}" for r, c in CASES])
def test_case(rule_id, case):
    expect = case["expect"]
    assert set(expect) <= EXPECT_KEYS, f"unknown expect keys {set(expect) - EXPECT_KEYS}"
    finding = run_rule(get_rule(rule_id), build_context(case), strict=True)
    assert finding.status == expect["status"], f"{finding.status}: {finding.message} | fix: {finding.fix}"
    if "message" in expect:
        assert expect["message"] in finding.message, finding.message
    if "fix" in expect:
        assert expect["fix"] in finding.fix, finding.fix
    if "auto_fix" in expect:
        assert finding.auto_fix == expect["auto_fix"]
    if expect.get("no_auto_fix"):
        assert finding.auto_fix is None
