"""Hardware rules (HW*): what the GPUs, their links and the host can run."""

from __future__ import annotations

from rules.common import GIB, best_attn, cc, gib, gpu_name, half_precision, is_flash, is_flash3
from rules.model import Context, Result, fail, na, ok
from rules.registry import rule


@rule(id="HW001", name="bf16-needs-ampere", severity="error", seed="HW-01", auto_fix=True,
      reads=("plan.precision", "target.gpu.id", "target.gpu.compute_capability"))
def bf16_needs_ampere(ctx: Context) -> Result:
    """bf16 training needs a GPU of compute capability 8.0 or newer (Ampere, Ada, Hopper, Blackwell).

    ## Why
    TrainingArguments checks the device when `bf16=True` and raises "Your setup doesn't support bf16/gpu". TRL's
    `_BaseConfig` sets `bf16 = not fp16`, so bf16 is on unless you ask for fp16: V100 (7.0), T4 (7.5) and the
    RTX 20 series fail at config time.

    ## Fix
    Train in fp16 mixed precision (`--precision fp16-mixed`, TRL `fp16=True`, which turns bf16 off), or use an
    Ampere-or-newer GPU.

    ## Example
    `--gpu T4 --precision bf16` fails; `--gpu T4 --precision fp16-mixed` passes.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/training_args.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/base_config.py
    - https://github.com/tatsu-lab/stanford_alpaca/issues/133
    """
    if ctx.plan.precision not in ("bf16", "bf16-mixed"):
        return na("the plan does not train in bf16")
    if ctx.target.gpu.has_bf16:
        return ok(f"{gpu_name(ctx)} supports bf16")
    return fail(f"{ctx.plan.precision} needs compute capability >= 8.0; {gpu_name(ctx)} has no bf16",
                "use --precision fp16-mixed (TRL fp16=True), or an Ampere or newer GPU",
                {"precision": "fp16-mixed"})


@rule(id="HW002", name="flash-attention-needs-ampere", severity="error", seed="HW-02", auto_fix=True,
      reads=("plan.attn", "target.gpu.id", "target.gpu.compute_capability"))
def flash_attention_needs_ampere(ctx: Context) -> Result:
    """FlashAttention 2 (built in or as the `kernels-community/flash-attn2` Hub kernel) needs compute capability 8.0+.

    ## Why
    FlashAttention 2 ships kernels for Ampere, Ada and Hopper only; on V100, T4 or RTX 20xx it raises
    "FlashAttention only supports Ampere GPUs or newer" at the first forward.

    ## Fix
    Use `--attn sdpa` (PyTorch's scaled-dot-product attention, which picks the memory-efficient kernel on older
    GPUs), or an Ampere-or-newer GPU.

    ## Example
    `--gpu T4 --attn flash_attention_2` fails; `--gpu T4 --attn sdpa` passes.

    ## References
    - https://github.com/Dao-AILab/flash-attention/issues/762
    - https://github.com/hiyouga/LlamaFactory/issues/3508
    """
    if not is_flash(ctx.plan.attn) or is_flash3(ctx.plan.attn):
        return na("the plan does not use FlashAttention 2")
    if cc(ctx) >= (8, 0):
        return ok(f"{gpu_name(ctx)} runs FlashAttention 2")
    return fail(f"attention {ctx.plan.attn} needs compute capability >= 8.0; {gpu_name(ctx)} is older",
                "use --attn sdpa", {"attn": "sdpa"})


@rule(id="HW003", name="flash-attention-needs-half-precision", severity="error", seed="HW-03", auto_fix=True,
      reads=("plan.attn", "plan.precision", "target.gpu.compute_capability"))
