"""GKD's step (advisor/model/gkd.py): which micro-batches generate, what the ones that do train on, the loss over the
full logits, GKD's own generate call, and generation without a KV cache under gradient checkpointing. Each term
against the code or the data it was read from."""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import pytest
from model_fixtures import LLAMA_8B, QWEN_05B, make_plan, target

from advisor.model import gkd as MGKD
from advisor.model import speed as S
from advisor.model import units as MU


def _gkd(**kw):
    base = dict(trainer="gkd", ref_model="copy", teacher="Qwen/Qwen2.5-1.5B", teacher_params=1543714304,
                micro_batch=4, grad_accum=4, seq_len=1024, grad_ckpt=False, liger=False)
    return make_plan(**{**base, **kw})


def _speed(model, plan, share=None, tgt=None):
    return S.estimate_speed(model, plan, tgt or target(), on_policy_share=share)


def test_the_default_share_is_the_bundles_lmbda_and_generation_is_linear_in_it():
    plan = _gkd()
    assert MGKD.ON_POLICY_SHARE == 0.5
    default = _speed(QWEN_05B, plan)
    assert default.step_seconds == pytest.approx(_speed(QWEN_05B, plan, MGKD.ON_POLICY_SHARE).step_seconds)
    none, half, every = (_speed(QWEN_05B, plan, s).breakdown.get("generation", 0.0) for s in (0.0, 0.5, 1.0))
    assert none == 0.0 and every > 0 and half == pytest.approx(every / 2)


def test_an_on_policy_micro_batch_trains_on_the_prompt_and_the_tokens_generated():
    plan = _gkd(seq_len=2048)
    assert MGKD.on_policy_prompt_tokens(plan) == 1024  # the row's prompt half (PREFERENCE_COMPLETION_FRACTION)
    assert MGKD.on_policy_seq_len(plan) == 1024 + MU.GKD_MAX_NEW_TOKENS
    every = _speed(QWEN_05B, plan, 1.0).breakdown
    short = _speed(QWEN_05B, plan.with_(seq_len=MGKD.on_policy_seq_len(plan)), 0.0).breakdown
    for part in ("compute", "attention", "elementwise", "reference"):
        assert every[part] == pytest.approx(short[part])
    assert _speed(QWEN_05B, plan, 0.0).breakdown["compute"] > 1.5 * every["compute"]


def test_the_loss_streams_its_counted_bytes_per_logit_element():
    """Two models alike but for the vocabulary: the off-policy step's elementwise time differs by the loss's bytes
    over the extra [tokens, vocab] elements at the loss's streaming rate (the layers' elementwise work does not
    depend on the vocabulary)."""
    plan = _gkd()
    small = replace(QWEN_05B, vocab=32768)
    t = plan.micro_batch * plan.seq_len
    got = _speed(QWEN_05B, plan, 0.0).breakdown["elementwise"] - _speed(small, plan, 0.0).breakdown["elementwise"]
    bw = target().gpu.mem_bw_gbps * 1e9 * MGKD.LOSS_BW_EFFICIENCY
    expected = plan.grad_accum * MGKD.LOSS_BYTES_PER_LOGIT * t * (QWEN_05B.vocab - small.vocab) / bw
    assert got == pytest.approx(expected, rel=1e-6)
    sft = make_plan(trainer="sft", micro_batch=4, grad_accum=4, seq_len=1024, grad_ckpt=False, liger=False)
    sft_gap = (S.estimate_speed(QWEN_05B, sft, target()).breakdown["elementwise"]
               - S.estimate_speed(small, sft, target()).breakdown["elementwise"])
    assert 0 <= sft_gap < got / 20  # SFT's fused head folds each logits tile once: no [tokens, vocab] tensors


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs the [train] extra (trl, torch)")
def test_the_loss_bytes_are_what_trls_code_streams():
    import torch

    from bench.gkd_probe import loss_bytes_per_logit

    counted = loss_bytes_per_logit(torch)
    assert counted["forward"] + counted["backward"] == pytest.approx(MGKD.LOSS_BYTES_PER_LOGIT, abs=1.0)
    assert MGKD.LOSS_FORWARD_SHARE == pytest.approx(counted["forward"] / MGKD.LOSS_BYTES_PER_LOGIT, abs=0.01)
    assert MGKD.LOSS_KERNELS == (counted["forward_kernels"], counted["backward_kernels"])


def test_gkds_generate_call_costs_what_the_decode_probes_measured_not_grpos_round():
    from bench.gkd_probe import generate_fixed_seconds

    median, cases = generate_fixed_seconds()
    assert cases >= 6 and MGKD.GENERATE_CALL_SECONDS == pytest.approx(median, abs=0.005)
    assert MGKD.GENERATE_CALL_SECONDS < S.GENERATE_CALL_SECONDS / 10
    plan = _gkd()
    with pytest.MonkeyPatch.context() as mp:
        before = _speed(QWEN_05B, plan, 1.0).breakdown["generation"]
        mp.setattr(MGKD, "GENERATE_CALL_SECONDS", MGKD.GENERATE_CALL_SECONDS + 1.0)
        after = _speed(QWEN_05B, plan, 1.0).breakdown["generation"]
    assert after - before == pytest.approx(plan.grad_accum * 1.0)  # one call per on-policy micro-batch


