"""A writer stopped by a signal leaves no work folder behind: SIGINT, SIGTERM and SIGHUP run the cleanup (the
process still ends as the signal asked), and the folders of a SIGKILLed writer are removed by the next write in
that parent folder, while folders of live writers, of other hosts, or without our marker are left alone."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from advisor.bundle import write as bundle_write
from advisor.bundle.write import MARKER_NAME, write_bundle

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")

REPO = Path(__file__).resolve().parents[2]
FILES = {"README.md": "# r\n", "train.py": "print('hi')\n", "launch.sh": "#!/usr/bin/env bash\n"}

_CHILD = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
from advisor.bundle import write as bundle_write
mode, out = sys.argv[2], sys.argv[3]
real_fsync, real_rename = os.fsync, os.rename
if mode == "slow":  # about 0.25 s of writing: the signal lands at a random moment of it
    os.fsync = lambda fd: time.sleep(0.002)
elif mode == "stuck-writing":  # hangs in the middle of writing the files
    calls = []
    def fsync(fd):
        calls.append(fd)
        if len(calls) == 3:
            print("stuck", flush=True)
            time.sleep(60)
        real_fsync(fd)
    os.fsync = fsync
elif mode == "terminated-while-writing":  # SIGTERM with its default action, as `kill PID` sends
    import signal
    os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGTERM)
elif mode == "stuck-swapping":  # hangs after the old bundle went aside, before the new one is in place
    def rename(src, dst):
        if str(dst) == out:
            print("stuck", flush=True)
            time.sleep(60)
        real_rename(src, dst)
    os.rename = rename
files = {f"f{i:03d}.txt": "x" * 200 for i in range(120)}
print("ready", flush=True)
try:
    bundle_write.write_bundle(files, out, force=True)
except KeyboardInterrupt:
    sys.exit(130)
"""


def _child(mode: str, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _CHILD, str(REPO), mode, str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _work_folders(parent: Path) -> list[str]:
    return sorted(n for n in os.listdir(parent) if n.startswith(".tla-"))


def _a_dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: kill(pid, 0) now fails with ESRCH (unless the pid is reused meanwhile)
    return proc.pid


def _fake_work_folder(parent: Path, name: str, *, pid: int, host: str | None = None, target: str = "b",
                      marker: bool = True) -> Path:
    folder = parent / name
    (folder / "bundle").mkdir(parents=True)
    (folder / "bundle" / "train.py").write_text("half")
    if marker:
        text = bundle_write._writer_marker_text(pid, host or socket.gethostname(), target)
        (folder / ".tla-writer").write_text(text)
    return folder


@pytest.mark.parametrize("sig,runs", [(signal.SIGINT, 20), (signal.SIGTERM, 20), (signal.SIGHUP, 10)],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_at_a_random_moment_leaves_no_work_folder(tmp_path, sig, runs):
    def one_run(i: int):
        parent = tmp_path / f"p{i}"
        out = parent / "bundle"
        if i % 2:  # half of them replace an earlier bundle (--force): the old one goes aside meanwhile
            write_bundle({"README.md": "# old\n"}, str(out), force=False)
        proc = _child("slow", out)
        try:
            assert proc.stdout.readline() == "ready\n", proc.stderr.read()
            time.sleep(random.Random(1000 * sig + i).uniform(0.0, 0.3))
            proc.send_signal(sig)
            rc = proc.wait(timeout=20)
        finally:
            proc.kill()
            proc.wait()
        return parent, out, i % 2, rc

    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(pool.map(one_run, range(runs)))
    stopped = 0
    for parent, out, had_old, rc in results:
        assert rc in (0, 128 + sig, -sig), rc
        stopped += rc == 128 + sig
        # a write stopped before its bundle was in place also removes the parent folder it made (p<i>, when new)
        assert parent.exists() or not had_old
        assert (_work_folders(parent) if parent.exists() else []) == []
        names = sorted(os.listdir(out)) if out.exists() else []
        if len(names) == 120 + 1:  # all or nothing (120 files and the marker): the new bundle complete, or the old one (or none) as it was
            assert MARKER_NAME in names
        elif had_old:
            assert names == sorted(["README.md", MARKER_NAME]) and (out / "README.md").read_text() == "# old\n"
        else:
            assert names == []
    assert stopped >= runs // 2  # most signals landed while writing, so the cleanup itself was exercised


def test_sigint_raises_keyboard_interrupt_and_the_handlers_are_restored(tmp_path, monkeypatch):
    """KeyboardInterrupt is what the CLI turns into exit 130."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    write_bundle(FILES, str(tmp_path / "b"), force=False)
    assert {s: signal.getsignal(s) for s in before} == before
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (real_fsync(fd), os.kill(os.getpid(), signal.SIGINT)))
    with pytest.raises(KeyboardInterrupt):
        write_bundle(FILES, str(tmp_path / "c"), force=False)
    assert os.listdir(tmp_path) == ["b"]
    assert {s: signal.getsignal(s) for s in before} == before


def test_sigterm_ends_the_process_with_143(tmp_path):
    """In a child: with SIGTERM's default action a regression would end this test run instead."""
    out = tmp_path / "bundle"
    proc = _child("terminated-while-writing", out)
    stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert os.listdir(tmp_path) == []


def test_a_callers_own_handler_decides(tmp_path, monkeypatch):
    """A handler set before the write is called: if it raises, the write is cleaned up; if not, it goes on."""
    calls = []

    class Hangup(Exception):
        pass

    def raising(signum, frame):
        calls.append(signum)
        raise Hangup

    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (real_fsync(fd), os.kill(os.getpid(), signal.SIGHUP)))
    previous = signal.signal(signal.SIGHUP, raising)
    try:
        with pytest.raises(Hangup):
            write_bundle(FILES, str(tmp_path / "a"), force=False)
        assert os.listdir(tmp_path) == [] and calls == [signal.SIGHUP]
        signal.signal(signal.SIGHUP, lambda signum, frame: calls.append(signum))
        write_bundle(FILES, str(tmp_path / "b"), force=False)
        assert os.listdir(tmp_path) == ["b"] and len(calls) > 1
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_an_ignored_signal_stays_ignored(tmp_path, monkeypatch):
    """Under nohup SIGHUP is ignored: writing a bundle must not make it fatal."""
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (real_fsync(fd), os.kill(os.getpid(), signal.SIGHUP)))
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        write_bundle(FILES, str(tmp_path / "b"), force=False)
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert sorted(os.listdir(tmp_path / "b")) == sorted([*FILES, MARKER_NAME])


