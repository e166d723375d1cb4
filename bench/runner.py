"""The parent side: run rows one at a time in child processes, under a per-row timeout and a total time budget,
appending one JSON line per row as soon as it finishes.

Generic over the child function (`child(row, ctx) -> dict`), so the machinery is tested with fake children that
need no GPU. Two ways to start a child:
- "fork": `os.fork()` after the parent imported the training stack; the child calls the function directly. This
  saves the imports (seconds per row) and still gives every row a fresh CUDA context, because the parent never
  touches CUDA.
- "spawn": a fresh interpreter (`python -m bench.worker --job FILE`); the child function is named "module:attr".

Each child is the leader of its own process group, so a timeout kills it and anything it started (compilers).
Its stdout/stderr go to a file; the last lines are appended to one combined log, and kept in the record when the
row did not end "ok".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

TERMINAL = ("ok", "oom", "error", "timeout")
"""Statuses that count as measured for resume; "skipped" rows are tried again."""

LOG_TAIL_LINES = 40
COMBINED_LOG_LINES = 300


# ---------------------------------------------------------------------------------------------------------------
# JSONL
# ---------------------------------------------------------------------------------------------------------------

def read_records(path: str) -> list[dict]:
    """Records of a JSONL file; a torn last line (a killed writer) is ignored."""
    out = []
    if not path or not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def done_names(paths: Iterable[str], redo: Iterable[str] = ()) -> set[str]:
    """Names with a terminal status in any of the files, minus those whose latest status is in `redo`."""
    latest: dict[str, str] = {}
    for p in paths:
        for r in read_records(p):
            if "name" in r and "status" in r:
                latest[r["name"]] = r["status"]
    redo = set(redo)
    return {n for n, s in latest.items() if s in TERMINAL and s not in redo}


def append_record(path: str, record: dict) -> None:
    """One line, flushed and synced, so a run killed from outside keeps every finished row."""
    line = json.dumps(record, separators=(",", ":"), default=str)
    torn = False
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"  # a writer killed mid-line: start a fresh line, keep the torn one apart
    with open(path, "a") as f:
        f.write(("\n" if torn else "") + line + "\n")
        f.flush()
        os.fsync(f.fileno())


# ---------------------------------------------------------------------------------------------------------------
# Child processes
# ---------------------------------------------------------------------------------------------------------------

LIVE: set = set()
"""Children started and not yet reaped: the parent's signal handler kills these (and only these) on SIGTERM."""


def kill_live() -> None:
    for c in list(LIVE):
        c.kill()


def _as_child(log_path: str) -> None:
    """First thing in a forked child: its own process group, default signal handlers, no inherited duties, and
    stdout/stderr (file descriptors and Python objects, whatever the parent had bound) into the log file."""
    os.setpgid(0, 0)
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, signal.SIG_DFL)
    LIVE.clear()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)


