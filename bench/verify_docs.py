"""python -m bench.verify_docs [--write | --check]: docs/verify.md from the committed verify results.

Reads every bench/results/verify-*.jsonl: the records bench.verify_runs writes (format 2: the plan, the estimate
of the files current at run time, what was measured, quick mode's scaling, the check's verdict, versions) and the
older records of bench/gpu_checks.sh (format 1: the prediction plan.json held when the bundle ran). Also computes,
from bench/results/h200*.jsonl and the speed model, the figures the speed tolerance is set from. Without a flag it
prints the markdown; --write writes docs/verify.md; --check exits 1 when docs/verify.md is not what the data give.

A run out of memory is shown as one, with the demand verify measured (a lower bound), never with the peak its
metrics logged before the failure. A case bench.verify_runs skipped for time in one file and ran in a later one is
listed once, as the run; errors are measured / predicted - 1, the sign verify judges.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import statistics
import sys
from pathlib import Path
from typing import Any

from advisor.model import speed as S

REPO = Path(__file__).resolve().parents[1]
RESULTS = "bench/results"
DOC = "docs/verify.md"
CALIBRATION_GLOB = "h200*.jsonl"
GIB = 1 << 30


def _gpus(rec: dict) -> str:
    """"2 x H200": how many GPUs of which kind the record ran on (the kind where the record names it)."""
    n, kind = rec.get("gpus"), rec.get("gpu")
    return f"{n} x {kind}" if n is not None and kind else str(n if n is not None else "")


def _read(path: Path) -> list[dict]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            if isinstance(rec, dict):
                out.append(rec)
    return out


def records(root: Path = REPO) -> list[tuple[str, dict]]:
    """(file name, record) of every committed verify result, files in name order."""
    out = []
    for path in sorted((root / RESULTS).glob("verify-*.jsonl")):
        out += [(path.name, rec) for rec in _read(path)]
    return out


# ------------------------------------------------------------------------------------------------ one row

def _kind(plan: dict | None) -> str:
    if not plan:
        return "-"
    backend = {"single": "1 GPU", "ddp": "DDP", "fsdp2": "FSDP2"}.get(plan.get("backend"),
                                                                      f"ZeRO-{plan.get('zero_stage')}")
    return f"{plan.get('trainer', '?').upper()} {plan.get('method', '?')}, {backend}"


def _plan(plan: dict | None) -> str:
    if not plan:
        return "-"
    bits = [f"mb {plan.get('micro_batch')} x ga {plan.get('grad_accum')}", f"seq {plan.get('seq_len')}"]
    bits += [name for name, on in (("grad-ckpt", plan.get("grad_ckpt")), ("liger", plan.get("liger"))) if on]
    return ", ".join(bits)


_OOM_MARKS = ("OutOfMemoryError", "CUDA out of memory", "ran out of GPU memory", "CUBLAS_STATUS_ALLOC_FAILED")
_AT_LEAST = re.compile(r"needed at least ([0-9.]+) GiB")


def _failed_steps(steps: dict[str, dict]) -> list[str]:
    return [name for name, s in steps.items() if s.get("status") == "fail"]


def row(file: str, rec: dict) -> dict[str, Any]:
    """A record as the table's values, whichever format it has. A run out of memory has no measured peak (what its
    metrics logged before the failure is not the peak): `oom_floor` is the demand verify measured, when it did."""
    if rec.get("format") == 2:
        v = rec.get("verify") or {}
        m, p = v.get("measured") or {}, v.get("predicted") or {}
        steps = {s["name"]: s for s in v.get("steps") or []}
        run = steps.get("run", {})
        memory = steps.get("memory", {})
        oom = bool(m.get("out_of_memory")) or (run.get("status") == "fail" and any(
            mark in (run.get("detail") or "") + (memory.get("detail") or "") for mark in _OOM_MARKS))
        floor = m.get("per_gpu_peak_at_least_bytes")
        if oom and not floor:
            hit = _AT_LEAST.search(memory.get("detail") or "")
            floor = float(hit.group(1)) * GIB if hit else None
        q = v.get("quick") or {}
        mode = (f"quick: ga {q.get('grad_accum')} of {q.get('plan_grad_accum')}" if q.get("quick") else
                f"full: ga {q.get('plan_grad_accum')}" if q else "-")
        ran = run.get("status") == "pass"
        return {"case": rec.get("case"), "file": file, "plan": v.get("plan") or (rec.get("check") or {}).get("plan"),
                "gpus": _gpus(rec), "status": rec.get("status"), "passed": v.get("passed"),
                "ran": ran, "oom": oom, "oom_floor": floor if oom else None, "mode": mode,
                "failed": _failed_steps(steps), "steps": steps,
                "peak": m.get("per_gpu_peak_bytes") if ran else None, "peak_pred": p.get("per_gpu_peak_bytes"),
                "tps": m.get("tokens_per_second") if ran else None, "tps_pred": p.get("tokens_per_second"),
                "spread": m.get("step_seconds_spread_pct"), "host_share": p.get("host_bound_share"),
                "host": v.get("host") or {}, "wall": rec.get("wall_seconds"),
                "predicted_as": "estimate of the files at run time", "note": rec.get("reason") or rec.get("error")}
    steps = rec.get("steps") or {}
    run = steps.get("run", {})
    m, p = rec.get("measured") or {}, rec.get("predicted_then") or {}
    ran = run.get("status") == "pass"
    return {"case": rec.get("case"), "file": file, "plan": rec.get("plan"), "gpus": _gpus(rec),
            "status": "ok", "passed": rec.get("passed"), "ran": ran,
            "oom": "OutOfMemoryError" in (run.get("detail") or ""), "oom_floor": None,
            "failed": _failed_steps(steps), "steps": steps,
            "mode": f"full: ga {(rec.get('plan') or {}).get('grad_accum')}",
            "peak": m.get("per_gpu_peak_bytes") if ran else None,
            "peak_pred": p.get("per_gpu_peak_bytes"), "tps": m.get("tokens_per_second") if ran else None,
            "tps_pred": p.get("tokens_per_second"), "spread": None, "wall": None,
            "predicted_as": "plan.json when it ran", "note": rec.get("note")}


def table_rows(recs: list[tuple[str, dict]]) -> tuple[list[dict], list[dict]]:
    """(rows of the runs table, budget skips left out): a case skipped for time in one file and run in another is
    not a row of its own; a case that never ran stays, as skipped."""
    rows = [row(f, r) for f, r in recs]
    ran = {r["case"] for r in rows if r["status"] == "ok"}
    kept = [r for r in rows if r["status"] == "ok" or r["case"] not in ran]
    dropped = [r for r in rows if r["status"] != "ok" and r["case"] in ran]
    return kept, dropped


def verdict(r: dict) -> str:
    """passed, or what failed: out of memory, or the failed judging steps with the figure verify judged."""
    if r["passed"]:
        return "passed"
    if r["oom"]:
        return "failed: out of memory"
    why = []
    for name in [n for n in r["failed"] if n in ("memory", "speed")] or r["failed"]:
        detail = (r["steps"].get(name) or {}).get("detail") or ""
        hit = re.search(r"\(([+-][0-9.]+ %), tolerance (\+-[0-9.]+ (?:%|GiB))", detail)
        why.append(f"{name} {hit.group(1)} outside {hit.group(2)}" if hit else name)
    text = "failed: " + ("; ".join(why) or "not passed")
    if _within_upper_bound(r):
        text += " (an Unsloth estimate is an upper bound: verify now passes this run, advisor.verify.steps)"
    return text


def _within_upper_bound(r: dict) -> bool:
    """An Unsloth run that failed only by using less memory or running faster than its estimate: verify judges
    Unsloth estimates one-sided since 2026-12-01 (the record was written before)."""
    if not (r.get("plan") or {}).get("unsloth") or not r["failed"] or set(r["failed"]) - {"memory", "speed"}:
        return False
    peak, tps = _err_pct(r["peak"], r["peak_pred"]), _err_pct(r["tps"], r["tps_pred"])
    return ("memory" not in r["failed"] or (peak is not None and peak < 0)) and \
        ("speed" not in r["failed"] or (tps is not None and tps > 0))


def _gib(n) -> str:
    return "-" if not isinstance(n, (int, float)) else f"{n / GIB:.1f}"


def _err_pct(measured, predicted) -> float | None:
    """measured / predicted - 1, in %: the sign verify reports (positive: measured above the prediction)."""
    if not isinstance(measured, (int, float)) or not isinstance(predicted, (int, float)) or not measured \
            or not predicted:
        return None
    return (measured / predicted - 1) * 100


def _err(measured, predicted) -> str:
    e = _err_pct(measured, predicted)
    return "" if e is None else f" ({e:+.1f} %)"


def _num(x, digits: int = 0) -> str:
    return "-" if not isinstance(x, (int, float)) else f"{x:,.{digits}f}"


def _peak_cell(r: dict) -> str:
    if r["oom"]:
        return "out of memory" + (f", needed >= {_gib(r['oom_floor'])}" if r.get("oom_floor") else "")
    return _gib(r["peak"]) if r["ran"] else "-"


# ------------------------------------------------------------------------------------------------ tolerance

@functools.lru_cache(maxsize=1)
def host_shares() -> dict[str, float]:
    """Each calibration row's predicted host-bound share (bench.accuracy, advisor.model.speed.host_bound_share)."""
    from bench import accuracy

    return {e.run.name: e.host_share for e in accuracy.build().rows}


