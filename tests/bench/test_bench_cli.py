"""The bench.run command line: listing, bad input, import plan, summary formatting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import run as BR

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "bench.run", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_list_prints_every_row_without_heavy_imports():
    proc = subprocess.run([sys.executable, "-c", "import sys, bench.run as r; rc = r.main(['--list']); "
                           "print('HEAVY', sorted(m for m in ('torch', 'trl', 'deepspeed') if m in sys.modules)); "
                           "sys.exit(rc)"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "HEAVY []" in lines
    from bench.matrix import build_matrix

    rows = build_matrix()
    holdout = sum(r["split"] == "holdout" for r in rows)
    assert any(line.startswith(f"{len(rows)} rows, {holdout} holdout") for line in lines)
    # the attention column: the advisor's choice on this machine for rows without a pin (Gemma-2 rejects sdpa: eager
    # where neither flash-attn nor kernels is installed)
    from bench import models as BM

    expected = BM.machine_attention({"attn": None, "precision": "bf16"}, BM.resolve("gemma-2-2b"))[0]
    assert expected in ("eager", "flash_attention_2")
    gemma = [line for line in lines if line.startswith("sft-g2-2b-")]
    assert gemma and all(line.split()[3] == expected[:6] for line in gemma)


def test_unknown_row_name_is_a_usage_error(tmp_path):
    proc = run_cli("--out", str(tmp_path / "x.jsonl"), "--only", "no-such-row")
    assert proc.returncode == 2 and "unknown row name" in proc.stderr


def test_invalid_rows_file_is_rejected(tmp_path):
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([{"name": "x", "model": "qwen2.5-0.5b"}]))
    proc = run_cli("--out", str(tmp_path / "x.jsonl"), "--rows-file", str(rows), "--device", "cpu")
    assert proc.returncode == 2 and "missing" in proc.stderr


def test_out_is_required():
    proc = run_cli()
    assert proc.returncode == 2 and "--out is required" in proc.stderr


def test_nothing_to_do_when_everything_is_recorded(tmp_path):
    out = tmp_path / "x.jsonl"
    name = "sft-q0.5b-full-bf16-single-ckpt-s512-b1"
    out.write_text(json.dumps({"name": name, "status": "ok"}) + "\n")
    proc = run_cli("--out", str(out), "--only", name)
    assert proc.returncode == 0 and "nothing to run" in proc.stdout


def test_skipping_a_unit_skips_the_units_that_import_it():
    assert BR.units_to_skip("bitsandbytes") == {"bitsandbytes", "peft", "trl"}
    assert BR.units_to_skip("peft") == {"peft", "trl"}
    assert BR.units_to_skip("deepspeed") == {"deepspeed"}
    names = [u for u, _, _ in BR.IMPORT_UNITS]
    for unit, _, dependents in BR.IMPORT_UNITS:
        for d in dependents:  # a dependent is imported after what it depends on
            assert names.index(d) > names.index(unit)


def test_result_line_and_table():
    ok = {"name": "a", "status": "ok", "wall_seconds": 12.0,
          "memory": {"peak_allocated_bytes": 3 * 2**30, "peak_reserved_bytes": 4 * 2**30},
          "timing": {"median_step_seconds": 0.25, "tokens_per_second": 32768.0}}
    oom = {"name": "b", "status": "oom", "wall_seconds": 5.0, "error": "OutOfMemoryError: CUDA out of memory",
           "memory": {"peak_allocated_bytes": 130 * 2**30}, "timing": {}}
    line = BR.result_line(ok)
    assert "ok" in line and "3.0 GiB" in line and "0.250 s" in line
    assert "OutOfMemoryError" in BR.result_line(oom) and "130.0" in BR.result_line(oom)
    from bench.runner import Summary

    table = BR.summary_table(Summary(results=[ok, oom], skipped=["c"], resumed=["d"]))
    assert "ran: ok 1, oom 1; already done: 1; skipped for the budget: 1" in table
    assert "skipped: c" in table


@pytest.mark.train
def test_preimport_on_cpu_loads_the_stack_without_cuda():
    pytest.importorskip("trl")
    rows = [{"backend": "deepspeed", "liger": False}]
    info = BR.preimport(rows, "cpu", None)
    assert "trl.trainer.grpo_trainer" in info["modules"] and "deepspeed" in info["modules"]
    assert "liger_kernel.transformers" not in info["modules"]  # no Liger row: not imported
    assert info["initialized_by"] is None and info["cuda_initialized_in_parent"] is False


@pytest.mark.train
def test_budget_too_small_skips_and_records(tmp_path):
    pytest.importorskip("trl")
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([{
        "name": "tiny", "model": "tiny", "trainer": "sft", "method": "full", "lora_r": None, "seq_len": 32,
        "micro_batch": 1, "grad_accum": 1, "backend": "single", "zero": 0, "offload": "none", "grad_ckpt": False,
        "liger": False, "attn": "sdpa", "precision": "bf16", "num_generations": None, "max_completion_len": None,
        "ref_model": None, "beta": None, "est_seconds": 10_000,
        "arch": {"model_type": "llama", "layers": 1, "hidden": 32, "intermediate": 64, "heads": 2, "kv_heads": 1,
                 "vocab": 128, "tied_embeddings": False}}]))
    out = tmp_path / "out.jsonl"
    proc = run_cli("--device", "cpu", "--rows-file", str(rows), "--out", str(out), "--budget-seconds", "60")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = json.loads(out.read_text().splitlines()[0])
    assert rec["status"] == "skipped" and "time budget" in rec["reason"]
    assert "skipped: tiny" in proc.stdout


def test_generation_steps_applies_to_generating_rows_without_their_own():
    a = BR.parse_args(["--list", "--generation-steps", "5"])
    rows = BR.load_rows(a)
    gen = [r for r in rows if r["trainer"] in ("grpo", "rloo")]
    assert gen and all(r["generation_steps"] == (5 if not r["name"].startswith("pq-") else r["generation_steps"])
                       for r in gen)
    assert all("generation_steps" not in r for r in rows if r["trainer"] not in ("grpo", "rloo"))
    # the planning estimate counts the extra steps
    plain = {r["name"]: r["est_seconds"] for r in BR.load_rows(BR.parse_args(["--list"]))}
    assert all(r["est_seconds"] > plain[r["name"]] for r in gen if r["name"] in plain)


def test_generation_steps_must_be_positive():
    with pytest.raises(SystemExit) as exc:
        BR.parse_args(["--list", "--generation-steps", "0"])
    assert exc.value.code == 2
