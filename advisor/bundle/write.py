"""Writing a bundle folder: all files at once or none, never over files the user owns.

(Moved out of advisor.bundle.render: rendering is pure, writing touches the disk.)

Layout while writing, all in out_dir's parent folder (one filesystem, so every rename below is atomic, POSIX
rename(2)):

    .tla-new-<pid>-<hex8>/.tla-writer    who is writing (pid, host, target name): see _remove_stale
    .tla-new-<pid>-<hex8>/bundle/        the new bundle, filled and fsynced, then renamed to out_dir
    .tla-old-<pid>-<hex8>/bundle/        with --force: the old bundle, renamed aside until the new one is in place

The work folders' names do not embed out_dir's name: a 250-byte name plus a prefix would pass NAME_MAX (255
bytes, limits.h) and be refused. Every bundle carries MARKER_NAME, so `--force` replaces only folders trl-advisor
wrote (or empty ones), never a folder of the user's that happens to sit at --out.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from advisor.core.errors import OutputExistsError

_EXECUTABLE = {"launch.sh", "slurm.sbatch", "train.py"}

MARKER_NAME = ".trl-advisor-bundle"
"""Written into every bundle (not part of the `files` passed in, not in the returned paths)."""
MARKER_TEXT = ("trl-advisor bundle v1\n"
               "This folder was written by trl-advisor; `trl-advisor generate --force` may replace it, "
               "with everything in it.\n")
"""Fixed bytes, nothing from the request: reference bundles compare byte for byte. The marker goes on with the
SHA-256 of each file as written (_marker), which `--force` reads to keep a user's edits."""
_MARKER_FIRST_LINE = re.compile(rb"trl-advisor bundle v[0-9]+")
_DIGESTS_HEADER = "SHA-256 of each file as trl-advisor wrote it (--force replaces none that differs):\n"
_DIGEST_LINE = re.compile(r"([0-9a-f]{64})  ([A-Za-z0-9_.-]{1,64})")
_MAX_COMPARED_BYTES = 64 << 20
"""A bundle file larger than this is not hashed to compare (none is written that large): taken as edited."""


def _marker(files: dict[str, str]) -> str:
    """MARKER_TEXT, then one `<sha256>  <name>` line per file (sha256sum's layout), in bundle order."""
    lines = [f"{hashlib.sha256(content.encode('utf-8')).hexdigest()}  {name}" for name, content in files.items()]
    return MARKER_TEXT + _DIGESTS_HEADER + "".join(line + "\n" for line in lines)


def edited_files(folder: Path) -> list[str]:
    """The files of a bundle whose content is no longer what trl-advisor wrote (its marker's digests), and the files of
    a bundle's names it did not write: a user's work that `--force` must not replace. A marker without digests
    (bundles written before them) names none."""
    try:
        text = (folder / MARKER_NAME).read_text(encoding="utf-8", errors="replace")[:1 << 16]
    except OSError:
        return []
    out = []
    listed = set()
    for line in text.splitlines():
        m = _DIGEST_LINE.fullmatch(line)
        if not m or m.group(2) not in BUNDLE_NAMES or m.group(2) == MARKER_NAME:
            continue
        listed.add(m.group(2))
        path = folder / m.group(2)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue  # deleted: nothing of the user's to lose
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_COMPARED_BYTES:
            out.append(m.group(2))
            continue
        with open(path, "rb") as fh:
            if hashlib.sha256(fh.read()).hexdigest() != m.group(1):
                out.append(m.group(2))
    if listed:
        # a file of a bundle's name that trl-advisor did not write there (a ds_config.json or slurm.sbatch the user
        # added to a bundle without one) is the user's too
        out += sorted(name for name in BUNDLE_NAMES - listed - {MARKER_NAME} if os.path.lexists(folder / name))
    return out

_WORK_NAME = re.compile(r"\.tla-(new|old)-([0-9]+)-[0-9a-f]{8}")
_WRITER_NAME = ".tla-writer"
_WRITER_FIRST_LINE = "trl-advisor work folder v1"
_PAYLOAD = "bundle"
_ABANDONED_EMPTY_AFTER_S = 60.0
"""An empty work folder (its writer died between mkdir and writing .tla-writer) is removed only when older than
this: a live writer on another host sharing the folder fills its marker within microseconds."""

_SIGNALS = tuple(sig for sig in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if sig)


