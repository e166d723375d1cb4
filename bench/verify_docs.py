"""python -m bench.verify_docs [--write | --check]: docs/verify.md from the committed verify results.

Reads every bench/results/verify-*.jsonl: the records bench.verify_runs writes (format 2: the plan, the estimate
of the files current at run time, what was measured, quick mode's scaling, the check's verdict, versions) and the
older records of bench/gpu_checks.sh (format 1: the prediction plan.json held when the bundle ran). Also computes,
from bench/results/h200*.jsonl and the speed model, the figures the speed tolerance is set from. Without a flag it
prints the markdown; --write writes docs/verify.md; --check exits 1 when docs/verify.md is not what the data give.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = "bench/results"
DOC = "docs/verify.md"
CALIBRATION_GLOB = "h200*.jsonl"
GIB = 1 << 30


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


def row(file: str, rec: dict) -> dict[str, Any]:
    """A record as the table's values, whichever format it has."""
    if rec.get("format") == 2:
        v = rec.get("verify") or {}
        m, p = v.get("measured") or {}, v.get("predicted") or {}
        steps = {s["name"]: s for s in v.get("steps") or []}
        run = steps.get("run", {})
        oom = "out of memory" in (steps.get("memory", {}).get("detail") or "")
        q = v.get("quick") or {}
        mode = (f"quick: ga {q.get('grad_accum')} of {q.get('plan_grad_accum')}" if q.get("quick") else
                f"full: ga {q.get('plan_grad_accum')}" if q else "-")
        return {"case": rec.get("case"), "file": file, "plan": v.get("plan") or (rec.get("check") or {}).get("plan"),
                "gpus": rec.get("gpus"), "status": rec.get("status"), "passed": v.get("passed"),
                "ran": run.get("status") == "pass", "oom": oom, "mode": mode,
                "peak": m.get("per_gpu_peak_bytes"), "peak_pred": p.get("per_gpu_peak_bytes"),
                "tps": m.get("tokens_per_second"), "tps_pred": p.get("tokens_per_second"),
                "spread": m.get("step_seconds_spread_pct"), "wall": rec.get("wall_seconds"),
                "predicted_as": "estimate of the files at run time", "note": rec.get("reason") or rec.get("error")}
    steps = rec.get("steps") or {}
    run = steps.get("run", {})
    m, p = rec.get("measured") or {}, rec.get("predicted_then") or {}
    ran = run.get("status") == "pass"
    return {"case": rec.get("case"), "file": file, "plan": rec.get("plan"), "gpus": rec.get("gpus"),
            "status": "ok", "passed": rec.get("passed"), "ran": ran,
            "oom": "OutOfMemoryError" in (run.get("detail") or ""),
            "mode": f"full: ga {(rec.get('plan') or {}).get('grad_accum')}", "peak": m.get("per_gpu_peak_bytes"),
            "peak_pred": p.get("per_gpu_peak_bytes"), "tps": m.get("tokens_per_second"),
            "tps_pred": p.get("tokens_per_second"), "spread": None, "wall": None,
            "predicted_as": "plan.json when it ran", "note": rec.get("note")}


def _gib(n) -> str:
    return "-" if not isinstance(n, (int, float)) else f"{n / GIB:.1f}"


def _err(measured, predicted) -> str:
    if not measured or not predicted:
        return ""
    return f" ({(predicted / measured - 1) * 100:+.1f} %)"


def _num(x, digits: int = 0) -> str:
    return "-" if not isinstance(x, (int, float)) else f"{x:,.{digits}f}"


# ------------------------------------------------------------------------------------------------ tolerance