def flash_attention_needs_half_precision(ctx: Context) -> Result:
    """FlashAttention runs in fp16 or bf16 only; a pure fp32 run cannot use it.

    ## Why
    FlashAttention kernels take fp16/bf16 tensors ("FlashAttention only support fp16 and bf16 data type").
    With `--precision fp32` nothing autocasts the attention inputs, so the first forward fails. Mixed precision
    (bf16-mixed, fp16-mixed) autocasts them and works.

    ## Fix
    Train in bf16 (or bf16-mixed; fp16-mixed before Ampere), or use `--attn sdpa` for an fp32 run.

    ## Example
    `--attn flash_attention_2 --precision fp32` fails; `--precision bf16-mixed` passes.

    ## References
    - https://github.com/huggingface/transformers/issues/28052
    - https://github.com/Dao-AILab/flash-attention/issues/622
    """
    if not is_flash(ctx.plan.attn):
        return na("the plan does not use FlashAttention")
    if ctx.plan.precision != "fp32":
        return ok(f"{ctx.plan.precision} feeds FlashAttention half-precision tensors")
    return fail(f"attention {ctx.plan.attn} cannot run in fp32 (precision {ctx.plan.precision})",
                f"use --precision {half_precision(ctx)}, or --attn sdpa to stay in fp32",
                {"precision": half_precision(ctx)})


@rule(id="HW004", name="flash-attention-3-needs-hopper", severity="error", seed="HW-04", auto_fix=True,
      reads=("plan.attn", "target.gpu.id", "target.gpu.compute_capability"))
def flash_attention_3_needs_hopper(ctx: Context) -> Result:
    """`flash_attention_3` (the flash_attn_3 "hopper" build) runs on Hopper (compute capability 9.0) only.

    ## Why
    transformers' `flash_attention_3` loads the `flash_attn_3` package built from FlashAttention's `hopper/`
    directory, which raises "FlashAttentionHopper only supports Hopper GPUs" elsewhere. Community Hub builds
    (`kernels-community/vllm-flash-attn3`) run on Ampere/Ada but bring little over FA2 there.

    ## Fix
    Use `--attn flash_attention_2` on Ampere/Ada/Blackwell (or sdpa before Ampere).

    ## Example
    `--gpu A100-80GB --attn flash_attention_3` fails; on `--gpu H100-80GB` it passes.

    ## References
    - https://github.com/Dao-AILab/flash-attention/issues/1481
    - https://huggingface.co/docs/trl/kernels_hub
    """
    if not is_flash3(ctx.plan.attn):
        return na("the plan does not use flash_attention_3")
    if cc(ctx)[0] == 9 and ctx.target.gpu.vendor == "nvidia":
        return ok(f"{gpu_name(ctx)} is a Hopper GPU")
    alt = best_attn(ctx)
    return fail(f"flash_attention_3 needs a Hopper GPU (compute capability 9.0); {gpu_name(ctx)} is not one",
                f"use --attn {alt}", {"attn": alt})


@rule(id="HW005", name="fp8-needs-ada-or-newer", severity="error", seed="HW-05",
      reads=("files.accelerate.mixed_precision", "target.gpu.id", "target.gpu.compute_capability"))
def fp8_needs_ada_or_newer(ctx: Context) -> Result:
    """fp8 mixed precision needs compute capability 8.9 or newer (Ada, Hopper, Blackwell).

    ## Why
    fp8 tensor cores arrive with Ada (8.9) and Hopper (9.0); accelerate's fp8 backends (TransformerEngine,
    torchao, MS-AMP) refuse older GPUs ("Device compute capability 8.9 or higher required for FP8 execution").
    The accelerate YAML's `mixed_precision: fp8` is the switch.

    ## Fix
    Set `mixed_precision: bf16` on A100/A10/RTX 30xx (and fp16 before Ampere), or use an L4, L40S, RTX 4090,
    H100 or newer GPU.

    ## Example
    An accelerate YAML with `mixed_precision: fp8` fails on an A100 and passes on an H100.

    ## References
    - https://github.com/NVIDIA/TransformerEngine/issues/1159
    - https://github.com/huggingface/accelerate/pull/1086
    """
    if ctx.files is None or not ctx.files.accelerate:
        return na("no accelerate YAML")
    if str(ctx.files.accelerate.get("mixed_precision", "")).lower() != "fp8":
        return na("the accelerate YAML does not ask for fp8")
    if ctx.target.gpu.has_fp8:
        return ok(f"{gpu_name(ctx)} has fp8 tensor cores")
    alt = "bf16" if ctx.target.gpu.has_bf16 else "fp16"
    return fail(f"mixed_precision fp8 needs compute capability >= 8.9; {gpu_name(ctx)} has no fp8",
                f"set mixed_precision: {alt} in {ctx.files.accelerate_name}")