def write_bundle(files: dict[str, str], out_dir: str, *, force: bool, left_behind: list[str] | None = None) -> list[str]:
    """Write every file into out_dir at once: a temporary sibling folder is filled, then renamed into place.

    out_dir may be missing or an empty folder. A folder trl-advisor wrote (it holds MARKER_NAME) is refused
    without `force`; with `force` it is renamed aside and deleted only after the new one is in place. Any other
    non-empty folder, a file, or a symbolic link (even with `force`) is refused with OutputExistsError.
    Any failure, SIGINT, SIGTERM or SIGHUP leaves no partial folder and the old one intact.
    Returns the written paths (out_dir/name), in bundle order. A replaced bundle that could not be deleted once the
    new one was in place (a file the user cannot remove, say) is left in its .tla-old folder, whose path is appended
    to `left_behind` for the caller to report.
    """
    target = _absolute_target(out_dir)
    for name in files:
        if (not name or "/" in name or "\\" in name or "\0" in name or name in (".", "..")
                or name == MARKER_NAME):
            raise ValueError(f"write_bundle: {name!r} is not a plain file name")
    if target.parent.is_dir():  # first: it may put back an old bundle at out_dir, which the check must see
        _remove_stale(target.parent)
    if _is_empty_folder_but_for_work(target):
        _remove_stale(target)  # a killed write into this empty folder left its staging folder behind
    _check_target(target, out_dir, force=force)
    made = _make_parents(target.parent)
    try:
        with _SignalGuard() as guard:
            if _is_empty_folder(target):
                _write_into_empty(files, target, out_dir, guard=guard)
            else:
                _write_and_swap(files, target, out_dir, force=force, guard=guard, left_behind=left_behind)
    except OSError as exc:
        _remove_made_parents(made)
        if exc.filename and _WORK_NAME.search(str(exc.filename)):
            # the staging folder is ours, not a path the user gave: name the folder they asked for
            raise OSError(exc.errno, exc.strerror, out_dir) from exc
        raise
    except BaseException:
        _remove_made_parents(made)
        raise
    return [str(Path(out_dir) / name) for name in files]


def _absolute_target(out_dir: str) -> Path:
    """out_dir as an absolute path whose folder part holds no `.`, `..` or link, its last name kept as given.

    Every path below is used again after renames: relative to the working directory, or through `..`, a path
    changes meaning once a rename moves the working directory. `--out ../b --force` run inside the bundle b moved
    b aside (the working directory with it), then looked for the new bundle and the way back relative to the moved
    folder, found neither, and left b's path empty and both work folders behind. The last name is not resolved:
    a link there must be seen, and refused, as a link."""
    path = os.fspath(out_dir)
    while True:
        stripped = path.rstrip(os.sep) or path
        head, tail = os.path.split(stripped)
        if tail != "." or not head:
            break
        path = head  # `x/.` names x itself, a link at x included (as pathlib reads it)
    if tail in ("", ".", ".."):  # the working directory, `/`, or a parent named by `..`: itself no link
        return Path(os.path.realpath(stripped))
    return Path(os.path.realpath(head or os.curdir)) / tail


def _make_parents(folder: Path) -> list[Path]:
    """Create folder and its missing ancestors, outermost first; return those created.

    Not Path.mkdir(parents=True): it recurses once per missing level, so an --out nested a thousand folders deep
    (still within PATH_MAX) ended in RecursionError instead of a folder or a clean OSError. The list lets a failed
    write remove what it made, so that an --out whose last name is refused leaves no empty folders behind."""
    missing: list[Path] = []
    probe = folder
    while not os.path.lexists(probe):
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    made: list[Path] = []
    try:
        for path in reversed(missing):
            try:
                os.mkdir(path)
            except FileExistsError:  # made meanwhile by someone else: theirs, not ours to remove
                if not os.path.isdir(path):
                    raise
                continue
            made.append(path)
    except BaseException:
        _remove_made_parents(made)
        raise
    return made


def _remove_made_parents(made: list[Path]) -> None:
    """Remove the folders _make_parents created, innermost first, each only while still empty."""
    for path in reversed(made):
        try:
            os.rmdir(path)
        except OSError:
            return


def _is_empty_folder_but_for_work(target: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(target).st_mode) and all(n.startswith(".tla-new-") for n in os.listdir(target))
    except OSError:
        return False


def _is_empty_folder(target: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(target).st_mode) and not os.listdir(target)
    except OSError:
        return False