def step_noise(root: Path = REPO, host_bound: bool | None = None) -> list[float]:
    """Per calibration run (bench/results/h200*.jsonl, status ok): the largest deviation of a timed step from the
    run's median, in %, after the warm-up verify drops (advisor.verify.limits.warmup_steps), over the first
    QUICK_TIMED_STEPS timed steps, as many as verify's quick run times: the largest deviation grows with the steps
    sampled (the 15-step records of bench/rows/ckpt-overlap-2026-12-03.json reach 60 % where their first four stay
    within the 3-step records' spread), so the cap compares a run with records of its own length. host_bound: only
    the runs whose predicted step is at least HOST_BOUND_NOTE_SHARE host-bound (True) or the others (False)."""
    from advisor.model.calibration import HOST_BOUND_NOTE_SHARE
    from advisor.verify.limits import QUICK_TIMED_STEPS, warmup_steps

    shares = host_shares() if host_bound is not None else {}
    out = []
    for path in sorted((root / RESULTS).glob(CALIBRATION_GLOB)):
        for rec in _read(path):
            if rec.get("status") != "ok":
                continue
            if host_bound is not None and (shares.get(rec.get("name"), 0.0) >= HOST_BOUND_NOTE_SHARE) != host_bound:
                continue
            times = (rec.get("timing") or {}).get("step_seconds") or []
            start = warmup_steps(int((rec.get("row") or {}).get("grad_accum") or 1))
            timed = times[start:start + QUICK_TIMED_STEPS]
            if len(timed) >= 2:
                med = statistics.median(timed)
                out.append(max(abs(t - med) for t in timed) / med * 100)
    return sorted(out)


