"""The memory breakdown in words: when in a step the predicted peak falls, and why a part is 0 there.

The breakdown the estimate gives (`memory.breakdown_bytes`) is what the busiest GPU holds at the moment of its peak,
`memory.peak_phase` (advisor.model.memory.estimate_memory takes the largest of its phases), not each part's own
maximum. At the end of the forward pass of a step with one micro-batch, for one, there are no gradients yet: the
Trainer freed the previous step's (zero_grad(set_to_none=True)) and the backward has not written any. A bare
"gradients 0.00" reads like a bug, so the bundle README and `estimate` say which moment it is and why a part is 0.
"""

from __future__ import annotations

from typing import Any

PHASES = {
    "train": "at the end of the forward pass, where the backward starts",
    "late-backward": "at the end of the backward pass, once every gradient is written",
    "step": "in the optimizer step, after the backward",
    "generation": "while generating completions, before the step's forward and backward",
    "scoring": "in the log-probability passes before the step's forward and backward",
}
"""advisor.model.memory's phase names (MemoryEstimate.phase) in words."""

PRECOMPUTE = "in the reference log-probability pass before training starts (the policy still on the host)"
"""The "scoring" phase of DPO/KTO's precomputed reference under FSDP2 (detail `precompute_reference`)."""

PARTS = ("weights", "gradients", "optimizer", "activations", "logits", "other")
"""The breakdown's parts in the order the model adds them (advisor.model.estimate.BREAKDOWN_KEYS)."""


def peak_moment(memory: dict[str, Any]) -> str | None:
    """When the peak falls, in words; None for a result without `peak_phase` (an older plan.json). The "train"
    phase is the largest of three moments (advisor.model.memory): the loss's backward over the logits, a DPO/KTO
    reference forward after the policy's, or the first layer of the backward once the loss's is done."""
    phase = memory.get("peak_phase")
    detail = memory.get("detail_bytes") or {}
    if phase == "scoring" and detail.get("precompute_reference"):
        return PRECOMPUTE
    if phase == "train" and detail.get("reference_forward"):
        return "in the reference model's forward, after the policy's (whose activations are held for its backward)"
    if phase == "train" and not (memory.get("breakdown_bytes") or {}).get("logits", 1):
        return "at the start of the backward pass, in the last decoder layer's backward once the loss's is done"
    return PHASES.get(phase) if phase else None


def absent_reason(part: str, memory: dict[str, Any], offload: str = "none") -> str:
    """Why `part` is 0 at the peak: each phase holds only what exists at that moment, and offloading (the plan's
    `offload`: none | optimizer | all) keeps states in host memory."""
    phase = memory.get("peak_phase")
    if (memory.get("detail_bytes") or {}).get("precompute_reference"):
        return "training has not started: the policy is still on the host"
    if part == "gradients":
        # the backward has begun in "train" once the loss's is done (logits freed, no reference forward running)
        begun = phase == "train" and not (memory.get("breakdown_bytes") or {}).get("logits", 1) and not \
            (memory.get("detail_bytes") or {}).get("reference_forward")
        if offload != "none" and (begun or phase in ("late-backward", "step")):
            return "the backward moves them to host memory as it writes them (offload)"
        if phase in ("train", "generation", "scoring"):
            return ("not written yet at that moment, and the Trainer's `zero_grad(set_to_none=True)` freed the "
                    "previous step's")
    if part == "weights" and offload == "all":
        return "the parameters are in host memory (offload); the layer being computed is gathered into `other`"
    if part == "optimizer" and offload != "none":
        return "the optimizer states are in host memory (offload)"
    if part == "activations" and phase == "step":
        return "the backward freed them before the step"
    if part == "logits":
        if phase in ("late-backward", "step"):
            return "freed once the loss's backward used them"
        if phase in ("generation", "scoring"):
            return "this pass's logits are counted with its activations"
        if phase == "train" and (memory.get("detail_bytes") or {}).get("reference_forward"):
            return "the reference model's forward runs at that moment, its working set counted in `other`"
        if phase == "train":
            return "the loss's backward used and freed them"
    return "none held at that moment"


def breakdown_rows(memory: dict[str, Any], offload: str = "none") -> list[tuple[str, int, str | None]]:
    """(part, bytes, why it is 0 or None) for each part of the breakdown, in PARTS order."""
    parts = memory.get("breakdown_bytes") or {}
    order = [p for p in PARTS if p in parts] + sorted(p for p in parts if p not in PARTS)
    return [(p, int(parts[p]), absent_reason(p, memory, offload) if int(parts[p]) == 0 else None) for p in order]


def safety_margin_bytes(memory: dict[str, Any]) -> int:
    """What the plan keeps free of the usable memory besides its headroom: the safety margin (rule MEM001), with
    FSDP2's extra margin (rule MEM006). headroom = usable - reserved - margin (advisor.model.memory)."""
    return int(memory["gpu_capacity_bytes"]) - int(memory["per_gpu_reserved_bytes"]) - int(memory["headroom_bytes"])
