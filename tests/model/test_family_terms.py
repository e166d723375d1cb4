"""The speed terms read off the 2026-12-02 probes of the families beyond Llama/Qwen (bench/results/kernel-probe-h200-
2026-12-02-families.json, optimizer-probe-h200-2026-12-02.json), one test per class: the optimizer step timed apart,
the strided elementwise ops behind fused projections, Gemma-2's soft-capped eager scores, and the MoE sentinel masks
of the transformers release that runs."""

from __future__ import annotations

import copy
import json
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from model_fixtures import make_plan

from advisor.catalog import resolve_gpu, resolve_model
from advisor.core.target import Target
from advisor.model import dims as MD
from advisor.model import speed as S
from bench import kernel_terms as K

REPO = Path(__file__).resolve().parents[2]
OPTIMIZER_PROBE = "bench/results/optimizer-probe-h200-2026-12-02.json"
H200 = Target(gpu=resolve_gpu("H200"), gpus_per_node=1, nodes=1)


def test_the_optimizer_step_is_the_timed_clip_and_adamw():
    probe = json.loads((REPO / OPTIMIZER_PROBE).read_text())
    assert len(probe["cases"]) >= 6 and not any("error" in c for c in probe["cases"])
    errors = {}
    for c in probe["cases"]:
        model, plan, target = K._case_plan(c, probe["versions"])
        d = MD.dims(model)
        assert c["params"] == pytest.approx(d.P, rel=0.01)  # the probe trained the parameters the model counts
        predicted = S.optimizer_step_seconds(d, plan, target, MD.Precision.of(plan))
        errors[c["model"]] = predicted / (c["clip_grad_norm_s"] + c["adamw_fused_step_s"]) - 1
    # within 15 % for every model but Gemma-3-1B (its 340 tensors at 1B parameters: per-tensor work the bandwidth
    # term does not count), and within 10 % at the median; the 16 B per parameter at MEM_BW_EFFICIENCY of before
    # was half the time
    assert all(abs(v) < 0.15 for k, v in errors.items() if not k.startswith("gemma-3")), errors
    assert statistics.median(abs(v) for v in errors.values()) < 0.10, errors
    assert S.OPTIMIZER_BYTES_PER_WEIGHT_BYTE == 3 + 7  # clip_grad_norm_'s norm and scale, fused AdamW's 4 reads 3 writes


def test_the_family_micro_batches_are_the_profiles():
    """Every profiled micro-batch of the families probe, all kernels together, within the band the first probe's
    cases are held to (tests/model/test_kernel_terms.py), predicted for the probe's transformers release."""
    probe = K.load(K.FAMILIES_PROBE)
    rows = K.cases(probe)
    assert {r["model"].split("@")[0] for r in rows} >= {"qwen3-30b-a3b", "mixtral-8x7b", "gemma-2-2b", "gemma-3-1b",
                                                         "phi-3-mini", "mistral-7b-v0.3"}
    for r in rows:
        ratio = r["measured"]["total"] / r["model_s"]["total"]
        assert 0.9 <= ratio <= 1.1, (r["case"], ratio)


def test_the_strided_factor_is_the_phi3_profiles():
    got = K.strided_factor((K.load(), K.load(K.FAMILIES_PROBE)))
    assert abs(S.STRIDED_ELEMENTWISE_FACTOR - got) < 0.01
    # it applies to models with fused projections, without Liger (whose kernels take the strides themselves)
    phi, llama = resolve_model("phi-3-mini"), resolve_model("llama-3.2-1b")
    plain = make_plan(seq_len=1024, micro_batch=8)
    pr = MD.Precision.of(plain)
    old = S.STRIDED_ELEMENTWISE_FACTOR
    try:
        S.STRIDED_ELEMENTWISE_FACTOR = 1.0
        base = {m.id: S.layer_elementwise_bytes(MD.dims(m), plain, pr) for m in (phi, llama)}
        liger = S.layer_elementwise_bytes(MD.dims(phi), replace(plain, liger=True), pr)
    finally:
        S.STRIDED_ELEMENTWISE_FACTOR = old
    assert S.layer_elementwise_bytes(MD.dims(phi), plain, pr) > base[phi.id]
    assert S.layer_elementwise_bytes(MD.dims(llama), plain, pr) == base[llama.id]
    assert S.layer_elementwise_bytes(MD.dims(phi), replace(plain, liger=True), pr) == liger


