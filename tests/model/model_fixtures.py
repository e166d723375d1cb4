"""Hand-built specs for the model tests, so the pure functions are tested without the catalogue.

Architecture numbers copied from each model's config.json (URLs in `source`); the H200 row from NVIDIA's datasheet
(141 GB HBM3e, 4.8 TB/s, 989.5 dense bf16 TFLOPS, NVLink 900 GB/s) with the memory NVML reports (143771 MiB).
"""

from __future__ import annotations

from plan_defaults import build_plan

from advisor.core.plan import Plan
from advisor.core.specs import GpuSpec, ModelSpec
from advisor.core.target import Target

GIB = 1 << 30

QWEN_05B = ModelSpec(
    id="qwen2.5-0.5b", hf_id="Qwen/Qwen2.5-0.5B", model_type="qwen2", layers=24, hidden=896, intermediate=4864,
    heads=14, kv_heads=2, head_dim=64, vocab=151936, tied_embeddings=True, max_positions=32768, qkv_bias=True,
    source="https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json")
QWEN_7B = ModelSpec(
    id="qwen2.5-7b", hf_id="Qwen/Qwen2.5-7B", model_type="qwen2", layers=28, hidden=3584, intermediate=18944,
    heads=28, kv_heads=4, head_dim=128, vocab=152064, tied_embeddings=False, max_positions=131072, qkv_bias=True,
    source="https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json")
LLAMA_8B = ModelSpec(
    id="llama-3.1-8b", hf_id="meta-llama/Llama-3.1-8B", model_type="llama", layers=32, hidden=4096,
    intermediate=14336, heads=32, kv_heads=8, head_dim=128, vocab=128256, tied_embeddings=False,
    max_positions=131072, source="https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json")
LLAMA2_7B = ModelSpec(
    id="llama-2-7b", hf_id="meta-llama/Llama-2-7b-hf", model_type="llama", layers=32, hidden=4096,
    intermediate=11008, heads=32, kv_heads=32, head_dim=128, vocab=32000, tied_embeddings=False,
    max_positions=4096, source="https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json")
MIXTRAL_LIKE = ModelSpec(
    id="qwen3-30b-a3b", hf_id="Qwen/Qwen3-30B-A3B", model_type="qwen3_moe", layers=48, hidden=2048, intermediate=0,
    heads=32, kv_heads=4, head_dim=128, vocab=151936, tied_embeddings=False, max_positions=40960, qk_norm=True,
    num_experts=128, experts_per_token=8, moe_intermediate=768,
    source="https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json")

MODELS = (QWEN_05B, QWEN_7B, LLAMA_8B, MIXTRAL_LIKE)

H200 = GpuSpec(
    id="H200", name="NVIDIA H200 SXM 141GB", memory_bytes=143771 * (1 << 20), bf16_tflops=989.5, fp16_tflops=989.5,
    fp8_tflops=1979.0, fp32_tflops=67.0, mem_bw_gbps=4800.0, nvlink_gbps=900.0, pcie_gen=5,
    compute_capability="9.0", source="https://www.nvidia.com/en-us/data-center/h200/")


def target(gpus: int = 1, nodes: int = 1) -> Target:
    return Target(gpu=H200, gpus_per_node=gpus, nodes=nodes)


def make_plan(**kw) -> Plan:
    """A single-GPU SFT plan with TRL's defaults (grad checkpointing on, bf16), overridden by `kw`."""
    base = {"micro_batch": 8, **kw}
    if "num_processes" in kw and "gpus_per_node" not in kw:
        base["gpus_per_node"] = kw["num_processes"]
    return build_plan(**base)
