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

One module per kind of term: states (weights, gradients, optimizer), activations, logits, buffers (`other`),
generation, capacity (what fits, the allocator's reserve, host RAM); this one assembles the phases. Every number is
either physical (advisor.model.units: bytes per element, a count read from the code) or one of the FITTED constants
of advisor.model.calibration, calibrated against bench/results (``torch.cuda.max_memory_allocated`` per
configuration).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from advisor.core.plan import Plan
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.model import calibration
from advisor.model.activations import (
    activation_bytes,
    autocast_late_backward_bytes,
    autocast_weight_cache_bytes,
    last_layer_backward_bytes,
    logit_tokens,
    moe_lora_generation_bytes,
)
from advisor.model.buffers import (
    ddp_bucket_bytes,
    forward_transient_bytes,
    fsdp2_frozen_gather_bytes,
    fsdp2_precompute_bytes,
    fsdp_accumulated_grad_bytes,
    fsdp_unsharded_bytes,
    qlora_dequant_bytes,
    reference_forward_transient,
    reference_model_bytes,
    zero3_live_param_bytes,
    zero_bucket_bytes,
)
from advisor.model.capacity import capacity_bytes, host_bytes, nvme_swap_bytes, reserved_bytes
from advisor.model.dims import Precision, dims
from advisor.model.generation import (
    decode_logits_bytes,
    kv_cache_bytes,
    logprob_passes,
    prefill_transient_bytes,
    vllm_colocate_bytes,
    zero3_generation_gather_bytes,
)
from advisor.model.logits import head_grad_bytes, logits_bytes
from advisor.model.states import (
    first_layer_pending_grad_bytes,
    gradient_bytes,
    offload_held_gradient_bytes,
    optimizer_bytes,
    optimizer_step_transient,
    weight_bytes,
)


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
    nvme_bytes: int = 0
    """Disk the NVMe offload's swap files take on each node's nvme_path (0 without NVMe offload)."""
    phase: str = "train"
    """Which phase holds the peak: train | late-backward | step | generation | scoring."""
    detail: dict[str, int] = field(default_factory=dict)

    @property
    def breakdown(self) -> dict[str, int]:
        return {"weights": self.weights, "gradients": self.gradients, "optimizer": self.optimizer,
                "activations": self.activations, "logits": self.logits, "other": self.other}


# ---------------------------------------------------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------------------------------------------------
def estimate_memory(model: ModelSpec, plan: Plan, target: Target) -> MemoryEstimate:
    """Predicted peak and reserved memory of the busiest GPU, with its breakdown (see the module docstring)."""
    d = dims(model)
    pr = Precision.of(plan)
    W = weight_bytes(d, plan, pr)
    g_full, g_keep, g_step = gradient_bytes(d, plan, pr)
    opt = optimizer_bytes(d, plan, pr)
    stack, layer_tr = activation_bytes(d, plan, pr)
    logits = logits_bytes(d, plan, pr)
    head_grad = head_grad_bytes(d, plan, pr)
    ref_tr = reference_forward_transient(d, plan, pr)

    persistent_other = {
        "runtime": calibration.RUNTIME_ALLOCATED_BYTES,
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
    layer_live = zero3_live_param_bytes(d, plan, pr, in_layers=True)

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
    other_t = train_other
    if early == logits:
        act_t, log_t, extra = stack, logits, {}
    elif early == ref_tr:
        act_t, log_t, extra = stack, 0, {"reference_forward": ref_tr}
    else:
        act_t, log_t, extra = stack + layer_tr, 0, {}
        held += fresh_head
        # a decoder layer's recompute: the ZeRO-3 module gathered then is a layer's (zero3_live_param_bytes)
        other_t = train_other - in_flight["zero3_live_params"] + layer_live
    phases.append(("train", W + held + opt + act_t + log_t + other_t + sum(extra.values()),
                   {"weights": W, "gradients": held, "optimizer": opt, "activations": act_t, "logits": log_t,
                    "other": other_t + sum(extra.values()), **extra}))
    if not accumulating:
        # late backward: every gradient, one (recomputed) layer's activations left
        late_act = last_layer_backward_bytes(d, plan, pr)
        late_other = (train_other - in_flight["autocast_weight_cache"] + autocast_late_backward_bytes(d, plan, pr)
                      + layer_live - in_flight["zero3_live_params"])
        late_grads = g_full - g_step - first_layer_pending_grad_bytes(d, plan, pr)
        phases.append(("late-backward", W + late_grads + opt + late_act + late_other,
                       {"weights": W, "gradients": late_grads, "optimizer": opt, "activations": late_act,
                        "logits": 0, "other": late_other}))
    offload_held = offload_held_gradient_bytes(d, plan, pr)
    if offload_held:
        # a micro-batch that does not step, at the end of its backward: the large gradients it keeps, one
        # (recomputed) layer's activations left; the stepping micro-batch's clone of the host-accumulated gradient
        # (zero_bucket_bytes) is not made on these
        late_act = last_layer_backward_bytes(d, plan, pr)
        late_other = train_other - d.largest_module * pr.work
        phases.append(("late-backward", W + offload_held + opt + late_act + late_other,
                       {"weights": W, "gradients": offload_held, "optimizer": opt, "activations": late_act,
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
        gen_act = max(prefill + int(kv * prompt_frac), kv + decode) - kv + moe_lora_generation_bytes(d, plan, pr)
        gen_other = base_other + kv + gather + fsdp
        phases.append(("generation", W + g_keep + opt + gen_act + gen_other,
                       {"weights": W, "gradients": g_keep, "optimizer": opt, "activations": gen_act, "logits": 0,
                        "other": gen_other, "kv_cache": kv, "zero3_generation_gather": gather}))
    old, ref = logprob_passes(plan)
    if old or ref:
        seq_tok = plan.micro_batch * plan.seq_len
        tr = forward_transient_bytes(d, plan, pr, seq_tok, logit_tokens(plan))
        if ref:  # the KL reference's forward, gathered whole under FSDP2
            tr += fsdp2_frozen_gather_bytes(d, plan, pr)
        so = base_other + in_flight["zero3_live_params"] + in_flight["fsdp_unsharded"]
        phases.append(("scoring", W + g_keep + opt + tr + so,
                       {"weights": W, "gradients": g_keep, "optimizer": opt, "activations": tr, "logits": 0,
                        "other": so}))

    precompute = fsdp2_precompute_bytes(d, plan, pr)
    if precompute:
        # before train(): the policy is still on the host (buffers.fsdp2_precompute_bytes)
        phases.append(("scoring", precompute + calibration.RUNTIME_ALLOCATED_BYTES,
                       {"weights": 0, "gradients": 0, "optimizer": 0, "activations": 0, "logits": 0,
                        "other": precompute + calibration.RUNTIME_ALLOCATED_BYTES, "precompute_reference": precompute}))

    name, peak, parts = max(phases, key=lambda p: p[1])
    detail = {k: v for k, v in parts.items() if k not in ("weights", "gradients", "optimizer", "activations",
                                                          "logits", "other")}
    detail.update(persistent_other)
    detail.update(in_flight)
    detail["zero3_live_params_in_layers"] = layer_live
    detail.update({"activation_stack": stack, "activation_layer_transient": layer_tr, "logits_transient": logits,
                   "head_grad": head_grad, "grads_full": g_full, "grads_persistent": g_keep})
    for pname, ptotal, _ in phases:
        detail["phase_" + pname.replace("-", "_")] = ptotal

    persistent = W + g_keep + opt + base_other
    reserved = reserved_bytes(peak, persistent)
    cap = capacity_bytes(plan, target)
    margin_fraction = calibration.SAFETY_MARGIN_FRACTION + (calibration.FSDP2_UNEXPLAINED_MARGIN_FRACTION if plan.backend == "fsdp2" else 0)
    margin = int(margin_fraction * target.gpu_memory_bytes)
    headroom = cap - margin - reserved
    host, pinned = host_bytes(d, plan, pr)
    return MemoryEstimate(
        weights=parts["weights"], gradients=parts["gradients"], optimizer=parts["optimizer"],
        activations=parts["activations"], logits=parts["logits"], other=parts["other"],
        per_gpu_peak_bytes=peak, per_gpu_reserved_bytes=reserved, capacity_bytes=cap, fits=headroom >= 0,
        headroom_bytes=headroom, host_bytes=host, pinned_bytes=pinned, nvme_bytes=nvme_swap_bytes(d, plan, pr),
        phase=name, detail=detail,
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
