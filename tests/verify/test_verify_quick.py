"""Quick mode: fewer micro-batches per optimizer step, everything that sets the peak kept, the step time scaled back
to the plan with the speed model's breakdown; the working copy it runs in; --full-steps."""

from __future__ import annotations

import ast
import os

import pytest
from verify_cases import H100_TARGET, MODEL, FakeRun, estimate_of, machine, make_bundle, plan

from advisor.model.estimate import estimate_plan
from advisor.verify import quick, verify
from advisor.verify.limits import QUICK_STEPS_BUDGET_SECONDS, QUICK_TIMED_STEPS, warmup_steps


def _verify(bundle, run=None, **kw):
    kw.setdefault("random_init", True)
    kw.setdefault("synthetic_data", True)
    return verify(bundle, runner=run or FakeRun(), probe=machine(gpus=1), progress=None, **kw)


def test_choice_is_the_largest_accumulation_within_the_budget():
    p = plan(micro_batch=8, seq_len=4096, grad_accum=64, grad_ckpt=False)
    c = quick.choose(MODEL, p, H100_TARGET, full_steps=False, steps=None)
    assert c.quick and 1 <= c.grad_accum < 64
    assert c.steps == warmup_steps(c.grad_accum) + QUICK_TIMED_STEPS
    _, t = estimate_plan(MODEL, p.with_(grad_accum=c.grad_accum), H100_TARGET)
    _, t_next = estimate_plan(MODEL, p.with_(grad_accum=c.grad_accum + 1), H100_TARGET)
    assert c.steps * t.step_seconds <= QUICK_STEPS_BUDGET_SECONDS < c.steps * t_next.step_seconds
    assert c.predicted_step_seconds == pytest.approx(t.step_seconds)


def test_scale_comes_from_the_speed_model_at_both_accumulations():
    p = plan(micro_batch=8, seq_len=4096, grad_accum=64, grad_ckpt=False)
    c = quick.choose(MODEL, p, H100_TARGET, full_steps=False, steps=None)
    _, full = estimate_plan(MODEL, p, H100_TARGET)
    _, part = estimate_plan(MODEL, p.with_(grad_accum=c.grad_accum), H100_TARGET)
    assert c.scale == pytest.approx(full.step_seconds / part.step_seconds)
    # the breakdown's split: per micro-batch x g + per step = t(g), and x G + per step = t(G)
    assert c.per_micro_batch_seconds * c.grad_accum + c.per_step_seconds == pytest.approx(part.step_seconds)
    assert c.per_micro_batch_seconds * 64 + c.per_step_seconds == pytest.approx(full.step_seconds)
    assert c.per_step_seconds > 0  # the optimizer step and the Trainer's fixed cost are not scaled by g/G


def test_grpo_keeps_its_accumulation_when_it_sets_the_generation_peak():
    # 8 x 16 completions of 8192 tokens at once: the KV cache of the generation sets the peak
    p = plan(trainer="grpo", micro_batch=8, grad_accum=16, num_generations=8, max_completion_len=8192,
             seq_len=16384, vllm_mode="none", grad_ckpt=True)
    full = estimate_plan(MODEL, p, H100_TARGET)[0]
    assert full.phase == "generation"
    smaller = [estimate_plan(MODEL, p.with_(grad_accum=g), H100_TARGET)[0].per_gpu_peak_bytes for g in range(1, 16)]
    assert all(abs(s - full.per_gpu_peak_bytes) > 0.005 * full.per_gpu_peak_bytes for s in smaller)
    c = quick.choose(MODEL, p, H100_TARGET, full_steps=False, steps=None)
    assert not c.quick and c.grad_accum == 16 and "peak" in c.reason
    # where training sets the peak, a smaller accumulation keeps it and quick mode applies to GRPO too
    short = p.with_(max_completion_len=512, seq_len=1024, grad_accum=8)
    assert quick.choose(MODEL, short, H100_TARGET, full_steps=False, steps=None).quick


def test_full_steps_and_a_single_micro_batch_run_the_plan_itself():
    p = plan(grad_accum=16)
    full = quick.choose(MODEL, p, H100_TARGET, full_steps=True, steps=None)
    assert not full.quick and full.grad_accum == 16 and full.steps == 10 and full.scale == 1.0
    one = quick.choose(MODEL, plan(grad_accum=1), H100_TARGET, full_steps=False, steps=None)
    assert not one.quick and one.steps == warmup_steps(1) + QUICK_TIMED_STEPS


def test_rewrite_train_changes_only_the_accumulation_value():
    src = "X = 1\nCONFIG = {\n    'micro_batch': 4,\n    'grad_accum': 64,  # why\n}\n" \
          'args = dict(gradient_accumulation_steps=CONFIG["grad_accum"])\n'
    new = quick.rewrite_train(src, 5)
    assert new == src.replace("'grad_accum': 64,", "'grad_accum': 5,")
    assert ast.literal_eval(new.split("CONFIG = ")[1].split("\nargs")[0])["grad_accum"] == 5
    with pytest.raises(quick.QuickModeError):
        quick.rewrite_train(src.replace('CONFIG["grad_accum"]', "64"), 5)  # the value train.py uses is not CONFIG's


def test_ds_config_numbers_follow_the_accumulation():
    text = '{"gradient_accumulation_steps": 64, "train_batch_size": 512, "train_micro_batch_size_per_gpu": 8}'
    import json

    doc = json.loads(quick.rewrite_ds_config(text, 4, micro_batch=8, dp=1))
    assert doc["gradient_accumulation_steps"] == 4 and doc["train_batch_size"] == 32
    assert quick.rewrite_ds_config('{"gradient_accumulation_steps": "auto"}', 4, 8, 1) is None


