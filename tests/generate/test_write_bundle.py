"""write_bundle is all or nothing: refuses an existing folder without --force, replaces it with --force, and
leaves nothing half-written (and the old folder intact) when a write fails."""

from __future__ import annotations

import os

import pytest

from advisor import generate
from advisor.errors import OutputExistsError
from advisor.generate import write_bundle

FILES = {"README.md": "# r\n", "train.py": "print('hi')\n", "launch.sh": "#!/usr/bin/env bash\n"}


def _entries(folder):
    return sorted(os.listdir(folder))


def test_writes_into_a_new_folder(tmp_path):
    out = tmp_path / "deep" / "bundle"
    written = write_bundle(FILES, str(out), force=False)
    assert written == [str(out / n) for n in FILES]
    assert {n: (out / n).read_text() for n in FILES} == FILES
    assert os.access(out / "launch.sh", os.X_OK) and not os.access(out / "README.md", os.X_OK)
    assert _entries(out.parent) == ["bundle"]  # no staging folder left behind


def test_an_empty_existing_folder_is_fine(tmp_path):
    (tmp_path / "b").mkdir()
    write_bundle(FILES, str(tmp_path / "b"), force=False)
    assert _entries(tmp_path / "b") == sorted(FILES)


def test_existing_folder_refused_without_force(tmp_path):
    out = tmp_path / "b"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(OutputExistsError) as err:
        write_bundle(FILES, str(out), force=False)
    assert "--force" in err.value.hint
    assert _entries(out) == ["mine.txt"]
    assert _entries(tmp_path) == ["b"]


def test_force_replaces_the_old_folder(tmp_path):
    out = tmp_path / "b"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    write_bundle(FILES, str(out), force=True)
    assert _entries(out) == sorted(FILES)
    assert _entries(tmp_path) == ["b"]  # the old folder, renamed aside, is gone


def test_failure_mid_write_leaves_nothing_and_keeps_the_old_folder(tmp_path, monkeypatch):
    out = tmp_path / "b"
    out.mkdir()
    (out / "old.txt").write_text("old")
    real_fsync = os.fsync
    calls = {"n": 0}

    def failing_fsync(fd):
        calls["n"] += 1
        if calls["n"] == 2:  # the second file
            raise OSError(28, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(generate.os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        write_bundle(FILES, str(out), force=True)
    assert _entries(out) == ["old.txt"] and (out / "old.txt").read_text() == "old"
    assert _entries(tmp_path) == ["b"]


def test_failure_at_the_final_rename_restores_the_old_folder(tmp_path, monkeypatch):
    out = tmp_path / "b"
    out.mkdir()
    (out / "old.txt").write_text("old")
    real_rename = os.rename

    def failing_rename(src, dst):
        if str(src).split(os.sep)[-1].startswith(".b.new-"):
            raise OSError(5, "I/O error")
        return real_rename(src, dst)

    monkeypatch.setattr(generate.os, "rename", failing_rename)
    with pytest.raises(OSError):
        write_bundle(FILES, str(out), force=True)
    assert _entries(out) == ["old.txt"]
    assert _entries(tmp_path) == ["b"]


def test_new_folder_failure_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(generate.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "full")))
    with pytest.raises(OSError):
        write_bundle(FILES, str(tmp_path / "b"), force=False)
    assert _entries(tmp_path) == []


def test_a_file_in_the_way_is_refused(tmp_path):
    (tmp_path / "b").write_text("x")
    with pytest.raises(OutputExistsError):
        write_bundle(FILES, str(tmp_path / "b"), force=True)


def test_names_must_be_plain(tmp_path):
    with pytest.raises(ValueError):
        write_bundle({"../escape.txt": "x"}, str(tmp_path / "b"), force=False)
    assert _entries(tmp_path) == []
