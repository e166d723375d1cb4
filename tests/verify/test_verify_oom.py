"""A run out of GPU memory: the demand measured from torch's message, whether the files exceed the plan and whether
the estimate of the files was low, and the plan the advisor would choose now."""

from __future__ import annotations

import subprocess
import sys

from verify_cases import FakeRun, machine

from advisor.verify import RunResult, verify
from advisor.verify.metrics import oom_demand
from advisor.verify.replan import recreate_pins

TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.27 GiB. GPU 0 has a total capacity "
             "of 139.81 GiB of which 3.10 GiB is free. Including non-PyTorch memory, this process has 136.70 GiB "
             "memory in use. Of the allocated memory 133.90 GiB is allocated by PyTorch, and 1.90 GiB is reserved by "
             "PyTorch but unallocated.\n")
"""torch 2.11's message (c10/cuda/CUDACachingAllocator.cpp), numbers of a 1.5B run on an H200."""


def _generate(tmp_path, *flags: str):
    out = tmp_path / "b"
    subprocess.run([sys.executable, "-m", "advisor", "generate", "--model", "1.5B", "--gpu", "H200", "--gpus", "1",
                    *flags, "--out", str(out)], check=True, capture_output=True)
    return out


def _edit(bundle, key: str, old, new) -> None:
    train = bundle / "train.py"
    text = train.read_text()
    assert f"'{key}': {old}," in text
    train.write_text(text.replace(f"'{key}': {old},", f"'{key}': {new},", 1))


def _oom(bundle):
    return verify(bundle, runner=FakeRun(returncode=1, log=TORCH_OOM, write_metrics=False),
                  probe=machine("h200_x1"), progress=None, random_init=True, synthetic_data=True)


def test_oom_demand_is_what_pytorch_held_plus_the_failed_request():
    d = oom_demand(["noise", TORCH_OOM])
    assert d["requested_bytes"] == int(9.27 * (1 << 30)) and d["allocated_bytes"] == int(133.90 * (1 << 30))
    assert d["at_least_bytes"] == d["requested_bytes"] + d["allocated_bytes"] and d["gpu"] == 0
    assert oom_demand(["RuntimeError: something else"]) is None


def test_edited_beyond_the_plan_says_so_and_names_the_next_plan(tmp_path):
    bundle = _generate(tmp_path, "--micro-batch", "16", "--seq-len", "2048")
    _edit(bundle, "micro_batch", 16, 48)
    outcome = _oom(bundle)
    memory = outcome.step("memory")
    assert memory.status == "fail"
    assert "it needed at least 143.2 GiB per GPU" in memory.detail
    assert "the files exceed the plan: micro_batch 48 in train.py CONFIG['micro_batch']" in memory.detail
    assert "(plan.json planned 16)" in memory.detail
    assert "the estimate of the files predicted it" in memory.detail  # it does not fit: check --bundle said so
    nxt = outcome.next_plan
    assert nxt and nxt["plan"]["micro_batch"] == 48 and nxt["plan"]["grad_ckpt"] is True  # the edit kept, fitting
    assert nxt["command"].startswith("trl-advisor generate --model 1.5B")
    assert "--micro-batch 48" in nxt["command"] and f"--out {bundle}-next" in nxt["command"]
    assert nxt["command"] in memory.hint and "next plan:" in outcome.render()


def test_an_unedited_bundle_that_runs_out_of_memory_blames_the_estimate(tmp_path):
    bundle = _generate(tmp_path, "--micro-batch", "16", "--seq-len", "2048")
    outcome = _oom(bundle)
    memory = outcome.step("memory")
    assert "the files exceed the plan" not in memory.detail
    assert "the estimate is too low: it predicted" in memory.detail and "at least 143.2 GiB" in memory.detail
    # the configuration that failed does not fit, whatever the model said: the next plan is not it
    nxt = outcome.next_plan
    assert nxt is not None
    assert (nxt["plan"]["micro_batch"], nxt["plan"]["grad_ckpt"]) != (16, False)
    assert nxt["plan"]["micro_batch"] < 16 or nxt["plan"]["grad_ckpt"]


def test_recreate_pins_read_the_bundles_generate_line():
    text = "Re-create: trl-advisor generate --model 8B --trainer sft --gpus 1 --gpu H200 --no-grad-ckpt --liger " \
           "--seq-len 16384 --vllm-mem-fraction 0.3\n"
    assert recreate_pins(text) == {"model": "8B", "trainer": "sft", "gpus": 1, "gpu": "H200", "grad_ckpt": False,
                                   "liger": True, "seq_len": 16384, "vllm_mem_fraction": 0.3}
    assert recreate_pins("no such line") == {}


def test_a_run_out_of_memory_reports_no_peak_but_the_demand(tmp_path):
    """What the metrics logged before the failure (the H200 run of 2026-12-01: 2.9 GiB, the weights loaded) is not
    the run's peak: it is kept apart, the peak error is not computed, and the report gives the demand measured."""
    import json

    from advisor.verify.report import markdown

    bundle = _generate(tmp_path, "--micro-batch", "16", "--seq-len", "2048")
    _edit(bundle, "micro_batch", 16, 48)

    def runner(command, *, cwd, log_path, timeout_seconds):
        folder = bundle / "metrics"
        folder.mkdir(exist_ok=True)
        (folder / "rank0.jsonl").write_text(json.dumps(
            {"event": "start", "rank": 0, "world_size": 1, "device": "cuda:0", "peak_allocated_bytes": 3089396224,
             "peak_reserved_bytes": 3145728000, "host_peak_rss_bytes": 4301004800}) + "\n")
        log_path.write_text(TORCH_OOM)
        return RunResult(returncode=1, seconds=30.0)

    outcome = verify(bundle, runner=runner, probe=machine("h200_x1"), progress=None, random_init=True,
                     synthetic_data=True)
    m = outcome.measured
    assert m["out_of_memory"] is True and m["per_gpu_peak_bytes"] is None
    assert m["per_gpu_peak_recorded_bytes"] == 3089396224
    assert m["per_gpu_peak_at_least_bytes"] == int(9.27 * (1 << 30)) + int(133.90 * (1 << 30))
    assert outcome.error_pct["per_gpu_peak_bytes"] is None
    assert "| peak allocated per GPU | out of memory: needed at least 143.2 GiB |" in markdown(outcome)
    json.dumps(outcome.to_json(), allow_nan=False)


def test_a_run_that_fits_says_it_did_not_run_out_of_memory(tmp_path):
    bundle = _generate(tmp_path, "--micro-batch", "4", "--seq-len", "1024")
    outcome = verify(bundle, runner=FakeRun(), probe=machine("h200_x1"), progress=None, random_init=True,
                     synthetic_data=True)
    assert outcome.measured["out_of_memory"] is False and outcome.measured["per_gpu_peak_bytes"]
    assert outcome.error_pct["per_gpu_peak_bytes"] is not None
