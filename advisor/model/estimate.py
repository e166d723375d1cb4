"""`trl-advisor estimate`: one configuration, every knob pinned or defaulted, its memory and speed.

`estimate_plan` is the hot path the planner calls for every candidate plan (pure functions, no validation);
`result_dict` builds the `estimate --json` object of CONTRACT.md. Resolving a request and joining the rules'
findings is advisor.check's job.
"""

from __future__ import annotations

from typing import Any

from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.model.job import job_entry
from advisor.model.memory import MemoryEstimate, estimate_memory
from advisor.model.speed import SpeedEstimate, estimate_speed, host_bound_share

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
                  "vocab": model.vocab, "intermediate": model.intermediate, "head_dim": model.head_dim,
                  # frozen, loaded beside the decoder (an image-text model's vision tower; not in params)
                  "vision_params": model.vision_params},
        "hardware": {"gpu": target.gpu.id, "gpus_per_node": target.gpus_per_node, "nodes": target.nodes,
                     "gpu_memory_bytes": target.gpu_memory_bytes, "intra_node_link": target.intra_node_link,
                     "origin": target.origin},
        "memory": {"per_gpu_peak_bytes": mem.per_gpu_peak_bytes,
                   "per_gpu_reserved_bytes": mem.per_gpu_reserved_bytes,
                   "gpu_capacity_bytes": mem.capacity_bytes, "fits": mem.fits, "headroom_bytes": mem.headroom_bytes,
                   "breakdown_bytes": breakdown, "host_bytes": mem.host_bytes, "pinned_bytes": mem.pinned_bytes,
                   "nvme_bytes": mem.nvme_bytes, "peak_phase": mem.phase, "detail_bytes": dict(mem.detail)},
        "speed": {"step_seconds": spd.step_seconds, "tokens_per_second": spd.tokens_per_second, "mfu": spd.mfu,
                  "amortized_seconds_per_step": spd.amortized_seconds,
                  "effective_tokens_per_second": spd.effective_tokens_per_second,
                  "breakdown_seconds": dict(spd.breakdown), "flops_per_step_per_gpu": spd.flops_per_step,
                  "host_bound_share": host_bound_share(plan, spd)},
        "findings": list(findings or []),
        "notes": list(target.notes),
        # the whole run's rate: one-off work outside the steps (precomputed reference log-probs) included
        **job_entry(req, plan, spd.effective_tokens_per_second, target.world_size),
    }
