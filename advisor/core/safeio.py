"""Reading files a user names (config.json, a probe report, a bundle's plan.json, YAML and text files) safely.

The bottom layer: only the standard library and `yaml`, so that every other module may use it. Each function raises
UnsafeInputError, a ValueError with a one-line message that names the file; callers map it to their own error type
(advisor.core.errors.InputFileError for the CLI).

What "safely" means here:
* only regular files are read: a named pipe would block the open or the read forever, a device (/dev/zero,
  /dev/urandom) never ends, a socket or a folder is not a file. Symlinks are followed (a model folder of the Hugging
  Face cache is all symlinks into blobs/), but the file type is checked with fstat on the opened descriptor, so a
  symlink to a device is refused and nothing can be swapped between the check and the read;
* reads are bounded: at most max_bytes + 1 bytes are read, and a larger file is refused;
* text is strict UTF-8, and an error names the byte offset;
* JSON and YAML are checked for what their parsers accept but the programs reading them cannot handle: NaN and
  Infinity (not JSON, yet json.loads reads them), numbers that overflow, nesting deep enough to exhaust the stack,
  and YAML aliases (a few hundred bytes of nested aliases expand to billions of nodes, "billion laughs").
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from collections.abc import Mapping
from typing import Any

import yaml

MAX_CONFIG_BYTES = 8 * 1024 * 1024
"""8 MiB: the largest config.json on the Hub is a few hundred KiB (a vision-language model listing every layer);
probe reports and plan.json files are tens of KiB. Anything bigger is a weights or data file given by mistake."""
MAX_DEPTH = 64
"""Nesting depth of JSON/YAML values: real configs are under 10 deep (a DeepSpeed config is 3). json.loads and the
YAML composer recurse once per level, so a file nested a few thousand deep would otherwise raise RecursionError."""
MAX_INT_DIGITS = 32
"""Digits of a JSON/YAML integer: 2**64 has 20, and no size, count or seed in a configuration needs more. Python's
int() refuses more than 4,300 digits with a ValueError, and the arithmetic on huge values is slow."""
MAX_REF_BYTES = 256
"""A Hugging Face cache ref (refs/main) holds one 40-character commit hash."""

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class UnsafeInputError(ValueError):
    """A file that cannot be read safely, or whose content is not what the reader accepts. One line; names the
    file. `reason` is a short machine-readable word: missing, not-regular, too-large, not-utf8, unreadable,
    malformed."""

    def __init__(self, message: str, *, reason: str = "malformed",
                 syntax: tuple[int, int, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.syntax = syntax
        """(line, column, what the parser expected) of a JSON syntax error, for callers with their own wording."""


def file_kind(mode: int) -> str:
    """`a named pipe (FIFO)`, `a character device`, ... for a stat mode that is not a regular file."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def size_text(n: int) -> str:
    """Bytes as a person reads them, for sizes and limits in messages: `8 MiB` and `2 MB` for limits defined as
    round numbers of either unit, `3.1 MiB` otherwise."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("GB", 10**9), ("MB", 10**6),
                       ("kB", 10**3)):
        if n % size == 0 and 1 <= n // size < 1000:
            return f"{n // size} {unit}"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _open_regular(path: str | os.PathLike[str], what: str) -> int:
    """An O_RDONLY descriptor of a regular file, or UnsafeInputError. stat() first so that a device is never opened
    (opening some has side effects: a tape rewinds, a terminal becomes the controlling one), fstat() after so that
    the file read is the file checked. O_NONBLOCK makes the open of a FIFO that appears in between return at once."""
    name = os.fspath(path)
    try:
        before = os.stat(name)
    except FileNotFoundError:
        raise UnsafeInputError(f"{what} not found: {name}", reason="missing") from None
    except (OSError, ValueError) as exc:  # ValueError: an embedded NUL byte in the name
        raise UnsafeInputError(f"cannot read {what} {name}: {_reason(exc)}", reason="unreadable") from None
    if not stat.S_ISREG(before.st_mode):
        raise UnsafeInputError(f"{what} {name} is {file_kind(before.st_mode)}, not a regular file",
                               reason="not-regular")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags)
    except OSError as exc:
        raise UnsafeInputError(f"cannot read {what} {name}: {_reason(exc)}", reason="unreadable") from None
    try:
        after = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise UnsafeInputError(f"cannot read {what} {name}: {_reason(exc)}", reason="unreadable") from None
    if not stat.S_ISREG(after.st_mode):
        os.close(fd)
        raise UnsafeInputError(f"{what} {name} is {file_kind(after.st_mode)}, not a regular file",
                               reason="not-regular")
    return fd


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def read_bytes(path: str | os.PathLike[str], *, max_bytes: int, what: str = "file") -> bytes:
    """The content of a regular file of at most max_bytes bytes (at most max_bytes + 1 are read)."""
    fd = _open_regular(path, what)
    chunks: list[bytes] = []
    total = 0
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:  # refused before reading anything; the loop below caps a file that grows meanwhile
            raise UnsafeInputError(f"{what} {os.fspath(path)} is {size_text(size)}, above the "
                                   f"{size_text(max_bytes)} limit for this kind of file", reason="too-large")
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise UnsafeInputError(f"cannot read {what} {os.fspath(path)}: {_reason(exc)}", reason="unreadable") from None
    finally:
        os.close(fd)
    if total > max_bytes:
        raise UnsafeInputError(f"{what} {os.fspath(path)} is larger than the {size_text(max_bytes)} limit for this "
                               "kind of file", reason="too-large")
    return b"".join(chunks)


def decode_utf8(data: bytes, *, where: str) -> str:
    """Strict UTF-8 (a leading byte-order mark is dropped); the error names the first bad byte and its offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start:exc.start + 1].hex()
        raise UnsafeInputError(f"cannot read {where}: not UTF-8 text (byte 0x{bad} at offset {exc.start})",
                               reason="not-utf8") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str | os.PathLike[str], *, max_bytes: int = MAX_CONFIG_BYTES, what: str = "file") -> str:
    """A regular file of at most max_bytes bytes as strict UTF-8 text."""
    return decode_utf8(read_bytes(path, max_bytes=max_bytes, what=what), where=f"{what} {os.fspath(path)}")


