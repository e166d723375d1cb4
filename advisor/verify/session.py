"""`verify(bundle_dir)`: the steps in order, keeping going after a failure wherever the later steps still mean
something.

  1 bundle       the folder has plan.json, train.py, launch.sh, accelerate.yaml (+ ds_config.json for DeepSpeed)
  2 consistency  the files agree with each other (edits since plan.json are warnings)
  3 hardware     this machine's GPUs against the plan's: model, memory per GPU, count, nodes
  4 packages     installed versions against requirements.txt, in tiers (advisor.verify.packages)
  5 rules        every rule on the plan the files describe (`check --bundle`): an error finding fails
  6 preflight    free disk, GPU memory other processes hold, host RAM and ulimit -l (advisor.verify.preflight)
  7 run          `bash launch.sh --max-steps N [--random-init] [--synthetic-data]`, output in verify.log; quick
                 mode (the default) runs it with fewer micro-batches per step (advisor.verify.quick)
  8 memory       measured peak allocated per GPU (max over ranks) against the estimate of the files
  9 speed        measured tokens/s (quick mode: scaled back to the plan) against the estimate of the files
 10 loss         every logged loss is finite

`passed` is true when no step failed **and the run happened**: verify exists to run the bundle, so a verify whose
run was skipped (no GPU here, too few GPUs, a multi-node bundle, a failed pre-flight) reports passed=false. Ctrl-C
stops the run and every process it started, and the reports are still written (verify-report.json and
verify-report.md in the bundle)."""

from __future__ import annotations

import os
import shlex
import signal
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from advisor.core.errors import AdvisorError
from advisor.core.plan import Plan
from advisor.model.calibration import UNSLOTH_UPPER_BOUND
from advisor.verify import quick
from advisor.verify.checks import (
    machine,
    run_blocker,
    step_bundle,
    step_consistency,
    step_hardware,
    step_packages,
    step_rules,
)
from advisor.verify.folder import _Bundle, _estimate_predictions, _load_bundle, _predictions
from advisor.verify.limits import (
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT_SECONDS,
    MEMORY_TOLERANCE_FLOOR_BYTES,
    MEMORY_TOLERANCE_PCT,
    QUICK_TIMED_STEPS,
    SPEED_TOLERANCE_PCT,
    warmup_steps,
)
from advisor.verify.metrics import Metrics, StepTimes, _tail, oom_demand, read_metrics, step_times
from advisor.verify.onpolicy import as_average, drawn_counts
from advisor.verify.outcome import FAIL, LOG_NAME, SKIP, StepResult, VerifyOutcome, _gib, _minutes, _num, _pct
from advisor.verify.runner import Runner, RunResult, _stream, run_command
from advisor.verify.steps import clear_metrics, log_problem, oom_in, step_loss, step_memory, step_run, step_speed

RUN_ENVIRONMENT = {"PYTHONUNBUFFERED": "1", "STOP_TIMEOUT": "25"}
"""What verify adds to the inherited environment: the log shows each line as the training prints it; launch.sh
escalates to SIGKILL of its own children (the vLLM server and the training run in sessions of their own, which the
runner's signal to launch.sh's group does not reach) 25 s after SIGTERM, within the runner's 30 s grace."""


def _default_probe(bundle_dir: Path):
    import hw_probe

    return hw_probe.probe(output_dir=str(bundle_dir))


