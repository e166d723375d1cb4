"""Activations saved for backward, per micro-batch (Korthikanti et al., arXiv:2205.05198, section 4, adapted to
what transformers 5's Llama/Qwen2 modules save: no dropout, RMSNorm in fp32, SiLU-gated MLP, SDPA/FlashAttention
without s^2 scores), with gradient checkpointing, Liger, LoRA dropout and autocast weight caches."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from advisor.core.plan import Plan
from advisor.model import calibration, units
from advisor.model.dims import Dims, Precision
from advisor.model.states import trainable_params
from advisor.model.units import DROPOUT_DISABLED_TRAINERS, FP32, HALF


# ---------------------------------------------------------------------------------------------------------------------
# Activations (Korthikanti et al., arXiv:2205.05198, section 4, adapted to what transformers 5's Llama/Qwen2 modules
# save for backward: no dropout, RMSNorm computed in fp32, SiLU-gated MLP, SDPA/FlashAttention without s^2 scores)
# ---------------------------------------------------------------------------------------------------------------------
def local_tokens(plan: Plan) -> int:
    """Tokens one GPU holds per micro-batch: DPO concatenates chosen and rejected (DataCollatorForPreference:
    2 * micro_batch rows of seq_len); GRPO/RLOO micro_batch counts completions (prompt + completion tokens);
    Ulysses SP / ring CP split every sequence over sp_size / cp_size ranks."""
    rows = plan.micro_batch * (2 if plan.trainer == "dpo" else 1)
    # at least one token: a sequence shorter than the SP/CP degree is refused by rules SP008/SP016, and the speed
    # model must still answer for it without dividing by zero
    return max(1, rows * plan.seq_len // max(1, plan.sp_size, plan.cp_size))


def logit_tokens(plan: Plan) -> int:
    """Tokens the LM head scores per micro-batch. TRL's fused head projects only positions whose label is not -100
    (``hidden_states[mask]``): GRPO/RLOO score only the completion (labels[:, :-logits_to_keep] = -100); DPO and KTO
    score the completion of each sequence (dpo_trainer.py / kto_trainer.py pass labels masked to the completion),
    units.PREFERENCE_COMPLETION_FRACTION of it; SFT on plain text scores every token (completion-only loss on
    prompt/completion data would score fewer)."""
    if plan.trainer in ("grpo", "rloo"):
        return max(1, plan.micro_batch * plan.max_completion_len // max(1, plan.sp_size, plan.cp_size))
    if plan.trainer in ("dpo", "kto"):
        return max(1, int(local_tokens(plan) * units.PREFERENCE_COMPLETION_FRACTION))
    return local_tokens(plan)


def _eager(plan: Plan) -> bool:
    return plan.attn == "eager"


COPYING_ATTN = ("eager", "flex_attention")
"""Attention implementations whose output o_proj reads through a copy (see linear_inputs_saved_bytes)."""


GENERATED_COMPLETION_TRAINERS = ("grpo", "rloo")
"""Trainers that train on completions they generate: each completion stops at its own EOS, so TRL pads them to the
longest (grpo_trainer.py / rloo_trainer.py _generate_and_score_completions: completion_mask from the first EOS) and
left-pads prompts of different lengths, and the training forward gets an attention mask with zeros."""

_PADDED: ContextVar[bool | None] = ContextVar("padded_batches", default=None)
"""None: each trainer's own batches (padding_mask); True / False: every batch padded / of one length."""


@contextmanager
def fixed_length_batches() -> Iterator[None]:
    """Estimate for batches whose rows all have one length, as the calibration benchmark trains them (bench/worker.py:
    synthetic rows of seq_len tokens, GRPO/RLOO completions held at max_completion_length by min_new_tokens), so that
    its records are predicted as they ran. Plans for real runs are estimated without it."""
    token = _PADDED.set(False)
    try:
        yield
    finally:
        _PADDED.reset(token)


