"""`verify(bundle_dir)`: the nine steps in order, keeping going after a failure wherever the later steps still mean
something (see advisor.verify.steps for each step and its tolerance)."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from advisor.core.errors import AdvisorError
from advisor.core.plan import Plan
from advisor.verify.folder import _load_bundle, _predictions
from advisor.verify.limits import DEFAULT_STEPS, DEFAULT_TIMEOUT_SECONDS, WARMUP_STEPS
from advisor.verify.metrics import Metrics, _tail, read_metrics
from advisor.verify.outcome import FAIL, LOG_NAME, SKIP, StepResult, VerifyOutcome, _minutes, _num, _pct
from advisor.verify.runner import Runner, RunResult, _stream, run_command
from advisor.verify.steps import (
    _clear_metrics,
    _log_problem,
    _machine,
    _run_blocker,
    _step_bundle,
    _step_consistency,
    _step_hardware,
    _step_loss,
    _step_memory,
    _step_packages,
    _step_rules,
    _step_run,
    _step_speed,
)

# ------------------------------------------------------------------------------------------------------ verify

def _default_probe(bundle_dir: Path):
    import hw_probe

    return hw_probe.probe(output_dir=str(bundle_dir))


def verify(bundle_dir: str | os.PathLike[str], *, steps: int = DEFAULT_STEPS, random_init: bool = False,
           synthetic_data: bool = False, runner: Runner | None = None, probe: Callable[[], Any] | None = None,
           timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS, extra_args: Sequence[str] = (),
           progress: IO[str] | None | str = "stderr") -> VerifyOutcome:
    """Check a bundle and run it briefly here; see the module docstring for the steps and tolerances.

    bundle_dir: the folder `trl-advisor generate --out` wrote. A missing folder or plan.json raises
        advisor.core.errors.InputFileError (a usage error, exit 2), not a failed verify.
    steps: optimizer steps of the short run (`launch.sh --max-steps`).
    random_init / synthetic_data: passed to launch.sh (random weights from model_config.json; generated tokens and
        a local tokenizer): together they run offline.
    runner: runs the command (default run_command); tests pass a fake that writes metrics files.
    probe: returns this machine's hw_probe.HardwareReport (default hw_probe.probe).
    timeout_seconds: wall-clock limit of the run (default 20 minutes).
    extra_args: more train.py options after the others. With `--cpu` among them the run happens without a GPU
        (a smoke test of the bundle: memory and speed are then skipped, and hardware still fails).
    progress: where the run's output is echoed while it runs ("stderr": sys.stderr at call time; None: quiet).
    """
    progress = _stream(progress)
    if steps < 1:
        raise AdvisorError(f"--steps must be at least 1, got {steps}", hint="for example --steps 10")
    b = _load_bundle(bundle_dir)
    out = VerifyOutcome(bundle=str(b.path))
    out.predicted = _predictions(b.doc)
    cpu = "--cpu" in extra_args

    bundle_step = _step_bundle(b)
    out.steps.append(bundle_step)
    out.steps.append(_step_consistency(b))
    report = (probe or (lambda: _default_probe(b.path)))()
    machine = _machine(report)
    hardware_step = _step_hardware(b, machine)
    out.steps.append(hardware_step)
    out.steps.append(_step_packages(b, report, cpu=cpu))
    out.steps.append(_step_rules(b))

    command = ["bash", "launch.sh", "--max-steps", str(steps)]
    if random_init:
        command.append("--random-init")
    if synthetic_data:
        command.append("--synthetic-data")
    command += list(extra_args)
    out.command = command

    metrics: Metrics | None = None
    log_lines: list[str] = []
    blocker = _run_blocker(b, machine, bundle_step, cpu=cpu)
    log_problem = None if blocker else _log_problem(b.path / LOG_NAME)
    if blocker:
        run_step = StepResult("run", SKIP, blocker)
    elif log_problem:
        run_step = StepResult("run", FAIL, log_problem, f"remove {b.path / LOG_NAME}: verify writes its log there")
    else:
        log = b.path / LOG_NAME
        out.log = str(log)
        metrics_dir = b.path / "metrics"
        _clear_metrics(metrics_dir)
        if progress is not None:
            progress.write(f"verify: {' '.join(command)} in {b.path} (log: {log}, timeout "
                           f"{_minutes(timeout_seconds)})\n")
            progress.flush()
        try:
            raw = (runner or run_command)(command, cwd=b.path, log_path=log, timeout_seconds=timeout_seconds,
                                          **({} if runner else {"progress": progress}))
        except OSError as exc:  # bash missing, folder not executable
            raw = RunResult(returncode=127)
            log.write_text(f"verify: could not start {' '.join(command)}: {exc}\n", encoding="utf-8")
        result = raw if isinstance(raw, RunResult) else RunResult(returncode=int(raw))
        metrics = read_metrics(metrics_dir)
        log_lines = _tail(log)
        run_step = _step_run(result, metrics, log, steps)
    out.steps.append(run_step)

    _measure(out, metrics, b.plan)
    plan = b.plan
    real_unpacked = not synthetic_data and not (plan.packing if plan else False)
    out.steps.append(_step_memory(out, metrics, run_step, log_lines, real_data_unpacked=real_unpacked))
    out.steps.append(_step_speed(out, metrics, run_step, hardware_step, plan, b.plan_error,
                                 real_data_unpacked=real_unpacked))
    loss_step, finite = _step_loss(metrics, run_step)
    out.steps.append(loss_step)
    out.measured["loss_finite"] = finite
    return out


def _measure(out: VerifyOutcome, metrics: Metrics | None, plan: Plan | None) -> None:
    """Fill measured and error_pct from the metrics (None where nothing was measured)."""
    measured: dict[str, Any] = {"per_gpu_peak_bytes": None, "per_gpu_reserved_bytes": None,
                                "tokens_per_second": None, "step_seconds_median": None, "loss_finite": None,
                                "ranks": 0, "steps": 0, "device": None, "host_peak_rss_bytes": None}
    if metrics is not None and metrics.ranks:
        gpu = not metrics.on_cpu
        measured["ranks"] = len(metrics.ranks)
        measured["steps"] = metrics.step_count
        measured["device"] = "cpu" if metrics.on_cpu else "cuda"
        measured["per_gpu_peak_bytes"] = metrics.peak("peak_allocated_bytes") if gpu else None
        measured["per_gpu_reserved_bytes"] = metrics.peak("peak_reserved_bytes") if gpu else None
        measured["host_peak_rss_bytes"] = metrics.peak("host_peak_rss_bytes")
        times = metrics.step_seconds()[WARMUP_STEPS:]
        if times:
            median = statistics.median(times)
            measured["step_seconds_median"] = median
            if plan is not None and median > 0 and gpu:  # a CPU run's rate says nothing about the plan's GPUs
                measured["tokens_per_second"] = plan.tokens_per_step / median
    out.measured = measured
    errors: dict[str, float | None] = {"per_gpu_peak_bytes": None, "tokens_per_second": None}
    for key in errors:
        m, p = _num(measured.get(key)), _num(out.predicted.get(key))
        if m and p:
            errors[key] = _pct(m, p)
    out.error_pct = errors
