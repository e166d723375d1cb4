"""What a run leaves behind: the per-rank metrics files train.py writes (peak memory, step times, losses), and the
last error line of its log."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from advisor.verify.limits import MAX_LOG_TAIL_BYTES, MAX_METRICS_BYTES
from advisor.verify.outcome import LOG_TAIL_LINES

# ------------------------------------------------------------------------------------------------------ metrics

@dataclass
class Metrics:
    """What train.py's PeakMemoryCallback wrote: metrics/rank<k>.jsonl, one JSON object a line."""

    ranks: dict[int, list[dict]] = field(default_factory=dict)
    bad_lines: int = 0

    @property
    def steps(self) -> dict[int, list[dict]]:
        return {r: [x for x in recs if x.get("event") == "step"] for r, recs in self.ranks.items()}

    @property
    def step_count(self) -> int:
        return max((len(s) for s in self.steps.values()), default=0)

    @property
    def devices(self) -> set[str]:
        return {str(x.get("device", "")) for recs in self.ranks.values() for x in recs if x.get("event") == "start"}

    @property
    def on_cpu(self) -> bool:
        devices = self.devices
        return bool(devices) and all(d.startswith("cpu") for d in devices)

    def peak(self, key: str) -> int | None:
        """Max over ranks and records of an integer byte count (peak_allocated_bytes, peak_reserved_bytes)."""
        values = [x[key] for recs in self.ranks.values() for x in recs
                  if isinstance(x.get(key), (int, float)) and not isinstance(x.get(key), bool)]
        return int(max(values)) if values else None

    def step_seconds(self) -> list[float]:
        """Per optimizer step, the slowest rank's wall time (ranks wait for each other in the collectives)."""
        by_step: dict[int, float] = {}
        for recs in self.steps.values():
            for x in recs:
                s, t = x.get("step"), x.get("step_seconds")
                if isinstance(s, int) and isinstance(t, (int, float)):
                    by_step[s] = max(by_step.get(s, 0.0), float(t))
        return [by_step[s] for s in sorted(by_step)]

    def losses(self) -> list[tuple[int, int, str, float]]:
        """(rank, step, key, value) of every logged loss (`loss`, `train_loss`, ... any key ending in loss)."""
        out = []
        for rank, recs in self.ranks.items():
            for x in recs:
                if x.get("event") != "log":
                    continue
                step = x.get("step")
                step = step if isinstance(step, int) and not isinstance(step, bool) else -1
                for key, value in x.items():
                    if key.endswith("loss") and isinstance(value, (int, float)) and not isinstance(value, bool):
                        out.append((rank, step, key, float(value)))
        return out


@dataclass(frozen=True)
class StepTimes:
    """The timed optimizer steps of a run (after the warm-up) and their noise."""

    seconds: tuple[float, ...]
    warmup: int

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def spread_pct(self) -> float | None:
        """The largest deviation of a timed step from their median, in % of the median: the run's own noise."""
        med = self.median
        if not med or len(self.seconds) < 2:
            return None
        return max(abs(t - med) for t in self.seconds) / med * 100.0

    def to_json(self) -> dict:
        return {"timed_step_seconds": list(self.seconds), "warmup_steps": self.warmup,
                "min": min(self.seconds) if self.seconds else None,
                "max": max(self.seconds) if self.seconds else None, "median": self.median,
                "spread_pct": None if self.spread_pct is None else round(self.spread_pct, 2)}


def step_times(metrics: Metrics, warmup: int) -> StepTimes:
    return StepTimes(tuple(metrics.step_seconds()[warmup:]), warmup)


