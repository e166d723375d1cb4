"""What the GPU can hold (capacity less the CUDA context, NCCL buffers and other processes), the allocator's reserve
beyond the allocated peak, and host RAM per node."""

from __future__ import annotations

from advisor.core.plan import Plan
from advisor.core.target import Target
from advisor.model import calibration
from advisor.model.dims import Dims, Precision
from advisor.model.states import frozen_base_bytes, shard_count, trainable_params, vision_tower_bytes
from advisor.model.units import FP32, HALF, KERNEL_GRAIN


# ---------------------------------------------------------------------------------------------------------------------
# Capacity, allocator reserve, host
# ---------------------------------------------------------------------------------------------------------------------
def capacity_bytes(plan: Plan, target: Target) -> int:
    """What PyTorch can reserve: the GPU's memory less the CUDA context and libraries, NCCL's buffers (multi-process
    runs) and memory other processes already hold (probe)."""
    nccl = calibration.NCCL_BUFFER_BYTES if plan.num_processes > 1 else 0
    # never below 0: a GPU other processes fill leaves nothing, not a negative amount (the target notes who holds it)
    return max(0, target.gpu_memory_bytes - calibration.CUDA_CONTEXT_BYTES - nccl - target.other_process_bytes)


def reserved_bytes(peak: int, persistent: int) -> int:
    """max_memory_reserved: the allocated peak plus calibration.FRAGMENTATION of the churning bytes and calibration.STATIC_SLACK of the
    persistent ones, rounded up to the allocator's 2 MiB grain."""
    churn = max(0, peak - persistent)
    r = peak + int(calibration.FRAGMENTATION * churn) + int(calibration.STATIC_SLACK * persistent)
    return -(-r // KERNEL_GRAIN) * KERNEL_GRAIN


def processes_per_node(plan: Plan) -> int:
    return max(1, -(-plan.num_processes // max(1, plan.nodes)))


def host_bytes(d: Dims, plan: Plan, pr: Precision) -> tuple[int, int]:
    """(host RAM, pinned) per node.

    Baseline calibration.HOST_PROCESS_BYTES per process. Loading: each process of a DDP / ZeRO-1/2 run materializes the model on
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
    base = calibration.HOST_PROCESS_BYTES * procs
    loaded = d.P + d.vision  # from_pretrained reads the vision tower too (ModelSpec.vision_params)
    if plan.backend == "single":
        load = 0
    elif plan.backend == "fsdp2":
        load = loaded * pr.load
    elif plan.backend == "deepspeed" and plan.zero_stage == 3:
        load = procs * d.largest_module * pr.load
    else:
        load = procs * loaded * pr.load
    ptr = trainable_params(d, plan)
    steady = pinned = 0
    if plan.backend == "deepspeed" and plan.offload != "none":
        parts = n if plan.zero_stage >= 1 else 1
        params16 = offloaded_16bit_bytes(d, plan, pr) // n
        if plan.offload_device == "nvme":
            steady = procs * (4 * int(1e8) * FP32 + (5 * int(1e8) * HALF if params16 else 0))
            pinned = steady
        else:
            steady = procs * (ptr * (FP32 + FP32 + 2 * FP32) // parts + params16)
            pinned = procs * (ptr * (FP32 + FP32) // parts + params16)
    elif plan.backend == "fsdp2" and plan.offload != "none":
        adapter = plan.method != "full"
        sb = pr.adapter if adapter else pr.trained
        w = (frozen_base_bytes(d, plan, pr.load) if adapter else 0) + vision_tower_bytes(d, pr.load) + ptr * sb
        steady = procs * (w + ptr * sb + 2 * ptr * sb) // n
        pinned = procs * (w + ptr * sb) // n
    if plan.ref_model == "bema":
        # trl BEMACallback (device "cpu"): a running copy of the model built in the default dtype (fp32) from its
        # config, plus θ0 and the EMA of every trained parameter in its own dtype, per process, for the whole run
        steady += procs * ((d.P + d.vision) * FP32 + 2 * trainable_params(d, plan) * pr.trained)
    return base + max(load, steady), pinned


NVME_SWAP_BYTES_PER_TRAINABLE = 16
"""Bytes per trainable parameter DeepSpeed's ZeRO-3 NVMe optimizer offload keeps in its swap files: the fp32 master
partition, Adam's two fp32 moments and the fp32 gradient partition (deepspeed/runtime/swap_tensor/optimizer_utils.py
OptimizerStateSwapInfo: the parameter's state tensors and its gradient swap; 0.19.8)."""


def nvme_swap_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """Bytes the swap files take on one node's nvme_path: each rank's partition of the optimizer's
    (NVME_SWAP_BYTES_PER_TRAINABLE) and, with offload "all", of the 16-bit parameters
    (partitioned_param_swapper.py: one file per parameter partition). 0 unless DeepSpeed offloads to NVMe."""
    if not (plan.backend == "deepspeed" and plan.offload != "none" and plan.offload_device == "nvme"):
        return 0
    per_rank = trainable_params(d, plan) * NVME_SWAP_BYTES_PER_TRAINABLE + offloaded_16bit_bytes(d, plan, pr)
    return processes_per_node(plan) * per_rank // shard_count(plan)


def offloaded_16bit_bytes(d: Dims, plan: Plan, pr: Precision) -> int:
    """The 16-bit parameters ZeRO-3 with offload "all" moves off the GPUs, over all ranks (stage3.py offload_param:
    the frozen base, the adapters, an image-text model's vision tower); 0 for every other plan."""
    if not (plan.backend == "deepspeed" and plan.zero_stage == 3 and plan.offload == "all"):
        return 0
    ptr = trainable_params(d, plan)
    body = (frozen_base_bytes(d, plan, pr.work) + ptr * pr.adapter) if plan.method != "full" else d.P * pr.work
    return body + vision_tower_bytes(d, pr.work)
