"""The search: each structure's best micro-batch against the memory model, the rules checked lazily on the
candidates that could be chosen or shown, the ranking, the rejected alternatives, and the smallest change that
makes a plan when none fits.

Why it is fast: knobs that change the *structure* of a run are enumerated (advisor.search.candidates) and each
structure is checked by the rule engine once; the micro-batch, on which memory grows monotonically, is then scanned
in powers of two against the memory model alone. 405B on 16 nodes x 8 GPUs is a few hundred structures and a few
thousand memory estimates.
"""

from __future__ import annotations

import math

import rules
from advisor.core.errors import AdvisorError, NoFeasiblePlanError
from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.core.specs import GIB, ModelSpec
from advisor.core.target import LARGEST_NODE_HOST_RAM_BYTES, Target
from advisor.model import calibration
from advisor.model import speed as speed_model
from advisor.model.estimate import result_dict
from advisor.model.memory import estimate_memory
from advisor.model.speed import estimate_speed
from advisor.resolve import (
    DEFAULT_SEQ_LEN,
    METHOD_ORDER,
    check_against_target,
    check_request,
    resolve_model,
    resolve_target,
)
from advisor.search.candidates import (
    DEFAULT_GLOBAL_BATCH,
    Candidate,
    Decision,
    _accumulation,
    _global_batch,
    accumulation_step,
    family,
    micro_batches,
    smallest_micro_batch,
    structures,
    zero_without_offload,
)
from advisor.search.explain import explain_choice, offload_not_needed
from advisor.search.ranking import (
    COMPLEXITY_MARGIN,
    OFFLOAD_MARGIN,
    may_replace,
    offload_bar,
    offload_buys_memory,
    offload_needs,
    rank_key,
    score,
)
from advisor.search.vllm_pins import check_vllm_gpus


def _structural_errors(req: Request, model: ModelSpec, target: Target, plan: Plan) -> list:
    findings = rules.run_rules(rules.Context(request=req, plan=plan, model=model, target=target))
    return [f for f in findings if f.is_error]


def host_limit_bytes(target: Target) -> float:
    """The most host RAM a plan may need per node: 90 % of the probed node's, keeping 10 % for the OS, the data
    loader and page cache; else LARGEST_NODE_HOST_RAM_BYTES."""
    if target.host_ram_bytes is None:
        return LARGEST_NODE_HOST_RAM_BYTES
    return 0.9 * target.host_ram_bytes


def _host_ok(mem, target: Target) -> bool:
    return not mem.host_bytes or mem.host_bytes <= host_limit_bytes(target)


def _host_ram_text(target: Target) -> str:
    if target.host_ram_bytes is None:
        return (f"no node holds that much (the RAM of this catalogue target's nodes is not known; the largest GPU "
                f"servers have {LARGEST_NODE_HOST_RAM_BYTES / GIB:.0f} GiB)")
    return f"the node has {target.host_ram_bytes / GIB:.0f} GiB"


def _best_micro_batch(req: Request, model: ModelSpec, target: Target, structure: Plan,
                      global_batch: int | None, speeds: dict | None = None) -> tuple[Candidate, int, bool]:
    """The fastest micro-batch of one structure that fits, or the smallest miss; how many were estimated; and
    whether host RAM ended the scan. `speeds`: plan -> speed already estimated (_cannot_clear's), reused."""
    speeds = speeds or {}
    micros = micro_batches(req, structure.dp_size)
    best: Candidate | None = None
    miss: Candidate | None = None
    estimated = 0
    host_missed = False
    for micro in micros:
        if global_batch and micro > micros[0] and micro * structure.dp_size > global_batch and not req.micro_batch:
            # a larger micro-batch would overshoot the requested global batch; the smallest is taken whatever it
            # trains (KTO's 2 per device over 64 processes is 128 sequences, more than the default 64)
            break
        plan = structure.with_(micro_batch=micro, grad_accum=_accumulation(structure, micro, global_batch,
                                                                            req.grad_accum))
        step = plan.micro_batch * plan.dp_size * plan.grad_accum
        if req.global_batch and step != req.global_batch:
            # a pinned --global-batch is what each step trains, not a target to round: 48 asked of 4 processes
            # at micro-batch 8 would give 64 (and GRPO's generation groups round further)
            miss = miss or Candidate(plan, rejected_because=(
                f"micro-batch {micro} x {plan.dp_size} data-parallel x {plan.grad_accum} accumulation trains {step} "
                f"sequences per step, not the {req.global_batch} --global-batch asks"))
            continue
        mem = estimate_memory(model, plan, target)
        estimated += 1
        limit = planner_limit_bytes(mem)
        # The speed only of what can be chosen or shown: a miss after the first is neither (the search is mostly
        # misses, 95 % of the estimates for a 70B GRPO on every GPU `recommend` plans, and speed costs as much as
        # memory).
        spd = None
        if mem.per_gpu_reserved_bytes <= limit or miss is None:
            spd = speeds.get(plan) or estimate_speed(model, plan, target, mem)
        if mem.per_gpu_reserved_bytes > limit:
            if best is not None and not best.next_micro_note:  # the micro-batch right after the best, not a later one
                best.next_micro_note = (f"{micro} needs {mem.per_gpu_reserved_bytes / GIB:.1f} GiB, over the "
                                        f"{limit / GIB:.1f} GiB limit")
            miss = miss or Candidate(plan, mem, spd, rejected_because=(
                f"does not fit: needs {mem.per_gpu_reserved_bytes / GIB:.1f} GiB per GPU, limit "
                f"{limit / GIB:.1f} GiB"))
            if plan.grad_accum > 1 and not req.grad_accum:
                # A larger micro-batch lowers the accumulation, and accumulating can hold more than the micro-batch
                # adds: FSDP2's no_sync keeps the gradients unsharded until the last micro-batch, ZeRO-2 offload
                # keeps those above the reduce bucket on the GPU (advisor.model.states).
                continue
            break  # memory grows with the micro-batch: larger ones do not fit either
        if not _host_ok(mem, target):
            # reported over a smaller micro-batch's GPU miss: the GPUs hold this structure, host RAM is the limit
            # (what the refusal names, _host_ram_need)
            miss = Candidate(plan, mem, spd, rejected_because=(
                f"needs {mem.host_bytes / GIB:.0f} GiB host RAM per node: {_host_ram_text(target)}"))
            host_missed = True
            break
        cand = Candidate(plan, mem, spd)
        if best is None or cand.tokens_per_second > best.tokens_per_second:
            best = cand
    return (best or miss), estimated, host_missed


