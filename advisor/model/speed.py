"""Step time of one TRL 1.16 training run, before it is launched.

Pure arithmetic: FLOPs and bytes of each part of an optimizer step, divided by what the GPU, its links and the host
can sustain. A step is ``grad_accum`` micro-batches, then the optimizer; GRPO/RLOO add a generation and its
log-prob passes once per step (steps_per_generation = grad_accum). GPU work and the CPU that launches it run
asynchronously, so a micro-batch takes about the larger of GPU time and CPU dispatch time, more where the two are
close (overlap_seconds); the excess over the GPU time is `overhead`.

The breakdown's values add up to step_seconds exactly. FITTED constants are declared in one block below, calibrated
against bench/results (median step seconds per configuration, docs/accuracy.md); the rest are physical counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from advisor.core.plan import Plan
from advisor.core.specs import ModelSpec
from advisor.core.target import PCIE_GBPS, Target
from advisor.model import activations as MA
from advisor.model import capacity as MCAP
from advisor.model import dims as MD
from advisor.model import generation as MG
from advisor.model import gkd as MGKD
from advisor.model import states as MS
from advisor.model import units as MU
from advisor.model.dims import Precision, dims
from advisor.model.memory import MemoryEstimate
from advisor.model.units import FP32, GB, HALF

# ---------------------------------------------------------------------------------------------------------------------
# Physical counts
# ---------------------------------------------------------------------------------------------------------------------
KERNELS_FWD_PER_LAYER = 40
"""CUDA kernels one Llama/Qwen2 decoder layer launches in an eager bf16 forward (modeling_llama.py): two RMSNorms of 8
ops each (to fp32, pow, mean, add eps, rsqrt, mul, to bf16, mul weight), q/k/v/o projections, RoPE on q and k (mul,
slice-neg-cat, mul, add: ~5 each), SDPA, the transpose copy, two residual adds, gate, up, SiLU, mul, down."""
KERNELS_BWD_PER_LAYER = 70
"""... and in its backward (about 1.75x: two GEMMs per Linear, elementwise grads of norm, RoPE and SiLU)."""
NORM_KERNELS = (8, 14)
"""Kernels of one eager RMSNorm, forward and backward (the 8 ops counted in KERNELS_FWD_PER_LAYER, and 1.75x in the
backward): what each norm beyond Llama's two adds to a layer, Gemma's post-attention / post-MLP norms and Qwen3 /
Gemma3's per-head q and k norms (counted once each: one call normalizes every head)."""
LIGER_NORM_KERNELS = (6, 11)
"""The same for a LigerRMSNorm: one Triton launch forward, costing about 6 eager launches on the CPU (the ratio
LIGER_KERNELS_FWD_PER_LAYER implies: 28 eager ops of two norms, RoPE and SwiGLU replaced by 4 launches, 40 -> 36)."""
MOE_ROUTING_KERNELS = (22, 38)
"""Kernels transformers 5's MoE block adds per layer around its expert GEMMs, forward and backward
(integrations/moe.py grouped_mm_experts_forward: router linear, softmax, top-k, renormalization, sort by expert,
two gathers, histc, cumsum, gate and activation, the routing-weight multiply, the inverse permutation (empty, arange,
index_put) and gather, the per-token sum, the cast back)."""
DECODE_KERNELS_PER_LAYER = 50
"""One decode step of HF generate per layer: the forward's 40 plus the DynamicCache cat of K and V and mask ops."""
DECODE_KERNELS_PER_STEP = 40
"""Per decode step outside the layers: embedding, final norm, LM head, logits processors, sampling, stopping checks."""
HEAD_KERNELS_PER_TILE = 4
DECODE_PADDED_KERNELS_PER_LAYER = 3
"""Kernels a decode step of HF generate adds per layer when its batch is padded (GRPO/RLOO prompts of different
lengths) under SDPA, whatever the heads: the layer's mask goes to SDPA, which turns a bool mask into a float bias
(aten scaled_dot_product_attention convert_boolean_attn_mask) instead of running unmasked. Counted, not fitted:
bench/decode_ops.py on transformers 5.25 (bench/results/decode-ops-cpu-2026-12-05.json: 3.0 for each of six models,
Llama, Qwen2, Qwen3, Gemma-3 and Phi-3, GQA and MHA); its non-view op count is the CUDA kernel count (Qwen2.5-0.5B
unpadded: 1,122 counted, 1,106 profiled on an H200). Releases before PACK_GQA_SINCE add repeat_kv's two copies
(decode_padding_kernels)."""
DECODE_MASK_KERNELS_PER_STEP = 16
"""Kernels a padded decode step of HF generate adds outside the layers, per kind of attention mask the model builds
(full, sliding window): masking_utils' sdpa_mask turns the 2-D padding mask into the step's 4-D one (arange,
comparisons, index, where), and checks it on the host (a `.item()`: the step's second sync). Counted as
DECODE_PADDED_KERNELS_PER_LAYER: 16 for the one-mask models, 35 for Gemma-3 (full and sliding), 21 for Phi-3
(sliding)."""
"""Fused LM head: GEMM + fold kernel per CHUNK_TOKENS x CHUNK_VOCAB tile forward; GEMM, fold, 2 addmm backward."""
TORCH_CPU_ADAM_SLOWDOWN = 6.0
"""torch's own CPU AdamW (FSDP2 CPUOffloadPolicy) vs DeepSpeedCPUAdam: the ZeRO-Offload paper (arXiv:2101.06840,
section 5.1) reports CPU-Adam up to 6x faster than PyTorch's CPU Adam."""
DEFAULT_CPU_CORES = 32
"""Host cores assumed when the target does not say (catalogue targets)."""
ELEMENTWISE_BWD_FACTOR = 2.0
"""HBM bytes of an elementwise op's backward per byte of its forward: it reads the saved input(s) and the incoming
gradient and writes the input gradient (RMSNorm's backward also reduces over the row)."""

