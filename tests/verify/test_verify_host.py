"""verify reports this host's dispatch speed: the op time advisor.verify.hostspeed measures (a child Python with the
run's torch) and the files' estimate for that host (advisor.model.speed.host_factor), beside the median host's
prediction the run is judged against. What the probe child prints is parsed strictly; a probe that fails, hangs or
finds no GPU leaves the host unmeasured, and says why."""

from __future__ import annotations

import json
import sys

import pytest
from verify_cases import FakeRun, estimate_of, machine, make_bundle, plan

from advisor.model import speed as S
from advisor.verify import hostspeed as H
from advisor.verify import verify


def _verify(bundle, run, host, **kw):
    return verify(bundle, runner=run, probe=machine(gpus=1), progress=None, random_init=True, synthetic_data=True,
                  full_steps=True, host_speed=(lambda: host) if host is not None else None, **kw)


@pytest.mark.parametrize("line, op", [
    ('{"op_seconds": 1.05e-05, "rounds": [1e-05, 1.1e-05]}', 1.05e-5),
    ('noise\n{"op_seconds": 8e-06}\n', 8e-6),
])
def test_parse_reads_the_last_line(line, op):
    got = H.parse(line)
    assert got.op_seconds == pytest.approx(op) and "us per 1-element CUDA op" in got.detail


@pytest.mark.parametrize("text, why", [
    ("", "printed no result"),
    ("not json", "printed no result"),
    ('{"error": "no CUDA device"}', "no CUDA device"),
    ('{"op_seconds": -1}', "gave no op time"),
    ('{"op_seconds": NaN}', "gave no op time"),
    ('{"op_seconds": true}', "gave no op time"),
    ('{"op_seconds": 5}', "gave no op time"),
    ('[1, 2]', "printed no result"),
])
def test_parse_refuses_what_is_not_an_op_time(text, why):
    got = H.parse(text)
    assert got.op_seconds is None and why in got.detail


def test_measure_reports_why_when_the_child_cannot_run(tmp_path):
    assert "did not start" in H.measure(python=str(tmp_path / "no-python")).detail
    failing = tmp_path / "fail.py"
    failing.write_text("raise SystemExit(4)\n")
    # a python that exits non-zero whatever it is given
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {failing}\n")
    wrapper.chmod(0o755)
    assert H.measure(python=str(wrapper)).detail == "the host probe exited 4"
    slow = tmp_path / "slow"
    slow.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import time; time.sleep(30)'\n")
    slow.chmod(0o755)
    assert "longer than 1 s" in H.measure(python=str(slow), timeout=1).detail


def test_the_probe_code_runs_and_says_why_without_a_gpu():
    pytest.importorskip("torch")
    import torch

    got = H.measure()
    if torch.cuda.is_available():
        assert got.op_seconds is not None and got.op_seconds > 0
    else:
        assert got.op_seconds is None and got.detail == "no CUDA device"


def test_a_measured_host_is_reported_with_its_estimate_beside_the_prediction(tmp_path):
    bundle = make_bundle(tmp_path, plan(micro_batch=1, grad_accum=1, seq_len=512))
    _, nominal = estimate_of(bundle)
    op = 2 * S.REFERENCE_HOST_OP_SECONDS
    out = _verify(bundle, FakeRun(), H.HostSpeed(op, "measured"), steps=8)
    host = out.host
    assert host["op_seconds"] == op and host["reference_op_seconds"] == S.REFERENCE_HOST_OP_SECONDS
    assert host["factor"] == pytest.approx(2 ** S.HOST_FACTOR_EXPONENT, rel=1e-3)
    # the host terms grew, the GPU's did not: slower, by less than the factor
    slower = nominal.tokens_per_second / host["tokens_per_second"]
    assert 1.0 < slower < host["factor"]
    assert host["step_seconds"] == pytest.approx(nominal.step_seconds * slower)
    # the run is still judged against the median host's estimate
    assert out.predicted["tokens_per_second"] == pytest.approx(nominal.tokens_per_second)
    assert out.predicted["source"] == "estimate of the files"
    detail = out.step("speed").detail
    assert f"this host dispatches an op in {op * 1e6:.1f} us" in detail
    assert f"{host['tokens_per_second']:,.0f} tokens/s" in detail
    doc = out.to_json()
    assert doc["host"]["factor"] == host["factor"] and json.dumps(doc)
    assert (bundle / "verify-report.md").read_text().count("Host: its ops dispatch in") == 1


def test_an_unmeasured_host_is_said_so(tmp_path):
    bundle = make_bundle(tmp_path)
    _, nominal = estimate_of(bundle)
    out = _verify(bundle, FakeRun(), H.HostSpeed(None, "no CUDA device"), steps=8)
    assert out.host["factor"] is None and "tokens_per_second" not in out.host
    assert out.predicted["tokens_per_second"] == pytest.approx(nominal.tokens_per_second)
    assert "this host dispatches" not in out.step("speed").detail
    assert "Host: no CUDA device." in (bundle / "verify-report.md").read_text()


def test_dry_run_cpu_run_and_a_given_runner_measure_nothing(tmp_path):
    bundle = make_bundle(tmp_path)
    called = []

    def probe():
        called.append(1)
        return H.HostSpeed(1e-5, "x")

    assert "dry run" in verify(bundle, probe=machine(gpus=1), progress=None, dry_run=True,
                               host_speed=probe).host["detail"]
    cpu = verify(bundle, runner=FakeRun(), probe=machine(gpus=1), progress=None, extra_args=["--cpu"],
                 host_speed=probe)
    assert "--cpu" in cpu.host["detail"]
    assert not called
    given = verify(bundle, runner=FakeRun(), probe=machine(gpus=1), progress=None, write_report=False)
    assert "a runner was given" in given.host["detail"]


def test_host_factor_is_bounded_and_ignores_readings_that_are_not_times():
    from advisor.catalog import resolve_gpu
    from advisor.core.target import Target

    gpu = resolve_gpu("H200-141GB")
    lo, hi = S.HOST_FACTOR_BOUNDS
    for op, want in ((None, 1.0), (0.0, 1.0), (-1e-6, 1.0), (float("nan"), 1.0), (S.REFERENCE_HOST_OP_SECONDS, 1.0),
                     (1e-3, hi), (1e-9, lo)):
        assert S.host_factor(Target(gpu=gpu, gpus_per_node=1, host_op_seconds=op)) == pytest.approx(want)