def planner_limit_bytes(mem) -> int:
    """The most a chosen plan may reserve: what `fits` allows less the planner's headroom
    (calibration.PLANNER_HEADROOM_FRACTION of the capacity), the same figure rule MEM002 warns below, so that the
    planner never picks a plan its own rules warn about. The headroom is u / (1 + u) for the under-prediction u
    measured on the runs predicted within 15 % of the usable memory (calibration.NEAR_CAPACITY_UNDER_PREDICTION,
    docs/accuracy.md "Near capacity"): a plan predicted at this limit that needs u more still fits. It binds only
    plans predicted that close to the usable memory."""
    return mem.per_gpu_reserved_bytes + mem.headroom_bytes - int(calibration.PLANNER_HEADROOM_FRACTION *
                                                                  mem.capacity_bytes)


ALTERNATIVES_SHOWN = 8
"""Rejected alternatives reported (the best of each other family), in generate --json and the bundle's README."""


def search(req: Request, model: ModelSpec, target: Target, *, explain: bool = True) -> Decision:
    """Memory first (cheap, and most structures of a large model fail it), then the rules, lazily: only on the
    candidates that could be chosen or shown as alternatives, in rank order. The choice is _choose's: the best plan
    that keeps everything on the GPUs, unless an offloading plan is predicted more than OFFLOAD_MARGIN faster.

    Methods are searched in METHOD_ORDER, and the search stops after one whose result the others cannot change
    (`_later_methods_cannot_matter`): a plan that keeps every weight trainable is never replaced by LoRA, so LoRA and
    QLoRA structures need no estimate once a full fine-tuning plan fits on the GPUs and enough full fine-tuning
    families fill the alternatives. The result is the one the whole search gives (candidates keep the enumeration
    order). On one GPU, a method none of whose plans fits without offload has its ZeRO structures without offload
    searched too (candidates.zero_without_offload), after the others. explain=False skips the rejected alternatives
    and the reasons (a caller that needs the choice only, as `recommend` for each hardware choice), and the
    offloading structures whose best speed cannot win (_cannot_clear: the margin is a condition an offload must
    meet, whatever its twin without offload): the choice is the same."""
    global_batch = _global_batch(req)
    by_method: dict[str, list[tuple[int, Plan]]] = {}
    for index, structure in enumerate(structures(req, model, target)):
        by_method.setdefault(structure.method, []).append((index, structure))
    order = [m for m in METHOD_ORDER if m in by_method]
    found: list[tuple[int, Candidate]] = []
    considered = 0
    checked: set[int] = set()

    def passes_rules(c: Candidate) -> bool:
        if id(c) not in checked:
            checked.add(id(c))
            if c.feasible:
                errors = _structural_errors(req, model, target, c.plan)
                if errors:
                    c.rejected_because, c.findings = f"{errors[0].id}: {errors[0].message}", errors
        return c.feasible

    def buys_memory(c: Candidate) -> bool:
        _without_offload(req, model, target, c)
        return offload_buys_memory(c)

    def choose(candidates: list[Candidate]) -> tuple[Candidate | None, Candidate | None]:
        return _choose(candidates, req, passes_rules, buys_memory)

    # explain=False: a structure whose twin with gradient checkpointing fits no micro-batch fits none either, and is
    # skipped (_lighter_twin_missed); an offloading structure none of whose micro-batches could clear the bar is
    # skipped unestimated (_offload_ruled_out). `speeds` keeps the speeds that check estimated, for the scan.
    missed: dict[Plan, list[Plan]] = {}
    speeds: dict[Plan, object] = {}
    ruled_out: dict[Plan, bool] = {}
    extra_index = sum(len(v) for v in by_method.values())  # the fallback's candidates are listed after the others

    def scan(index: int, structure: Plan) -> None:
        nonlocal considered
        cand, n, host_missed = _best_micro_batch(req, model, target, structure, global_batch, speeds)
        considered += n
        if cand is not None:
            found.append((index, cand))
        if (cand is None or not cand.feasible) and not host_missed:
            missed.setdefault(_twin_key(structure), []).append(structure)

    def search_fallback(method: str, fallback: list[tuple[int, Plan]]) -> None:
        """Scans the one-GPU ZeRO structures without offload of `method` (emptied after: once) where no plan of the
        method without offload fits and passes the rules."""
        if fallback and not any(c.plan.method == method and c.plan.offload == "none" and passes_rules(c)
                                for _, c in found):
            for index, structure in (fallback if explain else sorted(fallback, key=lambda s: not s[1].grad_ckpt)):
                if explain or not _lighter_twin_missed(structure, missed):
                    scan(index, structure)
        fallback.clear()

    for i, method in enumerate(order):
        structures_of = by_method[method]
        if not explain:
            # the plans without offload first, so that the bar an offloading plan must clear is known before any is
            # estimated; and the checkpointing twins first
            structures_of = sorted(structures_of, key=lambda s: (s[1].offload != "none", not s[1].grad_ckpt))
        bar: float | None = None
        present = {s for _, s in structures_of} if not explain else set()
        # On one GPU the candidate space leaves ZeRO without offload out (candidates.zero_without_offload): searched
        # for a method none of whose plans without offload fits. Both modes decide it on the same candidates (a
        # structure _lighter_twin_missed skips fits nothing): the choice alone searches it before the method's
        # offloading structures, so that the plan it finds sets their bar; the whole search after them.
        fallback = list(enumerate(zero_without_offload(req, [s for _, s in by_method[method]]), extra_index))
        extra_index += len(fallback)
        for index, structure in structures_of:
            if not explain and _lighter_twin_missed(structure, missed):
                continue
            if not explain and structure.offload != "none":
                if bar is None:
                    search_fallback(method, fallback)
                    on_gpu = choose([c for _, c in found])[1]
                    # an offloading plan of a method less faithful than the plan on the GPUs is never chosen
                    bar = (math.inf if on_gpu is not None and not may_replace(method, on_gpu, req)
                           else offload_bar(on_gpu, req))
                if bar == math.inf:
                    break
                if bar > -math.inf and _offload_ruled_out(req, model, target, structure, global_batch, bar, speeds,
                                                          ruled_out, present):
                    continue
            scan(index, structure)
        search_fallback(method, fallback)
        if i + 1 < len(order) and _later_methods_cannot_matter([c for _, c in found], choose, explain):
            break
    candidates = [c for _, c in sorted(found, key=lambda ic: ic[0])]
    chosen, on_gpu = choose(candidates)
    if not explain:
        return Decision(req, model, target, chosen, [], {}, considered, on_gpu=on_gpu)
    rival = _offload_rival(candidates, chosen, on_gpu, req, passes_rules, buys_memory)
    alternatives = _alternatives(candidates, chosen, passes_rules, req, buys_memory, limit=ALTERNATIVES_SHOWN)
    decision = Decision(req, model, target, chosen, alternatives, {}, considered, on_gpu=on_gpu, offload_rival=rival)
    if chosen is not None:
        decision.reasons = explain_choice(decision, candidates)
    return decision


