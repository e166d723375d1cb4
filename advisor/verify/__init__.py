"""`trl-advisor verify`: run a bundle briefly on the GPUs here and compare what it measures with the estimate.

limits (the numbers and why) · folder (reading the bundle) · runner (launch.sh in its own process group) ·
metrics (what a run leaves behind) · steps (each check) · outcome (verdicts, text and JSON) · session (the order)."""

from advisor.verify.limits import DEFAULT_STEPS
from advisor.verify.metrics import last_error_line, read_metrics
from advisor.verify.outcome import SYMBOL, StepResult, VerifyOutcome
from advisor.verify.runner import RunResult, run_command
from advisor.verify.session import verify

__all__ = ["DEFAULT_STEPS", "SYMBOL", "RunResult", "StepResult", "VerifyOutcome", "last_error_line", "read_metrics",
           "run_command", "verify"]
