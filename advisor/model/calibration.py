"""The FITTED constants of the memory model, calibrated on the fit split of bench/results and tests/model/data
(measured max_memory_allocated / max_memory_reserved / NVML on an H200; docs/accuracy.md, `python -m bench.accuracy`).
Nothing else in advisor.model.memory and its terms is tuned."""

from __future__ import annotations

from advisor.model.units import GIB, MIB

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
FSDP2_UNEXPLAINED_MARGIN_FRACTION = 0.090
"""Extra headroom an FSDP2 plan keeps, as a fraction of GPU memory, on top of SAFETY_MARGIN_FRACTION. A policy, not a
fit: the one FSDP2 run with a reference measured, DPO Llama-3.1-8B full on 2 x H200
(bench/results/verify-h200-2026-11-29.jsonl), peaked at 133.3 GiB against 110.1 GiB estimated then; its setup
(24 GiB) and AdamW states (30 GiB) were as estimated. The reference's forward gathering the whole model (TRL's
prepare_fsdp shards the root module only: advisor.model.buffers.fsdp2_frozen_gather_bytes) explains 12.7 GiB of the
gap: 120.7 GiB estimated now. The other 12.6 GiB (9.0 % of the GPU's 140.4 GiB; 18.1 % before that term) appear in
the forward and backward and no term explains them yet; the FSDP2 runs without a reference since (RLOO Qwen2.5-0.5B on
one H100, docs/verify.md) were within 0.2 %. Remove this when a term explains the rest (rule MEM006 tells users)."""
NEAR_CAPACITY_UNDER_PREDICTION = 0.045
"""The measured under-prediction the planner covers near capacity: the 95th percentile (by nearest rank; with fewer than
20 runs, the largest) of u = measured / predicted - 1 of peak reserved over every measured run predicted within 15 %
of the usable memory (benchmark rows of every split and the bundles verify ran), rounded up to 0.1 %. Computed by
bench.accuracy near_plan_distribution and shown with its runs in docs/accuracy.md ("Near capacity");
tests/model/test_accuracy.py fails when it no longer covers that percentile. Was a 5 % policy (issue 14: the margin
comes from the measured distribution). The largest u now is the planner's GKD bundle under ZeRO-2 on one H200 (+4.42 %
reserved at 85 % of the usable memory; its allocated peak +0.2 %: ZeRO's step buffers take new allocator segments);
it was Phi-3-mini without checkpointing (+4.3 %) until the o_proj copy its rotary causes was counted
(advisor.model.dims.ROPE_CAT_TYPES)."""
PLANNER_HEADROOM_FRACTION = NEAR_CAPACITY_UNDER_PREDICTION / (1 + NEAR_CAPACITY_UNDER_PREDICTION)
"""Memory a plan the planner chooses keeps free beyond the safety margin, as a fraction of the GPU's capacity, and
the line below which rule MEM002 warns about a configuration someone pinned: u / (1 + u) for the measured
NEAR_CAPACITY_UNDER_PREDICTION u, so a plan predicted at the planner's limit R needs R (1 + u) <= capacity - margin.
(Taken of the capacity, not of the usable memory, it keeps slightly more free than u / (1 + u) of the usable
memory.) Only plans predicted within this much of the usable memory are affected: all inside the 15 % band of
docs/accuracy.md."""
HOST_PROCESS_BYTES = 4 * GIB
"""Host RAM one training process uses besides model tensors: Python, torch + CUDA libraries, tokenizer, dataloader."""

UNSLOTH_UNMEASURED = ("the memory and speed predicted for this Unsloth plan are the plain Hugging Face estimate with "
                      "Unsloth's offloaded gradient checkpointing counted, an upper bound: Unsloth's own kernels "
                      "(chunked cross-entropy, RMSNorm, RoPE, fused LoRA) are not modelled. Measured once, on one "
                      "H200 (7B QLoRA, 2048 tokens, micro-batch 8, checkpointing): 9.0 GiB peak and 12,081 tokens/s "
                      "against 11.6 GiB and 9,240 predicted (22 % less memory, 31 % faster); the plain Hugging Face "
                      "plan of the same knobs measured 14.0 GiB and 9,143 tokens/s (predicted 14.3 GiB, 9,240). "
                      "`trl-advisor verify` measures yours.")
"""Said wherever an Unsloth plan's figures appear (generate's notes, check, the bundle README): no constant here was
fitted on an Unsloth run. The figures: bench/results/verify-h200-2026-12-01-1505-unsloth.jsonl (unsloth 2026.10.9,
trl 1.15.0, transformers 5.17.0, datasets 4.8.5) and verify-h200-2026-12-01-1508-twin.jsonl (trl 1.16.0), cases
unsloth-7b-qlora and qlora-7b-hf-twin of bench/verify_runs.py, run by bench/unsloth_h200.sh."""
UNSLOTH_UPPER_BOUND = ("this Unsloth plan's estimate is an upper bound (Unsloth's kernels are not modelled: "
                       "less memory and more speed are expected)")
"""verify's reason for passing an Unsloth run below the memory band or above the speed band (advisor.verify.steps);
one above the memory band or below the speed band still fails."""

HOST_BOUND_NOTE_SHARE = 0.75
"""A plan whose predicted step is at least this share host-bound (advisor.model.speed.host_bound_share) is told that
its tokens/s follow the host CPU (host_bound_note): in docs/accuracy.md that band holds most of the runs whose step time
is off by more than 20 % (8 of 16; all but one of the rest are half host-bound or step DeepSpeed's optimizer on the
CPU), and its median error is two to three times the others'."""
HOST_BOUND_STEP_ERROR_MEDIAN = 0.100
"""Median |step-time error| of the measured runs in that band (docs/accuracy.md, step-time error by host-bound share;
tests/model/test_accuracy.py keeps it equal to the report's, to 0.1 %)."""
HOST_MACHINE_SPREAD = 0.77
"""The widest spread between records of one host-bound configuration (docs/accuracy.md, step time measured more than
once: grpo-q3-0.6b with 16 completions, 2.10 and 3.72 s per step on two H200 machines of 2026-12-01;
tests/model/test_accuracy.py recomputes it)."""


def host_bound_note(share: float) -> str:
    """What a plan whose step is mostly host-bound is told about its speed figure."""
    return (f"{100 * share:.0f} % of the predicted step is set by the host CPU (kernel launches beyond the GPU's "
            "work, DeepSpeed's hooks, transformers' generate): on the calibration's H200s such steps were predicted "
            f"within {100 * HOST_BOUND_STEP_ERROR_MEDIAN:.1f} % at the median, and one configuration measured up to "
            f"{100 * HOST_MACHINE_SPREAD:.0f} % apart on machines of one GPU kind: the tokens/s figure moves "
            "with the host CPU (vLLM for generation, larger micro-batches or fewer layers make the GPU the limit)")
