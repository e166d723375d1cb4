"""`trl-advisor verify`: run a bundle briefly on this machine and compare what it measures with plan.json.

Nine ordered steps, each pass, fail or skip with a one-line detail, and verify keeps going after a failure wherever
the later steps still mean something:

  1 bundle       the folder has plan.json, train.py, launch.sh, accelerate.yaml (+ ds_config.json for DeepSpeed)
  2 consistency  the files agree with each other (advisor.bundle.consistency)
  3 hardware     this machine's GPUs against the plan's: model, memory per GPU, count, nodes
  4 packages     installed versions (package metadata) against requirements.txt
  5 rules        every rule on the bundle (`check --bundle`): an error finding fails
  6 run          `bash launch.sh --max-steps N [--random-init] [--synthetic-data]`, output in verify.log
  7 memory       measured peak allocated per GPU (max over ranks) against predicted per_gpu_peak_bytes
  8 speed        measured tokens/s against predicted tokens_per_second
  9 loss         every logged loss is finite

`passed` is true when no step failed **and the run happened**: verify exists to run the bundle, so a verify whose
run was skipped (no GPU here, too few GPUs, a multi-node bundle) reports passed=false with "nothing was run".

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
* Speed: pass within +-35 %. A verify run is short (10 steps by default, the first 2 dropped as warm-up: CUDA
  context, allocator growth, NCCL communicator set-up, kernel autotuning), so the median rests on a handful of
  steps; dataloader, logging and clock boost add noise that a long run averages away, and the speed model's
  efficiency constants are fitted per GPU family, not per machine. On the H200 runs in bench/results the
  post-warm-up step times of one run spread by more than 10 % of their median in 11 of 36 runs (up to 49 %): a
  band narrower than that spread would fail healthy bundles. Tokens are counted as the plan counts them (every
  sequence seq_len long), which --synthetic-data makes true; with real data shorter samples make a run look faster,
  so a reading above the band then passes with a note, as memory below it does.
"""

from __future__ import annotations

import math
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from advisor.core.errors import AdvisorError, InputFileError
from advisor.core.plan import Plan

GIB = 1 << 30

DEFAULT_STEPS = 10
DEFAULT_TIMEOUT_SECONDS = 20 * 60
"""Wall-clock limit of the short run, seconds. Before its N steps a first run may download the weights (or write
the random-init checkpoint) and JIT-build DeepSpeed ops, each minutes long; the steps themselves take seconds."""
MEMORY_TOLERANCE_PCT = 15.0
MEMORY_TOLERANCE_FLOOR_BYTES = 2 * GIB
SPEED_TOLERANCE_PCT = 35.0
WARMUP_STEPS = 2
"""Optimizer steps dropped before timing: the first includes CUDA/NCCL set-up and kernel selection, the second can
still include allocator growth (the caching allocator reaches its working set) and ZeRO-3 prefetch set-up."""
GPU_MEMORY_SLACK = 0.02
"""A probed GPU may report up to 2 % less memory than the plan's and still count as the same size (NVML totals
differ by driver and ECC setting)."""
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

STRICT_PACKAGES = ("trl", "transformers", "accelerate", "deepspeed", "vllm", "unsloth", "unsloth-zoo")
"""Packages whose API or file formats the bundle is written against (train.py's TRL/transformers calls, the
accelerate YAML, ds_config.json keys, vLLM server flags): another major.minor fails, another patch passes with a
note. Other exact pins (peft, datasets, liger-kernel, bitsandbytes) only note a difference."""


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


# -------------------------------------------------------------------------------------------------------- runner

@dataclass(frozen=True)
class RunResult:
    returncode: int
    timed_out: bool = False
    seconds: float = 0.0


Runner = Callable[..., "RunResult | int"]
"""runner(command, *, cwd, log_path, timeout_seconds) -> RunResult (or a bare exit code). It runs `command` in
`cwd` and leaves its output in `log_path`; tests pass a fake that writes metrics files instead of training."""


def _stream(progress: IO[str] | None | str) -> IO[str] | None:
    """"stderr" means sys.stderr as it is at call time (not at import: test harnesses swap it)."""
    return sys.stderr if progress == "stderr" else progress  # type: ignore[return-value]


