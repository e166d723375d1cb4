"""How candidates that fit are weighed against each other: the margins a plan must win by, and the order among the
plans that keep everything on the GPUs. The choice itself, with the rules checked lazily, is advisor.search.planner's
_choose; the explanation (advisor.search.explain) quotes these figures."""

from __future__ import annotations

import math

from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.resolve import METHOD_ORDER
from advisor.search.candidates import Candidate

COMPLEXITY_MARGIN = {"single": 0.0, "ddp": 0.0, "fsdp2": 0.03, "deepspeed": 0.05}
"""A sharded backend must predict this much more tokens/s than a plain one to be chosen: it adds a dependency and
JIT-built ops (DeepSpeed's FusedAdam/CPUAdam), and the speed model's own error (docs/accuracy.md) is of this order."""


LIGER_MARGIN = 0.03
"""Liger must predict 3% more tokens/s to be chosen unpinned: it adds a dependency and Triton kernels compiled at the
first step, for a gain the speed model predicts within its own error (docs/accuracy.md)."""


OFFLOAD_MARGIN = 0.10
"""An offloading plan replaces the best plan that keeps everything on the GPUs only when its score (tokens/s after the
backend's and Liger's margins, `score`) is more than 10 % higher; within that, the plan on the GPUs is kept.

Offload can win: the GPU memory it frees lets a larger micro-batch fit (Qwen2.5-7B full fine-tuning on 8 x RTX-4090:
ZeRO-3 holds micro-batch 4 with 2 accumulation steps, about 6,700 tokens/s predicted; with the parameters and
optimizer states on the host micro-batch 8 fits, about 9,300). But its step adds DeepSpeed's CPU optimizer step and
the PCIe copies, which follow the host's CPUs, memory and link, not the GPU the speed model is calibrated on: held out
by host, that term predicts the offload records with a median |error| of 8.5 % (56 records, docs/accuracy.md
"DeepSpeed's CPU optimizer step"), twice the 3.7-4.0 % median step-time error over all runs (docs/accuracy.md,
summary), and a catalogue target's host is not known at all. A predicted gain inside that error does not pay for the
host RAM, pinned memory and host dependency an offload brings; 10 % is that 8.5 % rounded up. It applies on top of
COMPLEXITY_MARGIN: an offload runs on DeepSpeed or FSDP2.

The margin is not enough on its own: the offload must also free memory the plan needs (`offload_buys_memory`)."""


def discount(plan: Plan, req: Request) -> float:
    """The share of its predicted tokens/s a plan is ranked by: less the backend's complexity margin and, where Liger
    is the planner's choice rather than the user's, Liger's."""
    kept = 1.0 - COMPLEXITY_MARGIN.get(plan.backend, 0.0)
    if plan.liger and req.liger is None:
        kept *= 1.0 - LIGER_MARGIN
    return kept


def score(c: Candidate, req: Request) -> float:
    """Predicted tokens/s (the run's, one-off work included: Candidate.tokens_per_second) times `discount`."""
    return c.tokens_per_second * discount(c.plan, req)


def rank_key(c: Candidate, req: Request):
    """The order among the plans that keep everything on the GPUs: the most faithful method unless --method is pinned
    (full, then LoRA, then QLoRA: LoRA is always faster and smaller than full training, so ranking methods by speed
    alone would never train all weights), then `score`."""
    method_rank = METHOD_ORDER.index(c.plan.method) if not req.method else 0
    return (method_rank, -score(c, req))


def may_replace(method: str, on_gpu: Candidate, req: Request) -> bool:
    """Whether an offloading plan of `method` may replace `on_gpu`, the plan chosen among those on the GPUs: only
    if its method is at least as faithful (with --method pinned there is one method). A LoRA plan by offload never
    replaces a full fine-tune that fits on the GPUs, whatever its speed, just as a LoRA plan on the GPUs would not;
    a full fine-tune by offload may replace a LoRA plan on the GPUs, when it clears `offload_bar`."""
    return bool(req.method) or METHOD_ORDER.index(method) <= METHOD_ORDER.index(on_gpu.plan.method)


def offload_bar(on_gpu: Candidate | None, req: Request) -> float:
    """The `score` an offloading plan must exceed to be chosen: OFFLOAD_MARGIN above the plan on the GPUs; -inf (any
    offloading plan may be chosen) when no plan fits without offload."""
    return -math.inf if on_gpu is None else (1.0 + OFFLOAD_MARGIN) * score(on_gpu, req)


def offload_needs(plan: Plan, on_gpu: Candidate, req: Request) -> float:
    """The predicted tokens/s an offloading plan of this backend (and Liger choice) needs to replace `on_gpu`: more
    than this."""
    return offload_bar(on_gpu, req) / discount(plan, req)


def offload_buys_memory(c: Candidate) -> bool:
    """The second condition on an offloading plan that replaces the best plan on the GPUs, after OFFLOAD_MARGIN: its
    twin without offload (the same plan with offload "none": same backend and ZeRO stage, method, micro-batch and
    accumulation, checkpointing, Liger, parallelism and GPUs; `c.without_offload`, which the planner sets first,
    advisor.search.planner._without_offload) does not fit within the planner's limit (its error margin kept), or is
    refused by a rule.

    Offload exists to free GPU memory. Where the twin fits, the offload frees memory nothing uses, and a gain
    predicted over the plan on the GPUs comes from something else; it did: a 1B LoRA on one H200 by ZeRO-2 + optimizer
    offload was predicted 66,452 tokens/s against 56,452 for the plain plan at the same micro-batch 64, from the speed
    model's DeepSpeed 16-bit adapter path, while the adapter's optimizer states it moved are 129 MiB of the 119 GiB
    the plan reserves; and ZeRO-2 LoRA without offload measured no faster than the plain plan on one H200 (9,810 vs
    9,848 tokens/s, docs/plan-quality.md "dpo-7b-lora"; the reason advisor.search.candidates offers ZeRO on one GPU
    only with an offload). Rule PEFT003 warns about an adapter plan whose twin fits, with a memory test at least as
    strict (rules/peft_quant.py): no plan the planner chooses is warned about. When no plan fits on the GPUs there is
    nothing to replace and offloading plans compete on `score` alone (planner._choose); an offloading plan whose twin
    fits is then never the only kind left, since the twin's structure is searched (on several GPUs it is one of the
    candidates; on one, candidates.zero_without_offload)."""
    return bool(c.without_offload.rejected_because)
