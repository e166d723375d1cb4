"""check --bundle with REQUEST flags: every flag is in the plan that is checked, or the check stops with a usage error
naming why (a flag the files' plan has no place for never passes silently); the ids check --bundle reports that are
not rules are explained; an empty path argument never means the current folder."""

from __future__ import annotations

import json

import pytest

from advisor import check
from advisor.cli import main


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundles")
    sft, gkd = root / "sft", root / "gkd"
    assert main(["generate", "--model", "qwen2.5-0.5b", "--gpu", "H100-80GB", "--out", str(sft)]) == 0
    assert main(["generate", "--model", "qwen2.5-0.5b", "--trainer", "gkd", "--teacher", "qwen2.5-1.5b",
                 "--gpu", "H100-80GB", "--out", str(gkd)]) == 0
    return {"sft": str(sft), "gkd": str(gkd)}


def _errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith(("error: ", "hint: "))]


@pytest.mark.parametrize(("flags", "named"), [
    (["--zero", "3"], "--zero 3"),  # no DeepSpeed in the files
    (["--offload", "optimizer"], "--offload optimizer"),
    (["--vllm", "server"], "--vllm server"),  # SFT does not sample
    (["--num-generations", "8"], "--num-generations 8"),
    (["--teacher", "qwen2.5-1.5b"], "--teacher"),  # no teacher in SFT
])
def test_a_flag_the_bundles_plan_has_no_place_for_is_a_usage_error(bundles, capsys, flags, named):
    capsys.readouterr()
    assert main(["check", "--bundle", bundles["sft"], *flags]) == 2
    err = _errors(capsys)
    assert len(err) == 2 and err[0].startswith(f"error: {named}") and err[1].startswith("hint: ")


@pytest.mark.parametrize("flags", [["--micro-batch", "2"], ["--backend", "deepspeed", "--zero", "3"],
                                   ["--no-liger"]])
def test_a_flag_that_applies_is_checked_and_reported_as_an_override(bundles, capsys, flags):
    capsys.readouterr()
    code = main(["check", "--bundle", bundles["sft"], *flags, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    overrides = [f for f in doc["findings"] if f["id"] == "PLAN003"]
    assert overrides and all(f["message"].startswith("--") for f in overrides)
    assert not any("--zero-stage" in f["message"] for f in overrides)  # the flag's own name, not the Plan field's


def test_teacher_with_a_gkd_bundle_is_the_teacher_checked(bundles, capsys):
    capsys.readouterr()
    assert main(["check", "--bundle", bundles["gkd"], "--teacher", "qwen2.5-3b", "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    assert doc["plan"]["teacher"] == "Qwen/Qwen2.5-3B" and doc["plan"]["teacher_params"] > 3e9
    assert any(f["id"] == "PLAN003" and "--teacher" in f["message"] for f in doc["findings"])


@pytest.mark.parametrize("argv", [["check", "--bundle", ""], ["verify", "", "--dry-run"], ["verify", " "],
                                  ["probe", "--out-dir", ""], ["estimate", "--model", "8B", "--hardware", ""]])
def test_an_empty_path_is_a_usage_error_not_the_current_folder(capsys, argv):
    assert main(argv) == 2
    err = _errors(capsys)
    assert len(err) == 2 and err[0].endswith("is empty")


def test_an_empty_model_beside_a_bundle_is_a_usage_error(bundles, capsys):
    assert main(["check", "--bundle", bundles["sft"], "--model", ""]) == 2
    assert _errors(capsys)[0] == "error: --model is empty"


@pytest.mark.parametrize("finding_id", [*(v[0] for v in check.DIFFERENCE_FINDINGS.values()), check.FILES_FINDING[0]])
def test_explain_knows_every_id_check_bundle_reports(capsys, finding_id):
    names = {**{v[0]: v[1] for v in check.DIFFERENCE_FINDINGS.values()}, check.FILES_FINDING[0]: check.FILES_FINDING[1]}
    assert main(["explain", finding_id.lower()]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{finding_id} {names[finding_id]} (") and "Fix" in out and "check --bundle" in out


@pytest.mark.parametrize(("flags", "checked"), [
    (["--gpu", "A100-40GB"], "A100-40GB"),
    (["--hardware", "tests/fixtures/hardware/h200_x1.json"], "H200"),
])
def test_another_gpu_than_the_planned_one_is_reported_as_an_override(bundles, capsys, flags, checked):
    """--gpu / --hardware name the GPU the files are checked on; when plan.json planned them for another one, the
    report says so (PLAN003), as for a flag that overrides a plan field: the plan was chosen for the planned GPU."""
    capsys.readouterr()
    assert main(["check", "--bundle", bundles["sft"], *flags, "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    gpu = [f for f in doc["findings"] if f["id"] == "PLAN003" and f["reads"]["field"] == "gpu"]
    assert len(gpu) == 1 and gpu[0]["reads"]["value"] == checked and gpu[0]["reads"]["other"] == "H100-80GB"
    assert flags[0] in gpu[0]["message"] and f"--gpu {checked}" in gpu[0]["fix"]


def test_the_planned_gpu_named_again_is_no_override(bundles, capsys):
    capsys.readouterr()
    assert main(["check", "--bundle", bundles["sft"], "--gpu", "h100", "--json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    assert not [f for f in doc["findings"] if f["id"] == "PLAN003"]