def _offload_ruled_out(req: Request, model: ModelSpec, target: Target, structure: Plan, global_batch: int | None,
                       bar: float, speeds: dict, ruled_out: dict[Plan, bool], present: set[Plan]) -> bool:
    """_cannot_clear for an offloading structure, once per structure (`ruled_out`). A structure with gradient
    checkpointing whose twin without it is searched too is first judged by that twin: recomputation only adds to the
    step at a given micro-batch (advisor.model.speed: recompute FLOPs and per-layer host time; held to that on random
    structures of every trainer by tests/planner/test_offload_choice.py), so where no micro-batch of the twin clears
    the bar none of this one's does either, and one check rules out both."""
    if structure not in ruled_out and structure.grad_ckpt:
        lighter = structure.with_(grad_ckpt=False)
        if lighter in present:
            if lighter not in ruled_out:
                ruled_out[lighter] = _cannot_clear(req, model, target, lighter, global_batch, bar, speeds)
            if ruled_out[lighter]:
                ruled_out[structure] = True
    if structure not in ruled_out:
        ruled_out[structure] = _cannot_clear(req, model, target, structure, global_batch, bar, speeds)
    return ruled_out[structure]


def _cannot_clear(req: Request, model: ModelSpec, target: Target, structure: Plan, global_batch: int | None,
                  bar: float, speeds: dict) -> bool:
    """True when no micro-batch of the structure scores above `bar` (ranking.score), whatever the memory: every
    micro-batch _best_micro_batch could take (the same global-batch stop and pinned-step filter) is scored on its
    speed alone. The structure's candidate is one of them, and memory only ever rules micro-batches out, so a
    structure this rules out could not have been chosen: the skip is exact, not a guess. estimate_speed reads no
    memory estimate (tests/planner/test_offload_choice.py holds it to that), so these are the speeds the scan would
    compute: they are kept in `speeds` for it, and the first micro-batch that clears the bar ends the check. A speed
    estimate costs about what a memory estimate does; a structure ruled out spares its memory estimates."""
    micros = micro_batches(req, structure.dp_size)
    for micro in micros:
        if global_batch and micro > micros[0] and micro * structure.dp_size > global_batch and not req.micro_batch:
            break
        plan = structure.with_(micro_batch=micro, grad_accum=_accumulation(structure, micro, global_batch,
                                                                            req.grad_accum))
        if req.global_batch and plan.micro_batch * plan.dp_size * plan.grad_accum != req.global_batch:
            continue  # never a candidate (_best_micro_batch's pinned-step miss)
        speeds[plan] = estimate_speed(model, plan, target)
        if score(Candidate(plan, speed=speeds[plan]), req) > bar:
            return False
    return True


def _twin_key(plan: Plan) -> Plan:
    return plan.with_(grad_ckpt=False)


def _lighter_twin_missed(structure: Plan, missed: dict[Plan, list[Plan]]) -> bool:
    """True when this structure's twin with gradient checkpointing fitted no micro-batch on the GPU: recomputation
    only frees activations, nowhere adds memory (advisor.model.memory; checked on random structures of every trainer
    by tests/planner/test_search_speed.py), so this one needs at least as much at each micro-batch and fits none
    either. Liger is not paired so: its fused loss frees the logits but can raise another phase's peak (GRPO under
    a colocated vLLM). A twin whose scan host RAM ended is not counted (search records only GPU misses): past that
    micro-batch it was not estimated. It spares half the memory estimates of the searches that fit nothing (70B
    GRPO on small GPU counts), which are most of a `recommend` run."""
    return not structure.grad_ckpt and structure.with_(grad_ckpt=True) in missed.get(_twin_key(structure), ())


def _later_methods_cannot_matter(candidates: list[Candidate], choose, explain: bool = True) -> bool:
    """True when the methods not searched yet can change neither the choice nor the alternatives shown: a plan that
    needs no offload fits among these, so that no plan of a later method is chosen whatever its speed (on the GPUs
    the most faithful method leads, rank_key; an offloading plan replaces that plan only for a method at least as
    faithful, may_replace), and at least ALTERNATIVES_SHOWN other families of the chosen plan's method have a
    feasible candidate, which _alternatives lists before any family of another method. Without the alternatives
    (explain=False) the choice alone decides."""
    chosen, on_gpu = choose(candidates)
    if on_gpu is None:
        return False
    if not explain:
        return True
    mine = family(chosen.plan)
    feasible = {family(c.plan) for c in candidates
                if c.feasible and c.plan.method == chosen.plan.method and family(c.plan) != mine}
    return len(feasible) >= ALTERNATIVES_SHOWN


def _choose(candidates: list[Candidate], req: Request, passes_rules,
            buys_memory) -> tuple[Candidate | None, Candidate | None]:
    """(the chosen plan, the best plan that keeps everything on the GPUs). The latter is the first of rank_key's
    order that passes the rules; the fastest offloading plan of a method at least as faithful (may_replace) that
    clears offload_bar, buys memory (its twin without offload does not fit or is refused: `buys_memory`,
    ranking.offload_buys_memory) and passes the rules replaces it. When no plan fits without offload every
    offloading plan competes on score alone, whatever its method: each of them already trades speed and host memory
    for fitting (its twin was searched and does not fit: ranking.offload_buys_memory), and full fine-tuning by
    offload keeps every weight's fp32 Adam states in host RAM (16 bytes per parameter: about 1.1 TiB for a 70B model)
    at a fraction of an adapter plan's speed. Rules run only on the candidates that could be chosen, in order."""
    feasible = [c for c in candidates if c.feasible]
    on_gpu = next((c for c in sorted((c for c in feasible if c.plan.offload == "none"), key=lambda c: rank_key(c, req))
                   if passes_rules(c)), None)
    bar = offload_bar(on_gpu, req)
    offloading = [c for c in feasible if c.plan.offload != "none"
                  and (on_gpu is None or may_replace(c.plan.method, on_gpu, req))]
    for c in sorted(offloading, key=lambda c: -score(c, req)):
        if score(c, req) <= bar:
            break
        if on_gpu is not None and not buys_memory(c):
            continue  # its gain is not offload's: the same plan fits on the GPUs without it
        if passes_rules(c):
            return c, on_gpu
    return on_gpu, on_gpu


