"""`advisor.verify` with generated bundles and fake runs: the ordered steps, the comparison with the estimate of the
files as they are on disk, the tolerances, the JSON contract."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from verify_cases import (
    GIB,
    OOM_LOG,
    TRACEBACK_LOG,
    FakeRun,
    estimate_of,
    machine,
    make_bundle,
    plan,
)

from advisor.cli import main as cli_main
from advisor.core.errors import ExitCode, InputFileError
from advisor.verify import SYMBOL, last_error_line, read_metrics, verify

STEP_ORDER = ["bundle", "consistency", "hardware", "packages", "rules", "preflight", "run", "memory", "speed", "loss"]


def _verify(bundle, run=None, probe=None, **kw):
    kw.setdefault("random_init", True)
    kw.setdefault("synthetic_data", True)
    kw.setdefault("full_steps", True)  # quick mode has its own tests (test_verify_quick.py)
    return verify(bundle, runner=run or FakeRun(), probe=probe or machine(gpus=1), progress=None, **kw)


def _status(outcome) -> dict[str, str]:
    return {s.name: s.status for s in outcome.steps}


def _times(step: float, n: int = 10) -> tuple[float, ...]:
    """A slow first step (the warm-up of a grad_accum 2 plan), then `step` each."""
    return (4.0,) + (step,) * (n - 1)


# ------------------------------------------------------------------------------------------------------- pass case

def test_pass_case_runs_launch_sh_and_compares_with_the_estimate_of_the_files(tmp_path):
    bundle = make_bundle(tmp_path)
    mem, spd = estimate_of(bundle)
    run = FakeRun(peaks=(int(mem.per_gpu_peak_bytes * 1.05),), step_seconds=_times(spd.step_seconds))
    outcome = _verify(bundle, run, steps=10)
    assert [s.name for s in outcome.steps] == STEP_ORDER
    assert set(_status(outcome).values()) == {"pass"}, outcome.render()
    assert outcome.passed
    (call,) = run.calls
    assert call["command"] == ["bash", "launch.sh", "--max-steps", "10", "--no-save", "--random-init",
                               "--synthetic-data"]
    assert call["cwd"] == bundle
    assert call["timeout_seconds"] == 20 * 60
    assert (bundle / "verify.log").is_file()
    # what was compared: the estimate of the files, not plan.json's made-up 20 GiB / 40k tokens/s
    assert outcome.predicted["per_gpu_peak_bytes"] == mem.per_gpu_peak_bytes
    assert outcome.predicted["tokens_per_second"] == pytest.approx(spd.tokens_per_second)
    assert outcome.planned["per_gpu_peak_bytes"] == 20 * GIB
    # measured values, recomputed: 4 x 2 x 1024 tokens per step over the median after the warm-up (grad_accum 2:
    # one step holds the two warm-up micro-batches)
    tokens_per_step = 4 * 2 * 1024
    median = statistics.median(run.step_seconds[1:])
    assert outcome.measured["warmup_steps"] == 1
    assert outcome.measured["step_seconds_median"] == pytest.approx(median)
    assert outcome.measured["tokens_per_second"] == pytest.approx(tokens_per_step / median)
    assert outcome.measured["per_gpu_peak_bytes"] == run.peaks[0]
    assert outcome.measured["loss_finite"] is True and outcome.measured["ranks"] == 1
    assert outcome.error_pct["per_gpu_peak_bytes"] == pytest.approx(5.0, abs=0.05)


def test_an_edit_changes_the_prediction_verify_compares_with(tmp_path):
    """A bigger micro-batch in train.py's CONFIG: the estimate compared with is the edited plan's, and the edit is
    a warning of the consistency step, not a failure."""
    bundle = make_bundle(tmp_path)
    before, _ = estimate_of(bundle)
    train = bundle / "train.py"
    train.write_text(train.read_text().replace("'micro_batch': 4,", "'micro_batch': 8,"))
    after, _ = estimate_of(bundle)
    assert after.per_gpu_peak_bytes > before.per_gpu_peak_bytes
    outcome = _verify(bundle, FakeRun())
    assert outcome.predicted["per_gpu_peak_bytes"] == after.per_gpu_peak_bytes
    assert outcome.plan["micro_batch"] == 8
    consistency = outcome.step("consistency")
    assert consistency.status == "pass" and "micro_batch=4 but train.py CONFIG has 8" in consistency.warnings[0]
    assert outcome.differences[0]["field"] == "micro_batch" and outcome.differences[0]["other"] == 4
    assert outcome.step("memory").status == "pass"


def test_flags_pass_through_and_timeout_keyword(tmp_path):
    bundle = make_bundle(tmp_path)
    run = FakeRun()
    _verify(bundle, run, steps=3, random_init=False, synthetic_data=False, timeout_seconds=90)
    assert run.calls[0]["command"] == ["bash", "launch.sh", "--max-steps", "3", "--no-save"]
    assert run.calls[0]["timeout_seconds"] == 90


def test_stale_metrics_are_removed_before_the_run(tmp_path):
    bundle = make_bundle(tmp_path)
    (bundle / "metrics").mkdir()
    (bundle / "metrics" / "rank7.jsonl").write_text('{"event": "start", "device": "cuda:7"}\n')
    outcome = _verify(bundle, FakeRun())
    assert not (bundle / "metrics" / "rank7.jsonl").exists()
    assert outcome.measured["ranks"] == 1


def test_measured_peak_is_the_busiest_rank_and_step_time_the_slowest(tmp_path):
    p = plan(backend="ddp", num_processes=2, gpus_per_node=2)
    bundle = make_bundle(tmp_path, p)
    run = FakeRun(peaks=(int(18 * GIB), int(20.5 * GIB)), step_seconds=_times(0.2))
    outcome = _verify(bundle, run, probe=machine(gpus=2))
    assert outcome.measured["per_gpu_peak_bytes"] == int(20.5 * GIB)
    assert outcome.measured["ranks"] == 2
    assert outcome.measured["tokens_per_second"] == pytest.approx(2 * 4 * 2 * 1024 / 0.20)


def test_speed_uses_the_slowest_rank_per_step(tmp_path):
    p = plan(backend="ddp", num_processes=2, gpus_per_node=2)
    bundle = make_bundle(tmp_path, p)
    run = FakeRun(peaks=(int(19 * GIB), int(19 * GIB)), step_seconds=(4.0, 0.9) + (0.2,) * 8)
    run(["bash", "launch.sh", "--max-steps", "10"], cwd=bundle, log_path=bundle / "x.log", timeout_seconds=1)
    rank1 = bundle / "metrics" / "rank1.jsonl"
    records = [json.loads(line) for line in rank1.read_text().splitlines()]
    for r in records:
        if r["event"] == "step":
            r["step_seconds"] = 0.4  # rank 1 is twice as slow every step
    rank1.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert read_metrics(bundle / "metrics").step_seconds() == [4.0, 0.9] + [0.4] * 8


# ---------------------------------------------------------------------------------------------------------- memory

def _peak_run(bundle, factor: float) -> FakeRun:
    mem, spd = estimate_of(bundle)
    return FakeRun(peaks=(int(mem.per_gpu_peak_bytes * factor),), step_seconds=_times(spd.step_seconds))


def test_memory_under_prediction_beyond_tolerance_fails(tmp_path):
    bundle = make_bundle(tmp_path, plan(micro_batch=8, seq_len=4096, grad_ckpt=False))
    mem, _ = estimate_of(bundle)
    assert 0.15 * mem.per_gpu_peak_bytes > 2 * GIB  # the percentage band applies, not the 2 GiB floor
    outcome = _verify(bundle, _peak_run(bundle, 1.30))
    step = outcome.step("memory")
    assert step.status == "fail" and "under-predicted" in step.detail
    assert outcome.error_pct["per_gpu_peak_bytes"] == pytest.approx(30.0, abs=0.1)
    assert not outcome.passed
    assert _status(outcome)["speed"] == "pass" and _status(outcome)["loss"] == "pass"  # verify kept going


def test_memory_at_the_edge_of_the_band_passes(tmp_path):
    bundle = make_bundle(tmp_path, plan(micro_batch=8, seq_len=4096, grad_ckpt=False))
    assert _verify(bundle, _peak_run(bundle, 1.145)).step("memory").status == "pass"


def test_memory_over_prediction_beyond_tolerance_fails_with_synthetic_data(tmp_path):
    bundle = make_bundle(tmp_path, plan(micro_batch=8, seq_len=4096, grad_ckpt=False))
    outcome = _verify(bundle, _peak_run(bundle, 0.6))
    step = outcome.step("memory")
    assert step.status == "fail" and "over-predicted" in step.detail
    assert outcome.error_pct["per_gpu_peak_bytes"] == pytest.approx(-40.0, abs=0.1)


def test_memory_below_band_with_real_data_passes_with_a_note(tmp_path):
    bundle = make_bundle(tmp_path, plan(micro_batch=8, seq_len=4096, grad_ckpt=False))
    outcome = _verify(bundle, _peak_run(bundle, 0.6), synthetic_data=False)
    step = outcome.step("memory")
    assert step.status == "pass" and "--synthetic-data" in step.detail


def test_memory_floor_of_two_gib_for_small_predictions(tmp_path):
    bundle = make_bundle(tmp_path, plan(micro_batch=1, seq_len=256))
    mem, spd = estimate_of(bundle)
    assert mem.per_gpu_peak_bytes * 0.15 < 2 * GIB
    ok = FakeRun(peaks=(mem.per_gpu_peak_bytes + int(1.9 * GIB),), step_seconds=_times(spd.step_seconds))
    bad = FakeRun(peaks=(mem.per_gpu_peak_bytes + int(2.1 * GIB),), step_seconds=_times(spd.step_seconds))
    assert _verify(bundle, ok).step("memory").status == "pass"
    assert _verify(bundle, bad).step("memory").status == "fail"


# ----------------------------------------------------------------------------------------------------------- speed

def _speed_run(bundle, factor: float, spread: float = 0.0) -> FakeRun:
    """Steps `factor` times the predicted step time; with `spread`, alternately that much faster and slower."""
    _, spd = estimate_of(bundle)
    step = spd.step_seconds * factor
    timed = (step,) + tuple(step * (1 + spread * (-1) ** i) for i in range(8))  # median: `step`
    return FakeRun(step_seconds=(30.0, *timed))


def test_speed_band_is_the_tolerance_either_way(tmp_path):
    from advisor.verify.limits import SPEED_TOLERANCE_PCT

    tol = SPEED_TOLERANCE_PCT / 100
    bundle = make_bundle(tmp_path)
    slow = _verify(bundle, _speed_run(bundle, 1 / (1 - tol - 0.02)))  # 2 points more tokens/s lost than the band
    assert slow.step("speed").status == "fail" and "slower" in slow.step("speed").detail
    fast = _verify(bundle, _speed_run(bundle, 1 / (1 + tol + 0.02)))
    assert fast.step("speed").status == "fail" and "faster" in fast.step("speed").detail
    ok = _verify(bundle, _speed_run(bundle, 1 / (1 - tol + 0.02)))
    assert ok.step("speed").status == "pass"
    assert f"tolerance +-{SPEED_TOLERANCE_PCT:.0f} %" in ok.step("speed").detail


def test_the_runs_own_spread_widens_the_band_and_is_reported(tmp_path):
    from advisor.verify.limits import SPEED_TOLERANCE_PCT

    bundle = make_bundle(tmp_path)
    # 2 points slower than the band allows, and steps spread 5 % around their median: the band is 5 % wider
    outcome = _verify(bundle, _speed_run(bundle, 1 / (1 - SPEED_TOLERANCE_PCT / 100 - 0.02), spread=0.05))
    speed = outcome.step("speed")
    assert speed.status == "pass", speed.detail
    assert outcome.measured["step_seconds_spread_pct"] == pytest.approx(5.0, abs=0.01)
    assert f"{SPEED_TOLERANCE_PCT:.0f} % + this run's spread 5.0 %" in speed.detail
    assert outcome.to_json()["tolerance"]["tokens_per_second_pct"] == pytest.approx(SPEED_TOLERANCE_PCT + 5.0)
    assert outcome.measured["step_times"]["spread_pct"] == pytest.approx(5.0, abs=0.01)


def test_a_spread_beyond_any_calibration_run_is_capped_and_warned(tmp_path):
    from advisor.verify.limits import SPEED_SPREAD_CAP_PCT, SPEED_TOLERANCE_PCT

    bundle = make_bundle(tmp_path)
    outcome = _verify(bundle, _speed_run(bundle, 1.0, spread=0.3))
    speed = outcome.step("speed")
    assert SPEED_SPREAD_CAP_PCT < 30.0
    assert outcome.speed_tolerance_pct == pytest.approx(SPEED_TOLERANCE_PCT + SPEED_SPREAD_CAP_PCT)
    assert speed.warnings and "spread by 30.0 %" in speed.warnings[0]


def test_speed_above_band_with_real_data_passes_with_a_note(tmp_path):
    bundle = make_bundle(tmp_path)
    outcome = _verify(bundle, _speed_run(bundle, 1 / 1.5), synthetic_data=False)
    assert outcome.step("speed").status == "pass" and "--synthetic-data" in outcome.step("speed").detail
    slow = _verify(bundle, _speed_run(bundle, 1.5), synthetic_data=False)
    assert slow.step("speed").status == "fail"  # slower stays a failure whatever the data


def test_speed_ignores_the_warm_up_steps(tmp_path):
    bundle = make_bundle(tmp_path, plan(grad_accum=1))
    _, spd = estimate_of(bundle)
    # grad_accum 1: the first two steps are the two warm-up micro-batches, 50 s each (compiles, allocator growth)
    outcome = _verify(bundle, FakeRun(step_seconds=(50.0, 50.0) + (spd.step_seconds,) * 8))
    assert outcome.measured["warmup_steps"] == 2
    assert outcome.step("speed").status == "pass"


def test_speed_skipped_with_too_few_steps(tmp_path):
    outcome = _verify(make_bundle(tmp_path), FakeRun(step_seconds=(4.0,)), steps=1)
    assert outcome.step("speed").status == "skip" and "warm-up" in outcome.step("speed").detail
    assert outcome.passed  # a skipped comparison is not a failure once the run happened


# ------------------------------------------------------------------------------------------------------------ loss

def test_nan_loss_fails(tmp_path):
    losses = (12.1, 12.0, math.nan, 11.9, 11.9, 11.8, 11.8, 11.7, 11.7, 11.6)
    outcome = _verify(make_bundle(tmp_path), FakeRun(losses=losses))
    step = outcome.step("loss")
    assert step.status == "fail" and "nan" in step.detail and "step 3" in step.detail
    assert outcome.measured["loss_finite"] is False
    assert not outcome.passed
    json.dumps(outcome.to_json(), allow_nan=False)  # the JSON stays strict even when a loss is NaN


def test_infinite_loss_fails(tmp_path):
    losses = (12.1,) * 9 + (math.inf,)
    assert _verify(make_bundle(tmp_path), FakeRun(losses=losses)).step("loss").status == "fail"


def test_no_loss_logged_fails(tmp_path):
    bundle = make_bundle(tmp_path)
    run = FakeRun()

    def without_losses(command, **kw):
        result = run(command, **kw)
        path = kw["cwd"] / "metrics" / "rank0.jsonl"
        kept = [ln for ln in path.read_text().splitlines() if '"event": "log"' not in ln]
        path.write_text("\n".join(kept) + "\n")
        return result

    outcome = verify(bundle, runner=without_losses, probe=machine(gpus=1), progress=None, full_steps=True)
    assert outcome.step("loss").status == "fail"


# ------------------------------------------------------------------------------------------------------ failed run

def test_nonzero_exit_fails_with_the_logs_last_error(tmp_path):
    outcome = _verify(make_bundle(tmp_path), FakeRun(returncode=1, log=TRACEBACK_LOG, write_metrics=False))
    run = outcome.step("run")
    assert run.status == "fail"
    assert run.detail == "exit code 1: ValueError: invalid literal for int() with base 10: '0a'"
    assert "verify.log" in run.hint
    assert _status(outcome)["memory"] == "skip" and _status(outcome)["speed"] == "skip"
    assert _status(outcome)["loss"] == "skip"
    assert not outcome.passed


def test_out_of_memory_exit_fails_the_memory_step(tmp_path):
    outcome = _verify(make_bundle(tmp_path), FakeRun(returncode=1, log=OOM_LOG, write_metrics=False))
    assert outcome.step("run").detail.startswith("exit code 1: torch.OutOfMemoryError: CUDA out of memory")
    assert outcome.step("memory").status == "fail" and "ran out of GPU memory" in outcome.step("memory").detail


def test_timeout_fails_the_run(tmp_path):
    run = FakeRun(returncode=-15, timed_out=True, log="step 1\nstep 2\n", step_seconds=(4.0, 0.2))
    outcome = _verify(make_bundle(tmp_path), run)
    assert outcome.step("run").status == "fail" and "timed out" in outcome.step("run").detail
    assert "2 of 10 steps" in outcome.step("run").detail


def test_exit_zero_without_metrics_fails(tmp_path):
    outcome = _verify(make_bundle(tmp_path), FakeRun(write_metrics=False))
    assert outcome.step("run").status == "fail" and "rank*.jsonl" in outcome.step("run").detail


@pytest.mark.parametrize(("lines", "expected"), [
    (TRACEBACK_LOG.splitlines(), "ValueError: invalid literal for int() with base 10: '0a'"),
    (["loading", "[rank1]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970", "[rank0]: waiting"],
     "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970"),
    (["train.py: this plan generates with vLLM, which needs a GPU; --cpu cannot run it",
      "Traceback (most recent call last):", '  File "/x/launch.py", line 3, in simple_launcher',
      "subprocess.CalledProcessError: Command 'x' returned non-zero exit status 1."],
     "train.py: this plan generates with vLLM, which needs a GPU; --cpu cannot run it"),
    (["all quiet", "then nothing"], "then nothing"),
    ([], None),
])
def test_last_error_line(lines, expected):
    assert last_error_line(lines) == expected


# -------------------------------------------------------------------------------------------- nothing run / skips

def test_no_gpu_skips_the_run_and_does_not_pass(tmp_path):
    run = FakeRun()
    outcome = _verify(make_bundle(tmp_path), run, probe=machine("no_gpu"))
    assert run.calls == []  # nothing was started
    status = _status(outcome)
    assert outcome.step("run").detail == "no GPU on this machine" and status["run"] == "skip"
    assert status["memory"] == status["speed"] == status["loss"] == "skip"
    assert status["hardware"] == "fail"
    assert outcome.passed is False
    assert outcome.summary().startswith("Nothing was run (no GPU on this machine)")
    assert outcome.render().splitlines()[-1] == outcome.summary()


def test_too_few_gpus_skips_the_run(tmp_path):
    p = plan(backend="ddp", num_processes=4, gpus_per_node=4)
    run = FakeRun()
    outcome = _verify(make_bundle(tmp_path, p), run, probe=machine(gpus=2))
    assert run.calls == []
    assert outcome.step("run").detail == "the plan needs 4 GPUs per node, this machine has 2"
    assert outcome.step("hardware").status == "fail" and not outcome.passed


def test_multi_node_bundle_skips_the_run_with_the_reason(tmp_path):
    p = plan(backend="deepspeed", zero_stage=3, num_processes=16, gpus_per_node=8, nodes=2)
    run = FakeRun()
    outcome = _verify(make_bundle(tmp_path, p), run, probe=machine(gpus=8))
    assert run.calls == []
    run_step = outcome.step("run")
    assert run_step.status == "skip" and "multi-node bundle (2 nodes)" in run_step.detail
    assert "one node of the plan's 2" in outcome.step("hardware").detail
    assert not outcome.passed


def test_cpu_run_skips_memory_and_speed(tmp_path):
    outcome = _verify(make_bundle(tmp_path), FakeRun(device="cpu", peaks=(0,), step_seconds=_times(1.0)),
                      probe=machine("no_gpu"), extra_args=["--cpu"])
    status = _status(outcome)
    assert status["run"] == "pass" and status["loss"] == "pass"
    assert status["memory"] == "skip" and status["speed"] == "skip"
    assert outcome.measured["tokens_per_second"] is None and outcome.measured["device"] == "cpu"
    assert outcome.command[-1] == "--cpu"
    assert not outcome.passed  # the hardware is not the plan's: a CPU smoke run verifies no prediction


# --------------------------------------------------------------------------------------------------- other checks

def test_other_gpu_model_fails_hardware_and_skips_speed(tmp_path):
    outcome = _verify(make_bundle(tmp_path), FakeRun(), probe=machine("a100_40gb_x8", gpus=1))
    hw = outcome.step("hardware")
    assert hw.status == "fail" and "A100-40GB is not the plan's H100-80GB" in hw.detail
    assert "per GPU < the plan's" in hw.detail
    assert outcome.step("speed").status == "skip"
    assert outcome.step("memory").status == "pass"  # memory does not depend on the GPU model


def test_a_power_capped_gpu_is_noted_and_recorded(tmp_path):
    """A GPU capped well below its part's board power runs GPU-bound steps slower than the full-power rates the model
    uses: the hardware step still passes (it is the plan's GPU) and says so; the JSON records the limit either way."""
    from advisor.verify.checks import POWER_CAP_NOTE_FRACTION

    capped = _verify(make_bundle(tmp_path / "a"), FakeRun(), probe=machine(gpus=1, power_limit_watts=450.0))
    hw = capped.step("hardware")
    assert hw.status == "pass" and "power limit 450 W of the part's 700 W" in hw.detail
    assert capped.to_json()["gpu"] == {"gpus": 1, "name": "NVIDIA H100 80GB HBM3", "id": "H100-80GB",
                                       "memory_bytes": capped.to_json()["gpu"]["memory_bytes"],
                                       "power_limit_watts": 450.0, "tdp_watts": 700}
    # at the cap's threshold and above, nothing is said
    full = _verify(make_bundle(tmp_path / "b"), FakeRun(),
                   probe=machine(gpus=1, power_limit_watts=POWER_CAP_NOTE_FRACTION * 700))
    assert "power limit" not in full.step("hardware").detail
    assert full.to_json()["gpu"]["power_limit_watts"] == POWER_CAP_NOTE_FRACTION * 700


def test_missing_ds_config_fails_bundle_and_rules_but_keeps_going(tmp_path):
    p = plan(backend="deepspeed", zero_stage=2, num_processes=2, gpus_per_node=2)
    bundle = make_bundle(tmp_path, p)
    (bundle / "ds_config.json").unlink()
    run = FakeRun(peaks=(int(19.5 * GIB),) * 2, step_seconds=_times(0.2))
    outcome = _verify(bundle, run, probe=machine(gpus=2))
    status = _status(outcome)
    assert status["bundle"] == "fail" and "ds_config.json" in outcome.step("bundle").detail
    assert status["consistency"] == "fail"
    assert status["run"] == "pass" and len(run.calls) == 1  # train.py and launch.sh are there: it still ran
    assert not outcome.passed


def test_edited_launch_file_fails_consistency(tmp_path):
    bundle = make_bundle(tmp_path)
    acc = bundle / "accelerate.yaml"
    acc.write_text(acc.read_text().replace("num_processes: 1", "num_processes: 2"))
    outcome = _verify(bundle)
    assert outcome.step("consistency").status == "fail"
    assert "num_processes" in outcome.step("consistency").detail


# ------------------------------------------------------------------------------------------------- usage errors

def test_missing_folder_is_a_usage_error(tmp_path):
    with pytest.raises(InputFileError, match="not found"):
        verify(tmp_path / "nope", runner=FakeRun(), probe=machine(gpus=1), progress=None)


def test_folder_without_plan_json_is_a_usage_error(tmp_path):
    bundle = make_bundle(tmp_path)
    (bundle / "plan.json").unlink()
    with pytest.raises(InputFileError, match="no plan.json"):
        verify(bundle, runner=FakeRun(), probe=machine(gpus=1), progress=None)
    (bundle / "plan.json").write_text("{not json")
    with pytest.raises(InputFileError, match="not valid JSON"):
        verify(bundle, runner=FakeRun(), probe=machine(gpus=1), progress=None)


def test_cli_exit_code_2_for_a_missing_folder(tmp_path, capsys):
    assert cli_main(["verify", str(tmp_path / "nope")]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: bundle folder not found") and "hint:" in err


def test_steps_below_one_is_a_usage_error(tmp_path):
    from advisor.core.errors import AdvisorError

    with pytest.raises(AdvisorError, match="at least 1") as info:
        verify(make_bundle(tmp_path), steps=0, runner=FakeRun(), probe=machine(gpus=1), progress=None)
    assert info.value.exit_code == ExitCode.USAGE


# --------------------------------------------------------------------------------------------------- the contract

def test_json_has_the_contract_keys(tmp_path):
    doc = _verify(make_bundle(tmp_path)).to_json()
    text = json.dumps(doc, allow_nan=False)
    doc = json.loads(text)
    assert isinstance(doc["passed"], bool)
    for step in doc["steps"]:
        assert {"name", "status", "detail"} <= set(step) and step["status"] in ("pass", "fail", "skip")
        assert isinstance(step["detail"], str) and "\n" not in step["detail"]
    assert {"per_gpu_peak_bytes", "tokens_per_second", "loss_finite", "per_gpu_reserved_bytes",
            "step_seconds_median", "ranks"} <= set(doc["measured"])
    assert {"per_gpu_peak_bytes", "per_gpu_reserved_bytes", "tokens_per_second", "step_seconds"} <= set(
        doc["predicted"])
    assert {"per_gpu_peak_bytes", "tokens_per_second"} <= set(doc["error_pct"])
    assert isinstance(doc["measured"]["per_gpu_peak_bytes"], int)  # sizes are integer bytes
    assert isinstance(doc["predicted"]["step_seconds"], float)
    assert doc["plan"]["micro_batch"] == 4 and doc["quick"]["plan_grad_accum"] == 2


def test_json_when_nothing_ran_keeps_every_key(tmp_path):
    bundle = make_bundle(tmp_path)
    doc = _verify(bundle, probe=machine("no_gpu")).to_json()
    mem, _ = estimate_of(bundle)
    assert doc["passed"] is False
    assert doc["measured"]["per_gpu_peak_bytes"] is None and doc["measured"]["loss_finite"] is None
    assert doc["error_pct"] == {"per_gpu_peak_bytes": None, "tokens_per_second": None}
    assert doc["predicted"]["per_gpu_peak_bytes"] == mem.per_gpu_peak_bytes


def test_render_lists_every_step_with_a_symbol_and_ends_with_a_summary(tmp_path):
    bundle = make_bundle(tmp_path, plan(micro_batch=8, seq_len=4096, grad_ckpt=False))
    outcome = _verify(bundle, _peak_run(bundle, 1.3))
    lines = outcome.render().splitlines()
    step_lines = [ln for ln in lines if ln.startswith("[")]
    assert [ln.split("]")[0] for ln in step_lines] == [f"[{i:>2}/10" for i in range(1, 11)]
    # the counter is padded to the total's width, so every title and symbol starts in the same column
    assert len({ln.index("]") for ln in step_lines}) == 1
    assert len({min(ln.index(f" {sym} ") for sym in SYMBOL.values() if f" {sym} " in ln) for ln in step_lines}) == 1
    assert all(any(f" {sym} " in ln for sym in SYMBOL.values()) for ln in step_lines)
    assert " ✗ measured " in next(ln for ln in step_lines if ln.startswith("[ 8/10]"))
    assert any(ln.strip().startswith("hint: ") for ln in lines)
    assert lines[-1] == "1 of 10 checks failed. See the hints above."


def test_cli_verify_json_exit_codes(tmp_path, capsys, monkeypatch):
    """cmd_verify prints outcome.to_json() and exits 1 when verify did not pass (here: no GPU, nothing ran)."""
    import advisor.verify as v

    bundle = make_bundle(tmp_path)
    real = v.verify
    monkeypatch.setattr(v, "verify", lambda d, **kw: real(d, probe=machine("no_gpu"), runner=FakeRun(),
                                                          progress=None, **kw))
    assert cli_main(["verify", str(bundle), "--json"]) == ExitCode.FINDINGS
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] is False and [s["name"] for s in doc["steps"]] == STEP_ORDER


def test_bundle_from_trl_advisor_generate(tmp_path, capsys):
    """A bundle `trl-advisor generate` wrote, run (quick mode, the default) by a fake whose measurements sit 5 %
    above the estimated peak and at the estimated step time of the accumulation it runs: everything passes."""
    out = tmp_path / "b"
    assert cli_main(["generate", "--model", "qwen2.5-0.5b", "--gpu", "H100-80GB", "--gpus", "1",
                     "--out", str(out)]) == ExitCode.OK
    capsys.readouterr()
    outcome = verify(out, runner=FakeRun(peak_factor=1.05), probe=machine(gpus=1), progress=None, random_init=True,
                     synthetic_data=True)
    assert outcome.passed, outcome.render()
    assert outcome.error_pct["per_gpu_peak_bytes"] == pytest.approx(5.0, abs=0.05)
    assert outcome.error_pct["tokens_per_second"] == pytest.approx(0.0, abs=0.5)


def test_a_host_bound_plan_s_spread_widens_its_band_up_to_the_host_bound_cap(tmp_path):
    # GRPO without vLLM: transformers' generate sets the step from the host CPU, and such calibration runs spread by
    # up to 57 % (docs/verify.md); their spread widens the band up to HOST_BOUND_SPREAD_CAP_PCT, not the 15 % a
    # GPU-bound run gets, and is not reported as a busy machine
    from advisor.model.calibration import HOST_BOUND_NOTE_SHARE
    from advisor.verify.limits import HOST_BOUND_SPREAD_CAP_PCT, SPEED_TOLERANCE_PCT

    p = plan(trainer="grpo", vllm_mode="none", num_generations=4, max_completion_len=128, seq_len=512,
             micro_batch=8, grad_accum=1, grad_ckpt=True)
    bundle = make_bundle(tmp_path, p)
    outcome = _verify(bundle, _speed_run(bundle, 1 / 0.7, spread=0.3))  # 30 % fewer tokens/s, steps +-30 %
    assert outcome.predicted["host_bound_share"] >= HOST_BOUND_NOTE_SHARE
    speed = outcome.step("speed")
    assert speed.status == "pass", speed.detail
    assert outcome.speed_tolerance_pct == pytest.approx(SPEED_TOLERANCE_PCT + 30.0, abs=0.01)
    assert not speed.warnings
    noisy = _verify(bundle, _speed_run(bundle, 1.0, spread=0.7))
    assert noisy.speed_tolerance_pct == pytest.approx(SPEED_TOLERANCE_PCT + HOST_BOUND_SPREAD_CAP_PCT)
    assert noisy.to_json()["tolerance"]["tokens_per_second_spread_cap_pct"] == HOST_BOUND_SPREAD_CAP_PCT
    assert noisy.step("speed").warnings and "host-bound calibration run" in noisy.step("speed").warnings[0]


def test_a_gpu_bound_plan_keeps_the_narrow_cap(tmp_path):
    from advisor.model.calibration import HOST_BOUND_NOTE_SHARE
    from advisor.verify.limits import SPEED_SPREAD_CAP_PCT

    bundle = make_bundle(tmp_path)
    outcome = _verify(bundle, _speed_run(bundle, 1.0, spread=0.3))
    assert outcome.predicted["host_bound_share"] < HOST_BOUND_NOTE_SHARE
    assert outcome.to_json()["tolerance"]["tokens_per_second_spread_cap_pct"] == SPEED_SPREAD_CAP_PCT


@pytest.mark.parametrize(("kwargs", "said"), [
    ({"timeout_seconds": 0}, "--timeout must be between"), ({"timeout_seconds": -5}, "--timeout must be between"),
    ({"steps": 10**20}, "is not a short run")])
def test_verify_refuses_limits_that_are_no_limits(tmp_path, kwargs, said):
    from advisor.core.errors import AdvisorError
    from advisor.verify import verify

    with pytest.raises(AdvisorError, match=said):
        verify(str(tmp_path), dry_run=True, **kwargs)


def _grpo_bundle(tmp_path):
    p = plan(trainer="grpo", vllm_mode="none", num_generations=4, max_completion_len=128, seq_len=512,
             micro_batch=8, grad_accum=1, grad_ckpt=True)
    return make_bundle(tmp_path, p)


def test_a_host_bound_run_inside_the_band_around_its_hosts_estimate_passes(tmp_path):
    """A quiet host dispatches faster than the calibration's median host: a host-bound plan then runs faster than the
    median host's prediction. Outside that band but inside the same band around the model's estimate for the host, it
    passes and says so; a GPU-bound plan on the same host is judged on the median host's prediction alone."""
    from advisor.model.speed import REFERENCE_HOST_OP_SECONDS
    from advisor.verify.hostspeed import HostSpeed
    from advisor.verify.limits import SPEED_TOLERANCE_PCT

    quiet = lambda: HostSpeed(0.6 * REFERENCE_HOST_OP_SECONDS, "measured")  # noqa: E731
    bundle = _grpo_bundle(tmp_path / "g")
    probe = _verify(bundle, _speed_run(bundle, 1.0), host_speed=quiet)
    host_tps, pred_tps = probe.host["tokens_per_second"], probe.predicted["tokens_per_second"]
    assert host_tps > pred_tps * (1 + SPEED_TOLERANCE_PCT / 100)  # the host's estimate lies beyond the band
    # a run at the host's estimate: outside the median host's band, inside the host's
    outcome = _verify(bundle, _speed_run(bundle, pred_tps / host_tps), host_speed=quiet)
    speed = outcome.step("speed")
    assert speed.status == "pass", speed.detail
    assert "inside it around this host's (+0.0 %)" in speed.detail and "faster" not in speed.detail
    # beyond both bands it still fails, as faster than predicted
    beyond = _verify(bundle, _speed_run(bundle, pred_tps / host_tps / 1.3), host_speed=quiet)
    assert beyond.step("speed").status == "fail" and "faster than predicted" in beyond.step("speed").detail
    # unmeasured host: the median host's band alone
    plain = _verify(bundle, _speed_run(bundle, pred_tps / host_tps))
    assert plain.step("speed").status == "fail"


def test_a_gpu_bound_run_is_not_judged_on_its_hosts_estimate(tmp_path):
    from advisor.model.speed import REFERENCE_HOST_OP_SECONDS
    from advisor.verify.hostspeed import HostSpeed
    from advisor.verify.limits import SPEED_TOLERANCE_PCT

    bundle = make_bundle(tmp_path)
    fast = 1 / (1 + SPEED_TOLERANCE_PCT / 100 + 0.02)
    outcome = _verify(bundle, _speed_run(bundle, fast), host_speed=lambda: HostSpeed(0.6 * REFERENCE_HOST_OP_SECONDS, "m"))
    assert outcome.step("speed").status == "fail" and "faster than predicted" in outcome.step("speed").detail
