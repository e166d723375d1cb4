"""The steps that judge the run: did it run, its peak memory, its speed, its loss.

Tolerances (why these numbers):

* Memory: pass within max(15 % of the prediction, 2 GiB) either way. The estimate's job is to pick a micro-batch
  and a sharding stage that fit; an error under 15 % of the peak is smaller than the step to the next micro-batch on
  typical plans (each sequence adds 1/micro_batch of the activations and logits), so it would not have changed the
  plan, and a larger one may have. The 2 GiB floor covers what does not scale with the plan (cuBLAS/cuDNN
  workspaces, allocator rounding, the optimizer step's temporaries), which would dominate a percentage of a small
  prediction. Measured above the band is the dangerous direction (a longer run, or a GPU with less free memory,
  runs out of memory) and always fails. Measured below the band fails too (the estimate is wrong, and faster plans
  may have been rejected as not fitting) except when the run read real data without packing: samples shorter than
  seq_len then lower the peak, so a low reading proves nothing.
* Speed: pass within SPEED_TOLERANCE_PCT (15 %, advisor.verify.limits says which measurements it comes from) plus
  this run's own spread, capped. Tokens are counted as the plan counts them (every sequence seq_len long), which
  --synthetic-data makes true; with real data shorter samples make a run look faster, so a reading above the band
  then passes with a note, as memory below it does. In quick mode the step time compared is the measured one
  scaled back to the plan's accumulation (advisor.verify.quick).
* A plan whose predicted step is mostly host-bound (transformers' generate in GRPO/RLOO without vLLM, small
  checkpointed micro-batches) follows its host CPU: its runs on quiet and on busy hosts of one GPU kind read faster
  and slower than the median host's prediction by more than the band (docs/accuracy.md, the later bundles by host).
  Such a run also passes inside the same band around the model's estimate for this host (from the host's 1-element
  op time, reported under "host"), which reads a quiet host close to how the runs did there (same section).
* Out of memory: the memory step says whether the files were changed beyond the plan and whether the estimate of
  the files was too low, and names the plan the advisor would choose now (advisor.verify.replan).
"""

from __future__ import annotations

import math
import signal
from pathlib import Path

from advisor.model.calibration import HOST_BOUND_NOTE_SHARE
from advisor.verify.limits import (
    HOST_BOUND_SPREAD_CAP_PCT,
    MEMORY_TOLERANCE_FLOOR_BYTES,
    MEMORY_TOLERANCE_PCT,
    SPEED_SPREAD_CAP_PCT,
    SPEED_TOLERANCE_PCT,
)
from advisor.verify.metrics import _OOM, Metrics, _tail, last_error_line
from advisor.verify.outcome import FAIL, PASS, SKIP, StepResult, VerifyOutcome, _gib, _minutes, _pct
from advisor.verify.runner import RunResult


def log_problem(log: Path) -> str | None:
    """Why verify cannot write its log at `log` (a named pipe would block the open, a symlink would send the log
    to another file), or None. The log is created empty here, so that the runner and the error path below write to
    a regular file."""
    from advisor.core import safeio

    try:
        safeio.open_output(log, what="log file").close()
    except safeio.UnsafeInputError as exc:
        return exc.message
    return None


def clear_metrics(folder: Path) -> None:
    """Old rank files would be read as this run's (a run that dies before its first step writes none)."""
    if folder.is_dir() and not folder.is_symlink():
        for f in folder.glob("rank*.jsonl"):
            if f.is_symlink() or not f.is_dir():  # unlink removes a pipe or a link without opening it
                f.unlink()