# ---------------------------------------------------------------------------------------------------------------------
# FITTED constants, calibrated on the fit split of bench/results and tests/model/data (step time; docs/accuracy.md),
# and the GPU rates MEASURED by kernel (bench/kernel_terms.py; bench/accuracy.py MEASURED).
# ---------------------------------------------------------------------------------------------------------------------
MFU_CEILING = 0.845
"""Fraction of the dense bf16 peak that large training GEMMs sustain (gemm_efficiency's ceiling). Measured, not
fitted: bench/kernel_terms.py reads it, with HIDDEN_HALF and TOKENS_HALF, off the GEMM kernels of profiled
micro-batches of the catalogue's families on one H200 (bench/results/kernel-probe-h200-2026-12-02.json: cuBLAS
reached 0.70-0.81 of the peak at 4-16k tokens per micro-batch and hidden sizes 896-4096). It was fitted to step
times before (0.727, with HIDDEN_HALF 512 and TOKENS_HALF 256), where it also absorbed the elementwise and attention
time the model under-counted (against the probe, the model of commit 2427517 gave the full fine-tunes' non-GEMM
kernels 1/2.2-1/1.6 and attention 1/1.9-1/1.1 of their measured time)."""
HIDDEN_HALF = 128
"""Hidden size at which GEMM efficiency halves (x h / (h + HIDDEN_HALF)): measured with MFU_CEILING."""
TOKENS_HALF = 512
"""Tokens per micro-batch at which GEMM efficiency halves (x t / (t + TOKENS_HALF)): measured with MFU_CEILING."""
LAUNCH_SECONDS = 26.4e-6
"""CPU time per launched kernel in eager PyTorch (Python module call, transformers' attention interface, dispatcher,
launch), amortized. Seeded at 35e-6 from spot measurements on one H200 (torch 2.11, transformers 5.17, TRL 1.16):
Qwen2.5-0.5B at 2k tokens per micro-batch runs 0.10 s/step without checkpointing and 0.18 s with it, whatever the
GPU work. Fitted with the others on the fit rows: 33e-6; 30.7e-6 once the overlap of dispatch and GPU work is its own
term (OVERLAP_P). Refitted (30.7e-6 before) on the fit rows once the GPU's rates were measured by kernel
(bench/kernel_terms.py), the data path and LoRA's per-step cost were their own terms, and forward and backward
overlapped apart. Refitted (27.2e-6 before) on the fit rows once the optimizer step was timed apart
(OPTIMIZER_BYTES_PER_WEIGHT_BYTE), Gemma-2's soft-capping, Phi-3's strided ops and transformers 5.17's MoE masks were
terms, and the 2026-12-02 family rows (bench/rows/family-check-2026-12-02.json) and host-phase records joined the
fit."""
OVERLAP_P = 9.62
"""The exponent of the smooth maximum a micro-batch takes of its GPU time and its CPU dispatch time,
(gpu^p + dispatch^p)^(1/p) (overlap_seconds). The CPU runs ahead of the GPU only by the kernels it has queued: a
synchronising op (the loss's .item(), an optimizer's found_inf or grad-norm check, a host-to-device copy of the batch,
the allocator's cudaMalloc) drains the queue, and after it the side that waits loses what the other did alone. So
where the two take about as long, the micro-batch takes longer than either (x 2^(1/p) = 1.17 when equal), and where
one is twice the other, max() is within 1 %. The model used max() (p -> infinity) and left the QLoRA and checkpointed
rows whose dispatch and GPU time are within a few percent of each other below their measured steps
(BNB_MATMUL_SECONDS's note). Fitted with LAUNCH_SECONDS and CKPT_LAYER_SECONDS on the fit rows (2026-12-01 records,
medians): 4.4, for a 4.4 % lower objective; holdout median step error 6.3 -> 5.7 %, leave-one-family-out median
7.5 -> 7.2 % and worst 68.1 -> 36.0 % (docs/accuracy.md). Refitted (4.4 before) on the fit rows once the GPU's rates
were measured by kernel (bench/kernel_terms.py), the data path and LoRA's per-step cost were their own terms, and
forward and backward overlapped apart. With forward and backward overlapping their dispatch apart (the metric sync
between them, micro_batch_times) the fit gives nearly max(): most of the imperfect overlap this exponent stood for was
that sync. Refitted (9.11 before) on the fit rows once the optimizer step was timed apart
(OPTIMIZER_BYTES_PER_WEIGHT_BYTE), Gemma-2's soft-capping, Phi-3's strided ops and transformers 5.17's MoE masks were
terms, and the 2026-12-02 family rows (bench/rows/family-check-2026-12-02.json) and host-phase records joined the
fit."""
LIGER_KERNELS_FWD_PER_LAYER = 42
"""Launch-equivalents of a layer's forward with Liger: its fused RMSNorm, RoPE and SwiGLU replace about 20 eager ops
by 4 Triton launches, and a Triton launch costs several eager ones on the CPU (its launcher specialises and keys
every call in Python). Measured, not fitted: bench/liger_probe.py timed each patched call against the eager ops it
replaces (bench/results/liger-probe-h100-2026-12-06.json, liger-kernel 0.8.5, triton 3.6.0): per Llama layer (two
norms, RoPE, the gated product) Liger's forward took 252 us on the host against the eager 222 us, on a host whose
1-element op took 5.69 us; brought to the median host by host_factor and counted in LAUNCH_SECONDS, 40 + 1.6
(bench.later_bundles.liger_launch_equivalents, which tests/bench/test_later_bundles.py holds these to). It was 36
before, an assumption (four launches costing six eager ones each), which credited Liger with host time it does not
save; bench/dispatch_terms.py's whole-model tiny steps (H200) read Liger's forward dearer than eager's too (49 against
40 launch-equivalents per layer). With the probe's values here and in LIGER_DECODE_KERNELS_PER_LAYER, the step
time's median |error| moved on the fit rows 4.27 -> 4.24 %, on the holdout 3.99 -> 3.88 %, and the later verify
bundles' worst fell 28.3 -> 26.3 % (docs/accuracy.md)."""
LIGER_KERNELS_BWD_PER_LAYER = 65
"""... and its backward: the probe's forward + backward with autograd, 1,041 us against the eager 1,100 us, less the
forward above: 70 - 4.7 (it was 64)."""
LIGER_DECODE_KERNELS_PER_LAYER = 2
"""Decode launch-equivalents (DECODE_LAUNCH_SECONDS) a Liger layer adds to a decode step of transformers' generate:
GRPO/RLOO without vLLM generate with the patched model, whose decode calls are as tiny as the probe's no_grad ones,
so each layer pays the forward's extra above (30.5 us at the probe's host, 2.3 decode launch-equivalents at the
median host, bench.later_bundles.liger_launch_equivalents)."""
LORA_KERNELS_PER_LINEAR = (4, 8)
"""Launch-equivalents PEFT lora.Linear adds per adapted Linear, forward and backward (input cast, dropout, A, B,
scale, add, cast back); fitted with LAUNCH_SECONDS to the same measurements."""
LORA_DECODE_KERNELS_PER_LINEAR = 8
"""CUDA kernels PEFT lora.Linear adds per adapted Linear to a decode step of transformers' generate, the adapters
unmerged and in train mode as TRL generates with them (dropout, A, B, scale, add, and the casts around them).
Measured, not fitted: `python -m bench.decode_probe --lora both` on one H100 (transformers 5.17, PEFT 0.21;
bench/results/decode-probe-h100-2026-12-07-lora.json): Llama-3.2-1B 775 -> 1,671 kernels per decode step (16 layers x
7 Linears), Qwen3-0.6B 1,718 -> 3,286 (28 x 7), 8.0 per Linear in both at 16 and 64 sequences, and the step took
12.4 -> 32.2 ms and 34.9 -> 62.6 ms at 16 sequences. The decode term counted LORA_KERNELS_PER_LINEAR's forward
4 before, the training forward's fitted launch-equivalents, and a LoRA RLOO bundle ran 21.9 % slower than
predicted (docs/accuracy.md, new-rloo-l1b-lora)."""
CKPT_LAYER_SECONDS = 4.17e-3
"""CPU time torch.utils.checkpoint (non-reentrant, transformers' default) adds per checkpointed layer per micro-batch
beyond the recomputed forward's launches (saved-tensor hooks, recompute graph); seeded at 3e-3 from the same spot
measurements, fitted on the fit rows: 3.5e-3 (2026-11-29 rows), 3.57e-3 with the 2026-12-01 rows, 3.79e-3 with
OVERLAP_P. Refitted (3.79e-3 before) on the fit rows once the GPU's rates were measured by kernel
(bench/kernel_terms.py), the data path and LoRA's per-step cost were their own terms, and forward and backward
overlapped apart. Kept fitted, not set to what bench/dispatch_probe.py measures on a tiny micro-batch (the step with
checkpointing less without it, less the recomputed kernels' launches: 0.72-3.72 ms per layer over 16 cases of seven
models on two H200 hosts, median 2.74 ms; bench/dispatch_terms.py): with the probe's value the checkpointed runs the
host sets almost alone (host-bound share 75-100 %) come closer (median |error| 12.2 -> 9.6 % over 247 runs), but
those where host and GPU take about as long (25-75 %) fall short by 12-21 % (median 8.8 -> 13.0 %), a class the
fitted value serves (docs/accuracy.md, 'Checkpointing's host cost', has the current figures). What the checkpointed
backward pays there beyond its dispatch is not measured apart; a lower overlap exponent for that backward alone (tried 2.5-6) leaves the middle band's median
at 11-14 %."""
CKPT_FORWARD_SHARE = 0.334
"""The part of CKPT_LAYER_SECONDS the forward pays (the pack hooks run as the layer saves its tensors), the rest in the
backward's recompute. Measured, not fitted: bench/dispatch_probe.py's forward with checkpointing less without it, per
layer, over the per-layer total, median over its 16 full fine-tunes (bench/dispatch_terms.py;
tests/model/test_dispatch_terms.py holds the value to it). The fitted model put all of it in the backward, where the
small checkpointed runs' measured host phases (`timing.phases`: sft-l1b s1024 b2, sft-q0.5b s512 b1 and s1024 b2
ga4) were 1.4-1.9x shorter, and their forwards 1.8-2.1x longer, than it predicted. The forward and the backward each
overlap their own dispatch with their GPU work (estimate_speed), so where the cost falls matters once the GPU time is
comparable: holdout step median 4.45 -> 4.33 % over the 242 runs of then. The other host constants were left as
fitted: a joint refit with the share in would have taken that holdout's step median to 5.29 % (runs over 20 % 9 -> 12
of 136)."""
MEM_BW_EFFICIENCY = 0.8
"""Fraction of the HBM bandwidth streaming kernels (optimizer, dequantization, decode) reach."""
ELEMENTWISE_BW_EFFICIENCY = 0.51
"""Fraction of the HBM bandwidth eager PyTorch's elementwise kernels sustain inside a training micro-batch (norms,
RoPE, SiLU, residual adds and their casts; PEFT's adapter chain runs on contiguous tensors at MEM_BW_EFFICIENCY,
lora_elementwise_seconds). Many run on strided views (RoPE on transposed q/k, the cat of rotate_half, copies from
chunk/split views), which take the non-vectorized elementwise_kernel path. Measured
(bench/kernel_terms.py on bench/results/kernel-probe-h200-2026-12-02.json): the median over the probe's full
fine-tunes of the bytes layer_elementwise_bytes counts over the GPU time of their non-GEMM, non-attention kernels
(less TRL's fused head, fused_head_seconds): 0.42-0.55."""
ATTENTION_EFFICIENCY = 0.35
"""Fraction of the dense bf16 peak SDPA's fused attention kernels (cuDNN / flash, forward and backward) sustain on
long sequences (attention_efficiency), measured like ELEMENTWISE_BW_EFFICIENCY: each case's attention FLOPs over its
attention kernels' GPU time, 0.24-0.46 of the peak. Before, attention ran at the GEMMs' efficiency."""
ATTENTION_SEQ_HALF = 384
"""Sequence length at which attention_efficiency halves; measured with ATTENTION_EFFICIENCY (bench/kernel_terms.py:
the probe's cases run 1,024 to 8,192 tokens per sequence)."""
ATTENTION_HEAD_DIM_96 = 0.98
"""Attention efficiency at head_dim 96 (Phi-3) over that at head_dim 64, the size ATTENTION_EFFICIENCY is read at.
On Hopper PyTorch's SDPA runs cuDNN's fused kernels, built per head size (the probes' kernel names:
..._flash_fprop_..._64x128x<head size> forward, ..._flash_bprop_..._64x64x<head size> backward): the same tile rows
at every head size, so a wider head does more FLOPs per tile of keys and values loaded; Phi-3's 96 runs the kernel
built for 128 (padded), and the 256 kernel sustains less than the 128 one. Measured with
ATTENTION_EFFICIENCY, on the same cases (bench/kernel_terms.py attention_curve: the geometric mean of each head
size's cases over the curve at 64): per case, at head_dim 64 0.92-1.02 of the curve (8 cases), at 96 0.96-1.01
(2), at 128 1.07-1.43 (14), at 256 0.77-0.83 (2; bench/results/kernel-probe-h200-2026-12-02.json and its families
file). With one efficiency for every head size the measured attention time was 0.72-1.28 of the model's, with these
factors 0.86-1.15."""
ATTENTION_HEAD_DIM_128 = 1.23
"""... at head_dim 128 (Llama 3B and up, Qwen2.5 1.5B and up, Qwen3, Mistral, Mixtral, Phi-3-medium, Phi-4)."""
ATTENTION_HEAD_DIM_256 = 0.80
"""... at head_dim 256 (Gemma 2 and Gemma 3 up to 12B)."""
LORA_GEMM_BW_EFFICIENCY = 0.69
"""Fraction of the HBM bandwidth the adapters' skinny GEMMs (tokens x features by features x 16, and back) stream
at: the graph-replayed shapes of the same probe, bytes over time."""
FUSED_HEAD_BYTES = 6
"""HBM bytes per logit of TRL's fused LM head's elementwise kernels per trained micro-batch: the forward kernel reads
each bf16 logits tile (2 B), the backward kernel reads the recomputed tile and writes its gradient in place (4 B)."""
FUSED_HEAD_FWD_SHARE = 2 / 6
"""The forward kernel's share of FUSED_HEAD_BYTES (2 of 6 B per logit)."""
FUSED_HEAD_TRAINERS = ("sft", "dpo", "kto", "grpo", "rloo")
"""Trainers whose loss goes through TRL 1.16's fused LM head (add_fused_lm_head in sft_trainer.py, dpo_trainer.py,
kto_trainer.py, grpo_trainer.py, rloo_trainer.py), with or without Liger (Liger's own fused linear cross-entropy is
switched off there); GKD computes full logits."""
COMM_OVERLAP = 0.8
"""Fraction of the compute window collectives can hide behind; at least (1 - COMM_OVERLAP) of each stays exposed
(last bucket, synchronisation)."""
REFERENCE_HOST_OP_SECONDS = 8.87e-6
"""The host dispatch speed the fitted host constants (LAUNCH_SECONDS, CKPT_LAYER_SECONDS, DS_*_SECONDS, the decode
launches, the data path, ...) stand for: the median over the calibration records that measured their host
(bench/host_probe.py, a 1-element CUDA op under no_grad; 307 records of 159 configurations on H200 hosts measured
6.0-13.7 us). Within a configuration measured on several hosts the step follows this op time the more closely the
more of the step the host sets (docs/accuracy.md, step time measured more than once: r = +0.72, slope 0.76 where
the step is 70-100 % host-bound). tests/bench/test_host_probe_fit.py holds it to the records."""
HOST_FACTOR_EXPONENT = 0.75
"""host_factor is (op / REFERENCE_HOST_OP_SECONDS) ** this: the slope of log step against log op time measured within
configurations whose step is 70-100 % host-bound (0.76 over 50 records, rounded to 0.05; docs/accuracy.md). A host
whose ops dispatch slower is not slower by as much at everything the host does in a step (Python, the allocator,
the interpreter's own speed: bench/host_probe.py's python_call_us follows the op time less, r = 0.52). With 1 the
host-bound records' median |error| falls as far but their 90th percentile and worst grow (33.0 -> 35.3 %, 54.8 ->
55.2 %); with this value all three fall (14.5 -> 12.5 %, 33.0 -> 32.9 %, 54.8 -> 51.9 %)."""
HOST_FACTOR_BOUNDS = (0.5, 2.0)
"""The most a measured host scales the host parts of a step: the calibration hosts spanned 0.68-1.54 of the
median; a reading beyond these bounds says more about the probe (a busy machine, a throttled core) than the step."""
STEP_FIXED_SECONDS = 0.01
"""Per optimizer step outside the model: dataloader, grad-norm .item() sync, scheduler, logging, Trainer callbacks."""
DATA_SECONDS_PER_TOKEN = 4.6e-7
"""Host CPU seconds per token the Trainer's data path costs at the start of each step: the Arrow rows turned into
Python lists (datasets) and padded into tensors by TRL's collator, in the training process (dataloader_num_workers=0,
as the bundles and the benchmark run), after the previous step's syncs, so the GPU waits for it. Measured on the
H200 host with TRL 1.16's own SFT dataloader over the benchmark's data (bench/data_probe.py,
bench/results/data-probe-h200-2026-12-02.json): 0.45-0.56 ms per 1,024 tokens, median 0.47, at 1-8k tokens per
sequence; 0.21-0.27 ms on a 2-core development machine."""
LORA_STEP_SECONDS_PER_TENSOR = 6.47e-5
"""Host seconds per adapter tensor (lora_A, lora_B of each adapted Linear) that a LoRA step of TRL costs outside its
micro-batches, with the GPU idle. Measured, not fitted: TRL's step time of five benchmark rows (Llama-3.2-1B,
Qwen3-0.6B and -1.7B, Qwen2.5-0.5B and -3B, LoRA, one GPU) less the wall time of the same micro-batch profiled alone
(bench/results/kernel-probe-h200-2026-12-02.json), the data path, the optimizer step and STEP_FIXED_SECONDS: 14-42 ms
per step, 0.064-0.092 ms per adapter tensor, median 0.0647 (bench/kernel_terms.py step_gaps; 0.080 before the
Qwen3-1.7B row's third record, bench/results/h200-2026-12-02-profile-steps.jsonl, moved its median step). The full
fine-tunes' gaps are within -20 to +2 ms of what those terms already give them; which part of TRL / PEFT / accelerate's per-step
work over the fp32 adapters costs this is not isolated."""
DATA_ROWS = {"dpo": 2}
"""Sequences the data path builds per sample beyond one: DPO's chosen and rejected."""

