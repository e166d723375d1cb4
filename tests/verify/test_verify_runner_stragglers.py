"""verify's runner and the processes a run leaves outside its process group.

launch.sh starts the vLLM server and the training under setsid (sessions of their own), so the runner's signal to
launch.sh's group does not reach them; a launch.sh killed before it stops them (SIGKILL after the grace period, a
bug, a user's edit) leaves them running, holding the GPUs and the output pipe. The runner must end every process the
run started, whichever group it is in, promptly, without a traceback from its reader thread.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from generate.standins import alive

from advisor.verify.runner import RUN_TAG, run_command, tagged_pids

pytestmark = pytest.mark.skipif(not (shutil.which("bash") and shutil.which("setsid") and Path("/proc").is_dir()),
                                reason="needs bash, setsid and /proc")


@pytest.fixture
def thread_errors(monkeypatch):
    errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    return errors


@pytest.fixture
def stray(tmp_path):
    """The pid file a test's escaped process writes; whatever is left is killed after the test."""
    path = tmp_path / "stray.pid"
    yield path
    if path.exists():
        pid = int(path.read_text())
        if alive(pid):
            os.kill(pid, 9)


# A process in a session of its own that ignores SIGTERM and keeps writing to the run's output.
ESCAPE = "setsid bash -c 'trap \"\" TERM; while true; do echo tick; sleep 0.2; done' & echo $! > {pid}; "


def test_a_timeout_ends_processes_outside_the_group(tmp_path, stray, thread_errors):
    start = time.monotonic()
    result = run_command(["bash", "-c", ESCAPE.format(pid=stray) + "wait"], cwd=tmp_path,
                         log_path=tmp_path / "verify.log", timeout_seconds=1, progress=None)
    assert result.timed_out
    assert not alive(int(stray.read_text()))
    assert time.monotonic() - start < 15  # SIGTERM ignored: SIGKILL after the grace, not the reader's wait
    assert thread_errors == []
    assert "tick" in (tmp_path / "verify.log").read_text()


def test_a_run_that_exits_leaving_a_process_behind_does_not_leave_it_running(tmp_path, stray, thread_errors):
    result = run_command(["bash", "-c", ESCAPE.format(pid=stray) + "sleep 0.5; exit 4"], cwd=tmp_path,
                         log_path=tmp_path / "verify.log", timeout_seconds=60, progress=None)
    assert result.returncode == 4 and not result.timed_out
    assert not alive(int(stray.read_text()))
    assert thread_errors == []


def test_ctrl_c_ends_processes_outside_the_group(tmp_path, stray, thread_errors):
    import signal

    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        run_command(["bash", "-c", ESCAPE.format(pid=stray) + "wait"], cwd=tmp_path, log_path=tmp_path / "log",
                    progress=None)
    assert not alive(int(stray.read_text()))
    assert thread_errors == []


def test_only_the_runs_own_processes_are_found(tmp_path):
    proc_root = tmp_path / "proc"
    for pid, environ in {"101": f"A=1\0{RUN_TAG}=abc\0", "102": f"{RUN_TAG}=abcd\0", "103": "B=2\0",
                         "self": f"{RUN_TAG}=abc\0"}.items():
        (proc_root / pid).mkdir(parents=True)
        (proc_root / pid / "environ").write_bytes(environ.encode())
    assert tagged_pids("abc", proc_root) == [101]
