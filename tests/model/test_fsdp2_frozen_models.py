"""A reference or teacher under FSDP2 (advisor/model/buffers.py fsdp2_frozen_gather_bytes, fsdp2_precompute_bytes):
TRL shards it with prepare_fsdp, fully_shard on the root module only (trl/models/utils.py), so each of its forwards
gathers the whole model on every GPU; DPO/KTO's precompute under FSDP loads a whole reference of its own before the
policy reaches the GPU. Held against the ZeRO-3 twin, whose reference is gathered a module at a time."""

from __future__ import annotations

import pytest
from model_fixtures import QWEN_7B, make_plan, target

from advisor.model import buffers as MB
from advisor.model.dims import Precision, dims
from advisor.model.memory import estimate_memory

GPUS = 8


def _plan(trainer: str, ref_model: str, backend: str = "fsdp2", **kw):
    extra = {"zero_stage": 3} if backend == "deepspeed" else {}
    return make_plan(trainer=trainer, ref_model=ref_model, method="full", backend=backend, num_processes=GPUS,
                     seq_len=1024, micro_batch=2, grad_ckpt=True, liger=False, **extra, **kw)


def _whole(plan) -> int:
    return (QWEN_7B.params + QWEN_7B.vision_params) * Precision.of(plan).load


@pytest.mark.parametrize("trainer", ["dpo", "kto"])
def test_a_copied_reference_is_gathered_whole_for_its_forward(trainer):
    fsdp, zero3 = _plan(trainer, "copy"), _plan(trainer, "copy", backend="deepspeed")
    d = dims(QWEN_7B)
    assert MB.fsdp2_frozen_gather_bytes(d, fsdp, Precision.of(fsdp)) == _whole(fsdp)
    assert MB.fsdp2_frozen_gather_bytes(d, zero3, Precision.of(zero3)) == 0
    forward = MB.reference_forward_transient(d, fsdp, Precision.of(fsdp))
    assert forward >= _whole(fsdp)
    # the gathered reference sits on the policy's saved activations: at least that much above what the shard alone
    # would give
    est = estimate_memory(QWEN_7B, fsdp, target(GPUS))
    assert est.per_gpu_peak_bytes >= est.detail["reference_model"] + _whole(fsdp)


def test_no_reference_no_gather():
    d = dims(QWEN_7B)
    for plan in (_plan("dpo", "precompute"), _plan("dpo", "none"), make_plan(backend="fsdp2", num_processes=GPUS)):
        assert MB.fsdp2_frozen_gather_bytes(d, plan, Precision.of(plan)) == 0


@pytest.mark.parametrize("trainer", ["dpo", "kto"])
def test_the_precompute_under_fsdp2_holds_a_whole_reference_before_training(trainer):
    plan = _plan(trainer, "precompute")
    est = estimate_memory(QWEN_7B, plan, target(GPUS))
    whole = _whole(plan)
    assert est.detail["phase_scoring"] >= whole + whole // GPUS
    assert est.per_gpu_peak_bytes >= est.detail["phase_scoring"]
    # ZeRO-3 precomputes with the partitioned policy: no such phase
    zero3 = estimate_memory(QWEN_7B, _plan(trainer, "precompute", backend="deepspeed"), target(GPUS))
    assert "phase_scoring" not in zero3.detail


def test_a_grpo_kl_reference_is_gathered_whole_when_scoring():
    with_ref = _plan("grpo", "copy", num_generations=8, max_completion_len=256)
    est = estimate_memory(QWEN_7B, with_ref, target(GPUS))
    assert est.detail["phase_scoring"] >= est.detail["reference_model"] + _whole(with_ref)