DS_GRAD_HOOK_SECONDS = 6.4e-4
"""DeepSpeed ZeRO-1/2/3 host CPU time per trainable parameter tensor per micro-batch (grad hook, copy into the ipg
bucket, bucket bookkeeping). Seeded from gpu-notes.md at 4.5e-4 (0.5B, 290 tensors, 8 x 1024 tokens, one H200: ZeRO-2
0.25 s vs plain 0.12 s per step -> 0.13 s / 290), when it was added to the step; fitted with DS_FETCH_SECONDS on the
fit rows once both became host dispatch that overlaps the GPU's queue (deepspeed_hook_seconds): 7.4e-4. Refitted
(7.4e-4 before) on the fit rows once the GPU's rates were measured by kernel (bench/kernel_terms.py), the data path
and LoRA's per-step cost were their own terms, and forward and backward overlapped apart. Refitted alone
(6.88e-4 before) on the fit rows once the ZeRO optimizer step's GPU work and host part were terms of their own
(DS_STEP_BYTES_PER_PARAM, DS_STEP_HOST_SECONDS_PER_TENSOR): the calibration's objective over the fit rows is lowest
at 6.0-6.5e-4, flat between."""
DS_FETCH_SECONDS = 7.73e-4
"""DeepSpeed ZeRO-3 host CPU time per parameter-holding module per fetch pass (forward, backward, and the recompute
under checkpointing): the pre/post-forward hooks' fetch_sub_module / release_sub_module, one params set, wait loop and
prefetch bookkeeping per module (deepspeed/runtime/zero/partitioned_param_coordinator.py). Seeded at 4.3e-4 per
parameter tensor from the same note (ZeRO-3 0.50 s -> (0.38 - 0.13) s / (290 tensors x 2 passes)); measured apart on
one 1-GPU H200 machine (bench/rows/z3-decompose-2026-12-01.json), ZeRO-3 added 0.91 s to SmolLM2-360M (291 modules, 290
tensors) and 0.90 s to Qwen2.5-1.5B (255 modules, 338 tensors), following modules rather than tensors; fitted with
DS_GRAD_HOOK_SECONDS on the fit rows: 7.5e-4 per module-pass. Refitted (7.5e-4 before) on the fit rows once the GPU's
rates were measured by kernel (bench/kernel_terms.py), the data path and LoRA's per-step cost were their own terms,
and forward and backward overlapped apart. Not refitted once the norms were counted at ZERO3_PERSISTENT_HOOK_FRACTION:
bench/zero3_hook_probe.py times 729 us per partitioned module and forward pass on the H200 host, within 6 % of this
value, while a joint refit of the speed constants on the fit rows (seven ZeRO-3 rows, Qwen2 and SmolLM of the
2026-11-29 and 12-01 hosts) moves it to 9.8e-4 and the holdout's step median from 4.45 to 4.98 % (runs over 20 %: 9
to 17 of 136)."""
ZERO3_PERSISTENT_HOOK_FRACTION = 0.228
"""What ZeRO-3's hooks cost on a module whose parameters all stay gathered (Dims.persistent_modules: the norms), per
pass, as a fraction of a partitioned module's DS_FETCH_SECONDS. Its fetch finds every parameter available (no
all-gather submitted, none waited for) and its release frees none, so only the hooks' bookkeeping is left: measured
apart by bench/zero3_hook_probe.py on the H200 host (bench/results/zero3-hook-probe-h200-2026-12-03.json, stacks of 96
modules under ZeRO-3 against the same without DeepSpeed): 166 us per norm-like module in the forward against 729 us
per partitioned Linear (and 162 us per module with no parameters, which the count leaves to DS_FETCH_SECONDS' fit),
0.228 of it; not fitted. Counting the norms as whole modules had ZeRO-3 of the norm-heavy families over-predicted on
twins run on one machine (bench/rows/zero3-norms-2026-12-03.json: Gemma-3-1B, 13 parameter-holding modules per layer
of which 6 norms, ZeRO-3 added 0.56 s to a 0.28 s step; 1.02 s predicted)."""
CPU_ADAM_CORE_NS = 4.081
"""DeepSpeed's CPU optimizer step per fp32 parameter of the local partition, the part its cores share, ns x cores:
DeepSpeedCPUAdam's OpenMP loop over master, grad and both moments, and the unscale (grad.mul_) before it, both run on
every CPU the process may use. Measured apart by halving the CPUs of one host (taskset, 16 -> 8): the same ZeRO
offload rows in the same hour took 0.21-0.30 ns per parameter more on 8 CPUs; the median of the four pairs' ns x
cores, 3.28, 3.36, 4.80 and 13.1 (bench/offload_terms.py core_term). 3.357 over the first three: Gemma-3-1B's pair
was left out while the model's other terms exceeded its measured 16-CPU step; with ZeRO-3's hooks on its norms
counted at ZERO3_PERSISTENT_HOOK_FRACTION they no longer do, and its pair, whose 8-CPU step is 0.82 s longer where
the others' are 0.25-0.52 s longer, enters: what else in Gemma-3's offloaded step follows the CPU count is not
measured apart."""
CPU_ADAM_SERIAL_NS = 0.076
"""The part that more CPUs do not shorten, ns per fp32 parameter (host memory bandwidth, the single-threaded work
around each sub-group's step): each offload record's implied CPU step per parameter less CPU_ADAM_CORE_NS / its CPUs,
the median per host, then over the eleven hosts (bench/offload_terms.py serial_term). It follows the host: the hosts'
medians run from 0.04 to 0.49 ns on machines of one kind, six of them at 0.04-0.07 and five at 0.19-0.49, and each
host's records predicted from the other hosts' terms are off by 8 % (median) and 39 % (worst) (leave one host out,
docs/accuracy.md). With 16 CPUs the two terms give 0.33 ns per parameter. It was 0.275 while the gradients' copies to
the host were counted as mostly hidden behind the backward (offload_gradient_bytes): fitted to grad_accum-1 rows, it
carried their cost, which made ZeRO-2 offload rows over-predicted by 13-41 % and ZeRO-3's with accumulation
under-predicted; counted in series, ZeRO-2 and ZeRO-3 records of one host imply about the same serial part
(docs/accuracy.md, optimizer offload with gradient accumulation). 0.130 over ten hosts; the eleventh (the rows of
bench/rows/offload-ga-validate-2026-12-03.json, predicted with 0.130 before they ran) was a fast one; 0.071 while
DS_GRAD_HOOK_SECONDS was 6.88e-4 (before the ZeRO step's host part was its own term)."""
ZERO3_COPY_BACK_NS = 0.396
"""ZeRO-3 optimizer offload, the updated weights back to the GPU, ns per parameter of the partition: stage3.py
_reassign_or_swap_out_partitioned_parameters runs `fp16_flat.data.copy_(fp32_flat.data)`, a blocking host fp32 ->
GPU 16-bit copy, which torch converts on the CPU into a new pageable tensor and then copies (aten Copy.cu
copy_kernel_cuda). Timed apart on the H200 host (bench/copy_probe.py, bench/results/copy-probe-h200-2026-12-02-16cpu
.json: 0.396 ns per element with 16 CPUs, 0.447 with 8)."""
ZERO12_COPY_BACK_NS = 0.110
"""The same for ZeRO-1/2 offload (stage_1_and_2.py step): the conversion into a pinned 16-bit buffer, then a
non_blocking copy; 0.110 ns per element on the same host (0.126 with 8 CPUs). Four times cheaper than ZeRO-3's copy:
before these two terms (a 4 B/param copy at the PCIe rate for both stages), ZeRO-3 offload rows implied 0.30 ns per
parameter more CPU step than their ZeRO-2 twins on one host, the difference of the two copies (0.29 ns). Both were
timed on a PCIe 5 host; a slower link makes the GPU copy's part slower (0.036 of ZeRO-2's 0.110 ns, 0.094 of
ZeRO-3's 0.396 ns), which the model does not scale."""
HOST_CONVERT_NS = 0.074
"""fp32 -> 16-bit conversion into a pinned host tensor, ns per element (the same probe: 0.074 with 16 CPUs, 0.093 with
8): ZeRO-3's copy back when offload "all" keeps the 16-bit partition on the host (stage3.py keeps
fp16_partitioned_groups_flat in pinned memory with offload_param), its GPU fetch counted per pass instead."""
OPTIMIZER_BYTES_PER_WEIGHT_BYTE = 10
"""Bytes a single-GPU or FSDP2 optimizer step streams per byte of a trained weight: clip_grad_norm_ 3 (the norm's
read, the in-place scale's read and write of each grad) and fused AdamW 7 (weight, grad, exp_avg and exp_avg_sq read;
weight and both moments written). Timed apart on the H200 (bench/optimizer_probe.py, bench/results/optimizer-probe-
h200-2026-12-02.json: clip + step of seven bf16 models, 1.0-7.6B parameters, 12-63 ms, 2.0-2.9x the 16 B per
parameter at MEM_BW_EFFICIENCY used before; at this count and ELEMENTWISE_BW_EFFICIENCY the dense models come within
10 %, Gemma-3-1B's 340 tensors excepted)."""
DS_STEP_BYTES_PER_PARAM = 63.2
"""Bytes per partitioned parameter DeepSpeed's ZeRO optimizer step streams, counted at the elementwise rate: its
kernels, profiled on one H200 (bench/rows/zero-step-2026-12-03.json, bench/results/h200-2026-12-03-zero-step.jsonl:
ZeRO-2 and ZeRO-3 against the same step without DeepSpeed, four models of 0.5-3.8B), are fp32 FusedAdam (28 B: weight,
grad and both moments read, three written), each 16-bit grad cast to fp64 and its norm taken one tensor at a time
(get_grad_norm_direct: 10 + 8 B), the partition flattened to fp32 (6 B), scaled for clipping (8 B) and copied back to
the 16-bit weights (6 B), and the gradients' bucket copies and averaging (16 B): about 82 B, 101 ms for Phi-3-mini
under ZeRO-2 and 101 ms under ZeRO-3, where the step without DeepSpeed is 20 B (OPTIMIZER_BYTES_PER_WEIGHT_BYTE).
Fitted with DS_STEP_KERNEL_SECONDS_PER_TENSOR by least squares to the ZeRO-2 rows' added kernel time plus the step
without DeepSpeed (`python -m bench.zero_step_terms`). 40 B at MEM_BW_EFFICIENCY before: the added step was predicted
3-10 ms where 16-75 ms of kernels were measured."""
DS_STEP_KERNEL_SECONDS_PER_TENSOR = 2.96e-5
"""GPU seconds per trainable tensor of a ZeRO optimizer step beyond its bytes: the per-tensor loops launch about 19
short kernels per tensor (the ZeRO-2 rows' kernel counts grow by 18.7-19.5 per tensor), each with a floor of its own
(fitted with DS_STEP_BYTES_PER_PARAM)."""
DS_MICRO_BYTES_PER_PARAM = 12.0
"""ZeRO-2/3 each micro-batch that does not step: every gradient copied into the reduction bucket and out to its
partition (device-to-device, 2 + 2 B each) and averaged in place (2 + 2 B) (stage_1_and_2.py
reduce_independent_p_g_buckets_and_remove_grads, copy_grads_in_partition, gradient_reduction_w_predivide); the
micro-batch that steps is in DS_STEP_BYTES_PER_PARAM."""
DS_STEP_HOST_SECONDS_PER_TENSOR = 7.7e-5
"""Host seconds per trainable tensor of a ZeRO optimizer step that the GPU does not hide: the ZeRO-2 rows' step less
their kernel time grows by 0.055-0.178 ms per tensor over the same step without DeepSpeed (median 0.077, eight
records, `python -m bench.zero_step_terms`): the step's per-tensor loops (the fp64 norms, the flattening) launch
after the backward's queue has drained."""
HOST_MEMORY_BW_GBPS = 150.0
"""Cap on a node's usable host memory bandwidth (two-socket DDR5 servers: ~300 GB/s peak, ~50% sustained)."""
NVME_GBPS = 6.0
"""Sequential NVMe bandwidth per node for ZeRO-Infinity swaps (one PCIe 4 x4 drive: ~7 GB/s read)."""
VLLM_STEP_SECONDS = 2e-3
"""vLLM scheduler + CUDA-graph launch time per decode step."""
DECODE_LAUNCH_SECONDS = 18.3e-6
"""CPU time per launched kernel in an HF `generate` decode step. generate runs under torch.no_grad(): no autograd
graph is recorded, so an op costs less on the CPU than in a training forward (LAUNCH_SECONDS). The decode term used
LAUNCH_SECONDS (35e-6) before, and both GRPO fit rows came out too slow: grpo-q0.5b (128 decode steps) 5.81 s
predicted vs 3.57 s measured, grpo-q1.5b (256 steps) 13.15 s vs 8.89 s, i.e. 21-24 us per kernel of a decode step
once training is subtracted. Fitted with the other speed constants (only the GRPO rows depend on it): 23e-6 on the
2026-11-29 rows; 18.4e-6 once each generation round's fixed cost is its own term (GENERATE_CALL_SECONDS) and the
Qwen3 rows' q/k norms are counted in the decode step's kernels; 16.1e-6 with every GRPO/RLOO row measured on two to
four machines and its step time the median of its records (bench/accuracy.py step_of_records; refitted with
GENERATE_CALL_SECONDS, the two constants those records inform). bench/decode_probe.py measured one decode step of
Qwen2.5-0.5B on one machine (bench/results/decode-probe-h200-2026-12-01.json): 1,106-1,130 kernels (this term counts
1,240), 2.5-2.9 ms of GPU kernel time and 21-34 ms of wall time: the host's dispatch sets the step, 19-31 us per
kernel there, and a 1-element CUDA op under no_grad took 8-12 us on that host. Refitted (16.1e-6 before) on the fit
rows once the GPU's rates were measured by kernel (bench/kernel_terms.py), the data path and LoRA's per-step cost were
their own terms, and forward and backward overlapped apart."""
DECODE_CACHE_PASSES = 3
"""Times one decode step of transformers' generate streams the KV cache: DynamicLayer.update appends the step's keys
and values with torch.cat (cache_utils.py, transformers 5.17-5.25), which reads the whole cache and writes it anew, and
attention reads the new one. The step's GPU time is the weights read once plus these passes (generation_seconds)."""
PACK_GQA_SINCE = (5, 23)
"""The first transformers release whose SDPA attention packs a single query token's heads onto the KV heads
(integrations/sdpa_attention.py pack_gqa) when it gets a mask. Before it (5.17-5.22 read), a decode step with a mask
on a model with fewer KV heads than query heads repeats K and V to every query head (repeat_kv): SDPA's enable_gqa is
passed only without a mask (use_gqa_in_sdpa). Training forwards (more than one query token) repeat them in every
release (activations.sdpa_masked_fraction)."""


def decode_repeats_kv(d: MD.Dims, plan: Plan, target: Target) -> bool:
    """Whether a decode step of HF generate copies the KV cache to every query head (PACK_GQA_SINCE): a padded batch
    under SDPA, a GQA model, a transformers release before pack_gqa."""
    return (d.q > d.kv and MA.sdpa_masked_fraction(d, plan) > 0
            and transformers_release(target) < PACK_GQA_SINCE)


def decode_kv_passes(d: MD.Dims, plan: Plan, target: Target) -> float:
    """Passes over the KV cache per decode step (DECODE_CACHE_PASSES), plus repeat_kv's where the step repeats the
    cache (decode_repeats_kv): it reads the cache once, writes it q_heads / kv_heads times over, and SDPA reads
    that copy."""
    passes = float(DECODE_CACHE_PASSES)
    if decode_repeats_kv(d, plan, target):
        rep = d.q / d.kv
        passes += MA.sdpa_masked_fraction(d, plan) * (1 + 2 * rep)
    return passes