def _write_into_empty(files: dict[str, str], target: Path, out_dir: str, *, guard: _SignalGuard) -> None:
    """An empty out_dir the user made (a mount point, a folder with its own owner and mode) is written into, not
    replaced: the files are staged in a hidden folder inside it and renamed into place one by one. Any failure or
    signal removes what was moved and the staging folder: out_dir is left as empty as it was."""
    staging: Path | None = None
    moved: list[Path] = []
    committed = False
    try:
        with guard.deferred():
            staging = _make_work_folder(target, "new", target.name)
        new = _fill_payload(staging, files)
        with guard.deferred():
            names = [*files, MARKER_NAME]
            if sorted(os.listdir(target)) != [staging.name]:  # someone wrote there meanwhile: do not mix bundles
                raise OutputExistsError(f"{out_dir} is no longer empty", hint="choose another --out")
            for name in names:
                os.rename(new / name, target / name)
                moved.append(target / name)
            committed = True
        _fsync_dir(target)
    finally:
        with guard.deferred():
            if not committed:
                for path in moved:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
            if staging is not None:
                _remove_work_folder(staging, keep_payload=False)


def is_bundle_folder(folder: str | os.PathLike[str]) -> bool:
    """True when folder holds a trl-advisor marker: a regular file (not a link) whose first line names it."""
    path = os.path.join(folder, MARKER_NAME)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            head = os.read(fd, 256)
        finally:
            os.close(fd)
    except OSError:
        return False
    return _MARKER_FIRST_LINE.fullmatch(head.split(b"\n", 1)[0].rstrip(b"\r")) is not None


# ------------------------------------------------------------------------------------------------ the checks

def _check_target(target: Path, out_dir: str, *, force: bool) -> None:
    """Refuse whatever out_dir may not be replaced by: a link, a non-folder, a non-empty folder not ours, or ours
    without force. Run before writing and again just before the swap (the folder may change meanwhile)."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):  # a rename would replace the link itself; writing through it, its target
        raise OutputExistsError(f"{out_dir} is a symbolic link",
                                hint="trl-advisor never writes through or replaces a link: give the real "
                                     "folder's path as --out, or choose another --out")
    if not stat.S_ISDIR(st.st_mode):
        raise OutputExistsError(f"{out_dir} exists and is not a folder", hint="choose another --out")
    if not os.listdir(target):
        return
    if not is_bundle_folder(target):
        raise OutputExistsError(f"{out_dir} already exists and is not empty",
                                hint=f"it was not written by trl-advisor (no {MARKER_NAME} marker): "
                                     "choose another --out, or empty it yourself")
    if not force:
        raise OutputExistsError(f"{out_dir} already holds a trl-advisor bundle",
                                hint="pass --force to replace it, or choose another --out")
    edited = edited_files(target)
    if edited:
        shown = ", ".join(edited[:3]) + (f" and {len(edited) - 3} more" if len(edited) > 3 else "")
        raise OutputExistsError(f"{out_dir} holds a trl-advisor bundle, and {shown} is not as trl-advisor wrote it "
                                "(edited or added since): --force would replace it",
                                hint="copy the edited files elsewhere, or delete them to take the new ones; or choose "
                                     "another --out")
    foreign = _not_replaceable(target)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise OutputExistsError(f"{out_dir} holds a trl-advisor bundle and also {shown}, which --force never deletes",
                                hint="move those elsewhere first (a trained model in output/, a run's logs/ and "
                                     "metrics/ would be lost), or choose another --out")


BUNDLE_NAMES = frozenset({"README.md", "plan.json", "train.py", "accelerate.yaml", "ds_config.json", "launch.sh",
                          "slurm.sbatch", "requirements.txt", "model_config.json", "teacher_config.json", MARKER_NAME})
"""Every file a bundle may hold (advisor.bundle.render.BUNDLE_ORDER and the marker)."""
RUN_ARTIFACTS = frozenset({"random-init", "verify.log", "verify-report.json", "verify-report.md", "__pycache__"})
"""What verifying a bundle leaves in it that trl-advisor can make again (train.py's --random-init-dir default,
verify's log and reports, Python's bytecode cache): `--force` deletes these with the bundle."""
RUN_RECORDS = ("output", "logs", "metrics")
"""What running a bundle leaves in it that nothing can make again: the trained model (output/), launch.sh's logs/ and
train.py's --metrics-dir (metrics/) of a run that may have taken days. `--force` replaces a bundle that holds them
only while they are empty folders."""


def _not_replaceable(folder: Path) -> list[str]:
    """Entries of a bundle folder that `--force` must not delete: anything but the bundle's own files, the run
    artifacts above and empty RUN_RECORDS folders."""
    out = []
    for name in sorted(os.listdir(folder)):
        if name in BUNDLE_NAMES or name in RUN_ARTIFACTS:
            continue
        if name in RUN_RECORDS:
            path = folder / name
            if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
                continue
        out.append(name + ("/" if (folder / name).is_dir() else ""))
    return out


# ------------------------------------------------------------------------------------------------ the write

def _write_and_swap(files: dict[str, str], target: Path, out_dir: str, *, force: bool,
                    guard: _SignalGuard, left_behind: list[str] | None = None) -> None:
    parent = target.parent
    staging: Path | None = None
    aside: Path | None = None
    committed = False
    try:
        with guard.deferred():  # the folder exists from mkdir on: `staging` must name it before a signal lands
            staging = _make_work_folder(parent, "new", target.name)
        new = _fill_payload(staging, files)
        with guard.deferred():  # between the two renames out_dir is missing: no signal may stop us there
            _check_target(target, out_dir, force=force)
            if os.path.lexists(target):
                aside = _make_work_folder(parent, "old", target.name)
                os.rename(target, aside / _PAYLOAD)
            try:
                os.rename(new, target)
            except BaseException:
                if aside is not None:
                    os.rename(aside / _PAYLOAD, target)  # put the old bundle back
                raise
            committed = True
        _fsync_dir(parent)
    finally:
        with guard.deferred():  # a second signal must not cut the cleanup short
            if staging is not None:
                _remove_work_folder(staging, keep_payload=False)
            if aside is not None:  # not committed and not put back: the old bundle stays for _remove_stale
                gone = _remove_work_folder(aside, keep_payload=not committed)
                if committed and not gone and left_behind is not None:
                    left_behind.append(str(aside))


def _fill_payload(staging: Path, files: dict[str, str]) -> Path:
    """The bundle, written and fsynced in staging/_PAYLOAD (the folder renamed into place, or emptied into out_dir)."""
    new = staging / _PAYLOAD
    os.mkdir(new)
    for name, content in files.items():
        _write_file(new / name, content, 0o755 if name in _EXECUTABLE else 0o644)
    _write_file(new / MARKER_NAME, _marker(files), 0o644)
    os.chmod(new, 0o755)
    _fsync_dir(new)  # the names, not only the contents, survive a crash (fsync(2): fsync the directory too)
    return new


def _write_file(path: Path, content: str, mode: int) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(content)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(path, mode)


def _fsync_dir(path: Path) -> None:
    """Best effort: some systems cannot open or fsync a directory (Windows; EINVAL on some filesystems)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------------------------ work folders

