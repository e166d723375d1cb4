"""The LM head and the loss: TRL 1.16's chunked fused head (no [tokens, vocab] logits), GKD's full logits, and the
head's gradient."""

from __future__ import annotations

from advisor.core.plan import Plan
from advisor.model.activations import local_tokens, logit_tokens
from advisor.model.dims import Dims, Precision
from advisor.model.units import CHUNK_STATS_PER_TOKEN, CHUNK_TOKENS, CHUNK_VOCAB, FP32, GKD_LOGIT_COPIES, HALF


def logits_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """The LM head and loss, per micro-batch.

    What TRL 1.16 does (read in the installed wheel):
    - SFT, DPO, KTO, GRPO and RLOO never materialize [tokens, vocab] logits. Each trainer's __init__ calls
      `add_fused_lm_head` (trl/trainer/utils.py) on the policy (and on the reference model), and the loss paths call
      `model(..., labels=..., fused_lm_head=True)`: SFTTrainer.compute_loss, DPOTrainer._compute_loss (policy, then the
      reference under no_grad), KTOTrainer._compute_loss (+ the KL pass), GRPOTrainer/RLOOTrainer
      _get_per_token_logps_and_entropies (labels -100 on the prompt, so only completion tokens are scored). The patched
      forward runs the backbone, then `ChunkedLogProbFunction` (trl/kernels/chunked_logprob.py) projects only the
      labelled rows (`hidden_states[mask]`, a compact copy saved for backward) in tiles of CHUNK_TOKENS x CHUNK_VOCAB in
      the compute dtype (`mm_buf`), folding each tile into fp32 online-logsumexp statistics. Its backward allocates an
      fp32 grad_hidden [N, h], an fp32 grad_weight [V, h] when the head trains (full fine-tuning), re-tiles, and returns
      `.to(dtype)` copies of both. SFTConfig.loss_type "chunked_nll" is a deprecated alias of "nll": same path.
    - use_liger_kernel=True: every trainer forces liger_kernel_config["fused_linear_cross_entropy"] = False (Liger's
      FLCE would replace the patched forward), so Liger leaves this term alone; its RMSNorm / SwiGLU / RoPE kernels
      change the activation terms instead.
    - GKD (trl.experimental.gkd GKDTrainer.compute_loss + generalized_jsd_loss) still computes full student and teacher
      logits and several [t, V] intermediates: GKD_LOGIT_COPIES x [t, V] (log_softmax in fp32 under autocast).
    - Label smoothing or a custom compute_loss_func make SFT compute full logits too (not modelled: the generated
      bundle uses neither)."""
    n = logit_tokens(plan)
    a = pr.act
    if plan.trainer == "gkd":
        t = local_tokens(plan)
        lb = FP32 if pr.autocast or pr.act == FP32 else HALF  # log_softmax runs in fp32 under autocast
        return GKD_LOGIT_COPIES * t * d.V * lb
    tile = min(n, CHUNK_TOKENS) * min(d.V, CHUNK_VOCAB) * pr.compute
    saved = n * d.h * a + CHUNK_STATS_PER_TOKEN * FP32 * n
    bwd = FP32 * n * d.h + a * n * d.h
    if plan.method == "full":
        head_b = pr.work if plan.backend == "deepspeed" else pr.load
        bwd += FP32 * d.V * d.h + (head_b * d.V * d.h if head_b != FP32 else 0)
    if pr.fp32_weights_amp:
        bwd += CHUNK_VOCAB * d.h * HALF  # `weight[start:end].to(compute_dtype)` tile of the fp32 head
    return saved + tile + bwd


def head_grad_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """The LM head's gradient, assigned to .grad right after the head's backward (full fine-tuning only), alive while
    the last decoder layers run their backward."""
    if plan.method != "full" or plan.backend in ("fsdp2",):
        return 0
    if plan.backend == "deepspeed" and plan.zero_stage >= 2:
        return 0  # reduced into the partition bucket by bucket
    return d.lm_head * (pr.work if plan.backend == "deepspeed" else pr.load)