GENERATE_CALL_SECONDS = 0.357
"""CPU time of one GRPO/RLOO generation round with transformers' generate, outside the decode steps: TRL's
_generate_and_score_completions (prompt tokenization and padding, unwrap_model_for_generation, batch_decode of the
completions, the reward functions, gathers, advantages, metric logging) and generate's own set-up (generation config,
logits processors, the cache, the prefill's dispatch). Read off the Qwen2.5-0.5B GRPO rows of bench/results, whose
generation time is linear in the completion length: 48, 128 and 512 tokens take about 1.5, 3.3 and 12.0 s, i.e.
23 ms per decode step plus 0.4 s. Seeded there and fitted with the other speed constants; 0.428 refitted with
DECODE_LAUNCH_SECONDS on the medians of every GRPO/RLOO row's records (its note). Refitted (0.428 before) on the fit
rows once the GPU's rates were measured by kernel (bench/kernel_terms.py), the data path and LoRA's per-step cost were
their own terms, and forward and backward overlapped apart. Refitted (0.347 before) on the fit rows once the
optimizer step was timed apart (OPTIMIZER_BYTES_PER_WEIGHT_BYTE), Gemma-2's soft-capping, Phi-3's strided ops and
transformers 5.17's MoE masks were terms, and the 2026-12-02 family rows (bench/rows/family-check-2026-12-02.json)
and host-phase records joined the fit."""
FSDP2_DECODE_MODULE_SECONDS = 9.67e-4
"""Host seconds FSDP2 adds per wrapped module and decode step of transformers' generate (GRPO/RLOO/GKD without
vLLM under an FSDP2 plan), at the reference host (REFERENCE_HOST_OP_SECONDS). With reshard_after_forward (the
bundles' FULL_SHARD) every wrapped module unshards before its forward at every decode step (all-gather, copy-out)
and frees after it, even on one process: its pre/post-forward hooks and about 12.6 more kernels per module are
host work a decode step (tiny GEMMs) does not hide. Measured by bench/decode_probe.py --fsdp2 both on one H100
(bench/results/decode-probe-fsdp2-h100-2026-12-07.json): Qwen2.5-0.5B and 1.5B at batches 8 and 64, each wrapped
(decoder layers and root: 25 and 29 modules) beside its plain twin, decode steps 18-27 ms plain and 53-62 ms
wrapped; per module 0.92-1.77 ms at that host, the median 0.967 ms once each case is scaled to the reference host
by its own 1-element op time (bench.decode_probe.fsdp2_module_seconds; tests/model/test_fsdp2_decode_term.py holds
the constant to it). A full RLOO bundle under FSDP2 ran 1.52x slower than its single-GPU twin on one H100 before
this term (bench/results/verify-h100-2026-12-07-new-5.jsonl, -6.jsonl)."""
ADAPTER_TOGGLE_SECONDS = 1.26e-4
"""CPU time, per adapted Linear, of switching a PEFT model's adapters off and back on: what DPOTrainer and KTOTrainer
(TRL 1.16) pay per micro-batch to score a LoRA run's reference with the adapters disabled (`with use_adapter(model,
None)` around the reference forward, dpo_trainer.py _compute_loss, kto_trainer.py; PEFT disable_adapter walks every
module twice and flips each adapter's layers). Measured by bench/adapter_probe.py on the H200 machine's host
(bench/results/adapter-probe-h200-2026-12-02.json): 120-131 us per LoRA module over seven architectures of 112-252
adapted Linears (14-30 ms per micro-batch), the median taken; not fitted."""
BNB_MATMUL_SECONDS = 4.02e-4
"""CPU time of one bitsandbytes 4-bit matmul call, per quantized Linear per pass (forward, recompute, backward).
bitsandbytes 0.50 MatMul4Bit is a Python autograd Function; above 1536 token rows its CUDA gemm_4bit op falls back to
dequantizing the nested absmax (dequantize_blockwise + offset), then the NF4 weight, then F.linear, each a
torch.library kernel registered in Python, and the backward dequantizes again (backends/cuda/ops.py,
autograd/_functions.py). The model had no such cost and under-predicted both QLoRA fit rows: sft-q1.5b-qlora-ckpt
0.35 s vs 0.60 s measured (-41%), sft-q3b-qlora-nockpt 0.37 s vs 0.43 s (-14%). One constant explains both (588 and
504 calls per step): fitted with the other speed constants (only the QLoRA rows depend on it): 3.7e-4 s. With the
2026-12-01 rows the joint refit moves it to 4.2e-4 for a 2 % lower objective; it is left at 3.7e-4: the QLoRA rows it
moves are the ones where the model's CPU dispatch and GPU time are within a few % of each other and the measured step
exceeds both (the overlap of the two is not modelled), and at 4.2e-4 the planner's QLoRA pick for the plan-quality
workload qlora-3b flips to the plan without Liger, measured 13 % slower (docs/plan-quality.md). Refitted (3.7e-4 before)
on the fit rows once the
GPU's rates were measured by kernel (bench/kernel_terms.py), the data path and LoRA's per-step cost were their own
terms, and forward and backward overlapped apart: 3.9e-4, and the qlora-3b pick holds (docs/plan-quality.md).
Refitted (3.90e-4 before) on the fit rows once the optimizer step was timed apart (OPTIMIZER_BYTES_PER_WEIGHT_BYTE),
Gemma-2's soft-capping, Phi-3's strided ops and transformers 5.17's MoE masks were terms, and the 2026-12-02 family
rows (bench/rows/family-check-2026-12-02.json) and host-phase records joined the fit."""


@dataclass(frozen=True)
class SpeedEstimate:
    step_seconds: float
    tokens_per_second: float
    """Trained tokens per second over all GPUs (Plan.tokens_per_step / step_seconds; DPO counts chosen + rejected)."""
    mfu: float
    """Model FLOPs utilization: useful training FLOPs (no recompute, reference or generation) / (step x peak), per GPU."""

    @property
    def effective_tokens_per_second(self) -> float:
        """Tokens per second of the whole run, the work outside the steps included (what the planner ranks)."""
        total = self.step_seconds + self.amortized_seconds
        return self.tokens_per_second * self.step_seconds / total if total > 0 else 0.0
    amortized_seconds: float = 0.0
    """Work done outside the training steps, spread over one epoch's steps: precomputed reference log-probs (scored
    once before training) and BEMA's periodic weight averaging. The planner ranks by effective_tokens_per_second."""
    breakdown: dict[str, float] = field(default_factory=dict)
    """Seconds per step: compute (GEMMs), elementwise (norms, RoPE, activation, residual adds, autocast casts),
    adapters (PEFT's elementwise work), attention, recompute, dequantize (QLoRA), reference (reference / KL / teacher
    forwards, GRPO/RLOO log-prob passes), communication (exposed), offload_transfer, cpu_adam, optimizer_step,
    generation, overhead (CPU dispatch beyond the GPU work, DeepSpeed hooks, the Trainer's fixed cost). They add up to
    step_seconds."""
    flops_per_step: float = 0.0
    """Training FLOPs one GPU executes per step (with recompute and in-loss reference forwards; not generation)."""


# ---------------------------------------------------------------------------------------------------------------------
# Rates
# ---------------------------------------------------------------------------------------------------------------------
def cpu_optimizer_seconds_per_param(cores: int) -> float:
    """DeepSpeed's CPU optimizer step per fp32 parameter of a partition on a host with `cores` usable CPUs."""
    return (CPU_ADAM_SERIAL_NS + CPU_ADAM_CORE_NS / max(1, cores)) * 1e-9


def peak_flops(plan: Plan, target: Target) -> float:
    """Dense tensor-core peak for the compute dtype (bf16/fp16 for 16-bit and mixed precision; fp32 without TF32,
    PyTorch's default for matmuls)."""
    return target.gpu.peak_tflops(plan.precision) * 1e12


def gemm_efficiency(hidden: int, tokens: int) -> float:
    """Achieved fraction of peak: MFU_CEILING, reduced for skinny GEMMs (small hidden) and short micro-batches."""
    return MFU_CEILING * hidden / (hidden + HIDDEN_HALF) * tokens / (tokens + TOKENS_HALF)


def attention_head_dim_factor(head_dim: int) -> float:
    """Attention efficiency at this head size over that at 64 (ATTENTION_HEAD_DIM_96's note): the measured sizes'
    factors, linear between them, held at the end values outside 64-256."""
    points = ((64, 1.0), (96, ATTENTION_HEAD_DIM_96), (128, ATTENTION_HEAD_DIM_128), (256, ATTENTION_HEAD_DIM_256))
    if head_dim <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points[:-1], points[1:], strict=True):
        if head_dim <= x1:
            return y0 + (y1 - y0) * (head_dim - x0) / (x1 - x0)
    return points[-1][1]


def attention_efficiency(seq_len: int, head_dim: int = 64) -> float:
    """Fraction of the peak SDPA's fused attention kernels sustain: ATTENTION_EFFICIENCY at head_dim 64, less for
    short sequences (x s / (s + ATTENTION_SEQ_HALF): fewer key blocks per query block to pipeline), scaled by the
    head size (attention_head_dim_factor)."""
    return ATTENTION_EFFICIENCY * seq_len / (seq_len + ATTENTION_SEQ_HALF) * attention_head_dim_factor(head_dim)


def mem_bw(target: Target) -> float:
    return target.gpu.mem_bw_gbps * GB * MEM_BW_EFFICIENCY


def elementwise_bw(target: Target) -> float:
    """HBM bandwidth eager elementwise kernels sustain in a training micro-batch (ELEMENTWISE_BW_EFFICIENCY)."""
    return target.gpu.mem_bw_gbps * GB * ELEMENTWISE_BW_EFFICIENCY


