"""Memory rules (MEM*): does the plan fit in GPU memory, in host RAM, and under the locked-memory limit?

They read the memory estimate (advisor.model.memory.MemoryEstimate) the caller passes in `Context.memory`; without one the
GPU rules are not applicable, and the host-RAM rule falls back to DeepSpeed's own model-state estimator.
"""

from __future__ import annotations

from advisor.core.target import LARGEST_NODE_HOST_RAM_BYTES
from advisor.model import calibration
from rules.common import GIB, gib
from rules.model import Context, Result, fail, na, ok, unknown
from rules.registry import rule

ADDITIONAL_BUFFER_FACTOR = 1.5
"""DeepSpeed's estimators multiply host memory by additional_buffer_factor = 1.5 (stage_1_and_2.py, stage3.py)."""


def _estimate(model, plan, target):
    """advisor.model.estimate.estimate_plan when it is importable: (MemoryEstimate, speed) or None."""
    try:
        from advisor.model.estimate import estimate_plan
    except ImportError:
        return None
    try:
        result = estimate_plan(model, plan, target)
    except Exception:  # an alternative the estimator cannot model is simply not offered
        return None
    return result[0] if isinstance(result, tuple) else getattr(result, "memory", result)


def _candidates(ctx: Context) -> list[tuple[str, dict]]:
    """Plan changes to try, least invasive first."""
    p = ctx.plan
    out: list[tuple[str, dict]] = []
    if not p.grad_ckpt:
        out.append(("gradient checkpointing", {"grad_ckpt": True}))
    mb, ga = p.micro_batch, p.grad_accum
    while mb > 1:
        mb //= 2
        ga *= 2
        out.append((f"micro-batch {mb} x grad-accum {ga}", {"micro_batch": mb, "grad_accum": ga}))
    world = p.num_processes
    sharded = p.backend == "deepspeed" and p.zero_stage == 3
    if world > 1 and not sharded and p.backend != "fsdp2" and p.sp_size <= 1:
        # sharding, least communication first: the optimizer states (ZeRO-1), the gradients too (ZeRO-2), then the
        # weights as well (FSDP2, ZeRO-3); a plan that fits at ZeRO-1 should not be told to take ZeRO-3
        stage = p.zero_stage if p.backend == "deepspeed" else 0
        for zero in (1, 2):
            if stage < zero and not p.unsloth:
                out.append((f"DeepSpeed ZeRO-{zero}", {"backend": "deepspeed", "zero_stage": zero}))
        if p.backend != "deepspeed" and not p.unsloth and p.offload == "none":
            out.append(("FSDP2", {"backend": "fsdp2", "zero_stage": 0}))
        out.append(("DeepSpeed ZeRO-3", {"backend": "deepspeed", "zero_stage": 3}))
    # a long sequence split over GPUs (DeepSpeed Ulysses): what fits a sequence no single change of the above does
    if world > 1 and p.sp_size <= 1 and p.cp_size <= 1 and p.seq_len >= 8192 and not p.unsloth:
        for sp in (2, 4, 8):
            if world % sp == 0 and ctx.model.heads % sp == 0 and p.seq_len % sp == 0:
                out.append((f"Ulysses sequence parallel over {sp} GPUs (DeepSpeed ZeRO-{max(2, p.zero_stage)})",
                            {"sp_size": sp, "backend": "deepspeed", "zero_stage": max(2, p.zero_stage)}))
    if p.unsloth is False and p.cp_size <= 1:
        if world == 1 and p.offload == "none":
            out.append(("DeepSpeed ZeRO-2 + CPU optimizer offload",
                        {"backend": "deepspeed", "zero_stage": 2, "offload": "optimizer", "offload_device": "cpu"}))
        if p.offload != "all":
            out.append(("DeepSpeed ZeRO-3 + CPU optimizer offload",
                        {"backend": "deepspeed", "zero_stage": 3, "offload": "optimizer", "offload_device": "cpu"}))
            out.append(("DeepSpeed ZeRO-3 + CPU parameter and optimizer offload",
                        {"backend": "deepspeed", "zero_stage": 3, "offload": "all", "offload_device": "cpu"}))
    if p.method == "full":
        out.append((f"LoRA r{p.lora_r}", {"method": "lora", "offload": "none"}))
    if p.method != "qlora":
        out.append((f"QLoRA r{p.lora_r}", {"method": "qlora", "offload": "none"}))
    return out


