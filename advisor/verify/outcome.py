"""What verify reports: each step's verdict (pass, fail, skip) with a one-line detail and a fix, and the whole
outcome as text and as the `verify --json` object of CONTRACT.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.verify.limits import (
    GIB,
    MEMORY_TOLERANCE_FLOOR_BYTES,
    MEMORY_TOLERANCE_PCT,
    SPEED_TOLERANCE_PCT,
    WARMUP_STEPS,
)

LOG_NAME = "verify.log"
LOG_TAIL_LINES = 200

PASS, FAIL, SKIP = "pass", "fail", "skip"
SYMBOL = {PASS: "✓", FAIL: "✗", SKIP: "⊘"}

STEP_TITLES = {
    "bundle": "Bundle files",
    "consistency": "Files agree",
    "hardware": "Hardware",
    "packages": "Package versions",
    "rules": "Rules",
    "run": "Short run",
    "memory": "Memory",
    "speed": "Speed",
    "loss": "Loss",
}

# ------------------------------------------------------------------------------------------------------ results

@dataclass
class StepResult:
    name: str
    status: str
    detail: str
    hint: str | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail, "hint": self.hint}


@dataclass
class VerifyOutcome:
    """What `verify` found: the ordered steps, the measurements and the predictions they were compared with."""

    bundle: str
    steps: list[StepResult] = field(default_factory=list)
    measured: dict = field(default_factory=dict)
    predicted: dict = field(default_factory=dict)
    error_pct: dict = field(default_factory=dict)
    command: list[str] | None = None
    log: str | None = None

    def step(self, name: str) -> StepResult | None:
        return next((s for s in self.steps if s.name == name), None)

    @property
    def ran(self) -> bool:
        run = self.step("run")
        return run is not None and run.status != SKIP

    @property
    def failed(self) -> list[StepResult]:
        return [s for s in self.steps if s.status == FAIL]

    @property
    def passed(self) -> bool:
        """No failed step, and the run happened (a verify that ran nothing verified nothing)."""
        return not self.failed and self.ran

    def summary(self) -> str:
        failed = len(self.failed)
        skipped = sum(1 for s in self.steps if s.status == SKIP)
        total = len(self.steps)
        if not self.ran:
            run = self.step("run")
            reason = run.detail if run is not None else "the bundle could not be read"
            text = f"Nothing was run ({reason}): verify did not pass."
            if failed:
                text += f" {failed} of {total} checks failed."
            return text
        if failed:
            more = f", {skipped} skipped" if skipped else ""
            return f"{failed} of {total} checks failed{more}. See the hints above."
        if skipped:
            return f"{total - skipped} of {total} checks passed, {skipped} skipped."
        return f"All {total} checks passed."

    def to_json(self) -> dict:
        return {
            "passed": self.passed,
            "bundle": self.bundle,
            "summary": self.summary(),
            "steps": [s.to_json() for s in self.steps],
            "measured": self.measured,
            "predicted": self.predicted,
            "error_pct": self.error_pct,
            "tolerance": {"per_gpu_peak_pct": MEMORY_TOLERANCE_PCT,
                          "per_gpu_peak_floor_bytes": MEMORY_TOLERANCE_FLOOR_BYTES,
                          "tokens_per_second_pct": SPEED_TOLERANCE_PCT, "warmup_steps": WARMUP_STEPS},
            "command": self.command,
            "log": self.log,
        }

    def render(self) -> str:
        """The ✓ ✗ ⊘ listing, one line per step (hints indented below), then the summary line."""
        total = len(self.steps)
        width = max(len(t) for t in STEP_TITLES.values()) + 4
        lines = []
        for i, s in enumerate(self.steps, 1):
            prefix = f"[{i}/{total}] "
            title = STEP_TITLES.get(s.name, s.name)
            lines.append(f"{prefix}{(title + ' ').ljust(width, '.')} {SYMBOL[s.status]} {s.detail}")
            if s.hint:
                lines.append(" " * (len(prefix) + width + 3) + f"hint: {s.hint}")
        lines.append(self.summary())
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------ helpers

def _gib(n: float | int | None) -> str:
    return "?" if n is None else f"{n / GIB:.1f} GiB"


def _pct(measured: float, predicted: float) -> float:
    return round((measured - predicted) / predicted * 100.0, 1)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
