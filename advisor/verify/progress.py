"""The live status of a run, read from what it writes: the phase, step i of N, and the peak memory so far.

train.py's PeakMemoryCallback writes metrics/rank<k>.jsonl as it goes (a start record when training begins, one
line per optimizer step with the peaks so far), so the status needs no hook in train.py: before the start record
the run is starting (imports, the random-init checkpoint, loading the model, the Trainer's set-up), then training,
then finishing once every rank wrote its end record.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from advisor.verify.metrics import read_metrics
from advisor.verify.outcome import _gib


def status_reader(metrics_dir: Path, steps: int, *, warmup: int, label: str = "") -> Callable[[], str | None]:
    """A function that says where the run is, for the runner's progress line."""
    prefix = f"{label}: " if label else ""

    def status() -> str:
        metrics = read_metrics(metrics_dir)
        if not metrics.ranks:
            return f"{prefix}starting (loading the model, the Trainer's set-up)"
        done = metrics.step_count
        ended = all(any(r.get("event") == "end" for r in recs) for recs in metrics.ranks.values())
        if ended:
            return f"{prefix}finishing ({done} of {steps} steps)"
        peak = metrics.peak("peak_allocated_bytes")
        memory = f", peak {_gib(peak)} so far" if peak else ""
        times = metrics.step_seconds()
        last = f", last step {times[-1]:.2f} s" if times else ""
        phase = "warm-up" if done < warmup else "timed"
        return f"{prefix}step {done} of {steps} ({phase}){memory}{last}"

    return status
