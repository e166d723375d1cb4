"""The whole job: how long a run of so many tokens (or optimizer steps) takes at a plan's predicted speed, and the
GPU-hours it holds. `estimate`, `generate` and `recommend` report it; the arithmetic is here once.

Tokens are the ones tokens/s counts (Plan.tokens_per_step): every sequence at --seq-len, prompt and completion;
DPO counts chosen and rejected; GRPO/RLOO count each completion with its prompt. `--steps N` becomes
N x tokens_per_step tokens (global batch x seq_len), so a steps job and a tokens job of the same size take the same
time. Start-up, evaluation, checkpoint saving and data loading stalls are not in the prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.core.plan import Plan
from advisor.core.request import Request

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Job:
    given: str
    """"tokens" or "steps": what the user asked for (the other is derived from the plan)."""
    tokens: int
    steps: int
    """Optimizer steps, whole: a tokens job rounds its last partial step up."""
    tokens_per_step: int
    tokens_per_second: float
    hours: float
    """tokens / tokens_per_second / 3600."""
    gpus: int
    """GPUs held for the whole run (training and any vLLM server GPUs)."""
    gpu_hours: float

    def to_dict(self) -> dict:
        return {"given": self.given, "tokens": self.tokens, "steps": self.steps,
                "tokens_per_step": self.tokens_per_step, "tokens_per_second": self.tokens_per_second,
                "hours": self.hours, "gpus": self.gpus, "gpu_hours": self.gpu_hours}


def plan_job(plan: Plan, tokens_per_second: float, gpus: int, *, tokens: int | None = None,
             steps: int | None = None) -> Job | None:
    """The job of `tokens` trained tokens, or of `steps` optimizer steps, on this plan; None when neither is given
    or the plan has no speed (it does not run)."""
    if tokens is not None and steps is not None:
        raise ValueError("a job has tokens or steps, not both (resolve.check_request refuses the request)")
    if (tokens is None and steps is None) or tokens_per_second <= 0:
        return None
    per_step = plan.tokens_per_step
    if tokens is not None:
        given, total, whole_steps = "tokens", tokens, math.ceil(tokens / per_step)
    else:
        given, total, whole_steps = "steps", steps * per_step, steps
    hours = total / tokens_per_second / SECONDS_PER_HOUR
    return Job(given=given, tokens=total, steps=whole_steps, tokens_per_step=per_step,
               tokens_per_second=tokens_per_second, hours=hours, gpus=gpus, gpu_hours=hours * gpus)


def format_hours(hours: float) -> str:
    """Hours as a person reads them: seconds under a minute, minutes under an hour, one decimal under 100 h, whole
    hours above."""
    if hours * 60 < 1:
        return f"{hours * SECONDS_PER_HOUR:.0f} s"
    if hours < 1:
        return f"{hours * 60:.0f} min"
    return f"{hours:.1f} h" if hours < 100 else f"{hours:,.0f} h"


def describe(job: dict) -> str:
    """One line for a report: `1,000,000,000 tokens = 15,259 steps of 65,536: 2.9 h on 8 GPUs, 23.3 GPU-hours`."""
    gpu_hours = job["gpu_hours"]
    shown = f"{gpu_hours:.1f}" if gpu_hours < 100 else f"{gpu_hours:,.0f}"
    return (f"{job['tokens']:,} tokens = {job['steps']:,} steps of {job['tokens_per_step']:,}: "
            f"{format_hours(job['hours'])} on {job['gpus']} GPU{'s' if job['gpus'] != 1 else ''}, "
            f"{shown} GPU-hours")


def job_entry(req: Request | None, plan: Plan, tokens_per_second: float, gpus: int) -> dict:
    """`{"job": {...}}` for a result whose request sizes the job (--tokens or --steps), else `{}`: results without
    a job size, the reference bundles among them, stay as they were."""
    if req is None:
        return {}
    job = plan_job(plan, tokens_per_second, gpus, tokens=req.tokens, steps=req.steps)
    return {"job": job.to_dict()} if job is not None else {}