def step_run(result: RunResult, metrics: Metrics, log: Path, steps: int, *, interrupted: bool = False) -> StepResult:
    lines = _tail(log)
    recorded = metrics.step_count
    ranks = len(metrics.ranks)
    if interrupted:
        return StepResult("run", FAIL, f"interrupted (Ctrl-C) after {recorded} of {steps} steps in "
                          f"{_minutes(result.seconds)}; every process the run started was stopped",
                          f"the log so far is {log}")
    if result.timed_out:
        last = last_error_line(lines) or "no output"
        return StepResult("run", FAIL, f"timed out after {_minutes(result.seconds)} ({recorded} of {steps} steps "
                          f"recorded); last line: {last}", f"see {log}; a first run may spend minutes downloading "
                          "weights or building DeepSpeed ops: pass a longer timeout")
    if result.returncode != 0:
        code = result.returncode
        killed = code in (137, -9) or code == -signal.SIGKILL
        why = last_error_line(lines) or "no output"
        if killed and not any(o in "\n".join(lines) for o in _OOM):
            why = f"killed (signal 9: out of host memory?); last line: {why}"
        return StepResult("run", FAIL, f"exit code {code}: {why}", f"the full log is {log}")
    if not metrics.ranks:
        return StepResult("run", FAIL, "exit code 0 but no metrics/rank*.jsonl was written",
                          f"train.py's PeakMemoryCallback writes them; see {log}")
    note = f"; only {recorded} of {steps} steps (a short dataset?)" if recorded < steps else ""
    bad = f"; {metrics.bad_lines} unreadable metrics line(s)" if metrics.bad_lines else ""
    where = "on the CPU" if metrics.on_cpu else f"on {ranks} rank(s)"
    return StepResult("run", PASS, f"{recorded} steps {where} in {_minutes(result.seconds)}{note}{bad} "
                      f"(log: {log.name})")


def oom_in(log_lines: list[str]) -> bool:
    return any(o in line for line in log_lines for o in _OOM)


def step_memory(out: VerifyOutcome, metrics: Metrics | None, run: StepResult, log_lines: list[str], *,
                real_data_unpacked: bool, oom_text: str | None = None, upper_bound: str | None = None) -> StepResult:
    """`oom_text`: the out-of-memory analysis (advisor.verify.session), used when the run ran out of memory.
    `upper_bound`: why the estimate is only an upper bound for this plan (an Unsloth plan: its kernels are not
    modelled); a measurement below the band then passes with that reason, one above it still fails."""
    predicted = out.predicted.get("per_gpu_peak_bytes")
    if run.status == SKIP:
        return StepResult("memory", SKIP, "nothing was run")
    if run.status == FAIL:
        if oom_in(log_lines):
            hint = (f"next plan: {out.next_plan['command']}" if out.next_plan else
                    "lower micro_batch in train.py CONFIG, or turn on gradient checkpointing / offload; then "
                    "re-check with trl-advisor check --bundle")
            return StepResult("memory", FAIL, oom_text or f"the run ran out of GPU memory (predicted peak "
                              f"{_gib(predicted)} per GPU)", hint)
        return StepResult("memory", SKIP, "the run failed before memory could be compared")
    assert metrics is not None
    if metrics.on_cpu:
        return StepResult("memory", SKIP, "the run was on the CPU: no GPU memory was measured")
    measured = out.measured.get("per_gpu_peak_bytes")
    if not measured:
        return StepResult("memory", SKIP, "the metrics record no GPU peak memory")
    if not isinstance(predicted, (int, float)) or predicted <= 0:
        return StepResult("memory", SKIP, "no estimate of the files' peak memory to compare with")
    tol = max(MEMORY_TOLERANCE_PCT / 100 * predicted, MEMORY_TOLERANCE_FLOOR_BYTES)
    diff = measured - predicted
    pct = _pct(measured, predicted)
    band = f"tolerance +-{_gib(tol)}"
    text = f"measured {_gib(measured)} vs predicted {_gib(predicted)} per GPU ({pct:+.1f} %, {band})"
    if diff > tol:
        return StepResult("memory", FAIL, f"{text}: under-predicted, a longer run may run out of memory",
                          "lower micro_batch in train.py's CONFIG (or turn on grad_ckpt) before the full run")
    if diff < -tol:
        if upper_bound:
            return StepResult("memory", PASS, f"{text}: below the band, as expected: {upper_bound}")
        if real_data_unpacked:
            return StepResult("memory", PASS, f"{text}: below the band, expected with real data shorter than "
                              "seq_len (use --synthetic-data for full-length samples)")
        return StepResult("memory", FAIL, f"{text}: over-predicted, the planner may have rejected faster plans "
                          "as not fitting", "a larger micro_batch may fit: try it with verify before the full run")
    return StepResult("memory", PASS, text)


