"""Hand-built models, GPUs, targets, plans and estimate results for the generator tests (independent of the catalogue
and the planner, so these tests fail only when the generator does). Numbers are copied from each row's source."""

from __future__ import annotations

import random

from plan_defaults import build_plan

from advisor.core.plan import Plan
from advisor.core.specs import GpuSpec, ModelSpec
from advisor.core.target import Target

GIB = 1 << 30

MODELS = {
    "llama-3.1-8b": ModelSpec(
        id="llama-3.1-8b", hf_id="meta-llama/Llama-3.1-8B", model_type="llama", layers=32, hidden=4096,
        intermediate=14336, heads=32, kv_heads=8, head_dim=128, vocab=128256, max_positions=131072,
        source="https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"),
    "llama-3.1-70b": ModelSpec(
        id="llama-3.1-70b", hf_id="meta-llama/Llama-3.1-70B", model_type="llama", layers=80, hidden=8192,
        intermediate=28672, heads=64, kv_heads=8, head_dim=128, vocab=128256, max_positions=131072,
        source="https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json"),
    "qwen2.5-7b": ModelSpec(
        id="qwen2.5-7b", hf_id="Qwen/Qwen2.5-7B", model_type="qwen2", layers=28, hidden=3584, intermediate=18944,
        heads=28, kv_heads=4, head_dim=128, vocab=152064, max_positions=131072, qkv_bias=True,
        source="https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json"),
    "qwen2.5-1.5b": ModelSpec(
        id="qwen2.5-1.5b", hf_id="Qwen/Qwen2.5-1.5B", model_type="qwen2", layers=28, hidden=1536,
        intermediate=8960, heads=12, kv_heads=2, head_dim=128, vocab=151936, max_positions=131072,
        tied_embeddings=True, qkv_bias=True, source="https://huggingface.co/Qwen/Qwen2.5-1.5B/blob/main/config.json"),
    "qwen3-30b-a3b": ModelSpec(
        id="qwen3-30b-a3b", hf_id="Qwen/Qwen3-30B-A3B", model_type="qwen3_moe", layers=48, hidden=2048,
        intermediate=0, heads=32, kv_heads=4, head_dim=128, vocab=151936, max_positions=40960, qk_norm=True,
        num_experts=128, experts_per_token=8, moe_intermediate=768,
        source="https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json"),
    "mistral-7b-v0.3": ModelSpec(
        id="mistral-7b-v0.3", hf_id="mistralai/Mistral-7B-v0.3", model_type="mistral", layers=32, hidden=4096,
        intermediate=14336, heads=32, kv_heads=8, head_dim=128, vocab=32768, max_positions=32768,
        source="https://huggingface.co/mistralai/Mistral-7B-v0.3/blob/main/config.json"),
}

GPUS = {
    "H100-80GB": GpuSpec(
        id="H100-80GB", name="NVIDIA H100 80GB HBM3 SXM5", memory_bytes=85520809984, bf16_tflops=989.5,
        fp16_tflops=989.5, fp8_tflops=1979.0, fp32_tflops=67.0, mem_bw_gbps=3350.0, nvlink_gbps=900.0, pcie_gen=5,
        compute_capability="9.0", source="https://www.nvidia.com/en-us/data-center/h100/"),
    "A100-80GB": GpuSpec(
        id="A100-80GB", name="NVIDIA A100-SXM4-80GB", memory_bytes=85899345920, bf16_tflops=312.0,
        fp16_tflops=312.0, fp32_tflops=19.5, mem_bw_gbps=2039.0, nvlink_gbps=600.0, pcie_gen=4,
        compute_capability="8.0", source="https://www.nvidia.com/en-us/data-center/a100/"),
    "RTX-4090": GpuSpec(
        id="RTX-4090", name="NVIDIA GeForce RTX 4090", memory_bytes=25757220864, bf16_tflops=165.2,
        fp16_tflops=165.2, fp8_tflops=330.3, fp32_tflops=82.6, mem_bw_gbps=1008.0, pcie_gen=4,
        compute_capability="8.9", consumer=True,
        source="https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"),
    "T4": GpuSpec(
        id="T4", name="Tesla T4", memory_bytes=16106127360, fp16_tflops=65.0, fp32_tflops=8.1, mem_bw_gbps=320.0,
        pcie_gen=3, compute_capability="7.5", source="https://www.nvidia.com/en-us/data-center/tesla-t4/"),
}


def target(gpu: str = "H100-80GB", gpus: int = 1, nodes: int = 1) -> Target:
    spec = GPUS[gpu]
    link = "nvlink" if spec.nvlink_gbps else ("pcie-nop2p" if spec.consumer else "pcie")
    return Target(gpu=spec, gpus_per_node=gpus, nodes=nodes, intra_node_link=link)


