"""Runtime and framework buffers (the `other` part): DDP and ZeRO buckets, FSDP2's unsharded layers and accumulated
gradients, ZeRO-3's gathered parameters, QLoRA's dequantized weight, the reference or teacher model and its
no-grad forward."""

from __future__ import annotations

from advisor.core.plan import Plan
from advisor.model.activations import _eager, local_tokens, logit_tokens
from advisor.model.dims import Dims, Precision
from advisor.model.states import shard_count, trainable_params
from advisor.model.units import CHUNK_TOKENS, CHUNK_VOCAB, DS_PREFETCH_FACTOR, FP32, HALF, NF4_BYTES_PER_PARAM


# ---------------------------------------------------------------------------------------------------------------------
# Runtime and framework buffers (`other`)
# ---------------------------------------------------------------------------------------------------------------------
def ddp_bucket_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """DDP gradient buckets: accelerate's DistributedDataParallelKwargs(gradient_as_bucket_view=False) and torch DDP's
    default keep flat bucket copies of every trainable gradient, allocated at wrap time (torch/nn/parallel/
    distributed.py Reducer), on top of param.grad."""
    if plan.backend != "ddp" or plan.num_processes <= 1:
        return 0
    adapter = plan.method in ("lora", "qlora")
    return trainable_params(d, plan) * (pr.adapter if adapter else pr.load)


def zero_bucket_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """DeepSpeed reduce buckets with the HF integration's "auto" reduce_bucket_size = hidden^2 elements (api-facts.md
    3.5): ZeRO-1/2 keep one 16-bit ipg buffer (two with overlap_comm, which the bundles turn on and DeepSpeed's default
    leaves off below stage 3; stage_1_and_2.py setup_buckets);
    ZeRO-3 keeps one ipg bucket per communication dtype plus the reduce-scatter staging buffer of one bucket
    (stage3.py ipg_buckets, _reduce_scatter). ZeRO-0 (BF16_Optimizer) has none.
    ZeRO-1/2 with the optimizer offloaded also keep a GPU staging buffer of the largest parameter's size, in the
    16-bit dtype, for the gradients on their way to the host (stage_1_and_2.py temp_grad_buffer_for_gpu_offload,
    allocated at init): measured, the ZeRO-2 offload rows of bench/rows/offload-stages-2026-12-02.json were
    under-predicted by about this buffer (Qwen2.5-1.5B 0.40 GiB against a 0.43 GiB buffer, Qwen3-1.7B 0.53 against
    0.58, SmolLM2-1.7B 0.33 against 0.19) while their ZeRO-3 twins matched. With gradient accumulation the boundary
    micro-batch reloads each parameter's host-accumulated gradient through that buffer and clones it
    (_restore_cpu_offload_grad_to_gpu: `restored = dest_buffer.view_as(param).clone()`), one more of the largest
    parameter's size: Llama-3.2-1B's ZeRO-2 offload row took 0.47 GiB more at grad_accum 4 than at 1, its 128256 x 2048
    embedding is 0.49 GiB in bf16 (bench/rows/offload-check-2026-12-02.json)."""
    if plan.backend != "deepspeed" or plan.zero_stage == 0:
        return 0
    bucket = d.h * d.h * pr.work
    if plan.zero_stage == 3:
        return 2 * bucket
    staging = d.largest_module * pr.work * (2 if plan.grad_accum > 1 else 1) if plan.offload != "none" else 0
    # with overlap_comm a second ipg buffer, so one bucket can fill while the other is reduced (setup_buckets buf_1)
    return bucket * (2 if plan.overlap_comm else 1) + staging


def fsdp_accumulated_grad_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """FSDP2 with gradient accumulation: accelerate 1.15's Accelerator.no_sync calls
    model.set_requires_gradient_sync(False) on the micro-batches that do not step, and torch's FSDP2 then keeps each
    parameter's UNSHARDED gradient, in the compute dtype (reduce_dtype == param_dtype bf16 is clamped to None,
    _fsdp_param.py init_dtype_attrs / to_accumulated_grad_if_needed), until the micro-batch that syncs reduce-scatters
    it. So a whole unsharded copy of the trainable gradients is held through the accumulation, whatever the number of
    ranks, instead of the 1/N sharded gradients (zeroed after each step)."""
    if plan.backend != "fsdp2" or plan.grad_accum <= 1:
        return 0
    return trainable_params(d, plan) * pr.compute


