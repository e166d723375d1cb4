"""The whole job: tokens or steps to hours and GPU-hours at a plan's speed, and where estimate and generate
report it (nothing job-related without --tokens/--steps)."""

from __future__ import annotations

import json
import math

import pytest

from advisor import cli
from advisor.check import estimate_request
from advisor.core.errors import AdvisorError
from advisor.core.request import Request
from advisor.model.job import SECONDS_PER_HOUR, describe, format_hours, plan_job
from advisor.resolve import check_request, default_plan, resolve_model, resolve_target

REQ = Request(model="8B", gpu="H100-80GB", gpus=8, micro_batch=2, grad_accum=4)


def _plan():
    return default_plan(REQ, resolve_model(REQ), resolve_target(REQ))


def test_a_tokens_job_takes_tokens_over_tokens_per_second():
    plan = _plan()
    job = plan_job(plan, 50_000.0, 8, tokens=10**9)
    assert job.given == "tokens" and job.tokens == 10**9
    assert job.hours == pytest.approx(10**9 / 50_000.0 / SECONDS_PER_HOUR, rel=1e-15)
    assert job.gpu_hours == pytest.approx(job.hours * 8, rel=1e-15)
    assert job.steps == math.ceil(10**9 / plan.tokens_per_step)  # the last partial step counts


def test_a_steps_job_trains_steps_times_the_plans_tokens_per_step():
    plan = _plan()
    assert plan.tokens_per_step == 2 * 4 * 8 * 1024  # micro x accum x dp x seq_len
    job = plan_job(plan, 50_000.0, 8, steps=500)
    assert (job.given, job.steps, job.tokens) == ("steps", 500, 500 * plan.tokens_per_step)
    assert job.hours == pytest.approx(500 * plan.tokens_per_step / 50_000.0 / 3600, rel=1e-15)


def test_no_job_without_a_size_or_a_speed_and_never_both_sizes():
    plan = _plan()
    assert plan_job(plan, 50_000.0, 8) is None
    assert plan_job(plan, 0.0, 8, tokens=10) is None
    with pytest.raises(ValueError):
        plan_job(plan, 50_000.0, 8, tokens=10, steps=10)


def test_hours_read_as_minutes_hours_or_whole_hours():
    assert [format_hours(h) for h in (0.01, 0.5, 2.25, 1234.4)] == ["36 s", "30 min", "2.2 h", "1,234 h"]
    line = describe({"tokens": 10**9, "steps": 15259, "tokens_per_step": 65536, "hours": 2.9, "gpus": 8,
                     "gpu_hours": 23.2})
    assert line == "1,000,000,000 tokens = 15,259 steps of 65,536: 2.9 h on 8 GPUs, 23.2 GPU-hours"


@pytest.mark.parametrize("changes, problem", [
    ({"tokens": 10, "steps": 10}, "give one"),
    ({"tokens": 0}, "at least 1"),
    ({"tokens": 10**15}, "above"),
    ({"steps": 10**9}, "above"),
])
def test_the_request_refuses_a_bad_job_size(changes, problem):
    with pytest.raises(AdvisorError, match=problem):
        check_request(REQ.with_(**changes))


def test_estimate_has_a_job_only_when_the_request_sizes_it():
    plain = estimate_request(REQ)
    assert "job" not in plain
    sized = estimate_request(REQ.with_(tokens=2 * 10**8))
    job = sized["job"]
    assert job["tokens"] == 2 * 10**8 and job["gpus"] == 8
    assert job["hours"] == pytest.approx(2 * 10**8 / sized["speed"]["tokens_per_second"] / 3600, rel=1e-12)


def test_estimate_prints_one_line_for_the_job(capsys):
    assert cli.main(["estimate", "--model", "8B", "--gpu", "H100", "--gpus", "8", "--steps", "100"]) == 0
    jobs = [line for line in capsys.readouterr().out.splitlines() if line.startswith("job: ")]
    assert len(jobs) == 1 and "100 steps of 65,536" in jobs[0]


def test_generate_reports_the_job_and_the_bundle_readme_says_it(tmp_path, capsys):
    out = tmp_path / "bundle"
    assert cli.main(["generate", "--model", "0.5B", "--gpu", "H100", "--tokens", "500000000", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "job      500,000,000 tokens = " in printed
    plan = json.loads((out / "plan.json").read_text())
    assert plan["job"]["tokens"] == 500_000_000 and plan["job"]["given"] == "tokens"
    readme = (out / "README.md").read_text()
    assert "The whole job (--tokens): 500,000,000 tokens" in readme
    assert "--tokens 500000000" in readme  # the re-create line keeps the job size
    # the README says what train.py does with it: stops at CONFIG's max_steps, not after one epoch
    p = plan["plan"]
    rows = plan["job"]["steps"] * p["micro_batch"] * p["grad_accum"] * p["num_processes"]
    assert f"stops after these {plan['job']['steps']:,} steps" in readme and f"{rows:,} sequences" in readme
    assert f"'max_steps': {plan['job']['steps']}," in (out / "train.py").read_text()
    assert "one epoch of its dataset" not in readme


def test_a_bundle_without_a_job_size_says_nothing_of_a_job(tmp_path):
    out = tmp_path / "bundle"
    assert cli.main(["generate", "--model", "0.5B", "--gpu", "H100", "--out", str(out)]) == 0
    assert "job" not in json.loads((out / "plan.json").read_text())
    assert "whole job" not in (out / "README.md").read_text()
