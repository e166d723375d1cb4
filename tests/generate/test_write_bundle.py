"""write_bundle is all or nothing: refuses an existing folder without --force, replaces with --force only a folder
trl-advisor wrote (its marker) or an empty one, never follows or replaces a link, and leaves nothing half-written
(and the old folder intact) when a write fails."""

from __future__ import annotations

import os

import pytest

from advisor.bundle import render
from advisor.bundle import write as bundle_write
from advisor.bundle.write import MARKER_NAME, MARKER_TEXT, write_bundle
from advisor.core.errors import OutputExistsError

FILES = {"README.md": "# r\n", "train.py": "print('hi')\n", "launch.sh": "#!/usr/bin/env bash\n"}
BUNDLE = sorted([*FILES, MARKER_NAME])
"""What a written bundle folder holds: the files and the marker."""


def _entries(folder):
    return sorted(os.listdir(folder))


def _tree(folder):
    """Every path under folder (links not followed) with its content or link target: to prove nothing changed."""
    out = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir",)
            else:
                with open(path, "rb") as fh:
                    out[rel] = ("file", fh.read())
    return out


def _an_old_bundle(out):
    """A bundle written earlier (marker included), with a file the new one no longer holds and what a verify run
    leaves behind (both trl-advisor's to replace)."""
    write_bundle({"README.md": "# old\n", "slurm.sbatch": "old"}, str(out), force=False)
    (out / "random-init").mkdir()
    (out / "random-init" / "config.json").write_text("{}")
    (out / "verify.log").write_text("ok\n")
    (out / "metrics").mkdir()  # empty: no run wrote into it


def test_writes_into_a_new_folder(tmp_path):
    out = tmp_path / "deep" / "bundle"
    written = write_bundle(FILES, str(out), force=False)
    assert written == [str(out / n) for n in FILES]  # the marker is not among the returned paths
    assert {n: (out / n).read_text() for n in FILES} == FILES
    assert _entries(out) == BUNDLE
    assert os.access(out / "launch.sh", os.X_OK) and not os.access(out / "README.md", os.X_OK)
    assert _entries(out.parent) == ["bundle"]  # no staging folder left behind


def test_modes(tmp_path):
    files = {"launch.sh": "", "slurm.sbatch": "", "train.py": "", "plan.json": "{}", "README.md": ""}
    write_bundle(files, str(tmp_path / "b"), force=False)
    modes = {n: os.stat(tmp_path / "b" / n).st_mode & 0o777 for n in [*files, MARKER_NAME]}
    assert modes == {"launch.sh": 0o755, "slurm.sbatch": 0o755, "train.py": 0o755, "plan.json": 0o644,
                     "README.md": 0o644, MARKER_NAME: 0o644}