def test_under_gradient_checkpointing_gkd_generates_without_a_cache():
    """GKDTrainer's generation config sets use_cache=False when gradient checkpointing is on: each decode step is a
    forward over the whole sequence so far. For an 8B model at 16 rows that forward is GPU-bound, several times the
    cached step."""
    plan = _gkd(micro_batch=16, seq_len=2048)
    cached = _speed(LLAMA_8B, plan, 1.0).breakdown["generation"]
    uncached = _speed(LLAMA_8B, plan.with_(grad_ckpt=True), 1.0).breakdown["generation"]
    assert uncached > 3 * cached
    d = S.dims(LLAMA_8B)
    per_step = S.uncached_decode_seconds(d, LLAMA_8B, plan, target(), S.Precision.of(plan), 16,
                                         MGKD.on_policy_prompt_tokens(plan) + MU.GKD_MAX_NEW_TOKENS / 2)
    assert uncached >= plan.grad_accum * MU.GKD_MAX_NEW_TOKENS * per_step
    # GRPO keeps its cache whatever the checkpointing (its generation config does not switch it off)
    grpo = make_plan(trainer="grpo", micro_batch=16, grad_accum=1, seq_len=1024, max_completion_len=256,
                     num_generations=8, grad_ckpt=False, liger=False)
    assert _speed(LLAMA_8B, grpo).breakdown["generation"] == pytest.approx(
        _speed(LLAMA_8B, grpo.with_(grad_ckpt=True)).breakdown["generation"])


def test_a_short_runs_draws_are_replayed_from_the_trainers_seed():
    """bench.accuracy replays the draws of the GKD records written before train.py counted them: the sequence the
    CPU run of a bundle recorded (tests/generate/test_train_cpu.py: [1, 2] at grad_accum 2)."""
    from bench.accuracy import gkd_drawn_counts

    rec = {"verify": {"measured": {"step_times": {"timed_step_seconds": [1.0, 1.0], "warmup_steps": 0}}}}
    assert gkd_drawn_counts(rec, 2) == [1, 2]
    recorded = {"verify": {"measured": {"on_policy": {"micro_batches_per_step": [0, 4]}}}}
    assert gkd_drawn_counts(recorded, 4) == [0, 4]


def test_the_loss_runs_at_the_bandwidth_the_probe_measured():
    """LOSS_BW_EFFICIENCY is the GPU probe's median over its loss cases, as the trainer runs them (empty_cache()
    included), and no case strays far from it: the rate is one property of these streaming kernels."""
    from bench.gkd_probe import loss_bandwidth_efficiency

    got = loss_bandwidth_efficiency()
    assert got["cases"] >= 6 and MGKD.LOSS_BW_EFFICIENCY == pytest.approx(got["median"], abs=0.005)
    assert got["high"] / got["low"] < 1.2
    assert loss_bandwidth_efficiency(empty_cache=False)["median"] > got["median"]  # the emptied cache costs time


def test_an_image_text_teacher_is_timed_by_its_decoder_and_weighed_with_its_tower():
    # Gemma 3 4B loads a 0.42B SigLIP tower beside its decoder (ModelSpec.vision_params): the memory holds it, the text
    # batch's forward never runs it. The same teacher given as a folder the catalogue does not know, with the decoder's
    # count, is timed alike; its memory lacks the tower.
    from advisor.catalog import resolve_model
    from advisor.model.memory import estimate_memory

    student, teacher = resolve_model("gemma-3-1b"), resolve_model("gemma-3-4b")
    assert teacher.loaded_params - teacher.params == teacher.vision_params > 4e8
    plan = _gkd(teacher=teacher.hf_id, teacher_params=teacher.loaded_params, liger=True)
    assert MGKD.teacher_forward_params(plan) == teacher.params
    decoder_only = replace(plan, teacher="/models/gemma-3-4b-text", teacher_params=teacher.params)
    assert MGKD.teacher_forward_params(decoder_only) == teacher.params
    gpu = dict(share=0.0)  # no on-policy draws: the teacher's forward is what differs
    assert _speed(student, plan, **gpu).step_seconds == pytest.approx(_speed(student, decoder_only, **gpu).step_seconds)
    tower = teacher.vision_params * 2  # bf16 weights
    grown = estimate_memory(student, plan, target()).per_gpu_peak_bytes - \
        estimate_memory(student, decoder_only, target()).per_gpu_peak_bytes
    assert grown >= tower
    # timed as loaded, the tower's parameters would add 10 % to the teacher's forward
    loaded = replace(decoder_only, teacher_params=teacher.loaded_params)
    assert _speed(student, loaded, **gpu).step_seconds > _speed(student, plan, **gpu).step_seconds