def test_gemma2_soft_capping_streams_its_scores_three_more_times():
    gemma2 = resolve_model("gemma-2-2b")
    plan = make_plan(seq_len=2048, micro_batch=4, attn="eager")
    d = MD.dims(gemma2)
    capped = S.micro_batch_times(d, gemma2, plan, H200, MD.Precision.of(plan))["attention"]
    uncapped_dims = copy.copy(d)  # dims() is cached: change a copy
    uncapped_dims.attn_softcap = False
    uncapped = S.micro_batch_times(uncapped_dims, gemma2, plan, H200, MD.Precision.of(plan))["attention"]
    assert MD.dims(gemma2).attn_softcap
    scores = plan.micro_batch * gemma2.heads * plan.seq_len ** 2 * gemma2.layers
    # 12 B per score per forward (/ softcap, tanh, * softcap: 2 B read and 2 B written each), 3 passes
    assert capped - uncapped == pytest.approx(3 * 12.0 * scores / S.mem_bw(H200), rel=1e-6)


@pytest.mark.parametrize(("software", "masks"), [({"transformers": "5.17.0"}, True), ({"transformers": "5.24.0"}, False),
                                                 ({}, False), ({"transformers": "6.0.1"}, False),
                                                 ({"transformers": "garbage"}, False), ({"transformers": "5.9"}, True)])
def test_moe_sentinel_masks_follow_the_transformers_release(software, masks):
    target = replace(H200, software=software)
    assert S.moe_sentinel_masks(target) is masks
    moe, dense = resolve_model("qwen3-30b-a3b").with_(layers=8), resolve_model("qwen2.5-7b")
    plan = make_plan(seq_len=1024, micro_batch=8)
    pr = MD.Precision.of(plan)
    for model in (moe, dense):
        d = MD.dims(model)
        got = S.elementwise_seconds(d, plan, target, pr, 8192, 1, 0)
        without = S.elementwise_seconds(d, plan, H200, pr, 8192, 1, 0)
        if model is moe and masks:
            # three masked_fill passes over each routed row: its input and output (hidden) and gate/up (2 x I)
            per_token = 2 * pr.act * d.experts_per_token * (2 * d.h + 2 * d.moe_I)
            passes = 1 + S.ELEMENTWISE_BWD_FACTOR
            assert got - without == pytest.approx(8192 * d.L * per_token * passes / S.elementwise_bw(H200), rel=1e-6)
        else:
            assert got == without


def test_the_late_backward_holds_every_gradient_but_the_first_layers_pending_ones():
    """At the peak inside the first layer's backward its down projection's gradient exists and the rest of its
    gradients do not yet: a large share of a reduced-depth MoE's gradients, a 1/L sliver of a dense model's."""
    from advisor.model import states as MS
    from advisor.model.memory import estimate_memory

    for model_id, layers in (("mixtral-8x7b", 2), ("qwen3-30b-a3b", 8), ("llama-3.1-8b", None)):
        model = resolve_model(model_id)
        model = model.with_(layers=layers) if layers else model
        d = MD.dims(model)
        plan = make_plan(seq_len=4096, micro_batch=2)
        pr = MD.Precision.of(plan)
        pending = MS.first_layer_pending_grad_bytes(d, plan, pr)
        down = (d.num_experts * d.moe_I + d.shared_I) * d.h if d.moe else d.I * d.h
        assert pending == (d.layer - down) * pr.trained
        share = pending / MS.gradient_bytes(d, plan, pr)[0]
        # between half and all of one layer's share of the model's parameters
        assert 0.5 / d.L < share < 1 / d.L, (model_id, share)
        late = estimate_memory(model, plan, H200).detail["phase_late_backward"]
        import advisor.model.memory as MM

        keep = MM.first_layer_pending_grad_bytes
        MM.first_layer_pending_grad_bytes = lambda *_: 0
        try:
            all_grads = estimate_memory(model, plan, H200).detail["phase_late_backward"]
        finally:
            MM.first_layer_pending_grad_bytes = keep
        assert all_grads - late == pending
        # DeepSpeed's gradient buffers exist before the backward, adapters' gradients are small: nothing pending
        assert MS.first_layer_pending_grad_bytes(d, replace(plan, backend="deepspeed", zero_stage=2), pr) == 0
        assert MS.first_layer_pending_grad_bytes(d, replace(plan, method="lora"), pr) == 0