def _without_offload(req: Request, model: ModelSpec, target: Target, c: Candidate) -> Candidate:
    """An offloading candidate's twin without offload, kept on it (Candidate.without_offload): the same plan with
    offload "none", judged as _best_micro_batch and the rules judge a candidate (planner_limit_bytes, which keeps the
    planner's error margin; host RAM; the structural rules), at the same micro-batch and accumulation. Its
    rejected_because says why it cannot run, '' when it fits.

    On one GPU with the backend left to the planner, the plain plan at the same micro-batch is a twin too, taken when
    the ZeRO twin does not fit: one process shards nothing, so ZeRO without offload is the plain plan plus DeepSpeed's
    flat buffers and fp32 master copy (the reason candidates.py offers it on one GPU only with an offload), and an
    offload that frees only what ZeRO adds buys the run nothing. A 1B LoRA on one L4 by ZeRO-3 + parameter offload at
    micro-batch 8 was predicted 5,731 tokens/s against 4,695 for the plain plan at micro-batch 8, which fits; ZeRO-3
    without the offload (21.1 GiB per GPU, limit 19.5) does not.

    The estimates it costs are made only for an offloading plan that could be chosen or is shown faster than the
    chosen plan."""
    if c.without_offload is None:
        twins = [c.plan.with_(offload="none")]
        if (c.plan.num_processes == 1 and c.plan.backend == "deepspeed"
                and not (req.backend or req.zero is not None or req.offload)):
            twins.append(c.plan.with_(backend="single", zero_stage=0, offload="none"))
        first = None
        for plan in twins:
            twin = _judge_on_gpu(req, model, target, plan)
            first = first or twin
            if twin.feasible:
                c.without_offload = twin
                break
        else:
            c.without_offload = first
    return c.without_offload


def _judge_on_gpu(req: Request, model: ModelSpec, target: Target, plan: Plan) -> Candidate:
    """A plan without offload at a set micro-batch, estimated and judged as a candidate is (no speed)."""
    mem = estimate_memory(model, plan, target)
    limit = planner_limit_bytes(mem)
    why = ""
    if mem.per_gpu_reserved_bytes > limit:
        why = f"does not fit: needs {mem.per_gpu_reserved_bytes / GIB:.1f} GiB per GPU, limit {limit / GIB:.1f} GiB"
    elif not _host_ok(mem, target):
        why = f"needs {mem.host_bytes / GIB:.0f} GiB host RAM per node: {_host_ram_text(target)}"
    else:
        errors = _structural_errors(req, model, target, plan)
        if errors:
            why = f"is refused by rule {errors[0].id}: {errors[0].message}"
    return Candidate(plan, mem, rejected_because=why)


def _offload_rival(candidates: list[Candidate], chosen: Candidate | None, on_gpu: Candidate | None, req: Request,
                   passes_rules, buys_memory) -> Candidate | None:
    """When the chosen plan keeps everything on the GPUs: the fastest offloading plan that could replace it
    (may_replace), passes the rules and is predicted faster in tokens/s, yet did not clear the margin or does not
    buy memory (its twin without offload is set, `buys_memory`); else None. The explanation names it, so that a
    faster plan left out is said to be left out, and why."""
    if chosen is None or chosen is not on_gpu:
        return None
    for c in sorted((c for c in candidates if c.feasible and c.plan.offload != "none"
                     and may_replace(c.plan.method, chosen, req)), key=lambda c: -c.tokens_per_second):
        if c.tokens_per_second <= chosen.tokens_per_second:
            return None
        if passes_rules(c):
            buys_memory(c)
            return c
    return None


def _alternatives(candidates: list[Candidate], chosen: Candidate | None, passes_rules, req: Request, buys_memory,
                  limit: int = ALTERNATIVES_SHOWN) -> list[Candidate]:
    """The best candidate of every other family (backend, stage, offload, method, parallelism, vLLM split), each
    with the reason it lost; rules are checked only on the candidates shown."""
    families: dict[tuple, list[Candidate]] = {}
    for c in candidates:
        if chosen is not None and family(c.plan) == family(chosen.plan):
            continue
        families.setdefault(family(c.plan), []).append(c)
    same = chosen.plan.method if chosen is not None else None

    def order(group: list[Candidate]):
        best = max(group, key=lambda c: (c.feasible, c.tokens_per_second))
        return (not best.feasible, best.plan.method != same, -best.tokens_per_second)

    # A family none of whose candidates passes the rules is shown once per rule it breaks, after the families that
    # could run: five server plans all refused by one rule (QLoRA's packed weights, VLLM013) would otherwise crowd
    # out every plan a user could pick instead.
    alts: list[Candidate] = []
    broken: dict[str, Candidate] = {}
    for group in sorted(families.values(), key=order):
        # a family that fits nowhere is shown by a candidate the GPUs hold that host RAM refused, if any: that is
        # what would have to change, and what the refusal's host RAM figure reads (_host_ram_need)
        group.sort(key=lambda c: (not c.feasible, not _host_refused(c), -c.tokens_per_second))
        pick = next((c for c in group if passes_rules(c)), None)
        if pick is not None:
            alts.append(pick)
            if len(alts) >= limit:
                break
        else:
            broken.setdefault(group[0].rejected_because.partition(":")[0], group[0])
    alts += list(broken.values())[:max(0, limit - len(alts))]
    for c in alts:
        if c.feasible and chosen is not None:
            if c.plan.offload != "none" and c.tokens_per_second >= chosen.tokens_per_second:
                buys_memory(c)  # _why_not says whether its twin without offload fits
            c.rejected_because = _why_not(c, chosen, req)
    return alts


def _why_not(c: Candidate, chosen: Candidate, req: Request) -> str:
    """Why a feasible alternative lost to the chosen plan, as _choose decided it."""
    faster = c.tokens_per_second >= chosen.tokens_per_second
    if faster and METHOD_ORDER.index(c.plan.method) > METHOD_ORDER.index(chosen.plan.method):
        # less faithful (a faster plan of a more faithful method can only be an offloading one: below)
        return (f"trains {c.plan.method} instead of {chosen.plan.method}: a {chosen.plan.method} plan fits, and "
                "--method was not pinned")
    if faster and c.without_offload is not None and not offload_buys_memory(c):
        return f"offload not needed: this plan {offload_not_needed(c)}"
    if faster and c.plan.offload != "none" and chosen.plan.offload == "none":
        return (f"offloads to host memory: {c.tokens_per_second:,.0f} tokens/s predicted, not above the "
                f"{offload_needs(c.plan, chosen, req):,.0f} an offloading {c.plan.backend} plan needs to replace "
                f"{chosen.tokens_per_second:,.0f} on the GPUs ({OFFLOAD_MARGIN * 100:.0f}% more: its speed follows "
                "the host CPU and PCIe, which the estimate knows less well)")
    if faster:
        return (f"{c.tokens_per_second:,.0f} tokens/s is within the "
                f"{COMPLEXITY_MARGIN.get(c.plan.backend, 0) * 100:.0f}% margin a "
                f"{c.plan.backend} plan must win by over a simpler one")
    ratio = chosen.tokens_per_second / max(c.tokens_per_second, 1e-9)
    return f"slower: {c.tokens_per_second:,.0f} tokens/s ({ratio:.2f}x less)"


