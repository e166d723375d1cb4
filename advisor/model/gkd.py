"""GKD's step beyond the forward and backward of its two models (trl.experimental.gkd.GKDTrainer, TRL 1.16): which
micro-batches generate, how long the ones that do are, and the loss over full-vocabulary logits.

- GKDTrainer.training_step generates completions with the student for a micro-batch with probability lmbda
  (`random.random() <= self.lmbda`); the bundles keep GKDConfig's lmbda, ON_POLICY_SHARE.
- An on-policy micro-batch trains on what generate returned: the prompt (the collator's `prompts`) and
  GKD_MAX_NEW_TOKENS new tokens (generate_on_policy_outputs), not the dataset's row of seq_len tokens.
- compute_loss turns both models' logits into fp32 [tokens, vocab] tensors (accelerate's mixed-precision wrapper,
  convert_outputs_to_fp32), runs generalized_jsd_loss over them (log_softmax of both, the stacked mixture's
  logsumexp, two kl_div and their weighted sum), calls empty_cache() before the backward, and the backward streams the
  same tensors back (loss_seconds).
"""

from __future__ import annotations

from advisor.catalog import catalogue_model
from advisor.core.plan import Plan
from advisor.core.target import Target
from advisor.model.units import GB, GKD_MAX_NEW_TOKENS, PREFERENCE_COMPLETION_FRACTION

ON_POLICY_SHARE = 0.5
"""GKDConfig.lmbda's default, which the bundles write (train.py: lmbda=0.5): the expected share of micro-batches that
generate on-policy. A short run draws its own share (seeded: Python's random after the Trainer's set_seed); verify
counts them (train.py count_on_policy) and sets the run against that count."""

LOSS_BYTES_PER_LOGIT = 392.0
"""HBM bytes the loss reads and writes per [tokens, vocab] element of a micro-batch, forward and backward: counted by
intercepting every aten op of compute_loss's code after the two forwards (bench/gkd_probe.py loss_bytes_per_logit:
188 B forward, 204 B backward, 21 and 18 kernels; the two logits' fp32 copies, the temperature divisions, the
log-softmaxes, the stacked mixture and its logsumexp, each kl_div's exp, subtraction and product, the masked
selection, and their backward)."""

LOSS_FORWARD_SHARE = 188.0 / 392.0
"""The forward's part of LOSS_BYTES_PER_LOGIT (before TRL's metric sync, speed.micro_batch_times)."""
LOSS_KERNELS = (21, 18)
"""Kernels the loss launches over [tokens, vocab] tensors, forward and backward (the same count)."""

LOSS_BW_EFFICIENCY = 0.517
"""Fraction of the HBM bandwidth the loss sustains as GKDTrainer runs it, compute_loss's empty_cache() included.
Measured, not fitted: bench/gkd_probe.py timed TRL's loss (forward and backward over fp32 [tokens, vocab] logits) for
seven micro-batches of the catalogue's vocabularies (32,768 to 262,144, 1.6e8 to 6.2e8 logit elements) on one H100
(bench/results/gkd-probe-h100-2026-12-07.json): 0.49-0.54 of the catalogue's 3,350 GB/s, median 0.517
(bench.gkd_probe.loss_bandwidth_efficiency; tests/model/test_gkd_terms.py holds the value to it). Without the
empty_cache() the kernels alone reach 0.61: handing the allocator's free segments back and taking them again adds 17 %
to the loss's time. It was 0.8 before, the streaming kernels' rate (speed.MEM_BW_EFFICIENCY), an assumption."""

GENERATE_CALL_SECONDS = 0.01
"""Host seconds of one on-policy generation outside its decode steps: generate's set-up (the generation config,
logits processors, the cache), unwrap_model_for_generation and the completion mask after it. What the decode probes
measured as a generate call's fixed cost at 8-16 rows (bench/results/decode-probe-*.json fixed_and_prefill_s, the
prefill included: median 0.008 s over 8 cases on one H200 and one H100; bench.gkd_probe.generate_fixed_seconds).
GKD's call has none of GRPO's per-round work (speed.GENERATE_CALL_SECONDS, 0.357 s: tokenizing the prompts, decoding
the completions, the rewards and advantages), which the model charged it before."""


def on_policy_prompt_tokens(plan: Plan) -> int:
    """Tokens of the prompt GKD generates from: the dataset row's prompt part (PREFERENCE_COMPLETION_FRACTION of
    seq_len is completion, as the bundles' synthetic rows and a preference-style row have it)."""
    return max(1, round(plan.seq_len * (1.0 - PREFERENCE_COMPLETION_FRACTION)))


def on_policy_seq_len(plan: Plan) -> int:
    """Tokens per row of an on-policy micro-batch: the prompt and the GKD_MAX_NEW_TOKENS generated (random weights
    and most real completions run to the limit; an EOS earlier leaves padding, which the batch still carries)."""
    return on_policy_prompt_tokens(plan) + GKD_MAX_NEW_TOKENS


def loss_seconds(vocab: int, tokens: int, target: Target) -> float:
    """GPU seconds of the loss over one micro-batch's [tokens, vocab] logits, forward and backward, compute_loss's
    empty_cache() included (LOSS_BW_EFFICIENCY is the rate measured with it)."""
    bw = target.gpu.mem_bw_gbps * GB * LOSS_BW_EFFICIENCY
    return LOSS_BYTES_PER_LOGIT * tokens * vocab / bw


def teacher_forward_params(plan: Plan) -> int:
    """Parameters the teacher's forward runs over a text batch: its decoder. plan.teacher_params counts what the
    teacher loads, which for an image-text model_type includes the frozen vision tower (ModelSpec.loaded_params: the
    memory it takes); a text batch never enters the tower, so its time is the decoder's (ModelSpec.params). Gemma 3 4B:
    4.30B loaded, 3.88B run, 10 % less forward time. A teacher outside the catalogue (a local folder, an uncached hub
    id) is timed as loaded, at most that much slow."""
    spec = catalogue_model(plan.teacher) if plan.teacher else None
    if spec is not None and spec.loaded_params == plan.teacher_params:
        return spec.params
    return plan.teacher_params