def spread_cap(host_bound_share: float | None) -> float:
    """How far this plan's own step spread may widen the band: HOST_BOUND_SPREAD_CAP_PCT for a plan whose predicted
    step is mostly host-bound, else SPEED_SPREAD_CAP_PCT."""
    return HOST_BOUND_SPREAD_CAP_PCT if host_bound(host_bound_share) else SPEED_SPREAD_CAP_PCT


def speed_tolerance(spread_pct: float | None, host_bound_share: float | None = None) -> float:
    """The band for this run: SPEED_TOLERANCE_PCT plus the run's own spread, at most spread_cap more."""
    return SPEED_TOLERANCE_PCT + min(spread_pct or 0.0, spread_cap(host_bound_share))


def host_bound(host_bound_share: float | None) -> bool:
    """Whether the plan's predicted step is mostly set by the host CPU (HOST_BOUND_NOTE_SHARE)."""
    return (host_bound_share or 0.0) >= HOST_BOUND_NOTE_SHARE


def within_host_estimate(measured: float, host: dict, host_bound_share: float | None, tol: float) -> float | None:
    """For a host-bound plan whose host was measured: the run's error (%) against the model's tokens/s for this host
    when it is inside the band `tol`, else None (judged on the median host's prediction alone)."""
    estimate = host.get("tokens_per_second")
    if not host_bound(host_bound_share) or not isinstance(estimate, (int, float)) or estimate <= 0 \
            or host.get("factor") in (None, 1.0):
        return None
    pct = _pct(measured, estimate)
    return pct if abs(pct) <= tol else None