class _Progress:
    """The run's output on stderr while it runs: on a terminal one line that keeps showing the latest output line,
    elsewhere (CI logs) every line, indented."""

    def __init__(self, stream: IO[str] | None) -> None:
        self.stream = stream
        self.tty = bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())
        self.dirty = False

    def line(self, text: str) -> None:
        if self.stream is None:
            return
        text = text.rstrip()
        if self.tty:
            if not text:
                return
            cols = 100
            try:
                cols = os.get_terminal_size(self.stream.fileno()).columns
            except (OSError, ValueError, AttributeError):
                pass
            self.stream.write("\r\x1b[K  | " + text[: max(10, cols - 5)])
            self.dirty = True
        else:
            self.stream.write(f"  | {text}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.tty and self.dirty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def run_command(command: Sequence[str], *, cwd: str | Path, log_path: str | Path,
                timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS, progress: IO[str] | None | str = "stderr",
                env: dict[str, str] | None = None) -> RunResult:
    """Run `command` in its own process group, copy its output (stdout and stderr merged) to `log_path` and to
    `progress`, and stop the whole group at the timeout (SIGTERM, then SIGKILL after 30 s): accelerate, torchrun
    and DeepSpeed start children that a kill of the parent alone would leave running."""
    run_env = dict(os.environ if env is None else env)
    run_env.setdefault("PYTHONUNBUFFERED", "1")  # the log shows each line as the training prints it
    start = time.monotonic()
    show = _Progress(_stream(progress))
    from advisor.core import safeio

    try:
        log_file = safeio.open_output(log_path, what="log file")
    except safeio.UnsafeInputError as exc:  # a named pipe or a symlink where the log goes
        raise InputFileError(exc.message, hint="remove it; verify writes its log there") from None
    with log_file as log:
        proc = subprocess.Popen(list(command), cwd=str(cwd), env=run_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace",
                                bufsize=1, start_new_session=True)

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:  # universal newlines: tqdm's \r updates arrive as lines too
                log.write(line if line.endswith("\n") else line + "\n")
                log.flush()
                show.line(line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop_group(proc)
        except BaseException:  # Ctrl-C: do not leave the training running
            _stop_group(proc)
            raise
        finally:
            reader.join(timeout=10)
            show.close()
    return RunResult(returncode=proc.returncode if proc.returncode is not None else -9, timed_out=timed_out,
                     seconds=time.monotonic() - start)


def _stop_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


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


@dataclass
class _Bundle:
    """What verify read from the folder."""

    path: Path
    doc: dict
    files: dict[str, str]
    plan: Plan | None
    plan_error: str | None
    unreadable: dict[str, str] = field(default_factory=dict)
    """File name -> why it was not read (a named pipe, a device, too large, not UTF-8)."""


MAX_BUNDLE_FILE_BYTES = 2_000_000
"""The files of a bundle are a few KiB to tens of KiB (plan.json lists its alternatives); 2 MB is the limit
`check --bundle` reads too (advisor.bundle.read.MAX_FILE_BYTES)."""
MAX_METRICS_BYTES = 64 * 1024 * 1024
"""One rank's metrics file: a line of about 300 bytes per logged step, so 64 MiB is some 200,000 steps, far more
than a verify run takes."""
MAX_LOG_TAIL_BYTES = 1024 * 1024
"""Of verify.log only the end is read (the last LOG_TAIL_LINES lines): 1 MiB holds them even with long lines."""


def _load_bundle(bundle_dir: str | os.PathLike[str]) -> _Bundle:
    from advisor.core import safeio

    path = Path(bundle_dir)
    hint = "generate one with: trl-advisor generate --model MODEL --out DIR"
    if not path.exists():
        raise InputFileError(f"bundle folder not found: {path}", hint=hint)
    if not path.is_dir():
        raise InputFileError(f"{path} is not a folder", hint="pass the folder `trl-advisor generate --out` wrote")
    plan_file = path / "plan.json"
    regenerate = "re-create the bundle with trl-advisor generate --force"
    try:
        text = safeio.read_text(plan_file, max_bytes=MAX_BUNDLE_FILE_BYTES, what="plan file")
        doc = safeio.load_json(text, where=str(plan_file))
    except safeio.UnsafeInputError as exc:
        if exc.reason == "missing":
            raise InputFileError(f"{path} has no plan.json: not a trl-advisor bundle", hint=hint) from None
        raise InputFileError(exc.message, hint=regenerate) from None
    if not isinstance(doc, dict):
        raise InputFileError(f"{plan_file} is not a plan (a JSON object is expected)", hint=regenerate)
    from advisor.bundle.read import check_plan_json

    check_plan_json(doc, str(plan_file))
    from advisor.bundle.consistency import REQUIRED_FILES
    from advisor.bundle.render import BUNDLE_ORDER

    listed = [n for n in doc.get("files") or [] if isinstance(n, str) and "/" not in n and n not in ("", ".", "..")]
    names = dict.fromkeys([*listed, *REQUIRED_FILES, *BUNDLE_ORDER])
    files: dict[str, str] = {"plan.json": text}
    unreadable: dict[str, str] = {}
    for name in names:
        if name == "plan.json":
            continue
        try:
            files[name] = safeio.read_text(path / name, max_bytes=MAX_BUNDLE_FILE_BYTES, what="bundle file")
        except safeio.UnsafeInputError as exc:
            if exc.reason != "missing":  # missing files are the bundle step's "missing ..."
                unreadable[name] = exc.message
    plan, plan_error = _plan_from_train(files.get("train.py"))
    return _Bundle(path=path, doc=doc, files=files, plan=plan, plan_error=plan_error, unreadable=unreadable)


def _plan_from_train(src: str | None) -> tuple[Plan | None, str | None]:
    if src is None:
        return None, "no train.py"
    from advisor.bundle.consistency import train_constants

    try:
        cfg = train_constants(src).get("CONFIG")
    except SyntaxError as exc:
        return None, f"train.py does not parse: {exc.msg} (line {exc.lineno})"
    except (RecursionError, MemoryError):  # the parser recurses once per nesting level
        return None, "train.py does not parse: expressions nested too deeply"
    if not isinstance(cfg, dict):
        return None, "train.py has no literal CONFIG dict"
    from advisor.bundle.read import plan_value_problem

    values = {k: cfg[k] for k in Plan.__dataclass_fields__ if k in cfg}
    found = plan_value_problem(values)
    if found:
        return None, f"train.py CONFIG: {found[0]} {found[1]}"
    try:
        return Plan(**values), None
    except TypeError as exc:
        return None, f"train.py CONFIG is incomplete: {exc}"


def _uses_deepspeed(b: _Bundle) -> bool:
    if b.plan is not None:
        return b.plan.uses_deepspeed
    return (b.doc.get("plan") or {}).get("backend") == "deepspeed"


def _predictions(doc: dict) -> dict:
    """plan.json's predictions; a value that is not a finite number (text, true, NaN) is None: nothing to compare."""
    mem = doc.get("memory") or {}
    spd = doc.get("speed") or {}

    def number(value: Any) -> float | int | None:
        return value if _num(value) is not None and math.isfinite(value) else None

    return {
        "per_gpu_peak_bytes": number(mem.get("per_gpu_peak_bytes")),
        "per_gpu_reserved_bytes": number(mem.get("per_gpu_reserved_bytes")),
        "tokens_per_second": number(spd.get("tokens_per_second")),
        "step_seconds": number(spd.get("step_seconds")),
    }


# ------------------------------------------------------------------------------------------------------- steps

def _step_bundle(b: _Bundle) -> StepResult:
    need = ["plan.json", "train.py", "launch.sh", "accelerate.yaml"]
    if _uses_deepspeed(b):
        need.append("ds_config.json")
    missing = [n for n in need if n not in b.files]
    if b.unreadable:
        why = next(iter(b.unreadable.values()))
        more = f" (and {len(b.unreadable) - 1} more)" if len(b.unreadable) > 1 else ""
        return StepResult("bundle", FAIL, f"{why}{more}",
                          "replace it with the file generate wrote: trl-advisor generate --force")
    if missing:
        return StepResult("bundle", FAIL, f"{b.path}: missing {', '.join(missing)}",
                          "re-create the bundle with trl-advisor generate --force")
    return StepResult("bundle", PASS, f"{b.path}: {', '.join(need)}")


def _step_consistency(b: _Bundle) -> StepResult:
    from advisor.bundle.consistency import check_bundle_files

    try:
        problems = check_bundle_files(b.files)
    except Exception as exc:  # a malformed file must not stop the other steps
        return StepResult("consistency", FAIL, f"could not check the files: {type(exc).__name__}: {exc}")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return StepResult("consistency", FAIL, f"{problems[0]}{more}",
                          "`trl-advisor check --bundle DIR` lists them all; re-generate or fix the edited file")
    return StepResult("consistency", PASS, f"{len(b.files)} files agree with train.py's CONFIG")


@dataclass
class _Machine:
    gpus: int
    gpu_name: str | None
    gpu_id: str | None
    """Catalogue id of the probed GPU, None when the catalogue has no such part."""
    memory_bytes: int | None


def _machine(report) -> _Machine:
    from advisor import catalog

    gpus = list(getattr(report, "gpus", ()) or ())
    if not gpus:
        return _Machine(0, None, None, None)
    first = gpus[0]
    spec = catalog.match_nvml_name(first.name, first.memory_total_bytes or None)
    slices = [d.memory_total_bytes for g in gpus for d in (g.mig_devices or ()) if d.memory_total_bytes]
    if slices:  # MIG: one training process per slice, no collectives across slices (as the planner assumes)
        return _Machine(1, first.name, spec.id if spec else None, max(slices))
    return _Machine(len(gpus), first.name, spec.id if spec else None,
                    min(g.memory_total_bytes for g in gpus) or None)


def _step_hardware(b: _Bundle, m: _Machine) -> StepResult:
    hw = b.doc.get("hardware") or {}
    plan_gpu = hw.get("gpu")
    per_node = b.plan.gpus_per_node if b.plan else hw.get("gpus_per_node")
    nodes = b.plan.nodes if b.plan else hw.get("nodes", 1)
    plan_mem = hw.get("gpu_memory_bytes")
    wanted = f"{per_node} x {plan_gpu}" + (f" on each of {nodes} nodes" if nodes and nodes > 1 else "")
    if m.gpus == 0:
        return StepResult("hardware", FAIL, f"no GPU found on this machine; the plan is for {wanted}",
                          "run verify on the machine the bundle was generated for")
    problems, notes = [], []
    here = f"{m.gpus} x {m.gpu_id or m.gpu_name} ({_gib(m.memory_bytes)})"
    if plan_gpu and m.gpu_id != plan_gpu:
        problems.append(f"GPU {m.gpu_id or repr(m.gpu_name)} is not the plan's {plan_gpu}")
    if isinstance(plan_mem, int) and m.memory_bytes is not None and m.memory_bytes < plan_mem * (1 - GPU_MEMORY_SLACK):
        problems.append(f"{_gib(m.memory_bytes)} per GPU < the plan's {_gib(plan_mem)}")
    elif isinstance(plan_mem, int) and m.memory_bytes is not None and m.memory_bytes > plan_mem * (1 + GPU_MEMORY_SLACK):
        notes.append(f"more memory per GPU than planned ({_gib(plan_mem)})")
    if isinstance(per_node, int) and m.gpus < per_node:
        problems.append(f"{m.gpus} GPU(s) < the plan's {per_node} per node")
    elif isinstance(per_node, int) and m.gpus > per_node:
        notes.append(f"the run uses {per_node} of {m.gpus} GPUs")
    if nodes and nodes > 1:
        notes.append(f"this machine is one node of the plan's {nodes}")
    if problems:
        return StepResult("hardware", FAIL, f"{here}: {'; '.join(problems)}",
                          "predictions hold for the plan's hardware: re-generate for this machine "
                          "(trl-advisor generate ... without --gpu) or verify where the plan was made for")
    return StepResult("hardware", PASS, f"{here} matches {wanted}" + (f" ({'; '.join(notes)})" if notes else ""))


def _requirements(text: str) -> list[tuple[str, str]]:
    out = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.match(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(.*)$", line)
        if m:
            out.append((m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")))
    return out


def _installed(name: str, probed: dict[str, str | None]) -> str | None:
    from hw_probe.software import installed_version

    if name in probed:  # the probe read it (None: not installed)
        return probed[name]
    return installed_version((name, name.replace("-", "_")))


def _minor(version: str) -> tuple[int, ...]:
    from rules import vercmp

    release = vercmp.parse(version)[0]
    return (tuple(release) + (0, 0))[:2]


def _step_packages(b: _Bundle, report, *, cpu: bool) -> StepResult:
    from rules import vercmp

    text = b.files.get("requirements.txt")
    if text is None:
        return StepResult("packages", SKIP, "no requirements.txt in the bundle")
    software = getattr(report, "software", None)
    probed = {k.lower().replace("_", "-"): v for k, v in (software.by_package() if software else {}).items()}
    problems, notes, checked = [], [], 0
    for name, spec in _requirements(text):
        have = _installed(name, probed)
        name, shown = _clip(name, 80), _clip(spec, 80)  # one short line per package whatever the file holds
        checked += 1
        if have is None:
            problems.append(f"{name} not installed (requirements.txt: {name}{shown})")
            continue
        if name == "torch" and "+cpu" in have and not cpu:
            problems.append(f"torch {have} is a CPU build: it cannot train on the GPUs")
            continue
        if not spec:
            continue
        try:
            if spec.startswith("==") and not spec.endswith(".*"):
                want = spec[2:]
                if vercmp.compare(have, want) == 0:
                    continue
                if name in STRICT_PACKAGES and _minor(have) != _minor(want):
                    problems.append(f"{name} {have} != {_clip(want, 80)}")
                else:
                    notes.append(f"{name} {have} (pinned {_clip(want, 80)})")
            elif not vercmp.satisfies(have, spec):
                problems.append(f"{name} {have} does not satisfy {shown}")
        except vercmp.VersionError:
            notes.append(f"{name} {have}: cannot compare with {shown}")
    if problems:
        return StepResult("packages", FAIL, "; ".join(problems),
                          "install the bundle's versions: pip install -r requirements.txt")
    note = f"; patch/minor differences: {', '.join(notes)}" if notes else ""
    return StepResult("packages", PASS, f"{checked} requirements met{note}")


def _step_rules(b: _Bundle) -> StepResult:
    try:
        from advisor.check import check_bundle

        report = check_bundle(str(b.path))
    except Exception as exc:  # AdvisorError (unknown model...) or a reader bug: report it and keep going
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        return StepResult("rules", FAIL, f"the rules could not read the bundle: {message}",
                          getattr(exc, "hint", None))
    errors = report.errors
    warnings = [f for f in report.failures if f.severity == "warning"]
    warn = f"; {len(warnings)} warning(s): {', '.join(f.id for f in warnings)}" if warnings else ""
    if errors:
        first = errors[0]
        more = f" (+{len(errors) - 1} more error(s))" if len(errors) > 1 else ""
        return StepResult("rules", FAIL, f"{first.id}: {first.message}{more}{warn}",
                          first.fix or "trl-advisor check --bundle DIR lists every finding")
    return StepResult("rules", PASS, f"no errors{warn}")


def _run_blocker(b: _Bundle, m: _Machine, bundle_step: StepResult, *, cpu: bool) -> str | None:
    """Why the run cannot happen here, or None."""
    if bundle_step.status == FAIL and ("train.py" not in b.files or "launch.sh" not in b.files):
        return "the bundle has no train.py or launch.sh"
    nodes = b.plan.nodes if b.plan else (b.doc.get("hardware") or {}).get("nodes", 1)
    if nodes and nodes > 1:
        # launch.sh joins an N-node accelerate job (MAIN_PROCESS_IP, --num_machines N): started on one node alone it
        # waits for the others, so a one-node share of the run is not something the launcher can do.
        return (f"multi-node bundle ({nodes} nodes): launch.sh joins a {nodes}-node job and would wait for the "
                "others; run it with sbatch slurm.sbatch")
    if cpu:
        return None
    if m.gpus == 0:
        return "no GPU on this machine"
    per_node = b.plan.gpus_per_node if b.plan else (b.doc.get("hardware") or {}).get("gpus_per_node")
    if isinstance(per_node, int) and m.gpus < per_node:
        return f"the plan needs {per_node} GPUs per node, this machine has {m.gpus}"
    return None


def _log_problem(log: Path) -> str | None:
    """Why verify cannot write its log at `log` (a named pipe would block the open, a symlink would send the log
    to another file), or None. The log is created empty here, so that the runner and the error path below write to
    a regular file."""
    from advisor.core import safeio

    try:
        safeio.open_output(log, what="log file").close()
    except safeio.UnsafeInputError as exc:
        return exc.message
    return None


def _clear_metrics(folder: Path) -> None:
    """Old rank files would be read as this run's (a run that dies before its first step writes none)."""
    if folder.is_dir():
        for f in folder.glob("rank*.jsonl"):
            if f.is_symlink() or not f.is_dir():  # unlink removes a pipe or a link without opening it
                f.unlink()


def _step_run(result: RunResult, metrics: Metrics, log: Path, steps: int) -> StepResult:
    lines = _tail(log)
    recorded = metrics.step_count
    ranks = len(metrics.ranks)
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


def _step_memory(out: VerifyOutcome, metrics: Metrics | None, run: StepResult, log_lines: list[str], *,
                 real_data_unpacked: bool) -> StepResult:
    predicted = out.predicted.get("per_gpu_peak_bytes")
    if run.status == SKIP:
        return StepResult("memory", SKIP, "nothing was run")
    if run.status == FAIL:
        if any(o in line for line in log_lines for o in _OOM):
            return StepResult("memory", FAIL, f"the run ran out of GPU memory (predicted peak {_gib(predicted)} per "
                              "GPU): the estimate is too low", "lower micro_batch in train.py CONFIG, or turn on "
                              "gradient checkpointing / offload; then re-check with trl-advisor check --bundle")
        return StepResult("memory", SKIP, "the run failed before memory could be compared")
    assert metrics is not None
    if metrics.on_cpu:
        return StepResult("memory", SKIP, "the run was on the CPU: no GPU memory was measured")
    measured = out.measured.get("per_gpu_peak_bytes")
    if not measured:
        return StepResult("memory", SKIP, "the metrics record no GPU peak memory")
    if not isinstance(predicted, (int, float)) or predicted <= 0:
        return StepResult("memory", SKIP, "plan.json has no memory.per_gpu_peak_bytes to compare with")
    tol = max(MEMORY_TOLERANCE_PCT / 100 * predicted, MEMORY_TOLERANCE_FLOOR_BYTES)
    diff = measured - predicted
    pct = _pct(measured, predicted)
    band = f"tolerance +-{_gib(tol)}"
    text = f"measured {_gib(measured)} vs predicted {_gib(predicted)} per GPU ({pct:+.1f} %, {band})"
    if diff > tol:
        return StepResult("memory", FAIL, f"{text}: under-predicted, a longer run may run out of memory",
                          "lower micro_batch in train.py's CONFIG (or turn on grad_ckpt) before the full run")
    if diff < -tol:
        if real_data_unpacked:
            return StepResult("memory", PASS, f"{text}: below the band, expected with real data shorter than "
                              "seq_len (use --synthetic-data for full-length samples)")
        return StepResult("memory", FAIL, f"{text}: over-predicted, the planner may have rejected faster plans "
                          "as not fitting", "a larger micro_batch may fit: try it with verify before the full run")
    return StepResult("memory", PASS, text)


def _step_speed(out: VerifyOutcome, metrics: Metrics | None, run: StepResult, hardware: StepResult,
                plan: Plan | None, plan_error: str | None, *, real_data_unpacked: bool) -> StepResult:
    if run.status == SKIP:
        return StepResult("speed", SKIP, "nothing was run")
    if run.status == FAIL:
        return StepResult("speed", SKIP, "the run failed")
    assert metrics is not None
    if metrics.on_cpu:
        return StepResult("speed", SKIP, "the run was on the CPU: its speed says nothing about the plan's GPUs")
    if hardware.status == FAIL:
        return StepResult("speed", SKIP, "this machine is not the plan's hardware (see Hardware)")
    if plan is None:
        return StepResult("speed", SKIP, f"no tokens per step: {plan_error}")
    times = metrics.step_seconds()
    if len(times) <= WARMUP_STEPS:
        return StepResult("speed", SKIP, f"{len(times)} step(s) recorded: more than {WARMUP_STEPS} are needed "
                          f"(the first {WARMUP_STEPS} are warm-up); use --steps 10")
    predicted = out.predicted.get("tokens_per_second")
    measured = out.measured.get("tokens_per_second")
    if not isinstance(predicted, (int, float)) or predicted <= 0 or not measured:
        return StepResult("speed", SKIP, "plan.json has no speed.tokens_per_second to compare with")
    pct = _pct(measured, predicted)
    median = out.measured.get("step_seconds_median")
    text = (f"measured {measured:,.0f} vs predicted {predicted:,.0f} tokens/s ({pct:+.1f} %, tolerance "
            f"+-{SPEED_TOLERANCE_PCT:.0f} %; median step {median:.2f} s over {len(times) - WARMUP_STEPS} steps)")
    if pct > SPEED_TOLERANCE_PCT and real_data_unpacked:
        return StepResult("speed", PASS, f"{text}: above the band, expected with real data shorter than seq_len "
                          "(tokens are counted at seq_len; use --synthetic-data for full-length samples)")
    if abs(pct) > SPEED_TOLERANCE_PCT:
        slow = pct < 0
        return StepResult("speed", FAIL, text + (": slower than predicted" if slow else ": faster than predicted"),
                          ("check other processes on the GPUs, power limits and the link (nvidia-smi topo -m); "
                           "a longer run with --steps 30 averages more steps") if slow else
                          "the speed model is conservative here; the plan search may have preferred a slower plan")
    return StepResult("speed", PASS, text)


def _step_loss(metrics: Metrics | None, run: StepResult) -> tuple[StepResult, bool | None]:
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
