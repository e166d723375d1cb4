"""Generation inside training (GRPO/RLOO without vLLM, GKD): the batch generated at once, HF generate's KV cache,
prefill and decode working sets, ZeRO-3's gather for generation, vLLM colocate's reservation, and the log-prob
passes that follow."""

from __future__ import annotations

from advisor.core.plan import Plan
from advisor.core.target import Target
from advisor.model.buffers import forward_transient_bytes
from advisor.model.dims import Dims, Precision
from advisor.model.states import frozen_base_bytes, shard_count, trainable_params
from advisor.model.units import FP32, GKD_MAX_NEW_TOKENS


def generation_batch(plan: Plan) -> int:
    """Completions one GPU generates at once with plain `model.generate`. GRPO/RLOO (grpo_trainer.py
    get_train_dataloader): the per-device dataloader batch is per_device_train_batch_size * steps_per_generation, and
    GRPOConfig.__post_init__ sets steps_per_generation = gradient_accumulation_steps when neither it nor
    generation_batch_size is given; _generate_single_turn generates the whole local batch in one call. GKD: the
    micro-batch."""
    if plan.trainer in ("grpo", "rloo"):
        return plan.micro_batch * plan.grad_accum
    return plan.micro_batch


def generates_with_hf(plan: Plan) -> bool:
    return (plan.trainer in ("grpo", "rloo") and plan.vllm_mode == "none") or plan.trainer == "gkd"


def kv_cache_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """HF generate's DynamicCache at the end of generation: 2 (K, V) x layers x kv_heads x head_dim x tokens x bytes,
    for generation_batch sequences of seq_len tokens (prompt + completion; GKD: + max_new_tokens). DynamicCache grows
    by torch.cat, so one layer's cache exists twice during an append (+1/L)."""
    if not generates_with_hf(plan):
        return 0
    seq = plan.seq_len + (GKD_MAX_NEW_TOKENS if plan.trainer == "gkd" else 0)
    kvb = pr.work if plan.backend in ("deepspeed", "fsdp2") else pr.load
    per_layer = 2 * d.kv * generation_batch(plan) * seq * kvb
    return per_layer * (d.L + 1)


def prefill_transient_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """The prefill forward of generation (no grad) over generation_batch x prompt tokens: one layer's working set, plus
    the last position's logits (transformers generate passes logits_to_keep=1) in bf16 and their fp32 copy."""
    if not generates_with_hf(plan):
        return 0
    prompt = plan.seq_len - plan.max_completion_len if plan.trainer in ("grpo", "rloo") else plan.seq_len
    g = generation_batch(plan)
    tokens = g * max(1, prompt)
    return forward_transient_bytes(d, plan, pr, tokens, 0) + g * d.V * (pr.act + FP32)


def decode_logits_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Per decode step: the new token's logits, their fp32 copy and the sampling probabilities: [G, V] x (act + 4 + 4)."""
    if not generates_with_hf(plan):
        return 0
    return generation_batch(plan) * d.V * (pr.act + 2 * FP32)


def zero3_generation_gather_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """GRPOConfig.ds3_gather_for_generation=True (default): unwrap_model_for_generation gathers every ZeRO-3 parameter
    for the whole generate call: the full 16-bit model minus the local shard."""
    if not generates_with_hf(plan) or plan.backend != "deepspeed" or plan.zero_stage != 3:
        return 0
    n = shard_count(plan)
    total = (frozen_base_bytes(d, plan, pr.work) + trainable_params(d, plan) * pr.adapter) \
        if plan.method != "full" else d.P * pr.work
    return total if plan.offload == "all" else total - total // n


def vllm_colocate_bytes(plan: Plan, target: Target) -> int:
    """vLLM colocate (trl/generation/vllm_generation.py): each rank builds vllm.LLM(gpu_memory_utilization=f) in the
    training process, which reserves f x the GPU's total memory for vLLM's weights, activations and KV cache, through
    PyTorch, for the whole run (sleep mode off)."""
    if plan.vllm_mode != "colocate" or plan.trainer not in ("grpo", "rloo"):
        return 0
    return int(plan.vllm_mem_fraction * target.gpu_memory_bytes)


def logprob_passes(plan: Plan) -> tuple[bool, bool]:
    """(old-policy pass, reference pass) GRPO/RLOO run after generation, chunked by per_device_train_batch_size
    (grpo_trainer.py _generate_and_score_completions). The old-policy pass runs when vLLM generates
    (vllm_importance_sampling_correction=True by default) or num_iterations > 1 (not a plan knob: 1). The reference
    pass runs when beta != 0: ref_model == "copy" (full: a copy; PEFT: the base with the adapter disabled), and RLOO's
    default beta = 0.05 with PEFT (resolve gives ref_model "none" there)."""
    if plan.trainer not in ("grpo", "rloo"):
        return False, False
    old = plan.vllm_mode != "none"
    ref = plan.ref_model == "copy" or (plan.trainer == "rloo" and plan.method != "full" and plan.ref_model == "none")
    return old, ref
