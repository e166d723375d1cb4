"""GKD's short runs draw their own share of on-policy micro-batches.

GKDTrainer.training_step generates with the student for a micro-batch with probability lmbda, so an optimizer step's
time depends on how many of its micro-batches drew that: a verify run of four timed steps of four micro-batches each
holds 0-16 generations, where the estimate is for lmbda's average (advisor.model.gkd.ON_POLICY_SHARE). The bundle's
train.py counts them (count_on_policy: `on_policy_micro_batches` in each step's record), and each timed step is set
back to the average by the model's own ratio, t(average share) / t(the share that step drew), as quick mode scales
its accumulation back to the plan's: the estimate is then judged on the work the run did, and the step-to-step spread
left is the machine's, not the draws'.
"""

from __future__ import annotations

from typing import Any

from advisor.verify.metrics import Metrics


def drawn_counts(metrics: Metrics, warmup: int) -> list[int] | None:
    """Per timed step, the on-policy micro-batches rank 0 recorded (every rank seeds Python's random alike, so each
    draws the same); None when any timed step lacks the count (other trainers, bundles from before the count)."""
    if not metrics.steps:
        return None
    records = metrics.steps[min(metrics.steps)]
    counts = {rec["step"]: rec.get("on_policy_micro_batches") for rec in records if type(rec.get("step")) is int}
    timed = [counts[s] for s in sorted(counts)[warmup:]]
    if not timed or not all(type(n) is int and n >= 0 for n in timed):
        return None
    return timed


def as_average(seconds: list[float], counts: list[int], grad_accum: int, step_at) -> dict[str, Any] | None:
    """Each timed step set back to the average share: seconds x step_at(None) / step_at(count / grad_accum), where
    step_at(share) is the estimate's step time with that share of on-policy micro-batches (None: the average). None
    when the estimate cannot be had for every share, or the counts do not match the steps."""
    if len(seconds) != len(counts) or grad_accum < 1 or any(n > grad_accum for n in counts):
        return None
    try:
        average = step_at(None)
        ratios = [average / step_at(n / grad_accum) for n in counts]
    except Exception:  # noqa: BLE001 - a plan the model cannot re-estimate: the run is reported as drawn
        return None
    if not average or any(r <= 0 for r in ratios):
        return None
    drawn = sum(counts) / (len(counts) * grad_accum)
    return {"micro_batches_per_step": list(counts), "share_drawn": round(drawn, 4),
            "adjusted_step_seconds": [t * r for t, r in zip(seconds, ratios, strict=True)],
            "step_seconds_as_drawn": list(seconds)}
