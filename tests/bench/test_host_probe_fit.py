"""bench.accuracy.host_probe_fit: how records follow their host's measured op time. On records built so that the
host-bound part of each step scales exactly with the op time, the within-configuration slope is the host-bound
share and scaling the prediction by it leaves no error; on records that ignore the host, the slope is 0 and scaling
makes the errors larger, not smaller."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench import accuracy as A

OPS = (6e-6, 8e-6, 10e-6, 12e-6)


def _records(share: float, follows: bool, name: str):
    e = SimpleNamespace(run=SimpleNamespace(name=name), host_share=share, pred_step=1.0)
    ref = 9e-6  # the median of OPS
    # the prediction for each record's host: the host-bound share scaled by op / ref (what host_factor does)
    return [(e, (1 + share * (op / ref - 1)) if follows else 1.0, op, 1 + share * (op / ref - 1), f"round-{k}.jsonl")
            for k, op in enumerate(OPS)]


def test_records_that_follow_the_host_give_the_share_as_slope_and_no_error_once_scaled():
    records = [r for share in (0.9, 0.1, 0.5) for k in (1, 2) for r in _records(share, True, f"{share}-{k}")]
    fit = A.host_probe_fit(records)
    assert fit["reference_op_s"] == pytest.approx(9e-6)
    slopes = {b["band"]: b["slope"] for b in fit["bands"]}
    # d log(1 + s (x - 1)) / d log x is about s near x = 1: the band's slope sits close to its share
    assert slopes[(0.7, 1.01)] == pytest.approx(0.9, abs=0.08)
    assert slopes[(0.0, 0.3)] == pytest.approx(0.1, abs=0.02)
    assert all(b["r"] > 0.99 for b in fit["bands"])
    assert fit["errors"]["scaled"]["worst"] == pytest.approx(0.0, abs=1e-12)
    assert fit["errors"]["as is, host"]["median"] > 0.05
    # each op time is its own round here, holding the four configurations at least half host-bound: the scaled
    # prediction is exact in every round, the median host's in none (no round's op time is the median)
    assert fit["rounds"] == 4 and fit["rounds_better"] == 4 and fit["rounds_worse_most"] < 0


def test_records_that_ignore_the_host_get_worse_when_scaled():
    fit = A.host_probe_fit(_records(0.9, False, "a") + _records(0.8, False, "b"))
    assert fit["errors"]["as is"]["worst"] == 0.0
    assert fit["errors"]["scaled"]["median"] > 0.0
    assert not fit["bands"]  # no spread in the steps: no correlation to report


def test_the_committed_records_follow_their_host_and_the_term_helps_the_host_bound_ones():
    from advisor.model import speed as S

    rows = A.build().rows
    fit = A.host_probe_fit(A.probed_records(rows))
    top = next(b for b in fit["bands"] if b["band"][0] == 0.7)
    assert top["records"] >= 30 and top["r"] > 0.5
    # the reference host the speed model's constants stand for is the records' median (3 significant digits)
    assert S.REFERENCE_HOST_OP_SECONDS == float(f"{fit['reference_op_s']:.3g}")
    # the exponent is the most host-bound band's measured slope, rounded to 0.05
    assert abs(S.HOST_FACTOR_EXPONENT - top["slope"]) <= 0.025
    e = fit["errors"]
    for kind in ("median", "p90", "worst"):
        assert e["scaled, host"][kind] <= e["as is, host"][kind], kind
        assert e["scaled"][kind] <= e["as is"][kind], kind
    # but not round by round: which is why verify reports the host's figure rather than judging by it
    assert fit["rounds"] >= 10 and 0 < fit["rounds_better"] < fit["rounds"]