def _writer_marker_text(pid: int, host: str, target_name: str) -> str:
    return _WRITER_FIRST_LINE + "\n" + json.dumps({"pid": pid, "host": host, "target": target_name}) + "\n"


def _make_work_folder(parent: Path, kind: str, target_name: str) -> Path:
    """A new empty .tla-<kind>-<pid>-<hex8> folder whose .tla-writer records this process, written first."""
    text = _writer_marker_text(os.getpid(), socket.gethostname(), target_name)
    for _ in range(100):
        folder = parent / f".tla-{kind}-{os.getpid()}-{secrets.token_hex(4)}"
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue
        try:
            # Not fsynced: it guards against a killed process (the page cache survives that), and after a
            # power loss an unreadable marker only means the folder is left alone.
            fd = os.open(folder / _WRITER_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, text.encode("ascii"))  # json.dumps escapes every non-ASCII character
            finally:
                os.close(fd)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return folder
    raise FileExistsError(f"cannot create a work folder in {parent}")


def _read_writer_marker(folder: Path) -> dict | None:
    """{"pid", "host", "target"} from folder/.tla-writer, or None where it is missing, a link or malformed."""
    path = folder / _WRITER_NAME
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            raw = os.read(fd, 65536)
        finally:
            os.close(fd)
        first, _, rest = raw.decode("ascii").partition("\n")
        info = json.loads(rest) if first == _WRITER_FIRST_LINE else None
    except (OSError, ValueError):
        return None
    if not (isinstance(info, dict) and type(info.get("pid")) is int and info["pid"] > 0
            and isinstance(info.get("host"), str) and isinstance(info.get("target"), str)):
        return None
    name = info["target"]
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        return None
    return info


def _remove_work_folder(folder: Path, *, keep_payload: bool) -> bool:
    """Remove one of our work folders: the payload first, .tla-writer last, so that a kill half-way leaves a
    folder _remove_stale still recognises. Foreign entries stay (and with them the folder). True once it is gone."""
    payload = folder / _PAYLOAD
    if os.path.lexists(payload):
        if keep_payload:
            return False
        shutil.rmtree(payload, ignore_errors=True)
        if os.path.lexists(payload):
            return False
    try:
        os.unlink(folder / _WRITER_NAME)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        os.rmdir(folder)
    except OSError:
        return False
    return True