def _host_refused(c: Candidate) -> bool:
    """The GPUs hold it and host RAM refused it (_best_micro_batch's host miss)."""
    return (c.memory is not None and c.memory.per_gpu_reserved_bytes <= planner_limit_bytes(c.memory)
            and "host RAM per node" in c.rejected_because)


def _host_ram_need(missed: list[Candidate], target: Target) -> int:
    """The least host RAM per node of the rejected plans that fit the GPUs but not the node's RAM (every process loads
    the model through host memory; offload keeps states there), or 0 when host RAM rejected none of them."""
    needs = [c.memory.host_bytes for c in missed if c.memory is not None and not _host_ok(c.memory, target)
             and c.memory.per_gpu_reserved_bytes <= planner_limit_bytes(c.memory)]
    return min(needs, default=0)


def smallest_change(req: Request, model: ModelSpec, target: Target, *, fewer_gpus: bool = False,
                    too_slow: Candidate | None = None) -> str:
    """Try the changes a user can make, least disruptive first, and name the first that yields a plan; when no
    single change does, the fewest changes together that do (more GPUs with QLoRA, say). fewer_gpus: host RAM is
    the limit, and fewer processes per node hold less of it. too_slow: the plan that fits but takes hours per
    optimizer step; a change answers it only by a plan that trains faster than it (`_answers`)."""
    seq = req.seq_len or DEFAULT_SEQ_LEN
    tries: list[tuple[str, Request, Target]] = []
    if fewer_gpus:
        for gpus in (4, 2, 1):
            if gpus < target.gpus_per_node:
                tries.append((f"--gpus {gpus} (fewer processes per node, each loading the model through host RAM)",
                              req.with_(gpus=gpus), target.with_(gpus_per_node=gpus)))
    if req.micro_batch and req.micro_batch > 1:
        tries.append(("--micro-batch 1", req.with_(micro_batch=1), target))
    if req.grad_ckpt is False:
        tries.append(("--grad-ckpt", req.with_(grad_ckpt=True), target))
    if req.global_batch and req.global_batch > DEFAULT_GLOBAL_BATCH:
        tries.append((f"--global-batch {DEFAULT_GLOBAL_BATCH} (the default)", req.with_(global_batch=None), target))
    if req.grad_accum != 1:
        # Accumulation holds gradients between micro-batches: FSDP2's no_sync keeps them unsharded (accelerate
        # accumulate/no_sync), ZeRO-2 offload keeps those above the reduce bucket on the GPU
        # (advisor.model.states.offload_held_gradient_bytes). One micro-batch a step frees that memory.
        tries.append(("--grad-accum 1 (one micro-batch per step)", req.with_(grad_accum=1, global_batch=None), target))
    if req.backend is not None or req.zero is not None:
        # a pinned backend can be the whole cause (DDP keeps a full model per GPU): another keeps the method
        pinned = f"--backend {req.backend}" if req.backend else f"--zero {req.zero}"
        tries.append((f"another backend (without {pinned})", req.with_(backend=None, zero=None), target))
    for nxt in _lighter_methods(req):
        tries.append((f"--method {nxt}", req.with_(method=nxt), target))
    if req.offload in (None, "none") and req.backend in (None, "deepspeed"):
        tries.append(("--backend deepspeed --zero 3 --offload all", req.with_(backend="deepspeed", zero=3,
                                                                             offload="all"), target))
    shorter = seq // 2
    while shorter >= 512:
        tries.append((f"--seq-len {shorter} (fewer tokens per step)", req.with_(seq_len=shorter), target))
        shorter //= 2
    for gpus in (2, 4, 8):
        if gpus > target.gpus_per_node:
            tries.append((f"--gpus {gpus} ({gpus - target.gpus_per_node} more GPUs per node)",
                          req.with_(gpus=gpus), target.with_(gpus_per_node=gpus)))
    for nodes in MORE_NODES:
        if nodes > target.nodes and target.gpus_per_node >= 8:
            tries.append((f"--nodes {nodes}", req.with_(nodes=nodes), target.with_(nodes=nodes)))
    for label, r, t in tries:
        found = _answers(r, model, t, req, too_slow)
        if found is not None:
            return f"{label} makes one: {_described(found)}"
    unpinned = _without_tuning_pins(req)
    if unpinned is not None:
        found = _answers(unpinned[1], model, target, req, too_slow)
        if found is not None:
            return f"{unpinned[0]} makes one: {_described(found)}"
    for labels, r, t in _combined_changes(req, target):
        found = _answers(r, model, t, req, too_slow)
        if found is not None:
            return f"{', '.join(labels[:-1])} and {labels[-1]} together make one: {_described(found)}"
    return _nothing_found(req, target, too_slow)


TUNING_PINS = ("backend", "zero", "offload", "offload_device", "micro_batch", "grad_accum", "grad_ckpt", "liger",
               "attn", "precision", "sp_size", "cp_size", "unsloth", "vllm", "vllm_gpus", "vllm_mem_fraction",
               "ref_model")
"""Request knobs that tune how the job runs, not what it trains (the model, method, sequence length, global batch
and generations stay): a refusal that no single change answers tries the request without all of them."""


def _without_tuning_pins(req: Request) -> tuple[str, Request] | None:
    """("without --precision fp32 --micro-batch 2", the request without those pins), or None when none is pinned:
    several pins can hold a plan out together (fp32 weights and a pinned micro-batch), each alone not."""
    pinned = [k for k in TUNING_PINS if getattr(req, k) is not None]
    if not pinned:
        return None
    words = []
    for k in pinned:
        value, flag = getattr(req, k), "--" + k.replace("_", "-")
        words.append((flag if value else f"--no-{k.replace('_', '-')}") if isinstance(value, bool) else
                     f"{flag} {value}")
    return f"without {' '.join(words)}", req.with_(**{k: None for k in pinned})


