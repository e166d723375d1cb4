"""launch.sh and slurm.sbatch as a cluster user runs them: from another folder, a bundle folder with a space in its
name, values from the environment that are wrong, a port already taken, a proxy, no curl, outside SLURM. Run for
real with the stand-ins of tests/generate/standins.py (vllm, accelerate, scontrol, srun).

The classes checked: every value launch.sh or slurm.sbatch reads from the environment is checked before anything
starts (bash arithmetic on a bad value reports an error and skips the rest of the block, exit status 0); arguments
reach train.py exactly as given; the vLLM server is reached directly whatever the proxy settings and tools; GPUs
listed in CUDA_VISIBLE_DEVICES are enough for the processes started; srun gets one task per node with the job's
CPUs and each node its own rank.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from standins import alive, free_port, generate_quietly, kill_leftovers, make_bin, records, stand_in_pids

pytestmark = pytest.mark.skipif(not (shutil.which("bash") and shutil.which("setsid")), reason="needs bash and setsid")

H100 = ["--gpu", "H100-80GB"]
SINGLE = ["--model", "0.5B", "--gpus", "1", *H100]
DDP8 = ["--model", "7B", "--gpus", "8", "--backend", "ddp", "--method", "lora", *H100]
SERVER = ["--model", "7B", "--trainer", "grpo", "--vllm", "server", "--vllm-gpus", "2", "--gpus", "8", *H100]
TWO_NODES = ["--model", "70B", "--gpus", "8", "--nodes", "2", *H100]
SERVER_TWO_NODES = [*SERVER, "--nodes", "2"]
BASH = shutil.which("bash") or "bash"  # by its path: one test runs with a PATH of its own


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen") / "my runs"  # a space: every path must reach its command as one word
    cases = {"single": SINGLE, "ddp": DDP8, "server": SERVER, "two_nodes": TWO_NODES,
             "server_two_nodes": SERVER_TWO_NODES}
    return {name: generate_quietly(argv, root / f"{name} bundle") for name, argv in cases.items()}


class Shell:
    """Runs a copy of one bundle's launch.sh (or slurm.sbatch) from another folder, stand-ins first on PATH."""

    def __init__(self, bundle: Path, root: Path):
        self.dir = root / "a bundle"
        shutil.copytree(bundle, self.dir)
        self.port = free_port()  # VLLM_SERVER_PORT below: each server its own port, as a user picks one
        self.records = root / "records"
        self.records.mkdir()
        self.bin = make_bin(root / "bin")
        self.elsewhere = root / "elsewhere"
        self.elsewhere.mkdir()
        self.env = {"PATH": f"{self.bin}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(root), "LC_ALL": "C.UTF-8",
                    "STANDIN_RECORDS": str(self.records), "STANDIN_PORT": str(self.port), "STANDIN_TRAIN": "ok",
                    "STANDIN_VLLM": "ready:0", "STOP_TIMEOUT": "5", "VLLM_SERVER_PORT": str(self.port)}

    def run(self, *args: str, script: str = "launch.sh", timeout: float = 60, **env: str) -> tuple[int, str]:
        try:
            proc = subprocess.run([BASH, str(self.dir / script), *args], cwd=str(self.elsewhere),
                                  env={**self.env, **env}, capture_output=True, text=True, timeout=timeout,
                                  start_new_session=True)
        finally:
            kill_leftovers(self.records)
        return proc.returncode, proc.stderr

    def started(self, kind: str) -> list[dict]:
        return records(self.records, kind)


@pytest.fixture
def shell(tmp_path):
    made: list[Shell] = []

    def make(bundle: Path) -> Shell:
        made.append(Shell(bundle, tmp_path / str(len(made))))
        return made[-1]

    yield make
    for s in made:
        kill_leftovers(s.records)


# ------------------------------------------------------------------------------------------ arguments to train.py

ARGS = ["--max-steps", "3", "--dataset", "my org/data set", "--reward-module", "a b.py", ""]


@pytest.mark.parametrize("name", ["single", "ddp", "server"])
@pytest.mark.parametrize("lead", [[], ["--"]], ids=["plain", "double-dash"])
def test_arguments_reach_train_py_as_given(bundles, shell, name, lead):
    s = shell(bundles[name])
    rc, err = s.run(*lead, *ARGS)
    assert rc == 0, err
    (train,) = s.started("accelerate")
    argv = train["argv"]
    assert argv[argv.index("train.py") + 1:] == ARGS  # a leading -- is launch.sh's, not train.py's
    assert train["cwd"] == str(s.dir)


