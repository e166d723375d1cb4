"""A script reads failures from the exit code and stdout alike: recommend --json prints JSON when nothing is
feasible (exit 1), and verify --dry-run exits 1 when the bundle's files fail their own checks (0 when only this
machine could not run them)."""

from __future__ import annotations

import json

from advisor.bundle.generate import generate
from advisor.cli import main
from advisor.core.request import Request


def test_recommend_json_when_nothing_is_feasible(capsys):
    code = main(["recommend", "--model", "405B", "--tokens", "1000000000", "--gpu-types", "T4", "--max-gpus", "1",
                 "--method", "full", "--backend", "single", "--offload", "none", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["ok"] is False and doc["options"] == [] and doc["request"]["model"] == "405B"
    assert doc["error"].startswith("no plan") and doc["hint"]


def test_verify_dry_run_exits_1_on_files_that_fail_their_checks(tmp_path, capsys):
    out = tmp_path / "b"
    generate(Request(model="0.5B", gpu="H100-80GB", gpus=1), out=str(out))
    assert main(["verify", str(out), "--dry-run"]) == 0  # a CPU machine cannot run it: no reason for exit 1
    cfg = json.loads((out / "model_config.json").read_text())
    cfg["num_hidden_layers"] = 10 ** 6  # another architecture than the plan's: consistency fails
    (out / "model_config.json").write_text(json.dumps(cfg))
    capsys.readouterr()
    assert main(["verify", str(out), "--dry-run", "--json"]) == 1
    steps = {s["name"]: s["status"] for s in json.loads(capsys.readouterr().out)["steps"]}
    assert steps["consistency"] == "fail"
