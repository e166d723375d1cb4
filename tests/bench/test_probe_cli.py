"""The probes' command lines (bench/kernel_probe.py, dispatch_probe.py, copy_probe.py, adapter_probe.py,
zero3_hook_probe.py, gkd_probe.py, moe_lora_probe.py; planner_speed.py's --json): a usage error exits 2 with one line and no traceback, before torch is imported, and an existing
output file is never replaced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import kernel_probe as KP

REPO = Path(__file__).resolve().parents[2]
CASE_PROBES = ("bench.kernel_probe", "bench.dispatch_probe", "bench.optimizer_probe")
PROBES = CASE_PROBES + ("bench.copy_probe", "bench.adapter_probe", "bench.zero3_hook_probe", "bench.gkd_probe",
                        "bench.moe_lora_probe")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=REPO, timeout=120)


@pytest.mark.parametrize("probe", CASE_PROBES)
@pytest.mark.parametrize("text", ["a:b:1", "qwen2.5-0.5b:full:x:8", "qwen2.5-0.5b:sideways:1024:2",
                                  "qwen2.5-0.5b:full:0:2", "qwen3-30b-a3b@Lx:full:1024:2",
                                  "qwen3-30b-a3b@L0:full:1024:2"])
def test_malformed_cases_exit_2(tmp_path, probe, text):
    with pytest.raises(ValueError):
        KP.parse_cases(text)
    done = _run(probe, "--out", str(tmp_path / "p.json"), "--cases", text)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "--cases" in done.stderr
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("probe", PROBES)
def test_an_existing_output_is_refused(tmp_path, probe):
    out = tmp_path / "p.json"
    out.write_text("keep")
    done = _run(probe, "--out", str(out))
    assert done.returncode == 2 and "exists" in done.stderr and "Traceback" not in done.stderr
    assert out.read_text() == "keep"


@pytest.mark.parametrize("probe", PROBES)
def test_out_is_required(probe):
    done = _run(probe)
    assert done.returncode == 2 and "--out" in done.stderr and "Traceback" not in done.stderr


def test_copy_probe_refuses_a_partition_too_small_to_time(tmp_path):
    done = _run("bench.copy_probe", "--out", str(tmp_path / "c.json"), "--elements", "10")
    assert done.returncode == 2 and "--elements" in done.stderr
    assert not (tmp_path / "c.json").exists()


def test_offload_terms_takes_no_arguments():
    done = _run("bench.offload_terms", "--bogus")
    assert done.returncode == 2 and "usage" in done.stderr and "Traceback" not in done.stderr


def test_a_case_may_cut_a_model_to_fewer_layers():
    cases = KP.parse_cases("qwen3-30b-a3b@L8:full:1024:8,gemma-2-2b:full:1024:4")
    assert cases == (("qwen3-30b-a3b@L8", "full", 1024, 8), ("gemma-2-2b", "full", 1024, 4))
    moe = KP.case_spec("qwen3-30b-a3b@L8")
    assert (moe.id, moe.layers) == ("qwen3-30b-a3b", 8)
    assert KP.case_spec("qwen3-30b-a3b").layers > 8
    # Gemma-2 is profiled eager (no SDPA path for its soft-capping), as the benchmark and the advisor train it
    assert KP.case_attention(KP.case_spec("gemma-2-2b")) == "eager"
    assert KP.case_attention(moe) == "sdpa"


def test_the_optimizer_probe_takes_full_fine_tunes_only(tmp_path):
    done = _run("bench.optimizer_probe", "--out", str(tmp_path / "p.json"), "--cases", "qwen2.5-0.5b:lora:1024:2")
    assert done.returncode == 2 and "must be full" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("models", ["no-such-model", "qwen3-30b-a3b", "llama-3.2-1b,"])
def test_the_adapter_probe_refuses_models_it_cannot_time(tmp_path, models):
    # unknown ids, and MoE models (their experts are not adapted), are usage errors before anything is written
    done = _run("bench.adapter_probe", "--out", str(tmp_path / "a.json"), "--models", models)
    assert done.returncode == 2 and "--models" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "a.json").exists()


def test_the_adapter_probe_times_each_adapted_linear(tmp_path):
    import json

    out = tmp_path / "a.json"
    done = _run("bench.adapter_probe", "--out", str(out), "--models", "llama-3.2-1b")
    assert done.returncode == 0, done.stderr
    (case,) = json.loads(out.read_text())["cases"]
    # Llama-3.2-1B: 16 layers of seven Linears, every one adapted (all-linear leaves the LM head out)
    assert (case["model"], case["layers"], case["lora_modules"]) == ("llama-3.2-1b", 16, 16 * 7)
    assert case["toggle_ms"] > 0 and case["us_per_lora_module"] == pytest.approx(
        case["toggle_ms"] * 1e3 / case["lora_modules"], rel=0.01)


@pytest.mark.parametrize("args", [["--modules", "3"], ["--modules", "x"], ["--hidden", "100"], ["--hidden", "0"]])
def test_the_zero3_hook_probe_refuses_sizes_it_cannot_time(tmp_path, args):
    done = _run("bench.zero3_hook_probe", "--out", str(tmp_path / "z.json"), *args)
    assert done.returncode == 2 and args[0] in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "z.json").exists()


def test_the_zero3_hook_probe_needs_a_gpu(tmp_path):
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch not installed")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the probe would run")
    done = _run("bench.zero3_hook_probe", "--out", str(tmp_path / "z.json"))
    assert done.returncode == 1 and "no CUDA GPU" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "z.json").exists()


@pytest.mark.parametrize("probe", PROBES + ("bench.data_probe", "bench.decode_probe"))
def test_an_output_in_a_missing_folder_is_refused_before_the_probe_runs(tmp_path, probe):
    # found at the command line, not when the probe first saves after minutes of measuring
    out = tmp_path / "no-such-folder" / "p.json"
    done = _run(probe, "--out", str(out))
    assert done.returncode == 2 and "no folder" in done.stderr and "Traceback" not in done.stderr
    assert not out.parent.exists()


@pytest.mark.parametrize("args", [["--parts", "loss,speed"], ["--parts", ""], ["--models", "no-such-model"]])
def test_gkd_probe_usage_errors_exit_2(tmp_path, args):
    done = _run("bench.gkd_probe", "--out", str(tmp_path / "p.json"), *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "p.json").exists()


def test_planner_speed_never_replaces_a_record(tmp_path):
    """Its --json record is what the README quotes: an existing one is refused before any search runs."""
    out = tmp_path / "planner-speed.json"
    out.write_text("keep")
    done = _run("bench.planner_speed", "--repeats", "1", "--json", str(out))
    assert done.returncode == 2 and "exists" in done.stderr and "Traceback" not in done.stderr
    assert out.read_text() == "keep"
    done = _run("bench.planner_speed", "--repeats", "1", "--json", str(tmp_path / "no" / "p.json"))
    assert done.returncode == 2 and "no folder" in done.stderr