def zero3_live_param_bytes(d: Dims, plan: Plan, pr: Precision, *, in_layers: bool = False) -> int:
    """ZeRO-3 parameters gathered while a module runs: DeepSpeed's estimate_zero3 adds 4 x largest_layer (16-bit params
    plus 16-bit grads of the largest module); the prefetch bucket ("auto": 0.9 hidden^2 elements) and the params under
    the persistence threshold (10 hidden: norms, biases), which stay gathered on every rank. A frozen module (LoRA
    base) has no grad.
    in_layers: while a decoder layer runs (its recompute and backward). With adapters the frozen embedding and LM head
    are released after their own forward / backward and hold no gradient, so the largest module gathered then is a
    layer's: measured (bench/rows/zero-lora-2026-12-02.json, checkpointed ZeRO-3 LoRA, whose peak is a layer's
    recompute), counting the embedding there over-predicted 1B-7B runs by 0.4-1.0 GiB. A full fine-tune keeps the
    embedding-sized head gradient (counted with the logits), and its rows match with the embedding counted."""
    if plan.backend != "deepspeed" or plan.zero_stage != 3:
        return 0
    if in_layers and plan.method != "full":
        prefetch = int(DS_PREFETCH_FACTOR * d.h * d.h) * pr.work
        return d.largest_layer_module * pr.work + prefetch + d.persistent_small * pr.work
    # When the largest module is the embedding / LM head, its gradient is the head's, which the logits transient
    # already counts (the head's backward is when it exists next to the gathered weight). Measured: ZeRO-3 +
    # optimizer offload, Qwen2.5-1.5B and 3B (tied 151936 x hidden embeddings), were over-predicted by exactly that
    # gradient (0.4 and 0.6 GiB) when it was counted twice.
    head_is_largest = d.largest_module == d.embed
    lmax = d.largest_module * pr.work * (2 if plan.method == "full" and not head_is_largest else 1)
    prefetch = int(DS_PREFETCH_FACTOR * d.h * d.h) * pr.work
    return lmax + prefetch + d.persistent_small * pr.work


