"""NVMe offload's folder: --nvme-path reaches ds_config.json, the README and the re-create line encoded for each,
launch.sh checks the folder (writable, room for the swap files) before DeepSpeed would fail on it, and the estimate
says how much disk the swap files take (memory.nvme_bytes)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from plan_defaults import build_plan

from advisor.catalog import resolve_gpu, resolve_model
from advisor.core.plan import Plan
from advisor.core.target import Target
from advisor.model.memory import estimate_memory

NVME = ("--gpus", "1", "--gpu", "H100-80GB", "--backend", "deepspeed", "--zero", "3", "--offload", "all",
        "--offload-device", "nvme", "--micro-batch", "4", "--grad-accum", "1", "--no-grad-ckpt")


def advisor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """A bundle whose --nvme-path holds the characters each file's language treats specially."""
    out = tmp_path_factory.mktemp("nvme") / "bundle"
    path = "/tmp/nvme swap's `dir` $(touch pwned) \"q\""
    proc = advisor("generate", "--model", "qwen2.5-0.5b", *NVME, "--nvme-path", path, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out, path


def test_the_path_is_written_into_both_offload_blocks_and_the_readme(bundle):
    out, path = bundle
    zero = json.loads((out / "ds_config.json").read_text())["zero_optimization"]
    assert zero["offload_optimizer"]["nvme_path"] == path and zero["offload_param"]["nvme_path"] == path
    readme = (out / "README.md").read_text()
    assert "swaps to ``" + path + "``" in readme
    assert "GiB on each node" in readme


def test_the_recreate_line_quotes_the_path_for_the_shell(bundle):
    out, path = bundle
    line = next(x for x in (out / "launch.sh").read_text().splitlines() if x.startswith("# Re-create: "))
    args = shlex.split(line.removeprefix("# Re-create: "))
    assert args[args.index("--nvme-path") + 1] == path


def _check_block(bundle_dir: Path, tmp_path: Path, ds_edit=None, need_kib: int | None = None):
    """launch.sh's NVMe check alone, run by bash in a copy of the bundle (the rest would start the training)."""
    text = (bundle_dir / "launch.sh").read_text()
    block = re.search(r"^NVME_NEED_KIB=.*?^done <<<\"\$NVME_DIRS\"\n", text, re.S | re.M).group(0)
    if need_kib is not None:
        block = re.sub(r"^NVME_NEED_KIB=\S+", f"NVME_NEED_KIB={need_kib}", block, flags=re.M)
    ds = json.loads((bundle_dir / "ds_config.json").read_text())
    if ds_edit:
        ds_edit(ds)
    (tmp_path / "ds_config.json").write_text(json.dumps(ds))
    script = "set -euo pipefail\n" + block + "echo checked\n"
    return subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)


def _point_at(folder: str):
    def edit(ds):
        for key in ("offload_optimizer", "offload_param"):
            ds["zero_optimization"][key]["nvme_path"] = folder
    return edit


def test_launch_checks_a_writable_folder_with_room_and_runs_nothing_it_reads(bundle, tmp_path):
    out, path = bundle
    ok = tmp_path / "swap"
    ok.mkdir()
    proc = _check_block(out, tmp_path, _point_at(str(ok / "not-yet" / "made")))
    assert proc.returncode == 0 and proc.stdout.strip() == "checked", proc.stderr
    # the generated path itself (quotes, $(...), backticks) is read as data: nothing it names is run
    proc = _check_block(out, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_launch_refuses_a_path_under_a_file(bundle, tmp_path):
    out, _ = bundle
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = _check_block(out, tmp_path, _point_at(str(blocker / "swap")))
    assert proc.returncode == 1
    assert "not a folder this user can write" in proc.stderr and "--nvme-path" in proc.stderr


def test_launch_refuses_a_drive_without_room(bundle, tmp_path):
    out, _ = bundle
    proc = _check_block(out, tmp_path, _point_at(str(tmp_path)), need_kib=10**15)
    assert proc.returncode == 1 and "GiB free" in proc.stderr and "need about" in proc.stderr


def test_launch_says_when_ds_config_does_not_read(bundle, tmp_path):
    out, _ = bundle
    (tmp_path / "ds_config.json").write_text("{")
    text = (out / "launch.sh").read_text()
    block = re.search(r"^NVME_NEED_KIB=.*?^done <<<\"\$NVME_DIRS\"\n", text, re.S | re.M).group(0)
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and "does not read as JSON" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args,message", [
    (("--nvme-path", "/mnt/nvme"), "--offload-device nvme"),
    (("--offload", "all", "--offload-device", "nvme", "--nvme-path", "relative/dir"), "absolute"),
    (("--offload", "all", "--offload-device", "nvme", "--nvme-path", "/a\nb"), "newline"),
    (("--offload", "all", "--offload-device", "cpu", "--nvme-path", "/mnt/nvme"), "--offload-device nvme"),
])
def test_a_path_that_cannot_be_used_is_a_usage_error(args, message):
    proc = advisor("estimate", "--model", "qwen2.5-0.5b", *args)
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert lines[0].startswith("error: ") and message in proc.stderr and "Traceback" not in proc.stderr
    assert len(lines) == 2


def _plan(**kw) -> Plan:
    return build_plan(**{"backend": "deepspeed", "zero_stage": 3, "offload": "all", "offload_device": "nvme",
                         "micro_batch": 1, "num_processes": 8, "gpus_per_node": 8, **kw})


def test_the_swap_files_are_the_optimizer_states_and_grads_plus_the_16_bit_weights_per_node():
    """16 bytes per trainable parameter (fp32 master, two Adam moments, fp32 gradient) and, offloading all, 2 per
    parameter: 18 per parameter of a full fine-tune over one node, half of it on each of two nodes, and nothing
    without NVMe."""
    model = resolve_model("llama-3.1-8b")
    one = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=8, nodes=1)
    two = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=8, nodes=2)
    node = estimate_memory(model, _plan(), one).nvme_bytes
    assert node == pytest.approx(18 * model.params, rel=0.001)
    assert estimate_memory(model, _plan(num_processes=16, nodes=2), two).nvme_bytes == pytest.approx(node / 2, rel=0.001)
    assert estimate_memory(model, _plan(offload="optimizer"), one).nvme_bytes == pytest.approx(16 * model.params,
                                                                                                rel=0.001)
    assert estimate_memory(model, _plan(offload_device="cpu"), one).nvme_bytes == 0
