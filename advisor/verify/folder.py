"""The bundle folder as verify reads it: plan.json (bounded, type-checked), the files it lists, and the plan the
files describe as `check --bundle` reads it back (advisor.check.read_bundle), with that plan's estimate: verify
compares the run with the estimate of the bundle as it is on disk, not with what plan.json predicted for the plan
as it was generated."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.core.errors import InputFileError
from advisor.core.plan import Plan
from advisor.model.speed import host_bound_share
from advisor.verify.limits import MAX_BUNDLE_FILE_BYTES
from advisor.verify.outcome import _num


@dataclass
class _Bundle:
    """What verify read from the folder."""

    path: Path
    doc: dict
    files: dict[str, str]
    plan: Plan | None
    plan_error: str | None
    unreadable: dict[str, str] = field(default_factory=dict)
    """File name -> why it was not read (a named pipe, a device, too large, not UTF-8)."""
    ctx: Any = None
    """The rules' Context of the plan the files describe (model, target, estimate), or None (see read_error)."""
    reading: Any = None
    """advisor.bundle.readback.PlanReading: that plan, where each value came from, the edits since plan.json."""
    read_error: Exception | None = None
    """Why the files could not be read back into a plan (the rules step reports it)."""


def _load_bundle(bundle_dir: str | os.PathLike[str]) -> _Bundle:
    from advisor.core import safeio

    # absolute: the run starts in a working copy (quick mode) whose links, and the --metrics-dir and
    # --random-init-dir launch.sh is given, must name the bundle from any folder
    path = Path(bundle_dir).absolute()
    hint = ("name the bundle's folder (trl-advisor verify generated/NAME; DIR defaults to the current folder), or "
            "generate one with: trl-advisor generate --model MODEL --out DIR")
    if not path.exists():
        raise InputFileError(f"bundle folder not found: {path}", hint=hint)
    if not path.is_dir():
        raise InputFileError(f"{path} is not a folder", hint="pass the folder `trl-advisor generate --out` wrote")
    plan_file = path / "plan.json"
    regenerate = "re-create the bundle with trl-advisor generate --force"
    try:
        text = safeio.read_text(plan_file, max_bytes=MAX_BUNDLE_FILE_BYTES, what="plan file")
        doc = safeio.load_json(text, where=str(plan_file))
    except safeio.UnsafeInputError as exc:
        if exc.reason == "missing":
            raise InputFileError(f"{path} has no plan.json: not a trl-advisor bundle", hint=hint) from None
        raise InputFileError(exc.message, hint=regenerate) from None
    if not isinstance(doc, dict):
        raise InputFileError(f"{plan_file} is not a plan (a JSON object is expected)", hint=regenerate)
    from advisor.bundle.read import check_plan_json

    check_plan_json(doc, str(plan_file))
    from advisor.bundle.consistency import REQUIRED_FILES
    from advisor.bundle.render import BUNDLE_ORDER

    listed = [n for n in doc.get("files") or [] if isinstance(n, str) and "/" not in n and n not in ("", ".", "..")]
    names = dict.fromkeys([*listed, *REQUIRED_FILES, *BUNDLE_ORDER])
    files: dict[str, str] = {"plan.json": text}
    unreadable: dict[str, str] = {}
    for name in names:
        if name == "plan.json":
            continue
        try:
            files[name] = safeio.read_text(path / name, max_bytes=MAX_BUNDLE_FILE_BYTES, what="bundle file")
        except safeio.UnsafeInputError as exc:
            if exc.reason != "missing":  # missing files are the bundle step's "missing ..."
                unreadable[name] = exc.message
    plan, plan_error = _plan_from_train(files.get("train.py"))
    b = _Bundle(path=path, doc=doc, files=files, plan=plan, plan_error=plan_error, unreadable=unreadable)
    if not unreadable:
        try:
            from advisor.check import read_bundle

            b.ctx, b.reading = read_bundle(str(path))
        except Exception as exc:  # AdvisorError (an unknown model, a wrong value) or a reader bug: reported later
            b.read_error = exc
    if b.reading is not None:
        b.plan, b.plan_error = b.reading.plan, None  # what the files describe is what runs
    return b


