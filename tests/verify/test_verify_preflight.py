"""Pre-flight: free disk for the random-init checkpoint and the outputs, GPU memory other processes hold, host RAM
and the locked-memory limit, each with a verdict before anything launches."""

from __future__ import annotations

import json

from verify_cases import GIB, MODEL, FakeRun, estimate_of, machine, make_bundle, plan

import hw_probe
from advisor.verify import verify
from advisor.verify.preflight import cached_checkpoint


def _verify(bundle, run=None, probe=None, **kw):
    kw.setdefault("random_init", True)
    kw.setdefault("synthetic_data", True)
    return verify(bundle, runner=run or FakeRun(), probe=probe or machine(gpus=1), progress=None, full_steps=True,
                  **kw)


def _report(**changes):
    """The one-H100 fixture with GPU 0 and the host changed."""
    base = machine(gpus=1)()
    data = base.model_dump(by_alias=True)
    data["gpus"][0].update(changes.get("gpu", {}))
    data["host"].update(changes.get("host", {}))
    report = hw_probe.HardwareReport.model_validate(data)
    return lambda: report


def test_a_full_disk_stops_the_run_before_it_starts(tmp_path):
    bundle = make_bundle(tmp_path)
    run = FakeRun()
    outcome = _verify(bundle, run, free_bytes=lambda path: 1 * GIB)
    step = outcome.step("preflight")
    need = MODEL.params * 2 + 2 * GIB
    assert step.status == "fail" and f"the run needs {need / GIB:.1f} GiB" in step.detail
    assert "random-init checkpoint" in step.detail and "--random-init-dir" in step.hint
    assert run.calls == [] and outcome.step("run").detail.startswith("pre-flight failed")
    assert not outcome.passed


def test_without_random_init_only_the_outputs_need_room(tmp_path):
    bundle = make_bundle(tmp_path)
    ok = _verify(bundle, random_init=False, free_bytes=lambda path: 3 * GIB)
    assert ok.step("preflight").status == "pass"


def test_a_cached_checkpoint_needs_no_room(tmp_path):
    bundle = make_bundle(tmp_path)
    ckpt = bundle / "random-init" / "0123456789abcdef"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text((bundle / "model_config.json").read_text())
    assert cached_checkpoint(bundle / "random-init", bundle / "model_config.json") is None  # not COMPLETE yet
    (ckpt / "COMPLETE").write_text("done\n")
    assert cached_checkpoint(bundle / "random-init", bundle / "model_config.json") == ckpt
    outcome = _verify(bundle, free_bytes=lambda path: 3 * GIB)
    assert outcome.step("preflight").status == "pass" and "cached" in outcome.step("preflight").detail
    # another architecture is not this model's checkpoint
    other = json.loads((ckpt / "config.json").read_text())
    other["num_hidden_layers"] += 1
    (ckpt / "config.json").write_text(json.dumps(other))
    assert cached_checkpoint(bundle / "random-init", bundle / "model_config.json") is None


def test_memory_other_processes_hold_fails_when_the_run_no_longer_fits(tmp_path):
    bundle = make_bundle(tmp_path, plan(micro_batch=8, seq_len=4096, grad_ckpt=False))
    mem, _ = estimate_of(bundle)
    total = machine(gpus=1)().gpus[0].memory_total_bytes
    busy = total - mem.per_gpu_reserved_bytes  # what is left cannot hold the reserve and a context
    run = FakeRun()
    outcome = _verify(bundle, run, probe=_report(gpu={"other_process_bytes": busy}))
    step = outcome.step("preflight")
    assert step.status == "fail" and "GPU 0: other processes hold" in step.detail and run.calls == []
    light = _verify(bundle, probe=_report(gpu={"other_process_bytes": 3 * GIB}))
    assert light.step("preflight").status == "pass"
    assert "other processes hold 3.0 GiB" in light.step("preflight").warnings[0]


def test_a_plan_too_large_for_an_empty_gpu_still_runs(tmp_path):
    """Not fitting an empty GPU is the estimate's finding (MEM001); verify runs it to show what happens."""
    bundle = make_bundle(tmp_path, plan(micro_batch=32, seq_len=4096, grad_ckpt=False))
    mem, _ = estimate_of(bundle)
    assert not mem.fits
    run = FakeRun()
    outcome = _verify(bundle, run)
    assert outcome.step("preflight").status == "pass" and len(run.calls) == 1
    assert outcome.step("rules").status == "fail" and "MEM001" in outcome.step("rules").detail


def test_host_ram_and_the_locked_memory_limit(tmp_path):
    bundle = make_bundle(tmp_path, plan(backend="deepspeed", zero_stage=3, offload="optimizer"))
    mem, _ = estimate_of(bundle)
    assert mem.host_bytes > 0 and mem.pinned_bytes > 0
    short = _verify(bundle, probe=_report(host={"ram_available_bytes": mem.host_bytes}))
    assert short.step("preflight").status == "fail" and "host RAM" in short.step("preflight").detail
    locked = _verify(bundle, probe=_report(host={"locked_memory_limit_bytes": 64 * 1024}))
    step = locked.step("preflight")
    assert step.status == "pass" and any("ulimit -l" in w for w in step.warnings)