MORE_NODES = (2, 4, 8, 16)
"""Node counts a refusal tries (of 8 GPUs each): beyond 16 nodes a plan is a cluster reservation, not a change."""


def _lighter_methods(req: Request) -> list[str]:
    """The methods after a pinned one that hold less per GPU: full tries LoRA, then QLoRA (a 70B whose bf16 weights
    LoRA keeps whole fits as 4-bit); an unpinned method has had all three searched already."""
    if req.method not in ("full", "lora"):
        return []
    return list(METHOD_ORDER[METHOD_ORDER.index(req.method) + 1:])


def _combined_changes(req: Request, target: Target) -> list[tuple[list[str], Request, Target]]:
    """Changes that no single flag makes, cheapest first: a full node (--gpus 8) with more nodes, then QLoRA with
    more GPUs. Each is one search, so the list is short: at most nine. Consumer cards are planned on one node, as
    `recommend` rents them (advisor.recommend.hardware)."""
    out: list[tuple[list[str], Request, Target]] = []
    grow: list[tuple[list[str], Request, Target]] = []
    full = max(8, target.gpus_per_node)
    if full > target.gpus_per_node:
        grow.append(([f"--gpus {full}"], req.with_(gpus=full), target.with_(gpus_per_node=full)))
    if not target.gpu.consumer:
        for nodes in MORE_NODES:
            if nodes > target.nodes:
                labels = ([f"--gpus {full}"] if full > target.gpus_per_node else []) + [f"--nodes {nodes}"]
                grow.append((labels, req.with_(gpus=full, nodes=nodes),
                             target.with_(gpus_per_node=full, nodes=nodes)))
    # one flag alone was tried already: more nodes with a full node is new only where the node was not full
    out += [g for g in grow if len(g[0]) > 1]
    if _lighter_methods(req):
        out += [(["--method qlora", *labels], r.with_(method="qlora"), t) for labels, r, t in grow]
    return out


def _answers(r: Request, model: ModelSpec, t: Target, req: Request, too_slow: Candidate | None) -> Candidate | None:
    """The plan a changed request gets, if it answers the refusal: one that fits and is practical; for a plan
    refused as too slow, also one fast enough to train that plan's step within IMPRACTICAL_STEP_SECONDS, unless
    the change undoes the user's own step size (a pinned --global-batch or --grad-accum that made the step hours
    long). Training fewer tokens per step at the same rate (one micro-batch per step, shorter sequences) makes the
    steps shorter, not the job: 405B on one T4 at 10 tokens/s is no answer to hours per step."""
    try:
        chosen = search(r, model, t, explain=False).chosen
    except AdvisorError:
        return None
    if chosen is None or impractical(chosen):
        return None
    # the refused step's tokens at the changed plan's rate (each counted as the speed model counts them)
    tokens = too_slow.speed.step_seconds * too_slow.speed.tokens_per_second if too_slow is not None else 0.0
    if too_slow is not None and tokens > chosen.speed.tokens_per_second * IMPRACTICAL_STEP_SECONDS:
        undoes_a_pin = ((req.global_batch is not None and r.global_batch is None) or
                        (req.grad_accum is not None and r.grad_accum != req.grad_accum))
        if not undoes_a_pin:
            return None
    return chosen


def _described(c: Candidate) -> str:
    host = ""
    if c.plan.offload != "none" and c.memory.host_bytes:
        host = f", with {c.memory.host_bytes / GIB:.0f} GiB host RAM per node"
    return f"{c.plan.short()}{host} ({c.tokens_per_second:,.0f} tokens/s)"


def _nothing_found(req: Request, target: Target, too_slow: Candidate | None) -> str:
    """What is left when no change tried makes a plan: name only the remedies not tried already (the method was
    searched, the GPU counts were tried), so that the hint never sends the user back to what just failed."""
    tried = []
    methods = {"full": "LoRA and QLoRA", "lora": "QLoRA", None: "LoRA and QLoRA"}
    if req.method in methods:
        tried.append(methods[req.method])
    node = max(8, target.gpus_per_node)
    most = node * (target.nodes if target.gpu.consumer else max(MORE_NODES[-1], target.nodes))
    if most > target.world_size:
        tried.append(f"up to {most} GPUs")
    if (req.seq_len or DEFAULT_SEQ_LEN) // 2 >= 512:
        tried.append("sequences down to 512 tokens")
    if _without_tuning_pins(req) is not None:
        tried.append("the request without its tuning pins")
    what = "a practical plan" if too_slow is not None else "a plan"
    return (f"no change tried gives {what}" + (f" ({', '.join(tried)} were tried)" if tried else "")
            + ": a smaller model, or GPUs with more memory")


def _raise_if_a_pin_breaks_a_rule(req: Request, model: ModelSpec, target: Target) -> None:
    """When every structure fails a rule whatever the memory (a pinned --sp-size 7 on 28 heads, say), the user's
    pin is the problem: report that rule and its fix, not a memory suggestion."""
    first_errors = None
    for structure in structures(req, model, target) or _pinned_structures(req, model, target):
        errors = [e for e in _structural_errors(req, model, target, structure) if about_a_pin(req, e.id)]
        if not errors:
            return
        first_errors = first_errors or errors
    if first_errors:
        # First the error about the user's own pins (--cp-size 2 --packing: SP013, packing with context parallelism,
        # not SP011, which blames the attention the planner picked for packing), and among those the one whose fix
        # changes what another reads (--cp-size 3 at 65,536 tokens: SP016's process count, not SP012's length for a
        # cp that must change anyway); then the other errors of pins alone that its fix leaves standing, so that one
        # refusal names them all.
        def reads(f) -> set[str]:
            return {name.partition(".")[2] for name in rules.get_rule(f.id).reads if name.startswith("plan.")}

        def settles(f) -> int:
            return sum(1 for g in first_errors if g is not f and reads(g) & set(f.auto_fix or {}))

        ranked = sorted(first_errors, key=lambda f: (-_pinned_share(req, f.id), -settles(f)))
        e = ranked[0]
        others = list({f.id: f for f in ranked[1:] if f.id != e.id and _pinned_share(req, f.id) == 1.0
                       and not reads(f) & set(e.auto_fix or {})}.values())
        also = "; also " + "; ".join(f"{f.id} {f.name}: {f.message}" for f in others) if others else ""
        fixes = [f.fix or rules.get_rule(f.id).name for f in (e, *others)]
        raise PinnedRuleError(f"{e.id} {e.name}: {e.message}{also}", hint="; and ".join(dict.fromkeys(fixes)))


