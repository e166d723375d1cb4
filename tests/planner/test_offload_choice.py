"""Offload competes on speed: the planner takes the fastest plan that fits with headroom, offloading or not, and keeps
the plan on the GPUs when an offloading one is predicted faster by no more than OFFLOAD_MARGIN (its speed follows the
host CPU and PCIe, which the estimate knows less well), or when the offload buys no memory: the same plan without it
fits (ranking.offload_buys_memory). Held here against a brute force over every candidate, on requests where offload
wins, where it loses by the margin, where it is not needed, where nothing fits without it, and with the method free;
and the shortcuts of the choice-only search (explain=False) to what makes them exact."""

from __future__ import annotations

import random

import pytest
from random_structures import MODELS, sampled_structures

from advisor.catalog import resolve_gpu
from advisor.core.errors import AdvisorError
from advisor.core.request import Request
from advisor.core.target import Target
from advisor.model.memory import estimate_memory
from advisor.model.speed import estimate_speed
from advisor.resolve import METHOD_ORDER, resolve_model, resolve_target
from advisor.search import decide, search
from advisor.search import planner as P
from advisor.search.candidates import (
    MICRO_BATCHES,
    _accumulation,
    _global_batch,
    family,
    structures,
    zero_without_offload,
)
from advisor.search.ranking import OFFLOAD_MARGIN, may_replace, offload_needs, rank_key, score

REQUESTS = [
    # offload wins: ZeRO-3 holds micro-batch 4 x 2 accumulation steps on the 24 GB cards; with the parameters and
    # optimizer states on the host micro-batch 8 fits, predicted about 40 % faster
    dict(model="qwen2.5-7b", method="full", gpus=8, gpu="RTX-4090"),
    # offload wins by far: ZeRO-3 holds micro-batch 1 x 8 of a 70B LoRA, parameter offload micro-batch 8
    dict(model="llama-3.1-70b", method="lora", gpus=8, gpu="RTX-4090"),
    # the MoE QLoRA on T4s a fitting-first ranking got wrong (offload predicted about twice as fast), method pinned
    # and free
    dict(model="qwen3-30b-a3b", method="qlora", gpus=8, gpu="T4"),
    dict(model="qwen3-30b-a3b", gpus=8, gpu="T4"),
    # an offloading plan predicted faster, but within the margin: the plan on the GPUs is kept
    dict(model="llama-3.1-8b", method="lora", gpus=4, gpu="L4"),
    # full fine-tuning fits on the GPUs: a faster LoRA/QLoRA plan by offload does not replace it
    dict(model="llama-3.1-8b", gpus=8, gpu="A100-40GB"),
    # nothing fits without offload: the fastest offloading plan, whatever its method
    dict(model="70B", gpus=1, gpu="RTX-4090"),
    # full fine-tuning by offload predicted faster than LoRA on the GPUs: the more faithful and faster plan
    dict(model="llama-3.1-8b", gpus=1, gpu="L4"),
    # offload not needed: ZeRO-2 + optimizer offload was predicted 18 % faster than the plain plan at the same
    # micro-batch, from DeepSpeed's adapter path, and the same plan fits without the offload
    dict(model="1B", method="lora", gpus=1, gpu="H200"),
    dict(model="qwen2.5-0.5b", method="qlora", gpus=1, gpu="T4"),
    dict(model="llama-3.1-8b", method="qlora", gpus=8, gpu="T4"),
    # the plain plan keeps fp32 weights in fp16-mixed and fits nothing; ZeRO without offload does (the one-GPU
    # fallback, candidates.zero_without_offload), where only its offloading twins were on offer before
    dict(model="llama-3.1-8b", method="lora", gpus=1, gpu="V100-32GB"),
    dict(model="qwen2.5-7b", gpus=1, gpu="V100-32GB"),
    # method free: the LoRA offload that was chosen is not needed; full fine-tuning by offload, which is, clears the
    # margin over LoRA on the GPU
    dict(model="1B", gpus=1, gpu="T4"),
]


def _all_candidates(req: Request):
    """Every structure's best micro-batch, whatever the search's shortcuts, with the rules run on each; on one GPU
    also the ZeRO structures without offload, for a method none of whose other plans fits without offload."""
    model, target = resolve_model(req), resolve_target(req)

    def best(plans):
        out = []
        for s in plans:
            c, _, _ = P._best_micro_batch(req, model, target, s, _global_batch(req))
            if c is not None and c.feasible and not P._structural_errors(req, model, target, c.plan):
                out.append(c)
        return out

    plans = structures(req, model, target)
    out = best(plans)
    for method in METHOD_ORDER:
        if not any(c.plan.method == method and c.plan.offload == "none" for c in out):
            out += best(zero_without_offload(req, [s for s in plans if s.method == method]))
    return out


