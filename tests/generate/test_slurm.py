"""slurm.sbatch, run as sbatch runs it: a copy in a spool folder, started from the folder the job was submitted from,
with stand-in `scontrol` and `srun` (tests/generate/standins.py) and a stand-in `accelerate` that records where and
with which rank it started. The script must find its bundle from the job's recorded Command= path (sbatch resolves
it to an absolute one), else from the submit folder, else stop with a clear error.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from standins import free_port, generate_quietly, kill_leftovers, make_bin, records

from advisor.cli import main

pytestmark = pytest.mark.skipif(not (shutil.which("bash") and shutil.which("setsid")), reason="needs bash and setsid")

FSDP_TWO_NODES = ["--model", "70B", "--trainer", "sft", "--gpu", "H100-80GB", "--gpus", "8", "--nodes", "2"]
ZERO3_TWO_NODES = FSDP_TWO_NODES + ["--backend", "deepspeed", "--zero", "3"]
GRPO_SERVER_TWO_NODES = ["--model", "7B", "--trainer", "grpo", "--vllm", "server", "--vllm-gpus", "4", "--gpus", "8",
                         "--nodes", "2", "--gpu", "H100-80GB"]


@pytest.fixture(scope="module")
def fsdp_bundle(tmp_path_factory) -> Path:
    # a space in the path: the bundle's folder reaches cd and srun as one word
    return generate_quietly(FSDP_TWO_NODES, tmp_path_factory.mktemp("gen") / "my runs" / "sft-70b")


@pytest.fixture(scope="module")
def zero3_bundle(tmp_path_factory) -> Path:
    return generate_quietly(ZERO3_TWO_NODES, tmp_path_factory.mktemp("gen") / "zero3")


def _submit(bundle: Path, root: Path, submit_dir: Path, *args: str, command: str | None = "script",
            **env: str) -> tuple[int, str, Path]:
    """Run slurm.sbatch as slurmd does: a copy of it (spool/slurm_script) started in the submit folder, with the
    job's environment. `command` is what `scontrol show job` reports as Command= ("script": the bundle's
    slurm.sbatch; None: no record)."""
    spool = root / "spool" / "job1234"
    spool.mkdir(parents=True)
    shutil.copy(bundle / "slurm.sbatch", spool / "slurm_script")
    recs = root / "records"
    recs.mkdir()
    stand_ins = make_bin(root / "bin")
    job_env = {"PATH": f"{stand_ins}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(root), "LC_ALL": "C.UTF-8",
               "STANDIN_RECORDS": str(recs), "STANDIN_NODES": "gpu-node-a,gpu-node-b", "STANDIN_TRAIN": "ok",
               "SLURM_JOB_ID": "1234", "SLURM_JOB_NODELIST": "gpu-node-[a-b]", "SLURM_NNODES": "2",
               "SLURM_SUBMIT_DIR": str(submit_dir), **env}
    if command == "script":
        job_env["STANDIN_JOB_COMMAND"] = str(bundle / "slurm.sbatch")
    elif command is not None:
        job_env["STANDIN_JOB_COMMAND"] = command
    try:
        proc = subprocess.run(["bash", str(spool / "slurm_script"), *args], cwd=str(submit_dir), env=job_env,
                              capture_output=True, text=True, timeout=120)
    finally:
        kill_leftovers(recs)
    return proc.returncode, proc.stderr, recs


def _trained_in(recs: Path) -> list[tuple[str, str, str]]:
    """(working folder, --machine_rank, --main_process_ip) of each `accelerate launch`, in start order."""
    out = []
    for r in records(recs, "accelerate"):
        argv = r["argv"]
        out.append((r["cwd"], argv[argv.index("--machine_rank") + 1], argv[argv.index("--main_process_ip") + 1]))
    return out


def test_the_bundles_pass_the_rule_engine(fsdp_bundle, zero3_bundle):
    for folder in (fsdp_bundle, zero3_bundle):
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
            rc = main(["check", "--bundle", str(folder)])
        assert rc == 0, out.getvalue()


def test_submitted_from_the_parent_folder(fsdp_bundle, tmp_path):
    rc, err, recs = _submit(fsdp_bundle, tmp_path, fsdp_bundle.parent, "--max-steps", "1")
    assert rc == 0, err
    assert _trained_in(recs) == [(str(fsdp_bundle), "0", "gpu-node-a"), (str(fsdp_bundle), "1", "gpu-node-a")]
    assert records(recs, "accelerate")[0]["argv"][-3:] == ["train.py", "--max-steps", "1"]
    assert f"slurm.sbatch: bundle {fsdp_bundle};" in err


def test_submitted_from_elsewhere(fsdp_bundle, tmp_path):
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    rc, err, recs = _submit(fsdp_bundle, tmp_path, elsewhere)
    assert rc == 0, err
    assert [cwd for cwd, _, _ in _trained_in(recs)] == [str(fsdp_bundle)] * 2


def test_falls_back_to_the_submit_folder_without_a_job_record(fsdp_bundle, tmp_path):
    rc, err, recs = _submit(fsdp_bundle, tmp_path, fsdp_bundle, command=None)
    assert rc == 0, err
    assert [cwd for cwd, _, _ in _trained_in(recs)] == [str(fsdp_bundle)] * 2


def test_bundle_dir_overrides(fsdp_bundle, tmp_path):
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    rc, err, recs = _submit(fsdp_bundle, tmp_path, elsewhere, command=None, BUNDLE_DIR=str(fsdp_bundle))
    assert rc == 0, err
    assert [cwd for cwd, _, _ in _trained_in(recs)] == [str(fsdp_bundle)] * 2


@pytest.mark.parametrize("command", [None, "(null)", "/nowhere/slurm.sbatch"], ids=["no-record", "stdin", "moved"])
def test_no_bundle_found_is_a_clear_error(fsdp_bundle, tmp_path, command):
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    rc, err, recs = _submit(fsdp_bundle, tmp_path, elsewhere, command=command)
    assert rc == 1
    assert "cannot find this bundle's folder" in err and "BUNDLE_DIR=/path/to/bundle" in err
    assert records(recs, "srun") == []


def test_two_node_grpo_server_starts_the_server_on_node_0_only(tmp_path):
    bundle = generate_quietly(GRPO_SERVER_TWO_NODES, tmp_path / "gen" / "grpo")
    port = free_port()  # the environment's VLLM_SERVER_PORT reaches launch.sh through sbatch and srun
    rc, err, recs = _submit(bundle, tmp_path, bundle.parent, STANDIN_VLLM="ready:0", STANDIN_PORT=str(port),
                            VLLM_SERVER_PORT=str(port), STOP_TIMEOUT="5")
    assert rc == 0, err
    assert [rank for _, rank, _ in _trained_in(recs)] == ["0", "1"]
    served = records(recs, "vllm")
    assert len(served) == 1 and served[0]["cuda"] == "4,5,6,7"
    assert [r["cuda"] for r in records(recs, "accelerate")] == ["0,1,2,3", "0,1,2,3"]
    # node 1 starts at once and waits for node 0 at torch's static rendezvous (600 s by default), while node 0 may
    # wait VLLM_STARTUP_TIMEOUT (900 s) for the server: every node's rendezvous outlasts that wait
    for rec in records(recs, "accelerate"):
        argv = rec["argv"]
        assert argv[argv.index("--rdzv_conf") + 1] == "timeout=1200", argv


def test_a_two_node_server_timeout_that_is_no_number_stops_before_anything_starts(tmp_path):
    bundle = generate_quietly(GRPO_SERVER_TWO_NODES, tmp_path / "gen" / "grpo")
    rc, err, recs = _submit(bundle, tmp_path, bundle.parent, VLLM_STARTUP_TIMEOUT="15m")
    assert rc != 0 and "VLLM_STARTUP_TIMEOUT must be a whole number of seconds, not 15m" in err
    assert not records(recs, "vllm") and not records(recs, "accelerate")


def _directives(text: str) -> dict[str, str]:
    """The options sbatch reads: `#SBATCH` lines before the first command (`##SBATCH` is a comment to it)."""
    out = {}
    for line in text.splitlines()[1:]:
        if line.startswith("#SBATCH "):
            option = line.split(None, 1)[1]
            name, _, value = option.partition("=")
            out[name] = value
        elif line.strip() and not line.startswith("#"):
            break
    return out


def test_site_placeholders_are_comments_sbatch_ignores(fsdp_bundle):
    text = (fsdp_bundle / "slurm.sbatch").read_text(encoding="utf-8")
    assert set(_directives(text)) == {"--job-name", "--nodes", "--ntasks-per-node", "--gres", "--cpus-per-task",
                                      "--exclusive", "--output"}
    for option in ("--partition", "--account", "--time"):
        assert re.search(rf"^##SBATCH {option}=\S+$", text, re.M), option


def test_network_hints_are_commented_exports(fsdp_bundle):
    text = (fsdp_bundle / "slurm.sbatch").read_text(encoding="utf-8")
    for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG"):
        line = next(ln for ln in text.splitlines() if f"export {name}=" in ln)
        assert line.startswith("# export ") and "  # " in line, line  # off by default, and says why
    assert not re.search(r"^\s*export NCCL_", text, re.M)


def test_only_deepspeed_bundles_mention_deepspeed(fsdp_bundle, zero3_bundle):
    assert "deepspeed" not in (fsdp_bundle / "slurm.sbatch").read_text(encoding="utf-8").lower()
    assert "deepspeed_multinode_launcher: standard" in (zero3_bundle / "slurm.sbatch").read_text(encoding="utf-8")


def test_the_first_command_a_multi_node_bundle_shows_is_one_that_runs(tmp_path):
    # `bash launch.sh` alone stops at once on a multi-node plan (MAIN_PROCESS_IP, MACHINE_RANK): what generate prints
    # and the README's run block lead with slurm.sbatch, and every bare launch.sh line carries the node's rank
    out = tmp_path / "two"
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(io.StringIO()):
        assert main(["generate", *FSDP_TWO_NODES, "--out", str(out)]) == 0
    wrote = next(line for line in buffer.getvalue().splitlines() if line.startswith("wrote"))
    assert "sbatch" in wrote and "MACHINE_RANK=<0..1> MAIN_PROCESS_IP=<node 0>" in wrote
    block = (out / "README.md").read_text().split("pip install -r requirements.txt\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert commands[0].startswith("sbatch slurm.sbatch")
    assert all(not line.startswith("bash launch.sh") for line in commands), commands


@pytest.mark.parametrize(("visible", "seen"), [(None, "0"), ("3,5", "3"), ("", "")])
def test_a_single_gpu_bundle_sees_one_gpu_on_a_machine_with_several(tmp_path, visible, seen):
    # with several GPUs visible to its one process the Trainer would use nn.DataParallel, which TRL refuses
    out = generate_quietly(["--model", "0.5B", "--gpu", "H100-80GB", "--gpus", "1"], tmp_path / "one")
    recs = tmp_path / "recs"
    recs.mkdir()
    bin_dir = make_bin(tmp_path / "bin", ("accelerate",))
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update({"PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", "STANDIN_RECORDS": str(recs),
                "STANDIN_TRAIN": "ok"})
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    proc = subprocess.run(["bash", "launch.sh"], cwd=out, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    started = records(recs, "accelerate")
    assert len(started) == 1 and started[0]["cuda"] == seen