def test_every_file_is_fsynced(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd to name a file descriptor")
    monkeypatch.setattr(bundle_write.os, "fsync", recording_fsync)
    write_bundle(FILES, str(tmp_path / "b"), force=False)
    assert set(FILES) | {MARKER_NAME} <= set(synced)


def test_the_marker_is_fixed_text_and_the_files_digests(tmp_path):
    import hashlib

    write_bundle(FILES, str(tmp_path / "a"), force=False)
    write_bundle({"x.txt": "other"}, str(tmp_path / "b" / ("n" * 200)), force=False)
    marker = (tmp_path / "a" / MARKER_NAME).read_text()
    assert marker.startswith(MARKER_TEXT)
    digests = [line for line in marker.splitlines() if len(line) > 66 and line[64:66] == "  "]
    assert digests == [f"{hashlib.sha256(c.encode()).hexdigest()}  {n}" for n, c in FILES.items()]
    assert (tmp_path / "b" / ("n" * 200) / MARKER_NAME).read_text().startswith(MARKER_TEXT)
    assert MARKER_TEXT.splitlines()[0] == "trl-advisor bundle v1"


def test_force_never_replaces_a_file_the_user_edited(tmp_path):
    out = tmp_path / "b"
    write_bundle(FILES, str(out), force=False)
    with open(out / "train.py", "a") as fh:
        fh.write("# my edit\n")
    before = _tree(out)
    with pytest.raises(OutputExistsError) as err:
        write_bundle({**FILES, "train.py": "print('new')\n"}, str(out), force=True)
    assert "train.py" in err.value.message
    assert _tree(out) == before  # the edit and the rest as they were
    (out / "train.py").unlink()  # deleting the edited file takes the new one
    write_bundle({**FILES, "train.py": "print('new')\n"}, str(out), force=True)
    assert (out / "train.py").read_text() == "print('new')\n"


def test_force_never_replaces_a_bundle_file_the_user_added(tmp_path):
    out = tmp_path / "b"
    write_bundle(FILES, str(out), force=False)  # no ds_config.json or slurm.sbatch in it
    (out / "ds_config.json").write_text('{"zero_optimization": {"stage": 3}}')
    with pytest.raises(OutputExistsError) as err:
        write_bundle({**FILES, "ds_config.json": "{}"}, str(out), force=True)
    assert "ds_config.json" in err.value.message
    assert (out / "ds_config.json").read_text() == '{"zero_optimization": {"stage": 3}}'


def test_force_replaces_an_unedited_bundle_and_one_whose_marker_has_no_digests(tmp_path):
    out = tmp_path / "b"
    write_bundle(FILES, str(out), force=False)
    write_bundle(FILES, str(out), force=True)  # unedited: replaced
    (out / MARKER_NAME).write_text(MARKER_TEXT)  # a bundle written before the digests
    (out / "train.py").write_text("edited, but nothing says what was written\n")
    write_bundle(FILES, str(out), force=True)
    assert (out / "train.py").read_text() == FILES["train.py"]


def test_the_marker_name_is_not_a_bundle_file(tmp_path):
    with pytest.raises(ValueError):
        write_bundle({MARKER_NAME: "x"}, str(tmp_path / "b"), force=False)
    assert _entries(tmp_path) == []


def test_an_empty_existing_folder_is_fine(tmp_path):
    (tmp_path / "b").mkdir()
    write_bundle(FILES, str(tmp_path / "b"), force=False)
    assert _entries(tmp_path / "b") == BUNDLE


def test_force_on_an_empty_folder(tmp_path):
    (tmp_path / "b").mkdir()
    write_bundle(FILES, str(tmp_path / "b"), force=True)
    assert _entries(tmp_path / "b") == BUNDLE
    assert _entries(tmp_path) == ["b"]


def test_an_empty_folder_is_written_into_not_replaced(tmp_path):
    """A folder the user made (a mount point, its own mode) keeps its inode and mode: the files go into it."""
    out = tmp_path / "b"
    out.mkdir(mode=0o750)
    os.chmod(out, 0o750)
    before = os.stat(out)
    write_bundle(FILES, str(out), force=False)
    after = os.stat(out)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert _entries(out) == BUNDLE and (out / "README.md").read_text() == "# r\n"


@pytest.mark.parametrize("failing_call", [2, "rename"])
def test_a_failed_write_into_an_empty_folder_leaves_it_empty(tmp_path, monkeypatch, failing_call):
    out = tmp_path / "b"
    out.mkdir()
    if failing_call == "rename":  # the second file's move into place fails: the first is taken back
        real_rename, calls = os.rename, {"n": 0}

        def failing_rename(a, b):
            calls["n"] += 1
            if calls["n"] == 2:
                raise OSError(5, "Input/output error")
            return real_rename(a, b)

        monkeypatch.setattr(bundle_write.os, "rename", failing_rename)
    else:
        real_fsync, calls = os.fsync, {"n": 0}

        def failing_fsync(fd):
            calls["n"] += 1
            if calls["n"] == failing_call:
                raise OSError(28, "No space left on device")
            return real_fsync(fd)

        monkeypatch.setattr(bundle_write.os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        write_bundle(FILES, str(out), force=False)
    assert _entries(out) == [] and _entries(tmp_path) == ["b"]


def test_existing_bundle_refused_without_force(tmp_path):
    out = tmp_path / "b"
    _an_old_bundle(out)
    before = _tree(out)
    with pytest.raises(OutputExistsError) as err:
        write_bundle(FILES, str(out), force=False)
    assert "--force" in err.value.hint
    assert _tree(out) == before
    assert _entries(tmp_path) == ["b"]


def test_force_replaces_a_bundle_written_earlier(tmp_path):
    out = tmp_path / "b"
    _an_old_bundle(out)
    write_bundle(FILES, str(out), force=True)
    assert _entries(out) == BUNDLE
    assert (out / "README.md").read_text() == FILES["README.md"]
    assert _entries(tmp_path) == ["b"]  # the old folder, renamed aside, is gone


def test_an_old_bundle_that_cannot_be_deleted_is_reported(tmp_path, monkeypatch):
    """The new bundle is in place; the old one, renamed aside, could not be removed (a file the user may not delete):
    its folder is named to the caller, not left silently."""
    out = tmp_path / "b"
    _an_old_bundle(out)
    real = bundle_write.shutil.rmtree
    monkeypatch.setattr(bundle_write.shutil, "rmtree",
                        lambda path, *a, **k: None if ".tla-old-" in str(path) else real(path, *a, **k))
    left: list[str] = []
    write_bundle(FILES, str(out), force=True, left_behind=left)
    assert _entries(out) == BUNDLE
    assert len(left) == 1 and os.path.basename(left[0]).startswith(".tla-old-") and os.path.isdir(left[0])
    assert sorted(os.listdir(tmp_path)) == sorted(["b", os.path.basename(left[0])])


def test_a_replaced_bundle_that_is_deleted_is_not_reported(tmp_path):
    out = tmp_path / "b"
    _an_old_bundle(out)
    left: list[str] = []
    write_bundle(FILES, str(out), force=True, left_behind=left)
    assert left == []


@pytest.mark.parametrize("record", ["output/model.safetensors", "logs/vllm.log", "metrics/rank0.jsonl"])
def test_force_never_deletes_a_runs_records(tmp_path, record):
    """A trained model, launch.sh's logs and train.py's metrics are a run's, which may have taken days: --force
    refuses the folder and leaves it as it was, and names what is in the way."""
    out = tmp_path / "b"
    _an_old_bundle(out)
    (out / record).parent.mkdir(exist_ok=True)
    (out / record).write_text("a week of training")
    before = _tree(out)
    with pytest.raises(OutputExistsError) as err:
        write_bundle(FILES, str(out), force=True)
    assert record.split("/")[0] + "/" in str(err.value) and "move those elsewhere" in err.value.hint
    assert _tree(out) == before
    assert _entries(tmp_path) == ["b"]


@pytest.mark.parametrize("force", [False, True])
def test_a_folder_that_is_not_a_bundle_is_refused_and_untouched(tmp_path, force):
    out = tmp_path / "thesis"
    (out / "checkpoints" / "step-100").mkdir(parents=True)
    (out / "thesis.tex").write_text("\\documentclass{article}")
    (out / "checkpoints" / "step-100" / "model.safetensors").write_bytes(b"\0" * 64)
    before = _tree(out)
    with pytest.raises(OutputExistsError) as err:
        write_bundle(FILES, str(out), force=force)
    assert MARKER_NAME in err.value.hint and "--force" not in err.value.hint  # --force would not help
    assert _tree(out) == before
    assert _entries(tmp_path) == ["thesis"]


@pytest.mark.parametrize("marker", [
    pytest.param(None, id="only-a-dot-file"),
    pytest.param(b"", id="empty-marker"),
    pytest.param(b"not a trl-advisor bundle v1\n", id="wrong-first-line"),
    pytest.param(b"trl-advisor bundle\n", id="no-version"),
    pytest.param("dir", id="marker-is-a-folder"),
    pytest.param("link", id="marker-is-a-link"),
])
def test_force_needs_a_valid_marker(tmp_path, marker):
    out = tmp_path / "b"
    out.mkdir()
    (out / "README.md").write_text("mine")  # bundle-like names do not make it a bundle
    (out / "plan.json").write_text("{}")
    if marker is None:
        (out / ".hidden").write_text("x")
    elif marker == "dir":
        (out / MARKER_NAME).mkdir()
    elif marker == "link":
        (tmp_path / "real-marker").write_text(MARKER_TEXT)
        os.symlink(tmp_path / "real-marker", out / MARKER_NAME)
    else:
        (out / MARKER_NAME).write_bytes(marker)
    before = _tree(out)
    with pytest.raises(OutputExistsError):
        write_bundle(FILES, str(out), force=True)
    assert _tree(out) == before


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("kind", ["to-a-bundle", "to-an-empty-folder", "to-a-file", "dangling"])
def test_a_symlink_out_dir_is_refused_and_untouched(tmp_path, kind, force):
    real = tmp_path / "real"
    if kind == "to-a-bundle":
        write_bundle({"README.md": "# old\n"}, str(real), force=False)
    elif kind == "to-an-empty-folder":
        real.mkdir()
    elif kind == "to-a-file":
        real.write_text("keep")
    link = tmp_path / "link"
    os.symlink(real, link)
    before = _tree(tmp_path)
    for out_dir in (str(link), str(link) + os.sep):
        with pytest.raises(OutputExistsError) as err:
            write_bundle(FILES, out_dir, force=force)
        assert "link" in err.value.message and err.value.hint
    assert os.path.islink(link) and os.readlink(link) == str(real)
    assert _tree(tmp_path) == before  # the link, its target and the parent folder as they were


def test_a_file_in_the_way_is_refused(tmp_path):
    (tmp_path / "b").write_text("x")
    for force in (False, True):
        with pytest.raises(OutputExistsError):
            write_bundle(FILES, str(tmp_path / "b"), force=force)
    assert (tmp_path / "b").read_text() == "x" and _entries(tmp_path) == ["b"]


def test_a_250_byte_folder_name(tmp_path):
    name = "b" * 250
    out = tmp_path / name
    write_bundle(FILES, str(out), force=False)
    write_bundle(FILES, str(out), force=True)  # replacing it needs an aside name that fits too
    assert _entries(out) == BUNDLE
    assert _entries(tmp_path) == [name]


def test_a_255_byte_folder_name(tmp_path):
    out = tmp_path / ("é" * 127 + "x")  # 255 bytes in UTF-8: NAME_MAX
    write_bundle(FILES, str(out), force=False)
    write_bundle(FILES, str(out), force=True)
    assert _entries(out) == BUNDLE


def test_work_folders_do_not_embed_the_target_name(tmp_path, monkeypatch):
    made = []
    real_mkdir = os.mkdir

    def recording_mkdir(path, *args, **kwargs):
        made.append(os.path.basename(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(bundle_write.os, "mkdir", recording_mkdir)
    write_bundle(FILES, str(tmp_path / "my-bundle"), force=False)
    write_bundle(FILES, str(tmp_path / "my-bundle"), force=True)
    work = [m for m in made if m.startswith(".")]
    assert work and all(bundle_write._WORK_NAME.fullmatch(m) for m in work)
    assert all("my-bundle" not in m and len(m.encode()) < 40 for m in work)


def test_failure_mid_write_leaves_nothing_and_keeps_the_old_folder(tmp_path, monkeypatch):
    out = tmp_path / "b"
    _an_old_bundle(out)
    before = _tree(out)
    real_fsync = os.fsync
    calls = {"n": 0}

    def failing_fsync(fd):
        calls["n"] += 1
        if calls["n"] == 2:  # the second file
            raise OSError(28, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(bundle_write.os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        write_bundle(FILES, str(out), force=True)
    assert _tree(out) == before
    assert _entries(tmp_path) == ["b"]


def test_failure_at_the_final_rename_restores_the_old_folder(tmp_path, monkeypatch):
    out = tmp_path / "b"
    _an_old_bundle(out)
    before = _tree(out)
    real_rename = os.rename

    def failing_rename(src, dst):
        if str(dst) == str(out) and os.path.basename(os.path.dirname(src)).startswith(".tla-new-"):
            raise OSError(5, "I/O error")
        return real_rename(src, dst)

    monkeypatch.setattr(bundle_write.os, "rename", failing_rename)
    with pytest.raises(OSError):
        write_bundle(FILES, str(out), force=True)
    assert _tree(out) == before
    assert _entries(tmp_path) == ["b"]


def test_failure_to_put_the_old_bundle_back_keeps_it_aside(tmp_path, monkeypatch):
    """Both renames fail: the old bundle must not be deleted with the work folders; the next write restores it."""
    out = tmp_path / "b"
    _an_old_bundle(out)
    before = _tree(out)
    real_rename = os.rename
    monkeypatch.setattr(bundle_write.os, "rename", lambda src, dst: (
        (_ for _ in ()).throw(OSError(5, "I/O error")) if str(dst) == str(out) else real_rename(src, dst)))
    with pytest.raises(OSError):
        write_bundle(FILES, str(out), force=True)
    monkeypatch.setattr(bundle_write.os, "rename", real_rename)
    (aside,) = [e for e in _entries(tmp_path) if e.startswith(".tla-old-")]
    assert _tree(tmp_path / aside / "bundle") == before
    # This process is alive, so its aside is not stale yet; once it is (simulated), the next write puts it back.
    monkeypatch.setattr(bundle_write, "_pid_alive", lambda pid: False)
    write_bundle(FILES, str(tmp_path / "other"), force=False)
    assert _tree(out) == before
    assert _entries(tmp_path) == ["b", "other"]


def test_new_folder_failure_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle_write.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "full")))
    with pytest.raises(OSError):
        write_bundle(FILES, str(tmp_path / "b"), force=False)
    assert _entries(tmp_path) == []


def test_a_folder_that_appears_while_writing_is_not_replaced(tmp_path, monkeypatch):
    out = tmp_path / "b"
    real_fsync = os.fsync

    def user_creates_the_folder(fd):
        if not out.exists():
            out.mkdir()
            (out / "mine.txt").write_text("mine")
        return real_fsync(fd)

    monkeypatch.setattr(bundle_write.os, "fsync", user_creates_the_folder)
    with pytest.raises(OutputExistsError):
        write_bundle(FILES, str(out), force=True)
    assert _entries(out) == ["mine.txt"]
    assert _entries(tmp_path) == ["b"]


def test_names_must_be_plain(tmp_path):
    for name in ("../escape.txt", "a/b", "a\\b", ".", "..", "", "a\0b"):
        with pytest.raises(ValueError):
            write_bundle({name: "x"}, str(tmp_path / "b"), force=False)
    assert _entries(tmp_path) == []


def test_force_keeps_what_the_user_put_in_a_bundle(tmp_path):
    """A bundle folder also holds what running it made: --force may delete what trl-advisor can make again
    (metrics, logs, the random-init checkpoint, verify reports, an empty output/), never a trained model."""
    from advisor.bundle.write import BUNDLE_NAMES

    out = tmp_path / "b"
    write_bundle(FILES, str(out), force=False)
    for name in ("metrics", "logs", "random-init", "output"):
        (out / name).mkdir()
    (out / "verify-report.json").write_text("{}")
    write_bundle(FILES, str(out), force=True)  # all of it is ours to replace
    assert not (out / "metrics").exists() and not (out / "verify-report.json").exists()

    (out / "output").mkdir()
    (out / "output" / "model.safetensors").write_text("weights")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError) as err:
        write_bundle(FILES, str(out), force=True)
    assert "output/" in err.value.message and "notes.txt" in err.value.message
    assert (out / "output" / "model.safetensors").read_text() == "weights" and (out / "notes.txt").exists()
    assert set(render.BUNDLE_ORDER) <= BUNDLE_NAMES  # every file a bundle can hold is known as ours


def test_an_out_dir_a_thousand_folders_deep(tmp_path):
    """Still within PATH_MAX, but deeper than Python's recursion limit: Path.mkdir(parents=True) recurses once per
    missing folder and ended in RecursionError (exit 3) instead of writing the bundle."""
    out = tmp_path.joinpath(*["d"] * 1500) / "bundle"
    assert len(str(out)) < 4000
    try:
        write_bundle(FILES, str(out), force=False)
        assert _entries(out) == BUNDLE
    finally:
        remove_deep_tree(out, tmp_path)


def remove_deep_tree(deepest, top) -> None:
    """Remove the folders from deepest up to (not including) top, one level at a time: shutil.rmtree, and with it
    pytest's tmp_path cleanup, recurses once per level and would itself end in RecursionError here."""
    folder = deepest
    while folder != top:
        if folder.is_dir():
            for name in os.listdir(folder):
                if not (folder / name).is_dir():
                    os.unlink(folder / name)
            os.rmdir(folder)
        folder = folder.parent


@pytest.mark.parametrize("how", ["name-too-long", "disk-full"])
def test_a_failed_write_removes_the_parent_folders_it_made(tmp_path, monkeypatch, how):
    """--out under folders that do not exist yet: they are made for the bundle, so a failed write removes them
    again (innermost first, only while empty); folders that were there before stay."""
    (tmp_path / "theirs").mkdir()
    out = tmp_path / "theirs" / "new" / "newer" / "b"
    if how == "name-too-long":
        out = out.with_name("x" * 300)  # refused at the final rename (ENAMETOOLONG), after the parents exist
    else:
        monkeypatch.setattr(bundle_write.os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "full")))
    with pytest.raises(OSError):
        write_bundle(FILES, str(out), force=False)
    assert _entries(tmp_path) == ["theirs"]
    assert _entries(tmp_path / "theirs") == []