def _twin_fits(req: Request, c) -> bool:
    """The same plan with offload "none" fits within the planner's limit and host RAM and passes the rules; on one
    GPU with the backend free, or the plain plan at the same micro-batch does."""
    model, target = resolve_model(req), resolve_target(req)
    twins = [c.plan.with_(offload="none")]
    if (c.plan.num_processes == 1 and c.plan.backend == "deepspeed"
            and not (req.backend or req.zero is not None or req.offload)):
        twins.append(c.plan.with_(backend="single", zero_stage=0, offload="none"))
    for twin in twins:
        mem = estimate_memory(model, twin, target)
        if (mem.per_gpu_reserved_bytes <= P.planner_limit_bytes(mem) and P._host_ok(mem, target)
                and not P._structural_errors(req, model, target, twin)):
            return True
    return False


def _expected(req: Request, feasible):
    """The rule, by brute force: the best plan on the GPUs (method first unless pinned, then score), replaced by the
    fastest offloading plan of a method at least as faithful when that scores more than OFFLOAD_MARGIN above it and
    the same plan without its offload does not fit."""
    on_gpu = min((c for c in feasible if c.plan.offload == "none"), key=lambda c: rank_key(c, req), default=None)
    offloading = [c for c in feasible if c.plan.offload != "none"
                  and (on_gpu is None or (may_replace(c.plan.method, on_gpu, req)
                                          and score(c, req) > (1 + OFFLOAD_MARGIN) * score(on_gpu, req)
                                          and not _twin_fits(req, c)))]
    best_off = max(offloading, key=lambda c: score(c, req), default=None)
    if best_off is not None and (on_gpu is None or score(best_off, req) > (1 + OFFLOAD_MARGIN) * score(on_gpu, req)):
        return best_off, on_gpu
    return on_gpu, on_gpu


@pytest.mark.parametrize("fields", REQUESTS, ids=lambda f: "-".join(str(v) for v in f.values()))
def test_the_choice_is_the_fastest_that_fits_offload_or_not(fields):
    req = Request(**fields)
    decision, result = decide(req)
    chosen = decision.chosen
    feasible = _all_candidates(req)
    want, on_gpu = _expected(req, feasible)
    assert (chosen.plan, chosen.tokens_per_second) == (want.plan, want.tokens_per_second)
    assert (decision.on_gpu is None) == (on_gpu is None)
    # the class, as a user reads it: no plan that fits is predicted faster than the chosen one by more than the
    # offload margin, among the methods the choice could have taken (the most faithful on the GPUs, or more), and
    # no offload is chosen that the same plan fits without
    floor = METHOD_ORDER.index(on_gpu.plan.method) if on_gpu is not None and not req.method else len(METHOD_ORDER)
    if chosen.plan.offload != "none" and on_gpu is not None:
        assert not _twin_fits(req, chosen)
    for c in feasible:
        if METHOD_ORDER.index(c.plan.method) > floor:
            continue  # a less faithful method: never chosen over a more faithful one that fits on the GPUs
        if c.plan.offload != "none" and on_gpu is not None and _twin_fits(req, c):
            continue  # an offload that buys no memory: not chosen, whatever its speed
        if chosen.plan.offload != "none" or c.plan.offload == "none":
            if c.plan.method == chosen.plan.method or req.method:
                assert score(c, req) <= score(chosen, req) + 1e-6, c.plan.short()
        else:
            assert score(c, req) <= (1 + OFFLOAD_MARGIN) * score(chosen, req) + 1e-6, c.plan.short()
    # the choice alone (what `recommend` runs) is the same, shortcuts and all
    alone = search(req, resolve_model(req), resolve_target(req), explain=False).chosen
    assert (alone.plan, alone.tokens_per_second) == (chosen.plan, chosen.tokens_per_second)
    assert result["plan"]["offload"] == chosen.plan.offload


