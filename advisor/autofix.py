"""`check --fix`: apply the rules' automatic fixes to a request, one error at a time, until the rules pass or no
fix applies; the result is the corrected request and the `generate` line that runs it. Nothing is written.

A fix names plan fields (rules' `auto_fix`); each maps to the request knob that pins it (zero_stage is --zero,
vllm_mode is --vllm). A fix that names a field no flag sets (num_processes: the process count follows from --gpus
and the vLLM split) or gives a value the request refuses stops the loop with the finding left as it is."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from advisor.core.errors import AdvisorError
from advisor.core.request import Request

PLAN_TO_REQUEST = {"zero_stage": "zero", "vllm_mode": "vllm"}
"""Plan fields whose request knob has another name; the others share it."""
DERIVED = frozenset({"num_processes", "gpus_per_node", "nodes"})
"""Plan fields a fix may also name that follow from other knobs (--gpus, --nodes, the vLLM split): not pinned."""
MAX_ROUNDS = 8
"""More fixes than any chain of rules needs (a fix per error kind); a loop that has not converged by then stops."""


@dataclass
class Applied:
    rule: str
    knob: str
    before: Any
    after: Any

    def to_dict(self) -> dict:
        return {"rule": self.rule, "knob": self.knob, "from": self.before, "to": self.after}


@dataclass
class FixOutcome:
    request: Request
    report: Any
    applied: list[Applied] = field(default_factory=list)
    stopped: str = ""
    """Why the loop stopped with errors left: the finding whose fix could not be applied, or ''."""


def _request_changes(fix: dict) -> dict | None:
    """The request knobs an auto_fix sets, or None when it names one no flag sets. 0 for a count or fraction that
    only a mode uses (vllm_gpus 0 with colocate) is the knob left unpinned."""
    names = {f.name for f in fields(Request)}
    out: dict[str, Any] = {}
    for plan_field, value in fix.items():
        if plan_field in DERIVED:
            continue
        knob = PLAN_TO_REQUEST.get(plan_field, plan_field)
        if knob not in names:
            return None
        out[knob] = None if value in (0, 0.0) and knob in ("vllm_gpus", "vllm_mem_fraction") else value
    return out or None


def _read_by_others(finding, fix: dict, errors) -> int:
    """How many other failing rules read a plan field this fix changes (rules' declared `reads`)."""
    import rules

    changed = {f"plan.{name}" for name in fix}
    return sum(1 for other in errors if other.id != finding.id and changed & set(rules.get_rule(other.id).reads))


def apply_auto_fixes(req: Request, check) -> FixOutcome:
    """`check(req)` (advisor.check.check_request) run after each fix; the first error with an applicable fix is
    applied, then the next. A request seen before (two fixes undoing each other) stops the loop."""
    report = check(req)
    outcome = FixOutcome(req, report)
    seen = {repr(req)}
    for _ in range(MAX_ROUNDS):
        errors = [f for f in outcome.report.findings if f.is_error]
        if not errors:
            return outcome
        fixable = [(f, c) for f in errors if f.auto_fix for c in [_request_changes(f.auto_fix)] if c]
        # a fix that changes what other failing rules read goes first (SP016's cp_size before SP012's length
        # fitted to the old cp_size): the later fixes then start from the corrected value
        step = max(fixable, key=lambda fc: _read_by_others(fc[0], fc[0].auto_fix, errors), default=None)
        if step is None:
            outcome.stopped = f"{errors[0].id} has no automatic fix: {errors[0].fix or errors[0].message}"
            return outcome
        finding, changes = step
        fixed = outcome.request.with_(**changes)
        if repr(fixed) in seen:
            outcome.stopped = f"{finding.id}'s fix undoes an earlier one"
            return outcome
        try:
            report = check(fixed)
        except AdvisorError as exc:
            outcome.stopped = f"{finding.id}'s fix gives a request the checks refuse: {exc.message}"
            return outcome
        seen.add(repr(fixed))
        outcome.applied += [Applied(finding.id, k, getattr(outcome.request, k), v) for k, v in changes.items()]
        outcome.request, outcome.report = fixed, report
    outcome.stopped = f"no end after {MAX_ROUNDS} fixes"
    return outcome