def plan(**kw) -> Plan:
    """A consistent default plan (SFT, full, 1 GPU) with overrides."""
    base = {"seq_len": 2048, "micro_batch": 4, "grad_accum": 4, **kw}
    trainer = base.get("trainer", "sft")
    if trainer in ("grpo", "rloo"):
        base.setdefault("num_generations", 8 if trainer == "grpo" else 2)
        base.setdefault("max_completion_len", base["seq_len"] // 2)
    return build_plan(**base)


def result(p: Plan, *, alternatives: list | None = None) -> dict:
    """A generate --json result with made-up (but contract-shaped) numbers."""
    breakdown = {"weights": 16 * GIB, "gradients": 2 * GIB, "optimizer": 4 * GIB, "activations": 10 * GIB,
                 "logits": GIB, "other": GIB}
    peak = sum(breakdown.values())
    return {
        "request": {"model": "test"},
        "model": {"id": "test", "params": 8_030_261_248, "trainable_params": 8_030_261_248, "layers": 32,
                  "hidden": 4096, "heads": 32, "kv_heads": 8, "vocab": 128256},
        "hardware": {"gpu": "H100-80GB", "gpus_per_node": p.gpus_per_node, "nodes": p.nodes,
                     "gpu_memory_bytes": 85520809984},
        "memory": {"per_gpu_peak_bytes": peak, "per_gpu_reserved_bytes": peak + 2 * GIB,
                   "gpu_capacity_bytes": 85520809984, "fits": True, "headroom_bytes": 85520809984 - peak - 2 * GIB,
                   "breakdown_bytes": breakdown, "host_bytes": 40 * GIB},
        "speed": {"step_seconds": 3.25, "tokens_per_second": 20164.9, "mfu": 0.412},
        "findings": [{"id": "PERF001", "severity": "info", "message": "a finding", "fix": "a fix"}],
        "plan": {k: getattr(p, k) for k in ("backend", "zero_stage", "offload", "method", "precision", "micro_batch",
                                             "grad_accum", "grad_ckpt", "liger", "sp_size", "cp_size", "vllm_mode",
                                             "num_processes", "nodes")},
        "alternatives": alternatives if alternatives is not None else [
            {"plan": p.with_(micro_batch=p.micro_batch * 2).to_dict(), "tokens_per_second": 21000.0,
             "per_gpu_peak_bytes": 90 * GIB, "rejected_because": "does not fit: 90.0 GiB > 79.6 GiB"}],
    }


def random_plan(rng: random.Random) -> tuple[Plan, str, str]:
    """A random plan over every knob (maybe inconsistent; filter with plan_invariants). Returns (plan, model, gpu)."""
    trainer = rng.choice(["sft", "dpo", "grpo", "rloo", "kto", "gkd"])
    backend = rng.choice(["single", "ddp", "deepspeed", "fsdp2"])
    nodes = 1 if backend == "single" else rng.choice([1, 1, 2, 4])
    gpn = 1 if backend == "single" else rng.choice([1, 2, 4, 8])
    vllm = rng.choice(["none", "colocate", "server"]) if trainer in ("grpo", "rloo") else "none"
    vllm_gpus = rng.choice([1, 2]) if vllm == "server" else 0
    procs = (gpn - vllm_gpus) * nodes
    zero = rng.choice([1, 2, 3]) if backend == "deepspeed" else 0
    offload = rng.choice(["none", "none", "optimizer", "all"]) if backend in ("deepspeed", "fsdp2") else "none"
    device = rng.choice(["cpu", "nvme"]) if backend == "deepspeed" else "cpu"
    sp = rng.choice([1, 1, 2, 4, 8]) if backend == "deepspeed" else 1
    cp = rng.choice([1, 1, 2, 4]) if backend == "fsdp2" else 1
    seq = rng.choice([512, 1024, 4096, 32768])
    model = rng.choice(sorted(MODELS))
    gpu = rng.choice(sorted(GPUS))
    ng = rng.choice([2, 4, 8, 16]) if trainer in ("grpo", "rloo") else 0
    p = Plan(
        trainer=trainer, method=rng.choice(["full", "lora", "qlora"]), lora_r=rng.choice([8, 16, 64]),
        backend=backend, zero_stage=zero, offload=offload, offload_device=device,
        precision=rng.choice(["bf16", "bf16-mixed", "fp16-mixed", "fp32"]), seq_len=seq,
        micro_batch=rng.choice([1, 2, 4, 8]), grad_accum=rng.choice([1, 2, 4, 16]), grad_ckpt=rng.random() < 0.7,
        liger=rng.random() < 0.3, attn=rng.choice(["sdpa", "flash_attention_2", "eager"]),
        packing=trainer == "sft" and rng.random() < 0.3, sp_size=sp, cp_size=cp, num_processes=procs, nodes=nodes,
        gpus_per_node=gpn, unsloth=backend in ("single", "ddp") and rng.random() < 0.15, num_generations=ng,
        max_completion_len=seq // rng.choice([2, 4]) if ng else 0, vllm_mode=vllm, vllm_gpus=vllm_gpus,
        vllm_mem_fraction=rng.choice([0.2, 0.3, 0.5]) if vllm == "colocate" else 0.0,
        ref_model=rng.choice(["copy", "precompute", "none", "bema"] if trainer == "dpo" else ["copy", "precompute", "none"])
        if trainer in ("dpo", "kto") else rng.choice(["copy", "none"]), lora_alpha=32,
        trust_remote_code=rng.random() < 0.1,
        # GKD needs a teacher of the same vocabulary: the student's own catalogue row is one
        teacher=MODELS[model].hf_id if trainer == "gkd" else "", teacher_params=MODELS[model].params if trainer == "gkd" else 0,
    )
    return p, model, gpu
