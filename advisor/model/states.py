"""Model states on one GPU: weights, gradients and optimizer states, one function each, per backend (single, DDP,
DeepSpeed ZeRO 0-3 with offload, FSDP2)."""

from __future__ import annotations

from advisor.core.plan import Plan
from advisor.model.dims import Dims, Precision
from advisor.model.units import DS_SUB_GROUP_SIZE, FP32, NF4_BYTES_PER_PARAM, OPTIMIZER_IMPL


# ---------------------------------------------------------------------------------------------------------------------
# Model states: weights, gradients, optimizer (one function each)
# ---------------------------------------------------------------------------------------------------------------------
def trainable_params(d: Dims, plan: Plan) -> int:
    """Full fine-tuning trains every parameter; LoRA/QLoRA only the adapters (ModelSpec.lora_params, all-linear)."""
    return d.lora(plan.lora_r) if plan.method in ("lora", "qlora") else d.P


def frozen_base_bytes(d: Dims, plan: Plan, base_bytes: int) -> int:
    """The frozen base of LoRA/QLoRA, whole (before any sharding).

    QLoRA: NF4 + double-quant constants for the decoder Linear weights (NF4_BYTES_PER_PARAM); the rest (embeddings,
    lm_head, norms, biases) in the load dtype. bnb_4bit_quant_storage=bfloat16 packs four 4-bit values per bf16
    element instead of two per uint8: the same bytes, but a dtype ZeRO-3/FSDP can flatten and shard together with the
    bf16 parameters."""
    if plan.method == "qlora":
        return int(d.quantized * NF4_BYTES_PER_PARAM) + (d.P - d.quantized) * base_bytes
    if plan.method == "lora":
        return d.P * base_bytes
    return 0


def vision_tower_bytes(d: Dims, dtype_bytes: int) -> int:
    """The frozen vision tower and projector an image-text model_type loads beside its decoder (ModelSpec.
    vision_params), whole, in the dtype of the decoder's frozen weights. QLoRA counts them unquantized too:
    bitsandbytes may quantize the tower's Linear layers (integrations/bitsandbytes.py replaces every nn.Linear it does
    not skip), which makes them smaller, never larger (at most 0.6 GB over for Gemma 3's 0.42B)."""
    return d.vision * dtype_bytes


def shard_count(plan: Plan) -> int:
    """Ranks a ZeRO / FSDP2 shard is split over: every training process (DeepSpeed ALST and FSDP2+CP shard over the
    sequence-parallel ranks too)."""
    return max(1, plan.num_processes)


def weight_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Resident parameters on one GPU (gathered copies in flight are `other`).

    single/DDP: every parameter in the load dtype (bf16: 2 B; bf16-mixed/fp32: 4 B), adapters in pr.adapter.
    DeepSpeed: the 16-bit working copy, partitioned only at ZeRO-3 (ZeRO paper arXiv:1910.02054, P_os+g+p), or on the
      CPU with offload "all"; frozen base params are never in the optimizer, so ZeRO-1/2 leave them whole.
    FSDP2 (full shard): every parameter / N in its stored dtype; CPU offload moves them to the host.
    """
    n = shard_count(plan)
    adapter = plan.method in ("lora", "qlora")
    ptr = trainable_params(d, plan)
    if plan.backend == "deepspeed":
        if plan.offload == "all" and plan.zero_stage == 3:
            return 0
        base = (frozen_base_bytes(d, plan, pr.work) if adapter else 0) + vision_tower_bytes(d, pr.work)
        trained = ptr * (pr.adapter if adapter else pr.work)
        total = base + trained
        return total // n if plan.zero_stage == 3 else total
    base = (frozen_base_bytes(d, plan, pr.load) if adapter else 0) + vision_tower_bytes(d, pr.load)
    trained = ptr * (pr.adapter if adapter else pr.trained)
    if plan.backend == "fsdp2":
        return 0 if plan.offload != "none" else (base + trained) // n
    return base + trained


def first_layer_pending_grad_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Gradients of the first decoder layer not yet made when the backward peaks in it: that peak is at the MLP's
    product backward (advisor.model.activations.layer_backward_workspace), after down_proj's backward has made its
    weight's gradient and before gate/up's, the attention's and the norms' backward make theirs (autograd runs the
    layer in reverse; transformers' MoE experts alike: down's grouped GEMM, then the gate's, then gate_up's). The
    late-backward phase holds every gradient but these. A 1/L share of the gradients, negligible for a deep model,
    but a reduced-depth MoE's layer is half its parameters (Mixtral at 2 layers: 1.8 GiB, the +8 % its peak was
    over-predicted by, bench/results/h200-2026-12-02-family-validate.jsonl). Full fine-tunes without DeepSpeed (whose
    gradient buffers are allocated before the backward) and without offload; adapters' gradients are a few MiB."""
    if plan.backend == "deepspeed" or plan.method != "full" or plan.offload != "none":
        return 0
    down = (d.num_experts * d.moe_I + d.shared_I) * d.h if d.moe else d.I * d.h
    pending = max(0, d.layer - down) * pr.trained
    return pending // shard_count(plan) if plan.backend == "fsdp2" else pending


