"""`recommend`: plan the job on every hardware choice (GPU type x count), keep the feasible plans, price and rank
them.

Method: a pinned --method is kept. Unpinned, every option trains the same method, the most faithful that some
option can run (full, then LoRA, then QLoRA): otherwise a LoRA plan on small GPUs would be "cheapest" against full
fine-tuning on large ones, a different job. Each pass pins the method for the planner, so later passes cost only
when no option runs the one before.

Speed: one planner search per hardware choice (advisor.search.search: 5-30 ms for SFT, 30-100 ms for GRPO with its
vLLM splits, on a 2-core machine), bounded by
the count list of advisor.recommend.hardware. A count that is not faster than a smaller count of the same type is
dominated by it (more GPUs for longer: more GPU-hours at the same price), and the larger counts after it are not
searched: the assumption is that once doubling stops paying, further doublings do not recover. One node and several
nodes are judged apart, because crossing to the inter-node link can slow the first multi-node count while more
nodes then scale again (70B on H200: 2 nodes 7.4k, 4 nodes 7.7k tokens/s). What was skipped is reported.
A choice a pinned knob rules out (every structure breaks a rule that reads it: --sp-size 7 on 28 attention heads)
is not searched at all (advisor.recommend.prune): such a search costs the most, since the planner then runs every
rule on every candidate to choose nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from advisor.catalog.prices import GpuPrice, price_override, reference_prices
from advisor.core.errors import AdvisorError, NoFeasiblePlanError
from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.model.job import plan_job
from advisor.recommend import hardware as hw_mod
from advisor.recommend.commands import hardware_request
from advisor.recommend.option import Option, Recommendation
from advisor.recommend.prune import RuledOut, pin_problem, pin_rules, ruling_error
from advisor.recommend.rank import SORTS, ranked
from advisor.resolve import METHOD_ORDER, check_against_target, check_request, method_options, resolve_model
from advisor.search import search

DEFAULT_MAX_GPUS = 64
"""Up to 8 nodes of 8: the default global batch is 64 sequences, so 64 data-parallel ranks are the most that keep it
(beyond, each rank needs at least one sequence per step and the batch grows)."""
DEFAULT_MAX_NODES = 8

_HARDWARE_FLAGS = ("gpu", "gpus", "nodes", "hardware")


def _check_inputs(req: Request, sort: str, budget_usd: float | None, deadline_hours: float | None) -> None:
    for name in _HARDWARE_FLAGS:
        if getattr(req, name) is not None:
            flag = "--" + name
            raise AdvisorError(f"recommend chooses the hardware itself: drop {flag}",
                               hint="narrow it with --gpu-types H100,A100-80GB, --max-gpus N and --max-nodes N")
    if req.tokens is None and req.steps is None:
        raise AdvisorError("recommend needs the job's size: --tokens N or --steps N",
                           hint="for example --tokens 1000000000 (trained tokens) or --steps 500 (optimizer steps)")
    if sort not in SORTS:
        raise AdvisorError(f"--sort {sort!r:.20} is not one of {', '.join(SORTS)}", hint="use --sort time or --sort cost")
    for flag, value in (("--budget-usd", budget_usd), ("--deadline-hours", deadline_hours)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise AdvisorError(f"{flag} must be a positive number, got {value!r:.20}", hint=f"for example {flag} 500")


def _prices(overrides: Mapping[str, float] | None) -> dict[str, GpuPrice]:
    table = reference_prices()
    for name, usd in (overrides or {}).items():
        price = price_override(name, usd)
        table[price.gpu] = price
    return table


@dataclass
class _Pass:
    """One method's pass over the hardware choices: the options found and what was not an option, and why."""

    options: list[Option] = field(default_factory=list)
    infeasible: list[str] = field(default_factory=list)
    not_searched: list[str] = field(default_factory=list)
    ruled_out: list[RuledOut] = field(default_factory=list)
    """Choices a pinned knob rules out, skipped without a search (advisor.recommend.prune)."""
    refused: list[tuple[hw_mod.Hardware, AdvisorError]] = field(default_factory=list)
    """Choices a pin contradicts whatever the plan (check_against_target), with its error."""
    searches: int = 0


def _plan_type(req: Request, model: ModelSpec, choices: list[hw_mod.Hardware], prices: dict[str, GpuPrice],
               checks: tuple, found: _Pass) -> None:
    """Plan one GPU type's counts, smallest first, into `found`. `checks` are the rules that read a pinned knob:
    a choice they rule out is not searched (its search would choose nothing)."""
    best_tps = {False: 0.0, True: 0.0}  # the fastest so far on one node (False) and on several nodes (True)
    stopped = {False: False, True: False}
    for hw in choices:
        several = hw.nodes > 1
        if stopped[several]:
            continue
        target = hw.target()
        r = hardware_request(req, hw)
        try:
            check_against_target(r, target)
        except AdvisorError as exc:  # a pin this count cannot hold (--vllm-gpus above the GPUs per node)
            found.infeasible.append(hw.label())
            found.refused.append((hw, exc))
            continue
        error = ruling_error(r, model, target, checks)
        if error is not None:
            found.infeasible.append(hw.label())
            found.ruled_out.append(RuledOut(hw, error))
            continue
        found.searches += 1
        chosen = search(r, model, target, explain=False).chosen
        job = plan_job(chosen.plan, chosen.tokens_per_second, hw.gpus, tokens=req.tokens,
                       steps=req.steps) if chosen is not None else None
        if job is None:  # nothing fits (a chosen plan always has a speed, so a job)
            found.infeasible.append(hw.label())
            continue
        found.options.append(Option(hardware=hw, candidate=chosen, job=job, price=prices.get(hw.gpu.id)))
        if chosen.tokens_per_second > best_tps[several]:
            best_tps[several] = chosen.tokens_per_second
            continue
        stopped[several] = True
        if any(h.gpus > hw.gpus and (h.nodes > 1) == several for h in choices):
            found.not_searched.append(f"{hw.gpu.id} beyond {hw.label()}: {chosen.tokens_per_second:,.0f} tokens/s, "
                                      f"no faster than {best_tps[several]:,.0f} with fewer GPUs")


