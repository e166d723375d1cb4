"""Running the rules: one Context in, every Finding out (passes included), and the `check` entry points."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rules.model import FAIL, NOT_APPLICABLE, PASS, UNKNOWN, Context, Finding, Result, Rule, na, unknown

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
MAX_EVIDENCE_TEXT = 160
"""Longer strings (a whole launch script) are summarised in the evidence."""


def resolve_read(ctx: Context, path: str) -> Any:
    """The value a dotted `reads` path names (`plan.sp_size`, `files.trl_args.bf16`, `versions.liger-kernel`)."""
    root, _, rest = path.partition(".")
    if root == "versions":
        return (ctx.versions or {}).get(rest) if rest else ctx.versions
    obj: Any = getattr(ctx, root, None)
    for part in rest.split(".") if rest else ():
        if obj is None:
            return None
        if isinstance(obj, dict):
            obj = obj.get(part)
        else:
            obj = getattr(obj, part, None)
            if callable(obj):
                return None
    return obj


def _evidence_value(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_EVIDENCE_TEXT:
        return f"<{len(value.splitlines())} lines>"
    if isinstance(value, dict) and len(str(value)) > 4 * MAX_EVIDENCE_TEXT:
        return f"<{len(value)} keys>"
    return value


def run_rule(rule: Rule, ctx: Context, *, strict: bool = False) -> Finding:
    applies, why = rule.applies(ctx.versions or {})
    if not applies:
        result: Result = na(why)
    else:
        try:
            result = rule.check(ctx)
        except Exception as exc:  # a rule bug must not hide the other findings
            if strict:
                raise
            result = unknown(f"the rule could not evaluate this configuration ({exc.__class__.__name__}: {exc})")
    reads = {path: _evidence_value(resolve_read(ctx, path)) for path in rule.reads}
    reads.update(result.evidence)
    message = result.message or (rule.summary if result.status == PASS else "")
    return Finding(id=rule.id, name=rule.name, severity=rule.severity, status=result.status, message=message,
                   fix=result.fix, auto_fix=result.auto_fix, sources=rule.sources, reads=reads)


def run_rules(ctx: Context, rules: Iterable[Rule] | None = None, *, strict: bool = False) -> list[Finding]:
    """Every rule's finding for this context, passes and not-applicable ones included, in registry order."""
    if rules is None:
        from rules.rulebook import ALL_RULES

        rules = ALL_RULES
    return [run_rule(r, ctx, strict=strict) for r in rules]


def failures(findings: Iterable[Finding]) -> list[Finding]:
    """Only the failed findings, errors first."""
    return sorted((f for f in findings if f.status == FAIL), key=lambda f: (SEVERITY_ORDER[f.severity], f.id))


def reportable(findings: Iterable[Finding]) -> list[Finding]:
    """What a report lists: failures and unknowns (passes and not-applicable ones are left out)."""
    return sorted((f for f in findings if f.status in (FAIL, UNKNOWN)),
                  key=lambda f: (f.status != FAIL, SEVERITY_ORDER[f.severity], f.id))


@dataclass
class CheckReport:
    """The outcome of `check`: every finding, and what was assumed to build the configuration."""

    findings: list[Finding]
    plan: Any = None
    model: Any = None
    target: Any = None
    assumptions: list[str] = field(default_factory=list)
    """Values the input did not give (bundle files): each default taken, shown in the report."""
    notes: list[str] = field(default_factory=list)
    """Diagnostics about the target (e.g. no GPU found here): the CLI prints them on stderr."""
    source: str = "request"
    """request | bundle (the path)."""

    @property
    def ok(self) -> bool:
        return not any(f.is_error for f in self.findings)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in failures(self.findings) if f.severity == "error"]

    @property
    def failures(self) -> list[Finding]:
        return failures(self.findings)

    def counts(self) -> dict[str, int]:
        out = {"error": 0, "warning": 0, "info": 0, PASS: 0, NOT_APPLICABLE: 0, UNKNOWN: 0}
        for f in self.findings:
            if f.status == FAIL:
                out[f.severity] += 1
            else:
                out[f.status] += 1
        return out

    def to_json(self, *, include_all: bool = False) -> dict:
        """{"ok", "findings": [...]} (CONTRACT.md); findings are the failures and unknowns unless include_all."""
        listed = self.findings if include_all else reportable(self.findings)
        out: dict = {"ok": self.ok, "findings": [f.to_dict() for f in listed], "counts": self.counts(),
                     "assumptions": list(self.assumptions), "notes": list(self.notes), "source": self.source}
        if self.plan is not None:
            out["plan"] = self.plan.to_dict()
        if self.target is not None:
            out["hardware"] = {"gpu": self.target.gpu.id, "gpus_per_node": self.target.gpus_per_node,
                               "nodes": self.target.nodes, "gpu_memory_bytes": self.target.gpu_memory_bytes}
        if self.model is not None:
            out["model"] = self.model.id
        return out


def finding_dicts(ctx: Context) -> list[dict]:
    """Every rule on one configuration; the failures and unknowns as CONTRACT.md finding objects (the `findings` of
    `estimate --json` and `generate --json`)."""
    return [f.to_dict() for f in reportable(run_rules(ctx))]


__all__ = ["CheckReport", "failures", "finding_dicts", "reportable", "run_rule", "run_rules", "resolve_read"]
