"""--dry-run, the reports written into the bundle, Ctrl-C and SIGTERM during the run, and the live status."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
from verify_cases import FakeRun, machine, make_bundle, plan

from advisor.cli import main as cli_main
from advisor.core.errors import ExitCode
from advisor.verify import verify
from advisor.verify.progress import status_reader


def _verify(bundle, run=None, **kw):
    kw.setdefault("random_init", True)
    kw.setdefault("synthetic_data", True)
    return verify(bundle, runner=run or FakeRun(), probe=machine(gpus=1), progress=None, **kw)


# ----------------------------------------------------------------------------------------------------- dry run

def test_dry_run_says_what_it_would_run_and_starts_nothing(tmp_path):
    bundle = make_bundle(tmp_path, plan(micro_batch=8, seq_len=4096, grad_accum=64, grad_ckpt=False))
    before = sorted(p.name for p in bundle.iterdir())
    run = FakeRun()
    outcome = _verify(bundle, run, dry_run=True)
    assert run.calls == [] and sorted(p.name for p in bundle.iterdir()) == before  # nothing written
    detail = outcome.step("run").detail
    assert detail.startswith("dry run: would run `PYTHONUNBUFFERED=1 STOP_TIMEOUT=25 bash launch.sh --max-steps ")
    assert "--random-init --synthetic-data --metrics-dir" in detail
    assert f"CONFIG grad_accum 64 -> {outcome.quick['grad_accum']}" in detail
    assert outcome.step("memory").detail.startswith("dry run: would compare the peak per GPU")
    from advisor.verify.limits import SPEED_TOLERANCE_PCT

    assert f"tolerance +-{SPEED_TOLERANCE_PCT:.0f} % + the run's spread" in outcome.step("speed").detail
    assert outcome.step("preflight").status == "pass"  # the checks that start nothing are made
    assert outcome.summary().startswith("Dry run: nothing was started.")


def test_cli_dry_run_exits_0_even_where_nothing_could_run(tmp_path, capsys, monkeypatch):
    import advisor.verify as v

    bundle = make_bundle(tmp_path)
    real = v.verify
    calls = []
    monkeypatch.setattr(v, "verify", lambda d, **kw: real(d, probe=machine("no_gpu"), runner=calls.append,
                                                          progress=None, **kw))
    assert cli_main(["verify", str(bundle), "--dry-run"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "would run `PYTHONUNBUFFERED=1 STOP_TIMEOUT=25 bash launch.sh" in out and "no GPU on this machine" in out
    assert calls == []
    # "[ 9/10]" and "[10/10]": the counters are as wide as the total, so the step titles line up
    counters = [ln[:ln.index("]") + 1] for ln in out.splitlines() if ln.startswith("[")]
    assert len(counters) >= 10 and counters[-1] == f"[{len(counters)}/{len(counters)}]"
    assert len({len(c) for c in counters}) == 1, counters


# ------------------------------------------------------------------------------------------------------ reports

def test_reports_are_written_into_the_bundle(tmp_path):
    bundle = make_bundle(tmp_path)
    outcome = _verify(bundle, full_steps=True)
    doc = json.loads((bundle / "verify-report.json").read_text())
    assert doc["passed"] == outcome.passed and [s["name"] for s in doc["steps"]][-1] == "loss"
    md = (bundle / "verify-report.md").read_text()
    assert md.startswith("# trl-advisor verify: passed") and "| Memory | ✓ pass |" in md
    assert outcome.reports == [str(bundle / "verify-report.json"), str(bundle / "verify-report.md")]


def test_a_symlink_in_place_of_a_report_is_not_followed(tmp_path):
    bundle = make_bundle(tmp_path)
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (bundle / "verify-report.md").symlink_to(target)
    outcome = _verify(bundle, full_steps=True)
    assert target.read_text() == "keep me\n"
    assert any(r.startswith("not written") and "symlink" in r for r in outcome.reports)


# ------------------------------------------------------------------------------------------------- interrupts

class _Interrupted(FakeRun):
    """Writes two steps of metrics, then is stopped by Ctrl-C."""

    def __call__(self, command, **kw):
        super().__call__([*command[:2], "--max-steps", "2", *command[4:]], **kw)
        raise KeyboardInterrupt


def test_ctrl_c_during_the_run_still_reports(tmp_path, capsys, monkeypatch):
    bundle = make_bundle(tmp_path)
    outcome = _verify(bundle, _Interrupted(), full_steps=True)
    run = outcome.step("run")
    assert outcome.interrupted and not outcome.passed
    assert run.status == "fail" and run.detail.startswith("interrupted (Ctrl-C) after 2 of 10 steps")
    assert json.loads((bundle / "verify-report.json").read_text())["interrupted"] is True
    assert outcome.measured["steps"] == 2  # what ran is still read
    import advisor.verify as v

    real = v.verify
    monkeypatch.setattr(v, "verify", lambda d, **kw: real(d, probe=machine(gpus=1), runner=_Interrupted(),
                                                          progress=None, **kw))
    assert cli_main(["verify", str(bundle), "--full-steps"]) == 130
    assert "Interrupted (Ctrl-C)" in capsys.readouterr().out


def test_sigterm_stops_the_run_like_ctrl_c(tmp_path):
    bundle = make_bundle(tmp_path)

    def slow(command, **kw):
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        time.sleep(5)  # interrupted by the handler verify installs
        raise AssertionError("SIGTERM did not stop the run")

    outcome = _verify(bundle, slow, full_steps=True)
    assert outcome.interrupted and outcome.step("run").detail.startswith("interrupted")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored after the run


# ------------------------------------------------------------------------------------------------------ status

def test_status_says_phase_step_and_peak(tmp_path):
    folder = tmp_path / "metrics"
    status = status_reader(folder, 6, warmup=1)
    assert status().startswith("starting")
    folder.mkdir()
    rank = folder / "rank0.jsonl"
    rank.write_text(json.dumps({"event": "start", "device": "cuda:0", "peak_allocated_bytes": 1 << 30}) + "\n")
    assert status() == "step 0 of 6 (warm-up), peak 1.0 GiB so far"
    with rank.open("a") as fh:
        for i in (1, 2):
            fh.write(json.dumps({"event": "step", "step": i, "step_seconds": 1.5 * i,
                                 "peak_allocated_bytes": (40 + i) << 30}) + "\n")
    assert status() == "step 2 of 6 (timed), peak 42.0 GiB so far, last step 3.00 s"
    with rank.open("a") as fh:
        fh.write(json.dumps({"event": "end", "step": 2}) + "\n")
    assert status().startswith("finishing")


@pytest.mark.skipif(os.name != "posix", reason="process groups")
def test_the_runner_prints_each_new_status_on_a_log_stream(tmp_path, monkeypatch):
    import io

    from advisor.verify import runner
    from advisor.verify.runner import run_command

    monkeypatch.setattr(runner, "PROGRESS_POLL_SECONDS", 0.05)

    stream = io.StringIO()
    states = iter(["starting", "step 1 of 2", "step 1 of 2", "step 2 of 2"])
    run_command(["bash", "-c", "sleep 1"], cwd=tmp_path, log_path=tmp_path / "log", progress=stream,
                status=lambda: next(states, "step 2 of 2"))
    lines = [ln for ln in stream.getvalue().splitlines() if ln.startswith("verify: ")]
    assert lines[:3] == ["verify: starting", "verify: step 1 of 2", "verify: step 2 of 2"]
    assert len(lines) == 3  # each status once, as it changes
