"""`trl-advisor verify`: run a bundle briefly on the GPUs here and compare what it measures with the estimate of the
bundle as it is on disk.

limits (the numbers and why) · folder (reading the bundle back) · checks (before the run) · packages (version
tiers) · preflight (disk, GPU memory, host) · quick (fewer micro-batches per step, scaled back) · runner (launch.sh
in its own process group) · progress (the live status) · metrics (what a run leaves behind) · steps (judging the
run) · replan (after running out of memory) · outcome (verdicts, text and JSON) · report (the files in the bundle)
· session (the order)."""

from advisor.verify.limits import DEFAULT_STEPS
from advisor.verify.metrics import last_error_line, read_metrics
from advisor.verify.outcome import SYMBOL, StepResult, VerifyOutcome
from advisor.verify.runner import RunResult, run_command
from advisor.verify.session import verify

__all__ = ["DEFAULT_STEPS", "SYMBOL", "RunResult", "StepResult", "VerifyOutcome", "last_error_line", "read_metrics",
           "run_command", "verify"]
