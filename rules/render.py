"""Text and data views of the rules: `check` reports, `rules`, `explain`, `rules --matrix`, and docs/rules.md."""

from __future__ import annotations

import textwrap

from rules.engine import CheckReport, reportable
from rules.model import AREAS, UNKNOWN, Rule

WIDTH = 100


def _rules() -> tuple[Rule, ...]:
    from rules.rulebook import ALL_RULES

    return ALL_RULES


def render_check(report: CheckReport) -> str:
    """ruff-style: one block per failing (or undecidable) rule, then a summary and the assumptions made."""
    lines: list[str] = []
    if report.target is not None and report.plan is not None:
        model = f"{report.model.id} on " if report.model is not None else ""
        lines.append(f"check {report.source}: {model}{report.target.describe()}")
        lines.append(f"  plan: {report.plan.trainer}, {report.plan.short()}")
        if report.source == "request":
            # check judges this one configuration; generate would search the knobs left out
            lines.append("  (knobs not given take estimate's documented defaults; `trl-advisor generate` searches "
                         "them)")
        lines.append("")
    for f in reportable(report.findings):
        tag = f"not checked: {f.severity} if it fails" if f.status == UNKNOWN else f.severity
        lines.append(f"{f.id} [{tag}] {f.name}: {f.message}")
        if f.fix:
            lines.extend(textwrap.wrap(f"fix: {f.fix}", WIDTH, initial_indent="    ", subsequent_indent="      "))
        if f.auto_fix:
            changes = ", ".join(f"{k}={v!r}" for k, v in f.auto_fix.items())
            lines.append(f"    auto-fix: {changes}")
        lines.append(f"    see: trl-advisor explain {f.id}")
    c = report.counts()
    if lines and lines[-1] != "":
        lines.append("")
    lines.append(f"{c['error']} error(s), {c['warning']} warning(s), {c['info']} info, {c[UNKNOWN]} unknown; "
                 f"{c['pass']} rules passed, {c['not-applicable']} not applicable")
    if report.assumptions:
        lines.append("")
        lines.append("Assumed (not in the input):")
        lines.extend(f"  {a}" for a in report.assumptions)
    return "\n".join(lines) + "\n"


def rule_dict(r: Rule) -> dict:
    return {"id": r.id, "name": r.name, "severity": r.severity, "area": AREAS[r.area], "summary": r.summary,
            "sections": r.sections(), "reads": list(r.reads), "sources": list(r.sources),
            "applies_to": {p: s for p, s in r.applies_to}, "seed_id": r.seed_id, "auto_fix": r.auto_fixable}


def rules_json() -> list[dict]:
    return [rule_dict(r) for r in _rules()]


def render_rules() -> str:
    """`trl-advisor rules`: every rule by area, one line each."""
    lines = []
    for area, title in AREAS.items():
        members = [r for r in _rules() if r.area == area]
        if not members:
            continue
        lines.append(f"{area}  {title} ({len(members)})")
        for r in members:
            head = f"  {r.id:<8} {r.severity:<8} {r.name:<48} "
            lines.append(head + textwrap.shorten(r.summary, width=max(40, WIDTH + 40 - len(head)), placeholder=" ..."))
        lines.append("")
    lines.append(f"{len(_rules())} rules. Details: trl-advisor explain RULE_ID")
    return "\n".join(lines) + "\n"


def explain(rule_id: str) -> str:
    """`trl-advisor explain ID` (ruff `rule` style). Unknown id -> advisor.core.errors.UnknownNameError."""
    from rules.rulebook import get_rule

    r = get_rule(rule_id)
    lines = [f"{r.id} {r.name} ({r.severity})", r.summary, ""]
    for title, body in r.sections().items():
        lines.append(title)
        for para in body.splitlines():
            lines.append(("  " + para) if para.strip() else "")
        lines.append("")
    lines.append(f"Area: {AREAS[r.area]}")
    lines.append(f"Reads: {', '.join(r.reads)}")
    if r.applies_to:
        lines.append("Applies to: " + ", ".join(f"{p}{s}" for p, s in r.applies_to))
    if r.auto_fixable:
        lines.append("Automatic fix: yes (the planner can apply it)")
    # seed_id (the constraint catalogue row a rule came from) stays in --json: a reader of the text has no use for it
    return "\n".join(lines) + "\n"


def explain_json(rule_id: str) -> dict:
    from rules.rulebook import get_rule

    return rule_dict(get_rule(rule_id))


def render_matrix(matrix: dict | None = None) -> str:
    """`trl-advisor rules --matrix`: the compatibility rows, one per line."""
    from rules.compat import compat_matrix

    m = matrix or compat_matrix()
    rows = m["rows"]
    wa = max(len(r["a"]) for r in rows)
    wb = max(len(r["b"]) for r in rows)
    wv = max(len(r["verdict"]) for r in rows)
    lines = [f"{'feature':<{wa}}  {'with':<{wb}}  {'verdict':<{wv}}  rule     reason"]
    for r in rows:
        reason = r["reason"] + (f" [only if: {r['condition']}]" if r.get("condition") else "")
        lines.append(f"{r['a']:<{wa}}  {r['b']:<{wb}}  {r['verdict']:<{wv}}  {r['rule']:<8} {reason}")
    lines.append("")
    lines.append(f"{len(rows)} rows; sources: trl-advisor rules --matrix --json")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rules_markdown() -> str:
    """docs/rules.md: the rules by area as markdown tables (written by `python -m rules --write-docs`)."""
    rules = _rules()
    lines = ["# Rules", "",
             "Every check `trl-advisor check` runs, by area. Generated by `python -m rules --write-docs` from the rule "
             "registry; do not edit by hand. `trl-advisor explain ID` prints a rule's full documentation.", "",
             "| area | rules |", "|---|---|"]
    for area, title in AREAS.items():
        n = sum(1 for r in rules if r.area == area)
        lines.append(f"| {area} ({_md(title)}) | {n} |")
    lines.append(f"| total | {len(rules)} |")
    lines.append("")
    for area, title in AREAS.items():
        members = [r for r in rules if r.area == area]
        if not members:
            continue
        lines += [f"## {area}: {title}", "", "| id | name | severity | checks | auto-fix | source |",
                  "|---|---|---|---|---|---|"]
        for r in members:
            lines.append(f"| {r.id} | `{r.name}` | {r.severity} | {_md(r.summary)} | "
                         f"{'yes' if r.auto_fixable else ''} | [link]({r.sources[0]}) |")
        lines.append("")
    from rules.compat import compat_matrix

    m = compat_matrix()
    lines += ["## Compatibility matrix", "", "| feature | with | verdict | rule | reason |", "|---|---|---|---|---|"]
    for row in m["rows"]:
        cond = f" Only if: {row['condition']}." if row.get("condition") else ""
        lines.append(f"| {row['a']} | {row['b']} | {row['verdict']} | {row['rule']} | "
                     f"{_md(row['reason'])}{_md(cond)} [source]({row['source']}) |")
    lines.append("")
    return "\n".join(lines)