def fsdp_unsharded_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """FSDP2 (fully_shard per decoder layer, reshard_after_forward=True): the root module (embeddings, final norm,
    LM head) is not resharded between forward and backward, so it stays gathered; two layers are unsharded at once
    (the running one and the prefetched next), and one layer's unsharded gradients exist before their reduce-scatter.
    Gathered in the compute dtype (MixedPrecisionPolicy param_dtype bf16)."""
    if plan.backend != "fsdp2":
        return 0
    cb = pr.compute
    layer = d.layer
    if plan.method == "qlora":
        layer = int(d.quantized / d.L * NF4_BYTES_PER_PARAM / cb) + (d.layer - d.quantized // d.L)
    root = d.embed + (0 if d.model.tied_embeddings else d.lm_head)
    grads = d.layer if plan.method == "full" else trainable_params(d, plan) // d.L
    return cb * (root + 2 * layer + grads)


def qlora_dequant_bytes(d: Dims, plan: Plan) -> int:
    """bitsandbytes MatMul4Bit dequantizes the 4-bit weight of the running Linear to bf16 (forward, and again in the
    backward for the input grad): one bf16 copy of the widest Linear in flight."""
    return HALF * d.max_linear if plan.method == "qlora" else 0


def reference_model_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """A second, frozen model: the DPO/KTO/GRPO/RLOO reference when ref_model is "copy" or "bema" (full fine-tuning;
    with PEFT TRL disables the adapter instead, no copy; BEMA moves a copy's weights, it is a copy on the GPU), and the
    GKD teacher (--teacher: its own parameter count). Loaded like the policy (load dtype; DeepSpeed prepare_deepspeed
    -> 16-bit, ZeRO-3-partitioned at stage 3; FSDP2 prepare_fsdp -> sharded)."""
    params = frozen_model_params(d, plan)
    if not params:
        return 0
    n = shard_count(plan)
    if plan.backend == "deepspeed":
        b = params * pr.work
        return b // n if plan.zero_stage == 3 else b
    b = params * pr.load
    return b // n if plan.backend == "fsdp2" else b


def frozen_model_params(d: Dims, plan: Plan) -> int:
    """Parameters of the frozen second model a run keeps on the GPUs (reference_model_bytes), 0 without one."""
    if plan.trainer == "gkd":
        copy = plan.ref_model != "none"
    else:
        copy = plan.ref_model in ("copy", "bema") and plan.method == "full"
    if not copy:
        return 0
    # the policy's copy loads the same class, its vision tower included (ModelSpec.vision_params)
    return plan.teacher_params if plan.trainer == "gkd" and plan.teacher_params else d.P + d.vision


def fsdp2_frozen_gather_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """FSDP2: TRL shards a reference or teacher with prepare_fsdp (trl/models/utils.py), which calls fully_shard on
    the root module alone: the whole model is one FSDP unit, so each of its forwards all-gathers every weight on every
    GPU (the load dtype's full size beside the shard) until the forward ends and reshards it."""
    if plan.backend != "fsdp2":
        return 0
    return frozen_model_params(d, plan) * pr.load


def fsdp2_precompute_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """DPO/KTO full fine-tuning under FSDP2 with precomputed reference log-probs: the policy is not sharded before
    train(), so the trainer loads a reference of its own for the precompute (dpo_trainer.py / kto_trainer.py
    __init__: `precompute_ref_log_probs and not self.is_fsdp_enabled`), whole on the process's GPU (the bundle's
    train.py), shards it with prepare_fsdp (root only) and scores the dataset, gathering it whole again for each
    forward, before the policy reaches the GPU: the whole model gathered, its shard, and one forward's working set.
    0 for other plans."""
    if not (plan.backend == "fsdp2" and plan.trainer in ("dpo", "kto") and plan.method == "full"
            and plan.ref_model == "precompute"):
        return 0
    params = d.P + d.vision
    whole = params * pr.load
    return whole + whole // shard_count(plan) + forward_transient_bytes(d, plan, pr, local_tokens(plan),
                                                                          logit_tokens(plan))


def forward_transient_bytes(d: Dims, plan: Plan, pr: Precision, tokens: int, logit_tok: int) -> int:
    """Peak of a no-grad forward (reference / KL / old-policy log-prob passes, run under torch.no_grad): one layer's
    working set (MLP: gate, up and their product alive together: 3 x [t, I]; or attention q, k, v, out) plus the fused
    head's tile and compact hidden copy."""
    a = pr.act
    width = d.I if not d.moe else d.experts_per_token * d.moe_I + d.shared_I
    layer = max(3 * a * tokens * width, a * tokens * (2 * d.q + 2 * d.kv)) + 2 * pr.res * tokens * d.h
    if _eager(plan):
        rows = max(1, tokens // max(1, plan.seq_len))
        layer += rows * d.heads * plan.seq_len ** 2 * (FP32 + a)
    head = min(logit_tok, CHUNK_TOKENS) * min(d.V, CHUNK_VOCAB) * pr.compute + logit_tok * d.h * a
    return layer + head


def reference_forward_transient(d: Dims, plan: Plan, pr: Precision) -> int:
    """DPO and KTO run the reference forward inside compute_loss, after the policy forward and before its backward
    (dpo_trainer.py _compute_loss; kto_trainer.py also runs a no-grad KL forward): its working set sits on top of the
    policy's saved activations. Precomputed reference log-probs skip it."""
    if plan.trainer not in ("dpo", "kto", "gkd") or (plan.trainer != "gkd" and plan.ref_model == "precompute"):
        return 0
    return (forward_transient_bytes(d, plan, pr, local_tokens(plan), logit_tokens(plan))
            + fsdp2_frozen_gather_bytes(d, plan, pr))
