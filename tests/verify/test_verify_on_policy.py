"""GKD's short runs draw their own share of on-policy micro-batches (GKDTrainer generates for a micro-batch with
probability lmbda): verify sets each timed step back to the estimate's share by the model's own ratio, so that a run
whose steps match the estimate for the draws they had is judged as matching, and the draws do not count as noise."""

from __future__ import annotations

import pytest
from verify_cases import FakeRun, machine, make_bundle, plan

from advisor.model.gkd import ON_POLICY_SHARE
from advisor.model.speed import estimate_speed
from advisor.verify import verify
from advisor.verify.folder import _load_bundle
from advisor.verify.metrics import Metrics
from advisor.verify.onpolicy import as_average, drawn_counts

GA = 4
COUNTS = (2, 0, 4, 1, 3, 4, 0, 2, 3, 1)
"""Per step, the micro-batches that generated (of GA): every share from none to all."""


def _gkd_bundle(tmp_path, name="bundle"):
    p = plan(trainer="gkd", ref_model="copy", teacher="Qwen/Qwen2.5-1.5B", teacher_params=1543714304,
             grad_accum=GA, micro_batch=4, seq_len=1024)
    return make_bundle(tmp_path, p, name=name)


def _step_at(bundle):
    ctx = _load_bundle(bundle).ctx
    return lambda share: estimate_speed(ctx.model, ctx.plan, ctx.target, on_policy_share=share).step_seconds


def _verify(bundle, run):
    return verify(bundle, runner=run, probe=machine(gpus=1), progress=None, random_init=True, synthetic_data=True,
                  full_steps=True)


def test_steps_that_match_the_estimate_for_their_draws_are_judged_as_matching(tmp_path):
    bundle = _gkd_bundle(tmp_path)
    step_at = _step_at(bundle)
    # the draws move the step: none to all of four micro-batches generating is several times the time
    assert step_at(1.0) > 2 * step_at(0.0)
    times = tuple(step_at(n / GA) for n in COUNTS)
    out = _verify(bundle, FakeRun(step_seconds=times, on_policy=COUNTS))
    warmup = out.measured["step_times"]["warmup_steps"]
    drawn = out.measured["on_policy"]
    assert drawn["micro_batches_per_step"] == list(COUNTS[warmup:])
    assert drawn["step_seconds_as_drawn"] == pytest.approx(list(times[warmup:]))
    assert drawn["adjusted_step_seconds"] == pytest.approx([step_at(None)] * len(COUNTS[warmup:]))
    assert out.error_pct["tokens_per_second"] == pytest.approx(0.0, abs=0.1)
    assert out.measured["step_seconds_spread_pct"] == pytest.approx(0.0, abs=0.1)
    assert out.step("speed").status == "pass"
    assert "GKD generated on-policy" in out.step("speed").detail


def test_a_run_slower_than_its_draws_stays_slower_by_as_much(tmp_path):
    bundle = _gkd_bundle(tmp_path)
    step_at = _step_at(bundle)
    times = tuple(1.3 * step_at(n / GA) for n in COUNTS)
    out = _verify(bundle, FakeRun(step_seconds=times, on_policy=COUNTS))
    assert out.error_pct["tokens_per_second"] == pytest.approx(100 * (1 / 1.3 - 1), abs=0.1)


def test_without_the_counts_the_steps_are_taken_as_drawn(tmp_path):
    bundle = _gkd_bundle(tmp_path)
    step_at = _step_at(bundle)
    times = tuple(step_at(n / GA) for n in COUNTS)
    out = _verify(bundle, FakeRun(step_seconds=times))  # a bundle from before train.py counted them
    assert "on_policy" not in out.measured
    assert out.measured["step_seconds_spread_pct"] > 20


def test_other_trainers_ignore_a_count(tmp_path):
    bundle = make_bundle(tmp_path)  # SFT
    out = _verify(bundle, FakeRun(on_policy=(1,) * 10))
    assert "on_policy" not in out.measured


def test_counts_are_read_per_timed_step_and_refused_when_any_is_missing():
    steps = [{"event": "step", "step": i, "step_seconds": 1.0, "on_policy_micro_batches": n}
             for i, n in enumerate((3, 1, 2, 0), 1)]
    assert drawn_counts(Metrics(ranks={0: steps}), warmup=1) == [1, 2, 0]
    steps[2] = {"event": "step", "step": 3, "step_seconds": 1.0}
    assert drawn_counts(Metrics(ranks={0: steps}), warmup=1) is None
    bad = [{"event": "step", "step": 1, "step_seconds": 1.0, "on_policy_micro_batches": True}]
    assert drawn_counts(Metrics(ranks={0: bad}), warmup=0) is None


def test_as_average_refuses_counts_it_cannot_hold():
    def step_at(share):
        return 1.0 + (ON_POLICY_SHARE if share is None else share)

    assert as_average([2.0], [5], 4, step_at) is None  # more draws than micro-batches
    assert as_average([2.0, 1.0], [1], 4, step_at) is None  # a count short
    got = as_average([2.0, 1.0], [4, 0], 4, step_at)
    assert got["adjusted_step_seconds"] == pytest.approx([1.5, 1.5]) and got["share_drawn"] == 0.5