def step_noise(root: Path = REPO) -> list[float]:
    """Per calibration run (bench/results/h200*.jsonl, status ok): the largest deviation of a timed step from the
    run's median, in %, after the warm-up verify drops (advisor.verify.limits.warmup_steps)."""
    from advisor.verify.limits import warmup_steps

    out = []
    for path in sorted((root / RESULTS).glob(CALIBRATION_GLOB)):
        for rec in _read(path):
            if rec.get("status") != "ok":
                continue
            times = (rec.get("timing") or {}).get("step_seconds") or []
            timed = times[warmup_steps(int((rec.get("row") or {}).get("grad_accum") or 1)):]
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
    rows = [row(f, r) for f, r in recs]
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
      "(quick mode: scaled to the plan). Errors are predicted / measured - 1. \"Predicted\" is what that verify "
      "compared with: the estimate of the bundle's files at run time (format 2 records), or plan.json's prediction "
      "(the older records, which compared with it).")
    w("")
    w("| run | kind | GPUs | plan | mode | verify | peak measured | peak predicted | tokens/s measured | "
      "tokens/s predicted | spread | wall s | file |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    kinds = set()
    for r in rows:
        if r["status"] != "ok":
            w(f"| {r['case']} | {_kind(r['plan'])} | {r['gpus']} | {_plan(r['plan'])} | - | {r['status']}: "
              f"{r['note'] or ''} | | | | | | | {r['file']} |")
            continue
        if r["ran"] or r["oom"]:
            kinds.add(_kind(r["plan"]))
        verdict = "passed" if r["passed"] else ("failed: out of memory" if r["oom"] else "failed")
        peak = _gib(r["peak"]) if r["ran"] else ("out of memory" if r["oom"] else "-")
        spread = "" if r["spread"] is None else f"{r['spread']:.1f} %"
        w(f"| {r['case']} | {_kind(r['plan'])} | {r['gpus']} | {_plan(r['plan'])} | {r['mode']} | {verdict} | "
          f"{peak} | {_gib(r['peak_pred'])}{_err(r['peak'] if r['ran'] else None, r['peak_pred'])} | "
          f"{_num(r['tps']) if r['ran'] else '-'} | {_num(r['tps_pred'])}"
          f"{_err(r['tps'] if r['ran'] else None, r['tps_pred'])} | {spread} | {_num(r['wall'])} | {r['file']} |")
    w("")
    w(f"{len(rows)} runs; {len(kinds)} kinds of bundle ran (trainer, method, backend): "
      f"{'; '.join(sorted(kinds))}.")
    w("")
    _quick_section(w, recs)
    _oom_section(w, recs)
    _versions_section(w, recs)
    _tolerance_section(w, root, recs, SPEED_TOLERANCE_PCT, SPEED_SPREAD_CAP_PCT)
    return "\n".join(lines) + "\n"


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
    w("| bundle | quick: ga | quick: measured s/step | scaled to the plan, s/step | --full-steps: ga | "
      "measured s/step | scaled vs full | quick wall s | full wall s |")
    w("|---|---|---|---|---|---|---|---|---|")
    for name, q, f in pairs:
        qq = (q["verify"].get("quick") or {})
        fm = (f["verify"].get("measured") or {})
        full_step = fm.get("step_seconds")
        scaled = qq.get("scaled_step_seconds")
        diff = f"{(scaled / full_step - 1) * 100:+.1f} %" if scaled and full_step else "-"
        w(f"| {name[: -len('-quick')]} | {qq.get('grad_accum')} of {qq.get('plan_grad_accum')} | "
          f"{_num(qq.get('measured_step_seconds'), 2)} | {_num(scaled, 2)} | "
          f"{(f['verify'].get('quick') or {}).get('plan_grad_accum')} | {_num(full_step, 2)} | {diff} | "
          f"{_num(q.get('wall_seconds'))} | {_num(f.get('wall_seconds'))} |")
        w("")
        w(f"Scaling: the speed model predicts {_num(qq.get('predicted_step_seconds'), 2)} s per step at "
          f"grad_accum {qq.get('grad_accum')} and {_num(qq.get('predicted_plan_step_seconds'), 2)} s at "
          f"{qq.get('plan_grad_accum')} ({_num(qq.get('per_micro_batch_seconds'), 3)} s per micro-batch, "
          f"{_num(qq.get('per_step_seconds'), 3)} s per step), so the measured quick step is multiplied by "
          f"{_num(qq.get('scale'), 3)}.")
    w("")


def _oom_section(w, recs) -> None:
    by = _format2(recs)
    r = by.get("oom-edit")
    w("## A bundle edited beyond its plan")
    w("")
    if r is None:
        w("No run of the edited bundle is recorded yet.")
        w("")
        return
    c = r.get("check") or {}
    est = c.get("estimate") or {}
    diffs = (c.get("differences") or {}).get("vs_plan_json") or []
    w(f"`{r.get('generate')}`, then train.py's CONFIG edited: "
      + ", ".join(f"{k} = {v}" for k, v in (r.get("edits") or {}).items()) + ".")
    w("")
    w(f"- `check --bundle` before the run: exit {c.get('exit')}, errors {', '.join(c.get('errors') or []) or 'none'}; "
      f"estimate of the files {_gib(est.get('per_gpu_peak_bytes'))} GiB peak, "
      f"{'fits' if est.get('fits') else 'does not fit'} ({_gib(est.get('gpu_capacity_bytes'))} GiB usable); "
      + "; ".join(f"{d['field']} {d['value']} in {d['where']}, {d['other']} in plan.json" for d in diffs) + ".")
    steps = {s["name"]: s for s in (r.get("verify") or {}).get("steps") or []}
    w(f"- verify, run step: {steps.get('run', {}).get('detail', '-')}")
    w(f"- verify, memory step: {steps.get('memory', {}).get('detail', '-')}")
    nxt = (r.get("verify") or {}).get("next_plan") or {}
    if nxt:
        w(f"- next plan: `{nxt.get('command')}`")
    w("")


def _versions_section(w, recs) -> None:
    warned = [(r["case"], s) for _, r in recs if r.get("format") == 2 and r.get("status") == "ok"
              for s in (r.get("verify") or {}).get("steps") or [] if s.get("name") == "packages"]
    w("## Package versions")
    w("")
    if not warned:
        w("No format 2 run recorded yet.")
        w("")
        return
    case, step = warned[0]
    versions = next(r.get("versions") for _, r in recs if r.get("case") == case)
    w(f"The GPU machine's own stack (transformers {versions.get('transformers')}, torch {versions.get('torch')}, "
      f"peft {versions.get('peft')}), not the bundle's pins: the packages step of `{case}` said "
      f"**{step['status']}**: {step['detail']}.")
    for text in step.get("warnings") or []:
        w(f"- warning: {text}")
    w("")


def _tolerance_section(w, root: Path, recs, base: float, cap: float) -> None:
    noise = step_noise(root)
    errors = model_step_errors()
    spreads = sorted(r["spread"] for r in (row(f, x) for f, x in recs) if r.get("spread") is not None)
    w("## Speed tolerance")
    w("")
    w(f"- Noise of short runs: over {len(noise)} calibration runs (`{RESULTS}/{CALIBRATION_GLOB}`, status ok, the "
      "warm-up verify drops removed), the largest deviation of a timed step from its run's median is "
      f"{_quantile(noise, 0.5):.1f} % at the median, {_quantile(noise, 0.9):.1f} % at the 90th percentile, "
      f"{noise[-1] if noise else math.nan:.1f} % at worst.")
    if spreads:
        w(f"- The verify runs above: spread {spreads[0]:.1f} % to {spreads[-1]:.1f} % (median "
          f"{statistics.median(spreads):.1f} %).")
    w(f"- The speed model's step-time error over {len(errors)} calibration runs (docs/accuracy.md): "
      f"{_quantile(errors, 0.5):.1f} % at the median, {_quantile(errors, 0.9):.1f} % at the 90th percentile.")
    w(f"- Chosen: {base:.0f} % (the model's 90th percentile rounded up to 5 %) plus the run's own spread, at most "
      f"{cap:.0f} % more (above the worst calibration noise). The old band, 35 %, passed a prediction almost twice "
      "as far off as the model ever is on nine runs in ten.")
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