@rule(id="HW006", name="pcie-without-p2p-needs-nccl-p2p-disable", severity="warning", seed="HW-07",
      reads=("target.intra_node_link", "target.gpus_per_node", "plan.num_processes", "files.launch_sh"))
def pcie_without_p2p(ctx: Context) -> Result:
    """Several GeForce/consumer GPUs on PCIe without peer-to-peer need `NCCL_P2P_DISABLE=1`.

    ## Why
    GeForce drivers disable (or break) PCIe peer-to-peer between cards; NCCL may still try P2P and hang or copy
    wrong data (RTX 4090 boxes, IOMMU/ACS on). With `NCCL_P2P_DISABLE=1` NCCL stages through host memory: slower,
    but correct.

    ## Fix
    `export NCCL_P2P_DISABLE=1` (and `NCCL_IB_DISABLE=1` when there is no InfiniBand) in the launch script;
    also check IOMMU/ACS settings in the BIOS.

    ## Example
    4 x RTX 4090 with DDP: fails unless launch.sh exports NCCL_P2P_DISABLE=1.

    ## References
    - https://github.com/NVIDIA/nccl-tests/issues/117
    - https://github.com/NVIDIA/nccl/issues/631
    """
    if ctx.plan.num_processes < 2 or ctx.target.gpus_per_node < 2:
        return na("one GPU per node: no GPU-to-GPU traffic")
    if ctx.target.intra_node_link != "pcie-nop2p":
        return ok(f"intra-node link is {ctx.target.intra_node_link}")
    if ctx.files is not None and ctx.files.launch_env("NCCL_P2P_DISABLE") == "1":
        return ok("launch script sets NCCL_P2P_DISABLE=1")
    return fail(f"{ctx.target.gpus_per_node} x {ctx.target.gpu.id} on PCIe without peer-to-peer: NCCL may hang "
                "or corrupt transfers", "export NCCL_P2P_DISABLE=1 before launching (NCCL_IB_DISABLE=1 without "
                "InfiniBand)")


SLOW_INTER_NODE_GBPS = 25.0
"""GB/s per node: below 200 Gb/s (one 100-200 Gb RDMA NIC), NCCL maintainers expect multi-node to lose to one node
for sharded training (nccl#766)."""


@rule(id="HW007", name="multi-node-needs-fast-interconnect", severity="warning", seed="HW-08",
      reads=("target.nodes", "target.inter_node_bw_gbps", "plan.backend", "plan.zero_stage"))
