"""The "Re-create:" line of every bundle file works from any folder: a local model, a GKD teacher and a hardware file
given as relative paths are recorded as the absolute paths they were read from (MODEL_ID's), and running the line
from another folder makes the same bundle."""

from __future__ import annotations

import ast
import json
import shlex
import shutil
from pathlib import Path

import pytest
from model_configs import QWEN_SMALL

from advisor.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A folder holding fx/tricky/m (a model), a symlink to it and a hardware file; the current folder."""
    work = tmp_path / "work"
    model = work / "fx" / "tricky" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(QWEN_SMALL), encoding="utf-8")
    (work / "link").symlink_to(work / "fx")
    (work / "hw").mkdir()
    shutil.copy(REPO / "tests/fixtures/hardware/h200_x1.json", work / "hw" / "h200.json")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(work))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return work


def recreate_line(bundle: Path) -> str:
    """The Re-create command, the same in launch.sh, accelerate.yaml, train.py and README.md."""
    line = next(x for x in (bundle / "launch.sh").read_text().splitlines() if x.startswith("# Re-create: "))
    command = line.removeprefix("# Re-create: ")
    assert f"# Re-create: {command}\n" in (bundle / "accelerate.yaml").read_text()
    assert f"\nRe-create: {command}\n" in (bundle / "train.py").read_text()
    assert f"```bash\n{command}\n```" in (bundle / "README.md").read_text()
    return command


def model_id(bundle: Path) -> str:
    tree = ast.parse((bundle / "train.py").read_text())
    return next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", None) == "MODEL_ID")


def flag(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def generate(argv: list[str], out: str, capsys) -> None:
    rc = main(["generate", *argv, "--out", out])
    assert rc == 0, capsys.readouterr().err


@pytest.mark.parametrize("typed", ["fx/tricky/m", "./fx/tricky/../tricky/m", "link/tricky/m", "~/fx/tricky/m",
                                   "fx/tricky/m/config.json"])
def test_a_relative_model_path_is_recorded_absolute(workdir, capsys, monkeypatch, typed):
    generate(["--model", typed, "--hardware", "hw/h200.json"], "b", capsys)
    words = shlex.split(recreate_line(workdir / "b"))
    recorded = flag(words, "--model")
    expected = workdir / "fx" / "tricky" / "m"
    assert recorded == str(expected / "config.json" if typed.endswith(".json") else expected)
    assert Path(recorded).is_absolute() and model_id(workdir / "b") == str(expected)
    assert flag(words, "--hardware") == str(workdir / "hw" / "h200.json")

    # from another folder, the line makes the same bundle (and records itself the same)
    elsewhere = workdir.parent / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    generate(words[2:], "b2", capsys)
    assert model_id(elsewhere / "b2") == model_id(workdir / "b")
    assert recreate_line(elsewhere / "b2") == recreate_line(workdir / "b")


def test_a_relative_teacher_path_is_recorded_absolute(workdir, capsys):
    generate(["--model", "fx/tricky/m", "--trainer", "gkd", "--teacher", "link/tricky/m", "--gpu", "H200"], "b",
             capsys)
    words = shlex.split(recreate_line(workdir / "b"))
    assert flag(words, "--teacher") == str(workdir / "fx" / "tricky" / "m")
    assert flag(words, "--gpu") == "H200"


def test_catalogue_and_hub_ids_are_recorded_as_typed(workdir, capsys):
    (workdir / "7B").mkdir()  # a folder of a catalogue size's name: --model 7B still means the catalogue
    generate(["--model", "7B", "--trainer", "gkd", "--teacher", "qwen2.5-14b", "--gpu", "H200", "--gpus", "8"],
             "b", capsys)
    words = shlex.split(recreate_line(workdir / "b"))
    assert flag(words, "--model") == "7B" and flag(words, "--teacher") == "qwen2.5-14b"


def test_the_line_from_the_request_alone_is_the_bundle_s(workdir, capsys):
    """The wizard shows the line before any plan exists (no resolved model): it is the one the bundle records."""
    from advisor.bundle.render import recreate_command
    from advisor.cli import build_parser, request_from_args

    argv = ["--model", "link/tricky/m", "--hardware", "hw/h200.json", "--seq-len", "2048"]
    generate(argv, "b", capsys)
    request = request_from_args(build_parser().parse_args(["generate", *argv]))
    assert recreate_command(None, None, None, request) == recreate_line(workdir / "b")
