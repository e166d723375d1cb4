"""End to end on CPU: `python -m bench.run --device cpu` with tiny models, through the same parent, fork and child
code the GPU run uses, for SFT, DPO (full with a reference copy, LoRA without) and GRPO (beta 0 and 0.04). Proves
the TRL 1.16 calls; the memory fields stay empty on CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.train

ROOT = Path(__file__).resolve().parents[2]

TINY = {"id": "tiny-qwen2", "model_type": "qwen2", "layers": 2, "hidden": 64, "intermediate": 128, "heads": 4,
        "kv_heads": 2, "vocab": 512, "tied_embeddings": True}
TINY_LLAMA = {"id": "tiny-llama", "model_type": "llama", "layers": 2, "hidden": 64, "intermediate": 128, "heads": 4,
              "kv_heads": 2, "vocab": 512, "tied_embeddings": False}


def tiny_row(name, arch=TINY, **kw):
    r = {"name": name, "model": arch["id"], "trainer": "sft", "method": "full", "lora_r": None, "seq_len": 64,
         "micro_batch": 2, "grad_accum": 1, "backend": "single", "zero": 0, "offload": "none", "grad_ckpt": True,
         "liger": False, "attn": "sdpa", "precision": "bf16", "num_generations": None, "max_completion_len": None,
         "ref_model": None, "beta": None, "arch": arch}
    r.update(kw)
    return r


ROWS = [
    tiny_row("tiny-sft-full"),
    tiny_row("tiny-sft-lora-mixed-ga2", arch=TINY_LLAMA, method="lora", lora_r=8, precision="bf16-mixed",
             grad_accum=2, grad_ckpt=False),
    tiny_row("tiny-dpo-full-ref-copy", trainer="dpo", ref_model="copy"),
    tiny_row("tiny-dpo-lora-no-ref", trainer="dpo", method="lora", lora_r=8, ref_model="none", profile_step=True),
    tiny_row("tiny-grpo-beta0", trainer="grpo", micro_batch=4, num_generations=4, max_completion_len=16, beta=0.0),
    tiny_row("tiny-grpo-beta004", trainer="grpo", micro_batch=4, num_generations=2, max_completion_len=16,
             beta=0.04),
]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    pytest.importorskip("trl")
    tmp = tmp_path_factory.mktemp("bench-cpu")
    rows_file = tmp / "rows.json"
    rows_file.write_text(json.dumps(ROWS))
    out = tmp / "out.jsonl"
    cmd = [sys.executable, "-m", "bench.run", "--device", "cpu", "--rows-file", str(rows_file), "--out", str(out),
           "--steps", "2", "--warmup", "1"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = {r["name"]: r for r in map(json.loads, out.read_text().splitlines())}
    return recs, proc.stdout, (tmp / "out.log").read_text()


def test_every_tiny_row_trains(records):
    recs, stdout, log = records
    assert set(recs) == {r["name"] for r in ROWS}
    for name, r in recs.items():
        assert r["status"] == "ok", (name, r.get("error"), r.get("log_tail"))
        assert r["runner"] == "fork"
        assert r["loss"]["finite"] and r["loss"]["values"], name
        assert len(r["timing"]["step_seconds"]) == 1 + r["timing"]["measured_steps"]
        assert r["timing"]["median_step_seconds"] > 0
        # each step's host phases (bench.worker._time_phases): every micro-batch's forward and backward timed,
        # inside the step
        phases = r["timing"]["phases"]
        assert len(phases) == len(r["timing"]["step_seconds"])
        for p, step in zip(phases, r["timing"]["step_seconds"], strict=True):
            assert p["micro_batches"] == r["row"]["grad_accum"], (name, p)
            assert 0 < p["backward_host_s"] and 0 < p["forward_host_s"]
            assert p["forward_host_s"] + p["backward_host_s"] + p["wait_after_backward_s"] <= step * 1.001 + 1e-4
        assert r["data"]["sample_tokens"] == 64, (name, r["data"])
        assert r["memory"] == {} or r["memory"].get("peak_allocated_bytes") is None  # CPU: no memory fields
        assert r["model"]["params"] == r["model"]["params_expected"] or r["row"]["method"] == "lora"
        assert r["env"]["versions"]["trl"]
        assert f"{name} " in stdout  # one line per row as it finishes
    assert "ran: ok 6" in stdout and "===== tiny-sft-full status=ok" in log


def test_resolved_trl_settings(records):
    recs, _, _ = records
    sft = recs["tiny-sft-full"]["resolved"]
    assert sft["config_class"] == "SFTConfig" and sft["args"]["max_length"] == 64
    assert sft["args"]["packing"] is False and sft["args"]["gradient_checkpointing"] is True
    assert sft["optimizer"]["exp_avg_dtype"] == "torch.bfloat16"  # bf16 model: AdamW moments in bf16
    lora = recs["tiny-sft-lora-mixed-ga2"]
    assert lora["resolved"]["args"]["gradient_accumulation_steps"] == 2
    assert lora["model"]["dtype"] == "float32" and lora["resolved"]["args"]["bf16"] is True
    assert 0 < lora["model"]["trainable_params"] < lora["model"]["params"]
    assert lora["timing"]["tokens_per_step"] == 2 * 2 * 64


def test_dpo_reference_models(records):
    recs, _, _ = records
    full, lora = recs["tiny-dpo-full-ref-copy"], recs["tiny-dpo-lora-no-ref"]
    assert full["resolved"]["ref_model"].startswith("explicit deepcopy")
    assert lora["resolved"]["ref_model"].startswith("none")
    for r in (full, lora):
        assert r["data"]["chosen_tokens"] == r["data"]["rejected_tokens"] == 64
        assert r["timing"]["tokens_per_step"] == 2 * 2 * 64


def test_grpo_generation_and_reference(records):
    recs, _, _ = records
    b0, b4 = recs["tiny-grpo-beta0"], recs["tiny-grpo-beta004"]
    assert b0["resolved"]["ref_model_loaded"] is False and b4["resolved"]["ref_model_loaded"] is True
    for r in (b0, b4):
        assert r["resolved"]["args"]["num_generations"] == r["row"]["num_generations"]
        assert r["resolved"]["generation_kwargs_used"]["min_new_tokens"] == 16
        assert r["resolved"]["generation_kwargs_used"]["top_k"] == 50
        lengths = [h["completions/mean_length"] for h in r["log_history"] if "completions/mean_length" in h]
        assert lengths and all(x == 16 for x in lengths)  # never stops early: every completion is full length
        assert r["data"]["prompt_tokens"] == 48
    assert any("kl" in h for h in b4["log_history"])


def test_profiled_step_runs_after_the_measured_ones(records):
    """A row with profile_step trains one step more, under torch.profiler, and keeps it out of the step times."""
    recs, _, _ = records
    prof = recs["tiny-dpo-lora-no-ref"]
    timing = prof["timing"]
    assert prof["profile"]["step"] == len(timing["step_seconds"]) == 1 + timing["measured_steps"]
    assert prof["profile"]["wall_s"] > 0 and prof["profile"]["kernels"] == 0  # CPU: no CUDA kernels to count
    assert len(prof["loss"]["values"]) == len(timing["step_seconds"]) + 1
    assert all("profile" not in r for n, r in recs.items() if n != "tiny-dpo-lora-no-ref")