def multi_node_needs_fast_interconnect(ctx: Context) -> Result:
    """Multi-node training needs an RDMA-class interconnect (>= 200 Gb/s per node) to beat one node.

    ## Why
    ZeRO-3 and FSDP all-gather every layer's weights each step; data parallelism all-reduces every gradient.
    Over Ethernet/TCP (10-100 Gb/s) those collectives dominate, and several users measured two nodes slower
    than one. NCCL maintainers advise 100-200 Gb RDMA NICs, several per node for NVLink systems.

    ## Fix
    Use InfiniBand or RoCE (>= 200 Gb/s per node), or stay on one node (smaller model, LoRA, offload).

    ## Example
    2 nodes linked at 12.5 GB/s (100 Gb Ethernet) with ZeRO-3 warns; at 50 GB/s (4 x 100 Gb IB) it passes.

    ## References
    - https://github.com/NVIDIA/nccl/issues/766
    - https://github.com/deepspeedai/DeepSpeed/issues/5770
    """
    if ctx.target.nodes < 2:
        return na("single node")
    bw = ctx.target.inter_node_bw_gbps
    if bw >= SLOW_INTER_NODE_GBPS:
        return ok(f"{bw:.1f} GB/s per node between nodes")
    return fail(f"{ctx.target.nodes} nodes linked at {bw:.1f} GB/s per node (< {SLOW_INTER_NODE_GBPS:.0f} GB/s, "
                "Ethernet class): collectives will dominate the step",
                "use an InfiniBand/RoCE fabric of >= 200 Gb/s per node, or fit the run on one node")


def is_mig(ctx: Context) -> bool:
    """Target carries no MIG flag: the probe says "MIG is on" in its notes (hw_probe) or the target says so."""
    if getattr(ctx.target, "mig", False):
        return True
    return any("MIG is on" in note or "MIG device" in note for note in ctx.target.notes)


@rule(id="HW008", name="mig-slices-cannot-train-together", severity="error",
      reads=("target.notes", "target.gpus_per_node", "plan.num_processes"))
def mig_slices_cannot_train_together(ctx: Context) -> Result:
    """MIG slices cannot form one multi-GPU training job; one process sees one MIG device.

    ## Why
    With MIG on, CUDA enumerates at most one MIG instance per process and there is no P2P or CUDA IPC between
    GPU instances, so NCCL cannot build a communicator across slices: DDP, ZeRO and FSDP over several slices fail.

    ## Fix
    Train on one slice (`--gpus 1`, a model that fits its memory), or disable MIG (`nvidia-smi -mig 0`, needs
    admin rights and a GPU reset) to use the whole GPU.

    ## Example
    An A100 split into two 3g.40gb slices with `--gpus 2` fails; `--gpus 1` passes.

    ## References
    - https://docs.nvidia.com/datacenter/tesla/mig-user-guide/index.html
    """
    if not is_mig(ctx):
        return na("no MIG")
    if ctx.plan.num_processes <= 1:
        return ok("one process on one MIG slice")
    return fail(f"{ctx.plan.num_processes} processes on MIG slices: NCCL cannot communicate across MIG instances",
                "train on one slice (--gpus 1), or disable MIG to use whole GPUs", {"num_processes": 1})


OTHER_PROCESS_WARN_BYTES = 1 * GIB
"""Above this, another job is on the GPU (a CUDA context alone is ~0.5 GiB)."""


@rule(id="HW009", name="gpu-memory-held-by-other-processes", severity="warning",
      reads=("target.other_process_bytes", "target.gpu_memory_bytes", "target.origin"))
def gpu_memory_held_by_other_processes(ctx: Context) -> Result:
    """Other processes already hold memory on the GPUs this run will use.

    ## Why
    The probe reads per-process GPU memory from NVML. Memory another job holds is not available to training;
    the plan's capacity shrinks by that much, and a job that grows later can push this one out of memory.

    ## Fix
    Stop the other processes (`nvidia-smi` lists them), pick free GPUs with `CUDA_VISIBLE_DEVICES`, or plan
    with less memory.

    ## Example
    A probe showing 10 GiB held by another PID on a 24 GiB GPU warns: 14 GiB remain.

    ## References
    - https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceQueries.html
    """
    if ctx.target.origin not in ("probe", "file"):
        return na("catalogue target: no process information")
    held = ctx.target.other_process_bytes or 0
    if held <= OTHER_PROCESS_WARN_BYTES:
        return ok(f"{gib(held)} held by other processes")
    return fail(f"other processes hold {gib(held)} of {gib(ctx.target.gpu_memory_bytes)} on the busiest GPU",
                "stop them (see nvidia-smi) or choose free GPUs with CUDA_VISIBLE_DEVICES")