def collective_seconds(nbytes: float, factor: float, ranks: int, plan: Plan, target: Target) -> float:
    """Ring collective time (NCCL tests PERFORMANCE.md: all-reduce moves 2(n-1)/n x S per rank, all-gather and
    reduce-scatter (n-1)/n x S; factor = 2 or 1). Hierarchical over nodes: the intra-node part at the per-GPU NVLink /
    PCIe bandwidth, the inter-node part of S through the node's NICs (inter_node_bw_gbps per node)."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    per_node = max(1, min(ranks, plan.gpus_per_node - plan.vllm_gpus))
    nodes = max(1, -(-ranks // per_node))
    t = factor * nbytes * (per_node - 1) / per_node / (target.intra_node_bw_gbps * GB) if per_node > 1 else 0.0
    if nodes > 1:
        t += factor * nbytes * (nodes - 1) / nodes / (target.inter_node_bw_gbps * GB)
    return t


def exposed(comm: float, window: float) -> float:
    """What a collective adds to the step when it can overlap `window` seconds of compute."""
    if comm <= 0:
        return 0.0
    return max(comm - COMM_OVERLAP * window, (1 - COMM_OVERLAP) * comm)


# ---------------------------------------------------------------------------------------------------------------------
# FLOPs (Kaplan et al. arXiv:2001.08361 / PaLM arXiv:2204.02311 appendix B: 2 FLOPs per weight per token forward,
# backward twice the forward -> 6N; attention scores and values 2 x 2 x s x heads x head_dim per token per layer
# forward, halved for a causal mask -> 6 L s (heads x head_dim) per token for training)
# ---------------------------------------------------------------------------------------------------------------------
def attention_context(model: ModelSpec, seq_len: int, masked: float = 0.0) -> float:
    """Keys each query attends to on average x 2 (causal: s/2 x 2 = s); sliding windows cap it on the sliding layers
    (Phi-3 every layer, Gemma 2 every other, Gemma 3 five of six: Dims.sliding_fraction). `masked`: the fraction of
    layers where SDPA gets a materialized mask (activations.sdpa_masked_fraction): the memory-efficient kernel then
    adds the mask as a bias to every score, without causal or window skipping, so those layers compute all s x s
    scores (2 s per query)."""
    s = float(seq_len)
    d = MD.dims(model)
    f = d.sliding_fraction
    if not f:
        return s if not masked else (1 - masked) * s + masked * 2 * s
    window = min(s, 2.0 * model.sliding_window)
    local = 2 * s if masked else window
    return (1 - f) * s + f * local


def expert_share(d: MD.Dims) -> float:
    """The routed experts' share of a token's body matmul FLOPs (MoE; 0 for dense models)."""
    if not d.moe:
        return 0.0
    experts = d.L * d.experts_per_token * 3 * d.h * d.moe_I
    return experts / max(1, d.matmul_active - d.lm_head)


def moe_gemm_slowdown(d: MD.Dims, tokens: float) -> float:
    """How much slower the body's GEMMs run than dense ones of the same FLOPs because of the routed experts: each
    expert multiplies only the tokens routed to it (tokens x experts_per_token / num_experts rows) by a
    moe_intermediate-wide weight, so its grouped GEMM is skinny in both dimensions; gemm_efficiency's own penalties
    for small hidden sizes and short token counts, applied to those shapes. 1 for dense models."""
    share = expert_share(d)
    if not share:
        return 1.0
    per_expert = max(1.0, tokens * d.experts_per_token / max(1, d.num_experts))
    dense = gemm_efficiency(d.h, int(tokens))
    expert = gemm_efficiency(min(d.h, d.moe_I), int(per_expert))
    return (1 - share) + share * dense / expert


def forward_flops(d: MD.Dims, model: ModelSpec, tokens: float, logit_tok: float, seq_len: int,
                  masked: float = 0.0) -> tuple[float, float]:
    """(matmul, attention) FLOPs of one forward over `tokens` tokens, `logit_tok` of which go through the LM head."""
    body = 2.0 * (d.matmul_active - d.lm_head) * tokens
    head = 2.0 * d.lm_head * logit_tok
    attn = 2.0 * attention_context(model, seq_len, masked) * d.q * d.L * tokens
    return body + head, attn


# ---------------------------------------------------------------------------------------------------------------------
# Terms
# ---------------------------------------------------------------------------------------------------------------------
def micro_batch_times(d: MD.Dims, model: ModelSpec, plan: Plan, target: Target, pr: Precision) -> dict[str, float]:
    """GPU seconds of one micro-batch's forward + backward (+ recompute, dequantization, reference forwards), its
    CPU dispatch time, and its useful FLOPs."""
    t = MA.local_tokens(plan)
    n_logit = MA.logit_tokens(plan)
    peak = peak_flops(plan, target)
    eff = gemm_efficiency(d.h, t)
    masked = MA.sdpa_masked_fraction(d, plan)
    mm_f, attn_f = forward_flops(d, model, t, n_logit, plan.seq_len, masked)
    head_f = 2.0 * d.lm_head * n_logit
    # routed experts: the body's FLOPs counted at what their skinny grouped GEMMs sustain
    body_f = (mm_f - head_f) * moe_gemm_slowdown(d, t)
    mm_f = body_f + head_f
    adapter = plan.method != "full"
    lora_f = 2.0 * d.lora(plan.lora_r) * t if adapter else 0.0
    # TRL's fused LM head (add_fused_lm_head -> ChunkedLogProbFunction) recomputes each logits tile in its backward:
    # one more head GEMM per trained micro-batch (trl/kernels/chunked_logprob.py backward: torch.mm(hidden_chunk,
    # w_chunk.t(), out=tile) before the two gradient GEMMs)
    head_recompute = head_f if plan.trainer in FUSED_HEAD_TRAINERS else 0.0
    if adapter:
        # frozen base: forward + input-gradient GEMMs (4N); attention's backward still runs to reach earlier adapters.
        # The adapters' own GEMMs (r columns) are memory-bound: lora_gemm_seconds, not FLOPs at GEMM efficiency.
        # A MoE's experts are adapted through their merged weight (moe_lora_merge_seconds), which requires grad: the
        # experts' weight-gradient GEMMs run as in full fine-tuning
        train_mm = 2 * body_f + 2 * head_f + head_recompute + body_f * expert_share(d)
    else:
        train_mm = 3 * mm_f + head_recompute
    train_attn = 3 * attn_f
    eager_bytes = 0.0
    if plan.attn == "eager":
        # eager computes the full (non-causal) score matrix and streams it through HBM: QK^T out (2 B), scale (4),
        # mask add (6), fp32 softmax (6), bf16 cast (6), read by AV (2): ~26 B per score forward, ~2x in backward.
        # Gemma 2's logit soft-capping adds three more passes over the bf16 scores (modeling_gemma2.py
        # eager_attention_forward: `/ softcap`, `tanh`, `* softcap`, each reading and writing 2 B): 12 B more.
        rows = plan.micro_batch * (2 if plan.trainer == "dpo" else 1)
        scores = rows * (d.heads / max(1, plan.sp_size)) * plan.seq_len ** 2 / max(1, plan.cp_size) * d.L
        eager_bytes = scores * (26.0 + (12.0 if d.attn_softcap else 0.0))
        train_attn *= 2.0  # no causal skipping
    recompute_mm = recompute_flops(d, plan, t, body_f)
    recompute_attn = attn_f * (2.0 if plan.attn == "eager" else 1.0) if plan.grad_ckpt else 0.0

    # SDPA on masked layers: torch converts the bool mask to a float one per call (zeros_like + masked_fill_: about
    # 5 B per score row element) and the memory-efficient kernel reads that bias once per head in the forward and
    # twice in the backward (its 4-D view broadcasts the heads; attention.cu get_bias_4d_view)
    bias_bytes = 0.0
    if masked:
        rows = plan.micro_batch * (2 if plan.trainer == "dpo" else 1)
        per_layer = rows * plan.seq_len ** 2 / max(1, plan.cp_size)
        bias_bytes = masked * d.L * per_layer * (5 + HALF * d.heads / max(1, plan.sp_size))
    # SDPA's fused kernels (cuDNN / flash) sustain ATTENTION_EFFICIENCY of the peak; eager attention runs its scores
    # as batched GEMMs plus the streamed score matrix
    attn_rate = peak * (eff if plan.attn == "eager" else attention_efficiency(plan.seq_len, d.head_dim))
    compute = train_mm / (peak * eff)
    attention = train_attn / attn_rate + 3 * (eager_bytes + bias_bytes) / mem_bw(target)
    recompute = recompute_mm / (peak * eff) + ((recompute_attn / attn_rate + (eager_bytes + bias_bytes)
                                                / mem_bw(target)) if plan.grad_ckpt else 0.0)
    dequant = 0.0
    if plan.method == "qlora":
        passes = 3 if plan.grad_ckpt else 2
        dequant = passes * d.quantized * (MU.NF4_BYTES_PER_PARAM + HALF) / mem_bw(target)

    # reference / KL / teacher forwards inside compute_loss (no grad)
    ref_passes = 0
    if plan.trainer == "dpo" and plan.ref_model != "precompute":
        ref_passes = 1
    elif plan.trainer == "kto":
        ref_passes = 1 + (2 if plan.ref_model != "precompute" else 0)  # KL pass of the policy + ref on both
    elif plan.trainer == "gkd":
        ref_passes = 1
    teacher_ratio = MGKD.teacher_forward_params(plan) / d.P if plan.trainer == "gkd" and plan.teacher_params else 1.0
    reference = ref_passes * teacher_ratio * (mm_f + attn_f) / (peak * eff)
    # Precomputed reference log-probs run those reference forwards once over the dataset before training
    # (DPOTrainer/KTOTrainer _precompute_ref_logps): for one epoch (the bundles' num_train_epochs=1) one reference
    # forward per sample, the work a copy does at each step, done up front. Not in the step time (the training steps
    # do not run it, as measured), but in SpeedEstimate.amortized_seconds, which the planner ranks by.
    precompute_passes = {"dpo": 1, "kto": 2}.get(plan.trainer, 0) if plan.ref_model == "precompute" else 0
    precompute = precompute_passes * (mm_f + attn_f) / (peak * eff)

    adapters = (lora_elementwise_seconds(d, plan, target, pr) + lora_gemm_seconds(d, plan, target, pr)
                + moe_lora_merge_seconds(d, plan, target) if adapter else 0.0)
    fwd_passes = 1 + (1 if plan.grad_ckpt else 0)
    head = fused_head_seconds(d, target, n_logit) if plan.trainer in FUSED_HEAD_TRAINERS else 0.0
    # GKD's loss over the two models' full fp32 logits (advisor.model.gkd): streamed, counted with the elementwise work
    gkd_loss = MGKD.loss_seconds(d.V, t, target) if plan.trainer == "gkd" else 0.0
    elementwise = elementwise_seconds(d, plan, target, pr, t, fwd_passes, ref_passes) + head + gkd_loss

    gpu = compute + attention + recompute + dequant + reference + adapters + elementwise
    # The forward phase, up to TRL's metric sync (each trainer's compute_loss calls .item() on its logged metrics
    # after the forward and before the backward: sft_trainer.py entropy / mean_token_accuracy, dpo_trainer.py and
    # kto_trainer.py rewards and logits, grpo_trainer.py / rloo_trainer.py policy loss and entropy): the GPU drains
    # its queue there, so forward and backward each overlap their own dispatch (estimate_speed)
    elem_fwd_share = (1 + ref_passes) / (fwd_passes + ELEMENTWISE_BWD_FACTOR + ref_passes)
    gpu_fwd = (mm_f / (peak * eff) + attn_f / attn_rate + (eager_bytes + bias_bytes) / mem_bw(target)
               + (elementwise - head - gkd_loss) * elem_fwd_share + head * FUSED_HEAD_FWD_SHARE + reference
               + gkd_loss * MGKD.LOSS_FORWARD_SHARE
               + (dequant / (fwd_passes + 1))
               + (adapters / (fwd_passes + 2) if adapter else 0.0))
    gpu_fwd = min(gpu_fwd, gpu)
    liger = plan.liger
    kf = LIGER_KERNELS_FWD_PER_LAYER if liger else KERNELS_FWD_PER_LAYER
    kb = LIGER_KERNELS_BWD_PER_LAYER if liger else KERNELS_BWD_PER_LAYER
    extra_f, extra_b = extra_layer_kernels(d, liger)
    kf, kb = kf + extra_f, kb + extra_b
    casts = autocast_casts_per_layer(d, plan, pr)
    per_layer = (kf + casts) * fwd_passes + kb + casts + kf * ref_passes
    if adapter:
        lf, lb = LORA_KERNELS_PER_LINEAR
        per_layer += d.adapted_per_layer * (lf * fwd_passes + lb)
    per_layer_fwd = kf + casts + kf * ref_passes
    if adapter:
        per_layer_fwd += d.adapted_per_layer * LORA_KERNELS_PER_LINEAR[0]
    tiles = -(-max(1, n_logit) // MU.CHUNK_TOKENS) * -(-d.V // MU.CHUNK_VOCAB)
    kernels = d.L * per_layer + HEAD_KERNELS_PER_TILE * tiles * (2 + ref_passes)
    kernels_fwd = d.L * per_layer_fwd + HEAD_KERNELS_PER_TILE * tiles * (1 + ref_passes)
    if plan.trainer == "gkd":
        kernels += sum(MGKD.LOSS_KERNELS)
        kernels_fwd += MGKD.LOSS_KERNELS[0]
    checkpoint = d.L * CKPT_LAYER_SECONDS if plan.grad_ckpt else 0.0
    dispatch = kernels * LAUNCH_SECONDS + checkpoint
    dispatch_fwd = kernels_fwd * LAUNCH_SECONDS + checkpoint * CKPT_FORWARD_SHARE
    toggle = adapter_toggle_seconds(d, plan)
    dispatch += toggle
    dispatch_fwd += toggle
    if plan.method == "qlora":
        # every quantized Linear runs MatMul4Bit in the forward (and recompute) and again in the backward
        dispatch += d.L * d.nn_linears_per_layer * (fwd_passes + 1) * BNB_MATMUL_SECONDS
        dispatch_fwd += d.L * d.nn_linears_per_layer * BNB_MATMUL_SECONDS
    host = host_factor(target)
    dispatch, dispatch_fwd = dispatch * host, dispatch_fwd * host
    useful = train_mm - head_recompute + 3 * lora_f + train_attn / (2.0 if plan.attn == "eager" else 1.0)
    executed = (train_mm + 3 * lora_f + train_attn + recompute_mm + (lora_f if plan.grad_ckpt else 0.0)
                + recompute_attn + ref_passes * (mm_f + attn_f))
    return {"compute": compute, "attention": attention, "recompute": recompute, "dequantize": dequant,
            "reference": reference, "adapters": adapters, "elementwise": elementwise, "gpu": gpu, "dispatch": dispatch,
            "gpu_forward": gpu_fwd, "dispatch_forward": dispatch_fwd,
            "useful_flops": useful, "flops": executed, "backward": (compute + attention) * 2 / 3,
            "precompute": precompute}


def adapter_toggle_seconds(d: MD.Dims, plan: Plan) -> float:
    """Host seconds per micro-batch of disabling the adapters for the reference forward (ADAPTER_TOGGLE_SECONDS): a
    DPO/KTO LoRA or QLoRA run whose reference is the base model (ref_model "none"), one toggle per micro-batch (KTO
    scores its KL batch inside the same context)."""
    if plan.trainer not in ("dpo", "kto") or plan.method == "full" or plan.ref_model != "none":
        return 0.0
    return d.L * d.adapted_per_layer * ADAPTER_TOGGLE_SECONDS


def recompute_skips_down_proj(d: MD.Dims, plan: Plan) -> bool:
    """Whether checkpointing's recompute stops before each layer's down_proj. torch.utils.checkpoint non-reentrant
    (transformers' default, use_reentrant=False) stops recomputing once every tensor the backward saved is rebuilt
    (`early_stop`, default True, torch/utils/checkpoint.py). down_proj's input is saved (its weight gradient); its
    output is saved only when a later op needs it: not when it goes into the residual add (Llama, Qwen, Mistral,
    Phi-3: six of seven, three of four GEMMs recomputed per layer, counted on CPU with a dispatch mode), yes under
    Gemma's post-feedforward norm or a MoE's routing weights (Dims.mlp_output_saved), and yes when PEFT's adapter
    runs after the base Linear (lora.Linear.forward: lora_B saves lora_A's output)."""
    return plan.grad_ckpt and plan.method == "full" and not d.mlp_output_saved


def recompute_flops(d: MD.Dims, plan: Plan, tokens: int, body_f: float) -> float:
    """GEMM FLOPs checkpointing's recompute runs per micro-batch: the decoder body's forward, less down_proj where
    the recompute stops before it (recompute_skips_down_proj). Profiled on the H200 (bench/results/dispatch-probe-
    h200-2026-12-02-*.json, full training; checkpointed kernel time less the same micro-batch's without): Qwen2.5-1.5B
    and -3B at 2k x 4 recomputed for 0.79x and 0.77x of what the whole forward's recompute predicts, as six of seven
    GEMMs do; Gemma-3-1B and the LoRA cases within 7 % of the whole forward's."""
    if not plan.grad_ckpt:
        return 0.0
    if recompute_skips_down_proj(d, plan):
        return max(0.0, body_f - 2.0 * d.h * d.I * tokens * d.L)
    return body_f


def extra_layer_kernels(d: MD.Dims, liger: bool) -> tuple[int, int]:
    """Kernels a decoder layer launches beyond the Llama/Qwen2 layer of KERNELS_FWD_PER_LAYER (forward, backward):
    norms beyond two (Gemma's four), the q/k norms (Qwen3, Gemma3), and the MoE routing around the experts."""
    nf, nb = LIGER_NORM_KERNELS if liger else NORM_KERNELS
    norms = max(0, d.norms - 2) + (2 if d.qk_norm else 0)
    mf, mb = MOE_ROUTING_KERNELS if d.moe else (0, 0)
    return norms * nf + mf, norms * nb + mb


def layer_elementwise_bytes(d: MD.Dims, plan: Plan, pr: Precision, moe_masks: bool = False) -> float:
    """HBM bytes per token that one decoder layer's forward streams through non-GEMM ops (eager transformers 5
    Llama/Qwen2 modules; act = activation bytes, res = residual-stream bytes):

    - RMSNorm (norms_per_layer of them): x.to(float32) (res + 4), pow (4 + 4), mean (4), x * rsqrt (4 + 4), the cast
      back (4 + res), weight * x (2 res): 28 + 4 res per element of hidden. LigerRMSNorm: one read, one write (2 res).
    - RoPE on q and k: q * cos, rotate_half (neg, cat), * sin, add: ~10 act per element. Liger's RoPE kernel rotates q
      and k in place: 2 act.
    - SiLU-gated MLP: SiLU (2 act) and the product with up (3 act) per intermediate element; LigerSiLUMulFunction
      reads gate and up and writes the product: 3 act.
    - two residual adds (3 res each) and SDPA's output transpose + contiguous (2 act per q element).
    - Qwen3 / Gemma3's per-head q and k norms: an RMSNorm over q + kv elements (input in act bytes).
    - MoE: the routed copies of each token (experts_per_token rows of hidden): the gather, the routing-weight
      multiply (read and write), the inverse permutation (read and write) and the per-token sum read them: 6 act.
      With `moe_masks` (transformers releases that mask the expert-parallel sentinel rows unconditionally:
      moe_sentinel_masks), three masked_fill passes read and write each routed row's input and output (hidden each)
      and its gate/up output (2 x moe intermediate): 2 act x (2 hidden + 2 moe intermediate).
    - torch.autocast with an fp32 residual stream (bf16-mixed / fp16-mixed) casts each Linear's input to 16-bit
      (res + act per element) per call: q/k/v (one call each unless fused) and gate/up.
    The GEMMs' own time is `compute`; this term is what makes Liger faster on the GPU, not only on the CPU."""
    a, res = pr.act, pr.res
    if plan.liger:
        norm, rope, act = 2 * res, 2 * a, 3 * a
    else:
        norm, rope, act = 28 + 4 * res, 10 * a, 5 * a
        # fused projections hand RoPE and the SwiGLU strided views of one output (STRIDED_ELEMENTWISE_FACTOR)
        rope *= STRIDED_ELEMENTWISE_FACTOR if d.fused_qkv else 1.0
        act *= STRIDED_ELEMENTWISE_FACTOR if d.gate_up_linears == 1 and not d.moe else 1.0
    width = d.I if not d.moe else d.experts_per_token * d.moe_I + d.shared_I
    per_token = d.norms * norm * d.h + rope * (d.q + d.kv) + act * width + 2 * 3 * res * d.h + 2 * a * d.q
    if d.qk_norm:
        per_token += (2 * a if plan.liger else 28 + 4 * a) * (d.q + d.kv)
    if d.moe:
        per_token += 6 * a * d.experts_per_token * d.h
        if moe_masks:
            per_token += 2 * a * d.experts_per_token * (2 * d.h + 2 * d.moe_I)
    if pr.autocast and res != a:
        per_token += (d.qkv_linears + d.gate_up_linears) * d.h * (res + a)
    return float(per_token)


def elementwise_seconds(d: MD.Dims, plan: Plan, target: Target, pr: Precision, tokens: int, fwd_passes: int,
                        ref_passes: int) -> float:
    """GPU seconds of the memory-bound non-GEMM ops per micro-batch: each forward pass (and recompute) streams
    layer_elementwise_bytes per token and layer, the backward ELEMENTWISE_BWD_FACTOR times that, each no-grad
    reference forward once more. Autocast over fp32 weights (bf16-mixed) also casts every matmul weight to 16-bit
    per forward pass (4 + 2 B per param; the cache lives for one forward) and the trained weights' 16-bit gradients
    back to fp32 in the backward (2 + 4 B)."""
    per_pass = tokens * d.L * layer_elementwise_bytes(d, plan, pr, moe_sentinel_masks(target))
    nbytes = per_pass * (fwd_passes + ELEMENTWISE_BWD_FACTOR + ref_passes)
    if pr.fp32_weights_amp:
        matmul = d.quantized + d.lm_head
        trained = matmul if plan.method == "full" else 0
        nbytes += (FP32 + HALF) * (matmul * fwd_passes + trained)
    return nbytes / elementwise_bw(target)


STRIDED_ELEMENTWISE_FACTOR = 1.67
"""How much longer an eager elementwise op takes on a strided view than on a contiguous tensor of the same size:
Phi-3's fused qkv_proj and gate_up_proj (modeling_phi3.py: q, k and v sliced out of one output, `gate, up_states =
up_states.chunk(2, dim=-1)`) give RoPE and the SwiGLU non-contiguous inputs, and TensorIterator runs them through its
non-vectorized kernel (elementwise_kernel<128, 4> in the profile, where a Llama layer's run vectorized). Read off the
profiled Phi-3 micro-batches (bench/kernel_terms.py strided_factor): their non-GEMM time over the model's, with the
strided ops' bytes scaled by this factor. Liger's RoPE and SwiGLU kernels take strides themselves."""
MOE_MASKS_BEFORE = (5, 24)
"""transformers 5.17's grouped_mm_experts_forward (integrations/moe.py, read on the H200 machine) masks the
expert-parallel sentinel rows with masked_fill on every call: the routed input, the gate/up output and the down
output (six masked_fill kernels per MoE layer and micro-batch in the profile, bench/results/kernel-probe-h200-
2026-12-02-families.json: 16 ms of Qwen3-30B-A3B's 95 ms of non-GEMM time at 8 layers and 8k tokens); 5.24's masks
only under expert parallelism (`if self._is_expert_parallel`). The releases between were not read: they count as
masking, the older behaviour."""
DEFAULT_TRANSFORMERS = (5, 24)
"""The transformers release a target without a probed version is predicted for: the one the bundles pin for TRL
1.16 (rules/data/pins.toml)."""


def transformers_release(target: Target) -> tuple[int, int]:
    """(major, minor) of the target's transformers (Target.software, as probed or as a benchmark record ran it),
    DEFAULT_TRANSFORMERS when unknown or unreadable."""
    text = str((target.software or {}).get("transformers") or "")
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return DEFAULT_TRANSFORMERS


def moe_sentinel_masks(target: Target) -> bool:
    """Whether the target's transformers masks MoE sentinel rows on every expert call (MOE_MASKS_BEFORE)."""
    return transformers_release(target) < MOE_MASKS_BEFORE


def autocast_casts_per_layer(d: MD.Dims, plan: Plan, pr: Precision) -> int:
    """Extra kernels per decoder layer and pass under torch.autocast over fp32 tensors (bf16-mixed / fp16-mixed): one
    input cast per q/k/v and gate/up call (the residual stream is fp32) and one weight cast per Linear (the autocast
    cache lasts one forward); the backward runs as many cast-backward kernels."""
    if not (pr.autocast and pr.res != pr.act):
        return 0
    # one cast per weight a layer multiplies by: a MoE's fused expert parameters are cast whole, once each
    return d.qkv_linears + d.gate_up_linears + (d.adapted_per_layer if pr.fp32_weights_amp else 0)


def _lora_widths(d: MD.Dims) -> tuple[int, int]:
    """(input, output) elements per token and layer of the adapted Linears (target_modules="all-linear"): q, k, v
    each read the hidden state (one input when fused), o reads q; gate and up read the hidden state, down the
    intermediate; outputs q, k, v, o, gate and up (2 x intermediate), down. MoE experts are not adapted."""
    i_w = d.I if not d.moe else 0
    ins = (d.qkv_linears + (d.gate_up_linears if i_w else 0)) * d.h + d.q + i_w
    outs = d.q + 2 * d.kv + d.h + (2 * i_w + d.h if i_w else 0)
    return ins, outs


def lora_elementwise_seconds(d: MD.Dims, plan: Plan, target: Target, pr: Precision) -> float:
    """Memory-bound work PEFT's lora.Linear adds around its two small GEMMs, per micro-batch (peft 0.21
    tuners/lora/layer.py Linear.forward: x = self._cast_input_dtype(x, lora_A.weight.dtype);
    result = result + lora_B(lora_A(dropout(x))) * scaling). On each adapted Linear's input, per forward (and
    recompute): the cast to the fp32 adapter dtype (read act, write 4 B), dropout (read, write, 1-byte mask) and
    autocast's cast back to bf16 for lora_A (read 4, write 2); the backward runs the same chain in reverse (cast,
    masked_scale, cast: as many bytes) and adds the adapter's input gradient to the base layer's (read 2 x act, write
    act). On its output: the scaling multiply and the add into the base output (10 B) forward, the multiply's
    backward (4 B). Profiled (bench/results/kernel-probe-h200-2026-12-02.json, Llama-3.2-1B LoRA): per adapted Linear
    one input cast each way, one dropout and one masked_scale, as counted here; on contiguous tensors these vectorized
    kernels stream at MEM_BW_EFFICIENCY (the probe's LoRA cases: 0.98-1.06 of this term with the base's)."""
    ins, outs = _lora_widths(d)
    c_in = 0
    if pr.adapter != pr.act:
        c_in += pr.act + pr.adapter
    if MA.lora_dropout_active(plan, d.moe):  # DPO/KTO/GKD zero it (memory.DROPOUT_DISABLED_TRAINERS)
        c_in += 2 * pr.adapter + 1
    if pr.autocast and pr.adapter == FP32:
        c_in += FP32 + HALF
    fwd = 1 + (1 if plan.grad_ckpt else 0)
    per_token = ins * (c_in * fwd + c_in + 3 * pr.act) + outs * (10 * fwd + 4)
    # contiguous tensors (the Linear's input and output): the vectorized kernels stream at the full rate
    return MA.local_tokens(plan) * d.L * per_token / mem_bw(target)


MOE_MERGE_FORWARD_BYTES = 8.44
"""HBM bytes per expert parameter that LoRA on a MoE layer's experts moves in each forward (and recompute) beyond
LoRA on its attention alone: PEFT 0.21's lora.ParamWrapper folds `W + B @ A` into the parametrized expert stack with a
baddbmm of inner size r (tuners/lora/layer.py _LoraFactorsProxy, the path of a 16-bit stack), reading the stack and
writing its merged copy: 8.17 B of its 8.44 are baddbmm's, twice the 4 B one read and one write of a 16-bit stack
would be, as the op counts show it runs. Measured by counting every op's bytes
(bench/moe_lora_probe.py merge_bytes, bench/results/moe-lora-probe-cpu-2026-12-08.json: 8.44 on Qwen3-MoE and
Mixtral shapes, 4 and 8 layers)."""
MOE_MERGE_BACKWARD_BYTES = 6.7
"""The backward's: the adapters' gradients from the merged copy's (bmm over the full-size gradient, 4.65 B per
parameter) and that full-size gradient written by the experts' weight-gradient GEMM (2.05), which a frozen expert
stack would not run at all; the GEMM's FLOPs are counted too (micro_batch_times), but with few tokens per expert its
full-size output sets its time. The same probe."""


def moe_lora_merge_seconds(d: MD.Dims, plan: Plan, target: Target) -> float:
    """LoRA on a MoE's experts: the full-size merge of each adapted expert stack per forward, recompute and backward
    (MOE_MERGE_FORWARD_BYTES, MOE_MERGE_BACKWARD_BYTES), at the skinny GEMMs' rate (_merge_bw). Memory: the merged copy is
    what the experts save (activations.MOE_LORA_SAVED_STACKS). 0 for dense models and full fine-tuning."""
    if not d.moe or plan.method == "full":
        return 0.0
    passes = 1 + (1 if plan.grad_ckpt else 0)
    per_param = MOE_MERGE_FORWARD_BYTES * passes + MOE_MERGE_BACKWARD_BYTES
    return d.L * d.experts_per_layer * per_param / _merge_bw(target)


def _merge_bw(target: Target) -> float:
    """The rate of the merge's kernels: GEMMs with r columns (the baddbmm, the adapters' gradient bmm), which stream
    at what the adapters' own skinny GEMMs were measured to (LORA_GEMM_BW_EFFICIENCY)."""
    return target.gpu.mem_bw_gbps * GB * LORA_GEMM_BW_EFFICIENCY


def moe_lora_merge_forward_seconds(d: MD.Dims, plan: Plan, target: Target) -> float:
    """The merge of one forward alone: what every forward of transformers' generate pays too (the prefill and each
    decode step: ParamWrapper merges inside forward, with or without grad), however few tokens it runs. vLLM runs
    the weights TRL syncs into it, merged once per step, so its decode pays none."""
    if not d.moe or plan.method == "full":
        return 0.0
    return d.L * d.experts_per_layer * MOE_MERGE_FORWARD_BYTES / _merge_bw(target)


def lora_gemm_seconds(d: MD.Dims, plan: Plan, target: Target, pr: Precision) -> float:
    """The adapters' own GEMMs: with r columns (16) they stream their tokens x features operand and do almost no
    arithmetic, so they take bytes / bandwidth, not FLOPs / peak. Per forward (and recompute) lora_A reads its input
    and lora_B writes its output; the backward reads the input again (lora_A's weight gradient), writes the input
    gradient, and reads the output gradient twice (lora_B's weight gradient and the gradient into lora_A). Under
    autocast they run in bf16, else in the adapters' dtype. LORA_GEMM_BW_EFFICIENCY: measured on one H200."""
    ins, outs = _lora_widths(d)
    w = pr.act if pr.autocast else pr.adapter
    passes = 1 + (1 if plan.grad_ckpt else 0) + 2
    nbytes = MA.local_tokens(plan) * d.L * (ins + outs) * w * passes
    return nbytes / (target.gpu.mem_bw_gbps * GB * LORA_GEMM_BW_EFFICIENCY)


def fused_head_seconds(d: MD.Dims, target: Target, logit_tokens: int) -> float:
    """The elementwise part of TRL's fused LM head per trained micro-batch: its Triton forward kernel reads each
    logits tile once (log-sum-exp, entropy, top-1) and the backward kernel reads the recomputed tile and writes the
    logit gradient in place (trl/kernels/chunked_logprob.py _forward_kernel, _backward_kernel): FUSED_HEAD_BYTES per
    logit, at the streaming bandwidth (fused Triton kernels)."""
    return logit_tokens * d.V * FUSED_HEAD_BYTES / mem_bw(target)


def optimizer_step_seconds(d: MD.Dims, plan: Plan, target: Target, pr: Precision) -> float:
    """The optimizer step on the GPU is memory-bound. The Trainer's clip_grad_norm_ (max_grad_norm 1.0) reads every
    grad for the norm and scales it in place (3w bytes per param), then fused AdamW (optim "adamw_torch_fused") reads
    weight, grad and both moments and writes weight and both moments (7w): OPTIMIZER_BYTES_PER_WEIGHT_BYTE x w, at the
    elementwise rate (torch's foreach / fused kernels stream at it, not at the GEMM-adjacent MEM_BW_EFFICIENCY).
    DeepSpeed's ZeRO step on its partition: zero_step_gpu_seconds. Offloaded optimizers run on the CPU (cpu_adam)."""
    if plan.offload != "none":
        return 0.0
    adapter = plan.method != "full"
    ptr = MS.trainable_params(d, plan)
    n = MS.shard_count(plan)
    if plan.backend == "deepspeed":
        return zero_step_gpu_seconds(d, plan, target)
    w = pr.adapter if adapter else pr.trained
    local = ptr / (n if plan.backend == "fsdp2" else 1)
    return local * OPTIMIZER_BYTES_PER_WEIGHT_BYTE * w / elementwise_bw(target)


def _zero_trainable_tensors(d: MD.Dims, plan: Plan) -> int:
    """The trainable tensors DeepSpeed's ZeRO optimizer loops over: the adapters' under LoRA, else every tensor."""
    return adapter_tensors(d, plan) or d.tensors


def zero_step_gpu_seconds(d: MD.Dims, plan: Plan, target: Target) -> float:
    """The GPU work of DeepSpeed's ZeRO optimizer step on its partition (stage_1_and_2.py / stage3.py step, not
    offloaded): DS_STEP_BYTES_PER_PARAM per partitioned parameter at the elementwise rate and
    DS_STEP_KERNEL_SECONDS_PER_TENSOR per trainable tensor of the partition (its per-tensor norm loop); ZeRO-2/3 also
    copy every gradient into the reduction bucket and average it each micro-batch that does not step
    (DS_MICRO_BYTES_PER_PARAM)."""
    n = MS.shard_count(plan) if plan.zero_stage >= 1 else 1
    ptr = MS.trainable_params(d, plan)
    seconds = (ptr / n * DS_STEP_BYTES_PER_PARAM / elementwise_bw(target)
               + _zero_trainable_tensors(d, plan) / n * DS_STEP_KERNEL_SECONDS_PER_TENSOR)
    if plan.zero_stage >= 2:
        seconds += (plan.grad_accum - 1) * ptr * DS_MICRO_BYTES_PER_PARAM / elementwise_bw(target)
    return seconds


def zero_step_host_seconds(d: MD.Dims, plan: Plan) -> float:
    """Host time of DeepSpeed's ZeRO-1/2 optimizer step that no GPU work hides (DS_STEP_HOST_SECONDS_PER_TENSOR per
    trainable tensor of the partition, measured on ZeRO-2: stage_1_and_2.py runs ZeRO-1 and 2). 0 without it, with the
    optimizer offloaded (offload_seconds counts that step) and under ZeRO-3, whose host gap the profiled rows cannot
    part from its fetch hooks (DS_FETCH_SECONDS, measured apart by bench/zero3_hook_probe.py)."""
    if plan.backend != "deepspeed" or plan.zero_stage not in (1, 2) or plan.offload != "none":
        return 0.0
    n = MS.shard_count(plan)
    return _zero_trainable_tensors(d, plan) / n * DS_STEP_HOST_SECONDS_PER_TENSOR


def communication_seconds(d: MD.Dims, plan: Plan, target: Target, pr: Precision, micro: dict[str, float]) -> float:
    """Exposed collective time per step.

    DDP: one all-reduce of the trainable grads per step (accelerate skips the sync on accumulation micro-batches),
    overlapping the last backward. ZeRO-1: the same, in 16-bit, then an all-gather of the updated 16-bit params
    (exposed). ZeRO-2: a reduce-scatter of 16-bit grads every micro-batch (stage 2 cannot hold full grads) plus the
    param all-gather. ZeRO-3 and FSDP2: every micro-batch all-gathers all params for the forward, again for the backward
    (and again for the recompute), and reduce-scatters the grads, prefetched behind compute. Ulysses SP: four
    all-to-alls (q, k, v, out) per layer per pass, on the critical path. Ring CP: K/V blocks passed cp-1 times per
    layer, hidden behind the attention."""
    ga = plan.grad_accum
    dp = plan.dp_size
    n = MS.shard_count(plan)
    adapter = plan.method != "full"
    ptr = MS.trainable_params(d, plan)
    total = 0.0
    window_bwd = micro["backward"]
    window_all = micro["gpu"]
    if plan.backend == "ddp":
        gb = pr.adapter if adapter else pr.load
        total += exposed(collective_seconds(ptr * gb, 2, dp, plan, target), window_bwd)
    elif plan.backend == "deepspeed":
        w = pr.work
        s = plan.zero_stage
        # ZeRO-1/2 reduce on the compute stream, in series with the backward, unless overlap_comm (reduce_ipg_grads)
        hide = exposed if plan.overlap_comm or s not in (1, 2) else (lambda comm, _window: comm)
        if s in (0, 1):
            total += hide(collective_seconds(ptr * w, 2, n, plan, target), window_bwd)
            if s == 1:
                total += collective_seconds(ptr * w, 1, n, plan, target)
        elif s == 2:
            total += ga * hide(collective_seconds(ptr * w, 1, n, plan, target), window_bwd)
            total += collective_seconds(ptr * w, 1, n, plan, target)
        else:
            all_params = (MS.frozen_base_bytes(d, plan, w) + ptr * w) if adapter else d.P * w
            passes = 3 if plan.grad_ckpt else 2
            ag = passes * collective_seconds(all_params, 1, n, plan, target)
            rs = collective_seconds(ptr * w, 1, n, plan, target)
            total += ga * exposed(ag + rs, window_all)
    elif plan.backend == "fsdp2":
        cb = pr.compute
        all_params = (MS.frozen_base_bytes(d, plan, cb) + ptr * cb) if adapter else d.P * cb
        passes = 3 if plan.grad_ckpt else 2
        ag = passes * collective_seconds(all_params, 1, n, plan, target)
        rs = collective_seconds(ptr * (pr.adapter if adapter else pr.load), 1, n, plan, target)
        total += ga * exposed(ag + rs, window_all)
    t = MA.local_tokens(plan)
    if plan.sp_size > 1:
        sp = plan.sp_size
        per_pass = d.L * t * (2 * d.q + 2 * d.kv) * pr.act * (sp - 1) / sp / (target.intra_node_bw_gbps * GB)
        total += ga * per_pass * (3 if plan.grad_ckpt else 2)
    if plan.cp_size > 1:
        cp = plan.cp_size
        ring = d.L * 2 * d.kv * t * pr.act * (cp - 1) / (target.intra_node_bw_gbps * GB) * 3
        total += ga * max(0.0, ring - COMM_OVERLAP * micro["attention"])
    return total


def offload_gradient_bytes(plan: Plan) -> float:
    """Bytes per parameter of the local partition the gradients move over PCIe per optimizer step, both ways, with
    DeepSpeed's optimizer offload (16-bit gradients).

    ZeRO-2 (deepspeed 0.19.8 stage_1_and_2.py copy_grads_in_partition): with accumulation every micro-batch copies
    each gradient to a pinned host buffer in the 16-bit dtype (async_accumulate_grad_in_cpu_via_gpu,
    copy_gradients_to_cpu, 2 B), every one but the first first brings that buffer back and adds it on the GPU (2 B),
    and the boundary copies the sum to the fp32 host gradient (async_inplace_copy_grad_to_fp32_buffer_from_gpu,
    4 B): 4 x grad_accum + 2 B; without accumulation the fp32 copy alone, 4 B. ZeRO-1 reduces once, at the
    boundary: 4 B. ZeRO-3 (stage3.py partition_grads) copies each micro-batch's 16-bit partition to the host and
    back (2 + 2 B, the first micro-batch's return unused) and at the boundary the fp32 gradient (4 B):
    4 x grad_accum + 4 B."""
    ga = plan.grad_accum
    if plan.zero_stage == 2:
        return 4.0 * ga + 2.0 if ga > 1 else FP32
    if plan.zero_stage == 3:
        return 4.0 * ga + 4.0
    return FP32


def offload_seconds(d: MD.Dims, plan: Plan, target: Target, pr: Precision,
                    micro: dict[str, float]) -> tuple[float, float]:
    """(PCIe transfers exposed, CPU optimizer) per step.

    DeepSpeed optimizer offload: the local partition's gradients go to pinned host memory (offload_gradient_bytes,
    in series with the backward), updated params come back after the CPU step (exposed); offload "all" also
    fetches the 16-bit param partition for every forward / backward pass. DeepSpeed's CPU step takes
    cpu_optimizer_seconds_per_param on the host's usable CPUs (Target.cpu_cores), whose cores and memory the node's
    ranks share; NVMe adds reading and writing the 16 B/param states.
    FSDP2 CPU offload moves params in and grads out every pass and steps with torch's slower CPU AdamW."""
    if plan.offload == "none":
        return 0.0, 0.0
    ga = plan.grad_accum
    n = MS.shard_count(plan)
    pcie = PCIE_GBPS.get(target.gpu.pcie_gen, 25.0) * GB
    ptr = MS.trainable_params(d, plan)
    adapter = plan.method != "full"
    procs = MCAP.processes_per_node(plan)
    per_param = cpu_optimizer_seconds_per_param(target.cpu_cores or DEFAULT_CPU_CORES)
    passes = 3 if plan.grad_ckpt else 2
    if plan.backend == "fsdp2":
        w = pr.compute
        all_params = (MS.frozen_base_bytes(d, plan, w) + ptr * w) if adapter else d.P * w
        move = ga * (passes * all_params / n + ptr * FP32 / n) / pcie
        xfer = exposed(move, ga * micro["gpu"])
        cpu = procs * ptr / n * per_param * TORCH_CPU_ADAM_SLOWDOWN
        return xfer, cpu
    local = ptr / (n if plan.zero_stage >= 1 else 1)
    grads_out = local * offload_gradient_bytes(plan) / pcie
    if plan.zero_stage == 3:
        # offload "all" keeps the 16-bit partition in pinned host memory: the copy back is the CPU conversion alone
        copy_ns = HOST_CONVERT_NS if plan.offload == "all" else ZERO3_COPY_BACK_NS
    else:
        copy_ns = ZERO12_COPY_BACK_NS
    params_in = local * copy_ns * 1e-9
    # The gradients' copies add to the step in series, overlap_comm or not: ZeRO-1/2 without it run them on the
    # compute stream (reduce_ipg_grads), ZeRO-3's side stream makes the host wait on them (more than two buckets
    # pending, and its synchronize at the end of every backward). Measured: the GA series of
    # bench/rows/offload-ga-2026-12-03.json (ZeRO-2 off, ZeRO-3 on) took 0.09-0.15 s more per ZeRO-2 micro-batch
    # than a backward with the copies mostly hidden (4 B per parameter at the PCIe rate), and on every host with both
    # stages ZeRO-3's records implied 0.06-0.29 ns per parameter more "CPU step" than ZeRO-2's (the copies' 4 B more
    # at ga 1, 8 B at the PCIe rate being 0.16 ns); the planner's ZeRO-2 offload bundle (overlap_comm on) ran 7 %
    # slower than predicted with them hidden (bench/results/verify-h200-2026-12-03-offload.jsonl).
    xfer = grads_out + params_in
    if plan.offload == "all" and plan.zero_stage == 3:
        all_params = (MS.frozen_base_bytes(d, plan, pr.work) + ptr * pr.work) if adapter else d.P * pr.work
        xfer += ga * exposed(passes * all_params / n / pcie, micro["gpu"])
    cpu = procs * local * per_param
    if plan.offload_device == "nvme":
        cpu += procs * local * 16 * 2 / (NVME_GBPS * GB)
    return xfer, cpu


def decode_padding_kernels(d: MD.Dims, plan: Plan, target: Target) -> int:
    """Kernels a padded batch adds to one decode step of HF generate under SDPA: DECODE_PADDED_KERNELS_PER_LAYER, two
    more per layer where the step repeats K and V (decode_repeats_kv: one copy each), and
    DECODE_MASK_KERNELS_PER_STEP per mask kind. 0 for fixed-length batches and other attention kernels (not counted:
    FlashAttention unpads each layer's batch its own way)."""
    if plan.attn != "sdpa" or not MA.padding_mask(plan):
        return 0
    masks = 2 if 0 < d.sliding_fraction < 1 else 1
    per_layer = DECODE_PADDED_KERNELS_PER_LAYER + (2 if decode_repeats_kv(d, plan, target) else 0)
    return d.L * per_layer + masks * DECODE_MASK_KERNELS_PER_STEP


def generation_seconds(d: MD.Dims, model: ModelSpec, plan: Plan, target: Target, pr: Precision,
                       on_policy_share: float = MGKD.ON_POLICY_SHARE) -> tuple[float, float]:
    """(generation, log-prob passes) per step for GRPO/RLOO (one generation of mb x grad_accum completions per GPU per
    step) and GKD (each micro-batch generates with probability lmbda: on_policy_share of them, from the row's prompt;
    under gradient checkpointing GKD generates without a KV cache, use_cache=False in GKDTrainer's generation config,
    so each decode step is a forward over the whole sequence so far).

    Decode is memory-bound: each step reads every weight once for the whole batch plus the KV cache so far
    (Williams et al. roofline; Pope et al. arXiv:2211.05102 section 2), unless the batch makes it compute-bound
    (2 N_active FLOPs per sequence); HF generate also pays eager CPU dispatch per step. vLLM runs CUDA graphs
    (VLLM_STEP_SECONDS per step); colocate syncs weights in-process once per step, server mode broadcasts them over
    NCCL and generates every rank's batch on its own GPUs (TP over vllm_gpus). ZeRO-3 gathers all params once per
    generate (ds3_gather_for_generation); FSDP2 all-gathers every layer at every decode step."""
    if plan.trainer not in ("grpo", "rloo", "gkd"):
        return 0.0, 0.0
    peak = peak_flops(plan, target)
    bw = mem_bw(target)
    if plan.trainer == "gkd":
        g, completion = plan.micro_batch, MU.GKD_MAX_NEW_TOKENS
        prompt, share = MGKD.on_policy_prompt_tokens(plan), on_policy_share * plan.grad_accum
    else:
        g = MG.generation_batch(plan)
        completion = plan.max_completion_len
        prompt = max(1, plan.seq_len - completion)
        share = 1.0
    active = d.matmul_active
    w16 = pr.work if plan.backend == "deepspeed" else (pr.compute if plan.backend == "fsdp2" else pr.load)
    if plan.method == "qlora":
        weight_read = d.quantized * (MU.NF4_BYTES_PER_PARAM + 2 * HALF) + (d.P - d.quantized) * pr.load
    else:
        weight_read = d.P * w16
    kvb = w16
    kv_avg = 2 * d.L * d.kv * (prompt + completion / 2) * kvb
    # HF generate streams its cache more than once a step (decode_kv_passes); vLLM's paged cache is read once
    hf_kv = kv_avg * decode_kv_passes(d, plan, target)
    n = MS.shard_count(plan)
    # a decode step's GEMMs have the batch as their token dimension; its weight streaming is counted separately, so
    # only the hidden-size penalty applies to its compute bound
    dense = MFU_CEILING * d.h / (d.h + HIDDEN_HALF)

    if plan.vllm_mode == "server" and plan.trainer != "gkd":
        tp = max(1, plan.vllm_gpus)
        batch = g * plan.dp_size
        step_gpu = max((weight_read + kv_avg * batch) / tp / bw, 2.0 * active * batch / (tp * peak * dense))
        decode = completion * (step_gpu + VLLM_STEP_SECONDS)
        prefill = 2.0 * active * batch * prompt / (tp * peak * gemm_efficiency(d.h, batch * prompt))
        sync = collective_seconds(d.P * HALF, 1, 2, plan, target) if plan.nodes == 1 else \
            d.P * HALF / (target.inter_node_bw_gbps * GB)
        gen = decode + prefill + sync
    else:
        prefill = 2.0 * active * g * prompt / (peak * gemm_efficiency(d.h, g * prompt))
        if plan.vllm_mode == "colocate" and plan.trainer != "gkd":
            step_gpu = max((weight_read + kv_avg * g) / bw, 2.0 * active * g / (peak * dense))
            decode = completion * (step_gpu + VLLM_STEP_SECONDS)
            sync = d.P * w16 / bw
        else:
            # LoRA on a MoE merges every expert stack in each forward of generate, prefill and decode steps alike
            merge = moe_lora_merge_forward_seconds(d, plan, target)
            prefill += merge
            step_gpu = max((weight_read + hf_kv * g) / bw, 2.0 * active * g / (peak * dense)) + merge
            if plan.trainer == "gkd" and plan.grad_ckpt:
                step_gpu = max(step_gpu, uncached_decode_seconds(d, model, plan, target, pr, g, prompt + completion / 2))
            kernels = decode_step_kernels(d, plan, target)
            host = host_factor(target)
            dispatch = kernels * DECODE_LAUNCH_SECONDS
            if plan.backend == "fsdp2":
                dispatch += fsdp2_decode_modules(d) * FSDP2_DECODE_MODULE_SECONDS  # unshard/reshard per module
            per_step = max(step_gpu, dispatch * host)
            if plan.backend == "fsdp2":
                per_step += collective_seconds(d.P * w16, 1, n, plan, target)
            call = MGKD.GENERATE_CALL_SECONDS if plan.trainer == "gkd" else GENERATE_CALL_SECONDS
            decode = completion * per_step + call * host
            sync = 0.0
        if plan.backend == "deepspeed" and plan.zero_stage == 3:
            sync += collective_seconds(d.P * pr.work, 1, n, plan, target)
        gen = decode + prefill + sync
    gen *= share

    old, ref = MG.logprob_passes(plan)
    scoring = 0.0
    if old or ref:
        tokens = g * plan.seq_len
        mm_f, attn_f = forward_flops(d, model, tokens, g * completion, plan.seq_len)
        eff = gemm_efficiency(d.h, plan.micro_batch * plan.seq_len)
        scoring = (int(old) + int(ref)) * (mm_f + attn_f) / (peak * eff)
    return gen, scoring


def fsdp2_decode_modules(d: MD.Dims) -> int:
    """Modules an FSDP2 bundle wraps, each unsharded at every decode step: the decoder layers
    (TRANSFORMER_BASED_WRAP) and the root."""
    return d.L + 1


def decode_step_kernels(d: MD.Dims, plan: Plan, target: Target) -> float:
    """Kernels (launch-equivalents for Liger's) one decode step of transformers' generate launches: each layer's,
    with Liger's and the unmerged LoRA adapters' (LORA_DECODE_KERNELS_PER_LINEAR), the step's own, and a padded
    batch's mask (decode_padding_kernels)."""
    lora = LORA_DECODE_KERNELS_PER_LINEAR * d.adapted_per_layer if plan.method != "full" else 0
    per_layer = (DECODE_KERNELS_PER_LAYER + extra_layer_kernels(d, plan.liger)[0]
                 + (LIGER_DECODE_KERNELS_PER_LAYER if plan.liger else 0) + lora)
    return d.L * per_layer + DECODE_KERNELS_PER_STEP + decode_padding_kernels(d, plan, target)


def uncached_decode_seconds(d: MD.Dims, model: ModelSpec, plan: Plan, target: Target, pr: Precision, g: int,
                            context: float) -> float:
    """GPU seconds of one decode step of transformers' generate with use_cache=False (GKD under gradient
    checkpointing): a no-grad forward over all `context` tokens of each of the g rows (generate passes
    logits_to_keep=1, so the head scores the last position only), at the training forward's rates."""
    tokens = max(1, round(g * context))
    mm_f, attn_f = forward_flops(d, model, tokens, g, max(1, round(context)))
    peak = peak_flops(plan, target)
    elementwise = tokens * d.L * layer_elementwise_bytes(d, plan, pr, moe_sentinel_masks(target)) / elementwise_bw(target)
    return (mm_f / (peak * gemm_efficiency(d.h, tokens))
            + attn_f / (peak * attention_efficiency(max(1, round(context)), d.head_dim)) + elementwise)


def adapter_tensors(d: MD.Dims, plan: Plan) -> int:
    """Trainable adapter tensors of a LoRA/QLoRA plan: lora_A and lora_B of each adapted module (0 for full)."""
    return 2 * d.adapted_per_layer * d.L if plan.method != "full" else 0


def deepspeed_hook_seconds(d: MD.Dims, plan: Plan) -> float:
    """Host CPU time DeepSpeed's hooks add to one micro-batch: ZeRO-1/2/3 grad hooks per trainable tensor, ZeRO-3
    fetch / release per parameter-holding module and pass (DS_GRAD_HOOK_SECONDS, DS_FETCH_SECONDS). They run on the
    host between the kernel launches of the same forward and backward (module hooks, autograd hooks), so they are
    dispatch time that a GPU-bound micro-batch hides and a host-bound one pays in full: measured on one H200, ZeRO-3
    added 0.9 s to a 0.27 s checkpointed step of a 0.4-1.5B model, but +21 % was predicted for a 7B LoRA ZeRO-3 step
    (2.4 s) when the hooks were added to its GPU time (docs/accuracy.md)."""
    if plan.backend != "deepspeed" or plan.zero_stage not in (1, 2, 3):
        return 0.0
    adapted = adapter_tensors(d, plan)
    seconds = (adapted or d.tensors) * DS_GRAD_HOOK_SECONDS
    if plan.zero_stage == 3:
        seconds += zero3_fetch_modules(d, plan) * (3 if plan.grad_ckpt else 2) * DS_FETCH_SECONDS
    return seconds


def zero3_fetch_modules(d: MD.Dims, plan: Plan) -> float:
    """The modules ZeRO-3's hooks fetch each pass, in partitioned-module units: every parameter-holding module (the
    adapters' lora_A / lora_B too), a persistent one (Dims.persistent_modules) at ZERO3_PERSISTENT_HOOK_FRACTION."""
    persistent = d.persistent_modules
    return d.param_modules - persistent * (1 - ZERO3_PERSISTENT_HOOK_FRACTION) + adapter_tensors(d, plan)


def deepspeed_forward_hook_seconds(d: MD.Dims, plan: Plan) -> float:
    """The part of deepspeed_hook_seconds that runs in the forward: ZeRO-3's fetch / release of each parameter-holding
    module once (the grad hooks and the other passes' fetches run in the backward)."""
    if plan.backend != "deepspeed" or plan.zero_stage != 3:
        return 0.0
    return zero3_fetch_modules(d, plan) * DS_FETCH_SECONDS


def data_seconds(plan: Plan) -> float:
    """The data path's host time per step on each GPU (DATA_SECONDS_PER_TOKEN): every rank fetches its own
    micro-batches. GRPO/RLOO feed prompts only (generation makes the completions); DPO two sequences per sample."""
    if plan.trainer in ("grpo", "rloo"):
        tokens = max(1, plan.seq_len - plan.max_completion_len)
    else:
        tokens = plan.seq_len * DATA_ROWS.get(plan.trainer, 1)
    return plan.micro_batch * plan.grad_accum * tokens * DATA_SECONDS_PER_TOKEN


def lora_step_seconds(d: MD.Dims, plan: Plan) -> float:
    """LoRA's per-step host cost outside the micro-batches (LORA_STEP_SECONDS_PER_TENSOR per adapter tensor)."""
    return adapter_tensors(d, plan) * LORA_STEP_SECONDS_PER_TENSOR


def host_factor(target: Target) -> float:
    """How much slower (> 1) or faster than the calibration's median host this target's host dispatches: its measured
    op time (Target.host_op_seconds) over REFERENCE_HOST_OP_SECONDS, to the power HOST_FACTOR_EXPONENT, within
    HOST_FACTOR_BOUNDS; 1 when not measured.
    Every host-time term of the step is multiplied by it (the kernels' launches and the hooks before they overlap the
    GPU's work, the Trainer's fixed per-step cost, the data path, transformers' decode launches); the GPU's own work
    and DeepSpeed's CPU optimizer step (OpenMP compute, offload_seconds) are not."""
    op = getattr(target, "host_op_seconds", None)
    if not op or op <= 0 or not math.isfinite(op):
        return 1.0
    lo, hi = HOST_FACTOR_BOUNDS
    return min(hi, max(lo, (op / REFERENCE_HOST_OP_SECONDS) ** HOST_FACTOR_EXPONENT))


def overlap_seconds(gpu: float, dispatch: float) -> float:
    """One micro-batch: the smooth maximum of its GPU time and its CPU dispatch time (OVERLAP_P's note)."""
    if gpu <= 0 or dispatch <= 0:
        return max(gpu, dispatch, 0.0)
    hi = max(gpu, dispatch)  # scaled by the larger: no overflow for any p
    return hi * ((gpu / hi) ** OVERLAP_P + (dispatch / hi) ** OVERLAP_P) ** (1.0 / OVERLAP_P)


def estimate_speed(model: ModelSpec, plan: Plan, target: Target, memory: MemoryEstimate | None = None, *,
                   on_policy_share: float | None = None) -> SpeedEstimate:
    """Seconds per optimizer step, tokens/s and MFU (see the module docstring). GKD: `on_policy_share` of the
    micro-batches generate (default advisor.model.gkd.ON_POLICY_SHARE, the bundles' lmbda); verify asks for the
    share a short run drew."""
    d = dims(model)
    pr = Precision.of(plan)
    ga = plan.grad_accum
    share = MGKD.ON_POLICY_SHARE if on_policy_share is None else min(1.0, max(0.0, on_policy_share))
    micro = micro_batch_times(d, model, plan, target, pr)
    if plan.trainer == "gkd" and share > 0:
        # an on-policy micro-batch trains on the prompt and the tokens generated (advisor.model.gkd)
        on = micro_batch_times(d, model, plan.with_(seq_len=MGKD.on_policy_seq_len(plan)), target, pr)
        micro = {k: (1.0 - share) * v + share * on[k] for k, v in micro.items()}
    host = host_factor(target)
    hooks, hooks_fwd = deepspeed_hook_seconds(d, plan) * host, deepspeed_forward_hook_seconds(d, plan) * host
    # forward and backward each overlap their own dispatch: the metric sync between them (micro_batch_times)
    fwd = overlap_seconds(micro["gpu_forward"], micro["dispatch_forward"] + hooks_fwd)
    bwd = overlap_seconds(micro["gpu"] - micro["gpu_forward"],
                          micro["dispatch"] - micro["dispatch_forward"] + hooks - hooks_fwd)
    overhead_micro = fwd + bwd - micro["gpu"]
    opt = optimizer_step_seconds(d, plan, target, pr)
    comm = communication_seconds(d, plan, target, pr, micro)
    xfer, cpu_adam = offload_seconds(d, plan, target, pr, micro)
    gen, scoring = generation_seconds(d, model, plan, target, pr, share)

    breakdown = {
        "compute": ga * micro["compute"],
        "elementwise": ga * micro["elementwise"],
        "adapters": ga * micro["adapters"],
        "attention": ga * micro["attention"],
        "recompute": ga * micro["recompute"],
        "dequantize": ga * micro["dequantize"],
        "reference": ga * micro["reference"] + scoring,
        "communication": comm,
        "offload_transfer": xfer,
        "cpu_adam": cpu_adam,
        "optimizer_step": opt,
        "generation": gen,
        # each term times the host factor apart (x 1.0 leaves every sum as it was, bit for bit)
        "overhead": (ga * overhead_micro + host * STEP_FIXED_SECONDS + host * lora_step_seconds(d, plan)
                     + host * zero_step_host_seconds(d, plan)),
        "data": data_seconds(plan) * host,
    }
    step = sum(breakdown.values())
    peak = peak_flops(plan, target)
    mfu = ga * micro["useful_flops"] / (step * peak) if step > 0 else 0.0
    amortized = ga * micro["precompute"] + bema_update_seconds(d, plan, target, pr)
    return SpeedEstimate(step_seconds=step, tokens_per_second=plan.tokens_per_step / step if step > 0 else 0.0,
                         mfu=mfu, amortized_seconds=amortized, breakdown=breakdown, flops_per_step=ga * micro["flops"])


HOST_BOUND_PARTS = ("overhead", "data")
"""Step-time parts the host CPU sets: kernel launches beyond the GPU's own work, DeepSpeed's per-tensor hooks and the
Trainer's fixed cost; generation with transformers' generate (no vLLM) is added by host_bound_share (its decode steps
are launches)."""


def host_bound_share(plan: Plan, speed: SpeedEstimate) -> float:
    """The share of the predicted step that the host CPU sets rather than the GPU. Where it is large the step follows
    the host CPU, which machines of one GPU kind do not share, and the model knows the GPU only (docs/accuracy.md:
    step-time error by host-bound share)."""
    if speed.step_seconds <= 0:
        return 0.0
    host = sum(speed.breakdown.get(k, 0.0) for k in HOST_BOUND_PARTS)
    if plan.trainer in ("grpo", "rloo", "gkd") and (plan.trainer == "gkd" or plan.vllm_mode in (None, "", "none")):
        host += speed.breakdown.get("generation", 0.0)
    return min(1.0, host / speed.step_seconds)


BEMA_UPDATE_FREQ = 400
"""trl BEMACallback update_freq and ref_model_update_freq defaults (trl/trainer/callbacks.py, experimental/
bema_for_ref_model/callback.py): the BEMA weights are updated, and the reference reloaded from them, every 400 steps."""


def bema_update_seconds(d: MD.Dims, plan: Plan, target: Target, pr: Precision) -> float:
    """BEMA's periodic work per step, amortized over BEMA_UPDATE_FREQ steps: each trained parameter copied to the host
    (`thetat.detach().to("cpu")`, over PCIe), the EMA and BEMA updates on the host (reading and writing the fp32
    running model, the θ0 and EMA buffers: about 4 passes over fp32 copies, at host memory bandwidth), and the
    reference model reloaded from the running model (`load_state_dict`, host to GPU)."""
    if plan.ref_model != "bema":
        return 0.0
    pcie = PCIE_GBPS.get(target.gpu.pcie_gen, 25.0) * GB
    transfer = 2 * d.P * pr.load / pcie
    host = 4 * d.P * MU.FP32 / (HOST_MEMORY_BW_GBPS * GB)
    return (transfer + host) / BEMA_UPDATE_FREQ