@dataclass(eq=False)
class Child:
    pid: int
    result_path: str
    log_path: str
    popen: subprocess.Popen | None = None
    returncode: int | None = None
    maxrss_bytes: int | None = None

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if self.popen is not None:
            rc = self.popen.poll()
            if rc is not None:
                self.returncode = rc
                LIVE.discard(self)
            return rc
        pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        self.returncode = os.waitstatus_to_exitcode(status)
        self.maxrss_bytes = usage.ru_maxrss * 1024  # Linux reports KiB
        LIVE.discard(self)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the child's process group (it leads its own), then reap it."""
        for target in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                target()
                break
            except (ProcessLookupError, PermissionError):
                continue
        if self.popen is not None:
            self.returncode = self.popen.wait()
        else:
            try:
                _, status, usage = os.wait4(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
                self.maxrss_bytes = usage.ru_maxrss * 1024
            except ChildProcessError:
                pass
        LIVE.discard(self)


def start_fork(child: Callable[[dict, dict], dict], row: dict, ctx: dict, result_path: str, log_path: str) -> Child:
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 70
        try:
            _as_child(log_path)
            result = child(row, ctx)
            tmp = result_path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(result, f, default=str)
            os.replace(tmp, result_path)
            code = 0
        except BaseException:  # report and leave without running the parent's cleanup
            import traceback

            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    try:
        os.setpgid(pid, pid)  # also from the parent: no window where a kill would miss the group
    except (PermissionError, ProcessLookupError):
        pass
    child_ = Child(pid=pid, result_path=result_path, log_path=log_path)
    LIVE.add(child_)
    return child_


def start_spawn(child: str, row: dict, ctx: dict, result_path: str, log_path: str,
                sys_path: list[str] | None = None) -> Child:
    job_path = result_path + ".job.json"
    with open(job_path, "w") as f:
        json.dump({"row": row, "ctx": ctx, "result_path": result_path, "child": child,
                   "sys_path": sys_path or []}, f, default=str)
    log = open(log_path, "w")
    try:
        popen = subprocess.Popen([sys.executable, "-m", "bench.worker", "--job", job_path], stdout=log,
                                 stderr=subprocess.STDOUT, env=dict(os.environ), cwd=os.getcwd(), **_own_group())
    finally:
        log.close()
    child_ = Child(pid=popen.pid, result_path=result_path, log_path=log_path, popen=popen)
    LIVE.add(child_)
    return child_


def _own_group() -> dict:
    """Popen arguments for a new process group in the same session: killable as a group, yet still ended with
    the session that started the benchmark (a new session could outlive it)."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}


def tail(path: str, n: int) -> list[str]:
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return lines[-n:]


# ---------------------------------------------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class Summary:
    results: list[dict] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    stopped_early: bool = False


@dataclass
class RunOptions:
    out_path: str
    mode: str = "fork"  # "fork" or "spawn"
    budget_seconds: float | None = None
    timeout_seconds: Callable[[dict], float] | float | None = None
    est_seconds: Callable[[dict], float] = lambda row: float(row.get("est_seconds") or 0.0)
    log_path: str | None = None
    resume_from: tuple[str, ...] = ()
    redo_statuses: tuple[str, ...] = ()
    ctx: dict = field(default_factory=dict)
    ctx_for: Callable[[dict], dict] | None = None
    before_row: Callable[[dict], dict | None] | None = None
    after_row: Callable[[dict, dict], None] | None = None
    on_result: Callable[[dict], None] | None = None
    poll_seconds: float = 0.1
    start_time: float | None = None
    clock: Callable[[], float] = time.monotonic
    workdir: str | None = None
    spawn_sys_path: list[str] | None = None
    record_row: Callable[[dict], dict] | None = None
    env: dict = field(default_factory=dict)
    """Merged into every record's "env" (versions, GPU, runner)."""
    ready: Callable[[dict], bool] | None = None
    """Rows not ready yet are postponed while other rows can run."""


def run_rows(rows: list[dict], child: Callable[[dict, dict], dict] | str, opts: RunOptions) -> Summary:
    """Run the rows in order; see the module docstring. Returns what happened to every row."""
    start = opts.start_time if opts.start_time is not None else opts.clock()
    summary = Summary()
    done = done_names([opts.out_path, *opts.resume_from], opts.redo_statuses)
    workdir = opts.workdir or tempfile.mkdtemp(prefix="bench-run-")
    os.makedirs(workdir, exist_ok=True)
    pending = []
    for row in rows:
        if row["name"] in done:
            summary.resumed.append(row["name"])
        else:
            pending.append(row)
    recorded = set(done)  # names measured (a terminal status), before or during this run

    def waiting(r: dict) -> bool:
        """A row whose `requires` row is still to run in this run waits for it."""
        need = r.get("requires")
        return bool(need) and need not in recorded and any(p["name"] == need for p in pending)

    while pending:
        # the first row that is ready (e.g. its DeepSpeed ops are built, the row it requires measured) goes next;
        # when none is, the first one goes and before_row does the waiting
        idx = next((i for i, r in enumerate(pending)
                    if not waiting(r) and (opts.ready is None or opts.ready(r))), 0)
        row = pending.pop(idx)
        need = row.get("requires")
        if need and need not in recorded:
            # the row it is measured against was not (skipped for the budget, or not in this run): without it this
            # one means nothing; a later run measures both
            summary.skipped.append(row["name"])
            append_record(opts.out_path, {"name": row["name"], "split": row.get("split"), "status": "skipped",
                                          "reason": f"requires {need}, not measured"})
            continue
        est = opts.est_seconds(row)
        if _skip_for_budget(row, est, opts, start, summary):
            continue
        extra = opts.before_row(row) if opts.before_row else None
        # before_row may have waited (for an op build, for memory to be returned): check again
        if _skip_for_budget(row, est, opts, start, summary):
            continue
        timeout = opts.timeout_seconds(row) if callable(opts.timeout_seconds) else opts.timeout_seconds
        capped_by_budget = False
        if opts.budget_seconds is not None:
            left = opts.budget_seconds - (opts.clock() - start)
            if timeout is None or left < timeout:
                timeout, capped_by_budget = max(left, 1.0), True
        record = run_one(row, child, opts, workdir, timeout)
        record["timeout_seconds"] = None if timeout is None else round(timeout, 1)
        record["timeout_capped_by_budget"] = capped_by_budget
        record["env"] = {**opts.env, **(extra or {})}
        append_record(opts.out_path, record)
        if record.get("status") in TERMINAL:
            recorded.add(row["name"])
        summary.results.append(record)
        if opts.on_result:
            opts.on_result(record)
        if opts.after_row:
            opts.after_row(row, record)
    return summary


def _skip_for_budget(row: dict, est: float, opts: RunOptions, start: float, summary: Summary) -> bool:
    """True (and a "skipped" record written) when the row's estimate would end past the budget."""
    elapsed = opts.clock() - start
    if opts.budget_seconds is None or elapsed + est <= opts.budget_seconds:
        return False
    summary.skipped.append(row["name"])
    summary.stopped_early = True
    append_record(opts.out_path, {"name": row["name"], "split": row.get("split"), "status": "skipped",
                                  "reason": f"time budget: {elapsed:.0f} s used + {est:.0f} s estimated "
                                            f"> {opts.budget_seconds:.0f} s"})
    return True


def run_one(row: dict, child: Callable[[dict, dict], dict] | str, opts: RunOptions, workdir: str,
            timeout: float | None) -> dict:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in row["name"])
    result_path = os.path.join(workdir, f"{safe}.result.json")
    partial_path = result_path + ".partial"
    log_path = os.path.join(workdir, f"{safe}.log")
    for p in (result_path, partial_path):
        if os.path.exists(p):
            os.unlink(p)
    ctx = dict(opts.ctx)
    if opts.ctx_for:
        ctx.update(opts.ctx_for(row))
    ctx.update(partial_path=partial_path, workdir=workdir)
    started_wall = time.time()
    t0 = opts.clock()
    if opts.mode == "fork":
        if not callable(child):
            raise TypeError("fork mode needs a callable child")
        proc = start_fork(child, row, ctx, result_path, log_path)
    elif opts.mode == "spawn":
        if not isinstance(child, str):
            raise TypeError("spawn mode needs the child as 'module:function'")
        proc = start_spawn(child, row, ctx, result_path, log_path, opts.spawn_sys_path)
    else:
        raise ValueError(f"unknown mode {opts.mode!r}")
    timed_out = False
    while proc.poll() is None:
        if timeout is not None and opts.clock() - t0 > timeout:
            proc.kill()
            timed_out = True
            break
        time.sleep(opts.poll_seconds)
    wall = opts.clock() - t0

    result: dict[str, Any] | None = None
    if os.path.exists(result_path):
        try:
            with open(result_path) as f:
                result = json.load(f)
        except (OSError, json.JSONDecodeError):
            result = None
    partial = None
    if result is None and os.path.exists(partial_path):
        try:
            with open(partial_path) as f:
                partial = json.load(f)
        except (OSError, json.JSONDecodeError):
            partial = None
    if result is not None:
        record = dict(result)
    else:
        record = dict(partial or {})
        record["partial"] = partial is not None
        if timed_out:
            record["status"] = "timeout"
            record["error"] = f"killed after {timeout:.0f} s (phase {record.get('phase', '?')})"
        else:
            record["status"] = "error"
            rc = proc.returncode
            how = f"signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}"
            record["error"] = f"child ended without a result ({how}, phase {record.get('phase', '?')})"
    record["name"] = row["name"]
    record["split"] = row.get("split")
    record["row"] = opts.record_row(row) if opts.record_row else row
    record["wall_seconds"] = round(wall, 3)
    record["exit_code"] = proc.returncode
    record["pid"] = proc.pid
    record["runner"] = opts.mode
    record["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started_wall))
    if proc.maxrss_bytes is not None:
        record["child_maxrss_bytes"] = proc.maxrss_bytes
    log_tail = tail(log_path, COMBINED_LOG_LINES)
    if record.get("status") != "ok":
        record["log_tail"] = log_tail[-LOG_TAIL_LINES:]
    if opts.log_path:
        with open(opts.log_path, "a") as f:
            f.write(f"===== {row['name']} status={record.get('status')} wall={wall:.1f}s =====\n")
            f.write("\n".join(log_tail) + ("\n" if log_tail else ""))
    for p in (result_path, partial_path, log_path, result_path + ".job.json"):
        if os.path.exists(p):
            os.unlink(p)
    return record


# ---------------------------------------------------------------------------------------------------------------
# A background job (the DeepSpeed op builds) that runs while rows run.
# ---------------------------------------------------------------------------------------------------------------

class Background:
    """A forked (or spawned) helper the parent can wait for with a deadline."""

    def __init__(self, fn: Callable[[], Any] | list[str], log_path: str, *, nice: int = 10):
        self.t0 = time.monotonic()
        self.seconds: float | None = None
        self.log_path = log_path
        if callable(fn):
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    _as_child(log_path)
                    os.nice(nice)
                    fn()
                    code = 0
                except BaseException:
                    import traceback

                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            self.child = Child(pid=pid, result_path="", log_path=log_path)
            LIVE.add(self.child)
        else:
            log = open(log_path, "w")
            try:
                popen = subprocess.Popen(["nice", "-n", str(nice), *fn], stdout=log, stderr=subprocess.STDOUT,
                                         **_own_group())
            finally:
                log.close()
            self.child = Child(pid=popen.pid, result_path="", log_path=log_path, popen=popen)
            LIVE.add(self.child)

    def done(self) -> bool:
        rc = self.child.poll()
        if rc is not None and self.seconds is None:
            self.seconds = round(time.monotonic() - self.t0, 1)
        return rc is not None

    def wait(self, deadline_seconds: float | None) -> bool:
        """True when it finished within the deadline (None: wait for ever)."""
        end = None if deadline_seconds is None else time.monotonic() + deadline_seconds
        while not self.done():
            if end is not None and time.monotonic() > end:
                return False
            time.sleep(0.2)
        return True

    def kill(self) -> None:
        if not self.done():
            self.child.kill()
            self.seconds = round(time.monotonic() - self.t0, 1)

    @property
    def returncode(self) -> int | None:
        return self.child.returncode