@contextmanager
def _signals_stop_the_run():
    """SIGTERM and SIGHUP (a scheduler's time limit, a closed terminal) stop the run as Ctrl-C does, so that the
    children are stopped and the reports written, instead of verify dying with the training left running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = {}
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None:
            old[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


MAX_VERIFY_STEPS = 10_000
"""verify measures a short run: thousands of steps are a training run (launch.sh), not a check."""
MAX_VERIFY_TIMEOUT_SECONDS = 7 * 24 * 3600
"""A week: past it a limit is no limit."""


def verify(bundle_dir: str | os.PathLike[str], *, steps: int | None = None, random_init: bool = False,
           synthetic_data: bool = False, runner: Runner | None = None, probe: Callable[[], Any] | None = None,
           timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS, extra_args: Sequence[str] = (),
           progress: IO[str] | None | str = "stderr", full_steps: bool = False, dry_run: bool = False,
           write_report: bool = True, trl_requires: Sequence[str] | None = None,
           decide: Callable | None = None, free_bytes: Callable[[Path], int] | None = None,
           host_speed: Callable[[], Any] | None = None) -> VerifyOutcome:
    """Check a bundle and run it briefly here; see the module docstring for the steps.

    bundle_dir: the folder `trl-advisor generate --out` wrote. A missing folder or plan.json raises
        advisor.core.errors.InputFileError (a usage error, exit 2), not a failed verify.
    steps: optimizer steps of the short run (`launch.sh --max-steps`); default: warm-up + 4 timed steps in quick
        mode, 10 with full_steps.
    random_init / synthetic_data: passed to launch.sh (random weights from model_config.json; generated tokens and
        a local tokenizer): together they run offline.
    full_steps: run the plan's own gradient accumulation (no quick mode).
    dry_run: make every check that starts nothing and say what would run; write nothing.
    runner: runs the command (default run_command); tests pass a fake that writes metrics files.
    probe: returns this machine's hw_probe.HardwareReport (default hw_probe.probe).
    timeout_seconds: wall-clock limit of the run (default 20 minutes).
    extra_args: more train.py options after the others. With `--cpu` among them the run happens without a GPU
        (a smoke test of the bundle: memory and speed are then skipped, and hardware still fails).
    progress: where the run's output and status are echoed ("stderr": sys.stderr at call time; None: quiet).
    write_report: write verify-report.json and verify-report.md into the bundle.
    trl_requires / decide / free_bytes: the installed TRL's requirement lines, the planner and the free-disk
        reading (tests pass their own; defaults read this machine).
    host_speed: returns advisor.verify.hostspeed.HostSpeed, this host's measured dispatch speed, reported with the
        files' estimate for it (default: hostspeed.measure when the run is this machine's own, i.e. no `runner` is
        given; not measured for a dry run or a --cpu run).
    """
    progress = _stream(progress)
    if steps is not None and steps < 1:
        raise AdvisorError(f"--steps must be at least 1, got {steps}", hint="for example --steps 10")
    if steps is not None and steps > MAX_VERIFY_STEPS:
        raise AdvisorError(f"--steps {steps:,} is not a short run (verify runs at most {MAX_VERIFY_STEPS:,} steps)",
                           hint="for a real run: bash launch.sh --max-steps N")
    if not 1 <= timeout_seconds <= MAX_VERIFY_TIMEOUT_SECONDS:
        raise AdvisorError(f"--timeout must be between 1 and {MAX_VERIFY_TIMEOUT_SECONDS} seconds, got "
                           f"{timeout_seconds:g}", hint="for example --timeout 1200 (the default)")
    b = _load_bundle(bundle_dir)
    out = VerifyOutcome(bundle=str(b.path), dry_run=dry_run)
    out.planned = _predictions(b.doc)
    cpu = "--cpu" in extra_args
    estimate = _estimate_predictions(b, random_init=random_init)
    out.predicted = estimate or {**out.planned, "source": "plan.json (the files could not be estimated)"}
    out.plan = b.plan.to_dict() if b.plan is not None else None
    out.differences = [d.to_dict() for d in b.reading.vs_plan_json] if b.reading is not None else []

    bundle_step = step_bundle(b)
    out.steps.append(bundle_step)
    out.steps.append(step_consistency(b))
    report = (probe or (lambda: _default_probe(b.path)))()
    here = machine(report)
    out.gpu = here.to_json()
    hardware_step = step_hardware(b, here)
    out.steps.append(hardware_step)
    out.steps.append(step_packages(b, report, cpu=cpu, trl_requires=trl_requires))
    out.steps.append(step_rules(b))

    choice = _choose(b, full_steps=full_steps, steps=steps)
    preflight_step = _preflight(b, report, random_init=random_init, cpu=cpu, free_bytes=free_bytes)
    out.steps.append(preflight_step)

    command = ["bash", "launch.sh", "--max-steps", str(choice.steps)]
    if "--no-save" in b.files.get("train.py", ""):
        # a measuring run keeps no model (bundles before --no-save saved nothing after --max-steps anyway)
        command.append("--no-save")
    if random_init:
        command.append("--random-init")
    if synthetic_data:
        command.append("--synthetic-data")
    command += list(extra_args)
    metrics_dir = b.path / "metrics"
    if choice.quick:
        # the working copy's own folder is temporary: metrics and the random-init checkpoint stay in the bundle
        command += ["--metrics-dir", str(metrics_dir), "--random-init-dir", str(b.path / "random-init")]
    out.command = command
    out.environment = dict(RUN_ENVIRONMENT)
    out.quick = choice.to_json()
    out.measured = _empty_measured(choice.warmup)

    blocker = run_blocker(b, here, bundle_step, cpu=cpu)
    if blocker is None and preflight_step.status == FAIL:
        blocker = f"pre-flight failed: {preflight_step.detail}"
    out.host = _for_host(b, _host_speed(host_speed, dry_run=dry_run, cpu=cpu, own_run=runner is None,
                                        blocker=blocker))
    if dry_run:
        return _dry_run(out, b, choice, blocker, progress)

    log = b.path / LOG_NAME
    problem = None if blocker else log_problem(log)
    metrics: Metrics | None = None
    log_lines: list[str] = []
    if blocker:
        run_step = StepResult("run", SKIP, blocker)
    elif problem:
        run_step = StepResult("run", FAIL, problem, f"remove {log}: verify writes its log there")
    else:
        run_step, metrics, log_lines = _run(out, b, choice, command, log, runner=runner, progress=progress,
                                            timeout_seconds=timeout_seconds)
    out.steps.append(run_step)

    _measure(out, metrics, b.plan, choice, ctx=b.ctx)
    oom_text = None
    if run_step.status == FAIL and oom_in(log_lines):
        oom_text = _out_of_memory(out, b, metrics, log_lines, decide=decide)
    real_unpacked = not synthetic_data and not (b.plan.packing if b.plan else False)
    bound = UNSLOTH_UPPER_BOUND if b.plan is not None and b.plan.unsloth else None
    out.steps.append(step_memory(out, metrics, run_step, log_lines, real_data_unpacked=real_unpacked,
                                 oom_text=oom_text, upper_bound=bound))
    out.steps.append(step_speed(out, metrics, run_step, hardware_step, b.plan is not None, b.plan_error,
                                real_data_unpacked=real_unpacked, warmup=choice.warmup, upper_bound=bound))
    loss_step, finite = step_loss(metrics, run_step)
    out.steps.append(loss_step)
    out.measured["loss_finite"] = finite
    if write_report:
        from advisor.verify.report import write_reports

        out.reports = write_reports(out, b.path)
    return out


def _host_speed(host_speed: Callable[[], Any] | None, *, dry_run: bool, cpu: bool, own_run: bool,
                blocker: str | None):
    """This host's dispatch speed, measured only where the run is about to start on this machine's GPUs."""
    from advisor.verify.hostspeed import HostSpeed, measure

    if dry_run:
        return HostSpeed(None, "not measured: a dry run starts nothing")
    if cpu:
        return HostSpeed(None, "not measured: a --cpu run")
    if blocker:
        return HostSpeed(None, "not measured: nothing runs")
    if host_speed is not None:
        return host_speed()
    if not own_run:
        return HostSpeed(None, "not measured: the run is not this machine's own (a runner was given)")
    return measure()


def _for_host(b: _Bundle, host) -> dict:
    """What verify reports under "host": this host's measured dispatch speed and the files' speed estimate for it
    (Target.host_op_seconds, advisor.model.speed.host_factor). Reported next to the prediction, not put in its place:
    over the calibration's probed records it lowers the median error of the host-bound ones (14.5 -> 12.5 %) but
    not in every round of measurements (docs/accuracy.md, step time measured more than once), so a run is still
    judged against the median host's estimate, the one the speed band was set for; a plan predicted mostly host-bound
    also passes inside the band around this estimate (advisor.verify.steps.within_host_estimate)."""
    from advisor.model.speed import REFERENCE_HOST_OP_SECONDS, estimate_speed, host_factor

    doc = {**host.to_json(), "reference_op_seconds": REFERENCE_HOST_OP_SECONDS, "factor": None}
    if host.op_seconds is None or b.ctx is None or b.ctx.speed is None:
        return doc
    target = b.ctx.target.with_(host_op_seconds=host.op_seconds)
    try:
        speed = estimate_speed(b.ctx.model, b.ctx.plan, target, b.ctx.memory)
    except Exception:  # noqa: BLE001 - a plan the model cannot re-estimate: the op time alone is reported
        return doc
    return {**doc, "factor": round(host_factor(target), 4), "step_seconds": float(speed.step_seconds),
            "tokens_per_second": float(speed.tokens_per_second)}


def _choose(b: _Bundle, *, full_steps: bool, steps: int | None) -> quick.QuickChoice:
    """Quick mode's accumulation and steps, or the plan's own where train.py cannot take another one."""
    if b.plan is None:
        n = steps or DEFAULT_STEPS
        return quick.QuickChoice(1, 1, n, warmup_steps(1), None, None, None, None, f"no plan read: {b.plan_error}")
    model = b.ctx.model if b.ctx is not None else None
    target = b.ctx.target if b.ctx is not None else None
    choice = quick.choose(model, b.plan, target, full_steps=full_steps, steps=steps)
    if choice.quick:
        try:
            quick.rewrite_train(b.files.get("train.py") or "", choice.grad_accum)
        except (quick.QuickModeError, SyntaxError, ValueError) as exc:
            plain = quick.choose(model, b.plan, target, full_steps=True, steps=steps)
            n = steps or (warmup_steps(plain.grad_accum) + QUICK_TIMED_STEPS)
            return quick.QuickChoice(plain.plan_grad_accum, plain.grad_accum, n, plain.warmup,
                                     plain.predicted_step_seconds, plain.predicted_plan_step_seconds, None, None,
                                     f"no quick mode: {exc}")
    return choice


def _preflight(b: _Bundle, report, *, random_init: bool, cpu: bool, free_bytes) -> StepResult:
    from advisor.verify.preflight import run_preflight

    model = b.ctx.model if b.ctx is not None else None
    plan = b.plan
    return run_preflight(report, bundle=b.path, random_init=random_init, random_init_dir=b.path / "random-init",
                         params=model.params if model is not None else 0,
                         teacher_params=int(getattr(plan, "teacher_params", 0) or 0) if plan else 0,
                         gpus_used=0 if cpu or plan is None else plan.gpus_per_node,
                         memory=b.ctx.memory if b.ctx is not None else None,
                         offload=plan is not None and plan.offload != "none", free_bytes=free_bytes)


def _dry_run(out: VerifyOutcome, b: _Bundle, choice: quick.QuickChoice, blocker: str | None,
             progress: IO[str] | None) -> VerifyOutcome:
    """What a run would do, as the run, memory, speed and loss steps (all skipped): nothing starts or is written."""
    where = str(b.path)
    copy = ""
    if choice.quick:
        where = "a temporary copy of the bundle"
        copy = (f" (quick mode: every file linked, train.py copied with CONFIG grad_accum {choice.plan_grad_accum} "
                f"-> {choice.grad_accum}; {choice.reason})")
    env = " ".join(f"{k}={v}" for k, v in out.environment.items())
    cmd = " ".join(shlex.quote(c) for c in out.command or [])
    detail = f"dry run: would run `{env} {cmd}` in {where}{copy}"
    if blocker:
        detail += f"; but it would not start here: {blocker}"
    out.cwd = where
    out.steps.append(StepResult("run", SKIP, detail))
    peak = _num(out.predicted.get("per_gpu_peak_bytes"))
    if peak:
        tol = max(MEMORY_TOLERANCE_PCT / 100 * peak, MEMORY_TOLERANCE_FLOOR_BYTES)
        out.steps.append(StepResult("memory", SKIP, f"dry run: would compare the peak per GPU (max over ranks) with "
                                    f"{_gib(peak)}, tolerance +-{_gib(tol)}"))
    else:
        out.steps.append(StepResult("memory", SKIP, "dry run: no estimate to compare the peak with"))
    tps = _num(out.predicted.get("tokens_per_second"))
    scaled = (f", the median of {choice.steps - choice.warmup} timed steps scaled x{choice.scale:.3f} to "
              f"grad_accum {choice.plan_grad_accum}" if choice.quick else
              f", the median of {choice.steps - choice.warmup} timed steps")
    out.steps.append(StepResult("speed", SKIP, f"dry run: would compare tokens/s with {tps:,.0f}, tolerance "
                                f"+-{SPEED_TOLERANCE_PCT:.0f} % + the run's spread{scaled} (first {choice.warmup} "
                                "step(s) warm-up)" if tps else "dry run: no estimate of tokens/s"))
    out.steps.append(StepResult("loss", SKIP, "dry run: would check that every logged loss is finite"))
    return out


def _run(out: VerifyOutcome, b: _Bundle, choice: quick.QuickChoice, command: list[str], log: Path, *,
         runner: Runner | None, progress: IO[str] | None, timeout_seconds: float):
    """Launch, wait, read what the run left; (run step, metrics, last log lines)."""
    from advisor.verify.progress import status_reader

    metrics_dir = b.path / "metrics"
    out.log = str(log)
    clear_metrics(metrics_dir)
    work = None
    cwd = b.path
    if choice.quick:
        work = quick.make_working_copy(b.path, b.files["train.py"], b.plan, choice.grad_accum)
        cwd = work
    out.cwd = str(cwd)
    if progress is not None:
        mode = (f"quick mode, grad_accum {choice.grad_accum} of {choice.plan_grad_accum}" if choice.quick else
                f"grad_accum {choice.plan_grad_accum}")
        progress.write(f"verify: {' '.join(command)} in {cwd} ({mode}; log: {log}, timeout "
                       f"{_minutes(timeout_seconds)})\n")
        progress.flush()
    interrupted = False
    start = time.monotonic()
    try:
        with _signals_stop_the_run():
            if runner is None:
                raw = run_command(command, cwd=cwd, log_path=log, timeout_seconds=timeout_seconds, progress=progress,
                                  status=status_reader(metrics_dir, choice.steps, warmup=choice.warmup))
            else:
                raw = runner(command, cwd=cwd, log_path=log, timeout_seconds=timeout_seconds)
    except KeyboardInterrupt:
        interrupted = True
        out.interrupted = True
        raw = RunResult(returncode=-int(signal.SIGINT), seconds=time.monotonic() - start)
    except OSError as exc:  # bash missing, folder not executable
        raw = RunResult(returncode=127)
        log.write_text(f"verify: could not start {' '.join(command)}: {exc}\n", encoding="utf-8")
    finally:
        quick.remove_working_copy(work)
    result = raw if isinstance(raw, RunResult) else RunResult(returncode=int(raw))
    metrics = read_metrics(metrics_dir)
    lines = _tail(log)
    return step_run(result, metrics, log, choice.steps, interrupted=interrupted), metrics, lines


def _empty_measured(warmup: int) -> dict[str, Any]:
    return {"per_gpu_peak_bytes": None, "per_gpu_reserved_bytes": None, "tokens_per_second": None,
            "step_seconds_median": None, "step_seconds": None, "step_seconds_spread_pct": None, "step_times": None,
            "loss_finite": None, "ranks": 0, "steps": 0, "device": None, "host_peak_rss_bytes": None,
            "warmup_steps": warmup, "out_of_memory": False}


def _measure(out: VerifyOutcome, metrics: Metrics | None, plan: Plan | None, choice: quick.QuickChoice, *,
             ctx: Any = None) -> None:
    """Fill measured and error_pct from the metrics (None where nothing was measured). In quick mode the step time
    is scaled back to the plan's accumulation; the run's own figure stays as step_seconds_median. GKD's timed steps
    are first set back to the average share of on-policy micro-batches (advisor.verify.onpolicy)."""
    measured = _empty_measured(choice.warmup)
    if metrics is not None and metrics.ranks:
        gpu = not metrics.on_cpu
        measured["ranks"] = len(metrics.ranks)
        measured["steps"] = metrics.step_count
        measured["device"] = "cpu" if metrics.on_cpu else "cuda"
        measured["per_gpu_peak_bytes"] = metrics.peak("peak_allocated_bytes") if gpu else None
        measured["per_gpu_reserved_bytes"] = metrics.peak("peak_reserved_bytes") if gpu else None
        measured["host_peak_rss_bytes"] = metrics.peak("host_peak_rss_bytes")
        times = step_times(metrics, choice.warmup)
        measured["step_times"] = times.to_json()
        drawn = _on_policy(metrics, plan, choice, ctx, list(times.seconds))
        if drawn is not None:
            measured["on_policy"] = drawn
            times = StepTimes(tuple(drawn["adjusted_step_seconds"]), times.warmup)
        median = times.median
        if median:
            scaled = median * choice.scale
            measured["step_seconds_median"] = median
            measured["step_seconds"] = scaled
            measured["step_seconds_spread_pct"] = None if times.spread_pct is None else round(times.spread_pct, 2)
            if plan is not None and gpu:  # a CPU run's rate says nothing about the plan's GPUs
                measured["tokens_per_second"] = plan.tokens_per_step / scaled
                if out.quick is not None:
                    ran = plan.with_(grad_accum=choice.grad_accum)
                    out.quick.update(measured_step_seconds=median, scaled_step_seconds=scaled,
                                     measured_tokens_per_second=ran.tokens_per_step / median)
    out.measured = measured
    errors: dict[str, float | None] = {"per_gpu_peak_bytes": None, "tokens_per_second": None}
    for key in errors:
        m, p = _num(measured.get(key)), _num(out.predicted.get(key))
        if m and p:
            errors[key] = _pct(m, p)
    out.error_pct = errors


def _on_policy(metrics: Metrics, plan: Plan | None, choice: quick.QuickChoice, ctx: Any,
               seconds: list[float]) -> dict[str, Any] | None:
    """GKD: the timed steps set back to the average share of on-policy micro-batches, with the counts drawn."""
    if plan is None or plan.trainer != "gkd" or ctx is None or getattr(ctx, "model", None) is None:
        return None
    counts = drawn_counts(metrics, choice.warmup)
    if counts is None:
        return None
    from advisor.model.speed import estimate_speed

    ran = plan.with_(grad_accum=choice.grad_accum)
    return as_average(seconds, counts, choice.grad_accum,
                      lambda share: estimate_speed(ctx.model, ran, ctx.target, on_policy_share=share).step_seconds)


def _unmeasured_peak(out: VerifyOutcome, floor: int | None) -> None:
    """A run out of memory never reached its peak: what the metrics logged before it failed (often only the start
    record, the weights loaded) is kept as per_gpu_peak_recorded_bytes, not reported as the peak nor compared with
    the estimate; the demand torch's message gives is the measured floor (per_gpu_peak_at_least_bytes)."""
    m = out.measured
    m["out_of_memory"] = True
    m["per_gpu_peak_recorded_bytes"] = m.get("per_gpu_peak_bytes")
    m["per_gpu_peak_bytes"] = None
    m["per_gpu_peak_at_least_bytes"] = int(floor) if floor else None
    out.error_pct["per_gpu_peak_bytes"] = None


