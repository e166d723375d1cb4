"""Physical constants of the memory model: bytes per element, and counts read from the code of the libraries named
(TRL's chunked LM head tiles, GKD's logit copies, DeepSpeed's defaults, the allocator's grain)."""

from __future__ import annotations

GIB = 1 << 30
MIB = 1 << 20
GB = 1e9
"""Decimal gigabyte: GPU bandwidths are quoted in GB/s."""

# ---------------------------------------------------------------------------------------------------------------------
# Physical constants (bytes per element, counts read from the code of the libraries named)
# ---------------------------------------------------------------------------------------------------------------------
FP32 = 4
HALF = 2  # bf16 / fp16

NF4_BYTES_PER_PARAM = (4 + 8 / 64 + 32 / (64 * 256)) / 8
"""QLoRA NF4 with double quantization: 4 bits per weight, plus the absmax of every 64-weight block quantized to 8 bits
(8/64 bits per weight) and one fp32 second-level constant per 256 blocks (32/(64*256)): 4.127 bits per weight
(Dettmers et al., arXiv:2305.14314, section 3 "Double Quantization": 0.127 bits per parameter of constants)."""

CHUNK_TOKENS = 4096
"""trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE: token rows of one LM-head projection tile."""
CHUNK_VOCAB = 32768
"""trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE: vocabulary columns of one tile (``chunk_size``)."""
CHUNK_STATS_PER_TOKEN = 7
"""fp32 per-token vectors ChunkedLogProbFunction.forward allocates (running max, sums, target logit...)."""

GKD_MAX_NEW_TOKENS = 128
"""trl.experimental.gkd.GKDConfig max_new_tokens default: the on-policy completion GKD generates."""
GKD_LOGIT_COPIES = 17
"""fp32-sized [tokens, vocab] tensors alive at the peak of GKDTrainer.compute_loss + generalized_jsd_loss
(trl/experimental/gkd/gkd_trainer.py; GKD does not use the fused LM head in 1.16). Counted from the code and bounded
by a measured OOM (bench/results/verify-h200-2026-12-01-1217.jsonl, Qwen2.5-0.5B student, 1.5B teacher, micro-batch
16 x 1024 tokens, vocab 151,936: one such tensor is 9.27 GiB; the run held 134.5 GiB allocated, about 14 of them
beyond weights, activations and the teacher, when `jsd = beta * kl_teacher + ...` asked for the next). Alive there:
student and teacher logits and their temperature-scaled copies (4: the logits count as fp32-sized, as the OOM
shows), both log_softmax outputs (2, fp32 under autocast), the stacked log-probs (2) and their logsumexp mixture,
each kl_div's exp(target) and output and the student side's (target - input) (5): 14. The weighted sum then adds
beta * kl_teacher, (1 - beta) * kl_student and their sum: 17 at its peak. Counted, not fitted; a completed run
has not measured the peak yet."""

PREFERENCE_COMPLETION_FRACTION = 0.5
"""Share of a DPO/KTO sequence that is completion, the part the fused LM head scores (the prompt's labels are -100).
Not a Plan field: the benchmark rows and the bundles' synthetic data give prompt and completion half of seq_len each
(bench/README.md; templates/train.py.j2 synthetic_dataset). Measured (bench/results verify-h200-2026-12-01, DPO
Qwen2.5-0.5B, 32 pairs x 1024 tokens x 2): 0.88-0.90 s per step, 1.04 s predicted with every token scored, 0.92
with half."""

KERNEL_GRAIN = 2 * MIB
"""PyTorch's caching allocator rounds large blocks to 2 MiB (c10/cuda/CUDACachingAllocator.cpp kRoundLarge)."""

DS_SUB_GROUP_SIZE = 1_000_000_000
"""DeepSpeed zero_optimization.sub_group_size default (runtime/zero/config.py): partition elements per ZeRO-3 optimizer
sub-group; the bundles leave it unset."""
DS_PREFETCH_FACTOR = 0.9
"""transformers integrations/deepspeed.py fills stage3_prefetch_bucket_size "auto" with int(0.9 * hidden^2)."""
DS_PERSISTENCE_FACTOR = 10
"""... and stage3_param_persistence_threshold "auto" with 10 * hidden (params this small stay gathered)."""

LORA_DROPOUT = 0.05
"""lora_dropout of the generated bundle (templates/train.py.j2: TRL ModelConfig's default 0.05; PEFT's own default is
0.0). Not a Plan field: it changes LoRA activations (a dropped copy and a mask per adapted Linear)."""

DROPOUT_DISABLED_TRAINERS = ("dpo", "kto", "gkd")
"""Trainers whose config defaults to disable_dropout=True (DPOConfig, KTOConfig, GKDConfig; api-facts.md 1.3, 1.6,
1.7): trl.trainer.utils.disable_dropout_in_model sets p = 0 on every nn.Dropout, PEFT's lora_dropout modules included,
and torch's dropout returns its input unchanged for p == 0 (no copy, no mask). Measured (bench/results h200
2026-11-29, dpo-q3b-lora-bf16-single-nockpt-s2048-b2): 45.0 GiB allocated, 51.7 GiB predicted with the 0.05 dropout's
copies and masks, 45.3 GiB without them."""

OPTIMIZER_IMPL = "fused"
"""transformers TrainingArguments.optim defaults to "adamw_torch_fused" on torch >= 2.8 (training_args.py). The fused
kernel updates each tensor in place: no temporaries. The "foreach" implementation (optim="adamw_torch") allocates
``torch._foreach_sqrt(exp_avg_sqs)``: one temporary as large as all second moments of a (device, dtype) group
(torch/optim/adam.py _multi_tensor_adam)."""
