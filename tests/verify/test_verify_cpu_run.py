"""One real run: verify a tiny SFT bundle through the real runner, i.e. `bash launch.sh --max-steps 2 --random-init
--synthetic-data` plus train.py's `--cpu` and `--config-overrides` (the tests/generate approach: a 2-layer model
built from model_config.json, no download). launch.sh runs unchanged on the CPU: its `accelerate launch` with the
single-process accelerate.yaml starts train.py, which trains with use_cpu=True."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import sys

import pytest
from verify_cases import make_bundle, plan

from advisor.resolve import hardware as hardware_file
from advisor.verify import verify

pytestmark = [
    pytest.mark.train,
    pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs the [train] extra (trl, torch)"),
    pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash"),
]

TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 512, "head_dim": 16}


def test_verify_runs_a_tiny_bundle_on_the_cpu(tmp_path, monkeypatch):
    bundle = make_bundle(tmp_path, plan(seq_len=64, micro_batch=2, grad_accum=1))
    # the venv's `accelerate` first on PATH; offline; no GPU even where there is one
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    for key, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                       "CUDA_VISIBLE_DEVICES": "", "HF_HOME": str(tmp_path / "hf")}.items():
        monkeypatch.setenv(key, value)
    no_gpu = hardware_file.load_report(os.path.join(os.path.dirname(__file__), "..", "fixtures", "hardware",
                                               "no_gpu.json"))
    outcome = verify(bundle, steps=2, random_init=True, synthetic_data=True, probe=lambda: no_gpu,
                     extra_args=["--cpu", "--config-overrides", json.dumps(TINY)], timeout_seconds=300,
                     progress=None)
    status = {s.name: s.status for s in outcome.steps}
    log = (bundle / "verify.log").read_text()
    assert status["run"] == "pass", f"{outcome.step('run').detail}\n{log[-3000:]}"
    assert outcome.command[:7] == ["bash", "launch.sh", "--max-steps", "2", "--no-save", "--random-init",
                                   "--synthetic-data"]
    assert outcome.measured["steps"] == 2 and outcome.measured["ranks"] == 1
    assert outcome.measured["device"] == "cpu" and outcome.measured["per_gpu_peak_bytes"] is None
    assert outcome.measured["host_peak_rss_bytes"] > 0
    assert status["loss"] == "pass" and outcome.measured["loss_finite"] is True
    losses = [json.loads(x)["loss"] for x in (bundle / "metrics" / "rank0.jsonl").read_text().splitlines()
              if '"loss"' in x and '"event": "log"' in x]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    assert status["bundle"] == status["consistency"] == status["rules"] == "pass"
    assert status["memory"] == "skip" and status["speed"] == "skip"
    assert status["hardware"] == "fail"  # the plan is for an H100: a CPU smoke run verifies no prediction
    assert outcome.passed is False


def test_quick_mode_runs_the_working_copy_for_real(tmp_path, monkeypatch):
    """Quick mode through the real runner: launch.sh and model_config.json linked into the working copy, train.py
    rewritten there, the random-init checkpoint and the metrics in the bundle, the copy gone afterwards."""
    import tempfile

    bundle = make_bundle(tmp_path, plan(seq_len=64, micro_batch=2, grad_accum=4))
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    for key, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                       "CUDA_VISIBLE_DEVICES": "", "HF_HOME": str(tmp_path / "hf")}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    no_gpu = hardware_file.load_report(os.path.join(os.path.dirname(__file__), "..", "fixtures", "hardware",
                                               "no_gpu.json"))
    outcome = verify(bundle, steps=2, random_init=True, synthetic_data=True, probe=lambda: no_gpu,
                     extra_args=["--cpu", "--config-overrides", json.dumps(TINY)], timeout_seconds=300,
                     progress=None)
    assert outcome.quick["quick"] and outcome.quick["grad_accum"] < 4
    log = (bundle / "verify.log").read_text()
    assert outcome.step("run").status == "pass", f"{outcome.step('run').detail}\n{log[-3000:]}"
    records = [json.loads(x) for x in (bundle / "metrics" / "rank0.jsonl").read_text().splitlines()]
    start = next(r for r in records if r["event"] == "start")
    assert start["grad_accum"] == outcome.quick["grad_accum"]  # the Trainer ran the rewritten accumulation
    assert any((bundle / "random-init").glob("*/COMPLETE"))  # the checkpoint is the bundle's, for later runs
    assert list((tmp_path / "tmp").iterdir()) == []  # the working copy is removed
    assert "'grad_accum': 4," in (bundle / "train.py").read_text()