PINNED_FIELDS = {"backend": "backend", "zero": "zero_stage", "offload": "offload", "offload_device": "offload_device",
                 "vllm": "vllm_mode", "vllm_gpus": "vllm_gpus", "sp_size": "sp_size", "cp_size": "cp_size",
                 "method": "method", "ref_model": "ref_model", "attn": "attn", "precision": "precision"}
"""Request knobs the candidate generator filters on, and the plan field each sets."""


def _pinned_structures(req: Request, model: ModelSpec, target: Target) -> list[Plan]:
    """Structures of a request whose pins the candidate generator leaves no structure for (--zero 2 --offload all: it
    offers parameter offload at ZeRO-3 only; --vllm server on a single GPU: no GPU left to train on): each pinned
    knob in turn left to the generator, and set back to the user's value on the structures it gives, so that the
    rules judge the plan the user asked for and name what is wrong with it (DS003, VLLM002), not "nothing fits"."""
    out: list[Plan] = []
    for knob, field_name in PINNED_FIELDS.items():
        value = getattr(req, knob)
        if value is not None:
            out += [s.with_(**{field_name: value}) for s in structures(req.with_(**{knob: None}), model, target)]
    return out


PLAN_FIELD_KNOBS = {"zero_stage": "zero", "vllm_mode": "vllm"}
"""Plan fields whose request knob is named otherwise; the other plan fields a rule reads share the knob's name."""


def _pinned_share(req: Request, rule_id: str) -> float:
    """The share of the request knobs a rule reads (through the plan's fields) that the user pinned: 1 for a rule
    about the user's own choices, less for one that also judges what the planner chose (SP002 reads the backend the
    planner picked for a pinned --sp-size; SP015, RLOO with sp_size, reads only pins)."""
    knobs = []
    for field_name in rules.get_rule(rule_id).reads:
        head, _, name = field_name.partition(".")
        knob = PLAN_FIELD_KNOBS.get(name, name)
        if head == "plan" and hasattr(req, knob) and knob not in UNSET_MEANS_OFF:
            knobs.append(getattr(req, knob) is not None)
    return sum(knobs) / len(knobs) if knobs else 1.0


UNSET_MEANS_OFF = frozenset({"sp_size", "cp_size", "packing", "unsloth"})
"""Knobs the planner leaves off unless pinned (no sequence or context parallelism, packing or Unsloth of its own
for most requests): a rule reading one the user left unset is not judging a planner's choice there."""


SEARCHED_LATER = {"plan.micro_batch": "micro_batch", "plan.grad_accum": "grad_accum"}
"""Plan fields a structure holds only as placeholders (1) until the micro-batch search sets them: a rule that reads
one the user did not pin judges the placeholder, not the user's request."""


def about_a_pin(req: Request, rule_id: str) -> bool:
    """A structure's error counts against the request unless the rule reads a field the search sets later and the
    user left unpinned (TRN001's generation batch, TRN005's KTO micro-batch: micro-batch 1 is a placeholder)."""
    reads = rules.get_rule(rule_id).reads
    return all(getattr(req, knob) is not None for field_name, knob in SEARCHED_LATER.items() if field_name in reads)


class PinnedRuleError(AdvisorError):
    """A pinned knob breaks a rule in every candidate plan: exit 1 like `check`, with the rule's fix."""

    exit_code = NoFeasiblePlanError.exit_code


def plan_json(plan: Plan) -> dict:
    """The generate JSON's `plan` object: the contract keys first, then every other Plan field."""
    d = plan.to_dict()
    keys = ("backend", "zero_stage", "offload", "method", "precision", "micro_batch", "grad_accum", "grad_ckpt",
            "liger", "sp_size", "cp_size", "vllm_mode", "num_processes", "nodes")
    return {**{k: d[k] for k in keys}, **{k: v for k, v in d.items() if k not in keys}}


def alternative_json(c: Candidate) -> dict:
    return {"plan": plan_json(c.plan), "tokens_per_second": round(c.tokens_per_second, 1),
            "per_gpu_peak_bytes": c.memory.per_gpu_peak_bytes if c.memory is not None else None,
            "rejected_because": c.rejected_because}


IMPRACTICAL_STEP_SECONDS = 3600.0
"""A plan whose optimizer step is predicted to take more than an hour is not an answer: 1,000 steps would run for six
weeks. `generate` says so (exit 1, as when nothing fits) and names the smallest change that gives a practical plan."""


def impractical(c: Candidate) -> bool:
    return c.speed is not None and c.speed.step_seconds > IMPRACTICAL_STEP_SECONDS


PLAN_NOTE_PREFIXES = ("Unsloth: ", "speed: ", "vLLM server: ")
"""Notes decide adds about the chosen plan's figures, after the target's own notes (the wizard's Target tab shows only
the target's)."""


def vllm_note(plan: Plan) -> str | None:
    """The GPUs a multi-node server plan leaves idle, as a number. Only node 0 runs `vllm serve` (TRL's client connects
    the main process to one base URL: trl/generation/vllm_generation.py), and accelerate starts the same number of
    training processes on every node (accelerate/utils/launch.py: nproc_per_node = num_processes // num_machines),
    so the server's GPUs of every other node run nothing. The bundle's launch.sh and README say it too."""
    if plan.vllm_mode != "server" or plan.nodes < 2:
        return None
    idle, total = plan.vllm_gpus * (plan.nodes - 1), plan.gpus_per_node * plan.nodes
    return (f"vLLM server: {idle} of the job's {total} GPUs stay idle ({plan.vllm_gpus} per node on nodes 1 to "
            f"{plan.nodes - 1}): only node 0 runs the server, and accelerate starts {plan.gpus_per_node - plan.vllm_gpus}"
            " training processes on every node")


def _held_by_others(target: Target) -> str:
    """', of which other processes hold N GiB' where the probe saw another job on the GPUs (rule HW009): the memory
    left to plan with is the cause of a miss before the model or the method is."""
    from rules.hardware import OTHER_PROCESS_WARN_BYTES

    held = target.other_process_bytes or 0
    if held <= OTHER_PROCESS_WARN_BYTES:
        return ""
    return f", of which other processes hold {held / GIB:.1f} GiB per GPU"