def test_quick_run_happens_in_a_working_copy_and_is_scaled_back(tmp_path):
    bundle = make_bundle(tmp_path, plan(micro_batch=8, seq_len=4096, grad_accum=64, grad_ckpt=False))
    run = FakeRun()
    outcome = _verify(bundle, run)
    q = outcome.quick
    assert q["quick"] and q["grad_accum"] < 64 and q["plan_grad_accum"] == 64
    (call,) = run.calls
    # a temporary folder, every bundle file there, train.py with the one value changed, metrics to the bundle
    assert call["cwd"] != bundle and call["cwd"].name.startswith("trl-advisor-verify-")
    assert not call["cwd"].exists()  # removed after the run
    assert set(call["files"]) >= {"launch.sh", "accelerate.yaml", "model_config.json", "plan.json", "train.py"}
    original = (bundle / "train.py").read_text()
    assert call["train_py"] == original.replace("'grad_accum': 64,", f"'grad_accum': {q['grad_accum']},")
    assert call["command"][-4:] == ["--metrics-dir", str(bundle / "metrics"), "--random-init-dir",
                                    str(bundle / "random-init")]
    assert (bundle / "metrics" / "rank0.jsonl").is_file()
    assert (bundle / "train.py").read_text() == original  # the bundle itself is untouched
    # the fake ran at the estimated step time of the accumulation it ran: scaled, it meets the plan's estimate
    _, quick_speed = estimate_of(bundle, q["grad_accum"])
    _, plan_speed = estimate_of(bundle)
    assert q["measured_step_seconds"] == pytest.approx(quick_speed.step_seconds)
    assert q["scaled_step_seconds"] == pytest.approx(plan_speed.step_seconds)
    assert outcome.measured["tokens_per_second"] == pytest.approx(plan_speed.tokens_per_second)
    assert outcome.step("speed").status == "pass" and "scaled x" in outcome.step("speed").detail
    assert outcome.passed, outcome.render()


def test_a_wrong_fixed_part_moves_the_scaled_figure_by_its_share(tmp_path):
    """The measured quick step 10 % slow: the scaled step is 10 % slow too (the ratio carries the error)."""
    bundle = make_bundle(tmp_path, plan(micro_batch=8, seq_len=4096, grad_accum=64, grad_ckpt=False))
    outcome = _verify(bundle, FakeRun(speed_factor=1.1))
    _, plan_speed = estimate_of(bundle)
    assert outcome.quick["scaled_step_seconds"] == pytest.approx(plan_speed.step_seconds * 1.1)
    assert outcome.error_pct["tokens_per_second"] == pytest.approx(-9.1, abs=0.1)


def test_full_steps_runs_in_the_bundle(tmp_path):
    bundle = make_bundle(tmp_path, plan(grad_accum=16))
    run = FakeRun()
    outcome = _verify(bundle, run, full_steps=True)
    assert run.calls[0]["cwd"] == bundle and "--metrics-dir" not in run.calls[0]["command"]
    assert outcome.quick["quick"] is False and outcome.quick["scale"] == 1.0
    assert run.calls[0]["command"][:4] == ["bash", "launch.sh", "--max-steps", "10"]


def test_no_quick_mode_when_train_py_does_not_take_the_accumulation_from_config(tmp_path):
    bundle = make_bundle(tmp_path, plan(grad_accum=16))
    train = bundle / "train.py"
    train.write_text(train.read_text().replace('gradient_accumulation_steps=CONFIG["grad_accum"]',
                                               "gradient_accumulation_steps=16"))
    run = FakeRun()
    outcome = _verify(bundle, run)
    assert outcome.quick["quick"] is False and "no quick mode" in outcome.quick["reason"]
    assert run.calls[0]["cwd"] == bundle


def test_a_launch_script_that_writes_logs_keeps_them_in_the_bundle(tmp_path):
    bundle = make_bundle(tmp_path, plan(grad_accum=8))
    launch = bundle / "launch.sh"
    launch.write_text(launch.read_text() + "\nmkdir -p logs && echo served > logs/vllm.log\n")
    work = quick.make_working_copy(bundle, (bundle / "train.py").read_text(), plan(grad_accum=8), 2)
    try:
        assert (work / "logs").is_symlink() and (work / "logs").resolve() == (bundle / "logs").resolve()
        assert not (work / "metrics").exists() and (work / "train.py").is_file() and not (work / "train.py").is_symlink()
    finally:
        quick.remove_working_copy(work)
    assert not work.exists() and (bundle / "logs").is_dir() and (bundle / "launch.sh").is_file()


def test_a_bundle_named_by_a_relative_path_runs_from_its_working_copy(tmp_path, monkeypatch):
    # `trl-advisor verify generated/NAME`, as the README shows it: the copy's links, and the metrics and random-init
    # folders launch.sh is told, name the bundle from the copy's own folder too
    bundle = make_bundle(tmp_path, plan(grad_accum=8))
    monkeypatch.chdir(tmp_path)
    relative = bundle.relative_to(tmp_path)
    work = quick.make_working_copy(relative, (bundle / "train.py").read_text(), plan(grad_accum=8), 2)
    try:
        links = [p for p in work.iterdir() if p.is_symlink()]
        assert links and all(os.readlink(p).startswith(os.sep) and p.exists() for p in links)
    finally:
        quick.remove_working_copy(work)
    run = FakeRun()
    outcome = _verify(relative, run)
    assert outcome.quick["quick"] and run.calls[0]["cwd"] != bundle
    command = run.calls[0]["command"]
    for flag in ("--metrics-dir", "--random-init-dir"):
        if flag in command:
            assert os.path.isabs(command[command.index(flag) + 1]), command
