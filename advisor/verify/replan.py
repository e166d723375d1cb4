"""After a run out of GPU memory: what went wrong, and the plan the advisor would choose now.

Two causes, not exclusive: the files were changed beyond the plan (a field differs from plan.json: the prediction
plan.json holds was for another configuration), and the estimate of the files as they are was too low (it said the
run fits). The measured demand is a floor: torch's message says what PyTorch had allocated and what it asked for
when it failed, so the run needed at least their sum.

The next plan is the planner's (advisor.search.decide) for the same request (the pins of the bundle's Re-create
line, on the bundle's hardware) with the files' edits pinned too. The configuration that ran out of memory does
not fit, whatever the model said: when the search returns it again (same structure, a micro-batch at least as
large), the micro-batch is pinned to the largest power of two whose predicted reserve, scaled by how much the
model under-predicted the failed run, fits. When nothing fits with the edits, the search runs without them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import fields, replace

from advisor.core.errors import AdvisorError
from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.core.safeio import shell_path
from advisor.verify.outcome import _gib

PLAN_TO_REQUEST = {"zero_stage": "zero", "vllm_mode": "vllm", "gpus_per_node": "gpus"}
"""Plan fields whose REQUEST flag has another name."""
NOT_PINNABLE = frozenset({"num_processes", "lora_alpha", "teacher_params", "model"})
"""Plan fields no REQUEST flag sets directly (they follow from others)."""
_BOOL_FLAGS = {"grad-ckpt": "grad_ckpt", "liger": "liger", "packing": "packing", "unsloth": "unsloth",
               "trust-remote-code": "trust_remote_code"}


def recreate_pins(text: str | None) -> dict:
    """The REQUEST pins of the `Re-create: trl-advisor generate ...` line a bundle's train.py and launch.sh carry."""
    if not text:
        return {}
    m = re.search(r"Re-create:\s*trl-advisor generate (.*)$", text, re.MULTILINE)
    if not m:
        return {}
    try:
        words = shlex.split(m.group(1))
    except ValueError:
        return {}
    types = {f.name: f.type for f in fields(Request)}
    out: dict = {}
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--"):
            continue
        name = word[2:]
        if name in _BOOL_FLAGS:
            out[_BOOL_FLAGS[name]] = True
            continue
        if name.startswith("no-") and name[3:] in _BOOL_FLAGS:
            out[_BOOL_FLAGS[name[3:]]] = False
            continue
        key = name.replace("-", "_")
        if key not in types or i >= len(words):
            continue
        value: object = words[i]
        i += 1
        kind = str(types[key])
        try:
            if "int" in kind:
                value = int(value)
            elif "float" in kind:
                value = float(value)
        except ValueError:
            continue
        out[key] = value
    return out


def _structure(plan: Plan) -> Plan:
    return plan.with_(micro_batch=1, grad_accum=1)


def next_plan(*, pins: dict, edits: dict, hardware: dict, failed: Plan, failed_peak_predicted: int | None,
              floor_bytes: int | None, out: str | None = None, decide=None) -> dict | None:
    """The plan to run instead (the module docstring), as {"summary", "command", "why", "plan"}; None when no
    plan fits or the request cannot be rebuilt."""
    if decide is None:
        from advisor.search import decide
    from advisor.bundle.render import recreate_command
    from advisor.search.candidates import MICRO_BATCHES

    base = {k: v for k, v in pins.items() if k in {f.name for f in fields(Request)}}
    if not base.get("model"):
        return None
    if not base.get("gpu") and not base.get("hardware") and hardware.get("gpu"):
        base["gpu"] = hardware["gpu"]
    for key, hw_key in (("gpus", "gpus_per_node"), ("nodes", "nodes")):
        if not base.get(key) and isinstance(hardware.get(hw_key), int):
            base[key] = hardware[hw_key]
    edit_pins = {PLAN_TO_REQUEST.get(k, k): v for k, v in edits.items()
                 if k not in NOT_PINNABLE and PLAN_TO_REQUEST.get(k, k) in {f.name for f in fields(Request)}}
    ratio = 1.0
    if floor_bytes and failed_peak_predicted:
        ratio = max(1.0, floor_bytes / failed_peak_predicted)
    attempts = []
    if edit_pins:
        attempts.append(({**base, **edit_pins}, "the request with the files' edits pinned ("
                         + ", ".join(f"{k}={v}" for k, v in edit_pins.items()) + ")"))
    attempts.append((base, "the request as planned" + (" (nothing fits with the edits)" if edit_pins else "")))
    for values, why in attempts:
        try:
            req = Request(**values)
            decision, result = decide(req)
        except AdvisorError:
            continue
        chosen = decision.chosen
        if chosen is None:
            continue
        plan = chosen.plan
        if _structure(plan) == _structure(failed) and plan.micro_batch >= failed.micro_batch:
            # the configuration that ran out of memory, or a larger one: pin a micro-batch below it that fits
            # once scaled by the measured under-prediction
            smaller = [m for m in MICRO_BATCHES if m < failed.micro_batch]
            fitted = None
            for m in reversed(smaller):
                try:
                    d2, r2 = decide(replace(req, micro_batch=m, grad_accum=None))
                except AdvisorError:
                    continue
                c2 = d2.chosen
                if c2 is None:
                    continue
                limit = c2.memory.per_gpu_reserved_bytes + c2.memory.headroom_bytes
                if c2.memory.per_gpu_reserved_bytes * ratio <= limit:
                    fitted = (replace(req, micro_batch=m, grad_accum=None), d2, c2)
                    break
            if fitted is None:
                continue
            req, decision, chosen = fitted
            plan = chosen.plan
            why += f"; micro_batch {plan.micro_batch}: the failed {failed.micro_batch} does not fit"
            if ratio > 1:
                why += f" (the run needed {ratio:.2f}x its predicted peak)"
        mem, spd = chosen.memory, chosen.speed
        summary = (f"{plan.trainer}, {plan.short()}: {_gib(mem.per_gpu_peak_bytes)} peak per GPU predicted, "
                   f"{spd.tokens_per_second:,.0f} tokens/s")
        # a new folder: the edited bundle stays as it is
        command = recreate_command(plan, decision.model, decision.target, req) + (
            f" --out {shell_path(out)}" if out else "")
        return {"summary": summary, "command": command, "why": why, "plan": plan.to_dict(),
                "per_gpu_peak_bytes": int(mem.per_gpu_peak_bytes),
                "tokens_per_second": float(spd.tokens_per_second)}
    return None
