"""The vLLM server orchestration of a generated launch.sh, run for real with stand-ins (tests/generate/standins.py):
a `vllm` that is an HTTP server answering /health when the test says, an `accelerate` that records when and where
it started, the real bash, curl and setsid.

What the bundle promises: training starts only after /health answers; a server that exits while starting, or is
not ready in time, ends the script with a non-zero status, the log's path and no server left; a server that dies
while training runs stops the training; SIGINT and SIGTERM stop both (no process left behind); the server gets the
plan's vLLM GPUs and the training the others (counted within CUDA_VISIBLE_DEVICES when it is set).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from standins import alive, free_port, generate_quietly, kill_leftovers, make_bin, records, stand_in_pids, wait_until

from advisor.bundle.consistency import train_constants
from advisor.cli import main

pytestmark = pytest.mark.skipif(not (shutil.which("bash") and shutil.which("setsid")), reason="needs bash and setsid")

SERVER_4_4 = ["--model", "7B", "--trainer", "grpo", "--vllm", "server", "--vllm-gpus", "4", "--gpus", "8",
              "--gpu", "H100-80GB"]
"""GRPO with a vLLM server: 4 GPUs generate, 4 train, of one node's 8."""
SERVER_TWO_NODES = SERVER_4_4 + ["--nodes", "2"]


@pytest.fixture(scope="module")
def server_bundle(tmp_path_factory) -> Path:
    return generate_quietly(SERVER_4_4, tmp_path_factory.mktemp("gen") / "server")


@pytest.fixture(scope="module")
def two_node_bundle(tmp_path_factory) -> Path:
    return generate_quietly(SERVER_TWO_NODES, tmp_path_factory.mktemp("gen") / "server2")