def read_tail(path: str | os.PathLike[str], *, max_bytes: int, what: str = "file") -> str:
    """The last max_bytes bytes of a regular file (a log), undecodable bytes replaced; "" for a missing file."""
    try:
        fd = _open_regular(path, what)
    except UnsafeInputError as exc:
        if exc.reason == "missing":
            return ""
        raise
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - max_bytes), os.SEEK_SET)
        data = os.read(fd, max_bytes)
    except OSError as exc:
        raise UnsafeInputError(f"cannot read {what} {os.fspath(path)}: {_reason(exc)}", reason="unreadable") from None
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def open_output(path: str | os.PathLike[str], *, what: str = "file"):
    """A text file opened for writing (created or truncated) that is a regular file and not a symlink: a FIFO put
    in its place would block the open, a symlink would send the output to another file."""
    name = os.fspath(path)
    flags = (os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.lstat(name)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UnsafeInputError(f"cannot write {what} {name}: {_reason(exc)}", reason="unreadable") from None
    else:
        if not stat.S_ISREG(st.st_mode):
            kind = "a symlink" if stat.S_ISLNK(st.st_mode) else file_kind(st.st_mode)
            raise UnsafeInputError(f"{what} {name} is {kind}, not a regular file: remove it first",
                                   reason="not-regular")
    try:
        fd = os.open(name, flags, 0o644)
    except OSError as exc:
        raise UnsafeInputError(f"cannot write {what} {name}: {_reason(exc)}", reason="unreadable") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeInputError(f"{what} {name} is not a regular file: remove it first", reason="not-regular")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "w", encoding="utf-8", errors="replace")


# ------------------------------------------------------------------------------------------------------ JSON


