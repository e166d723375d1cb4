"""`recommend` as JSON (CONTRACT.md's keys, plus detail) and as the table a person reads.

The table shows the options worth a look: the Pareto front, the picks (fastest, cheapest, within the budget, within
the deadline) and the fastest option of each GPU type that has no known price; `--all` shows every option.
"""

from __future__ import annotations

from advisor.core.specs import GIB
from advisor.model.job import format_hours
from advisor.recommend.commands import command, generate_request, pinned_request
from advisor.recommend.option import Option, Recommendation
from advisor.search import plan_json

PICK_TITLES = {"fastest": "fastest", "cheapest": "cheapest", "within_budget": "budget", "within_deadline": "deadline"}


def option_json(rec: Recommendation, o: Option) -> dict:
    hw, c, job = o.hardware, o.candidate, o.job
    return {
        "gpu": hw.gpu.id, "gpus_per_node": hw.gpus_per_node, "nodes": hw.nodes, "plan": plan_json(c.plan),
        "tokens_per_second": c.tokens_per_second, "hours": job.hours, "gpu_hours": job.gpu_hours,
        "cost_usd": o.cost_usd, "price_source": o.price.label() if o.price else None, "pareto": o.pareto,
        # detail beyond the contract's keys
        "best_for": list(o.best_for), "gpus": hw.gpus,
        # tokens_per_second is the whole run's (what the job's hours use); this one is the training steps' alone
        "step_tokens_per_second": c.speed.tokens_per_second,
        "usd_per_gpu_hour": o.price.usd_per_gpu_hour if o.price else None,
        "price": o.price.to_dict() if o.price else None,
        "job": job.to_dict(), "step_seconds": c.speed.step_seconds,
        "per_gpu_peak_bytes": c.memory.per_gpu_peak_bytes, "per_gpu_reserved_bytes": c.memory.per_gpu_reserved_bytes,
        "headroom_bytes": c.memory.headroom_bytes, "host_bytes": c.memory.host_bytes,
        "intra_node_link": hw.target().intra_node_link,
        "estimate_command": command("estimate", pinned_request(rec.request, hw, c.plan)),
        "generate_command": command("generate", generate_request(rec, o)),
    }


def recommendation_json(rec: Recommendation) -> dict:
    """`recommend --json`: {"request", "options", ...} (CONTRACT.md)."""
    overrides = {o.hardware.gpu.id: o.price.usd_per_gpu_hour for o in rec.options
                 if o.price is not None and o.price.from_user}
    return {
        "request": {**rec.request.pinned(), "method": rec.method, "method_pinned": rec.request.method is not None,
                    "gpu_types": list(rec.gpu_types), "max_gpus": rec.max_gpus, "max_nodes": rec.max_nodes,
                    "sort": rec.sort, "budget_usd": rec.budget_usd, "deadline_hours": rec.deadline_hours,
                    "prices": overrides},
        "options": [option_json(rec, o) for o in rec.options],
        "search": {"hardware_choices_planned": rec.planned, "feasible": len(rec.options), "searches": rec.searches,
                   "infeasible": list(rec.infeasible), "not_searched": list(rec.not_searched),
                   "ruled_out": list(rec.ruled_out)},
        "notes": list(rec.notes),
    }


def shown_options(rec: Recommendation, show_all: bool = False) -> list[Option]:
    """The rows of the table, in the recommendation's order."""
    if show_all:
        return list(rec.options)
    unpriced_fastest: dict[str, Option] = {}
    for o in rec.options:
        if o.price is None:
            best = unpriced_fastest.get(o.hardware.gpu.id)
            if best is None or o.hours < best.hours:
                unpriced_fastest[o.hardware.gpu.id] = o
    keep = {id(o) for o in unpriced_fastest.values()}
    return [o for o in rec.options if o.pareto or o.best_for or id(o) in keep]


def _usd(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def _count(n: int) -> str:
    """1.23B, 49.2M, 15,259."""
    for scale, unit in ((1e9, "B"), (1e6, "M")):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:,}"


def _host(o: Option) -> str:
    """Host RAM per node an offloading plan needs (a rented node must have it); blank for the others."""
    host = o.candidate.memory.host_bytes
    return f"{host / GIB:,.0f} GiB" if o.candidate.plan.offload != "none" and host else ""


def _table(rows: list[tuple[str, ...]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in
                      enumerate(zip(r, widths, strict=True))).rstrip() for r in rows]