def _limits(n_types: int, max_gpus: int, max_nodes: int) -> str:
    """`20 GPU types with up to 64 GPUs (at most 8 nodes of 8)`."""
    most = f"{max_gpus} GPU{'s' if max_gpus > 1 else ''}" + (
        f" (at most {max_nodes} nodes of {hw_mod.GPUS_PER_NODE})" if max_gpus > hw_mod.GPUS_PER_NODE else "")
    return f"{n_types} GPU types with up to {most}"


def _no_option(req: Request, model: ModelSpec, methods: list[str], where: str, last: _Pass, searches: int,
               choices: list[hw_mod.Hardware], checks: tuple) -> NoFeasiblePlanError:
    """Exit 1. When pins ruled out every choice before any search, the error names them and what would keep a
    choice (widening the limits would not help); otherwise the limits are what to widen."""
    head = f"no plan for {model.id} ({req.trainer}) on any of {where}"
    if searches == 0 and last.ruled_out:
        message, hint = pin_problem(req, model, last.ruled_out, choices, checks)
        return NoFeasiblePlanError(f"{head}: {message}", hint=hint)
    if searches == 0 and last.refused:  # the largest choice's refusal: a smaller one may refuse for its size only
        hw, exc = max(last.refused, key=lambda refusal: refusal[0].gpus)
        return NoFeasiblePlanError(f"{head}: on {hw.label()}, {exc.message}", hint=exc.hint)
    if choices and all(h.gpu.consumer for h in choices):
        # consumer cards are planned on one node (hardware.counts): more --max-gpus or --max-nodes adds no choice
        hint = ("consumer cards are planned on one node of at most 8: add data-centre GPU types (--gpu-types, e.g. "
                "H100,A100-80GB), or a shorter --seq-len")
    else:
        hint = "allow more GPUs (--max-gpus, --max-nodes), more GPU types (--gpu-types), or a shorter --seq-len"
    return NoFeasiblePlanError(
        f"no plan for {model.id} ({req.trainer}, {' or '.join(methods)}) fits any of {where}: {searches} planner "
        "searches", hint=hint)


def recommend(req: Request, *, tokens: int | None = None, steps: int | None = None,
              gpu_types: Iterable[str] | None = None, max_gpus: int = DEFAULT_MAX_GPUS,
              max_nodes: int = DEFAULT_MAX_NODES, prices: Mapping[str, float] | None = None,
              budget_usd: float | None = None, deadline_hours: float | None = None,
              sort: str = "time") -> Recommendation:
    """Which GPUs to rent for a job: every feasible (GPU type, count) option with its plan, hours, GPU-hours and
    cost, the Pareto front marked and the picks set. `tokens`/`steps` override the request's own job size;
    `prices` maps GPU names to USD per GPU-hour and replaces the reference prices. Raises NoFeasiblePlanError
    (exit 1) when no option has a plan, AdvisorError (exit 2) for a bad input."""
    if tokens is not None or steps is not None:
        req = req.with_(tokens=tokens, steps=steps)
    _check_inputs(req, sort, budget_usd, deadline_hours)
    check_request(req)
    hw_mod.check_limits(max_gpus, max_nodes)
    model = resolve_model(req)
    types = hw_mod.gpu_types(gpu_types)
    table = _prices(prices)
    notes = [f"{gpu.id} is plan only (not supported by probe/verify): its bundle is untested there"
             for gpu in types if not gpu.supported]
    methods = method_options(req)
    by_type = [hw_mod.counts(gpu, max_gpus, max_nodes) for gpu in types]
    checks = pin_rules(req)  # the same for every choice and method: found once
    searches = 0
    for method in methods:
        found = _Pass()
        pinned = req.with_(method=method)
        for counts in by_type:
            _plan_type(pinned, model, counts, table, checks, found)
        searches += found.searches
        if found.options:
            break
    if not found.options:
        raise _no_option(req, model, methods, _limits(len(types), max_gpus, max_nodes), found, searches,
                         [hw for counts in by_type for hw in counts], checks)
    if not req.method and method != METHOD_ORDER[0]:
        notes.append(f"method {method}: no option fits {', '.join(METHOD_ORDER[:METHOD_ORDER.index(method)])} "
                     "fine-tuning within these limits")
    return Recommendation(
        request=req, model=model, method=method,
        options=tuple(ranked(found.options, sort=sort, budget_usd=budget_usd, deadline_hours=deadline_hours)),
        gpu_types=tuple(g.id for g in types), max_gpus=max_gpus, max_nodes=max_nodes, sort=sort,
        budget_usd=budget_usd, deadline_hours=deadline_hours, planned=found.searches + len(found.ruled_out),
        searches=searches,
        infeasible=tuple(found.infeasible), not_searched=tuple(found.not_searched),
        ruled_out=tuple(f"{r.hardware.label()}: {r.finding.id} {r.finding.message}" for r in found.ruled_out),
        notes=tuple(notes))
