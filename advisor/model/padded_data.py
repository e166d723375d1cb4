"""The plan's memory for a dataset whose rows differ in length.

A plan is estimated for rows of seq_len tokens without an attention mask: what the calibration benchmark and
`verify --synthetic-data` run, and what packing gives. A real dataset of SFT, DPO, KTO or GKD rows of different
lengths, without packing, is padded to each batch's longest row and its attention mask goes to the model; under
plain SDPA transformers then builds a [rows, 1, s, s] mask that torch turns into a float bias on every layer and
repeats K/V to every query head (activations.sdpa_masked_fraction). The bundles' README states this figure next to
the plan's, so a run on real data is not a surprise.
"""

from __future__ import annotations

from advisor.core.plan import Plan
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.model import activations as MA
from advisor.model.memory import MemoryEstimate, estimate_memory

DATASET_TRAINERS = ("sft", "dpo", "kto", "gkd")
"""Trainers whose batches come from the dataset's rows (GRPO/RLOO's plans are estimated padded already)."""


def padded_data_memory(model: ModelSpec, plan: Plan, target: Target) -> MemoryEstimate | None:
    """The plan's memory estimate with every batch padded, or None where padding changes nothing the estimate counts:
    another trainer, packing (padding-free), or an attention kernel that unpads (FlashAttention) or always has its
    mask (eager)."""
    if plan.trainer not in DATASET_TRAINERS or plan.packing or plan.attn != "sdpa":
        return None
    with MA.padded_batches():
        return estimate_memory(model, plan, target)