@rule(id="HW010", name="gemma2-rejects-sdpa", severity="error", seed="HW-09", auto_fix=True,
      reads=("model.model_type", "plan.attn"))
def gemma2_rejects_sdpa(ctx: Context) -> Result:
    """Gemma 2 cannot load with `sdpa` attention: it needs eager or FlashAttention (attention soft-capping).

    ## Why
    Gemma 2 soft-caps attention logits (attn_logit_softcapping = 50), which SDPA cannot express, so transformers
    declares `_supports_sdpa = False` for it and raises "does not support an attention implementation through
    torch.nn.functional.scaled_dot_product_attention" when sdpa is requested. (Gemma 3 dropped soft-capping and
    accepts sdpa.)

    ## Fix
    Use `--attn eager` (the reference), or `--attn flash_attention_2` (FA >= 2.6 supports softcap) on Ampere+.

    ## Example
    `--model gemma-2-9b --attn sdpa` fails; `--attn eager` passes.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/models/gemma2/modeling_gemma2.py
    - https://github.com/huggingface/transformers/pull/32865
    """
    if ctx.model.model_type != "gemma2":
        return na("not a Gemma 2 model")
    if ctx.plan.attn != "sdpa":
        return ok(f"attention {ctx.plan.attn}")
    alt = "flash_attention_2" if cc(ctx) >= (8, 0) else "eager"
    return fail(f"{ctx.model.id} (gemma2) does not support sdpa attention (logit soft-capping)",
                "use --attn eager, or --attn flash_attention_2 on Ampere or newer", {"attn": alt})


NCCL_SHM_MIN_BYTES = 512 * (1 << 20)
"""Docker's default /dev/shm is 64 MiB; NCCL's shared-memory transport needs more for 2+ GPUs per node (its
troubleshooting page recommends --shm-size=1g)."""


@rule(id="HW011", name="shared-memory-too-small-for-nccl", severity="warning",
      reads=("target.shm_bytes", "target.gpus_per_node", "plan.num_processes"))
def shared_memory_too_small(ctx: Context) -> Result:
    """/dev/shm is too small for NCCL's shared-memory transport between GPUs of one node (containers).

    ## Why
    NCCL moves data between processes of one node through /dev/shm when P2P is not used, and the DataLoader's
    workers share tensors through it too. Docker gives containers 64 MiB by default: NCCL fails with "Error while
    creating shared memory segment" or bus errors.

    ## Fix
    Start the container with `--shm-size=1g` or more (or `--ipc=host`), and `--ulimit memlock=-1`.

    ## Example
    A probe inside a container with shm = 64 MiB and 2 GPUs warns; shm = 16 GiB passes.

    ## References
    - https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html
    """
    if ctx.plan.num_processes < 2 or ctx.target.gpus_per_node < 2:
        return na("one process per node")
    shm = ctx.target.shm_bytes
    if shm is None:
        return na("/dev/shm size not known (catalogue target)")
    if shm >= NCCL_SHM_MIN_BYTES:
        return ok(f"/dev/shm is {gib(shm)}")
    return fail(f"/dev/shm is {shm >> 20} MiB: too small for NCCL between {ctx.target.gpus_per_node} GPUs of a node",
                "run the container with --shm-size=1g (or --ipc=host) and --ulimit memlock=-1")


RULES = (bf16_needs_ampere, flash_attention_needs_ampere, flash_attention_needs_half_precision,
         flash_attention_3_needs_hopper, fp8_needs_ada_or_newer, pcie_without_p2p, multi_node_needs_fast_interconnect,
         mig_slices_cannot_train_together, gpu_memory_held_by_other_processes, gemma2_rejects_sdpa,
         shared_memory_too_small)