def step_speed(out: VerifyOutcome, metrics: Metrics | None, run: StepResult, hardware: StepResult,
               has_plan: bool, plan_error: str | None, *, real_data_unpacked: bool, warmup: int,
               upper_bound: str | None = None) -> StepResult:
    """`upper_bound`: as for step_memory; here a run faster than the band passes with that reason."""
    if run.status == SKIP:
        return StepResult("speed", SKIP, "nothing was run")
    if run.status == FAIL:
        return StepResult("speed", SKIP, "the run failed")
    assert metrics is not None
    if metrics.on_cpu:
        return StepResult("speed", SKIP, "the run was on the CPU: its speed says nothing about the plan's GPUs")
    if hardware.status == FAIL:
        return StepResult("speed", SKIP, "this machine is not the plan's hardware (see Hardware)")
    if not has_plan:
        return StepResult("speed", SKIP, f"no tokens per step: {plan_error}")
    times = metrics.step_seconds()
    if len(times) <= warmup:
        return StepResult("speed", SKIP, f"{len(times)} step(s) recorded: more than {warmup} are needed "
                          f"(the first {warmup} are warm-up); use --steps {warmup + 4}")
    predicted = out.predicted.get("tokens_per_second")
    measured = out.measured.get("tokens_per_second")
    if not isinstance(predicted, (int, float)) or predicted <= 0 or not measured:
        return StepResult("speed", SKIP, "no estimate of the files' tokens/s to compare with")
    pct = _pct(measured, predicted)
    spread = out.measured.get("step_seconds_spread_pct")
    share = out.predicted.get("host_bound_share")
    share = share if isinstance(share, (int, float)) else None
    cap = spread_cap(share)
    tol = speed_tolerance(spread, share)
    out.speed_spread_cap_pct = cap
    out.speed_tolerance_pct = round(tol, 1)
    timed = len(times) - warmup
    median = out.measured.get("step_seconds_median")
    band = (f"+-{tol:.1f} % = {SPEED_TOLERANCE_PCT:.0f} % + this run's spread {min(spread, cap):.1f} %"
            if spread else f"+-{tol:.0f} %")
    text = (f"measured {measured:,.0f} vs predicted {predicted:,.0f} tokens/s ({pct:+.1f} %, tolerance {band}; "
            f"median step {median:.2f} s over {timed} steps")
    q = out.quick
    if q and q.get("quick"):
        text += (f" at grad_accum {q['grad_accum']}, scaled x{q['scale']:.3f} to the plan's {q['plan_grad_accum']}: "
                 f"{q['scaled_step_seconds']:.2f} s")
    drawn = out.measured.get("on_policy")
    if isinstance(drawn, dict) and drawn.get("micro_batches_per_step"):
        counts = drawn["micro_batches_per_step"]
        text += (f"; GKD generated on-policy in {sum(counts)} of the timed steps' micro-batches ({counts} a step, "
                 f"share {drawn['share_drawn']:.2f}): each step set back to the estimate's share by its own ratio")
    text += ")"
    host = out.host or {}
    if host.get("tokens_per_second") and host.get("factor") not in (None, 1.0):
        text += (f"; this host dispatches an op in {host['op_seconds'] * 1e6:.1f} us (the calibration's median "
                 f"{host['reference_op_seconds'] * 1e6:.2f} us), for which the model gives "
                 f"{host['tokens_per_second']:,.0f} tokens/s ({_pct(measured, host['tokens_per_second']):+.1f} %)")
    warnings = []
    if spread is not None and spread > cap:
        kind = "host-bound " if cap == HOST_BOUND_SPREAD_CAP_PCT else ""
        warnings.append(f"the timed steps spread by {spread:.1f} % around their median, more than any {kind}"
                        "calibration run: other work on the GPUs or the host CPU, throttling or a slow data loader "
                        "(use --steps 20 to average)")
    if pct > tol and upper_bound:
        return StepResult("speed", PASS, f"{text}: above the band, as expected: {upper_bound}", warnings=warnings)
    if pct > tol and real_data_unpacked:
        return StepResult("speed", PASS, f"{text}: above the band, expected with real data shorter than seq_len "
                          "(tokens are counted at seq_len; use --synthetic-data for full-length samples)",
                          warnings=warnings)
    if abs(pct) > tol and (own := within_host_estimate(measured, host, share, tol)) is not None:
        return StepResult("speed", PASS, f"{text}: outside the band around the median host's prediction, inside it "
                          f"around this host's ({own:+.1f} %): a host-bound step follows its host CPU",
                          warnings=warnings)
    if abs(pct) > tol:
        slow = pct < 0
        return StepResult("speed", FAIL, text + (": slower than predicted" if slow else ": faster than predicted"),
                          ("check other processes on the GPUs, power limits and the link (nvidia-smi topo -m); "
                           "a longer run with --steps 30 averages more steps") if slow else
                          "the speed model is conservative here; the plan search may have preferred a slower plan",
                          warnings=warnings)
    return StepResult("speed", PASS, text, warnings=warnings)


def step_loss(metrics: Metrics | None, run: StepResult) -> tuple[StepResult, bool | None]:
    if run.status == SKIP or metrics is None:
        return StepResult("loss", SKIP, "nothing was run"), None
    losses = metrics.losses()
    if not losses:
        if run.status == FAIL:
            return StepResult("loss", SKIP, "the run failed before a loss was logged"), None
        return StepResult("loss", FAIL, "no loss was logged", "train.py logs every step on short runs "
                          "(logging_steps=1); see the log"), False
    bad = [(r, s, k, v) for r, s, k, v in losses if not math.isfinite(v)]
    if bad:
        rank, step, key, value = bad[0]
        return StepResult("loss", FAIL, f"{key} is {value} at step {step} (rank {rank}); {len(bad)} of "
                          f"{len(losses)} logged losses are not finite",
                          "fp16 overflow or a too-high learning rate: try bf16, or a lower learning rate"), False
    values = [v for _, _, k, v in losses if k == "loss"] or [v for *_, v in losses]
    return StepResult("loss", PASS, f"{len(losses)} logged losses, all finite (last {values[-1]:.4g})"), True