def _split_units(shapes: set[tuple[int, int, int]], req: Request) -> set[tuple[int, int]]:
    """(unit, only) pairs: the global batches a (data-parallel replicas, processes, num_generations) shape and a
    micro-batch can train are the multiples of `unit` (`only`: 0), or the one value `unit` when the accumulation is
    pinned (`only`: 1). GRPO/RLOO need the generation batch, micro-batch x processes x accumulation, in whole groups
    of num_generations (GRPOConfig), so the accumulation steps by num_generations / gcd(micro x processes, it)."""
    out = set()
    pinned_accum = req.grad_accum
    for dp, procs, generations in shapes:
        if pinned_accum and not req.micro_batch:
            # any micro-batch goes with a pinned accumulation (micro_batches): the multiples of dp x accumulation,
            # in whole generation groups (the micro-batch a multiple of ng / gcd(processes x accumulation, ng))
            whole = generations // math.gcd(procs * pinned_accum, generations) if generations else 1
            out.add((dp * pinned_accum * whole, 0))
            continue
        for micro in micro_batches(req, dp):
            step = accumulation_step(micro, procs, generations)
            if pinned_accum:
                if pinned_accum % step == 0:
                    out.add((micro * dp * pinned_accum, 1))
            else:
                out.add((micro * dp * step, 0))
    return out


def _nearest_splits(global_batch: int, units: set[tuple[int, int]]) -> tuple[int | None, int | None]:
    """The largest global batch below and the smallest above `global_batch` that some unit trains."""
    below = [u if only else global_batch // u * u for u, only in units if (u < global_batch if only else u <= global_batch)]
    above = [u if only else -(-global_batch // u) * u for u, only in units if (u > global_batch if only else True)]
    below = [n for n in below if 0 < n < global_batch]
    above = [n for n in above if n > global_batch]
    return (max(below) if below else None), (min(above) if above else None)


def check_global_batch(req: Request, model: ModelSpec, target: Target) -> None:
    """A pinned --global-batch is what each optimizer step trains, exactly: refused up front, with the nearest
    sizes that split, when no plan's data-parallel replicas, micro-batch and accumulation multiply to it."""
    if not req.global_batch:
        return
    shapes = {(s.dp_size, s.num_processes, s.num_generations) for s in structures(req, model, target)}
    if not shapes:
        return
    units = _split_units(shapes, req)
    if any((u == req.global_batch) if only else req.global_batch % u == 0 for u, only in units):
        return
    near = " or ".join(f"--global-batch {n}" for n in _nearest_splits(req.global_batch, units) if n)
    replicas = sorted({dp for dp, _, _ in shapes})
    groups = sorted({g for _, _, g in shapes if g})
    why = (f"no plan's micro-batch x data-parallel replicas ({', '.join(map(str, replicas))}) x accumulation "
           f"multiplies to it" + (f" in whole groups of {groups[0]} generations" if len(groups) == 1 else "")
           + (" with KTO's micro-batch of at least 2 (its KL term)" if smallest_micro_batch(req) > 1 else ""))
    raise AdvisorError(f"--global-batch {req.global_batch} cannot be split on {target.describe()}: {why}",
                       hint=(f"use {near}" if near else "leave --global-batch out")
                       + " (each optimizer step trains exactly the global batch)")


def decide(req: Request, *, probe=None) -> tuple[Decision, dict]:
    """Search and build the generate JSON (without writing anything)."""
    check_request(req)
    model = resolve_model(req)
    target = resolve_target(req, probe=probe)
    check_against_target(req, target)
    check_vllm_gpus(req, model, target)
    check_global_batch(req, model, target)
    decision = search(req, model, target)
    decision.notes = list(target.notes)
    if req.unsloth:
        decision.notes.append("Unsloth: " + calibration.UNSLOTH_UNMEASURED)
    details = {"request": req.pinned(), "model": {"id": model.id, "params": model.params},
               "hardware": {"gpu": target.gpu.id, "gpus_per_node": target.gpus_per_node, "nodes": target.nodes},
               "alternatives": [alternative_json(a) for a in decision.alternatives],
               "search": {"configurations_estimated": decision.considered}}
    if decision.chosen is None:
        try:
            _raise_if_a_pin_breaks_a_rule(req, model, target)
            busy = _held_by_others(target)
            host_need = _host_ram_need(decision.alternatives, target)
            if not host_need:
                host = ""
            elif target.host_ram_bytes is not None:
                host = (f"; the node's {target.host_ram_bytes / GIB:.0f} GiB of host RAM is the limit: the plans "
                        f"that fit the GPUs need {host_need / GIB:.0f} GiB or more")
            else:
                host = (f"; host RAM is the limit: the plans that fit the GPUs need {host_need / GIB:.0f} GiB or more "
                        f"per node, more than the largest GPU servers have ({LARGEST_NODE_HOST_RAM_BYTES / GIB:.0f} "
                        "GiB)")
            raise NoFeasiblePlanError(
                f"no plan for {model.id} ({req.trainer}) fits {target.describe()}{busy}: searched "
                f"{decision.considered} configurations{host}",
                hint=("free the GPUs (nvidia-smi lists the processes) or choose free ones with CUDA_VISIBLE_DEVICES; "
                      if busy else "") + smallest_change(req, model, target, fewer_gpus=bool(host_need)))
        except AdvisorError as exc:
            exc.details = details
            raise
    c = decision.chosen
    share = speed_model.host_bound_share(c.plan, c.speed) if c.speed is not None else 0.0
    if share >= calibration.HOST_BOUND_NOTE_SHARE:
        decision.notes.append("speed: " + calibration.host_bound_note(share))
    note = vllm_note(c.plan)
    if note:
        decision.notes.append(note)
    if impractical(c):
        exc = NoFeasiblePlanError(
            f"no practical plan for {model.id} ({req.trainer}) on {target.describe()}: the best that fits, "
            f"{c.plan.short()}, takes {c.speed.step_seconds / 3600:.1f} h per optimizer step "
            f"({c.tokens_per_second:,.1f} tokens/s)", hint=smallest_change(req, model, target, too_slow=c))
        best = {**alternative_json(c), "rejected_because": f"{c.speed.step_seconds / 3600:.1f} h per optimizer step, "
                f"more than {IMPRACTICAL_STEP_SECONDS / 3600:.0f} h"}
        exc.details = {**details, "alternatives": [best] + details["alternatives"]}
        raise exc
    findings = rules.finding_dicts(rules.Context(request=req, plan=c.plan, model=model, target=target,
                                                memory=c.memory, speed=c.speed))
    result = result_dict(req, model, target, c.plan, c.memory, c.speed, findings)
    result["plan"] = plan_json(c.plan)
    result["why"] = dict(decision.reasons)
    result["alternatives"] = [alternative_json(a) for a in decision.alternatives]
    result["search"] = {"configurations_estimated": decision.considered}
    return decision, result
