"""What verify reports: each step's verdict (pass, fail, skip) with a one-line detail, a fix and any warnings, and
the whole outcome as text, as markdown and as the `verify --json` object of CONTRACT.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.verify.limits import (
    GIB,
    MEMORY_TOLERANCE_FLOOR_BYTES,
    MEMORY_TOLERANCE_PCT,
    SPEED_SPREAD_CAP_PCT,
    SPEED_TOLERANCE_PCT,
    WARMUP_MICRO_BATCHES,
)

LOG_NAME = "verify.log"
LOG_TAIL_LINES = 200
REPORT_JSON = "verify-report.json"
REPORT_MD = "verify-report.md"

PASS, FAIL, SKIP = "pass", "fail", "skip"
SYMBOL = {PASS: "✓", FAIL: "✗", SKIP: "⊘"}

STEP_TITLES = {
    "bundle": "Bundle files",
    "consistency": "Files agree",
    "hardware": "Hardware",
    "packages": "Package versions",
    "rules": "Rules",
    "preflight": "Pre-flight",
    "run": "Short run",
    "memory": "Memory",
    "speed": "Speed",
    "loss": "Loss",
}


@dataclass
class StepResult:
    name: str
    status: str
    detail: str
    hint: str | None = None
    warnings: list[str] = field(default_factory=list)
    """What passed but deserves a look (a package version inside the working range but not the pin): the step
    still passes."""

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail, "hint": self.hint,
                "warnings": list(self.warnings)}


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
    planned: dict = field(default_factory=dict)
    """plan.json's predictions, made when the bundle was planned (for the plan then, not the files now)."""
    plan: dict | None = None
    """The plan the files describe, which is what ran and what `predicted` is the estimate of."""
    differences: list[dict] = field(default_factory=list)
    """Where the files differ from plan.json (advisor.bundle.readback.Difference.to_dict)."""
    quick: dict | None = None
    """Quick mode: the accumulation run, the scale back to the plan and its derivation."""
    next_plan: dict | None = None
    """After an out-of-memory run: the plan the advisor would choose now, and the generate line."""
    interrupted: bool = False
    dry_run: bool = False
    environment: dict = field(default_factory=dict)
    """Variables verify sets for the run, on top of the inherited environment."""
    cwd: str | None = None
    """Where the command runs (the bundle, or quick mode's working copy)."""
    speed_tolerance_pct: float | None = None
    speed_spread_cap_pct: float | None = None
    """The cap on how far the run's own spread widened the speed band (advisor.verify.steps.spread_cap)."""
    reports: list[str] = field(default_factory=list)
    gpu: dict = field(default_factory=dict)
    """The GPUs verify ran on (checks.Machine.to_json): count, name, catalogue id, memory, the enforced power limit and
    the part's board power, so a run's speed can be read against the GPU it had."""
    host: dict = field(default_factory=dict)
    """This host's measured dispatch speed (session._for_host): op_seconds (None: not measured), detail,
    reference_op_seconds (the calibration hosts' median), factor (advisor.model.speed.host_factor) and the files'
    step_seconds and tokens_per_second estimated for this host, next to `predicted` (the median host's)."""

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
    def warnings(self) -> list[str]:
        return [w for s in self.steps for w in s.warnings]

    @property
    def passed(self) -> bool:
        """No failed step, and the run happened (a verify that ran nothing verified nothing)."""
        return not self.failed and self.ran and not self.interrupted

    def summary(self) -> str:
        failed = len(self.failed)
        skipped = sum(1 for s in self.steps if s.status == SKIP)
        total = len(self.steps)
        warned = len(self.warnings)
        warn = f", {warned} warning(s)" if warned else ""
        if self.dry_run:
            return f"Dry run: nothing was started. {total - failed - skipped} of {total} checks passed{warn}."
        if self.interrupted:
            return f"Interrupted (Ctrl-C): the run was stopped and every process it started ended{warn}."
        if not self.ran:
            run = self.step("run")
            reason = run.detail if run is not None else "the bundle could not be read"
            text = f"Nothing was run ({reason}): verify did not pass."
            if failed:
                text += f" {failed} of {total} checks failed."
            return text
        if failed:
            more = f", {skipped} skipped" if skipped else ""
            return f"{failed} of {total} checks failed{more}{warn}. See the hints above."
        if skipped:
            return f"{total - skipped} of {total} checks passed, {skipped} skipped{warn}."
        return f"All {total} checks passed{warn}."

    def to_json(self) -> dict:
        return {
            "passed": self.passed,
            "bundle": self.bundle,
            "summary": self.summary(),
            "steps": [s.to_json() for s in self.steps],
            "measured": self.measured,
            "predicted": self.predicted,
            "error_pct": self.error_pct,
            "planned": self.planned,
            "plan": self.plan,
            "differences": self.differences,
            "quick": self.quick,
            "next_plan": self.next_plan,
            "host": self.host,
            "gpu": self.gpu,
            "tolerance": {"per_gpu_peak_pct": MEMORY_TOLERANCE_PCT,
                          "per_gpu_peak_floor_bytes": MEMORY_TOLERANCE_FLOOR_BYTES,
                          "tokens_per_second_pct": self.speed_tolerance_pct or SPEED_TOLERANCE_PCT,
                          "tokens_per_second_base_pct": SPEED_TOLERANCE_PCT,
                          "tokens_per_second_spread_cap_pct": self.speed_spread_cap_pct or SPEED_SPREAD_CAP_PCT,
                          "warmup_micro_batches": WARMUP_MICRO_BATCHES,
                          "warmup_steps": self.measured.get("warmup_steps")},
            "command": self.command,
            "cwd": self.cwd,
            "environment": self.environment,
            "log": self.log,
            "interrupted": self.interrupted,
            "dry_run": self.dry_run,
            "reports": self.reports,
        }

    def render(self) -> str:
        """The ✓ ✗ ⊘ listing, one line per step (hints and warnings indented below), then the summary line."""
        total = len(self.steps)
        width = max(len(t) for t in STEP_TITLES.values()) + 4
        lines = []
        # the counter padded to the total's width ("[ 9/10]" over "[10/10]"): the titles, symbols and the hints
        # indented below them start in one column whatever the step's number
        digits = len(str(total))
        for i, s in enumerate(self.steps, 1):
            prefix = f"[{i:>{digits}}/{total}] "
            title = STEP_TITLES.get(s.name, s.name)
            lines.append(f"{prefix}{(title + ' ').ljust(width, '.')} {SYMBOL[s.status]} {s.detail}")
            pad = " " * (len(prefix) + width + 3)
            for w in s.warnings:
                lines.append(pad + f"warning: {w}")
            if s.hint:
                lines.append(pad + f"hint: {s.hint}")
        if self.next_plan:
            lines.append(f"next plan: {self.next_plan.get('summary', '')}")
            if self.next_plan.get("command"):
                lines.append(f"  {self.next_plan['command']}")
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
