"""A two-node bundle really launches as two nodes: launch.sh run twice on this host, MACHINE_RANK 0 and 1, rendezvous
on 127.0.0.1, each node one CPU process (gloo), a tiny random model built from the bundle's model_config.json. The
same launch.sh and accelerate.yaml a cluster runs; only train.py's --cpu differs. Both ranks train, write their
metrics, and exit 0; DDP is told that every parameter gets a gradient (no per-step unused-parameter search)."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli import main

pytestmark = [
    pytest.mark.train,
    pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs the [train] extra (trl, torch)"),
]

TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 512, "head_dim": 16}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("trainer, pins", [
    ("sft", []),
    # TRL's precomputed reference log-probs: written by the main process, read by every rank from one cache file
    ("dpo", ["--ref-model", "precompute"]),
    ("kto", ["--ref-model", "precompute"]),
])
def test_two_nodes_on_one_host(trainer, pins, tmp_path, capsys):
    out = tmp_path / "bundle"
    assert main(["generate", "--model", "0.5B", "--trainer", trainer, "--gpus", "1", "--nodes", "2", "--gpu",
                 "H100-80GB", "--backend", "ddp", "--method", "full", "--micro-batch", "2", "--grad-accum", "1",
                 "--seq-len", "64", *pins, "--out", str(out)]) == 0
    capsys.readouterr()
    assert "ddp_find_unused_parameters=False" in (out / "train.py").read_text()
    config = json.loads((out / "model_config.json").read_text())
    (out / "model_config.json").write_text(json.dumps({**config, **TINY}))
    env = {**os.environ, "MAIN_PROCESS_IP": "127.0.0.1", "MAIN_PROCESS_PORT": str(_free_port()),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    args = ["bash", "launch.sh", "--cpu", "--random-init", "--synthetic-data", "--max-steps", "2",
            "--metrics-dir", str(tmp_path / "metrics")]
    nodes = [subprocess.Popen(args, cwd=out, env={**env, "MACHINE_RANK": str(rank)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for rank in (1, 0)]
    logs = [node.communicate(timeout=600)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(log[-3000:] for log in logs)
    for rank in (0, 1):
        lines = (tmp_path / "metrics" / f"rank{rank}.jsonl").read_text().splitlines()
        assert any(json.loads(line).get("event") == "step" for line in lines), (rank, lines)
    assert not any("find_unused_parameters=True" in log for log in logs)
