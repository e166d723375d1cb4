"""verify-report.json and verify-report.md in the bundle: what verify found, kept next to the files it judged.

Both are verify's own files (advisor.bundle.write.RUN_ARTIFACTS lists them, so `generate --force` may replace a
bundle that holds them); a symlink or a named pipe in their place is refused, never followed or opened, and the
reason is returned instead of a path.
"""

from __future__ import annotations

import json
from pathlib import Path

from advisor.verify.outcome import REPORT_JSON, REPORT_MD, STEP_TITLES, SYMBOL, VerifyOutcome, _gib


def _md(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(out: VerifyOutcome) -> str:
    """The report as markdown: verdict, steps, measured against predicted, the run's command."""
    lines = [f"# trl-advisor verify: {'passed' if out.passed else 'not passed'}", "", out.summary(), "",
             "| step | verdict | detail |", "|---|---|---|"]
    for s in out.steps:
        detail = _md(s.detail) + "".join(f"<br>warning: {_md(w)}" for w in s.warnings) + (
            f"<br>hint: {_md(s.hint)}" if s.hint else "")
        lines.append(f"| {STEP_TITLES.get(s.name, s.name)} | {SYMBOL[s.status]} {s.status} | {detail} |")
    m, p = out.measured, out.predicted
    peak = _gib(m.get("per_gpu_peak_bytes"))
    if m.get("out_of_memory"):
        floor = m.get("per_gpu_peak_at_least_bytes")
        peak = "out of memory" + (f": needed at least {_gib(floor)}" if floor else "")
    lines += ["", "| | measured | predicted (the files as they are) |", "|---|---|---|",
              f"| peak allocated per GPU | {peak} | {_gib(p.get('per_gpu_peak_bytes'))} |",
              f"| tokens/s | {_fmt(m.get('tokens_per_second'))} | {_fmt(p.get('tokens_per_second'))} |",
              f"| step seconds | {_fmt(m.get('step_seconds'), 2)} | {_fmt(p.get('step_seconds'), 2)} |"]
    if p.get("source") and p.get("source") != "estimate of the files":
        lines += ["", f"Predicted by: the {_md(str(p['source']))}."]
    host = out.host or {}
    if host.get("tokens_per_second"):
        lines += ["", f"Host: its ops dispatch in {host['op_seconds'] * 1e6:.2f} us against the calibration hosts' "
                      f"median {host['reference_op_seconds'] * 1e6:.2f} us; for this host the model gives "
                      f"{_fmt(host['tokens_per_second'])} tokens/s ({_fmt(host.get('step_seconds'), 2)} s per step), "
                      "reported beside the prediction above, which the run is judged against."]
    elif host.get("detail"):
        lines += ["", f"Host: {_md(host['detail'])}."]
    if out.quick and out.quick.get("quick"):
        q = out.quick
        lines += ["", f"Quick mode: grad_accum {q['grad_accum']} of the plan's {q['plan_grad_accum']}; measured "
                      f"{_fmt(q.get('measured_step_seconds'), 2)} s per step, scaled by {q['scale']:.3f} (the speed "
                      f"model's {_fmt(q.get('predicted_plan_step_seconds'), 2)} s / "
                      f"{_fmt(q.get('predicted_step_seconds'), 2)} s) to "
                      f"{_fmt(q.get('scaled_step_seconds'), 2)} s."]
    if out.next_plan:
        lines += ["", f"Next plan: {out.next_plan['summary']}", "", f"    {out.next_plan['command']}"]
    if out.command:
        lines += ["", "Command:", "", "    " + " ".join(out.command) + (f"    (in {out.cwd})" if out.cwd else "")]
    return "\n".join(lines) + "\n"


def _fmt(value, digits: int = 0) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    return f"{value:,.{digits}f}"


def write_reports(out: VerifyOutcome, folder: Path) -> list[str]:
    """Write both reports into `folder`; the paths written, and for each file refused the reason."""
    from advisor.core import safeio

    written = []
    doc = out.to_json()
    for name, text in ((REPORT_JSON, json.dumps(doc, indent=2, allow_nan=False, default=str) + "\n"),
                       (REPORT_MD, markdown(out))):
        path = folder / name
        try:
            with safeio.open_output(path, what="verify report") as fh:
                fh.write(text)
        except safeio.UnsafeInputError as exc:
            written.append(f"not written: {exc.message}")
            continue
        except OSError as exc:
            written.append(f"not written: {path}: {exc.strerror or exc}")
            continue
        written.append(str(path))
    return written