@contextmanager
def padded_batches() -> Iterator[None]:
    """Estimate for batches padded to their longest row, whatever the trainer: what a dataset of rows of different
    lengths gives SFT, DPO, KTO and GKD without packing (TRL's collators pad each batch and pass its attention mask;
    trl/trainer/sft_trainer.py DataCollatorForLanguageModeling), which the bundles' README states next to the plan's
    estimate for rows of seq_len (advisor/bundle/render.py)."""
    token = _PADDED.set(True)
    try:
        yield
    finally:
        _PADDED.reset(token)


def padding_mask(plan: Plan) -> bool:
    """Whether a training micro-batch carries a padding mask (rows of different lengths). GRPO/RLOO: always, since
    completions end at different lengths (GENERATED_COMPLETION_TRAINERS), unless fixed_length_batches says otherwise.
    Measured: the planner's Llama-3.2-1B GRPO bundle (micro-batch 64, 768 tokens, no checkpointing) peaked at 70.4 GiB
    where the unmasked estimate was 64.8 GiB, and 5.6 GiB is what the masked layers below add
    (bench/results/verify-h200-2026-12-03-new-2.jsonl). Datasets of different lengths pad SFT, DPO, KTO and GKD batches
    the same way; their plan is estimated for rows of seq_len without a mask (what packing gives, and what the
    benchmark and verify's --synthetic-data run), and padded_batches gives the padded figure the README states."""
    forced = _PADDED.get()
    if forced is not None:
        return forced and not plan.packing
    return plan.trainer in GENERATED_COMPLETION_TRAINERS


def sdpa_masked_fraction(d: Dims, plan: Plan) -> float:
    """Fraction of the layers where SDPA gets a materialized mask. transformers' sdpa_mask skips the mask (is_causal
    instead) only when the padding mask is all ones and kv_length < the sliding window (masking_utils
    _ignore_causal_mask_sdpa): a padded batch (padding_mask) gets a [rows, 1, s, s] bool mask on every layer, and
    without padding a sliding layer at seq_len >= window gets one. Only plain "sdpa" is affected: FlashAttention
    unpads the batch and takes the window as a parameter, eager always has its mask (counted once, shared)."""
    if plan.attn != "sdpa":
        return 0.0
    if padding_mask(plan):
        return 1.0
    if not d.sliding_fraction:
        return 0.0
    window = d.model.sliding_window or 0
    return d.sliding_fraction if plan.seq_len >= window else 0.0


def norm_saved_bytes(t: int, h: int, pr: Precision, *, weight_trainable: bool, liger: bool, gemma: bool = False,
                     in_bytes: int | None = None, rows: int | None = None) -> int:
    """One RMSNorm over `h` elements of `t` rows (LlamaRMSNorm / Qwen2RMSNorm): `x.to(float32)` (4 B, saved by pow and
    mul), the normalized tensor cast back (res B, saved by `weight * x` only when the weight trains), and the output
    (act B, saved by the next Linear; counted with the linear inputs). Gemma's norm (`gemma`) multiplies by
    `1 + weight.float()` before the cast, so a trained weight saves the fp32 normalized tensor (4 B). Liger's
    LigerRMSNorm saves X (its input: `in_bytes`, the residual stream's res B by default) and an fp32 rstd per row.
    `rows` is the number of normalized rows (one per token; per token and head for Qwen3/Gemma3's q/k norms)."""
    rows = t if rows is None else rows
    if liger:
        return t * h * (pr.res if in_bytes is None else in_bytes) + FP32 * rows
    kept = (FP32 if gemma else pr.res) if weight_trainable else 0
    return t * h * (FP32 + kept) + FP32 * rows