def _pid_alive(pid: int) -> bool:
    """False only when the kernel says no such process (kill(2) with signal 0 fails with ESRCH)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's; anything else: do not guess
        return True
    return True


def _remove_stale(parent: Path) -> None:
    """Remove work folders left by writers that were SIGKILLed (no handler can run then) or lost power.

    Only folders named .tla-(new|old)-<pid>-<hex8> holding a .tla-writer of this host whose pid is no longer
    alive; an abandoned old bundle (its writer died between the two renames, so out_dir is missing) is renamed
    back to out_dir instead of deleted. Empty ones (killed before .tla-writer was written) go too once older
    than _ABANDONED_EMPTY_AFTER_S and their name's pid is dead. Nothing else is touched.
    """
    if os.name != "posix":  # os.kill(pid, 0) is a liveness probe on POSIX only (on Windows 0 is CTRL_C_EVENT)
        return
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    host = socket.gethostname()
    for entry in entries:
        match = _WORK_NAME.fullmatch(entry.name)
        try:
            if match is None or not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        folder = Path(entry.path)
        info = _read_writer_marker(folder)
        if info is None:
            _remove_if_abandoned_empty(folder, int(match[2]))
            continue
        if info["host"] != host or info["pid"] != int(match[2]) or _pid_alive(info["pid"]):
            continue  # another host's pids mean nothing here; a live writer is still at work
        keep = False
        if match[1] == "old":
            original = parent / info["target"]
            if not os.path.lexists(original):
                try:
                    os.rename(folder / _PAYLOAD, original)
                except OSError:
                    keep = True
        _remove_work_folder(folder, keep_payload=keep)


def _remove_if_abandoned_empty(folder: Path, pid: int) -> None:
    try:
        if _pid_alive(pid) or time.time() - os.lstat(folder).st_mtime < _ABANDONED_EMPTY_AFTER_S:
            return
        names = os.listdir(folder)
        if names == [_WRITER_NAME]:  # killed between creating .tla-writer and writing it
            st = os.lstat(folder / _WRITER_NAME)
            if not stat.S_ISREG(st.st_mode) or st.st_size:
                return
            os.unlink(folder / _WRITER_NAME)
        elif names:
            return
        os.rmdir(folder)
    except OSError:
        return


# ------------------------------------------------------------------------------------------------ signals

class _SignalGuard:
    """While a bundle is written, SIGINT, SIGTERM and SIGHUP raise an exception where the code is, so the
    `finally` cleanup runs, instead of ending the process with a staging folder left behind.

    Each signal then does what it did before: the previous Python handler is called (SIGINT's default raises
    KeyboardInterrupt, which the CLI turns into exit 130); where the default action was to end the process
    (SIG_DFL), SystemExit(128 + signum), the status a shell reports for death by that signal. Ignored signals
    (e.g. SIGHUP under nohup) and handlers set outside Python stay as they are. Inside `deferred()` (around the
    renames and the cleanup) a signal waits until the block ends. Python runs handlers in the main thread only
    (signal module docs), so elsewhere nothing is installed and a killed writer is cleaned by _remove_stale.
    """

    def __init__(self) -> None:
        self._previous: dict[int, object] = {}
        self._pending: list[int] = []
        self._defer = 0
        self._raised = False

    def __enter__(self) -> _SignalGuard:
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in _SIGNALS:
            previous = signal.getsignal(sig)
            if previous is None or previous == signal.SIG_IGN:
                continue
            try:
                signal.signal(sig, self._handle)
            except (OSError, ValueError):  # ValueError: not the main interpreter
                continue
            self._previous[sig] = previous
        return self

    def __exit__(self, *exc_info) -> bool:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        late = list(dict.fromkeys(self._pending))
        self._previous.clear()
        self._pending.clear()
        for sig in late:  # arrived while an earlier signal's exception was on its way: deliver them as they were
            signal.raise_signal(sig)
        return False

    @contextmanager
    def deferred(self):
        self._defer += 1
        try:
            yield
        finally:
            self._defer -= 1
        if not self._defer and not self._raised and self._pending:
            self._dispatch(self._pending.pop(0), None)

    def _handle(self, signum, frame) -> None:
        if self._defer or self._raised:
            self._pending.append(signum)
            return
        self._dispatch(signum, frame)

    def _dispatch(self, signum, frame) -> None:
        previous = self._previous.get(signum)
        self._raised = True
        if not callable(previous):
            raise SystemExit(128 + signum)
        previous(signum, frame)
        self._raised = False  # the caller's own handler chose not to stop the write