@pytest.mark.parametrize("fields", REQUESTS[:2], ids=lambda f: "-".join(str(v) for v in f.values()))
def test_an_offload_that_beats_a_fitting_plan_by_the_margin_is_chosen_and_says_why(fields):
    decision, result = decide(Request(**fields))
    chosen, on_gpu = decision.chosen, decision.on_gpu
    assert chosen.plan.offload != "none" and on_gpu is not None and on_gpu.plan.offload == "none"
    # what the offload buys here: a larger micro-batch than fits on the GPUs alone
    assert chosen.plan.micro_batch > on_gpu.plan.micro_batch
    assert score(chosen, decision.request) > (1 + OFFLOAD_MARGIN) * score(on_gpu, decision.request)
    why = result["why"]["offload"]
    assert why.startswith(f"{chosen.plan.offload}: ") and f"{chosen.tokens_per_second:,.0f} tokens/s" in why
    assert f"{on_gpu.tokens_per_second:,.0f}" in why and f"{OFFLOAD_MARGIN * 100:.0f}%" in why
    # and it buys memory: the same plan without the offload does not fit
    assert chosen.without_offload.plan == chosen.plan.with_(offload="none")
    assert chosen.without_offload.rejected_because.startswith("does not fit: ")
    assert why.endswith(f"; without the offload this plan {chosen.without_offload.rejected_because}")
    # the plan on the GPUs is listed as what it is: slower, not "used only when nothing fits"
    shown = {family(a.plan): a.rejected_because for a in decision.alternatives}
    assert shown[family(on_gpu.plan)].startswith("slower: ")
    assert not any("nothing fits on the GPUs" in a.rejected_because for a in decision.alternatives)


def test_a_faster_offload_within_the_margin_keeps_the_plan_on_the_gpus_and_says_so():
    decision, result = decide(Request(model="llama-3.1-8b", method="lora", gpus=4, gpu="L4"))
    chosen, rival = decision.chosen, decision.offload_rival
    assert chosen.plan.offload == "none" and chosen is decision.on_gpu
    assert rival is not None and rival.tokens_per_second > chosen.tokens_per_second
    assert rival.without_offload.rejected_because.startswith("does not fit: ")  # it would buy memory
    assert score(rival, decision.request) <= (1 + OFFLOAD_MARGIN) * score(chosen, decision.request)
    needs = offload_needs(rival.plan, chosen, decision.request)
    assert rival.tokens_per_second <= needs
    why = result["why"]["offload"]
    assert why.startswith("none: ") and rival.plan.short() in why and f"{needs:,.0f}" in why
    assert result["why"]["backend"].startswith("fastest that fits on the GPUs alone: ")
    # every faster offloading alternative shown says what it would have needed, or that it is not needed
    for a in decision.alternatives:
        if a.feasible and a.plan.offload != "none" and a.tokens_per_second >= chosen.tokens_per_second:
            if a.without_offload.feasible:
                assert a.rejected_because.startswith("offload not needed: this plan fits on the GPUs without")
            else:
                assert a.rejected_because.startswith("offloads to host memory: ")
                assert f"{offload_needs(a.plan, chosen, decision.request):,.0f}" in a.rejected_because


NOT_NEEDED = [
    dict(model="1B", method="lora", gpus=1, gpu="H200"),
    dict(model="1B", method="lora", gpus=1, gpu="RTX-4090"),
    dict(model="1B", method="qlora", gpus=1, gpu="T4"),
    dict(model="qwen2.5-0.5b", method="lora", gpus=1, gpu="L4"),
    dict(model="qwen2.5-0.5b", method="qlora", gpus=1, gpu="T4"),
    dict(model="llama-3.1-8b", method="qlora", gpus=8, gpu="T4"),
    # ZeRO-3 without the offload does not fit, the plain plan at the same micro-batch does (planner._without_offload)
    dict(model="1B", method="lora", gpus=1, gpu="L4"),
]
"""Requests where an offloading plan was predicted more than OFFLOAD_MARGIN faster than the best plan on the GPUs,
and was chosen for it, though the same plan fits without its offload (the gain was the speed model's DeepSpeed adapter
path at the same micro-batch; the adapter's optimizer states it moved are MiBs)."""


