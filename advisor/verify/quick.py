"""Quick mode: the bundle's plan with fewer micro-batches per optimizer step, and its step time scaled back.

Everything that sets the peak stays: the micro-batch, the sequence length, the backend, checkpointing, and the
gradient accumulation too wherever the memory model says it moves the peak (GRPO/RLOO generate micro_batch x
grad_accum completions at once). Only the number of micro-batches each optimizer step accumulates, G, becomes a
smaller g. The run then happens in a working copy of the bundle (a temporary folder: every file linked, train.py
copied with CONFIG["grad_accum"] = g, ds_config.json too when it states the accumulation as a number), with the
metrics, the random-init checkpoint and the log in the bundle itself.

Scaling back. The speed model is a sum of per-step parts (advisor.model.speed.estimate_speed's breakdown): some are
paid per micro-batch (GEMMs, attention, elementwise, recompute, ZeRO-2 reduce-scatters, DeepSpeed hooks), some
once per optimizer step (the optimizer, DDP's all-reduce, the param all-gather, the CPU Adam of offload plans, the
Trainer's fixed cost), and GRPO's generation with the generation batch. Evaluated at g and at G it gives both
predicted step times, t(g) and t(G). The measured quick step time is scaled by t(G) / t(g): exact when the model's
error is a common factor of the parts, and with g chosen so that the micro-batch part dominates t(g), a wrong
per-step part moves the result little. Both the measured quick figure and the scaled one are reported, with the
breakdown's split into per-micro-batch and per-step seconds.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from advisor.core.plan import Plan
from advisor.verify.limits import (
    PEAK_SAME_FRACTION,
    QUICK_STEPS_BUDGET_SECONDS,
    QUICK_TIMED_STEPS,
    warmup_steps,
)

RUN_ARTIFACTS = ("metrics", "random-init", "output", "__pycache__", "verify.log", "verify-report.json",
                 "verify-report.md")
"""Entries of the bundle the working copy does not link: verify passes their places to train.py itself."""


@dataclass(frozen=True)
class QuickChoice:
    """The accumulation a verify run uses, and how its step time maps back to the plan's."""

    plan_grad_accum: int
    grad_accum: int
    steps: int
    warmup: int
    predicted_step_seconds: float | None
    """t(grad_accum), the speed model's step time at the accumulation that runs."""
    predicted_plan_step_seconds: float | None
    """t(plan_grad_accum): the plan's."""
    per_micro_batch_seconds: float | None
    per_step_seconds: float | None
    reason: str

    @property
    def quick(self) -> bool:
        return self.grad_accum != self.plan_grad_accum

    @property
    def scale(self) -> float:
        if not self.quick or not self.predicted_step_seconds or not self.predicted_plan_step_seconds:
            return 1.0
        return self.predicted_plan_step_seconds / self.predicted_step_seconds

    def to_json(self) -> dict:
        return {"quick": self.quick, "plan_grad_accum": self.plan_grad_accum, "grad_accum": self.grad_accum,
                "steps": self.steps, "warmup_steps": self.warmup,
                "predicted_step_seconds": self.predicted_step_seconds,
                "predicted_plan_step_seconds": self.predicted_plan_step_seconds,
                "per_micro_batch_seconds": self.per_micro_batch_seconds,
                "per_step_seconds": self.per_step_seconds, "scale": self.scale, "reason": self.reason}


def _allowed(plan: Plan, g: int) -> bool:
    """GRPOConfig needs the generation batch (micro x processes x accumulation) to hold whole groups."""
    if plan.trainer in ("grpo", "rloo") and plan.num_generations > 0:
        return (plan.micro_batch * plan.num_processes * g) % plan.num_generations == 0
    return True


def choose(model, plan: Plan, target, *, full_steps: bool, steps: int | None, estimate=None) -> QuickChoice:
    """The accumulation and step count of the verify run (the module docstring). `estimate(model, plan, target)`
    returns (memory, speed); default advisor.model.estimate.estimate_plan."""
    from advisor.verify.limits import DEFAULT_STEPS

    if estimate is None:
        from advisor.model.estimate import estimate_plan as estimate

    G = plan.grad_accum

    def predicted(g: int):
        try:
            mem, spd = estimate(model, plan.with_(grad_accum=g), target)
        except Exception:  # noqa: BLE001 - a plan the model cannot estimate: nothing to choose from
            return None, None
        return mem.per_gpu_peak_bytes, spd.step_seconds

    peak_full, t_full = predicted(G) if model is not None else (None, None)

    def plain(reason: str) -> QuickChoice:
        n = steps or (DEFAULT_STEPS if full_steps else warmup_steps(G) + QUICK_TIMED_STEPS)
        return QuickChoice(G, G, n, warmup_steps(G), t_full, t_full, None, None, reason)

    if full_steps:
        return plain("--full-steps: the plan's own accumulation")
    if G == 1:
        return plain("the plan accumulates one micro-batch per step already")
    if t_full is None or peak_full is None:
        return plain("the speed model cannot estimate this plan: its own accumulation runs")
    chosen: tuple[int, float] | None = None
    peak_moves = False
    for g in range(1, G):
        if not _allowed(plan, g):
            continue
        peak, t = predicted(g)
        if peak is None or t is None:
            continue
        if abs(peak - peak_full) > PEAK_SAME_FRACTION * peak_full:
            peak_moves = True
            continue
        n = steps or warmup_steps(g) + QUICK_TIMED_STEPS
        if chosen is None or n * t <= QUICK_STEPS_BUDGET_SECONDS:
            chosen = (g, t)  # the largest g within the budget (or the smallest allowed when none is)
        if n * t > QUICK_STEPS_BUDGET_SECONDS:
            break
    if chosen is None:
        why = ("every smaller accumulation moves the predicted peak by more than 0.5 % (for GRPO/RLOO the "
               "generation batch is micro_batch x grad_accum)" if peak_moves
               else "no smaller accumulation keeps whole generation groups")
        return plain(why)
    g, t = chosen
    per_mb = (t_full - t) / (G - g)
    fixed = t - g * per_mb
    n = steps or warmup_steps(g) + QUICK_TIMED_STEPS
    return QuickChoice(G, g, n, warmup_steps(g), t, t_full, per_mb, fixed,
                       f"{g} of {G} micro-batches per step: {n} steps predicted to take {n * t:.0f} s")


