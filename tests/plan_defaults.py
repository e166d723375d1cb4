"""The one default Plan of the test suites: SFT, full fine-tuning, one GPU, bf16, SDPA, gradient checkpointing on.
Each suite's helper overrides the sizes it tests with; a test overrides the knobs it is about."""

from __future__ import annotations

from typing import Any

from advisor.core.plan import Plan

PLAN_DEFAULTS: dict[str, Any] = dict(
    trainer="sft", method="full", lora_r=16, backend="single", zero_stage=0, offload="none", offload_device="cpu",
    precision="bf16", seq_len=1024, micro_batch=4, grad_accum=1, grad_ckpt=True, liger=False, attn="sdpa",
    packing=False, sp_size=1, cp_size=1, num_processes=1, nodes=1, gpus_per_node=1)


def build_plan(**kw: Any) -> Plan:
    return Plan(**{**PLAN_DEFAULTS, **kw})
