"""`estimate` end to end (the contract's JSON shape), the human report, the speed model's orderings, the calibration
row -> Plan mapping, and the hot path's cost."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from model_fixtures import LLAMA_8B, QWEN_05B, QWEN_7B, make_plan, target

from advisor.check import render_estimate
from advisor.core.request import Request
from advisor.model.bench_rows import bench_row_errors, plan_from_bench_row
from advisor.model.estimate import (
    BREAKDOWN_KEYS,
    estimate_plan,
    result_dict,
)
from advisor.model.speed import estimate_speed

CONTRACT_TOP = {"request", "model", "hardware", "memory", "speed", "findings"}
CONTRACT_MODEL = {"id", "params", "trainable_params", "layers", "hidden", "heads", "kv_heads", "vocab"}
CONTRACT_HARDWARE = {"gpu", "gpus_per_node", "nodes", "gpu_memory_bytes"}
CONTRACT_MEMORY = {"per_gpu_peak_bytes", "per_gpu_reserved_bytes", "gpu_capacity_bytes", "fits", "headroom_bytes",
                   "breakdown_bytes", "host_bytes"}
CONTRACT_SPEED = {"step_seconds", "tokens_per_second", "mfu"}
REQUEST_KNOBS = {"model", "trainer", "method", "lora_r", "gpus", "nodes", "gpu", "hardware", "seq_len", "micro_batch",
                 "grad_accum", "global_batch", "backend", "zero", "offload", "offload_device", "grad_ckpt", "liger",
                 "attn", "precision", "packing", "sp_size", "cp_size", "unsloth", "num_generations",
                 "max_completion_len", "vllm", "vllm_gpus", "vllm_mem_fraction", "ref_model"}


def check_contract(result: dict) -> None:
    assert CONTRACT_TOP <= set(result)
    assert REQUEST_KNOBS <= set(result["request"])
    assert CONTRACT_MODEL <= set(result["model"])
    assert CONTRACT_HARDWARE <= set(result["hardware"])
    mem = result["memory"]
    assert CONTRACT_MEMORY <= set(mem)
    assert set(mem["breakdown_bytes"]) == set(BREAKDOWN_KEYS)
    assert sum(mem["breakdown_bytes"].values()) == mem["per_gpu_peak_bytes"]
    for key in ("per_gpu_peak_bytes", "per_gpu_reserved_bytes", "gpu_capacity_bytes", "headroom_bytes", "host_bytes"):
        assert isinstance(mem[key], int) and not isinstance(mem[key], bool), key
    assert isinstance(mem["fits"], bool)
    assert CONTRACT_SPEED <= set(result["speed"])
    assert all(isinstance(result["speed"][k], float) for k in CONTRACT_SPEED)
    assert isinstance(result["findings"], list)
    for f in result["findings"]:
        assert {"id", "severity", "message", "fix"} <= set(f)
    json.dumps(result)  # serializable as is


def test_estimate_end_to_end_qwen_7b_lora():
    # The brief's example: --model Qwen/Qwen2.5-7B --method lora --seq-len 2048 --micro-batch 4 --grad-ckpt
    # --gpus 1 --gpu H200 (catalogue lookups, no network).
    catalog = pytest.importorskip("advisor.catalog", reason="the catalogue module is not there yet")
    del catalog
    from advisor.check import estimate_request as estimate

    req = Request(model="Qwen/Qwen2.5-7B", method="lora", seq_len=2048, micro_batch=4, grad_ckpt=True, gpus=1,
                  gpu="H200")
    result = estimate(req)
    check_contract(result)
    assert result["request"]["method"] == "lora" and result["request"]["gpu"] == "H200"
    assert result["model"]["params"] == 7615616512  # Qwen2.5-7B's published parameter count
    mem = result["memory"]
    assert mem["fits"] is True
    # frozen bf16 base (15.2 GB) + fp32 adapters + activations: well under the H200, well above the bare weights
    assert 2 * 7.6e9 < mem["per_gpu_peak_bytes"] < 60e9
    report = render_estimate(result)
    assert "fits: yes" in report and "GiB" in report and "tokens/s" in report


def test_result_dict_without_catalogue():
    p = make_plan(trainer="dpo", ref_model="copy", seq_len=2048, micro_batch=2)
    t = target()
    mem, spd = estimate_plan(QWEN_7B, p, t)
    result = result_dict(None, QWEN_7B, t, p, mem, spd, [])
    check_contract(result)
    assert result["model"]["trainable_params"] == QWEN_7B.params
    assert result["memory"]["detail_bytes"]["reference_model"] > 0


def test_render_says_no_when_it_does_not_fit():
    p = make_plan(seq_len=32768, micro_batch=8, grad_ckpt=False)
    t = target()
    mem, spd = estimate_plan(LLAMA_8B, p, t)
    assert not mem.fits
    text = render_estimate(result_dict(None, LLAMA_8B, t, p, mem, spd, [
        {"id": "MEM001", "severity": "error", "message": "does not fit", "fix": "--grad-ckpt"}]))
    assert "fits: NO" in text and "MEM001" in text and "fix: --grad-ckpt" in text


# ---------------------------------------------------------------------------------------------------- speed
def test_speed_breakdown_adds_up():
    t = target(8)
    for p in (make_plan(method="lora"), make_plan(backend="deepspeed", zero_stage=3, num_processes=8),
              make_plan(trainer="grpo", max_completion_len=512, num_generations=8, grad_accum=4),
              make_plan(backend="deepspeed", zero_stage=2, offload="optimizer", num_processes=8)):
        s = estimate_speed(QWEN_7B, p, t)
        assert sum(s.breakdown.values()) == pytest.approx(s.step_seconds)
        assert all(v >= 0 for v in s.breakdown.values())
        assert 0 < s.mfu < 1


def test_speed_orderings():
    t = target(8)
    base = make_plan(seq_len=2048, micro_batch=4, num_processes=8, backend="ddp", method="lora")
    full = replace(base, method="full", backend="deepspeed", zero_stage=2)
    z3 = replace(full, zero_stage=3)
    off = replace(full, offload="optimizer")

    def sec(p):
        return estimate_speed(LLAMA_8B, p, t).step_seconds

    # LoRA skips the base's weight gradients, but PEFT's adapter kernels cost time of their own: on one H200 a 7B
    # LoRA step of 8k tokens measured 1.063 s against 0.936 s for the full fine-tune's (bench/results
    # h200-2026-12-02-zero-lora.jsonl, h200-2026-12-01-part3.jsonl), so only the matmul work is ordered
    def part(p, key):
        return estimate_speed(LLAMA_8B, p, t).breakdown[key]

    assert part(base, "compute") < part(full, "compute") and part(base, "adapters") > 0 == part(full, "adapters")
    assert sec(full) < sec(z3) < sec(replace(z3, offload="all"))
    assert sec(full) < sec(off)  # CPU Adam and PCIe transfers
    assert sec(replace(full, grad_ckpt=False)) < sec(full)  # recompute costs a forward
    # more tokens per step take longer, but throughput does not fall
    bigger = replace(full, micro_batch=8)
    assert sec(bigger) > sec(full)
    assert estimate_speed(LLAMA_8B, bigger, t).tokens_per_second >= estimate_speed(LLAMA_8B, full, t).tokens_per_second
    # two nodes on a slow network: the step does not get faster than half, communication shows up
    two = replace(z3, num_processes=16, nodes=2)
    s2 = estimate_speed(LLAMA_8B, two, target(8, nodes=2))
    assert s2.breakdown["communication"] > estimate_speed(LLAMA_8B, z3, t).breakdown["communication"]


def test_grpo_generation_dominates_with_hf_generate_and_shrinks_with_vllm():
    t = target()
    p = make_plan(trainer="grpo", micro_batch=8, grad_accum=4, seq_len=1536, max_completion_len=1024,
                  num_generations=8)
    hf = estimate_speed(QWEN_05B, p, t)
    vllm = estimate_speed(QWEN_05B, replace(p, vllm_mode="colocate", vllm_mem_fraction=0.3), t)
    assert hf.breakdown["generation"] > hf.breakdown["compute"]
    assert vllm.breakdown["generation"] < hf.breakdown["generation"]
    assert vllm.breakdown["reference"] > 0  # vLLM importance sampling needs the old-policy log-probs


# ---------------------------------------------------------------------------------------------------- calibration
def test_plan_from_bench_row_and_errors():
    row = {"model": "qwen2.5-0.5b", "trainer": "grpo", "method": "lora", "lora_r": 16, "precision": "bf16",
           "backend": "deepspeed", "zero": 3, "offload": "none", "grad_ckpt": True, "liger": False, "attn": "sdpa",
           "seq_len": 1536, "micro_batch": 8, "grad_accum": 2, "num_generations": 8, "max_completion_len": 1024,
           "ref_model": None, "beta": 0.04, "status": "ok", "peak_allocated_bytes": 10 * 2 ** 30,
           "peak_reserved_bytes": 12 * 2 ** 30, "step_seconds_median": 5.0}
    p = plan_from_bench_row(row)
    assert (p.trainer, p.method, p.backend, p.zero_stage, p.num_processes) == ("grpo", "lora", "deepspeed", 3, 1)
    assert p.ref_model == "copy" and p.max_completion_len == 1024 and p.grad_accum == 2
    errs = bench_row_errors(row, QWEN_05B, target())
    assert set(errs) == {"peak_allocated", "peak_reserved", "step_seconds"}
    assert all(isinstance(v, float) for v in errs.values())
    sft = plan_from_bench_row({"trainer": "sft", "method": "full", "seq_len": 2048, "micro_batch": 1,
                               "backend": "single", "zero_stage": 2})
    assert sft.zero_stage == 0 and sft.ref_model == "none"
    assert bench_row_errors({"trainer": "sft", "seq_len": 512, "micro_batch": 1}, QWEN_05B, target()) == \
        {"peak_allocated": None, "peak_reserved": None, "step_seconds": None}


def test_bench_matrix_rows_map_to_plans():
    matrix = pytest.importorskip("bench.matrix", reason="the benchmark matrix is not there yet")
    build = getattr(matrix, "build_matrix", None)
    if build is None:
        pytest.skip("bench.matrix has no build_matrix() yet")
    rows = build()
    assert rows
    for row in rows:
        p = plan_from_bench_row(row)
        assert (p.trainer, p.method, p.seq_len, p.micro_batch) == (row["trainer"], row["method"], row["seq_len"],
                                                                   row["micro_batch"])
        if row["backend"] == "deepspeed":
            assert p.zero_stage == row["zero"]


# ---------------------------------------------------------------------------------------------------- hot path