# ------------------------------------------------------------------------------------------------ working copy

class QuickModeError(Exception):
    """The bundle cannot be run with another accumulation (train.py does not take it from a literal CONFIG)."""


def rewrite_train(src: str, grad_accum: int) -> str:
    """train.py with CONFIG["grad_accum"] set to `grad_accum`; everything else byte for byte."""
    tree = ast.parse(src)
    node = None
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == "CONFIG" and isinstance(stmt.value, ast.Dict)):
            for key, value in zip(stmt.value.keys, stmt.value.values, strict=False):
                if isinstance(key, ast.Constant) and key.value == "grad_accum" and isinstance(value, ast.Constant) \
                        and isinstance(value.value, int) and not isinstance(value.value, bool):
                    node = value
    if node is None:
        raise QuickModeError("train.py has no literal CONFIG['grad_accum']")
    if 'gradient_accumulation_steps=CONFIG["grad_accum"]' not in src:
        raise QuickModeError("train.py does not pass CONFIG['grad_accum'] as gradient_accumulation_steps")
    lines = src.splitlines(keepends=True)
    if node.lineno != node.end_lineno:
        raise QuickModeError("CONFIG['grad_accum'] spans several lines")
    line = lines[node.lineno - 1]
    # ast offsets are UTF-8 byte offsets
    raw = line.encode("utf-8")
    raw = raw[:node.col_offset] + str(grad_accum).encode() + raw[node.end_col_offset:]
    lines[node.lineno - 1] = raw.decode("utf-8")
    return "".join(lines)


def rewrite_ds_config(text: str, grad_accum: int, micro_batch: int, dp: int) -> str | None:
    """ds_config.json with a numeric accumulation (and train batch) set for `grad_accum`; None when it leaves them
    to the Trainer ("auto"), so that the bundle's own file is linked unchanged."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    changed = False
    if isinstance(doc.get("gradient_accumulation_steps"), int):
        doc["gradient_accumulation_steps"] = grad_accum
        changed = True
    if isinstance(doc.get("train_batch_size"), int):
        doc["train_batch_size"] = micro_batch * grad_accum * dp
        changed = True
    return json.dumps(doc, indent=2) + "\n" if changed else None


def make_working_copy(bundle: Path, train_src: str, plan: Plan, grad_accum: int) -> Path:
    """A temporary folder that is the bundle with `grad_accum` micro-batches per step (the module docstring).
    QuickModeError when train.py cannot be rewritten; the caller removes the folder (remove_working_copy)."""
    new_train = rewrite_train(train_src, grad_accum)
    bundle = bundle.absolute()  # the links are read from the working copy: a relative target would dangle
    work = Path(tempfile.mkdtemp(prefix="trl-advisor-verify-"))
    try:
        launch = bundle / "launch.sh"
        if launch.is_file() and "logs/" in launch.read_text(encoding="utf-8", errors="replace"):
            # launch.sh writes logs/ beside itself (the vLLM server's log): keep it in the bundle, not the copy
            (bundle / "logs").mkdir(exist_ok=True)
        for entry in sorted(os.listdir(bundle)):
            if entry in RUN_ARTIFACTS or entry == "train.py":
                continue
            os.symlink(bundle / entry, work / entry)
        (work / "train.py").write_text(new_train, encoding="utf-8")
        ds = bundle / "ds_config.json"
        if ds.is_file() and not ds.is_symlink():
            text = rewrite_ds_config(ds.read_text(encoding="utf-8"), grad_accum, plan.micro_batch, plan.dp_size)
            if text is not None:
                (work / "ds_config.json").unlink()
                (work / "ds_config.json").write_text(text, encoding="utf-8")
    except BaseException:
        remove_working_copy(work)
        raise
    return work


def remove_working_copy(work: Path | None) -> None:
    """Remove the working copy: links and the rewritten files only (a link is removed, never followed)."""
    if work is not None and work.name.startswith("trl-advisor-verify-"):
        shutil.rmtree(work, ignore_errors=True)