def _plan_from_train(src: str | None) -> tuple[Plan | None, str | None]:
    if src is None:
        return None, "no train.py"
    from advisor.bundle.consistency import train_constants

    try:
        cfg = train_constants(src).get("CONFIG")
    except SyntaxError as exc:
        return None, f"train.py does not parse: {exc.msg} (line {exc.lineno})"
    except (RecursionError, MemoryError):  # the parser recurses once per nesting level
        return None, "train.py does not parse: expressions nested too deeply"
    if not isinstance(cfg, dict):
        return None, "train.py has no literal CONFIG dict"
    from advisor.bundle.read import plan_value_problem

    values = {k: cfg[k] for k in Plan.__dataclass_fields__ if k in cfg}
    found = plan_value_problem(values)
    if found:
        return None, f"train.py CONFIG: {found[0]} {found[1]}"
    try:
        return Plan(**values), None
    except TypeError as exc:
        return None, f"train.py CONFIG is incomplete: {exc}"


def _uses_deepspeed(b: _Bundle) -> bool:
    if b.plan is not None:
        return b.plan.uses_deepspeed
    return (b.doc.get("plan") or {}).get("backend") == "deepspeed"


def _estimate_predictions(b: _Bundle, *, random_init: bool = False) -> dict | None:
    """The estimate of the plan the files describe (None when there is none: the files could not be read back, or
    the model cannot estimate that plan). With --random-init, of the model that run builds: train.py's random
    checkpoint is the text decoder alone (advisor/bundle/render.py RANDOM_INIT_MODEL_TYPE), so an image-text model's
    frozen vision tower (ModelSpec.vision_params) is not on the GPU to be measured."""
    if b.ctx is None or b.ctx.memory is None or b.ctx.speed is None:
        return None
    mem, spd = b.ctx.memory, b.ctx.speed
    source = "estimate of the files"
    model, plan = b.ctx.model, b.ctx.plan
    # GKD: the teacher's random checkpoint is its decoder too (teacher_config.json, same RANDOM_INIT_MODEL_TYPE)
    teacher_tower = 0
    if plan is not None and plan.trainer == "gkd" and plan.teacher_params:
        from advisor.model.gkd import teacher_forward_params

        teacher_tower = plan.teacher_params - teacher_forward_params(plan)
    towers = (model.vision_params if model is not None else 0) + teacher_tower
    if random_init and model is not None and towers:
        from dataclasses import replace

        from advisor.model.estimate import estimate_plan

        built = replace(plan, teacher_params=plan.teacher_params - teacher_tower) if teacher_tower else plan
        try:
            mem, spd = estimate_plan(model.decoder_only(), built, b.ctx.target)
        except Exception:  # noqa: BLE001 - the files' own estimate stands
            pass
        else:
            source = (f"estimate of the files for the text decoder(s) --random-init builds (without the "
                      f"{towers / 1e9:.2f}B vision-tower parameters the real model(s) load)")
    return {"per_gpu_peak_bytes": int(mem.per_gpu_peak_bytes), "per_gpu_reserved_bytes": int(mem.per_gpu_reserved_bytes),
            "tokens_per_second": float(spd.tokens_per_second), "step_seconds": float(spd.step_seconds),
            "fits": bool(mem.fits), "capacity_bytes": int(mem.capacity_bytes),
            "host_bound_share": round(host_bound_share(b.ctx.plan, spd), 4), "source": source}


def _predictions(doc: dict) -> dict:
    """plan.json's predictions; a value that is not a finite number (text, true, NaN) is None: nothing to compare."""
    mem = doc.get("memory") or {}
    spd = doc.get("speed") or {}

    def number(value: Any) -> float | int | None:
        return value if _num(value) is not None and math.isfinite(value) else None

    return {
        "per_gpu_peak_bytes": number(mem.get("per_gpu_peak_bytes")),
        "per_gpu_reserved_bytes": number(mem.get("per_gpu_reserved_bytes")),
        "tokens_per_second": number(spd.get("tokens_per_second")),
        "step_seconds": number(spd.get("step_seconds")),
    }