def qk_norm_saved_bytes(d: Dims, t: int, pr: Precision, plan: Plan) -> int:
    """Qwen3 / Gemma3 normalize q and k per head (`self.q_norm(self.q_proj(x).view(..., head_dim))`, the same RMSNorm
    class over head_dim): the saved set of one RMSNorm over q + kv elements per token, one row per head. Its input is
    the projection's output (act B); Liger's rms_norm patch replaces these norms too. Measured (bench/results h200
    2026-12-01, Qwen3-0.6B LoRA without checkpointing, s2048 x b8): 37.0 GiB allocated, 31.8 predicted without them;
    these 4 B x (q + kv) x 28 layers are 5.25 GiB."""
    if not d.qk_norm:
        return 0
    return norm_saved_bytes(t, d.q + d.kv, pr, weight_trainable=plan.method == "full", liger=plan.liger,
                            gemma=d.gemma_norm, in_bytes=pr.act, rows=t * (d.heads + d.kv // max(1, d.head_dim)))


def lora_dropout_active(plan: Plan, moe: bool = False) -> bool:
    """Whether PEFT's lora_dropout runs (units.LORA_DROPOUT > 0 and the trainer does not zero it: DROPOUT_DISABLED_TRAINERS).
    A MoE's bundle sets it to 0: PEFT 0.21's lora.ParamWrapper, which adapts the 3-D expert parameters, refuses any
    other value (tuners/lora/layer.py: "does not work with lora_dropout != 0")."""
    return units.LORA_DROPOUT > 0 and plan.trainer not in DROPOUT_DISABLED_TRAINERS and not moe


def linear_inputs_saved_bytes(d: Dims, t: int, pr: Precision, plan: Plan) -> int:
    """Inputs of a layer's Linears kept for their weight gradients.

    Full FT: the two norm outputs (each shared by q/k/v or gate/up), the attention output, and the gated product
    (down). The attention output is o_proj's input and a copy of its own only for eager attention (matmul writes
    [b, heads, s, d], and `attn_output.transpose(1, 2).contiguous()` copies it). PyTorch's SDPA flash and
    memory-efficient kernels run on [b, s, heads, d] (aten/src/ATen/native/transformers/cuda/attention.cu:
    `query.transpose(1, 2)` in, `attention.transpose(1, 2)` out), so the transpose back is already contiguous and
    o_proj's input is the tensor SDPA saves (counted there); FlashAttention-2/3 return [b, s, heads, d] directly.
    Measured (bench/results h200 2026-12-01, Llama-3.2-1B full, s4096 x b16 without checkpointing): 116.6 GiB,
    121.9 predicted with the copy, 116.5 without it (and with the backward workspace below).
    LoRA (PEFT 0.21 lora.Linear.forward: `x = self._cast_input_dtype(x, lora_A.weight.dtype)`, then
    `lora_B(lora_A(dropout(x)))`): the frozen base Linear saves nothing (no weight grad); lora_A saves its input, which
    is a tensor of its own per adapted Linear (q, k and v each make one from the same x) whenever dropout is on
    (nn.Dropout returns a new tensor and saves a 1-byte mask), PEFT casts x to fp32 adapters, or autocast casts the
    fp32 input down to bf16 (autocast caches casts of weights, not of activations); otherwise it is x itself,
    shared. lora_A's output [t, r] is saved by lora_B for each adapted Linear.
    LoRA under DeepSpeed ZeRO-3: zero.Init (also the Init(module=...) ZeRO-3 runs on a model built without it) replaces
    torch.nn.functional.linear with LinearFunctionForZeroStage3 (deepspeed/runtime/zero/linear.py, zero config
    memory_efficient_linear, default true), whose setup_context saves input, weight and bias for every Linear, so the
    frozen base Linears keep their inputs too: the two norm outputs and the gated product (o_proj's is SDPA's own
    output), tensors of their own beside the dropout copies. Measured (bench/rows/zero-lora-2026-12-02.json and
    zero-lora-memory-2026-12-02.json, without checkpointing): the estimate without them was 7-12 % under the 1B, 1.7B
    and 7B ZeRO-3 LoRA peaks, with them 1-3 % over."""
    h, q, i_w = d.h, d.q, d.I if not d.moe else 0
    # ...and for SDPA too when the rotary leaves q in [b, heads, s, d] (dims.ROPE_CAT_TYPES: Phi-3)
    sdpa_copy = 1 if plan.attn in COPYING_ATTN or (d.rope_cat and plan.attn == "sdpa") else 0
    if plan.method == "full":
        return t * pr.act * (2 * h + sdpa_copy * q + i_w)
    compute = FP32 if pr.act == FP32 else HALF  # the adapter GEMM's dtype (autocast / DeepSpeed / FSDP2: 16-bit)
    a_out = t * plan.lora_r * compute * d.linears_per_layer
    # q, k, v (3 x hidden; 1 when fused), o (q), gate and up (2 x hidden; 1 when fused), down (intermediate)
    copies = (d.qkv_linears + (d.gate_up_linears if i_w else 0)) * h + q + i_w
    if lora_dropout_active(plan, d.moe):
        zero3 = plan.method == "lora" and plan.backend == "deepspeed" and plan.zero_stage == 3
        base_inputs = t * pr.act * (2 * h + sdpa_copy * q + i_w) if zero3 else 0
        return t * (compute + 1) * copies + a_out + base_inputs
    if pr.adapter != pr.act or pr.fp32_weights_amp:
        return t * compute * copies + a_out
    return t * compute * (2 * h + q + i_w) + a_out


def attention_saved_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Attention core of one layer. SDPA (flash / mem-efficient backends) and FlashAttention-2 save q, k, v, the output
    and an fp32 logsumexp per head and token: no [s, s] scores. GQA stays unexpanded when no padding mask is passed
    (transformers integrations/sdpa_attention.py use_gqa_in_sdpa). Eager (eager_attention_forward) saves q, the
    repeat_kv-expanded k and v, the fp32 softmax output (softmax(dtype=float32)) and its bf16 cast: 4 + 2 bytes per
    score vs Korthikanti's 5 (2 scores + 2 softmax + 1 dropout mask; no dropout here); Gemma 2's soft-capping adds
    tanh's output (act B per score, saved by its backward). Ulysses SP splits heads, ring CP splits the query sequence.

    SDPA on a masked layer (sdpa_masked_fraction): use_gqa_in_sdpa is False with a mask, so k and v are repeat_kv
    copies at the query's head count; and torch's scaled_dot_product_attention converts the bool mask to a float one
    in the query's dtype for every call (attention.cpp convert_boolean_attn_mask: zeros_like(mask, dtype) then
    masked_fill_), which the memory-efficient kernel saves for its backward: rows x s x s x act per masked layer.

    Fused q/k/v projections (Phi-3 qkv_proj) slice q, k and v out of one output: v is a view of it, so SDPA's saved v
    keeps the whole [t, q + 2 kv] output alive (q and k are rotated into new tensors)."""
    t = local_tokens(plan)
    a = pr.act
    rows = plan.micro_batch * (2 if plan.trainer == "dpo" else 1)
    fused = t * a * (d.q + d.kv) if d.fused_qkv else 0
    if _eager(plan):
        heads = d.heads // max(1, plan.sp_size)
        s = plan.seq_len
        scores = rows * heads * s * s // max(1, plan.cp_size)
        return t * a * 3 * d.q + scores * (FP32 + a + (a if d.attn_softcap else 0)) + fused
    base = t * a * (2 * d.q + 2 * d.kv) + t * FP32 * d.heads // max(1, plan.sp_size) + fused
    f = sdpa_masked_fraction(d, plan)
    if f:
        s = plan.seq_len
        mask = rows * s * s * a // max(1, plan.cp_size)
        expand = t * a * 2 * (d.q - d.kv) // max(1, plan.sp_size)
        base += int(f * (mask + expand))
    return base


def mlp_saved_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Gated MLP `down(act(gate(x)) * up(x))`: SiLU saves gate's output, the product saves act and up (3 x [t, I]);
    the product itself is down's input (counted with linear inputs). Liger's LigerSiLUMulFunction saves gate and up
    only and recomputes SiLU in the backward. MoE: router logits and their fp32 softmax, the routed copies of each
    token (experts_per_token rows, in and out) and each expert's intermediates, plus the shared expert."""
    t = local_tokens(plan)
    a = pr.act
    per_width = 2 if plan.liger else 3
    if not d.moe:
        return per_width * a * t * d.I
    k = d.experts_per_token
    routed = t * k
    full = plan.method == "full"
    router = t * d.num_experts * (a + FP32)
    experts = routed * a * (2 * d.h + (per_width + (1 if full else 0)) * d.moe_I)
    shared = t * a * (per_width + (1 if full else 0)) * d.shared_I if d.shared_I else 0
    return router + experts + shared


MOE_LORA_SAVED_STACKS = 1.05
"""What LoRA on a MoE layer keeps for its backward beyond LoRA on its attention alone, in copies of the layer's
expert stack: PEFT 0.21's lora.ParamWrapper merges `W + B @ A` into a full-size tensor on every forward
(tuners/lora/layer.py ParamWrapper._activate_lora, get_delta_weight for a 16-bit parameter) and the experts' GEMMs
save that merged copy; the other 0.05 is the adapters' casts and views (adapter-sized). Measured on the CPU with every
storage tracked (bench/moe_lora_probe.py, bench/results/moe-lora-probe-cpu-2026-12-08.json: 1.046-1.068 over Qwen3-MoE
and Mixtral shapes, 4 and 8 layers)."""
MOE_LORA_CKPT_EXTRA_STACKS = 0.24
"""Under checkpointing, what a MoE layer's recompute and backward add beyond that merged copy: the gradient of the
merged stack on its way to the adapters (the same probe: a checkpointed step's peak is 1.27-1.29 stacks above the
attention-only one, net of the adapters' gradients, whatever the depth; without checkpointing the backward frees
the layer's saved copy as it makes the gradient, and the peak is the saved set's: -0.07 to -0.01)."""


MOE_LORA_FORWARD_STACKS = 1.04
"""A forward that saves nothing (a checkpointed layer's first pass, or transformers' generate under no_grad) holds
one layer's merged expert copy at a time, and the merge's own transients beside it: 1.036-1.042 stacks above LoRA on
the attention alone at the forward's peak (the same probe, checkpointed runs)."""


def moe_lora_generation_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """What LoRA on a MoE adds to a generate forward (the prefill, each decode step): one layer's merged copy at a
    time (MOE_LORA_FORWARD_STACKS). vLLM runs merged weights TRL syncs into it and pays none."""
    if plan.vllm_mode != "none":
        return 0
    return int(MOE_LORA_FORWARD_STACKS * moe_lora_stack_bytes(d, plan, pr))


def moe_lora_stack_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Bytes of one layer's expert stack in the dtype its merged copy takes (the parameter's: the load dtype, the
    16-bit working copy under DeepSpeed, the 16-bit compute copy FSDP2 gathers); 0 unless LoRA/QLoRA adapts a MoE's
    experts (bitsandbytes leaves them 16-bit under QLoRA: Dims.quantized)."""
    if not d.moe or plan.method == "full":
        return 0
    width = pr.work if plan.backend == "deepspeed" else pr.act if plan.backend == "fsdp2" else pr.load
    return d.experts_per_layer * width


def layer_saved_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Everything one decoder layer keeps for its backward (no checkpointing)."""
    t = local_tokens(plan)
    full = plan.method == "full"
    # Gemma 2/3 add post-attention / post-MLP norms (norms_per_layer 4): each saves the same kind of tensors
    norms = d.norms * norm_saved_bytes(t, d.h, pr, weight_trainable=full, liger=plan.liger, gemma=d.gemma_norm)
    merged = int(MOE_LORA_SAVED_STACKS * moe_lora_stack_bytes(d, plan, pr))
    return norms + qk_norm_saved_bytes(d, t, pr, plan) + linear_inputs_saved_bytes(d, t, pr, plan) + \
        attention_saved_bytes(d, plan, pr) + mlp_saved_bytes(d, plan, pr) + merged