class Run:
    """One launch.sh run in a copy of the bundle, its own port, stand-ins first on PATH."""

    def __init__(self, bundle: Path, root: Path):
        self.dir = root / "bundle"
        shutil.copytree(bundle, self.dir)
        # Tests run side by side: each server gets a free port, through VLLM_SERVER_PORT as a user would give it
        self.port = free_port()
        self.records = root / "records"
        self.records.mkdir()
        self.bin = make_bin(root / "bin")
        self.env = {"PATH": f"{self.bin}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(root),
                    "LC_ALL": "C.UTF-8", "STANDIN_RECORDS": str(self.records), "STANDIN_PORT": str(self.port),
                    "STOP_TIMEOUT": "5", "VLLM_SERVER_PORT": str(self.port)}
        self.proc: subprocess.Popen | None = None

    def start(self, *args: str, **env: str) -> subprocess.Popen:
        self.proc = subprocess.Popen(["bash", str(self.dir / "launch.sh"), *args], cwd=str(self.dir.parent),
                                     env={**self.env, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        return self.proc

    def run(self, *args: str, timeout: float = 60, **env: str) -> tuple[int, str]:
        proc = self.start(*args, **env)
        _, err = proc.communicate(timeout=timeout)
        return proc.returncode, err

    def one(self, kind: str) -> dict:
        found = records(self.records, kind)
        assert len(found) == 1, f"{kind}: {len(found)} records"
        return found[0]

    def left_running(self, grace: float = 5.0) -> list[int]:
        """Stand-in processes still running `grace` seconds after the script ended (a signalled process takes a
        moment to go)."""
        deadline = time.monotonic() + grace
        while True:
            left = [pid for pid in stand_in_pids(self.records) if alive(pid)]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.05)


@pytest.fixture
def run(server_bundle, tmp_path):
    r = Run(server_bundle, tmp_path)
    yield r
    if r.proc is not None and r.proc.poll() is None:
        os.killpg(r.proc.pid, signal.SIGKILL)
        r.proc.wait()
    kill_leftovers(r.records)


def _check_bundle(folder: Path) -> tuple[int, str]:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
        rc = main(["check", "--bundle", str(folder)])
    return rc, out.getvalue()


def test_the_bundles_pass_the_rule_engine(server_bundle, two_node_bundle):
    for folder in (server_bundle, two_node_bundle):
        rc, report = _check_bundle(folder)
        assert rc == 0, report


def test_training_starts_after_health_answers_on_its_own_gpus(run, server_bundle):
    rc, err = run.run("--max-steps", "1", STANDIN_VLLM="ready:2.5", STANDIN_TRAIN="ok")
    assert rc == 0, err
    vllm, ready, train = run.one("vllm"), run.one("vllm_ready"), run.one("accelerate")
    assert train["time"] >= ready["time"] and train["health"] == 200  # the server answered before training began
    assert vllm["cuda"] == "4,5,6,7" and train["cuda"] == "0,1,2,3"  # the plan's split, disjoint
    assert vllm["dev_mode"] == "1"  # the weight-transfer endpoints live behind VLLM_SERVER_DEV_MODE
    assert train["argv"][-3:] == ["train.py", "--max-steps", "1"]
    assert train["cwd"] == str(run.dir)
    assert run.left_running() == []  # the server is stopped once training is done


def test_server_flags_match_trl_vllm_serve_and_the_plan(run, server_bundle):
    rc, err = run.run(STANDIN_VLLM="ready:0", STANDIN_TRAIN="ok")
    assert rc == 0, err
    argv = run.one("vllm")["argv"]
    cfg = train_constants((server_bundle / "train.py").read_text(encoding="utf-8"))["CONFIG"]
    assert argv[:2] == ["serve", "Qwen/Qwen2.5-7B"]

    def value(flag):
        return argv[argv.index(flag) + 1]

    # what trl/scripts/vllm_serve.py build_command adds for vLLM >= 0.30.0 (the pinned 0.31.0)
    for flag in ("--enable-scale-out", "--weight-transfer-config", "--logprobs-mode", "--max-logprobs"):
        assert flag in argv, flag
    assert value("--weight-transfer-config") == '{"backend": "nccl"}'
    assert value("--logprobs-mode") == "processed_logprobs" and value("--max-logprobs") == "-1"
    assert "--trust-remote-code" not in argv
    # every request train.py sends fits: prompt <= seq_len - max_completion_len, completion <= max_completion_len
    assert int(value("--max-model-len")) == cfg["seq_len"]
    assert cfg["seq_len"] - cfg["max_completion_len"] > 0
    assert value("--tensor-parallel-size") == "4" and value("--data-parallel-size") == "1"
    assert value("--host") == cfg["vllm_server_host"]


def test_server_exiting_during_startup_fails_with_the_log_path(run):
    rc, err = run.run(STANDIN_VLLM="exit:0.5:3", STANDIN_TRAIN="ok")
    assert rc != 0
    log = run.dir / "logs" / "vllm.log"
    assert f"exited with status 3 while starting; its log: {log}" in err
    assert "CUDA out of memory" in err  # the log's last lines are shown
    assert records(run.records, "accelerate") == []  # training never started
    assert run.left_running() == []


def test_readiness_timeout_stops_the_server(run):
    start = time.monotonic()
    rc, err = run.run(STANDIN_VLLM="never", STANDIN_TRAIN="ok", VLLM_STARTUP_TIMEOUT="3")
    assert rc != 0 and "not ready after 3s" in err and str(run.dir / "logs" / "vllm.log") in err
    assert time.monotonic() - start < 20
    assert records(run.records, "accelerate") == []
    assert run.left_running() == []  # the server and its worker are gone


def test_a_server_that_ignores_sigterm_is_killed(run):
    rc, err = run.run(STANDIN_VLLM="stubborn", STANDIN_TRAIN="ok", STOP_TIMEOUT="1")
    assert rc == 0, err
    assert run.left_running() == []


def test_server_dying_while_training_runs_stops_the_training(run):
    start = time.monotonic()
    # the server answers /health for 6 s before it dies: launch.sh polls every 2 s, and a first poll that comes
    # before the stand-in listens (a slow interpreter start) must still find it up on the next one
    rc, err = run.run(STANDIN_VLLM="die:6", STANDIN_TRAIN="long")
    assert rc != 0
    assert "exited with status 1 while training ran; stopping the training" in err
    assert time.monotonic() - start < 30
    assert run.one("accelerate")  # it had started
    assert run.left_running() == []


def test_training_failure_is_the_exit_status_and_stops_the_server(run):
    rc, err = run.run(STANDIN_VLLM="ready:0", STANDIN_TRAIN="fail:7")
    assert rc == 7, err
    assert run.left_running() == []


@pytest.mark.parametrize(("sig", "status", "to_group"), [
    (signal.SIGINT, 130, True),    # Ctrl-C in a terminal: the whole foreground process group gets SIGINT
    (signal.SIGINT, 130, False),   # SIGINT to the script alone
    (signal.SIGTERM, 143, False),  # a scheduler or `kill`
], ids=["ctrl-c", "sigint", "sigterm"])
def test_signals_stop_the_server_and_the_training(run, sig, status, to_group):
    proc = run.start(STANDIN_VLLM="ready:0", STANDIN_TRAIN="long")
    wait_until(lambda: records(run.records, "accelerate"), 30, "training to start")
    train = run.one("accelerate")
    assert alive(train["pid"]) and alive(train["worker"]) and alive(run.one("vllm")["worker"])
    if to_group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    assert "stopping the training and the vLLM server" in err
    assert run.left_running() == []


def test_the_server_is_told_to_stop_even_if_the_script_is_killed_while_stopping(run):
    """verify and SLURM send SIGKILL after a grace period of their own: by then the server must have had its
    SIGTERM, even while the training is slow to stop."""
    proc = run.start(STANDIN_VLLM="ready:0", STANDIN_TRAIN="stubborn", STOP_TIMEOUT="60")
    wait_until(lambda: records(run.records, "accelerate"), 30, "training to start")
    vllm = run.one("vllm")
    os.killpg(proc.pid, signal.SIGTERM)
    time.sleep(1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)  # not communicate(): the stubborn training, left running, holds the pipes open
    left = run.left_running()
    assert vllm["pid"] not in left and vllm["worker"] not in left


def test_gpu_numbers_count_within_cuda_visible_devices(run):
    """A scheduler that hands this job cards 8-15 of a 16-GPU host sets CUDA_VISIBLE_DEVICES: the plan's 0-7 are
    those, in that order."""
    rc, err = run.run(STANDIN_VLLM="ready:0", STANDIN_TRAIN="ok", CUDA_VISIBLE_DEVICES="8,9,10,11,12,13,14,15")
    assert rc == 0, err
    assert run.one("vllm")["cuda"] == "12,13,14,15" and run.one("accelerate")["cuda"] == "8,9,10,11"


def test_too_few_visible_gpus_is_an_error_before_anything_starts(run):
    rc, err = run.run(STANDIN_VLLM="ready:0", STANDIN_TRAIN="ok", CUDA_VISIBLE_DEVICES="0,1,2,3")
    assert rc != 0 and "CUDA_VISIBLE_DEVICES=0,1,2,3 lists 4 GPUs; the plan uses 8 on each node" in err
    assert records(run.records, "vllm") == [] and records(run.records, "accelerate") == []


def test_other_nodes_train_without_a_server(two_node_bundle, tmp_path):
    r = Run(two_node_bundle, tmp_path)
    try:
        rc, err = r.run("--max-steps", "1", MACHINE_RANK="1", MAIN_PROCESS_IP="127.0.0.1", STANDIN_TRAIN="ok")
        assert rc == 0, err
        assert records(r.records, "vllm") == []
        train = r.one("accelerate")
        assert train["cuda"] == "0,1,2,3"
        argv = train["argv"]
        assert argv[argv.index("--machine_rank") + 1] == "1" and argv[argv.index("--num_machines") + 1] == "2"
    finally:
        kill_leftovers(r.records)

