"""stdout and stderr whose encoding cannot hold a user's text (PYTHONIOENCODING=ascii, a Latin-1 terminal): a model
folder named in Chinese, with accents and an emoji, is reported with backslash escapes, never a UnicodeEncodeError
(exit 3); JSON stays valid JSON and keeps the name exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from model_configs import QWEN_SMALL

NAME = "模型-ünï-😀"
ENCODINGS = ["ascii", "iso-8859-1", "ascii:strict"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("enc") / NAME
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN_SMALL), encoding="utf-8")
    return folder


def run(args: list[str], encoding: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONIOENCODING": encoding, "HF_HUB_OFFLINE": "1"}
    # bytes: the output is decoded here in the encoding it was written in
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def commands(model: Path, out: Path) -> dict[str, list[str]]:
    request = ["--model", str(model), "--gpu", "H200"]
    return {
        "estimate": ["estimate", *request],
        "generate": ["generate", *request, "--out", str(out / "bundle"), "--force"],
        "check": ["check", *request],
        "check-bundle": ["check", "--bundle", str(out / "bundle")],
    }


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_reports_survive_an_encoding_that_cannot_hold_the_name(model_dir, tmp_path, encoding):
    for name, args in commands(model_dir, tmp_path).items():
        proc = run(args, encoding, tmp_path)
        assert proc.returncode in (0, 1), (name, proc.stderr)
        assert b"Traceback" not in proc.stderr and b"internal error" not in proc.stderr, (name, proc.stderr)
        text = proc.stdout.decode(encoding.split(":")[0])
        if name != "check-bundle":  # a bundle check names files and findings, not always the model
            assert "\\u6a21\\u578b" in text, (name, text[:300])  # 模型, escaped rather than dropped


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_json_stays_valid_and_exact(model_dir, tmp_path, encoding):
    for name, args in commands(model_dir, tmp_path).items():
        proc = run([*args, "--json"], encoding, tmp_path)
        assert proc.returncode in (0, 1), (name, proc.stderr)
        data = json.loads(proc.stdout)
        if name in ("estimate", "generate"):
            assert data["model"]["id"] == NAME.lower()
    proc = run(["models", "--json"], encoding, tmp_path)
    assert proc.returncode == 0 and isinstance(json.loads(proc.stdout), list)


@pytest.mark.parametrize("encoding", ["ascii", "iso-8859-1"])
def test_errors_on_stderr_survive_too(tmp_path, encoding):
    proc = run(["estimate", "--model", "0.5B", "--gpu", "模型ü"], encoding, tmp_path)
    assert proc.returncode == 2
    err = proc.stderr.decode(encoding)
    assert err.startswith("error: ") and "\\u6a21\\u578b" in err and "Traceback" not in err


@pytest.mark.parametrize("args", [["gpus"], ["models"], ["rules"], ["--help"]])
def test_catalogue_and_help_output_under_ascii(tmp_path, args):
    proc = run(args, "ascii", tmp_path)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