def estimate_without_offload(ctx: Context):
    """The memory estimate of the plan's twin without offload (the same plan with offload "none": backend and ZeRO
    stage, method, micro-batch and accumulation, checkpointing, Liger, parallelism, GPUs), or None when the
    estimator cannot model it. What rule PEFT003 asks of an adapter plan that offloads its optimizer, and the planner
    of every offloading plan it would choose over one on the GPUs (advisor.search.planner._without_offload)."""
    try:
        from advisor.model.memory import estimate_memory
    except ImportError:
        return None
    try:
        return estimate_memory(ctx.model, ctx.plan.with_(offload="none"), ctx.target)
    except Exception:  # a plan the estimator cannot model is not judged
        return None


def planner_limit(mem) -> float:
    """The most a plan may reserve per GPU and leave the error margin the planner keeps for the plans it chooses
    (calibration.PLANNER_HEADROOM_FRACTION of the usable memory) past the safety margin: MEM002's test."""
    return mem.per_gpu_reserved_bytes + mem.headroom_bytes - calibration.PLANNER_HEADROOM_FRACTION * mem.capacity_bytes


def fits_planner_limit(mem) -> bool:
    """The plan fits (MEM001) within planner_limit (MEM002 passes): at least as strict as the planner's own test
    (advisor.search.planner.planner_limit_bytes rounds the error margin down to whole bytes), so that a plan this
    calls fitting, the planner does too."""
    return bool(mem.fits) and mem.per_gpu_reserved_bytes <= planner_limit(mem)


def fitting_alternatives(ctx: Context, limit: int = 3) -> list[tuple[str, dict, int]]:
    """(label, plan changes, predicted peak bytes) of single changes that make the plan fit, by re-estimating."""
    found = []
    for label, changes in _candidates(ctx):
        try:
            plan = ctx.plan.with_(**changes)
        except (TypeError, ValueError):
            continue
        mem = _estimate(ctx.model, plan, ctx.target)
        if mem is not None and getattr(mem, "fits", False):
            found.append((label, changes, int(mem.per_gpu_peak_bytes)))
            if len(found) >= limit:
                break
    return found


@rule(id="MEM001", name="fits-per-gpu", severity="error", auto_fix=True,
      reads=("memory.per_gpu_peak_bytes", "memory.per_gpu_reserved_bytes", "memory.capacity_bytes", "memory.fits",
             "target.gpu_memory_bytes"))
def fits_per_gpu(ctx: Context) -> Result:
    """The busiest GPU's predicted peak (weights, gradients, optimizer, activations, logits, runtime) must fit.

    ## Why
    The memory model predicts `torch.cuda.max_memory_allocated` and the allocator's reserve on the busiest GPU and
    compares the reserve, plus a safety margin, with the usable memory (total minus CUDA context, NCCL buffers and
    other processes). Above it, the first steps end in CUDA out-of-memory.

    ## Fix
    The finding lists single changes that the estimator predicts fit, least invasive first (gradient checkpointing,
    a smaller micro-batch with more accumulation, ZeRO-1, ZeRO-2, FSDP2, ZeRO-3, Ulysses sequence parallelism for
    long sequences, CPU offload, LoRA, QLoRA) and applies the first as the automatic fix.

    ## Example
    Llama-3.1-8B full fine-tuning on one 24 GiB GPU fails; LoRA or ZeRO-2 with CPU optimizer offload fits.

    ## References
    - https://arxiv.org/abs/1910.02054
    - https://arxiv.org/abs/2205.05198
    - https://pytorch.org/docs/stable/notes/cuda.html#memory-management
    """
    mem = ctx.memory
    if mem is None:
        return na("no memory estimate")
    peak, cap = int(mem.per_gpu_peak_bytes), int(mem.capacity_bytes)
    reserved = int(getattr(mem, "per_gpu_reserved_bytes", peak))
    if mem.fits:
        return ok(f"peak {gib(peak)} (reserved {gib(reserved)}) within {gib(cap)}")
    alternatives = fitting_alternatives(ctx)
    if alternatives:
        fix = "fits with: " + "; ".join(f"{label} (peak {gib(peak_b)})" for label, _c, peak_b in alternatives)
        auto = alternatives[0][1]
    else:
        fix = ("no single change fits: `trl-advisor generate` with the same flags searches the combinations "
               "(sharding, sequence parallelism, micro-batch, checkpointing, LoRA/QLoRA) and says when none fits")
        auto = None
    # the limit is the usable memory less the safety margin (and FSDP2's extra share, rule MEM006): a reserve below
    # the usable memory can still not fit, and the message says by what
    limit = reserved + int(getattr(mem, "headroom_bytes", cap - reserved))
    kept = ("the safety margin, with FSDP2's extra margin (MEM006)" if ctx.plan.backend == "fsdp2"
            else "the safety margin")
    return fail(f"predicted peak {gib(peak)} (reserved {gib(reserved)}) per GPU exceeds the {gib(limit)} a plan may "
                f"reserve of the usable {gib(cap)} of {ctx.target.gpu.id} (the rest is {kept})", fix, auto)