def read_metrics(folder: str | Path) -> Metrics:
    from advisor.core import safeio

    metrics = Metrics()
    for path in sorted(Path(folder).glob("rank*.jsonl")):
        m = re.fullmatch(r"rank(\d{1,6})\.jsonl", path.name)
        if not m:
            continue
        try:
            data = safeio.read_bytes(path, max_bytes=MAX_METRICS_BYTES, what="metrics file")
        except safeio.UnsafeInputError:  # a named pipe or a device in metrics/: nothing this run wrote
            metrics.bad_lines += 1
            continue
        records = []
        for line in data.decode("utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            try:  # json.dumps writes NaN/Infinity for a diverged loss: they are read back (allow_nan)
                record = safeio.load_json(line, where=path.name, allow_nan=True)
            except safeio.UnsafeInputError:
                metrics.bad_lines += 1  # a rank killed mid-write leaves half a line
                continue
            if isinstance(record, dict):
                records.append(record)
        metrics.ranks[int(m.group(1))] = records
    return metrics


# -------------------------------------------------------------------------------------------------- log reading

_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Interrupt|Exit)\b(?::|$)")
_RANK_PREFIX = re.compile(r"^\s*(?:\[rank\d+\]:|\[default\d+\]:|rank\d+:)\s*")
_WRAPPERS = ("CalledProcessError", "ChildFailedError", "torch.distributed.elastic", "SignalException")
"""Lines the launchers add after the real error (accelerate's `subprocess.CalledProcessError: Command ... returned
non-zero exit status 1`, torchrun's ChildFailedError): they name the launcher, not the cause."""
_FRAME = re.compile(r"^(File \"|Traceback \(|raise |\^|~|During handling|The above exception)")
"""Traceback lines: where an error passed through, not what it was."""
_OOM = ("CUDA out of memory", "OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED")


def last_error_line(lines: Sequence[str]) -> str | None:
    """The last line that names an exception (`ValueError: ...`), launcher wrappers skipped; else the last line
    that mentions an error; else the last non-empty line."""
    cleaned = [_RANK_PREFIX.sub("", ln).strip() for ln in lines]
    cleaned = [ln for ln in cleaned if ln]
    for ln in reversed(cleaned):
        if _ERROR_LINE.match(ln) and not any(w in ln for w in _WRAPPERS):
            return _clip(ln)
    own = [ln for ln in cleaned if not any(w in ln for w in _WRAPPERS) and not _FRAME.match(ln)]
    for ln in reversed(own):
        if re.search(r"error|failed|killed", ln, re.IGNORECASE):
            return _clip(ln)
    if own:
        return _clip(own[-1])
    return _clip(cleaned[-1]) if cleaned else None


def _clip(text: str, n: int = 240) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _tail(path: Path, n: int = LOG_TAIL_LINES) -> list[str]:
    from advisor.core import safeio

    try:
        return safeio.read_tail(path, max_bytes=MAX_LOG_TAIL_BYTES, what="log").splitlines()[-n:]
    except safeio.UnsafeInputError:
        return []


_SIZE = r"([0-9]+(?:\.[0-9]+)?)\s*(GiB|MiB|KiB|B)\b"
_UNIT = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10, "B": 1}


def _bytes(match: re.Match | None) -> int | None:
    return int(float(match.group(1)) * _UNIT[match.group(2)]) if match else None


def oom_demand(lines: Sequence[str]) -> dict | None:
    """What torch's out-of-memory message says (c10/cuda/CUDACachingAllocator.cpp): the failed request, what
    PyTorch had allocated, and the GPU's capacity. `at_least_bytes` (allocated + requested) is a lower bound of the
    run's demand: the peak it needed was at least that. None when the log holds no such message."""
    for line in reversed(lines):
        if "out of memory" not in line.lower() or "Tried to allocate" not in line:
            continue
        tried = _bytes(re.search(r"Tried to allocate " + _SIZE, line))
        allocated = _bytes(re.search(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch", line))
        total = _bytes(re.search(r"total capacity of " + _SIZE, line))
        gpu = re.search(r"GPU (\d+) has a total capacity", line)
        return {"requested_bytes": tried, "allocated_bytes": allocated, "capacity_bytes": total,
                "gpu": int(gpu.group(1)) if gpu else None,
                "at_least_bytes": (allocated or 0) + (tried or 0) if (allocated or tried) else None}
    return None
