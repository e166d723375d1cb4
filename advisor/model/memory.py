"""Peak GPU memory of one TRL 1.16 training run, before it is launched.

Pure arithmetic on a ModelSpec, a Plan and a Target: integer bytes, no I/O, no torch. One function per term; each
says where its formula comes from. The peak is the largest of the run's phases, because the big transients of a
step do not overlap:

- ``train``: the end of the forward / start of the backward: model states, the saved activations, and the largest
  transient of the backward (the chunked LM head's fp32 gradients, or a recomputed layer), plus the reference model
  forward that DPO/KTO run at the end of their forward;
- ``late-backward`` (one micro-batch per step only): every gradient allocated, the activations almost all freed;
- ``step``: the optimizer step: weights, full gradients, optimizer states and the step's temporaries;
- ``generation`` (GRPO, RLOO, GKD without vLLM): the generation KV cache and prefill working set (gradients are
  freed by ``zero_grad(set_to_none=True)`` before it) and the no-grad log-prob passes that follow.

The breakdown reported is the one of the phase that holds the peak, so its six parts add up to the peak exactly;
``detail`` has every term of that phase plus each phase's total (``phase_*``).

Every number is either physical (bytes per element, a count read from the code) or one of the FITTED constants in
the block below, to be calibrated against bench/results (``torch.cuda.max_memory_allocated`` per configuration).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from advisor.core.plan import Plan
from advisor.core.specs import ModelSpec
from advisor.core.target import Target

GIB = 1 << 30
MIB = 1 << 20

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
GKD_LOGIT_COPIES = 12
"""[tokens, vocab] tensors alive at once in GKDTrainer.compute_loss + generalized_jsd_loss (trl/experimental/gkd/
gkd_trainer.py): student and teacher logits, each temperature-scaled copy and log_softmax, the two stacked shifted
log-probs (2), their logsumexp mixture, the two kl_div outputs, the two weighted terms and their sum. GKD does not
use the fused LM head in 1.16."""

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

# ---------------------------------------------------------------------------------------------------------------------
# FITTED constants, calibrated on the fit split of bench/results and tests/model/data (measured max_memory_allocated /
# max_memory_reserved / NVML on an H200; docs/accuracy.md, `python -m bench.accuracy`). Nothing else here is tuned.
# ---------------------------------------------------------------------------------------------------------------------
ACTIVATION_FACTOR = 1.0
"""Multiplier on the counted activation bytes: absorbs tensors the per-module count misses (autograd bookkeeping,
small views that pin storage). 1.0 = trust the count. Fitting it on the fit rows gives 0.98 (mean |log error|) or
0.99 (median): 1-2%, inside the scatter of the rows; it is left at 1.0 so the count is not shaded toward
under-prediction (docs/accuracy.md)."""
FRAGMENTATION = 0.04
"""Allocator reserve beyond the allocated peak, as a fraction of the churning (non-persistent) bytes: what
max_memory_reserved exceeds max_memory_allocated by, from blocks split for activations and never reused whole.
Was 0.10. Measured reserve on the 40 fit rows: 0.4% to 19% of the allocated peak (median 5.2%; checkpointed runs
median 7.2%, the others 3.3%), with no clean split between churn and states (a no-checkpointing stack reused whole
every step can show 0.4%, llama-3.1-8b LoRA s8192 b2, or 8.5%, qwen2.5-7b full s4096 b2). Fitting FRAGMENTATION and
STATIC_SLACK freely (mean |log error| of peak reserved) gives 0.007 and 0.073, which scores only 8% better than one
shared fraction but puts nearly all the reserve on the persistent states: extrapolated to sharded states under
long-sequence activations (multi-GPU, 128k tokens) it would predict almost no reserve, where the checkpointed runs
here keep 2-19% of their peak. So both are one fraction, fitted: 0.04 (the minimum, 0.038, scores 0.1% better)."""
STATIC_SLACK = 0.04
"""Same, as a fraction of the persistent model states. Was 0.01; fitted together with FRAGMENTATION, equal to it
(see there): 0.04."""
RUNTIME_ALLOCATED_BYTES = 96 * MIB
"""Tensors the runtime allocates through the caching allocator whatever the model: cuBLAS / cuBLASLt workspaces
(32 MiB per handle on Hopper), RNG states, small buffers. Was 160 MiB. Measured: memory_allocated() after the last
step minus the model's weights and optimizer states, on the fit rows whose weights it counts to within 16 MiB:
64-96 MiB (64.2 MiB for llama-3.1-8b, two 32 MiB cuBLAS workspaces; the rest adds the few MiB of parameters the
count misses, three times over with AdamW). The largest is kept: 96 MiB."""
CUDA_CONTEXT_BYTES = 1410 * MIB
"""Outside max_memory_reserved but inside the GPU's memory as NVML counts it (the catalogue's memory_bytes): CUDA
context, cuBLAS/NCCL kernels, and what the driver holds before any process. Was 2 GiB (gpu-notes.md: "NVML shows
reserved plus about 2 GiB"). Measured on every row of bench/results h200 2026-11-29: NVML used - max_memory_reserved
= 1382 MiB (SFT, DPO), up to 1410 MiB (GRPO, which loads sampling kernels); the largest is kept. It agrees with the
OOM rows: torch saw 139.80 GiB total, of which 0.67 GiB non-PyTorch, and NVML's total is 615 MiB larger."""
NCCL_BUFFER_BYTES = 512 * MIB
"""NCCL's own device buffers (cudaMalloc, outside PyTorch's allocator) once a process group of >1 rank is used."""
SAFETY_MARGIN_FRACTION = 0.03
"""Part of the usable memory kept free for what no model sees (allocator spikes, a larger-than-average batch). A
policy more than a fit: `fits` means reserved <= capacity - margin."""
FSDP2_UNEXPLAINED_MARGIN_FRACTION = 0.17
"""Extra headroom an FSDP2 plan keeps, as a fraction of GPU memory, on top of SAFETY_MARGIN_FRACTION. A policy, not a
fit: the one FSDP2 run measured, DPO Llama-3.1-8B full on 2 x H200 (bench/results/verify-h200-2026-11-29.jsonl),
peaked at 133.3 GiB against 110.1 GiB estimated; its setup (24 GiB) and AdamW states (30 GiB) were as estimated, the
other 23 GiB (17 % of the GPU) appear in the forward and backward and no term explains them yet. Remove this when
one does (rule MEM006 tells users)."""
HOST_PROCESS_BYTES = 4 * GIB
"""Host RAM one training process uses besides model tensors: Python, torch + CUDA libraries, tokenizer, dataloader."""


# ---------------------------------------------------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    gradients: int
    optimizer: int
    activations: int
    logits: int
    other: int
    """Runtime: CUDA workspaces, DDP/ZeRO buckets, gathered shards, reference/teacher model, KV cache, vLLM..."""
    per_gpu_peak_bytes: int
    """Predicted torch.cuda.max_memory_allocated on the busiest GPU (= the six parts above)."""
    per_gpu_reserved_bytes: int
    """Predicted torch.cuda.max_memory_reserved (the allocated peak plus fragmentation)."""
    capacity_bytes: int
    """GPU memory minus the CUDA context, NCCL buffers and other processes' memory."""
    fits: bool
    headroom_bytes: int
    """capacity - safety margin - reserved; negative when it does not fit."""
    host_bytes: int
    """CPU RAM per node: offloaded states, per-process baseline, model loading."""
    pinned_bytes: int
    """Page-locked part of host_bytes per node (offload buffers): bounded by `ulimit -l`."""
    phase: str = "train"
    """Which phase holds the peak: train | late-backward | step | generation | scoring."""
    detail: dict[str, int] = field(default_factory=dict)

    @property
    def breakdown(self) -> dict[str, int]:
        return {"weights": self.weights, "gradients": self.gradients, "optimizer": self.optimizer,
                "activations": self.activations, "logits": self.logits, "other": self.other}


# ---------------------------------------------------------------------------------------------------------------------
# Model-derived numbers, computed once per ModelSpec object (the planner evaluates thousands of plans per model)
# ---------------------------------------------------------------------------------------------------------------------
class Dims:
    """Architecture numbers the terms read, cached per ModelSpec instance."""

    __slots__ = ("model", "P", "L", "h", "I", "q", "kv", "V", "heads", "head_dim", "embed", "lm_head", "layer",
                 "quantized", "max_linear", "max_in", "largest_module", "tensors", "linears_per_layer",
                 "persistent_small", "moe", "experts_per_token", "moe_I", "shared_I", "num_experts", "matmul_active",
                 "norms", "qkv_linears", "gate_up_linears", "_lora")

    def __init__(self, m: ModelSpec) -> None:
        self.model = m
        self.P = m.params
        self.L = m.layers
        self.h = m.hidden
        self.I = m.intermediate
        self.q = m.heads * m.head_dim
        self.kv = m.kv_heads * m.head_dim
        self.V = m.vocab
        self.heads = m.heads
        self.head_dim = m.head_dim
        self.embed = m.vocab * m.hidden
        self.lm_head = self.embed  # the LM head's weight (shared with the embedding when tied)
        self.layer = m.layer_params()
        shapes = m.linear_shapes_per_layer()
        linear_layer = sum(i * o * c for i, o, c in shapes)
        # bitsandbytes quantizes every nn.Linear of the decoder layers; transformers keeps lm_head unquantized
        # (get_keys_to_not_convert) and embeddings / norms / biases are not Linear weights.
        self.quantized = m.layers * linear_layer
        self.max_linear = max(i * o for i, o, _ in shapes)
        self.max_in = max(i for i, _, _ in shapes)
        experts = m.num_experts * 3 * m.hidden * m.moe_intermediate if m.is_moe else 0
        # What ZeRO-3 gathers at once is one module's own parameters: the embedding (or LM head), the widest Linear,
        # or a fused MoE expert block (transformers 5 stores the experts of a layer as one module).
        self.largest_module = max(self.embed, self.max_linear, experts)
        self.norms = m.norms_per_layer
        self.qkv_linears = 1 if m.fused_qkv else 3
        self.gate_up_linears = 1 if m.fused_gate_up else 2
        per_layer = (self.qkv_linears + 1) + (3 if m.qkv_bias else 0) + (2 if m.qk_norm else 0) + m.norms_per_layer
        per_layer += (2 + 1 + (3 if m.shared_expert_intermediate else 0)) if m.is_moe else self.gate_up_linears + 1
        self.tensors = m.layers * per_layer + 2 + (0 if m.tied_embeddings else 1)
        self.linears_per_layer = sum(c for _, _, c in shapes)
        # Params under stage3_param_persistence_threshold (10 * hidden): norms and q/k/v biases stay gathered.
        small = m.norms_per_layer * m.hidden + ((m.heads + 2 * m.kv_heads) * m.head_dim if m.qkv_bias else 0)
        self.persistent_small = m.layers * small + m.hidden
        self.moe = m.is_moe
        self.num_experts = m.num_experts
        self.experts_per_token = m.experts_per_token
        self.moe_I = m.moe_intermediate
        self.shared_I = m.shared_expert_intermediate
        # Weights a token multiplies by (MoE: routed experts only); the embedding is a lookup, the LM head a matmul.
        self.matmul_active = m.layers * m.layer_params(active_only=True) + self.lm_head
        self._lora: dict[int, int] = {}

    def lora(self, r: int) -> int:
        v = self._lora.get(r)
        if v is None:
            v = self._lora[r] = self.model.lora_params(r)
        return v


_DIMS: dict[int, Dims] = {}


def dims(model: ModelSpec) -> Dims:
    d = _DIMS.get(id(model))
    if d is None or d.model is not model:
        if len(_DIMS) > 256:
            _DIMS.clear()
        d = _DIMS[id(model)] = Dims(model)
    return d


# ---------------------------------------------------------------------------------------------------------------------
# Precision: bytes per element of each kind of tensor (CONTRACT.md definitions)
# ---------------------------------------------------------------------------------------------------------------------
class Precision:
    """Bytes per element for a plan.

    load: the dtype the model is loaded in (bf16 -> 2: `dtype=bfloat16`, trained by the HF Trainer with no fp32
      master; bf16-mixed / fp16-mixed / fp32 -> 4: fp32 weights, autocast for the mixed ones).
    work: DeepSpeed's working copy (bf16/fp16 enabled -> 2, the engine casts the module; fp32 -> 4).
    master: DeepSpeed's fp32 master copy (4; 0 when training in fp32, where the working copy is the master).
    act: linear-layer activations (2 under bf16 / autocast / DeepSpeed / FSDP2 mixed precision, 4 in fp32).
    res: the residual stream and norm inputs (4 under autocast with fp32 weights: the embedding output is fp32 and
      `fp32 + bf16` promotes; else like act).
    adapter: LoRA weights. PEFT 0.21 get_peft_model(autocast_adapter_dtype=True) upcasts bf16/fp16 adapters to fp32;
      TRL 1.16 passes autocast_adapter_dtype=False under DeepSpeed ZeRO-3 (sft_trainer.py: mixed-dtype ZeRO-3
      persistent params) and casts QLoRA adapters to bf16 (sft_trainer.py "QLoRA ... converted to bf16"); and the
      DeepSpeed engine casts every floating parameter to the 16-bit dtype anyway (engine.py
      _configure_distributed_model -> _cast_module_mixed_precision), so adapters are 16-bit under any ZeRO stage.
    trained: full fine-tuning's trainable parameters as the optimizer holds them: the load dtype, except under FSDP2
      with mixed precision (the bundle's accelerate.yaml and TRL's bf16=True both say "bf16"), where accelerate 1.15
      upcasts every trainable parameter to fp32 before fully_shard (accelerate/utils/fsdp_utils.py
      fsdp2_prepare_model: "FSDP upcast of low precision parameters to fp32"): fp32 master weights, grads and AdamW
      states, sharded. Found on 2 x H200 (2026-11-29): a DPO 8B FSDP2 plan predicted at 116.5 GiB without it ran out
      of memory at 137 GiB.
    """

    __slots__ = ("load", "work", "master", "act", "res", "adapter", "compute", "autocast", "fp32_weights_amp",
                 "trained")

    def __init__(self, plan: Plan) -> None:
        p = plan.precision
        fp32 = p == "fp32"
        mixed = p in ("bf16-mixed", "fp16-mixed")
        ds = plan.backend == "deepspeed"
        fsdp = plan.backend == "fsdp2"
        self.load = HALF if p == "bf16" else FP32
        self.work = FP32 if fp32 else HALF
        self.master = 0 if fp32 else FP32
        self.act = FP32 if fp32 else HALF
        self.compute = self.act
        # torch.autocast: TRL's bf16=True default makes accelerate run the forward under autocast (native AMP) for
        # single/DDP, also when the model itself is bf16; DeepSpeed casts the module to bf16 instead and FSDP2's
        # MixedPrecisionPolicy all-gathers bf16 parameters. Only fp32 weights under autocast (the *-mixed precisions)
        # make the residual stream fp32 and get bf16 weight copies cached.
        self.autocast = not fp32 and not ds and not fsdp
        self.fp32_weights_amp = mixed and self.autocast
        self.res = FP32 if (fp32 or self.fp32_weights_amp) else HALF
        self.trained = FP32 if fsdp else self.load
        if plan.method == "qlora":
            self.adapter = HALF
        elif ds:
            self.adapter = self.work
        else:
            self.adapter = FP32


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
        base = frozen_base_bytes(d, plan, pr.work) if adapter else 0
        trained = ptr * (pr.adapter if adapter else pr.work)
        total = base + trained
        return total // n if plan.zero_stage == 3 else total
    base = frozen_base_bytes(d, plan, pr.load) if adapter else 0
    trained = ptr * (pr.adapter if adapter else pr.trained)
    if plan.backend == "fsdp2":
        return 0 if plan.offload != "none" else (base + trained) // n
    return base + trained


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
    (``hidden_states[mask]``): GRPO/RLOO score only the completion (labels[:, :-logits_to_keep] = -100); SFT/DPO/KTO
    are counted as all tokens (completion-only loss on prompt/completion data would score fewer)."""
    if plan.trainer in ("grpo", "rloo"):
        return max(1, plan.micro_batch * plan.max_completion_len // max(1, plan.sp_size, plan.cp_size))
    return local_tokens(plan)


def _eager(plan: Plan) -> bool:
    return plan.attn == "eager"


def norm_saved_bytes(t: int, h: int, pr: Precision, *, weight_trainable: bool, liger: bool) -> int:
    """One RMSNorm (LlamaRMSNorm / Qwen2RMSNorm): `x.to(float32)` (4 B, saved by pow and mul), the normalized tensor
    cast back (res B, saved by `weight * x` only when the weight trains), and the output (act B, saved by the next
    Linear; counted with the linear inputs). Liger's LigerRMSNorm saves X (res B) and an fp32 rstd per row instead."""
    if liger:
        return t * h * pr.res + FP32 * t
    return t * h * (FP32 + (pr.res if weight_trainable else 0)) + FP32 * t


def lora_dropout_active(plan: Plan) -> bool:
    """Whether PEFT's lora_dropout runs (LORA_DROPOUT > 0 and the trainer does not zero it: DROPOUT_DISABLED_TRAINERS)."""
    return LORA_DROPOUT > 0 and plan.trainer not in DROPOUT_DISABLED_TRAINERS


def linear_inputs_saved_bytes(d: Dims, t: int, pr: Precision, plan: Plan) -> int:
    """Inputs of a layer's Linears kept for their weight gradients.

    Full FT: the two norm outputs (each shared by q/k/v or gate/up), the attention output (SDPA: transpose +
    .contiguous() in LlamaAttention makes a copy for o_proj; FA2's output is reused), and the gated product (down).
    LoRA (PEFT 0.21 lora.Linear.forward: `x = self._cast_input_dtype(x, lora_A.weight.dtype)`, then
    `lora_B(lora_A(dropout(x)))`): the frozen base Linear saves nothing (no weight grad); lora_A saves its input, which
    is a tensor of its own per adapted Linear (q, k and v each make one from the same x) whenever dropout is on
    (nn.Dropout returns a new tensor and saves a 1-byte mask), PEFT casts x to fp32 adapters, or autocast casts the
    fp32 input down to bf16 (autocast caches casts of weights, not of activations); otherwise it is x itself,
    shared. lora_A's output [t, r] is saved by lora_B for each adapted Linear."""
    h, q, i_w = d.h, d.q, d.I if not d.moe else 0
    sdpa_copy = 0 if "flash" in plan.attn else 1
    if plan.method == "full":
        return t * pr.act * (2 * h + sdpa_copy * q + i_w)
    compute = FP32 if pr.act == FP32 else HALF  # the adapter GEMM's dtype (autocast / DeepSpeed / FSDP2: 16-bit)
    a_out = t * plan.lora_r * compute * d.linears_per_layer
    # q, k, v (3 x hidden; 1 when fused), o (q), gate and up (2 x hidden; 1 when fused), down (intermediate)
    copies = (d.qkv_linears + (d.gate_up_linears if i_w else 0)) * h + q + i_w
    if lora_dropout_active(plan):
        return t * (compute + 1) * copies + a_out
    if pr.adapter != pr.act or pr.fp32_weights_amp:
        return t * compute * copies + a_out
    return t * compute * (2 * h + q + i_w) + a_out


def attention_saved_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Attention core of one layer. SDPA (flash / mem-efficient backends) and FlashAttention-2 save q, k, v, the output
    and an fp32 logsumexp per head and token: no [s, s] scores. GQA stays unexpanded when no padding mask is passed
    (transformers integrations/sdpa_attention.py use_gqa_in_sdpa). Eager (eager_attention_forward) saves q, the
    repeat_kv-expanded k and v, the fp32 softmax output (softmax(dtype=float32)) and its bf16 cast: 4 + 2 bytes per
    score vs Korthikanti's 5 (2 scores + 2 softmax + 1 dropout mask; no dropout here). Ulysses SP splits heads, ring
    CP splits the query sequence."""
    t = local_tokens(plan)
    a = pr.act
    if _eager(plan):
        rows = plan.micro_batch * (2 if plan.trainer == "dpo" else 1)
        heads = d.heads // max(1, plan.sp_size)
        s = plan.seq_len
        scores = rows * heads * s * s // max(1, plan.cp_size)
        return t * a * 3 * d.q + scores * (FP32 + a)
    return t * a * (2 * d.q + 2 * d.kv) + t * FP32 * d.heads // max(1, plan.sp_size)


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


def layer_saved_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Everything one decoder layer keeps for its backward (no checkpointing)."""
    t = local_tokens(plan)
    full = plan.method == "full"
    # Gemma 2/3 add post-attention / post-MLP norms (norms_per_layer 4): each saves the same kind of tensors
    norms = d.norms * norm_saved_bytes(t, d.h, pr, weight_trainable=full, liger=plan.liger)
    return norms + linear_inputs_saved_bytes(d, t, pr, plan) + attention_saved_bytes(d, plan, pr) + \
        mlp_saved_bytes(d, plan, pr)


def layer_backward_workspace(d: Dims, plan: Plan, pr: Precision) -> int:
    """Gradients in flight while one layer runs its backward: the incoming and outgoing residual grads (2 x res B) and
    the larger of the MLP (grads of the product, of act/up and of gate: 3 x [t, I]) and attention (dq, dk, dv plus
    FlashAttention's fp32 dq accumulator) working sets; eager adds the grad of the fp32 scores. fp32 adapters with bf16
    activations also hold the fp32 grad of the widest cast input."""
    t = local_tokens(plan)
    a = pr.act
    width = d.I if not d.moe else d.experts_per_token * d.moe_I + d.shared_I
    mlp = 3 * a * t * width
    attn = a * t * (d.q + 2 * d.kv) + FP32 * t * d.q
    if _eager(plan):
        rows = plan.micro_batch * (2 if plan.trainer == "dpo" else 1)
        attn += rows * (d.heads // max(1, plan.sp_size)) * plan.seq_len ** 2 // max(1, plan.cp_size) * (FP32 + a)
    extra = FP32 * t * max(d.max_in, width) if (plan.method != "full" and pr.adapter != a) else 0
    return 2 * pr.res * t * d.h + max(mlp, attn) + extra


def activation_bytes(d: Dims, plan: Plan, pr: Precision) -> tuple[int, int]:
    """(stack, transient): activations kept across the whole backward, and the largest per-layer transient.

    No checkpointing: L x layer_saved_bytes; the transient is one layer's backward workspace.
    Gradient checkpointing (transformers GradientCheckpointingLayer around each decoder layer): only each layer's
    input is kept (res B x t x h per layer: Korthikanti's full-recompute 2sbh in bf16); during its backward a layer is
    recomputed, so one layer's full saved set plus its workspace is the transient. Unsloth's offloaded checkpointing
    moves the layer inputs to CPU. Both add the final norm, RoPE cos/sin (shared by all layers) and, for eager, the
    [rows, 1, s, s] additive mask."""
    t = local_tokens(plan)
    per_layer = layer_saved_bytes(d, plan, pr)
    work = layer_backward_workspace(d, plan, pr)
    full = plan.method == "full"
    shared = norm_saved_bytes(t, d.h, pr, weight_trainable=full, liger=plan.liger) + 2 * t * d.head_dim * pr.act
    if _eager(plan):
        rows = plan.micro_batch * (2 if plan.trainer == "dpo" else 1)
        shared += rows * plan.seq_len ** 2 * pr.act // max(1, plan.cp_size)
    if plan.grad_ckpt:
        inputs = 0 if plan.unsloth else d.L * t * d.h * pr.res
        stack, transient = inputs + shared, per_layer + work
    else:
        stack, transient = d.L * per_layer + shared, work
    f = ACTIVATION_FACTOR
    return int(stack * f), int(transient * f)


def last_layer_backward_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Activations alive while the first decoder layer runs its backward (the end of the backward): that layer's saved
    set (recomputed under checkpointing, kept otherwise) plus its workspace; everything above it is freed."""
    return int((layer_saved_bytes(d, plan, pr) + layer_backward_workspace(d, plan, pr)) * ACTIVATION_FACTOR)


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
    3.5): ZeRO-1/2 keep one 16-bit ipg buffer (two with overlap_comm, default off below stage 3; stage_1_and_2.py);
    ZeRO-3 keeps one ipg bucket per communication dtype plus the reduce-scatter staging buffer of one bucket
    (stage3.py ipg_buckets, _reduce_scatter). ZeRO-0 (BF16_Optimizer) has none."""
    if plan.backend != "deepspeed" or plan.zero_stage == 0:
        return 0
    bucket = d.h * d.h * pr.work
    return 2 * bucket if plan.zero_stage == 3 else bucket


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


def zero3_live_param_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """ZeRO-3 parameters gathered while a module runs: DeepSpeed's estimate_zero3 adds 4 x largest_layer (16-bit params
    plus 16-bit grads of the largest module); the prefetch bucket ("auto": 0.9 hidden^2 elements) and the params under
    the persistence threshold (10 hidden: norms, biases), which stay gathered on every rank. A frozen module (LoRA
    base) has no grad."""
    if plan.backend != "deepspeed" or plan.zero_stage != 3:
        return 0
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
    """A second, frozen model: the DPO/KTO/GRPO/RLOO reference when ref_model == "copy" (full fine-tuning; with PEFT
    TRL disables the adapter instead, no copy), and the GKD teacher (a model of the same architecture). Loaded like the
    policy (load dtype; DeepSpeed prepare_deepspeed -> 16-bit, ZeRO-3-partitioned at stage 3; FSDP2 prepare_fsdp ->
    sharded)."""
    if plan.trainer == "gkd":
        copy = plan.ref_model != "none"
    else:
        copy = plan.ref_model == "copy" and plan.method == "full"
    if not copy:
        return 0
    n = shard_count(plan)
    if plan.backend == "deepspeed":
        b = d.P * pr.work
        return b // n if plan.zero_stage == 3 else b
    b = d.P * pr.load
    return b // n if plan.backend == "fsdp2" else b


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
    return forward_transient_bytes(d, plan, pr, local_tokens(plan), logit_tokens(plan))


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


# ---------------------------------------------------------------------------------------------------------------------
# Capacity, allocator reserve, host
# ---------------------------------------------------------------------------------------------------------------------
def capacity_bytes(plan: Plan, target: Target) -> int:
    """What PyTorch can reserve: the GPU's memory less the CUDA context and libraries, NCCL's buffers (multi-process
    runs) and memory other processes already hold (probe)."""
    nccl = NCCL_BUFFER_BYTES if plan.num_processes > 1 else 0
    return target.gpu_memory_bytes - CUDA_CONTEXT_BYTES - nccl - target.other_process_bytes


def reserved_bytes(peak: int, persistent: int) -> int:
    """max_memory_reserved: the allocated peak plus FRAGMENTATION of the churning bytes and STATIC_SLACK of the
    persistent ones, rounded up to the allocator's 2 MiB grain."""
    churn = max(0, peak - persistent)
    r = peak + int(FRAGMENTATION * churn) + int(STATIC_SLACK * persistent)
    return -(-r // KERNEL_GRAIN) * KERNEL_GRAIN


def processes_per_node(plan: Plan) -> int:
    return max(1, -(-plan.num_processes // max(1, plan.nodes)))


def host_bytes(d: Dims, plan: Plan, pr: Precision) -> tuple[int, int]:
    """(host RAM, pinned) per node.

    Baseline HOST_PROCESS_BYTES per process. Loading: each process of a DDP / ZeRO-1/2 run materializes the model on
    the CPU (device_map=None under accelerate) in the load dtype; ZeRO-3 with zero.Init only the largest module per
    process (estimate_zero3 "cpu with zero_init"); FSDP2 cpu_ram_efficient_loading only on rank 0; a single GPU loads
    straight to the device (device_map="auto"). Loading is over before the offload buffers exist: max of the two.
    DeepSpeed optimizer offload, per rank: fp32 master + fp32 grads + Adam (16 B per trainable param / N; estimate_zero*
    "16"), +16-bit params for offload "all" (18); DeepSpeed pins the fp32 master and fp32 grad partitions
    (stage_1_and_2.py 564/940, stage3.py 795) and the 16-bit param partition (stage3.py 906). NVMe keeps only the
    swap buffers in RAM (offload_optimizer buffer_count 4, offload_param buffer_count 5 x buffer_size 1e8).
    FSDP2 CPU offload: the sharded params, grads and AdamW states, params and grads pinned (CPUOffloadPolicy)."""
    procs = processes_per_node(plan)
    n = shard_count(plan)
    base = HOST_PROCESS_BYTES * procs
    if plan.backend == "single":
        load = 0
    elif plan.backend == "fsdp2":
        load = d.P * pr.load
    elif plan.backend == "deepspeed" and plan.zero_stage == 3:
        load = procs * d.largest_module * pr.load
    else:
        load = procs * d.P * pr.load
    ptr = trainable_params(d, plan)
    steady = pinned = 0
    if plan.backend == "deepspeed" and plan.offload != "none":
        parts = n if plan.zero_stage >= 1 else 1
        params16 = 0
        if plan.offload == "all" and plan.zero_stage == 3:
            total16 = (frozen_base_bytes(d, plan, pr.work) + ptr * pr.adapter) if plan.method != "full" \
                else d.P * pr.work
            params16 = total16 // n
        if plan.offload_device == "nvme":
            steady = procs * (4 * int(1e8) * FP32 + (5 * int(1e8) * HALF if params16 else 0))
            pinned = steady
        else:
            steady = procs * (ptr * (FP32 + FP32 + 2 * FP32) // parts + params16)
            pinned = procs * (ptr * (FP32 + FP32) // parts + params16)
    elif plan.backend == "fsdp2" and plan.offload != "none":
        adapter = plan.method != "full"
        sb = pr.adapter if adapter else pr.trained
        w = (frozen_base_bytes(d, plan, pr.load) if adapter else 0) + ptr * sb
        steady = procs * (w + ptr * sb + 2 * ptr * sb) // n
        pinned = procs * (w + ptr * sb) // n
    return base + max(load, steady), pinned


# ---------------------------------------------------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------------------------------------------------
def estimate_memory(model: ModelSpec, plan: Plan, target: Target) -> MemoryEstimate:
    """Predicted peak and reserved memory of the busiest GPU, with its breakdown (see the module docstring)."""
    d = dims(model)
    pr = Precision(plan)
    W = weight_bytes(d, plan, pr)
    g_full, g_keep, g_step = gradient_bytes(d, plan, pr)
    opt = optimizer_bytes(d, plan, pr)
    stack, layer_tr = activation_bytes(d, plan, pr)
    logits = logits_bytes(d, plan, pr)
    head_grad = head_grad_bytes(d, plan, pr)
    ref_tr = reference_forward_transient(d, plan, pr)

    persistent_other = {
        "runtime": RUNTIME_ALLOCATED_BYTES,
        "ddp_buckets": ddp_bucket_bytes(d, plan, pr),
        "zero_buckets": zero_bucket_bytes(d, plan, pr),
        "reference_model": reference_model_bytes(d, plan, pr),
        "vllm_colocate": vllm_colocate_bytes(plan, target),
    }
    base_other = sum(persistent_other.values())
    in_flight = {
        "zero3_live_params": zero3_live_param_bytes(d, plan, pr),
        "fsdp_unsharded": fsdp_unsharded_bytes(d, plan, pr),
        "qlora_dequant": qlora_dequant_bytes(d, plan),
        "autocast_weight_cache": autocast_weight_cache_bytes(d, plan, pr),
    }
    train_other = base_other + sum(in_flight.values())

    # Gradients held during the forward/backward: from earlier micro-batches when accumulating, DeepSpeed's
    # partition buffers always; with one micro-batch per step the Trainer's zero_grad(set_to_none=True) freed them.
    accumulating = plan.grad_accum > 1 or g_keep > 0
    held = max(g_full - g_step if accumulating else 0, g_keep, fsdp_accumulated_grad_bytes(d, plan, pr))
    # the head's gradient is already among the held ones when accumulating
    fresh_head = 0 if accumulating else head_grad

    phases: list[tuple[str, int, dict[str, int]]] = []
    # train: end of forward / start of backward: the largest of the head's backward, the ref forward (DPO/KTO),
    # or the first recomputed layer with the head's gradient already assigned.
    early = max(logits, ref_tr, fresh_head + layer_tr)
    if early == logits:
        act_t, log_t, extra = stack, logits, {}
    elif early == ref_tr:
        act_t, log_t, extra = stack, 0, {"reference_forward": ref_tr}
    else:
        act_t, log_t, extra = stack + layer_tr, 0, {}
        held += fresh_head
    phases.append(("train", W + held + opt + act_t + log_t + train_other + sum(extra.values()),
                   {"weights": W, "gradients": held, "optimizer": opt, "activations": act_t, "logits": log_t,
                    "other": train_other + sum(extra.values()), **extra}))
    if not accumulating:
        # late backward: every gradient, one (recomputed) layer's activations left
        late_act = last_layer_backward_bytes(d, plan, pr)
        late_other = train_other - in_flight["autocast_weight_cache"] + autocast_late_backward_bytes(d, plan, pr)
        phases.append(("late-backward", W + (g_full - g_step) + opt + late_act + late_other,
                       {"weights": W, "gradients": g_full - g_step, "optimizer": opt, "activations": late_act,
                        "logits": 0, "other": late_other}))
    step_tr = optimizer_step_transient(d, plan, pr)
    phases.append(("step", W + g_full + opt + step_tr + base_other,
                   {"weights": W, "gradients": g_full, "optimizer": opt, "activations": 0, "logits": 0,
                    "other": base_other + step_tr, "optimizer_step_temporaries": step_tr}))
    kv = kv_cache_bytes(d, plan, pr)
    if kv:
        gather = zero3_generation_gather_bytes(d, plan, pr)
        fsdp = in_flight["fsdp_unsharded"]
        prefill = prefill_transient_bytes(d, plan, pr)
        decode = decode_logits_bytes(d, plan, pr)
        prompt_frac = (plan.seq_len - plan.max_completion_len) / max(1, plan.seq_len)
        # prefill: the prompt part of the cache plus the prefill working set; decode: the whole cache
        gen_act = max(prefill + int(kv * prompt_frac), kv + decode) - kv
        gen_other = base_other + kv + gather + fsdp
        phases.append(("generation", W + g_keep + opt + gen_act + gen_other,
                       {"weights": W, "gradients": g_keep, "optimizer": opt, "activations": gen_act, "logits": 0,
                        "other": gen_other, "kv_cache": kv, "zero3_generation_gather": gather}))
    old, ref = logprob_passes(plan)
    if old or ref:
        seq_tok = plan.micro_batch * plan.seq_len
        tr = forward_transient_bytes(d, plan, pr, seq_tok, logit_tokens(plan))
        so = base_other + in_flight["zero3_live_params"] + in_flight["fsdp_unsharded"]
        phases.append(("scoring", W + g_keep + opt + tr + so,
                       {"weights": W, "gradients": g_keep, "optimizer": opt, "activations": tr, "logits": 0,
                        "other": so}))

    name, peak, parts = max(phases, key=lambda p: p[1])
    detail = {k: v for k, v in parts.items() if k not in ("weights", "gradients", "optimizer", "activations",
                                                          "logits", "other")}
    detail.update(persistent_other)
    detail.update(in_flight)
    detail.update({"activation_stack": stack, "activation_layer_transient": layer_tr, "logits_transient": logits,
                   "head_grad": head_grad, "grads_full": g_full, "grads_persistent": g_keep})
    for pname, ptotal, _ in phases:
        detail["phase_" + pname.replace("-", "_")] = ptotal

    persistent = W + g_keep + opt + base_other
    reserved = reserved_bytes(peak, persistent)
    cap = capacity_bytes(plan, target)
    margin_fraction = SAFETY_MARGIN_FRACTION + (FSDP2_UNEXPLAINED_MARGIN_FRACTION if plan.backend == "fsdp2" else 0)
    margin = int(margin_fraction * target.gpu_memory_bytes)
    headroom = cap - margin - reserved
    host, pinned = host_bytes(d, plan, pr)
    return MemoryEstimate(
        weights=parts["weights"], gradients=parts["gradients"], optimizer=parts["optimizer"],
        activations=parts["activations"], logits=parts["logits"], other=parts["other"],
        per_gpu_peak_bytes=peak, per_gpu_reserved_bytes=reserved, capacity_bytes=cap, fits=headroom >= 0,
        headroom_bytes=headroom, host_bytes=host, pinned_bytes=pinned, phase=name, detail=detail,
    )


# ---------------------------------------------------------------------------------------------------------------------
# Reference formulas from the literature (used by tests as independent answers, and by docs)
# ---------------------------------------------------------------------------------------------------------------------
def zero_paper_model_states(params: int, n: int, stage: int, k: int = 12) -> float:
    """ZeRO paper (arXiv:1910.02054) section 5, Figure 1: mixed-precision Adam with 2 + 2 + K bytes per parameter;
    P_os: 4P + KP/N, P_os+g: 2P + (2 + K)P/N, P_os+g+p: (4 + K)P/N."""
    if stage == 0:
        return (4 + k) * params
    if stage == 1:
        return 4 * params + k * params / n
    if stage == 2:
        return 2 * params + (2 + k) * params / n
    return (4 + k) * params / n


def korthikanti_layer_activations(s: int, b: int, h: int, a: int, *, recompute: bool = False) -> float:
    """Korthikanti et al. (arXiv:2205.05198) eq. 1: bytes per transformer layer without parallelism,
    s*b*h*(34 + 5*a*s/h); with full recomputation 2*s*b*h (the layer input in 16-bit)."""
    return 2 * s * b * h if recompute else s * b * h * (34 + 5 * a * s / h)
