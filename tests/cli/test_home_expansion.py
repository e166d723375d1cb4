"""`~` in a path the user gives (`--model ~bob/llama`, `--teacher`, HF_HOME=~/hf) when it cannot be expanded: a user
that does not exist, or no HOME and no passwd entry for this uid (a container run with `--user 12345`). The path
stays as typed, as a shell and huggingface_hub leave it: a usage error or the offline message, never an internal
error (pathlib's expanduser raises RuntimeError there)."""

from __future__ import annotations

import json
import pwd

import pytest
from model_configs import QWEN_SMALL

from advisor.cli import main

NO_USER = "~no-such-user-zz"


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def no_home(monkeypatch):
    """Neither HOME nor a passwd entry: `~` cannot be expanded at all."""
    monkeypatch.delenv("HOME", raising=False)

    def no_entry(uid):
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)


def cli(capsys, *args: str) -> tuple[int, str]:
    rc = main(list(args))
    return int(rc), capsys.readouterr().err


def assert_usage_error(rc: int, err: str) -> None:
    assert rc == 2, err
    assert "internal error" not in err and "Traceback" not in err
    assert [line.startswith("error:") for line in err.splitlines()].count(True) == 1, err
    assert "\nhint: " in err, err


@pytest.mark.parametrize("flag", ["--model", "--teacher"])
def test_an_unknown_user_in_a_model_path_is_a_usage_error(capsys, flag):
    request = ["--model", "7B", "--trainer", "gkd"] if flag == "--teacher" else []
    rc, err = cli(capsys, "estimate", *request, flag, f"{NO_USER}/model", "--gpu", "H100-80GB")
    assert_usage_error(rc, err)
    assert NO_USER in err


@pytest.mark.parametrize("variable", ["HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"])
def test_an_unknown_user_in_the_cache_variables_is_no_crash(capsys, monkeypatch, variable):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv(variable, f"{NO_USER}/cache")
    assert_usage_error(*cli(capsys, "estimate", "--model", "Org/Not-Cached-Model", "--gpu", "H100-80GB"))


def test_a_hub_id_with_no_home_at_all_is_no_crash(capsys, monkeypatch, no_home):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert_usage_error(*cli(capsys, "estimate", "--model", "Org/Not-Cached-Model", "--gpu", "H100-80GB"))


def test_a_tilde_model_path_with_no_home_at_all_is_a_usage_error(capsys, no_home):
    assert_usage_error(*cli(capsys, "estimate", "--model", "~/model", "--gpu", "H100-80GB"))


def test_a_tilde_path_still_expands_when_home_is_known(capsys, monkeypatch, tmp_path):
    (tmp_path / "home" / "model").mkdir(parents=True)
    (tmp_path / "home" / "model" / "config.json").write_text(json.dumps(QWEN_SMALL))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    rc, err = cli(capsys, "estimate", "--model", "~/model", "--gpu", "H100-80GB")
    assert rc == 0, err
