"""Properties the memory model must have for every plan (hypothesis draws the plans)."""

from __future__ import annotations

import os
from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from model_fixtures import LLAMA_8B, MODELS, QWEN_05B, QWEN_7B, make_plan, target

from advisor.model import activations as MA
from advisor.model import buffers as MB
from advisor.model import dims as MD
from advisor.model import generation as MG
from advisor.model import logits as ML
from advisor.model import states as MS
from advisor.model import units as MU
from advisor.model.memory import estimate_memory

# plans() draws every knob and skips inconsistent combinations by design, so much filtering is expected
SETTINGS = settings(max_examples=int(os.environ.get("MODEL_TEST_EXAMPLES", "150")), deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def plans(draw, *, backends=("single", "ddp", "deepspeed", "fsdp2")):
    trainer = draw(st.sampled_from(["sft", "dpo", "kto", "grpo", "rloo", "gkd"]))
    method = draw(st.sampled_from(["full", "lora", "qlora"]))
    backend = draw(st.sampled_from(backends))
    zero = draw(st.integers(0, 3)) if backend == "deepspeed" else 0
    offload = "none"
    if backend == "deepspeed" and zero >= 1:
        offload = draw(st.sampled_from(["none", "optimizer"] + (["all"] if zero == 3 else [])))
    procs = 1 if backend == "single" else draw(st.sampled_from([1, 2, 4, 8]))
    seq = draw(st.sampled_from([256, 512, 1024, 2048, 4096, 8192]))
    generating = trainer in ("grpo", "rloo")
    vllm = draw(st.sampled_from(["none", "colocate", "server"])) if generating else "none"
    ref = draw(st.sampled_from(["copy", "none", "precompute"])) if trainer in ("dpo", "kto") else (
        draw(st.sampled_from(["copy", "none"])) if trainer in ("grpo", "rloo", "gkd") else "none")
    return make_plan(
        trainer=trainer, method=method, backend=backend, zero_stage=zero, offload=offload,
        precision=draw(st.sampled_from(["bf16", "bf16-mixed", "fp32"])), seq_len=seq,
        micro_batch=draw(st.integers(1, 8)), grad_accum=draw(st.integers(1, 4)), grad_ckpt=draw(st.booleans()),
        liger=draw(st.booleans()), attn=draw(st.sampled_from(["sdpa", "flash_attention_2", "eager"])),
        num_processes=procs, gpus_per_node=procs + (1 if vllm == "server" else 0),
        num_generations=8 if generating else 0, max_completion_len=seq // 2 if generating else 0,
        vllm_mode=vllm, vllm_gpus=1 if vllm == "server" else 0, vllm_mem_fraction=0.3 if vllm == "colocate" else 0.0,
        ref_model=ref, offload_device=draw(st.sampled_from(["cpu", "nvme"])) if offload != "none" else "cpu",
    )


models = st.sampled_from(MODELS)


def est(model, plan):
    return estimate_memory(model, plan, target(plan.gpus_per_node))


@SETTINGS
@given(models, plans())
def test_breakdown_adds_up_and_nothing_is_negative(model, plan):
    m = est(model, plan)
    parts = m.breakdown
    assert sum(parts.values()) == m.per_gpu_peak_bytes
    assert all(v >= 0 for v in parts.values()), parts
    assert all(v >= 0 for k, v in m.detail.items()), m.detail
    assert m.per_gpu_reserved_bytes >= m.per_gpu_peak_bytes
    assert m.host_bytes >= m.pinned_bytes >= 0
    assert m.fits == (m.headroom_bytes >= 0)
    assert all(isinstance(v, int) for v in (*parts.values(), m.per_gpu_peak_bytes, m.per_gpu_reserved_bytes,
                                             m.host_bytes, m.pinned_bytes, m.headroom_bytes))


@SETTINGS
@given(models, plans(), st.sampled_from([2, 4]))
def test_grows_with_seq_len(model, plan, factor):
    longer = replace(plan, seq_len=plan.seq_len * factor, max_completion_len=plan.max_completion_len * factor)
    a, b = est(model, plan), est(model, longer)
    assert b.per_gpu_peak_bytes >= a.per_gpu_peak_bytes
    assert b.per_gpu_reserved_bytes >= a.per_gpu_reserved_bytes


@SETTINGS
@given(models, plans(), st.integers(1, 8))
def test_grows_with_micro_batch(model, plan, extra):
    bigger = replace(plan, micro_batch=plan.micro_batch + extra)
    a, b = est(model, plan), est(model, bigger)
    assert b.per_gpu_peak_bytes >= a.per_gpu_peak_bytes
    assert b.per_gpu_reserved_bytes >= a.per_gpu_reserved_bytes


@SETTINGS
@given(models, plans(backends=("deepspeed",)), st.sampled_from([2, 4, 8]))
def test_zero3_shrinks_with_more_ranks(model, plan, more):
    plan = replace(plan, zero_stage=3)
    wider = replace(plan, num_processes=plan.num_processes * more, gpus_per_node=plan.gpus_per_node * more)
    assert est(model, wider).per_gpu_peak_bytes <= est(model, plan).per_gpu_peak_bytes


@SETTINGS
@given(models, plans())
def test_gradient_checkpointing_reduces_activations(model, plan):
    on, off = replace(plan, grad_ckpt=True), replace(plan, grad_ckpt=False)
    d, pr = MD.dims(model), MD.Precision(plan)
    stack_on, tr_on = MA.activation_bytes(d, on, pr)
    stack_off, tr_off = MA.activation_bytes(d, off, pr)
    assert stack_on + tr_on <= stack_off + tr_off
    assert est(model, on).per_gpu_peak_bytes <= est(model, off).per_gpu_peak_bytes


@SETTINGS
@given(models, plans())
def test_qlora_weights_below_lora_weights(model, plan):
    lora, qlora = est(model, replace(plan, method="lora")), est(model, replace(plan, method="qlora"))
    if plan.backend == "deepspeed" and plan.zero_stage == 3 and plan.offload == "all":
        assert qlora.weights == lora.weights == 0  # every parameter lives on the host
    else:
        assert qlora.weights < lora.weights


@SETTINGS
@given(st.sampled_from([QWEN_05B, QWEN_7B, LLAMA_8B]), plans(backends=("single", "ddp", "deepspeed")))
def test_lora_below_full(model, plan):
    # LoRA keeps fp32 copies of every adapted Linear's input (PEFT casts to the fp32 adapter dtype) and a dropout mask,
    # so on a tiny model with a huge micro-batch and no checkpointing its activations can outweigh the 6-16 B/param
    # of states full fine-tuning adds (only its 2 B/param of grads when the optimizer is offloaded). Below 16k tokens
    # per micro-batch with checkpointing and the optimizer on the GPU, LoRA must cost less.
    assume(plan.grad_ckpt and MA.local_tokens(plan) <= 16384 and plan.offload == "none")
    full = est(model, replace(plan, method="full"))
    lora = est(model, replace(plan, method="lora"))
    assert lora.per_gpu_peak_bytes < full.per_gpu_peak_bytes


def test_zero3_model_states_scale_one_over_n():
    # ZeRO-3 partitions params, grads and optimizer states: on 8 GPUs each holds 1/8 of what one GPU holds, and the
    # gathered-layer / bucket terms do not change with N. (The step's transient covers one optimizer sub-group of at
    # most 1e9 partition elements, so it stops growing past that: compared apart.)
    d = MD.dims(LLAMA_8B)
    one = make_plan(backend="deepspeed", zero_stage=3, num_processes=1)
    eight = replace(one, num_processes=8, gpus_per_node=8)
    states, steps = [], []
    for p in (one, eight):
        pr = MD.Precision(p)
        g_full, _, g_step = MS.gradient_bytes(d, p, pr)
        states.append(MS.weight_bytes(d, p, pr) + g_full - g_step + MS.optimizer_bytes(d, p, pr))
        steps.append(g_step)
    assert abs(states[1] - states[0] / 8) <= 8
    assert steps == [6 * MU.DS_SUB_GROUP_SIZE, 6 * min(LLAMA_8B.params // 8, MU.DS_SUB_GROUP_SIZE)]
    pr = MD.Precision(one)
    assert MB.zero3_live_param_bytes(d, one, pr) == MB.zero3_live_param_bytes(d, eight, pr)
    assert MB.zero_bucket_bytes(d, one, pr) == MB.zero_bucket_bytes(d, eight, pr)
    # and relative to ZeRO-0 on one GPU (20 B/param with BF16_Optimizer's fp32 grad buffer): 16/20 x 1/8 (ZeRO-3
    # keeps 16-bit params, 16-bit grads, fp32 master and Adam moments)
    zero0 = replace(one, zero_stage=0)
    pr0 = MD.Precision(zero0)
    s0 = MS.weight_bytes(d, zero0, pr0) + MS.gradient_bytes(d, zero0, pr0)[0] + MS.optimizer_bytes(d, zero0, pr0)
    assert abs(states[1] / s0 - 16 / 20 / 8) < 1e-6


def test_deepspeed_keeps_fp32_states_whatever_the_model_dtype():
    d = MD.dims(QWEN_7B)
    for precision in ("bf16", "bf16-mixed"):
        p = make_plan(backend="deepspeed", zero_stage=2, precision=precision)
        assert MS.optimizer_bytes(d, p, MD.Precision(p)) == 12 * QWEN_7B.params
        assert MS.weight_bytes(d, p, MD.Precision(p)) == 2 * QWEN_7B.params


def test_precision_bytes_per_param_match_the_contract():
    # CONTRACT.md: bf16 = 2 + 2 + 4 bytes/param (HF Trainer, no master); bf16-mixed and fp32 = 4 + 4 + 8.
    d = MD.dims(QWEN_05B)
    for precision, expected in (("bf16", (2, 2, 4)), ("bf16-mixed", (4, 4, 8)), ("fp16-mixed", (4, 4, 8)),
                                ("fp32", (4, 4, 8))):
        p = make_plan(precision=precision)
        pr = MD.Precision(p)
        got = (MS.weight_bytes(d, p, pr), MS.gradient_bytes(d, p, pr)[0], MS.optimizer_bytes(d, p, pr))
        assert got == tuple(e * QWEN_05B.params for e in expected), precision


def test_lora_adapters_fp32_on_a_bf16_base():
    # PEFT 0.21 autocast_adapter_dtype=True: adapters (and so their grads and Adam states) in fp32 on a bf16 base;
    # QLoRA adapters are cast to bf16 by TRL.
    d = MD.dims(QWEN_7B)
    lora_n = QWEN_7B.lora_params(16)
    p = make_plan(method="lora")
    pr = MD.Precision(p)
    assert MS.weight_bytes(d, p, pr) == 2 * QWEN_7B.params + 4 * lora_n
    assert MS.gradient_bytes(d, p, pr)[0] == 4 * lora_n
    assert MS.optimizer_bytes(d, p, pr) == 8 * lora_n
    q = make_plan(method="qlora")
    assert MS.optimizer_bytes(d, q, MD.Precision(q)) == 4 * lora_n


def test_dpo_doubles_tokens_and_adds_a_reference_copy():
    sft = make_plan(seq_len=2048, micro_batch=2)
    dpo = replace(sft, trainer="dpo", ref_model="copy")
    assert MA.local_tokens(dpo) == 2 * MA.local_tokens(sft)
    m = est(QWEN_7B, dpo)
    assert m.detail["reference_model"] == 2 * QWEN_7B.params  # bf16 copy, no grads
    peft = est(QWEN_7B, replace(dpo, method="lora", ref_model="none"))
    assert peft.detail["reference_model"] == 0  # the adapter is disabled instead
    assert est(QWEN_7B, replace(dpo, ref_model="precompute")).per_gpu_peak_bytes < m.per_gpu_peak_bytes


def test_grpo_generation_batch_and_vllm_colocate():
    # GRPOConfig: steps_per_generation = gradient_accumulation_steps; each GPU generates mb x ga completions at once.
    p = make_plan(trainer="grpo", micro_batch=8, grad_accum=4, seq_len=2048, max_completion_len=1024,
                  num_generations=8)
    assert MG.generation_batch(p) == 32
    m = est(QWEN_7B, p)
    assert m.detail["phase_generation"] > 0
    colo = est(QWEN_7B, replace(p, vllm_mode="colocate", vllm_mem_fraction=0.3))
    assert colo.detail["vllm_colocate"] == int(0.3 * target().gpu_memory_bytes)
    assert "phase_generation" not in colo.detail  # vLLM generates: no HF KV cache in the training process


def test_sequence_parallel_divides_activations():
    base = make_plan(backend="deepspeed", zero_stage=3, num_processes=8, seq_len=32768, micro_batch=1)
    sp = replace(base, sp_size=4)
    d = MD.dims(LLAMA_8B)
    a = sum(MA.activation_bytes(d, base, MD.Precision(base)))
    b = sum(MA.activation_bytes(d, sp, MD.Precision(sp)))
    assert abs(b / a - 0.25) < 0.01


def test_liger_reduces_activations():
    d = MD.dims(QWEN_7B)
    p = make_plan(grad_ckpt=False, seq_len=4096, micro_batch=2)
    assert sum(MA.activation_bytes(d, replace(p, liger=True), MD.Precision(p))) < \
        sum(MA.activation_bytes(d, p, MD.Precision(p)))
    # Liger does not touch the LM head term: TRL forces fused_linear_cross_entropy=False
    assert ML.logits_bytes(d, replace(p, liger=True), MD.Precision(p)) == ML.logits_bytes(d, p, MD.Precision(p))


def test_offload_moves_optimizer_to_host():
    p = make_plan(backend="deepspeed", zero_stage=3, num_processes=8)
    off = replace(p, offload="optimizer")
    allo = replace(p, offload="all")
    a, b, c = est(LLAMA_8B, p), est(LLAMA_8B, off), est(LLAMA_8B, allo)
    assert b.optimizer == 0 and c.optimizer == 0
    assert c.per_gpu_peak_bytes < b.per_gpu_peak_bytes < a.per_gpu_peak_bytes
    assert c.host_bytes > b.host_bytes > a.host_bytes
    assert b.pinned_bytes > 0
