"""The rule engine: every constraint trl-advisor checks, with a permanent id, a documented reason and a source.

Order here is report order; ids are permanent (a retired id is never reused). No discovery: each area module ends
with an explicit RULES tuple, concatenated below.
"""

from __future__ import annotations

from rules import (
    compat,
    configfiles,
    distributed,
    hardware,
    memory,
    parallelism,
    peft_quant,
    trainers,
    versions,
    vllm_rules,
)
from rules.compat import compat_matrix
from rules.engine import CheckReport, failures, finding_dicts, reportable, run_rules
from rules.model import AREAS, Context, Finding, Result, Rule
from rules.parallelism import valid_sp_sizes
from rules.registry import RuleDefinitionError, lookup, validate_registry
from rules.render import explain_json, render_check, render_matrix, render_rules, rules_json, rules_markdown

ALL_RULES: tuple[Rule, ...] = validate_registry((
    *hardware.RULES, *distributed.RULES, *peft_quant.RULES, *parallelism.RULES, *trainers.RULES,
    *vllm_rules.RULES, *compat.RULES, *configfiles.RULES, *versions.RULES, *memory.RULES,
))


def all_rules() -> tuple[Rule, ...]:
    return ALL_RULES


def get_rule(rule_id: str) -> Rule:
    """A rule by id or name; unknown -> advisor.core.errors.UnknownNameError with close matches as the hint."""
    return lookup(ALL_RULES, rule_id)


def explain(rule_id: str) -> str:
    """ruff-`rule`-style documentation of one rule; unknown id -> UnknownNameError (exit 2)."""
    from rules.render import explain as _explain

    return _explain(rule_id)


__all__ = [
    "ALL_RULES", "AREAS", "CheckReport", "Context", "Finding", "Result", "Rule", "RuleDefinitionError", "all_rules",
    "compat_matrix", "finding_dicts", "explain", "explain_json", "failures", "get_rule",
    "render_check", "render_matrix", "render_rules", "reportable", "rules_json", "rules_markdown", "run_rules",
    "valid_sp_sizes",
]
