"""Choosing a plan: the candidate space, the search against the memory model and the rules, the ranking, and why
the chosen plan won (with the alternatives it beat)."""

from advisor.search.candidates import DEFAULT_GLOBAL_BATCH, MICRO_BATCHES, Candidate, Decision, structures
from advisor.search.explain import explain_choice, render_decision
from advisor.search.planner import (
    PinnedRuleError,
    alternative_json,
    decide,
    plan_json,
    search,
    smallest_change,
)
from advisor.search.ranking import COMPLEXITY_MARGIN, LIGER_MARGIN, OFFLOAD_MARGIN

__all__ = ["COMPLEXITY_MARGIN", "DEFAULT_GLOBAL_BATCH", "LIGER_MARGIN", "MICRO_BATCHES", "OFFLOAD_MARGIN", "Candidate",
           "Decision", "PinnedRuleError", "alternative_json", "decide", "explain_choice", "plan_json",
           "render_decision", "search", "smallest_change", "structures"]
