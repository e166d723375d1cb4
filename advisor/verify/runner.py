"""Running the bundle's launch.sh in its own process group: output teed to verify.log, a wall-clock limit, and every
child process ended on a timeout or an interrupt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from advisor.core.errors import InputFileError
from advisor.verify.limits import DEFAULT_TIMEOUT_SECONDS, PROGRESS_POLL_SECONDS

# -------------------------------------------------------------------------------------------------------- runner

@dataclass(frozen=True)
class RunResult:
    returncode: int
    timed_out: bool = False
    seconds: float = 0.0


RUN_TAG = "TRL_ADVISOR_VERIFY_RUN"
"""An environment variable verify sets, to a value of its own, for each run. Every process the run starts inherits
it (a fork or exec keeps the environment; /proc/PID/environ shows the one a process was started with: proc(5)),
including those that left the run's process group: launch.sh starts the vLLM server and the training under setsid,
and a killed launch.sh cannot stop them any more. After the run verify ends whatever still carries the value."""

STRAGGLER_GRACE_SECONDS = 5.0
"""SIGTERM to SIGKILL for processes left after the run (launch.sh has had its own grace period by then)."""

Runner = Callable[..., "RunResult | int"]
"""runner(command, *, cwd, log_path, timeout_seconds) -> RunResult (or a bare exit code). It runs `command` in
`cwd` and leaves its output in `log_path`; tests pass a fake that writes metrics files instead of training."""


def _stream(progress: IO[str] | None | str) -> IO[str] | None:
    """"stderr" means sys.stderr as it is at call time (not at import: test harnesses swap it)."""
    return sys.stderr if progress == "stderr" else progress  # type: ignore[return-value]


class _Progress:
    """The run's output on stderr while it runs: on a terminal one line that keeps showing verify's status (phase,
    step i of N, peak memory so far) and the latest output line; elsewhere (CI logs) every output line, indented,
    and each new status on a line of its own."""

    def __init__(self, stream: IO[str] | None) -> None:
        self.stream = stream
        self.tty = bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())
        self.dirty = False
        self.status = ""
        self.last = ""
        self.lock = threading.Lock()

    def _cols(self) -> int:
        try:
            return os.get_terminal_size(self.stream.fileno()).columns  # type: ignore[union-attr]
        except (OSError, ValueError, AttributeError):
            return 100

    def _draw(self) -> None:
        head = f"[{self.status}] " if self.status else ""
        self.stream.write("\r\x1b[K  | " + (head + self.last)[: max(10, self._cols() - 5)])  # type: ignore
        self.dirty = True

    def line(self, text: str) -> None:
        if self.stream is None:
            return
        text = text.rstrip()
        with self.lock:
            if self.tty:
                if not text:
                    return
                self.last = text
                self._draw()
            else:
                self.stream.write(f"  | {text}\n")
            self.stream.flush()

    def set_status(self, status: str | None) -> None:
        if self.stream is None or not status or status == self.status:
            return
        with self.lock:
            self.status = status
            if self.tty:
                self._draw()
            else:
                self.stream.write(f"verify: {status}\n")
            self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.tty and self.dirty:
            with self.lock:
                self.stream.write("\r\x1b[K")
                self.stream.flush()


def run_command(command: Sequence[str], *, cwd: str | Path, log_path: str | Path,
                timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS, progress: IO[str] | None | str = "stderr",
                env: dict[str, str] | None = None, status: Callable[[], str | None] | None = None) -> RunResult:
    """Run `command` in its own process group, copy its output (stdout and stderr merged) to `log_path` and to
    `progress`, and stop the whole group at the timeout or on Ctrl-C (SIGTERM, then SIGKILL after 30 s; a second
    Ctrl-C kills at once): accelerate, torchrun and DeepSpeed start children that a kill of the parent alone would
    leave running, and a process group of its own does not receive the terminal's SIGINT. Whatever the run started
    in other groups or sessions (launch.sh's setsid children) is ended after it, however it ended (RUN_TAG).
    `status()` is polled every PROGRESS_POLL_SECONDS for the progress line (phase, step i of N, peak memory)."""
    run_env = dict(os.environ if env is None else env)
    run_env.setdefault("PYTHONUNBUFFERED", "1")  # the log shows each line as the training prints it
    tag = uuid.uuid4().hex
    run_env[RUN_TAG] = tag
    start = time.monotonic()
    show = _Progress(_stream(progress))
    from advisor.core import safeio

    try:
        log_file = safeio.open_output(log_path, what="log file")
    except safeio.UnsafeInputError as exc:  # a named pipe or a symlink where the log goes
        raise InputFileError(exc.message, hint="remove it; verify writes its log there") from None
    done = threading.Event()
    with log_file as log:
        proc = subprocess.Popen(list(command), cwd=str(cwd), env=run_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace",
                                bufsize=1, start_new_session=True)

        def pump() -> None:
            assert proc.stdout is not None
            try:
                for line in proc.stdout:  # universal newlines: tqdm's \r updates arrive as lines too
                    log.write(line if line.endswith("\n") else line + "\n")
                    log.flush()
                    show.line(line)
            except (ValueError, OSError):  # the log was closed after the reader's grace: the rest is not kept
                return

        def tick() -> None:
            while not done.wait(PROGRESS_POLL_SECONDS):
                try:
                    show.set_status(status())  # type: ignore[misc]
                except Exception:  # noqa: BLE001 - a status that cannot be read this time is shown next time
                    continue

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        ticker = threading.Thread(target=tick, daemon=True) if status is not None else None
        if ticker is not None:
            ticker.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop_group(proc)
        except BaseException:  # Ctrl-C: do not leave the training running
            try:
                _stop_group(proc)
            except BaseException:  # a second Ctrl-C while it stops: kill at once
                _kill_group(proc)
            raise
        finally:
            # Processes of the run that outlived it (in another session, or launch.sh killed before it stopped
            # them) still hold the output pipe: ended here, the reader sees its end instead of waiting them out.
            try:
                stop_stragglers(tag)
            except BaseException:  # a second Ctrl-C meanwhile: kill at once
                stop_stragglers(tag, grace=0)
                raise
            done.set()
            reader.join(timeout=10)
            if ticker is not None:
                ticker.join(timeout=PROGRESS_POLL_SECONDS + 1)
            show.close()
    return RunResult(returncode=proc.returncode if proc.returncode is not None else -9, timed_out=timed_out,
                     seconds=time.monotonic() - start)


def tagged_pids(tag: str, proc_root: str | Path = "/proc") -> list[int]:
    """The processes whose environment holds RUN_TAG=tag (this user's: others' environ is not readable; none
    where there is no /proc)."""
    needle = f"{RUN_TAG}={tag}".encode()
    found = []
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(os.path.join(proc_root, entry, "environ"), "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:  # ended meanwhile, or not ours
            continue
    return found


def _running(pid: int) -> bool:
    """True while `pid` runs; a zombie (ended, not yet reaped by its parent) has ended."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop_stragglers(tag: str, grace: float = STRAGGLER_GRACE_SECONDS) -> list[int]:
    """SIGTERM every process still carrying the run's tag, SIGKILL those left after `grace` seconds (looked up
    again, so that a pid reused meanwhile is not hit); the pids found."""
    found = [pid for pid in tagged_pids(tag) if _running(pid)]
    pids = found
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 2.0)
        while time.monotonic() < deadline and any(_running(pid) for pid in pids):
            time.sleep(0.1)
        pids = [pid for pid in tagged_pids(tag) if _running(pid)]
        if not pids:
            break
    return found


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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
