"""`trl-advisor estimate`: one configuration, every knob pinned or defaulted, its memory and speed.

`estimate_plan` is the hot path the planner calls for every candidate plan (pure functions, no validation);
`estimate` resolves a Request and builds the `estimate --json` result of CONTRACT.md; `render_estimate` is the
human report. `plan_from_bench_row` turns a benchmark result row into the Plan it measured, for calibration.
"""

from __future__ import annotations

from typing import Any

from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.model.memory import MemoryEstimate, estimate_memory
from advisor.model.speed import SpeedEstimate, estimate_speed

BREAKDOWN_KEYS = ("weights", "gradients", "optimizer", "activations", "logits", "other")


def estimate_plan(model: ModelSpec, plan: Plan, target: Target) -> tuple[MemoryEstimate, SpeedEstimate]:
    """Memory and speed of one fully resolved plan (the planner calls this for thousands of candidates)."""
    mem = estimate_memory(model, plan, target)
    return mem, estimate_speed(model, plan, target, mem)


def request_dict(req: Request | None, model: ModelSpec, plan: Plan, target: Target) -> dict[str, Any]:
    """Every REQUEST knob, resolved (Request's names), plus the plan fields that have no flag."""
    return {
        "model": model.id, "trainer": plan.trainer, "method": plan.method, "lora_r": plan.lora_r,
        "gpus": target.gpus_per_node, "nodes": target.nodes, "gpu": target.gpu.id,
        "hardware": req.hardware if req is not None else None,
        "seq_len": plan.seq_len, "micro_batch": plan.micro_batch, "grad_accum": plan.grad_accum,
        "global_batch": plan.global_batch, "backend": plan.backend, "zero": plan.zero_stage,
        "offload": plan.offload, "offload_device": plan.offload_device, "grad_ckpt": plan.grad_ckpt,
        "liger": plan.liger, "attn": plan.attn, "precision": plan.precision, "packing": plan.packing,
        "sp_size": plan.sp_size, "cp_size": plan.cp_size, "unsloth": plan.unsloth,
        "num_generations": plan.num_generations, "max_completion_len": plan.max_completion_len,
        "vllm": plan.vllm_mode, "vllm_gpus": plan.vllm_gpus, "vllm_mem_fraction": plan.vllm_mem_fraction,
        "ref_model": plan.ref_model, "trust_remote_code": plan.trust_remote_code,
        # plan fields without a flag
        "num_processes": plan.num_processes, "dp_size": plan.dp_size, "lora_alpha": plan.lora_alpha,
        "tokens_per_step": plan.tokens_per_step,
    }


def result_dict(req: Request | None, model: ModelSpec, target: Target, plan: Plan, mem: MemoryEstimate,
                spd: SpeedEstimate, findings: list[dict] | None = None) -> dict[str, Any]:
    """The `estimate --json` object of CONTRACT.md (every contract key, plus detail)."""
    trainable = model.lora_params(plan.lora_r) if plan.method in ("lora", "qlora") else model.params
    breakdown = mem.breakdown
    return {
        "request": request_dict(req, model, plan, target),
        "model": {"id": model.id, "hf_id": model.hf_id, "params": model.params, "trainable_params": trainable,
                  "layers": model.layers, "hidden": model.hidden, "heads": model.heads, "kv_heads": model.kv_heads,
                  "vocab": model.vocab, "intermediate": model.intermediate, "head_dim": model.head_dim},
        "hardware": {"gpu": target.gpu.id, "gpus_per_node": target.gpus_per_node, "nodes": target.nodes,
                     "gpu_memory_bytes": target.gpu_memory_bytes, "intra_node_link": target.intra_node_link,
                     "origin": target.origin},
        "memory": {"per_gpu_peak_bytes": mem.per_gpu_peak_bytes,
                   "per_gpu_reserved_bytes": mem.per_gpu_reserved_bytes,
                   "gpu_capacity_bytes": mem.capacity_bytes, "fits": mem.fits, "headroom_bytes": mem.headroom_bytes,
                   "breakdown_bytes": breakdown, "host_bytes": mem.host_bytes, "pinned_bytes": mem.pinned_bytes,
                   "peak_phase": mem.phase, "detail_bytes": dict(mem.detail)},
        "speed": {"step_seconds": spd.step_seconds, "tokens_per_second": spd.tokens_per_second, "mfu": spd.mfu,
                  "breakdown_seconds": dict(spd.breakdown), "flops_per_step_per_gpu": spd.flops_per_step},
        "findings": list(findings or []),
        "notes": list(target.notes),
    }


# ---------------------------------------------------------------------------------------------------------------------
# Calibration: benchmark rows -> plans
# ---------------------------------------------------------------------------------------------------------------------
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
    )


def bench_row_errors(row: dict[str, Any], model: ModelSpec, target: Target) -> dict[str, float | None]:
    """Predicted vs measured for one benchmark row: relative errors (predicted / measured - 1) of peak allocated,
    peak reserved and step time; None where the row lacks the measurement."""
    mem, spd = estimate_plan(model, plan_from_bench_row(row), target)

    def rel(pred: float, key: str) -> float | None:
        meas = row.get(key)
        return pred / meas - 1.0 if meas else None

    return {"peak_allocated": rel(mem.per_gpu_peak_bytes, "peak_allocated_bytes"),
            "peak_reserved": rel(mem.per_gpu_reserved_bytes, "peak_reserved_bytes"),
            "step_seconds": rel(spd.step_seconds, "step_seconds_median")}