@pytest.mark.parametrize("code", [1, 2, 7, 137])
def test_the_exit_status_is_the_trainings(bundles, shell, code):
    for name in ("ddp", "server"):
        s = shell(bundles[name])
        rc, err = s.run(STANDIN_TRAIN=f"fail:{code}")
        assert rc == code, (name, err)
        assert [pid for pid in stand_in_pids(s.records) if alive(pid)] == []


# ------------------------------------------------------------------------------- values from the environment

def shell_quoted(value: str) -> str:
    """The value as bash's printf %q writes it: how launch.sh names a rejected value, on one line."""
    return subprocess.run(["bash", "-c", 'printf %q "$1"', "_", value], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.parametrize("name", ["server", "server_two_nodes"])
@pytest.mark.parametrize(("knob", "value"), [("VLLM_STARTUP_TIMEOUT", "15m"), ("STOP_TIMEOUT", "2s"),
                                             ("STOP_TIMEOUT", "08"), ("VLLM_STARTUP_TIMEOUT", "")])
def test_a_bad_timeout_stops_before_anything_starts(bundles, shell, name, knob, value):
    s = shell(bundles[name])
    env = {knob: value, "MACHINE_RANK": "0", "MAIN_PROCESS_IP": "127.0.0.1"}
    if value == "":  # empty means the default
        rc, err = s.run(**env)
        assert rc == 0, err
        return
    rc, err = s.run(**env)
    assert rc == 2 and f"{knob} must be a whole number of seconds, not {shell_quoted(value)}\n" in err, err
    assert s.started("vllm") == [] and s.started("accelerate") == []


@pytest.mark.parametrize("name", ["two_nodes", "server_two_nodes"])
@pytest.mark.parametrize("env", [{"MACHINE_RANK": "2"}, {"MACHINE_RANK": "x"}, {"MACHINE_RANK": "01"},
                                 {"SLURM_PROCID": "9"}, {"MACHINE_RANK": "0", "MAIN_PROCESS_PORT": "http"},
                                 {"MACHINE_RANK": "1", "MAIN_PROCESS_PORT": "70000"}],
                         ids=["rank-too-big", "rank-word", "rank-zero-padded", "procid-of-many-tasks", "port-word",
                              "port-too-big"])
def test_a_bad_rank_or_port_stops_before_anything_starts(bundles, shell, name, env):
    s = shell(bundles[name])
    rc, err = s.run(MAIN_PROCESS_IP="127.0.0.1", **env)
    assert rc == 2, err
    assert "ranks 0 .. 1" in err or "MAIN_PROCESS_PORT" in err, err
    assert s.started("vllm") == [] and s.started("accelerate") == []


@pytest.mark.parametrize(("name", "visible", "ok"), [
    ("ddp", "4,5,6,7", False), ("ddp", "0,1,2,3,4,5,6,7,8", True), ("ddp", "", True),
    ("two_nodes", "0,1", False), ("single", "4,5", True),
])
def test_too_few_visible_gpus_for_the_processes_is_said_before_anything_starts(bundles, shell, name, visible, ok):
    s = shell(bundles[name])
    rc, err = s.run(CUDA_VISIBLE_DEVICES=visible, MACHINE_RANK="0", MAIN_PROCESS_IP="127.0.0.1")
    if ok:
        assert rc == 0, err
        return
    assert rc == 2 and f"CUDA_VISIBLE_DEVICES={visible} lists {len(visible.split(','))} GPUs" in err, err
    assert s.started("accelerate") == []


# ------------------------------------------------------------------------------------------------ the vLLM server

def test_a_port_in_use_stops_before_the_server_starts(bundles, shell):
    s = shell(bundles["server"])
    with socket.socket() as taken:  # something already listens there (a server left from an earlier run)
        taken.bind(("127.0.0.1", s.port))
        taken.listen()
        rc, err = s.run()
    assert rc == 1 and f"127.0.0.1:{s.port} is already in use" in err, err
    assert s.started("vllm") == [] and s.started("accelerate") == []


def test_the_servers_port_from_the_environment_is_the_one_the_training_is_given(bundles, shell):
    """VLLM_SERVER_PORT (set by the Shell: a free port) is where `vllm serve` listens, and reaches the training's
    environment, where train.py reads it for vllm_server_port."""
    s = shell(bundles["server"])
    rc, err = s.run()
    assert rc == 0, err
    (served,) = s.started("vllm")
    assert served["argv"][served["argv"].index("--port") + 1] == str(s.port)
    (train,) = s.started("accelerate")
    assert train["server_port"] == str(s.port) and train["health"] == 200


@pytest.mark.parametrize("name", ["server", "server_two_nodes"])
@pytest.mark.parametrize("value", ["0", "08", "65536", "http", "80 80", "-1", "80\n00", "8000'; echo x"])
def test_a_bad_vllm_server_port_stops_before_anything_starts(bundles, shell, name, value):
    s = shell(bundles[name])
    rc, err = s.run(VLLM_SERVER_PORT=value, MACHINE_RANK="0", MAIN_PROCESS_IP="127.0.0.1")
    # one line whatever the value holds (a newline is written as $'80\n00')
    assert rc == 2 and (f"VLLM_SERVER_PORT={shell_quoted(value)} is not a TCP port (a whole number 1 .. 65535)\n"
                        in err), err
    assert s.started("vllm") == [] and s.started("accelerate") == []


@pytest.mark.parametrize("variable", ["http_proxy", "HTTP_PROXY", "all_proxy"])
def test_the_server_is_reached_directly_behind_a_proxy(bundles, shell, variable):
    s = shell(bundles["server"])
    dead = f"http://127.0.0.1:{free_port()}"  # a proxy that answers nothing
    rc, err = s.run(**{variable: dead, "no_proxy": "example.org"})
    assert rc == 0, err
    (train,) = s.started("accelerate")
    assert train["health"] == 200  # the training's own client (urllib here, requests in TRL) reaches the server


def test_the_server_is_waited_for_without_curl(bundles, shell, tmp_path):
    s = shell(bundles["server"])
    tools = tmp_path / "tools"  # what launch.sh needs besides the stand-ins, and no curl
    tools.mkdir()
    for tool in ("dirname", "setsid", "sleep", "tail", "mkdir", "cat", "env"):
        found = shutil.which(tool)
        assert found, tool
        (tools / tool).symlink_to(found)
    (tools / "python").symlink_to(sys.executable)
    rc, err = s.run(PATH=f"{s.bin}{os.pathsep}{tools}", STANDIN_VLLM="ready:1")
    assert rc == 0, err
    assert s.started("accelerate")[0]["health"] == 200  # training started once the server answered


# ----------------------------------------------------------------------------------------------------- slurm.sbatch

def _sbatch_env(s: Shell, **extra: str) -> dict[str, str]:
    return {"STANDIN_NODES": "gpu-a,gpu-b", "SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "gpu-[a-b]",
            "SLURM_NNODES": "2", "SLURM_JOB_NUM_NODES": "2", "SLURM_SUBMIT_DIR": str(s.dir),
            "SLURM_CPUS_PER_TASK": "48", **extra}


def test_outside_slurm_the_sbatch_script_says_how_to_run(bundles, shell):
    s = shell(bundles["two_nodes"])
    rc, err = s.run(script="slurm.sbatch")
    assert rc == 2 and "not inside a SLURM job" in err and "sbatch slurm.sbatch" in err, err
    assert "unbound variable" not in err
    assert s.started("srun") == []


def test_a_job_with_another_node_count_is_refused(bundles, shell):
    s = shell(bundles["two_nodes"])
    rc, err = s.run(script="slurm.sbatch", **_sbatch_env(s, SLURM_NNODES="3", SLURM_JOB_NUM_NODES="3"))
    assert rc == 2 and "this job has 3 nodes; the plan is for 2" in err, err
    assert s.started("srun") == []


@pytest.mark.parametrize("name", ["two_nodes", "server_two_nodes"])
def test_each_node_gets_its_own_rank_and_the_jobs_cpus(bundles, shell, name):
    s = shell(bundles[name])
    # sbatch passes the submitting shell's environment on: a MACHINE_RANK set there must not reach the nodes
    rc, err = s.run("--max-steps", "1", script="slurm.sbatch", **_sbatch_env(s, MACHINE_RANK="0"))
    assert rc == 0, err
    ranks = [r["argv"][r["argv"].index("--machine_rank") + 1] for r in s.started("accelerate")]
    assert ranks == ["0", "1"]
    (srun,) = s.started("srun")
    assert {"--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--cpus-per-task=48"} <= set(srun["argv"]), srun
