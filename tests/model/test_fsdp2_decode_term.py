"""FSDP2's per-module cost in transformers' generate is the probe's figure, and the speed model counts it where an
FSDP2 plan generates without vLLM, never elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.catalog import resolve_gpu, resolve_model
from advisor.core.plan import Plan
from advisor.core.target import Target
from advisor.model import speed as S
from advisor.model.estimate import estimate_plan
from bench.decode_probe import fsdp2_module_seconds

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "bench/results/decode-probe-fsdp2-h100-2026-12-07.json"


def test_the_constant_is_the_probes():
    derived = fsdp2_module_seconds(json.loads(PROBE.read_text()), S.REFERENCE_HOST_OP_SECONDS)
    assert S.FSDP2_DECODE_MODULE_SECONDS == pytest.approx(derived, rel=0.005)


def _plan(**kw) -> Plan:
    base = dict(trainer="rloo", method="full", lora_r=16, backend="single", zero_stage=0, offload="none",
                offload_device="cpu", precision="bf16",
                seq_len=512, micro_batch=64, grad_accum=1, grad_ckpt=False, liger=False, attn="sdpa",
                packing=False, sp_size=1, cp_size=1, num_processes=1, nodes=1, gpus_per_node=1,
                num_generations=2, max_completion_len=128, vllm_mode="none", vllm_gpus=0, vllm_mem_fraction=0.0,
                ref_model="copy")
    return Plan(**{**base, **kw})


def test_an_fsdp2_plan_generating_without_vllm_pays_per_module_and_decode_step():
    model = resolve_model("qwen2.5-0.5b")
    target = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=1, nodes=1)
    _, single = estimate_plan(model, _plan(), target)
    _, fsdp2 = estimate_plan(model, _plan(backend="fsdp2"), target)
    floor = 128 * (model.layers + 1) * S.FSDP2_DECODE_MODULE_SECONDS  # 128 decode steps, 25 modules
    assert fsdp2.step_seconds - single.step_seconds >= 0.9 * floor
    # SFT under FSDP2 does not generate: no such term
    _, sft = estimate_plan(model, _plan(trainer="sft", backend="fsdp2", num_generations=0, max_completion_len=0,
                                        ref_model="none"), target)
    _, sft_single = estimate_plan(model, _plan(trainer="sft", num_generations=0, max_completion_len=0,
                                               ref_model="none"), target)
    assert abs(sft.step_seconds - sft_single.step_seconds) < floor / 4