@rule(id="MEM002", name="low-memory-headroom", severity="warning",
      reads=("memory.headroom_bytes", "memory.capacity_bytes", "memory.fits"))
def low_headroom(ctx: Context) -> Result:
    """The plan fits, but its headroom is less than the error margin the planner keeps for the plans it chooses.

    Headroom: what the plan leaves of the usable memory past its reserve and the safety margin (`headroom_bytes`).
    Error margin: advisor.model.calibration.PLANNER_HEADROOM_FRACTION of the usable memory, u / (1 + u) for the 95th
    percentile u of the under-predictions measured near capacity (docs/accuracy.md, "Near capacity").

    ## Why
    Estimates carry error (allocator fragmentation, a longer batch than planned, CUDA graph pools, a library
    upgrade); a plan at the edge fails on the first unusual batch, often hours in.

    ## Fix
    Lower the micro-batch (raise gradient accumulation to keep the global batch), enable gradient checkpointing,
    or shorten the sequence.

    ## Example
    A plan with 1.5 GiB headroom on an 80 GiB GPU warns; 10 GiB passes.

    ## References
    - https://pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf
    """
    mem = ctx.memory
    if mem is None:
        return na("no memory estimate")
    if not mem.fits:
        return na("does not fit (MEM001)")
    head, cap = int(mem.headroom_bytes), int(mem.capacity_bytes)
    if cap <= 0 or head >= calibration.PLANNER_HEADROOM_FRACTION * cap:
        return ok(f"{gib(head)} headroom")
    mb = ctx.plan.micro_batch
    auto = {"micro_batch": mb // 2, "grad_accum": ctx.plan.grad_accum * 2} if mb > 1 else None
    return fail(f"only {gib(head)} headroom ({head / cap:.1%} of {gib(cap)})",
                "lower --micro-batch (raise --grad-accum), or enable gradient checkpointing", auto)


def deepspeed_host_bytes(ctx: Context) -> int | None:
    """DeepSpeed's model-state host estimate for this plan (estimate_zero2/zero3_model_states_mem_needs, cpu side),
    with trainable parameters only (LoRA offloads just the adapter)."""
    p = ctx.plan
    if p.backend != "deepspeed" or p.offload == "none":
        return None
    params = ctx.model.params if p.method == "full" else ctx.model.lora_params(p.lora_r)
    gpn, nodes = ctx.target.gpus_per_node, ctx.target.nodes
    if p.zero_stage == 3:
        per_param = 18 if p.offload == "all" else 16  # zero_init=True rows of the ZeRO-3 table, / num_nodes
        return int(params * per_param / nodes * ADDITIONAL_BUFFER_FACTOR)
    return int(params * max(4 * gpn * nodes, 16) * ADDITIONAL_BUFFER_FACTOR)


@rule(id="MEM003", name="offload-host-ram", severity="error", seed="DS-09",
      reads=("memory.host_bytes", "plan.offload", "target.host_ram_bytes", "target.host_ram_available_bytes"))
def offload_host_ram(ctx: Context) -> Result:
    """Host RAM per node must hold what the run puts there: offloaded optimizer states and parameters, buffers,
    the processes themselves.

    ## Why
    CPU offload moves fp32 master weights and Adam states (12-16 bytes per trainable parameter, DeepSpeed's
    estimators add a 1.5x buffer factor) into host RAM; ZeRO-2 offload needs more than ZeRO-3 because every GPU's
    process keeps its own pinned copy. When it does not fit, the kernel's OOM killer ends the job (exit -9).

    ## Fix
    More nodes (the offloaded states divide by them), ZeRO-3 instead of ZeRO-2 offload, LoRA (only the adapter is
    offloaded), or NVMe offload.

    ## Example
    Llama-3.1-70B full fine-tuning with ZeRO-3 + CPU offload on one node with 512 GiB of RAM fails (~1.8 TiB
    needed); with LoRA it passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/stage3.py
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/stage_1_and_2.py
    - https://github.com/deepspeedai/DeepSpeed/issues/4380
    """
    mem = ctx.memory
    need = int(mem.host_bytes) if mem is not None else deepspeed_host_bytes(ctx)
    if need is None:
        return na("no offload and no memory estimate")
    have = ctx.target.host_ram_available_bytes or ctx.target.host_ram_bytes
    if have is None:
        if ctx.plan.offload == "none":
            return na("host RAM not known (catalogue target); no offload")
        if need > LARGEST_NODE_HOST_RAM_BYTES:
            return fail(f"the run needs about {gib(need)} of host RAM per node, more than the largest GPU servers "
                        f"have ({gib(LARGEST_NODE_HOST_RAM_BYTES)})",
                        "use more nodes, ZeRO-3 instead of ZeRO-2 offload, LoRA, or --offload-device nvme",
                        {"method": "lora", "offload": "none"} if ctx.plan.method == "full" else None)
        return unknown(f"host RAM not known (catalogue target); the run needs about {gib(need)} per node",
                       "pass --hardware with a probe of the machine")
    if need <= have:
        return ok(f"needs {gib(need)} of {gib(have)} host RAM")
    fix = "use more nodes, ZeRO-3 instead of ZeRO-2 offload, LoRA, or --offload-device nvme"
    auto = {"method": "lora", "offload": "none"} if ctx.plan.method == "full" else None
    return fail(f"the run needs about {gib(need)} of host RAM per node; {gib(have)} available", fix, auto)


PINNED_MARGIN_BYTES = 64 << 20
"""Other locked pages of a process (CUDA and NCCL bookkeeping) besides the offload buffers."""


@rule(id="MEM004", name="pinned-memory-locked-limit", severity="warning",
      reads=("memory.pinned_bytes", "plan.offload", "target.locked_memory_limit_bytes", "target.origin"))
def pinned_memory_locked_limit(ctx: Context) -> Result:
    """Page-locked (pinned) offload buffers should fit under the locked-memory limit (`ulimit -l`).

    ## Why
    DeepSpeed pins offloaded optimizer states and parameter buffers (`pin_memory: true` by default) and NCCL
    registers host buffers for RDMA; both are locked pages. Containers often start with `ulimit -l` at 64 KiB
    (Docker's default), and InfiniBand registration then fails ("Cannot allocate memory", NCCL errors) or pinning
    falls back to pageable copies.

    ## Fix
    Raise the limit (`ulimit -l unlimited`, Docker `--ulimit memlock=-1`, SLURM `PropagateResourceLimits`), or set
    `"pin_memory": false` in the offload blocks (slower transfers).

    ## Example
    ZeRO-3 CPU offload on a container with locked memory 64 KiB warns; with `ulimit -l unlimited` it passes.

    ## References
    - https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html
    - https://www.deepspeed.ai/docs/config-json/#optimizer-offloading
    """
    mem = ctx.memory
    pinned = int(getattr(mem, "pinned_bytes", 0) or 0) if mem is not None else (
        deepspeed_host_bytes(ctx) or 0)
    if pinned <= 0:
        return na("no pinned buffers")
    if ctx.target.origin not in ("probe", "file"):
        return unknown(f"locked-memory limit not known (catalogue target); the run pins about {gib(pinned)}",
                       "check `ulimit -l` on the training machine (unlimited is best)")
    limit = ctx.target.locked_memory_limit_bytes
    if limit is None:
        return ok("ulimit -l is unlimited")
    if pinned + PINNED_MARGIN_BYTES <= limit:
        return ok(f"pins {gib(pinned)} under a {gib(limit)} limit")
    shown = f"{limit >> 10} KiB" if limit < GIB else gib(limit)
    return fail(f"the run pins about {gib(pinned)} of host memory; ulimit -l is {shown}",
                "raise it (ulimit -l unlimited; Docker --ulimit memlock=-1) or set pin_memory: false in the offload "
                "blocks")


@rule(id="MEM005", name="vllm-colocate-memory-fraction", severity="error", seed="V-04", auto_fix=True,
      reads=("plan.vllm_mode", "plan.vllm_mem_fraction", "memory.per_gpu_reserved_bytes", "memory.capacity_bytes",
             "target.gpu_memory_bytes"))
def vllm_colocate_fraction(ctx: Context) -> Result:
    """In colocate mode, vLLM's `gpu_memory_utilization` share plus training's peak must fit the GPU.

    ## Why
    Each colocated vLLM engine reserves `vllm_gpu_memory_utilization` of the whole GPU for weights and KV cache,
    next to the trainer. TRL lowered the default from 0.9 to 0.3 after out-of-memory reports: fraction x GPU memory
    + training peak must stay below the GPU's memory, else training or vLLM's KV warm-up runs out of memory.

    ## Fix
    Lower `--vllm-mem-fraction` to what is left after training (the finding computes it), keep a 0.05-0.1 buffer,
    or enable `vllm_enable_sleep_mode`.

    ## Example
    A 7B GRPO plan peaking at 60 GiB on an 80 GiB GPU with fraction 0.3 (24 GiB) fails; 0.15 passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    - https://github.com/huggingface/trl/issues/2688
    """
    p = ctx.plan
    if p.vllm_mode != "colocate":
        return na("not vLLM colocate")
    mem = ctx.memory
    if mem is None:
        return na("no memory estimate")
    total = int(ctx.target.gpu_memory_bytes)
    vllm = int(p.vllm_mem_fraction * total)
    train = int(getattr(mem, "per_gpu_reserved_bytes", mem.per_gpu_peak_bytes))
    detail = getattr(mem, "detail", None) or {}
    counted = int(detail.get("vllm_colocate", 0)) if isinstance(detail, dict) else 0
    train_only = max(0, train - counted)  # the estimate may already include vLLM's share in `other`
    cap = int(mem.capacity_bytes)
    if train_only + vllm <= cap:
        return ok(f"training {gib(train_only)} + vLLM {p.vllm_mem_fraction:.2f} x {gib(total)} = "
                  f"{gib(train_only + vllm)} within {gib(cap)}")
    room = (cap - train_only) / total if total else 0.0
    if room >= 0.05:
        best = round(max(0.05, room - 0.02), 2)
        return fail(f"training needs {gib(train_only)} and vLLM reserves {p.vllm_mem_fraction:.2f} x {gib(total)} = "
                    f"{gib(vllm)}: {gib(train_only + vllm)} > {gib(cap)}", f"use --vllm-mem-fraction {best} or less",
                    {"vllm_mem_fraction": best})
    return fail(f"training alone needs {gib(train_only)} of {gib(cap)}: no room for a colocated vLLM engine",
                "use --vllm server on separate GPUs, or shrink training memory (ZeRO-3, LoRA)",
                {"vllm_mode": "server", "vllm_gpus": 1, "vllm_mem_fraction": 0.0})


@rule(id="MEM006", name="fsdp2-fp32-master-weights", severity="info",
      reads=("plan.backend", "plan.method", "plan.precision", "plan.num_processes", "model.params"))
def fsdp2_fp32_master_weights(ctx: Context) -> Result:
    """FSDP2 with mixed precision trains fp32 master weights: 16 bytes per parameter, sharded, and an extra margin.

    ## Why
    accelerate 1.15 upcasts every trainable parameter to fp32 before `fully_shard` whenever mixed precision is on
    (`fsdp2_prepare_model`: "FSDP upcast of low precision parameters to fp32"), which TRL's `bf16=True` default
    turns on. Weights, gradients and AdamW states are then fp32: 16 bytes per trained parameter over the ranks,
    twice what a bf16 model trained without FSDP holds. On 2 x H200 a DPO Llama-3.1-8B FSDP2 plan estimated without
    this ran out of memory. With it, and with the reference's forward gathering the whole model (TRL's prepare_fsdp shards the root
    module only), the one FSDP2 run with a reference measured still peaked 9 % of the GPU above the current estimate
    (133 GiB), in the forward and backward; until that is explained, FSDP2 plans keep that much more of the GPU free,
    an extra safety margin (advisor.model.calibration.FSDP2_UNEXPLAINED_MARGIN_FRACTION, 0.090).

    ## Fix
    Nothing to change: the estimate counts it. For smaller states, train LoRA (adapters only), or compare the
    DeepSpeed ZeRO-3 plan the planner lists among the alternatives.

    ## Example
    Full fine-tuning of an 8B model with FSDP2 on 2 GPUs: 8.03e9 x 16 B / 2 = 60 GiB of model states per GPU.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/utils/fsdp_utils.py
    - https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html
    """
    p = ctx.plan
    if p.backend != "fsdp2":
        return na("not FSDP2")
    if p.method != "full":
        return na("LoRA adapters are fp32 already; the frozen base keeps its dtype")
    if p.precision == "fp32":
        return ok("fp32 training: the parameters are fp32 already, nothing is upcast")
    n = max(1, p.num_processes)
    states = ctx.model.params * 16 // n
    return fail(f"FSDP2 mixed precision upcasts the {ctx.model.params / 1e9:.2f}B trained parameters to fp32: "
                f"weights, gradients and AdamW states take 16 B/param, {gib(states)} per GPU over {n} rank(s); "
                "the estimate counts it and keeps an extra safety margin for FSDP2",
                "none needed; LoRA or the ZeRO-3 alternative hold less")


@rule(id="MEM007", name="fsdp2-frozen-model-gathered-whole", severity="error",
      reads=("plan.backend", "plan.trainer", "plan.method", "plan.ref_model", "plan.teacher_params", "model.params",
             "target.gpu_memory_bytes"))
def fsdp2_frozen_model_gathered_whole(ctx: Context) -> Result:
    """Under FSDP2 a reference or teacher model is one FSDP unit: its forward gathers the whole model on every GPU.

    ## Why
    TRL shards the models it does not train with `prepare_fsdp`, which calls `fully_shard` on the root module only
    (trl/models/utils.py): no per-layer units, so each forward all-gathers every weight at once, in the 16-bit
    compute dtype. The DPO/KTO reference (a copy, or the one they load for `precompute_ref_log_probs`, since under
    FSDP the policy is not sharded before `train()`), the GRPO/RLOO KL reference and the GKD teacher (which the
    bundle shards the same way) all need the whole model's weights on one GPU for a moment, whatever the number of
    GPUs. A model whose weights alone exceed one GPU cannot run.

    ## Fix
    Use DeepSpeed ZeRO-3 (TRL's `prepare_deepspeed` keeps the reference partitioned and gathers it layer by layer),
    LoRA (the reference is the base model with the adapter off), or a smaller reference/teacher.

    ## Example
    DPO full fine-tuning of Llama-3.1-70B with precomputed reference log-probs on 8 x H100-80GB under FSDP2: 70.6B x
    2 B = 131 GiB gathered on an 80 GiB GPU fails; the same on ZeRO-3 passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/models/utils.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/dpo_trainer.py
    - https://docs.pytorch.org/docs/stable/distributed.fsdp.fully_shard.html
    """
    p = ctx.plan
    if p.backend != "fsdp2":
        return na("not FSDP2")
    if p.trainer == "gkd":
        params, what = (p.teacher_params or ctx.model.params), "GKD teacher"
    elif p.method == "full" and p.trainer in ("dpo", "kto") and p.ref_model in ("copy", "bema", "precompute"):
        params, what = ctx.model.params, "reference model"
    elif p.method == "full" and p.trainer in ("grpo", "rloo") and p.ref_model == "copy":
        params, what = ctx.model.params, "KL reference model"
    else:
        return na("no frozen second model under FSDP2")
    gathered = params * (4 if p.precision == "fp32" else 2)
    capacity = ctx.target.gpu_memory_bytes
    if not capacity:
        return na("GPU memory not known")
    if gathered > capacity * 0.9:
        return fail(f"the {what}'s {params / 1e9:.2f}B weights, gathered whole for each forward ({gib(gathered)}), "
                    f"exceed one {ctx.target.gpu.id} ({gib(capacity)}): TRL's prepare_fsdp shards it as one unit",
                    "use --backend deepspeed --zero 3, --method lora, or a smaller reference/teacher")
    return ok(f"the {what} gathered whole ({gib(gathered)}) fits one GPU")


RULES = (fits_per_gpu, low_headroom, offload_host_ram, pinned_memory_locked_limit, vllm_colocate_fraction,
         fsdp2_fp32_master_weights, fsdp2_frozen_model_gathered_whole)
