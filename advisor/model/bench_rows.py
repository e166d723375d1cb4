"""Calibration glue: a benchmark result row (bench/results/*.jsonl) as the Plan it measured, and the model's
relative errors on it."""

from __future__ import annotations

from typing import Any

from advisor.core.plan import Plan
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.model.activations import fixed_length_batches
from advisor.model.estimate import estimate_plan


def _get(row: dict, *names: str, default: Any = None) -> Any:
    for n in names:
        if n in row and row[n] is not None:
            return row[n]
    return default


def plan_from_bench_row(row: dict[str, Any]) -> Plan:
    """The Plan a benchmark row measured. Accepts Request names (`zero`, `vllm`) and Plan names (`zero_stage`,
    `vllm_mode`); `gpus` / `num_processes` default to 1 (the calibration runs on one H200). GRPO rows carry `beta`:
    beta > 0 means a KL reference pass (a copy for full fine-tuning, the adapter-disabled base for PEFT), which the
    Plan spells ref_model="copy"."""
    trainer = _get(row, "trainer", default="sft")
    method = _get(row, "method", default="full")
    backend = _get(row, "backend", default="single")
    gpus = int(_get(row, "num_processes", "gpus", default=1))
    ref = _get(row, "ref_model")
    if ref is None:
        beta = _get(row, "beta", default=0.0) or 0.0
        if trainer in ("grpo", "rloo"):
            ref = "copy" if beta > 0 else "none"
        elif trainer in ("dpo", "kto"):
            ref = "copy" if method == "full" else "none"
        elif trainer == "gkd":
            ref = "copy"
        else:
            ref = "none"
    generating = trainer in ("grpo", "rloo")
    return Plan(
        trainer=trainer, method=method, lora_r=int(_get(row, "lora_r", default=16)), backend=backend,
        zero_stage=int(_get(row, "zero_stage", "zero", default=0)) if backend == "deepspeed" else 0,
        offload=_get(row, "offload", default="none"), offload_device=_get(row, "offload_device", default="cpu"),
        precision=_get(row, "precision", default="bf16"), seq_len=int(row["seq_len"]),
        micro_batch=int(row["micro_batch"]), grad_accum=int(_get(row, "grad_accum", default=1)),
        grad_ckpt=bool(_get(row, "grad_ckpt", default=True)), liger=bool(_get(row, "liger", default=False)),
        attn=_get(row, "attn", default="sdpa"), packing=bool(_get(row, "packing", default=False)),
        sp_size=int(_get(row, "sp_size", default=1)), cp_size=int(_get(row, "cp_size", default=1)),
        num_processes=gpus, nodes=int(_get(row, "nodes", default=1)), gpus_per_node=gpus,
        unsloth=bool(_get(row, "unsloth", default=False)),
        num_generations=int(_get(row, "num_generations", default=0) or 0) if generating else 0,
        max_completion_len=int(_get(row, "max_completion_len", default=0) or 0) if generating else 0,
        vllm_mode=_get(row, "vllm_mode", "vllm", default="none"),
        vllm_mem_fraction=float(_get(row, "vllm_mem_fraction", default=0.0)), ref_model=ref,
        # bench.worker writes DeepSpeed's own default per stage unless the row names one (worker.deepspeed_config)
        overlap_comm=bool(_get(row, "overlap_comm", default=backend == "deepspeed" and int(
            _get(row, "zero_stage", "zero", default=0)) == 3)),
    )


def bench_row_errors(row: dict[str, Any], model: ModelSpec, target: Target) -> dict[str, float | None]:
    """Predicted vs measured for one benchmark row: relative errors (predicted / measured - 1) of peak allocated,
    peak reserved and step time; None where the row lacks the measurement."""
    with fixed_length_batches():  # the benchmark's rows all have one length (bench/worker.py)
        mem, spd = estimate_plan(model, plan_from_bench_row(row), target)

    def rel(pred: float, key: str) -> float | None:
        meas = row.get(key)
        return pred / meas - 1.0 if meas else None

    return {"peak_allocated": rel(mem.per_gpu_peak_bytes, "peak_allocated_bytes"),
            "peak_reserved": rel(mem.per_gpu_reserved_bytes, "peak_reserved_bytes"),
            "step_seconds": rel(spd.step_seconds, "step_seconds_median")}