@pytest.mark.parametrize("fields", NOT_NEEDED, ids=lambda f: "-".join(str(v) for v in f.values()))
def test_an_offload_the_same_plan_fits_without_is_not_chosen_whatever_its_speed(fields):
    decision, result = decide(Request(**fields))
    chosen, rival = decision.chosen, decision.offload_rival
    assert chosen.plan.offload == "none" and chosen is decision.on_gpu
    # the faster offloading plan is there, clears the margin or not, and the same plan without the offload fits
    assert rival is not None and rival.tokens_per_second > chosen.tokens_per_second
    assert rival.without_offload.feasible and rival.without_offload.plan.offload == "none"
    assert rival.without_offload.plan.with_(offload=rival.plan.offload) == rival.plan
    why = result["why"]["offload"]
    assert why.startswith(f"none: offload not needed: the fastest offloading plan ({rival.plan.short()}) fits on "
                          "the GPUs without its offload (")
    assert f"{rival.tokens_per_second:,.0f} tokens/s predicted for it are not offload's gain" in why
    assert result["why"]["backend"].startswith("fastest that fits on the GPUs alone: ")
    shown = {family(a.plan): a.rejected_because for a in decision.alternatives}
    assert shown[family(rival.plan)].startswith("offload not needed: this plan fits on the GPUs without its offload")
    # every faster offloading plan shown is not needed either (the same plan, or on one GPU the plain plan, fits)
    for a in decision.alternatives:
        if a.feasible and a.plan.offload != "none" and a.tokens_per_second >= chosen.tokens_per_second:
            assert a.rejected_because.startswith("offload not needed: this plan fits on the GPU"), a.rejected_because
    # and nothing the planner chose is warned about as a wasted offload
    assert not any(f["id"] == "PEFT003" and f["status"] == "fail" for f in result["findings"])


def test_one_gpu_zero_without_offload_is_searched_when_nothing_else_fits_on_the_gpu():
    """In fp16-mixed the plain plan keeps fp32 weights (8B: 30.1 GiB); ZeRO keeps 16-bit ones and fits one V100-32GB,
    where only its offloading twins were on offer, offloading nothing they needed to (PEFT003 warned about them)."""
    req = Request(model="llama-3.1-8b", method="lora", gpus=1, gpu="V100-32GB")
    model, target = resolve_model(req), resolve_target(req)
    plans = structures(req, model, target)
    assert not any(p.backend == "deepspeed" and p.offload == "none" for p in plans)
    decision, result = decide(req)
    chosen = decision.chosen.plan
    assert chosen.backend == "deepspeed" and chosen.offload == "none" and chosen.num_processes == 1
    assert chosen.with_(micro_batch=1, grad_accum=1) in zero_without_offload(req, plans)
    assert not any(f["id"] == "PEFT003" and f["status"] == "fail" for f in result["findings"])
    # not searched where a plan of the method fits without it: the plain plan measured faster there
    decision, _ = decide(Request(model="1B", method="lora", gpus=1, gpu="H200"))
    assert decision.chosen.plan.backend == "single"
    assert not any(c.plan.backend == "deepspeed" and c.plan.offload == "none" for c in decision.alternatives)
    # nor when DeepSpeed or an offload is pinned: the structures are the generator's own then
    assert zero_without_offload(req.with_(backend="deepspeed"), plans) == []
    assert zero_without_offload(req.with_(offload="optimizer"), plans) == []


def test_a_full_fine_tune_on_the_gpus_is_not_replaced_by_a_faster_adapter_offload():
    decision, _ = decide(Request(model="llama-3.1-8b", gpus=8, gpu="A100-40GB"))
    assert decision.chosen.plan.method == "full" and decision.chosen.plan.offload == "none"
    assert decision.reasons["method"] == "full: every weight trained, and it fits"
    faster = [a for a in decision.alternatives
              if a.feasible and a.plan.method != "full" and a.tokens_per_second >= decision.chosen.tokens_per_second]
    assert all(a.rejected_because.startswith(f"trains {a.plan.method} instead of full") for a in faster)


def test_a_more_faithful_offload_that_is_faster_says_it_fits_only_by_offloading():
    decision, result = decide(Request(model="llama-3.1-8b", gpus=1, gpu="L4"))
    chosen, on_gpu = decision.chosen, decision.on_gpu
    assert chosen.plan.offload != "none" and on_gpu is not None
    assert METHOD_ORDER.index(chosen.plan.method) < METHOD_ORDER.index(on_gpu.plan.method)
    assert result["why"]["method"].startswith(f"{chosen.plan.method}: fits only by offloading")


def test_when_only_offloading_plans_fit_the_offload_reason_says_so():
    decision, result = decide(Request(model="70B", gpus=1, gpu="RTX-4090"))
    assert decision.on_gpu is None and decision.chosen.plan.offload != "none"
    assert "no plan that keeps everything on the GPUs fits" in result["why"]["offload"]