def _out_of_memory(out: VerifyOutcome, b: _Bundle, metrics: Metrics | None, log_lines: list[str], *,
                   decide) -> str:
    """The memory step's detail after an out-of-memory run: the demand measured, whether the files exceed the plan,
    whether the estimate of the files was low, and the next plan (out.next_plan)."""
    from advisor.verify.replan import next_plan, recreate_pins

    demand = oom_demand(log_lines) or {}
    floor = demand.get("at_least_bytes") or (metrics.peak("peak_allocated_bytes") if metrics else None)
    _unmeasured_peak(out, floor)
    where = f" on GPU {demand['gpu']}" if demand.get("gpu") is not None else ""
    parts = [f"the run ran out of GPU memory{where}" + (f": it needed at least {_gib(floor)} per GPU" if floor else "")]
    edits = b.reading.vs_plan_json if b.reading is not None else []
    if edits:
        shown = ", ".join(f"{d.field} {d.value!r} in {d.where} (plan.json planned {d.other!r})" for d in edits[:4])
        parts.append(f"the files exceed the plan: {shown}")
    predicted = _num(out.predicted.get("per_gpu_peak_bytes"))
    if out.predicted.get("fits") is False:
        parts.append(f"the estimate of the files predicted it ({_gib(out.predicted.get('per_gpu_reserved_bytes'))} "
                     f"reserved > {_gib(out.predicted.get('capacity_bytes'))} usable; check --bundle says so "
                     "before a run)")
    elif predicted:
        low = f", the run needed at least {_gib(floor)}" if floor else ""
        parts.append(f"the estimate is too low: it predicted {_gib(predicted)} for the files{low}")
    if b.plan is not None and b.ctx is not None:
        pins = recreate_pins(b.files.get("train.py")) or recreate_pins(b.files.get("launch.sh"))
        hw = b.doc.get("hardware") if isinstance(b.doc.get("hardware"), dict) else {}
        try:
            out.next_plan = next_plan(pins=pins, edits={d.field: d.value for d in edits}, hardware=hw,
                                      failed=b.plan, failed_peak_predicted=int(predicted) if predicted else None,
                                      floor_bytes=floor, out=f"{b.path}-next", decide=decide)
        except Exception as exc:  # noqa: BLE001 - the analysis above stands without a next plan
            parts.append(f"no next plan ({type(exc).__name__}: {exc})")
        if out.next_plan:
            parts.append(f"next plan: {out.next_plan['summary']}")
        elif pins:
            parts.append("no plan fits this request on this hardware")
    return "; ".join(parts)


__all__ = ["RUN_ENVIRONMENT", "verify"]
