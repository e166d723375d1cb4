"""An estimate the model declares an upper bound (Unsloth plans: its kernels are not modelled) is judged one-sided by
verify: a run below the memory band or above the speed band passes with the reason, one on the wrong side still
fails; every other plan is judged in both directions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from advisor.model.calibration import UNSLOTH_UPPER_BOUND
from advisor.verify.outcome import FAIL, PASS, StepResult, VerifyOutcome
from advisor.verify.steps import step_memory, step_speed

GIB = 1 << 30
RAN = StepResult("run", PASS, "ran")
METRICS = SimpleNamespace(on_cpu=False, step_seconds=lambda: [9.0, 8.1, 8.1, 8.2, 8.1])


def _outcome(peak_measured: float, tps_measured: float) -> VerifyOutcome:
    out = VerifyOutcome(bundle="bundle")
    out.predicted = {"per_gpu_peak_bytes": 11.6 * GIB, "tokens_per_second": 9240.0}
    out.measured = {"per_gpu_peak_bytes": peak_measured * GIB, "tokens_per_second": tps_measured,
                    "step_seconds_spread_pct": 0.3, "step_seconds_median": 8.1}
    return out


def _memory(out, bound):
    return step_memory(out, METRICS, RAN, [], real_data_unpacked=False, upper_bound=bound)


def _speed(out, bound):
    return step_speed(out, METRICS, RAN, StepResult("hardware", PASS, "same"), True, None,
                      real_data_unpacked=False, warmup=1, upper_bound=bound)


@pytest.mark.parametrize("bound", [None, UNSLOTH_UPPER_BOUND])
def test_better_than_an_upper_bound_passes_only_for_a_declared_bound(bound):
    # the 2026-12-01 Unsloth run on an H200: 9.0 GiB and 12,081 tokens/s against 11.6 GiB and 9,240 predicted
    out = _outcome(9.0, 12081.0)
    mem, spd = _memory(out, bound), _speed(out, bound)
    if bound:
        assert mem.status == PASS and spd.status == PASS
        assert "upper bound" in mem.detail and "upper bound" in spd.detail
    else:
        assert mem.status == FAIL and "over-predicted" in mem.detail
        assert spd.status == FAIL and "faster than predicted" in spd.detail


@pytest.mark.parametrize("bound", [None, UNSLOTH_UPPER_BOUND])
def test_worse_than_the_estimate_fails_even_under_a_bound(bound):
    out = _outcome(14.5, 6000.0)
    assert _memory(out, bound).status == FAIL
    assert _speed(out, bound).status == FAIL