def offload_held_gradient_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """ZeRO-2 with the optimizer offloaded and gradient accumulation: the 16-bit gradients a micro-batch that does not
    step keeps on the GPU until its backward ends. deepspeed 0.19.8 stage_1_and_2.py
    reduce_independent_p_g_buckets_and_remove_grads clones every gradient larger than the reduce bucket (hidden^2
    elements with the bundles' "auto") instead of copying it into the bucket, and on those micro-batches
    copy_grads_in_partition only copies it to the host (copy_gradients_to_cpu), leaving it in param.grad until the
    backward's epilogue (_clear_param_grad_only); the stepping micro-batch frees each after its fp32 copy. Those
    parameters are the MLP's Linears, a MoE layer's fused experts, the embedding and an untied LM head: measured with
    the allocator's history (bench.memory_peak, bench/results/memory-history-h200-2026-12-03.jsonl), Qwen2.5-1.5B's
    peak at grad_accum 2 holds them while the backward runs, 1.28 GiB above its peak at grad_accum 1. (ZeRO-1
    reduces at the boundary only and keeps every gradient through the accumulation anyway: gradient_bytes.)"""
    if plan.backend != "deepspeed" or plan.zero_stage != 2 or plan.offload == "none":
        return 0
    if plan.grad_accum <= 1 or plan.method != "full":
        return 0
    bucket = d.h * d.h
    m = d.model
    # transformers 5 keeps a MoE layer's experts as two 3-D parameters, each far larger than a bucket
    expert = (m.moe_intermediate, m.num_experts) if m.is_moe else None
    dense = [(i, o, n) for i, o, n in m.linear_shapes_per_layer()
             if expert is None or not (expert[0] in (i, o) and n in (expert[1], 2 * expert[1]))]
    per_layer = sum(i * o * n for i, o, n in dense if i * o > bucket)
    per_layer += 3 * m.hidden * m.moe_intermediate * m.num_experts if m.is_moe else 0
    embeddings = d.embed * (1 if m.tied_embeddings else 2)
    return (m.layers * per_layer + embeddings) * pr.work // shard_count(plan)


