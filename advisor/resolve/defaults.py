"""The documented defaults: every knob `estimate` does not search, set as TRL 1.16 and transformers set it, and the
model a request names."""

from __future__ import annotations

from advisor.core import request as R
from advisor.core.errors import AdvisorError
from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.resolve.attention import choose_attention, sp_attention

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
    # --vllm-gpus alone means server mode (the only mode with GPUs of its own), as the planner reads it
    vllm_mode = req.vllm or ("server" if req.vllm_gpus else "none")
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
    method = method_options(req)[0]
    precision = req.precision or ("bf16" if target.gpu.has_bf16 else "fp16-mixed")
    seq_len = req.seq_len or DEFAULT_SEQ_LEN
    max_completion = (req.max_completion_len or min(DEFAULT_MAX_COMPLETION, seq_len // 2)) if generating else 0
    micro = req.micro_batch or DEFAULT_MICRO_BATCH
    sp = req.sp_size or 1
    cp = req.cp_size or 1
    dp = max(1, world // max(sp, cp))
    accum = req.grad_accum or (max(1, req.global_batch // (micro * dp)) if req.global_batch else 1)
    ref = reference_options(req, method)[0]
    teacher, teacher_params = resolve_teacher(req, model)
    return Plan(
        trainer=trainer, method=method, lora_r=req.lora_r or DEFAULT_LORA_R, backend=backend, zero_stage=zero,
        offload=req.offload or "none", offload_device=req.offload_device or "cpu", precision=precision,
        seq_len=seq_len, micro_batch=micro, grad_accum=accum,
        grad_ckpt=True if req.grad_ckpt is None else req.grad_ckpt,  # TRL's _BaseConfig turns it on by default
        liger=bool(req.liger), attn=sp_attention(choose_attention(req, model, target, precision)[0], sp),
        packing=bool(req.packing), sp_size=sp, cp_size=cp,
        num_processes=world, nodes=target.nodes, gpus_per_node=target.gpus_per_node, unsloth=bool(req.unsloth),
        num_generations=(req.num_generations or DEFAULT_NUM_GENERATIONS[trainer]) if generating else 0,
        max_completion_len=max_completion, vllm_mode=vllm_mode, vllm_gpus=vllm_gpus,
        vllm_mem_fraction=(req.vllm_mem_fraction or DEFAULT_VLLM_MEM_FRACTION) if vllm_mode == "colocate" else 0.0,
        ref_model=ref, teacher=teacher, teacher_params=teacher_params, lora_alpha=2 * (req.lora_r or DEFAULT_LORA_R),
        trust_remote_code=req.trust_remote_code,
    )


METHOD_ORDER = ("full", "lora", "qlora")
"""Most faithful first: the planner keeps the first method that fits (every weight trained, then adapters)."""


def method_options(req: Request) -> list[str]:
    """The methods a plan may use, most faithful first: the pinned one, else those a pinned --ref-model allows.
    DPO/KTO with --ref-model none means the adapter-disabled base (PEFT only: TRL builds a copy for a fully trained
    model); bema averages full weights and copy is a second model (full only). check_applicable refuses a pinned pair
    that contradicts this."""
    if req.method:
        return [req.method]
    if req.trainer in R.PREFERENCE_TRAINERS and req.ref_model == "none":
        return ["lora", "qlora"]
    if req.ref_model == "bema" or (req.trainer in R.PREFERENCE_TRAINERS and req.ref_model == "copy"):
        return ["full"]  # BEMA averages full weights; an adapter's reference is its base, never a copy
    return list(METHOD_ORDER)


def reference_options(req: Request, method: str) -> list[str]:
    """The reference models a plan of this trainer and method may have, the default first (`estimate` takes it,
    `generate` searches them all). A pinned --ref-model is the only option.

    DPO/KTO always score against a frozen reference. Full fine-tuning: a copy (default), or log-probs precomputed
    once before training (no copy in memory). With PEFT the reference is the base model with the adapter disabled:
    no copy ("none"). RLOO's beta defaults to 0.05 (a KL reference: a copy for full fine-tuning, the adapter-disabled
    base with PEFT); GRPO's to 0.0 (none). GKD: "copy" is the teacher (--teacher)."""
    if req.ref_model:
        return [req.ref_model]
    trainer = req.trainer
    if trainer in R.PREFERENCE_TRAINERS:
        return ["copy", "precompute"] if method == "full" else ["none"]
    if trainer == "rloo":
        return ["copy"] if method == "full" else ["none"]
    if trainer == "gkd":
        return ["copy"]
    return ["none"]


def resolve_teacher(req: Request, model: ModelSpec) -> tuple[str, int]:
    """GKD's teacher as (what train.py loads, its parameter count); ("", 0) for the other trainers. The teacher must
    share the student's vocabulary: GKD compares the two next-token distributions token by token
    (trl/experimental/gkd/gkd_trainer.py generalized_jsd_loss; DistillationTrainer checks vocab_size equality)."""
    if req.trainer != "gkd" or not req.teacher:
        return "", 0
    from advisor.catalog import resolve_model as lookup

    teacher = lookup(req.teacher)
    if teacher.vocab != model.vocab:
        from advisor.catalog import all_models

        # the catalogue's larger models with exactly the student's vocabulary: teachers GKD accepts
        # (the student's own family first: a vocabulary of one size from another family may mean other tokens)
        fits = sorted((m for m in all_models() if m.vocab == model.vocab and m.params > model.params),
                      key=lambda m: (m.model_type != model.model_type, m.params))
        named = ", ".join(m.id for m in fits[:4])
        hint = (f"catalogue teachers with the student's {model.vocab:,}-token vocabulary: {named}" if fits else
                "choose a teacher of the student's family with the same vocab_size (its config.json)")
        raise AdvisorError(f"--teacher {teacher.id} has a vocabulary of {teacher.vocab:,} tokens and the student "
                           f"{model.id} {model.vocab:,}: GKD compares the two distributions over one vocabulary",
                           hint=hint)
    return teacher.hf_id, teacher.loaded_params  # what the teacher loads, a vision tower included