def model_step_errors() -> list[float]:
    """|predicted / measured - 1| of the step time, in %, over the calibration runs (bench.accuracy)."""
    from bench import accuracy

    report = accuracy.build()
    return sorted(abs(e.err_step) * 100 for e in report.rows if e.err_step is not None)


def _quantile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else math.nan


# ------------------------------------------------------------------------------------------------ the page

def render(root: Path = REPO) -> str:
    from advisor.verify.limits import (
        QUICK_STEPS_BUDGET_SECONDS,
        QUICK_TIMED_STEPS,
        SPEED_SPREAD_CAP_PCT,
        SPEED_TOLERANCE_PCT,
        WARMUP_MICRO_BATCHES,
    )

    recs = records(root)
    rows, dropped = table_rows(recs)
    files = sorted({f for f, _ in recs})
    lines: list[str] = []
    w = lines.append
    w("# verify: measured against predicted")
    w("")
    w(f"Generated by `python -m bench.verify_docs --write` from {', '.join(f'`{RESULTS}/{f}`' for f in files)} "
      f"and `{RESULTS}/{CALIBRATION_GLOB}`. Do not edit by hand: `tests/bench/test_verify_docs.py` fails when this "
      "file is not what the data give. New results: `bash bench/verify_h200.sh OUT_DIR` on the GPU machine, then "
      f"copy `OUT_DIR/verify-*.jsonl` to `{RESULTS}/` and regenerate.")
    w("")
    w("`trl-advisor verify BUNDLE` reads the bundle back as `check --bundle` does (train.py's CONFIG and the "
      "keyword arguments it passes, ds_config.json, accelerate.yaml, a TRL YAML, requirements.txt; plan.json is the "
      "record of what was planned), estimates that plan, runs it briefly and compares. By default it runs in quick "
      f"mode: the same micro-batch, sequence length and everything else that sets the peak, but fewer micro-batches "
      f"per optimizer step (the largest accumulation whose steps are predicted to take at most "
      f"{QUICK_STEPS_BUDGET_SECONDS:.0f} s, {QUICK_TIMED_STEPS} timed after the warm-up of "
      f"{WARMUP_MICRO_BATCHES} micro-batches), and scales the measured step time back to the plan's accumulation "
      "with the speed model's own breakdown. `--full-steps` runs the plan's own accumulation; `--dry-run` prints "
      "what would run.")
    w("")
    w("## Runs")
    w("")
    w("Peak: the largest `torch.cuda.max_memory_allocated()` over the ranks, GiB. Tokens/s: over the timed steps "
      "(quick mode: scaled to the plan). Errors are measured / predicted - 1, the figure verify judges (positive: "
      "measured above the prediction; docs/accuracy.md writes the inverse, predicted / measured - 1). \"Predicted\" "
      "is what that verify compared with: the estimate of the bundle's files at run time (format 2 records), or "
      "plan.json's prediction (the older records, which compared with it). A run out of memory has no measured "
      "peak: the figure shown is the demand torch's message gives (allocated plus the failed request), a lower "
      "bound.")
    w("")
    w("| run | kind | GPUs | plan | mode | verify | peak measured | peak predicted (error) | tokens/s measured | "
      "tokens/s predicted (error) | spread | wall s | file |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["status"] != "ok":
            w(f"| {r['case']} | {_kind(r['plan'])} | {r['gpus']} | {_plan(r['plan'])} | - | {r['status']}: "
              f"{r['note'] or ''} | | | | | | | {r['file']} |")
            continue
        spread = "" if r["spread"] is None else f"{r['spread']:.1f} %"
        w(f"| {r['case']} | {_kind(r['plan'])} | {r['gpus']} | {_plan(r['plan'])} | {r['mode']} | {verdict(r)} | "
          f"{_peak_cell(r)} | {_gib(r['peak_pred'])}{_err(r['peak'], r['peak_pred'])} | "
          f"{_num(r['tps'])} | {_num(r['tps_pred'])}{_err(r['tps'], r['tps_pred'])} | {spread} | "
          f"{_num(r['wall'])} | {r['file']} |")
    w("")
    ran = [r for r in rows if r["status"] == "ok"]
    never = [r for r in rows if r["status"] != "ok"]
    w(f"{len(ran)} runs ({sum(1 for r in ran if r['passed'])} passed, "
      f"{sum(1 for r in ran if not r['passed'] and r['oom'])} out of memory, "
      f"{sum(1 for r in ran if not r['passed'] and not r['oom'])} failed otherwise)"
      + (f"; {len(never)} case(s) never ran" if never else "") + ".")
    if dropped:
        w("")
        w(f"Left out: {len(dropped)} record(s) of cases skipped for time (bench.verify_runs' budget) in one file and "
          "run in a later one: " + ", ".join(f"{r['case']} ({r['file']})" for r in dropped) + ".")
    w("")
    _kinds_section(w, ran)
    _quick_section(w, recs)
    _oom_section(w, recs, rows)
    _versions_section(w, recs)
    _tolerance_section(w, root, recs, SPEED_TOLERANCE_PCT, SPEED_SPREAD_CAP_PCT)
    return "\n".join(lines) + "\n"


def _span(values: list[float]) -> str:
    if not values:
        return "-"
    lo, hi = f"{min(values):+.1f} %", f"{max(values):+.1f} %"
    return lo if lo == hi else f"{lo} to {hi}"


def kinds(ran: list[dict]) -> dict[str, list[dict]]:
    """Kind of bundle (trainer, method, backend) -> its runs that started (passed, failed or out of memory)."""
    out: dict[str, list[dict]] = {}
    for r in ran:
        if r["ran"] or r["oom"]:
            out.setdefault(_kind(r["plan"]), []).append(r)
    return dict(sorted(out.items()))


def _kinds_section(w, ran: list[dict]) -> None:
    by = kinds(ran)
    measured = [k for k, rs in by.items() if any(r["peak"] and r["tps"] for r in rs)]
    w("## By kind of bundle")
    w("")
    w(f"{len(by)} kinds of bundle ran (trainer, method, backend); {len(measured)} of them with both peak memory and "
      "tokens/s measured. Errors as above (measured / predicted - 1), from the lowest to the highest over the kind's "
      "runs.")
    w("")
    w("| kind | runs | peak error | tokens/s error | verify |")
    w("|---|---|---|---|---|")
    for kind, rs in by.items():
        peaks = [e for r in rs if (e := _err_pct(r["peak"], r["peak_pred"])) is not None]
        speeds = [e for r in rs if (e := _err_pct(r["tps"], r["tps_pred"])) is not None]
        ooms = sum(1 for r in rs if r["oom"])
        peak = _span(peaks) + (f"; {ooms} out of memory" if ooms else "")
        verdicts = ", ".join(f"{r['case']}: {verdict(r)}" for r in rs)
        w(f"| {kind} | {len(rs)} | {peak} | {_span(speeds)} | {verdicts} |")
    w("")


def _format2(recs: list[tuple[str, dict]]) -> dict[str, dict]:
    return {r["case"]: r for _, r in recs if r.get("format") == 2 and r.get("status") == "ok"}


def _quick_section(w, recs) -> None:
    by = _format2(recs)
    pairs = [(name, by[name], by.get(name[: -len("-quick")] + "-full")) for name in by if name.endswith("-quick")]
    pairs = [p for p in pairs if p[2] is not None]
    w("## Quick mode against --full-steps")
    w("")
    if not pairs:
        w("No pair of runs of one bundle in quick mode and with --full-steps is recorded yet.")
        w("")
        return
    w("| bundle | quick: ga | quick: timed steps | quick: measured s/step | scaled to the plan, s/step | "
      "--full-steps: ga | timed steps | measured s/step | scaled vs full | quick wall s | full wall s |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for name, q, f in pairs:
        qq = (q["verify"].get("quick") or {})
        fm = (f["verify"].get("measured") or {})
        full_step = fm.get("step_seconds")
        scaled = qq.get("scaled_step_seconds")
        diff = (scaled / full_step - 1) * 100 if scaled and full_step else None
        timed = [len(((x["verify"].get("measured") or {}).get("step_times") or {}).get("timed_step_seconds") or [])
                 for x in (q, f)]
        w(f"| {name[: -len('-quick')]} | {qq.get('grad_accum')} of {qq.get('plan_grad_accum')} | {timed[0]} | "
          f"{_num(qq.get('measured_step_seconds'), 2)} | {_num(scaled, 2)} | "
          f"{(f['verify'].get('quick') or {}).get('plan_grad_accum')} | {timed[1]} | {_num(full_step, 2)} | "
          f"{'-' if diff is None else f'{diff:+.1f} %'} | {_num(q.get('wall_seconds'))} | "
          f"{_num(f.get('wall_seconds'))} |")
        notes.append(
            f"{name[: -len('-quick')]}: the speed model predicts {_num(qq.get('predicted_step_seconds'), 2)} s per "
            f"step at grad_accum {qq.get('grad_accum')} and {_num(qq.get('predicted_plan_step_seconds'), 2)} s at "
            f"{qq.get('plan_grad_accum')} ({_num(qq.get('per_micro_batch_seconds'), 3)} s per micro-batch, "
            f"{_num(qq.get('per_step_seconds'), 3)} s per step), so the measured quick step is multiplied by "
            f"{_num(qq.get('scale'), 3)}. Scaled step within 15 % of --full-steps: "
            f"{'-' if diff is None else ('yes' if abs(diff) <= 15 else 'no')}; quick run under 3 minutes of wall "
            f"time (start-up included): {'yes' if (q.get('wall_seconds') or 1e9) < 180 else 'no'}.")
    w("")
    for text in notes:
        w(text)
    w("")


def _oom_section(w, recs, rows: list[dict]) -> None:
    by = _format2(recs)
    r = by.get("oom-edit")
    w("## Runs out of memory")
    w("")
    w("### A bundle edited beyond its plan")
    w("")
    if r is None:
        w("No run of the edited bundle is recorded yet.")
    else:
        c = r.get("check") or {}
        est = c.get("estimate") or {}
        diffs = (c.get("differences") or {}).get("vs_plan_json") or []
        planned = (r.get("planned") or {}).get("memory") or {}
        w(f"`{r.get('generate')}` (plan.json: {_gib(planned.get('per_gpu_peak_bytes'))} GiB peak predicted), then "
          "train.py's CONFIG edited: " + ", ".join(f"{k} = {v}" for k, v in (r.get("edits") or {}).items()) + ".")
        w("")
        w(f"- `check --bundle` before the run: exit {c.get('exit')}, errors "
          f"{', '.join(c.get('errors') or []) or 'none'}; estimate of the files {_gib(est.get('per_gpu_peak_bytes'))} "
          f"GiB peak, {'fits' if est.get('fits') else 'does not fit'} ({_gib(est.get('gpu_capacity_bytes'))} GiB "
          "per GPU); "
          + "; ".join(f"{d['field']} {d['value']} in {d['where']}, {d['other']} in plan.json" for d in diffs) + ".")
        steps = {s["name"]: s for s in (r.get("verify") or {}).get("steps") or []}
        for name in ("rules", "run", "memory"):
            w(f"- verify, {name} step ({steps.get(name, {}).get('status', '-')}): "
              f"{steps.get(name, {}).get('detail', '-')}")
        nxt = (r.get("verify") or {}).get("next_plan") or {}
        if nxt:
            w(f"- next plan ({nxt.get('why')}): {nxt.get('summary')}; `{nxt.get('command')}`")
    w("")
    others = [x for x in rows if x["status"] == "ok" and x["oom"] and x["case"] != "oom-edit"]
    w("### Other runs out of memory")
    w("")
    if not others:
        w("None.")
    for x in others:
        step = x["steps"].get("memory") or {}
        detail = step.get("detail") or (x["steps"].get("run") or {}).get("detail") or "-"
        w(f"- {x['case']} ({_kind(x['plan'])}, {_plan(x['plan'])}; {x['file']}): {detail}")
    w("")


def _versions_section(w, recs) -> None:
    runs = [r for _, r in recs if r.get("format") == 2 and r.get("status") == "ok"]
    w("## Package versions")
    w("")
    if not runs:
        w("No format 2 run recorded yet.")
        w("")
        return
    installed = sorted({f"{name} {(r.get('versions') or {}).get(name)}" for r in runs
                        for name in ("transformers", "torch", "trl", "peft")})
    statuses: dict[str, list[str]] = {}
    warned: dict[str, list[str]] = {}
    for r in runs:
        step = next((s for s in (r.get("verify") or {}).get("steps") or [] if s.get("name") == "packages"), None)
        if step is None:
            continue
        statuses.setdefault(step["status"], []).append(r["case"])
        for text in step.get("warnings") or []:
            warned.setdefault(text, []).append(r["case"])
    passed = [r["case"] for r in runs if (r.get("verify") or {}).get("passed")]
    others = [f"{r['case']} ({verdict(row('', r))})" for r in runs if not (r.get("verify") or {}).get("passed")]
    w(f"Every format 2 run used the GPU machine's own packages ({', '.join(installed)}), not the bundle's pins (no "
      "matching wheel was carried). The packages step: "
      + "; ".join(f"**{k}** in {len(v)} of {len(runs)} runs" for k, v in sorted(statuses.items()))
      + f". {len(passed)} of those runs passed verify with the warnings below"
      + (f"; the others failed at other steps: {', '.join(others)}" if others else "") + ".")
    w("")
    for text, cases in sorted(warned.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        w(f"- warning ({len(cases)} runs): {text}")
    w("")


def _tolerance_section(w, root: Path, recs, base: float, cap: float) -> None:
    from advisor.verify.limits import HOST_BOUND_SPREAD_CAP_PCT, QUICK_TIMED_STEPS
    from advisor.verify.steps import spread_cap, within_host_estimate

    noise = step_noise(root)
    gpu_noise, host_noise = step_noise(root, host_bound=False), step_noise(root, host_bound=True)
    errors = model_step_errors()
    spreads = sorted(r["spread"] for r in (row(f, x) for f, x in recs) if r.get("spread") is not None)
    w("## Speed tolerance")
    w("")
    w("- This host: since 2026-12-03 verify times the host's dispatch of a 1-element CUDA op before its run "
      "(advisor/verify/hostspeed.py) and reports the step the model gives for it (advisor.model.speed.host_factor: "
      "the step's host terms scaled by the op time over the calibration hosts' median, to the power "
      f"{S.HOST_FACTOR_EXPONENT}) beside the prediction, which stays the median host's: the band is judged on that, "
      "and a plan predicted mostly host-bound also passes inside the band around the estimate for its host (since "
      "2026-12-06: such steps follow the host CPU, docs/accuracy.md).")
    w(f"- Noise of short runs: over {len(noise)} calibration runs (`{RESULTS}/{CALIBRATION_GLOB}`, status ok, the "
      f"warm-up verify drops removed, the first {QUICK_TIMED_STEPS} timed steps of each: as many as verify's quick "
      "run times, since the largest deviation grows with the steps sampled), the largest deviation of a timed step "
      "from its run's median is "
      f"{_quantile(noise, 0.5):.1f} % at the median, {_quantile(noise, 0.9):.1f} % at the 90th percentile, "
      f"{noise[-1] if noise else math.nan:.1f} % at worst: {gpu_noise[-1] if gpu_noise else math.nan:.1f} % at "
      f"worst over the {len(gpu_noise)} whose step the GPU sets, {host_noise[-1] if host_noise else math.nan:.1f} % "
      f"over the {len(host_noise)} predicted at least 75 % host-bound (GRPO/RLOO generation without vLLM, small "
      "checkpointed micro-batches: the host CPU sets their steps).")
    if spreads:
        w(f"- The verify runs above: spread {spreads[0]:.1f} % to {spreads[-1]:.1f} % (median "
          f"{statistics.median(spreads):.1f} %).")
    judged = [(r, e, base + min(r["spread"] or 0.0, spread_cap(r.get("host_share")))) for r in table_rows(recs)[0]
              if r["status"] == "ok"
              and (e := _err_pct(r["tps"], r["tps_pred"])) is not None]
    by_host = [(r, e, band, own) for r, e, band in judged if abs(e) > band
               and (own := within_host_estimate(r["tps"], r.get("host") or {}, r.get("host_share"), band)) is not None]
    outside = [f"{r['case']} {e:+.1f} % (band +-{band:.1f} %)" for r, e, band in judged
               if abs(e) > band and all(r is not x[0] for x in by_host)]
    w(f"- Judged by the chosen band (below; the run's spread where the record has it), "
      f"{len(judged) - len(outside) - len(by_host)} of the {len(judged)} runs above with tokens/s measured are inside "
      "it" + (f"; {len(by_host)} more, host-bound, inside it around the model's estimate for their host (which verify "
              "accepts for such a plan since 2026-12-06: "
              + ", ".join(f"{r['case']} {e:+.1f} %, against its host's {own:+.1f} %" for r, e, _, own in by_host) + ")"
              if by_host else "")
      + (f"; outside: {', '.join(outside)}" if outside else "") + ".")
    w(f"- The speed model's step-time error over {len(errors)} calibration runs (docs/accuracy.md): "
      f"{_quantile(errors, 0.5):.1f} % at the median, {_quantile(errors, 0.9):.1f} % at the 90th percentile.")
    w(f"- Chosen: {base:.0f} % (the model's 90th percentile rounded up to 5 %) plus the run's own spread, at most "
      f"{cap:.0f} % more (above the worst noise of the calibration runs the GPU sets), {HOST_BOUND_SPREAD_CAP_PCT:.0f} % "
      "for a plan predicted at least 75 % host-bound (above the worst of those). The old band, 35 %, passed a "
      "prediction almost twice as far off as the model ever is on nine runs in ten.")
    w("")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.verify_docs", description=__doc__.split("\n\n")[1])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help=f"write {DOC}")
    g.add_argument("--check", action="store_true", help=f"exit 1 when {DOC} is stale")
    args = p.parse_args(argv)
    text = render()
    path = REPO / DOC
    if args.write:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {DOC}", file=sys.stderr)
    elif args.check:
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != text:
            print(f"{DOC} is stale: python -m bench.verify_docs --write", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