def gradient_bytes(d: Dims, plan: Plan, pr: Precision) -> tuple[int, int, int]:
    """(full, persistent, step_extra) gradient bytes on one GPU.

    full: all gradients of one step, once the backward is done.
    persistent: the part that survives zero_grad and exists before the next backward (DeepSpeed's flat partitions).
    step_extra: allocated only inside the optimizer step (DeepSpeed ZeRO-1/2 fp32 copy of the grad partition).

    single/DDP/FSDP2: grads in the parameter dtype (bf16 2 B, fp32 4 B) for trainable params, sharded /N by FSDP2;
      the Trainer frees them with zero_grad(set_to_none=True) after each step.
    DeepSpeed (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py; estimate_zero2/3 "18 = 2 16-bit grads + 4 32-bit
      grads + 4 32-bit params + 8 optimizer"):
      ZeRO-0 (BF16_Optimizer): 16-bit grads + an fp32 accumulation buffer for every param, kept.
      ZeRO-1: 16-bit grads of every param during the backward, reduced at the boundary; fp32 partition at the step.
      ZeRO-2: a 16-bit partition buffer (grads_in_partition), kept; a flat 16-bit copy and the fp32 partition at the
        step.
      ZeRO-3: a partition buffer (grad_partitions_flat_buffer) in the grad-accumulation dtype (the model's), kept.
      Optimizer offload keeps the partitions in pinned host memory (stage_1_and_2.py cpu_offload, stage3.py 795).
    """
    n = shard_count(plan)
    adapter = plan.method in ("lora", "qlora")
    ptr = trainable_params(d, plan)
    if plan.backend == "deepspeed":
        work = pr.adapter if adapter else pr.work
        s = plan.zero_stage
        off = plan.offload != "none"
        fp32_extra = 0 if pr.master == 0 else FP32
        if s == 0:
            g = ptr * (work + fp32_extra)
            return g, g, 0
        # ZeRO-1/2 step (stage_1_and_2.py step(): flat_grad_partition = flatten(averaged_gradients), then
        # .to(fp32)): a flat 16-bit copy of the grad partition and its fp32 conversion are alive together. Measured on
        # the H200 (2026-11-29): ZeRO-2 3B peaks at 63.3 GiB, 5.75 GiB (2 B/param) above the fp32 copy alone.
        step_copy = work + fp32_extra
        if s == 1:
            step = 0 if off else ptr * step_copy // n
            return ptr * work + step, 0, step
        if s == 2:
            if off:
                return 0, 0, 0
            part = ptr * work // n
            step = ptr * step_copy // n
            return part + step, part, step
        # ZeRO-3 step, per optimizer sub-group (stage3.py _prepare_fp32_grad_for_sub_group: flatten(averaged_gradients)
        # .to(fp32)): a flat 16-bit copy and its fp32 conversion of at most sub_group_size (1e9) partition elements.
        # Measured: ZeRO-3 0.5B and 1.5B peak in the step, at 10.2 and 28.7 GiB, 6 B/element of one sub-group above
        # the states.
        if s == 3 and not off:
            step = min(ptr // n, DS_SUB_GROUP_SIZE) * step_copy
            part = ptr * work // n
            return part + step, part, step
        # ZeRO-3: grad_partitions_flat_buffer in gradient_accumulation_dtype, which the engine takes from
        # data_types.grad_accum_dtype and, unset (as in the bundles), from the model dtype (engine.py
        # get_data_types): 16-bit under bf16. Measured: ZeRO-3 holds 8 B/param after setup (16-bit params, fp32
        # master, 16-bit grad partition), not 10.
        part = 0 if off else ptr * work // n
        return part, part, 0
    gb = pr.adapter if adapter else pr.trained
    g = ptr * gb
    if plan.backend == "fsdp2":
        g = 0 if plan.offload != "none" else g // n
    return g, 0, 0


def optimizer_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """AdamW states on one GPU (and DeepSpeed's fp32 master copy, an optimizer state in the ZeRO paper's K = 12).

    torch AdamW: exp_avg and exp_avg_sq are zeros_like(param): 2 x the trainable params' dtype (bf16 model: 4 B,
      fp32 / mixed: 8 B; fp32 LoRA adapters: 8 B).
    DeepSpeed: fp32 master + fp32 exp_avg + exp_avg_sq = 12 B per trainable param (whatever the model dtype),
      partitioned /N from ZeRO-1 on; on the host with optimizer offload.
    FSDP2: like torch AdamW on the local shard (/N); on the host with CPU offload.
    """
    n = shard_count(plan)
    adapter = plan.method in ("lora", "qlora")
    ptr = trainable_params(d, plan)
    if plan.backend == "deepspeed":
        if plan.offload != "none":
            return 0
        per = pr.master + 2 * FP32
        return ptr * per // (n if plan.zero_stage >= 1 else 1)
    sb = pr.adapter if adapter else pr.trained
    o = ptr * 2 * sb
    if plan.backend == "fsdp2":
        return 0 if plan.offload != "none" else o // n
    return o


def optimizer_step_transient(d: Dims, plan: Plan, pr: Precision) -> int:
    """Temporaries of the optimizer step beyond states and grads (torch/optim/adam.py).

    fused AdamW (the HF default): none. foreach AdamW: `exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)`, one
    tensor per second moment, alive until the update: the size of all second moments of the group. DeepSpeed's own
    step temporaries are in gradient_bytes' step_extra."""
    if plan.backend == "deepspeed" or OPTIMIZER_IMPL == "fused":
        return 0
    adapter = plan.method in ("lora", "qlora")
    sb = pr.adapter if adapter else pr.trained
    n = shard_count(plan) if plan.backend == "fsdp2" else 1
    return trainable_params(d, plan) * sb // n
