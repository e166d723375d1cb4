"""The documented defaults: every knob `estimate` does not search, set as TRL 1.16 and transformers set it, and the
model a request names."""

from __future__ import annotations

from advisor.core import request as R
from advisor.core.errors import AdvisorError
from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.core.target import Target

# Documented defaults for `estimate` (TRL 1.16 / transformers TrainingArguments defaults where they exist).
DEFAULT_SEQ_LEN = 1024  # SFTConfig/DPOConfig/KTOConfig max_length = 1024
DEFAULT_MICRO_BATCH = 8  # TrainingArguments per_device_train_batch_size = 8
DEFAULT_LORA_R = 16  # TRL ModelConfig lora_r = 16 (alpha 32)
DEFAULT_NUM_GENERATIONS = {"grpo": 8, "rloo": 2}  # GRPOConfig / RLOOConfig num_generations
DEFAULT_MAX_COMPLETION = 512  # GRPOConfig / RLOOConfig max_completion_length
DEFAULT_VLLM_MEM_FRACTION = 0.3  # GRPOConfig vllm_gpu_memory_utilization (colocate)


def resolve_model(req: Request) -> ModelSpec:
    from advisor.catalog import resolve_model as lookup

    return lookup(req.model)


def default_backend(req: Request, world: int) -> str:
    if req.backend:
        return req.backend
    if req.zero is not None or (req.offload not in (None, "none")):
        return "deepspeed"
    if (req.sp_size or 1) > 1:
        return "deepspeed"  # Ulysses SP is DeepSpeed's (accelerate sp_backend "deepspeed"; rule SP002)
    if (req.cp_size or 1) > 1:
        return "fsdp2"  # ring-attention CP needs FSDP2 (accelerate cp_backend "torch")
    return "single" if world == 1 else "ddp"


def default_plan(req: Request, model: ModelSpec, target: Target) -> Plan:
    """Every unpinned knob at its documented default (estimate never searches)."""
    trainer = req.trainer
    generating = trainer in R.GENERATING_TRAINERS
    vllm_mode = req.vllm or "none"
    vllm_gpus = req.vllm_gpus if req.vllm_gpus is not None else (1 if vllm_mode == "server" else 0)
    if vllm_mode != "server":
        vllm_gpus = 0
    world = target.world_size - vllm_gpus * target.nodes if vllm_mode == "server" else target.world_size
    if world < 1:
        raise AdvisorError(f"--vllm-gpus {vllm_gpus} leaves no GPU to train on ({target.gpus_per_node} per node)",
                           hint="give vLLM fewer GPUs, or add GPUs with --gpus")
    backend = default_backend(req, world)
    # ZeRO-3 for Ulysses as in accelerate's ALST example config; ZeRO-2 otherwise (shards grads and optimizer)
    zero = req.zero if req.zero is not None else ((3 if (req.sp_size or 1) > 1 else 2) if backend == "deepspeed"
                                                  else 0)
    method = req.method or "full"
    precision = req.precision or ("bf16" if target.gpu.has_bf16 else "fp16-mixed")
    seq_len = req.seq_len or DEFAULT_SEQ_LEN
    max_completion = (req.max_completion_len or min(DEFAULT_MAX_COMPLETION, seq_len // 2)) if generating else 0
    micro = req.micro_batch or DEFAULT_MICRO_BATCH
    sp = req.sp_size or 1
    cp = req.cp_size or 1
    dp = max(1, world // max(sp, cp))
    accum = req.grad_accum or (max(1, req.global_batch // (micro * dp)) if req.global_batch else 1)
    if req.ref_model:
        ref = req.ref_model
    elif trainer in R.PREFERENCE_TRAINERS or trainer == "rloo":
        # DPO/KTO always score against a frozen reference; RLOO's beta defaults to 0.05 (KL term on). With PEFT the
        # reference is the base model with the adapter disabled: no second copy.
        ref = "none" if method != "full" else "copy"
    elif trainer == "gkd":
        ref = "copy"  # the teacher: by default a second model of the same architecture
    else:
        ref = "none"  # GRPO: beta defaults to 0.0, so no reference model is loaded
    return Plan(
        trainer=trainer, method=method, lora_r=req.lora_r or DEFAULT_LORA_R, backend=backend, zero_stage=zero,
        offload=req.offload or "none", offload_device=req.offload_device or "cpu", precision=precision,
        seq_len=seq_len, micro_batch=micro, grad_accum=accum,
        grad_ckpt=True if req.grad_ckpt is None else req.grad_ckpt,  # TRL's _BaseConfig turns it on by default
        liger=bool(req.liger), attn=req.attn or "sdpa", packing=bool(req.packing), sp_size=sp, cp_size=cp,
        num_processes=world, nodes=target.nodes, gpus_per_node=target.gpus_per_node, unsloth=bool(req.unsloth),
        num_generations=(req.num_generations or DEFAULT_NUM_GENERATIONS[trainer]) if generating else 0,
        max_completion_len=max_completion, vllm_mode=vllm_mode, vllm_gpus=vllm_gpus,
        vllm_mem_fraction=(req.vllm_mem_fraction or DEFAULT_VLLM_MEM_FRACTION) if vllm_mode == "colocate" else 0.0,
        ref_model=ref, lora_alpha=2 * (req.lora_r or DEFAULT_LORA_R), trust_remote_code=req.trust_remote_code,
    )