@pytest.mark.parametrize("out", [".", "./", "../b", "../b/", "../../here/b", "../b/."])
def test_force_from_inside_the_bundle_it_replaces(tmp_path, monkeypatch, out):
    """Run inside the bundle being replaced: the first rename moves the working directory with the old bundle, so
    every relative path (`..` above all) means another folder afterwards. `--out ../b --force` left b's path empty
    (the old bundle in a work folder) and `--out . --force` refused its own staging folder as a foreign file."""
    (tmp_path / "here").mkdir()
    b = tmp_path / "here" / "b"
    _an_old_bundle(b)
    monkeypatch.chdir(b)
    write_bundle(FILES, out, force=True)
    assert _entries(b) == BUNDLE and (b / "README.md").read_text() == FILES["README.md"]
    assert _entries(tmp_path / "here") == ["b"]  # no work folder left beside it


@pytest.mark.parametrize("suffix", ["", "/", "/.", "/./"])
def test_a_link_named_with_a_trailing_dot_or_slash_is_still_a_link(tmp_path, monkeypatch, suffix):
    b = tmp_path / "b"
    _an_old_bundle(b)
    before = _tree(b)
    (tmp_path / "lnk").symlink_to("b")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OutputExistsError, match="symbolic link"):
        write_bundle(FILES, "lnk" + suffix, force=True)
    assert _tree(b) == before and _entries(tmp_path) == ["b", "lnk"]