class _Refused:
    """A JSON number the parser hooks refused, kept in the tree so that the walk can name its key."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _refuse_constant(name: str) -> _Refused:
    return _Refused(f"is {name}, not a number (JSON has no NaN or Infinity)")


def _parse_float(text: str) -> float | _Refused:
    value = float(text)
    if not math.isfinite(value):
        return _Refused(f"is {text[:40]}, out of the range of a 64-bit float")
    return value


def _parse_int(text: str) -> int | _Refused:
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS:
        return _Refused(f"is an integer of {len(digits)} digits (at most {MAX_INT_DIGITS} are accepted)")
    return int(text)


def load_json(text: str, *, where: str, max_depth: int = MAX_DEPTH, allow_nan: bool = False) -> Any:
    """Parse JSON text. NaN, Infinity and -Infinity (Python extensions, not JSON) are refused unless allow_nan (for
    metrics files that json.dumps wrote); so are floats that overflow to infinity, integers longer than
    MAX_INT_DIGITS digits and nesting deeper than max_depth. The one-line error names the file (`where`) and the
    key: `config.json: num_hidden_layers is NaN, not a number (JSON has no NaN or Infinity)`."""
    hooks: dict[str, Any] = {"parse_int": _parse_int}
    if not allow_nan:
        hooks["parse_constant"] = _refuse_constant
        hooks["parse_float"] = _parse_float
    try:
        value = json.loads(text, **hooks)
    except json.JSONDecodeError as exc:
        raise UnsafeInputError(f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                               syntax=(exc.lineno, exc.colno, exc.msg)) from None
    except RecursionError:  # the C scanner recurses once per level and stops at the interpreter's limit
        raise UnsafeInputError(f"{where}: nested deeper than {max_depth} levels") from None
    _check_tree(value, where=where, max_depth=max_depth, finite=not allow_nan)
    return value


def key_path(path: tuple) -> str:
    """(`gpus`, 3, `memory_total_bytes`) -> `gpus.3.memory_total_bytes`, as pydantic names a field."""
    return ".".join(str(part) for part in path) if path else "the top-level value"


def _check_tree(value: Any, *, where: str, max_depth: int, finite: bool) -> None:
    """Depth, refused numbers and (when `finite`) NaN/infinite floats of a parsed value, in document order, walked
    with an explicit stack: a recursive walk would fail on the very documents it is checking."""
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, (Mapping, list, tuple)):
            if len(path) >= max_depth:
                raise UnsafeInputError(f"{where}: nested deeper than {max_depth} levels")
            pairs = list(item.items()) if isinstance(item, Mapping) else list(enumerate(item))
            for key, child in reversed(pairs):
                if isinstance(key, float) and finite and not math.isfinite(key):
                    raise UnsafeInputError(f"{where}: {key_path(path)} has the key {key}, not a finite number")
                stack.append((child, (*path, key)))
        elif isinstance(item, _Refused):
            raise UnsafeInputError(f"{where}: {key_path(path)} {item.why}")
        elif isinstance(item, float) and finite and not math.isfinite(item):
            raise UnsafeInputError(f"{where}: {key_path(path)} is {item}, not a finite number")
        elif isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 4 * MAX_INT_DIGITS:
            raise UnsafeInputError(f"{where}: {key_path(path)} is an integer of more than {MAX_INT_DIGITS} digits")


# ------------------------------------------------------------------------------------------------------ YAML


class BoundedSafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses aliases (`*name`, and so `<<: *name` merges) and nesting deeper than
    `max_depth`. Configuration files written by accelerate, TRL or a person have no use for aliases; refusing them
    closes "billion laughs", where nine levels of nine aliases each are a few hundred bytes and 10**9 nodes for
    whatever walks the result (str(), a JSON schema check, a rule). The check is in compose_node, before the node
    is built, so a deep document stops at max_depth instead of exhausting the stack."""

    max_depth = MAX_DEPTH

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):  # noqa: D401 - yaml.composer.Composer API
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "YAML aliases (*name) are not accepted in configuration "
                                              "files", event.start_mark)
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                event = self.peek_event()
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {self.max_depth} levels",
                                                  event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(node.value).replace("_", "").lstrip("+-")
    if len(text) > MAX_INT_DIGITS:
        raise yaml.constructor.ConstructorError(None, None, f"an integer of {len(text)} digits (at most "
                                                f"{MAX_INT_DIGITS} are accepted)", node.start_mark)
    return yaml.SafeLoader.construct_yaml_int(loader, node)


BoundedSafeLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def load_yaml(text: str, *, where: str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse YAML text with BoundedSafeLoader (no aliases, at most max_depth levels, no Python tags); .nan and .inf
    are refused as in load_json. Errors are one line with the line number."""
    loader_type = type("_Loader", (BoundedSafeLoader,), {"max_depth": max_depth}) \
        if max_depth != BoundedSafeLoader.max_depth else BoundedSafeLoader
    loader = None
    try:
        loader = loader_type(text)  # the reader checks every character here: a control character raises already
        value = loader.get_single_data()
    except yaml.reader.ReaderError as exc:  # no problem_mark: a position in characters instead
        raise UnsafeInputError(f"{where}: invalid YAML: the character U+{exc.character:04X} at position "
                               f"{exc.position} is not allowed (YAML accepts printable characters only)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise UnsafeInputError(f"{where}: invalid YAML{at}: {problem}") from None
    except RecursionError:
        raise UnsafeInputError(f"{where}: nested deeper than {max_depth} levels") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a scalar the constructors cannot convert
        raise UnsafeInputError(f"{where}: invalid YAML value: {_reason(exc)[:120]}") from None
    finally:
        if loader is not None:
            loader.dispose()
    _check_tree(value, where=where, max_depth=max_depth, finite=True)
    return value


# ------------------------------------------------------------------------------------------------------ values

_KIND_NAMES = {"int": "a whole number", "float": "a number", "str": "text", "bool": "true or false",
               "dict": "an object", "list": "a list"}


def value_problem(value: Any, kind: str, *, low: float | None = None, high: float | None = None) -> str | None:
    """Why `value` is not of `kind` (int, float, str, bool, dict, list) within [low, high], or None when it is.
    bool is not an int here (JSON true is not 1 GPU); a float must be finite; an int is accepted for a float."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = {
        "int": number and isinstance(value, int),
        "float": number and (isinstance(value, int) or math.isfinite(value)),
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "dict": isinstance(value, dict),
        "list": isinstance(value, list),
    }[kind]
    if not ok:
        return f"is {shown(value)}, expected {_KIND_NAMES[kind]}"
    if kind in ("int", "float"):
        if low is not None and value < low:
            return f"is {value}, below {low:g}"
        if high is not None and value > high:
            return f"is {value}, above {high:g}"
    return None


def shown(value: Any, limit: int = 40) -> str:
    """A value as an error message shows it: repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shell_path(path: str) -> str:
    """A path as one shell word that no command reads as an option: a relative path that starts with `-` gets `./`
    (`bash -dash/launch.sh` would be `bash -d ...`; `trl-advisor verify -dash` an unknown flag), then shlex.quote."""
    import shlex

    text = str(path)
    return shlex.quote("./" + text if text.startswith("-") else text)