def test_a_sigkilled_writers_staging_folder_is_removed_by_the_next_write(tmp_path):
    proc = _child("stuck-writing", tmp_path / "bundle")
    try:
        assert proc.stdout.readline() == "ready\n"
        assert proc.stdout.readline() == "stuck\n", proc.stderr.read()
        (left,) = _work_folders(tmp_path)
        assert left.startswith(f".tla-new-{proc.pid}-")
    finally:
        proc.kill()
        proc.wait()
    assert _work_folders(tmp_path) == [left]  # SIGKILL runs no handler
    write_bundle(FILES, str(tmp_path / "other"), force=False)
    assert sorted(os.listdir(tmp_path)) == ["other"]


def test_a_writer_killed_between_the_renames_gets_its_old_bundle_back(tmp_path):
    out = tmp_path / "bundle"
    write_bundle({"README.md": "# old\n"}, str(out), force=False)
    proc = _child("stuck-swapping", out)
    try:
        assert proc.stdout.readline() == "ready\n"
        assert proc.stdout.readline() == "stuck\n", proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    assert not out.exists() and len(_work_folders(tmp_path)) == 2  # new and old, both aside
    write_bundle(FILES, str(tmp_path / "other"), force=False)
    assert sorted(os.listdir(tmp_path)) == ["bundle", "other"]
    assert sorted(os.listdir(out)) == sorted(["README.md", MARKER_NAME]) and (out / "README.md").read_text() == "# old\n"


def test_only_our_dead_writers_folders_are_removed(tmp_path):
    dead = _a_dead_pid()
    alive = os.getpid()
    gone = [
        _fake_work_folder(tmp_path, f".tla-new-{dead}-0000000a", pid=dead),
        _fake_work_folder(tmp_path, f".tla-old-{dead}-0000000b", pid=dead, target="replaced"),
    ]
    (tmp_path / "replaced").mkdir()  # the old bundle's replacement is in place: the aside one may go
    kept = [
        _fake_work_folder(tmp_path, f".tla-new-{alive}-0000000c", pid=alive),  # a live writer
        _fake_work_folder(tmp_path, f".tla-new-{dead}-0000000d", pid=dead, marker=False),  # not ours
        _fake_work_folder(tmp_path, f".tla-new-{dead}-0000000e", pid=dead, host=socket.gethostname() + "-x"),
        _fake_work_folder(tmp_path, f".tla-new-{alive}-0000000f", pid=dead),  # name and marker disagree
        _fake_work_folder(tmp_path, f".bundle.new-{dead}", pid=dead),  # not our name
        _fake_work_folder(tmp_path, f".tla-new-{dead}-0000000g", pid=dead),  # not our name (hex8)
        _fake_work_folder(tmp_path, f"tla-new-{dead}-00000010", pid=dead),  # not hidden: not our name
    ]
    bad_marker = _fake_work_folder(tmp_path, f".tla-new-{dead}-00000011", pid=dead, marker=False)
    (bad_marker / ".tla-writer").write_text(f"something else\n{{\"pid\": {dead}}}\n")
    kept.append(bad_marker)
    link = tmp_path / f".tla-new-{dead}-00000012"
    os.symlink(gone[0], link)  # a link with our name: never followed
    before = {k.name: sorted(os.listdir(k)) for k in kept}
    write_bundle(FILES, str(tmp_path / "b"), force=False)
    assert not any(g.exists() for g in gone)
    assert {k.name: sorted(os.listdir(k)) for k in kept} == before
    assert os.path.islink(link)


def test_empty_work_folders_go_only_when_abandoned(tmp_path):
    """A writer killed between mkdir and writing .tla-writer leaves an empty folder: removed once it is old and its
    name's pid is dead, kept while fresh (a writer elsewhere may be about to fill it) or while the pid lives."""
    dead = _a_dead_pid()
    old = time.time() - 3600
    folders = {}
    for label, pid, empty_marker, age in [("abandoned", dead, False, old), ("abandoned-marker", dead, True, old),
                                          ("fresh", dead, False, None), ("alive", os.getpid(), False, old)]:
        folder = tmp_path / f".tla-new-{pid}-{len(folders):08x}"
        folder.mkdir()
        if empty_marker:
            (folder / ".tla-writer").touch()
        if age:
            os.utime(folder, (age, age))
        folders[label] = folder
    write_bundle(FILES, str(tmp_path / "b"), force=False)
    assert {k: f.exists() for k, f in folders.items()} == {
        "abandoned": False, "abandoned-marker": False, "fresh": True, "alive": True}