def _job_header(rec: Recommendation) -> str:
    req = rec.request
    size = f"{req.tokens:,} tokens" if req.tokens is not None else f"{req.steps:,} steps"
    method = rec.method if req.method else f"{rec.method} (most faithful that fits)"
    return f"{rec.model.id} {req.trainer.upper()} {method}, {size}"


def _pick_line(name: str, o: Option | None, rec: Recommendation) -> str | None:
    if name == "within_budget" and rec.budget_usd is None or name == "within_deadline" and rec.deadline_hours is None:
        return None
    title = PICK_TITLES[name].ljust(9)
    if o is None:
        if name == "cheapest":
            return f"{title} - (no option has a known price: --price GPU=USD gives one)"
        limit = f"${rec.budget_usd:,.2f}" if name == "within_budget" else format_hours(rec.deadline_hours)
        return f"{title} none within {limit} among the priced options"
    limit = (f" (budget ${rec.budget_usd:,.2f})" if name == "within_budget" else
             f" (deadline {format_hours(rec.deadline_hours)})" if name == "within_deadline" else "")
    cost = f", ${_usd(o.cost_usd)}" if o.cost_usd is not None else ", no price known"
    return f"{title} {o.label()}: {format_hours(o.hours)}{cost}{limit}"


def render_recommendation(rec: Recommendation, show_all: bool = False) -> str:
    """The report `recommend` prints: what was planned, the table, the picks, where the prices come from, and the
    command that writes the best option's bundle."""
    shown = shown_options(rec, show_all)
    lines = [f"{_job_header(rec)}: {len(rec.options)} of {rec.planned} hardware choices planned fit", ""]
    by_steps = rec.request.steps is not None
    offload = any(_host(o) for o in shown)
    # a steps job's tokens follow each plan's global batch; a tokens job's steps follow it: show the one derived
    # the global batch each option trains per step: without --global-batch each aims at the default and rounds to
    # what its processes split, so options may differ in it (the note below says so)
    rows = [("", "GPUs", "plan", "batch", "tokens/s", "tokens" if by_steps else "steps", "hours", "GPU-h", "$/GPU-h",
             "cost $", "headroom", *(("host RAM",) if offload else ()))]
    for o in shown:
        rows.append(("*" if o.pareto else "", o.label(), o.candidate.plan.short(), str(o.candidate.plan.global_batch),
                     f"{o.tokens_per_second:,.0f}",
                     _count(o.job.tokens) if by_steps else f"{o.job.steps:,}", format_hours(o.hours),
                     f"{o.gpu_hours:,.2f}" if o.gpu_hours < 10 else f"{o.gpu_hours:,.1f}",
                     f"{o.price.usd_per_gpu_hour:.2f}" if o.price else "-", _usd(o.cost_usd),
                     f"{o.headroom_bytes / GIB:.1f} GiB", *((_host(o),) if offload else ())))
    lines += _table(rows, right=set(range(3, len(rows[0]))))
    lines.append("* on the time-cost Pareto front: no other option is both as fast and as cheap")
    batches = sorted({o.candidate.plan.global_batch for o in shown})
    if len(batches) > 1:
        lines.append(f"batch     the options train {batches[0]}-{batches[-1]} sequences per step (each rounds the default "
                     "to what its GPUs split): --global-batch N holds every option to one")
    lines.append("")
    for name in ("fastest", "cheapest", "within_budget", "within_deadline"):
        line = _pick_line(name, rec.pick(name), rec)
        if line:
            lines.append(line)
    unpriced = sorted({o.hardware.gpu.id for o in rec.options if o.price is None})
    prices = ("prices    reference on-demand list prices per GPU-hour, each with its provider, page and date "
              "(advisor/catalog/data/prices.toml); --price GPU=USD replaces one")
    lines.append(prices)
    if unpriced:
        lines.append(f"          no price known: {', '.join(unpriced)}")
    hidden = len(rec.options) - len(shown)
    if hidden:
        lines.append(f"hidden    {hidden} more options, slower and dearer than one shown (or, without a price, slower "
                     "than their GPU type's row): --all lists them, --json gives every field")
    for note in rec.notes:
        lines.append(f"note      {note}")
    # the bundle to write next: the pick the user constrained, else the one --sort ranks first
    best = rec.within_deadline or rec.within_budget or (rec.cheapest if rec.sort == "cost" else None) or rec.fastest
    if best is not None:
        lines.append(f"next      {command('generate', generate_request(rec, best))}")
    return "\n".join(lines)
