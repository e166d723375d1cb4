"""The real runner (advisor.verify.run_command) and the generated launch.sh, run with bash: exit codes, the log,
the timeout that stops the whole process group, and DS012's TORCH_CUDA_ARCH_LIST clean-up for DeepSpeed bundles."""

from __future__ import annotations

import io
import os
import shutil
import time

import pytest
from verify_cases import make_bundle, plan

from advisor.verify import run_command

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_run_command_logs_output_and_returns_the_exit_code(tmp_path):
    log = tmp_path / "verify.log"
    progress = io.StringIO()
    result = run_command(["bash", "-c", "echo first; echo 'second' >&2; exit 3"], cwd=tmp_path, log_path=log,
                         timeout_seconds=30, progress=progress)
    assert result.returncode == 3 and not result.timed_out
    assert log.read_text().splitlines() == ["first", "second"]
    assert progress.getvalue() == "  | first\n  | second\n"  # not a terminal: every line, indented


def test_run_command_timeout_stops_the_process_group(tmp_path):
    # the child of the command (a background sleep) must die too: accelerate's workers are such children
    script = "sleep 60 & echo $! > child.pid; wait"
    start = time.monotonic()
    result = run_command(["bash", "-c", script], cwd=tmp_path, log_path=tmp_path / "verify.log", timeout_seconds=1,
                         progress=None)
    assert result.timed_out and time.monotonic() - start < 30
    pid = int((tmp_path / "child.pid").read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the command's child {pid} is still running after the timeout")


def _fake_accelerate(tmp_path):
    """An `accelerate` on PATH that prints what train.py would see, instead of training."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "accelerate"
    stub.write_text('#!/usr/bin/env bash\necho "ARCH=${TORCH_CUDA_ARCH_LIST-<unset>} ARGS=$*"\n')
    stub.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.mark.parametrize(("given", "seen"), [
    ("9.0a", "9.0"),
    ("9.0a;10.0a", "9.0;10.0"),
    ("8.0 8.6+PTX 9.0a+PTX", "8.0 8.6+PTX 9.0+PTX"),
    ("9.0", "9.0"),
    (None, "<unset>"),
])
def test_deepspeed_launch_strips_arch_suffixes(tmp_path, given, seen):
    bundle = make_bundle(tmp_path, plan(backend="deepspeed", zero_stage=2, num_processes=2, gpus_per_node=2))
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    env["PATH"] = _fake_accelerate(tmp_path)
    if given is not None:
        env["TORCH_CUDA_ARCH_LIST"] = given
    result = run_command(["bash", "launch.sh", "--max-steps", "2"], cwd=bundle, log_path=tmp_path / "out.log",
                         timeout_seconds=30, progress=None, env=env)
    assert result.returncode == 0, (tmp_path / "out.log").read_text()
    line = (tmp_path / "out.log").read_text().strip().splitlines()[-1]
    assert line == f"ARCH={seen} ARGS=launch --config_file accelerate.yaml train.py --max-steps 2"


def test_non_deepspeed_launch_leaves_the_arch_list_alone(tmp_path):
    bundle = make_bundle(tmp_path, plan(backend="ddp", num_processes=2, gpus_per_node=2))
    assert "TORCH_CUDA_ARCH_LIST" not in (bundle / "launch.sh").read_text()
    env = dict(os.environ, PATH=_fake_accelerate(tmp_path), TORCH_CUDA_ARCH_LIST="9.0a")
    run_command(["bash", "launch.sh"], cwd=bundle, log_path=tmp_path / "out.log", timeout_seconds=30, progress=None,
                env=env)
    assert (tmp_path / "out.log").read_text().strip().splitlines()[-1].startswith("ARCH=9.0a ")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return True


def test_ctrl_c_ends_every_process_the_run_started(tmp_path):
    """SIGINT reaches verify, not the run's own process group: the runner must stop the group, grandchildren
    (accelerate's workers, DeepSpeed's) included, and then let the interrupt through."""
    import signal
    import threading

    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 120 & echo $! > {pid_file}; wait"
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        run_command(["bash", "-c", script], cwd=tmp_path, log_path=tmp_path / "log", progress=None)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)