def _random_request(rng: random.Random) -> tuple[Request, Target]:
    model_id = rng.choice(MODELS)
    trainer = rng.choice(("sft", "sft", "sft", "dpo", "grpo"))
    req = Request(model=model_id, trainer=trainer, method=rng.choice((None, "full", "lora", "qlora")),
                  seq_len=rng.choice((512, 1024, 4096)))
    target = Target(gpu=resolve_gpu(rng.choice(("H100-80GB", "A100-40GB", "L4", "T4", "RTX-4090"))),
                    gpus_per_node=rng.choice((1, 2, 8)), nodes=1)
    return req, target


def _key(decision):
    return None if decision.chosen is None else (decision.chosen.plan, decision.chosen.tokens_per_second)


def test_the_choice_alone_skips_only_offloading_structures_that_cannot_win():
    """search(explain=False) leaves out the offloading structures whose speed at every micro-batch it could take,
    whatever the memory, does not clear the bar: its choice must be the whole search's, on random requests."""
    rng = random.Random(20261207)
    compared = offload_chosen = 0
    for _ in range(60):
        req, target = _random_request(rng)
        model = resolve_model(req)
        if not structures(req, model, target):
            continue
        full = search(req, model, target)
        alone = search(req, model, target, explain=False)
        assert _key(alone) == _key(full), (req, target.describe())
        compared += 1
        offload_chosen += full.chosen is not None and full.chosen.plan.offload != "none"
    assert compared >= 50 and offload_chosen >= 3  # offload is chosen on some, so the skip is exercised both ways


def test_estimate_speed_reads_no_memory_estimate():
    """The choice-only search estimates an offloading structure's speeds before its memory (_cannot_clear) and the
    scan reuses them: sound only while the speed does not depend on the memory estimate passed to it."""
    rng = random.Random(11)
    for _ in range(30):
        req, target = _random_request(rng)
        model = resolve_model(req)
        plans = structures(req, model, target)
        for s in rng.sample(plans, min(4, len(plans))):
            micro = rng.choice(MICRO_BATCHES)
            p = s.with_(micro_batch=micro, grad_accum=_accumulation(s, micro, 64, None))
            assert estimate_speed(model, p, target, estimate_memory(model, p, target)) == \
                estimate_speed(model, p, target), p.short()


def test_checkpointing_never_speeds_up_a_step():
    """_offload_ruled_out judges a structure with checkpointing by its twin without: sound only while recomputation
    never makes a step faster at the same micro-batch, on every trainer."""
    checked = 0
    for model, target, lighter in sampled_structures(5, 60, 6):
        heavier = lighter.with_(grad_ckpt=True)
        assert (estimate_speed(model, heavier, target).effective_tokens_per_second
                <= estimate_speed(model, lighter, target).effective_tokens_per_second), heavier.short()
        checked += 1
    assert checked == 360


def test_no_plan_the_planner_chooses_is_warned_about_as_an_offload_it_does_not_need():
    """PEFT003 warns about an adapter plan whose optimizer offload the same plan fits without; the planner chooses no
    such plan (ranking.offload_buys_memory, with a memory test the rule's is at least as strict as, and on one GPU
    the ZeRO structures without offload where nothing else fits). The requests above, and random ones with the
    fp16-mixed GPUs (where the plain plan keeps fp32 weights) and one GPU weighted in; decide's findings are what
    `generate` prints."""
    rng = random.Random(31)
    offloading = fallback = 0
    fixed = REQUESTS + NOT_NEEDED + [dict(model="3B", method="lora", gpus=1, gpu="T4"),
                                     dict(model="llama-3.1-8b", trainer="dpo", method="lora", gpus=1, gpu="V100-32GB")]
    randoms = [dict(model=rng.choice(MODELS + ("1B", "3B")), trainer=rng.choice(("sft", "sft", "dpo", "grpo")),
                    method=rng.choice((None, "lora", "qlora")), seq_len=rng.choice((1024, 4096)),
                    gpu=rng.choice(("T4", "V100-32GB", "L4", "RTX-4090", "H200")), gpus=rng.choice((1, 1, 2, 8)))
               for _ in range(30)]
    for fields in fixed + randoms:
        try:
            decision, result = decide(Request(**fields))
        except AdvisorError:
            continue
        plan = decision.chosen.plan
        assert not any(f["id"] == "PEFT003" and f["status"] == "fail" for f in result["findings"]), fields
        offloading += plan.offload != "none"
        fallback += plan.backend == "deepspeed" and plan.offload == "none" and plan.num_processes == 1
    assert offloading >= 2 and fallback >= 1  # both sides of the rule are exercised