def layer_backward_workspace(d: Dims, plan: Plan, pr: Precision) -> int:
    """Memory a layer's backward adds to its own saved set at its peak, the MLP's backward for the usual shapes:
    the incoming grad of the layer output (res B x h, shared by the residual and the MLP branch), then down_proj's
    backward makes the grad of the product ([t, I]) and releases its saved input, the product itself, and the
    product's backward (`act(gate) * up`) makes the grads of act and of up before releasing them: net 2 x [t, I] at
    the mul's backward, beside the full saved set. LigerSiLUMulFunction's backward writes those two grads into the
    saved gate and up buffers (liger_kernel/ops/swiglu.py _swiglu_backward_kernel stores da, db in place): net
    1 x [t, I], at down_proj's backward. Attention's working set (dq, dk, dv plus FlashAttention's fp32 dq
    accumulator; eager: the grads of the fp32 scores) comes after the MLP's saved tensors are gone and matters only
    when it is larger. fp32 adapters with bf16 activations (PEFT's autocast_adapter_dtype) also hold the fp32 grad of
    the widest cast input, and with lora_dropout on, the dropout's backward holds the fp32 grads of its output and of
    its input together: two of them (measured, SFT LoRA r16 with checkpointing: Qwen2.5-1.5B s8192 x b4 and
    Llama-3.1-8B s16384 x b2 were 6.9 % and 5.0 % low with one; DPO, whose config zeroes the dropout, fits with one).
    Measured (bench/results 2026-12-01, Llama-3.2-1B full, s4096 x b16 with checkpointing): 20.4 GiB allocated at
    the first recomputed layer; this workspace (2.25 GiB) and the final norm freed before it (activation_bytes) give
    20.3 GiB, where 2 residual grads plus 3 x [t, I] gave 22.6 (+11 %)."""
    t = local_tokens(plan)
    a = pr.act
    width = d.I if not d.moe else d.experts_per_token * d.moe_I + d.shared_I
    mlp = (1 if plan.liger else 2) * a * t * width
    attn = a * t * (d.q + 2 * d.kv) + FP32 * t * d.q
    if _eager(plan):
        rows = plan.micro_batch * (2 if plan.trainer == "dpo" else 1)
        attn += rows * (d.heads // max(1, plan.sp_size)) * plan.seq_len ** 2 // max(1, plan.cp_size) * (FP32 + a)
    extra = 0
    if plan.method != "full" and pr.adapter != a:
        extra = FP32 * t * max(d.max_in, width) * (2 if lora_dropout_active(plan, d.moe) else 1)
    if plan.grad_ckpt:
        extra += int(MOE_LORA_CKPT_EXTRA_STACKS * moe_lora_stack_bytes(d, plan, pr))
    return pr.res * t * d.h + max(mlp, attn) + extra


def final_norm_saved_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """The final RMSNorm's saved tensors: alive through the LM head's backward, released by the norm's own backward
    before any decoder layer's backward starts."""
    return norm_saved_bytes(local_tokens(plan), d.h, pr, weight_trainable=plan.method == "full", liger=plan.liger,
                            gemma=d.gemma_norm)


def activation_bytes(d: Dims, plan: Plan, pr: Precision) -> tuple[int, int]:
    """(stack, transient): activations kept across the whole backward, and what the layer backward that holds the
    peak adds to them.

    No checkpointing: L x layer_saved_bytes; the transient is one layer's backward workspace.
    Gradient checkpointing (transformers GradientCheckpointingLayer around each decoder layer): only each layer's
    input is kept (res B x t x h per layer: Korthikanti's full-recompute 2sbh in bf16); during its backward a layer is
    recomputed, so one layer's full saved set plus its workspace is the transient. Unsloth's offloaded checkpointing
    moves the layer inputs to CPU. Both add the final norm, RoPE cos/sin (shared by all layers) and, for eager, the
    [rows, 1, s, s] additive mask (Gemma 2/3 build one for the full and one for the sliding layers). The transient
    is net of the final norm's saved set, released by its backward before the first decoder layer's (the stack
    holds it for the LM head's backward, where memory.py adds the head's transient instead)."""
    t = local_tokens(plan)
    per_layer = layer_saved_bytes(d, plan, pr)
    work = layer_backward_workspace(d, plan, pr)
    final_norm = final_norm_saved_bytes(d, plan, pr)
    shared = final_norm + 2 * t * d.head_dim * pr.act
    if _eager(plan):
        rows = plan.micro_batch * (2 if plan.trainer == "dpo" else 1)
        masks = 2 if 0 < d.sliding_fraction < 1 else 1
        shared += masks * rows * plan.seq_len ** 2 * pr.act // max(1, plan.cp_size)
    if plan.grad_ckpt:
        # Unsloth's "unsloth" checkpointing copies each layer's input to pinned host memory on a side stream
        # (unsloth_zoo gradient_checkpointing.py UnslothCheckpointFunction); on the GPU stay the last layer's input
        # (never offloaded) and the staging buffers of one layer input each (two when the GPU has room: double
        # buffering), so three layer inputs in bf16
        inputs = 3 * t * d.h * HALF if plan.unsloth else d.L * t * d.h * pr.res
        stack, transient = inputs + shared, per_layer + work - final_norm
    else:
        stack, transient = d.L * per_layer + shared, work - final_norm
    f = calibration.ACTIVATION_FACTOR
    return int(stack * f), int(max(0, transient) * f)


def last_layer_backward_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Activations alive while the first decoder layer runs its backward (the end of the backward): that layer's saved
    set (recomputed under checkpointing, kept otherwise) plus its workspace; everything above it is freed."""
    return int((layer_saved_bytes(d, plan, pr) + layer_backward_workspace(d, plan, pr)) * calibration.ACTIVATION_FACTOR)


def autocast_weight_cache_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """bf16 copies of fp32 weights under torch.autocast (single/DDP with bf16-mixed/fp16-mixed): autocast caches the
    cast of every leaf weight that requires grad until the autocast region exits, and the backward keeps the casts it
    saved; frozen fp32 base weights are cast per call and saved without checkpointing (one layer at a time with it)."""
    if not pr.fp32_weights_amp:
        return 0
    matmul = d.quantized + d.lm_head  # every decoder Linear weight (d.quantized) and the LM head
    if plan.method == "full":
        return HALF * matmul
    base = matmul if not plan.grad_ckpt else d.layer
    return HALF * (trainable_params(d, plan) + base)


def autocast_late_backward_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """The bf16 weight casts still alive while the first decoder layer runs its backward: that layer's only.

    accelerate wraps only model.forward in torch.autocast, and torch.autocast.__exit__ calls clear_autocast_cache()
    when the outermost region exits, so the cache of autocast_weight_cache_bytes is gone once the backward starts;
    what remains are the casts the autograd graph saved, freed layer by layer as the backward passes them (and, under
    checkpointing, made again by each layer's recompute, which runs in an autocast region of its own). Measured (bench/
    results h200 2026-11-29, bf16-mixed full fine-tuning with checkpointing, peak in the late backward): qwen2.5-7b
    s1024 b1 113.95 GiB and llama-3.1-8b 119.74 GiB allocated = 16 B/param + 0.4 GiB, where keeping the whole cache
    (2 B per matmul weight) predicted 127.2 and 134.1 GiB (+12%)."""
    if not pr.fp32_weights_amp:
        return 0
    return HALF * (d.layer + trainable_params(d, plan) // max(1, d.L) if plan.method != "full" else d.layer)
