"""The rule engine: every constraint trl-advisor checks, with a permanent id, a documented reason and a source.

Order here is report order; ids are permanent (a retired id is never reused). The rules themselves are listed
in rules.rulebook; this package face hands on what the rest of trl-advisor uses.
"""

from __future__ import annotations

from rules.compat import compat_matrix
from rules.engine import CheckReport, failures, finding_dicts, reportable, run_rules
from rules.model import AREAS, Context, Finding, Result, Rule
from rules.parallelism import valid_sp_sizes
from rules.registry import RuleDefinitionError
from rules.render import explain, explain_json, render_check, render_matrix, render_rules, rules_json, rules_markdown
from rules.rulebook import ALL_RULES, all_rules, get_rule

__all__ = [
    "ALL_RULES", "AREAS", "CheckReport", "Context", "Finding", "Result", "Rule", "RuleDefinitionError", "all_rules",
    "compat_matrix", "finding_dicts", "explain", "explain_json", "failures", "get_rule",
    "render_check", "render_matrix", "render_rules", "reportable", "rules_json", "rules_markdown", "run_rules",
    "valid_sp_sizes",
]
