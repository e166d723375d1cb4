"""advisor.core.safeio, the one reader of user files: regular files only (checked on the opened descriptor), bounded
reads, strict UTF-8, JSON without NaN/Infinity/overflow/deep nesting, YAML without aliases or deep nesting."""

from __future__ import annotations

import ast
import os
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from advisor.core import safeio
from advisor.core.safeio import UnsafeInputError

REPO = Path(__file__).resolve().parents[2]

BILLION_LAUGHS = """\
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
distributed_type: *i
"""
"""Nine levels of nine aliases: 409 bytes, 9**9 (387 million) strings for whatever walks the loaded value."""


@contextmanager
def within(seconds: float):
    """Fail instead of hanging: SIGALRM interrupts a blocked open() or read() and the handler raises."""
    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: the read blocks")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def refused(call, *args, **kwargs) -> UnsafeInputError:
    with within(5), pytest.raises(UnsafeInputError) as info:
        call(*args, **kwargs)
    assert "\n" not in info.value.message
    assert isinstance(info.value, ValueError)
    return info.value


# ---------------------------------------------------------------------------------------------- read_text


def test_regular_file_and_a_symlink_to_one_are_read(tmp_path):
    real = tmp_path / "config.json"
    real.write_text('{"a": 1}', encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert safeio.read_text(real, max_bytes=100) == '{"a": 1}'
    assert safeio.read_text(link, max_bytes=100) == '{"a": 1}'


def test_a_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf{}")
    assert safeio.read_text(path, max_bytes=100) == "{}"


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    err = refused(safeio.read_text, fifo, max_bytes=100, what="config.json")
    assert err.reason == "not-regular"
    assert "named pipe" in err.message and str(fifo) in err.message and "config.json" in err.message


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_devices_are_refused(device):
    if not os.path.exists(device):
        pytest.skip(f"{device} not on this system")
    err = refused(safeio.read_text, device, max_bytes=100)
    assert err.reason == "not-regular" and "character device" in err.message


def test_symlink_to_a_device_is_refused(tmp_path):
    link = tmp_path / "config.json"
    link.symlink_to("/dev/zero")
    err = refused(safeio.read_bytes, link, max_bytes=100)
    assert "character device" in err.message and str(link) in err.message


def test_folder_missing_file_and_socket(tmp_path):
    assert refused(safeio.read_text, tmp_path, max_bytes=10).message.endswith("is a folder, not a regular file")
    missing = refused(safeio.read_text, tmp_path / "nope.json", max_bytes=10, what="hardware file")
    assert missing.reason == "missing" and missing.message == f"hardware file not found: {tmp_path / 'nope.json'}"
    if sys.platform != "win32":
        import socket

        path = tmp_path / "s.sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        try:
            assert "a socket" in refused(safeio.read_text, path, max_bytes=10).message
        finally:
            server.close()


def test_embedded_nul_in_a_name_is_an_unreadable_file():
    assert refused(safeio.read_text, "a\0b", max_bytes=10).reason == "unreadable"


def test_file_above_the_limit_is_refused_with_its_size(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 3_000_001)
    err = refused(safeio.read_text, path, max_bytes=2_000_000, what="bundle file")
    assert err.reason == "too-large"
    assert "2 MB" in err.message and "2.9 MiB" in err.message
    assert safeio.read_text(path, max_bytes=3_000_001) == " " * 3_000_001  # the limit itself is allowed


def test_not_utf8_names_the_byte_and_its_offset(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"model_type": "qw\xe9n2"}')
    err = refused(safeio.read_text, path, max_bytes=100, what="config.json")
    assert err.reason == "not-utf8"
    assert "byte 0xe9 at offset 18" in err.message and str(path) in err.message


def test_read_tail_reads_only_the_end(tmp_path):
    log = tmp_path / "verify.log"
    log.write_bytes(b"x" * 10_000 + b"\nlast line \xff\n")
    tail = safeio.read_tail(log, max_bytes=100)
    assert len(tail.encode()) <= 102 and tail.endswith("last line \ufffd\n")
    assert safeio.read_tail(tmp_path / "missing.log", max_bytes=100) == ""
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    refused(safeio.read_tail, fifo, max_bytes=100)


def test_open_output_refuses_a_fifo_and_a_symlink(tmp_path):
    fifo = tmp_path / "verify.log"
    os.mkfifo(fifo)
    assert "named pipe" in refused(safeio.open_output, fifo, what="log file").message
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link = tmp_path / "link.log"
    link.symlink_to(target)
    assert "symlink" in refused(safeio.open_output, link).message
    assert target.read_text() == "keep me"
    with safeio.open_output(tmp_path / "new.log") as fh:
        fh.write("ok\n")
    assert (tmp_path / "new.log").read_text() == "ok\n"


# ---------------------------------------------------------------------------------------------- JSON


@pytest.mark.parametrize(("text", "expected"), [
    ('{"num_hidden_layers": NaN}', "num_hidden_layers is NaN"),
    ('{"a": {"b": [1, Infinity]}}', "a.b.1 is Infinity"),
    ('{"a": -Infinity}', "a is -Infinity"),
    ('{"a": 1e400}', "a is 1e400, out of the range of a 64-bit float"),
    ('{"a": -1e400}', "a is -1e400"),
    ('{"a": ' + "9" * 5000 + "}", "a is an integer of 5000 digits"),
    ("NaN", "the top-level value is NaN"),
])
def test_json_non_finite_and_huge_numbers_name_the_key(text, expected):
    err = refused(safeio.load_json, text, where="config.json")
    assert err.message.startswith("config.json: ") and expected in err.message


@pytest.mark.parametrize("depth", [65, 900, 5000, 100_000])
def test_json_nested_deeper_than_the_limit(depth):
    for opener, closer in (("[", "]"), ('{"a":', "}")):
        text = opener * depth + "1" + closer * depth
        err = refused(safeio.load_json, text, where="x.json")
        assert err.message == "x.json: nested deeper than 64 levels"


def test_json_at_the_depth_limit_and_ordinary_values_load():
    assert safeio.load_json("[" * 64 + "]" * 64, where="x")
    assert safeio.load_json('{"a": 1.5, "b": [true, null, "x"], "c": -3}', where="x") == {
        "a": 1.5, "b": [True, None, "x"], "c": -3}


def test_json_syntax_error_keeps_line_and_column():
    err = refused(safeio.load_json, '{"a": 1,\n "b": }', where="plan.json")
    assert "not valid JSON (line 2, column 7" in err.message
    assert err.syntax == (2, 7, "Expecting value")


def test_allow_nan_reads_metrics_back():
    assert str(safeio.load_json('{"loss": NaN, "grad_norm": Infinity}', where="m", allow_nan=True)["loss"]) == "nan"
    refused(safeio.load_json, '{"step": ' + "1" * 100 + "}", where="m", allow_nan=True)  # still no huge ints


# ---------------------------------------------------------------------------------------------- YAML


def test_billion_laughs_is_refused_at_the_first_alias_at_once():
    assert len(BILLION_LAUGHS) < 1024
    start = time.monotonic()
    err = refused(safeio.load_yaml, BILLION_LAUGHS, where="accelerate.yaml")
    assert time.monotonic() - start < 5  # expanded, the bomb never ends; 5 s leaves a loaded host room
    assert "aliases" in err.message and "line 2" in err.message


def test_merge_keys_are_aliases_too():
    refused(safeio.load_yaml, "base: &b {x: 1}\nrun:\n  <<: *b\n  y: 2\n", where="a.yaml")


def test_an_anchor_without_alias_is_harmless():
    assert safeio.load_yaml("a: &x 1\nb: 2\n", where="a.yaml") == {"a": 1, "b": 2}


@pytest.mark.parametrize("text", [
    "x: " + "[" * 5000 + "]" * 5000,
    "x: " + "{a: " * 3000 + "1" + "}" * 3000,
    "a:\n" + "".join("  " * i + "- \n" for i in range(1, 3000)),
])
def test_yaml_nested_deeper_than_the_limit(text):
    assert "nested deeper than 64 levels" in refused(safeio.load_yaml, text, where="a.yaml").message


@pytest.mark.parametrize(("text", "expected"), [
    ("x: .nan", "x is nan, not a finite number"),
    ("a:\n  b: [1, -.inf]", "a.b.1 is -inf"),
    ("x: " + "1" * 5000, "an integer of 5000 digits"),
    ("x: 0x" + "f" * 100, "digits"),
    ("x: !!python/object/apply:os.system ['true']", "could not determine a constructor"),
    ("x: [1, 2", "invalid YAML at line"),
    ("x: a\x80b", "the character U+0080 at position 4 is not allowed"),
    ("x: 1\n\x1b[31m", "U+001B"),
])
def test_yaml_values_python_tags_and_syntax(text, expected):
    assert expected in refused(safeio.load_yaml, text, where="a.yaml").message


def test_yaml_ordinary_config_loads():
    text = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 8\nx: 1.5e-5\n"
    assert safeio.load_yaml(text, where="a.yaml") == {"compute_environment": "LOCAL_MACHINE",
                                                      "distributed_type": "DEEPSPEED", "num_processes": 8,
                                                      "x": 1.5e-5}


# ---------------------------------------------------------------------------------------------- values


@pytest.mark.parametrize(("value", "kind", "bounds", "problem"), [
    ("eight", "int", {}, "is 'eight', expected a whole number"),
    ([2], "int", {}, "is [2], expected a whole number"),
    (True, "int", {}, "is True, expected a whole number"),
    (2.0, "int", {}, "is 2.0, expected a whole number"),
    (float("nan"), "float", {}, "is nan, expected a number"),
    (0, "int", {"low": 1}, "is 0, below 1"),
    (10**9, "int", {"high": 1024}, "is 1000000000, above 1024"),
    (5, "str", {}, "is 5, expected text"),
    ("x" * 100, "int", {}, "expected a whole number"),
])
def test_value_problem(value, kind, bounds, problem):
    found = safeio.value_problem(value, kind, **bounds)
    assert found is not None and problem in found and len(found) < 100


@pytest.mark.parametrize(("value", "kind"), [(8, "int"), (0.3, "float"), (3, "float"), ("h100", "str"),
                                             (False, "bool"), ({}, "dict"), ([], "list"), (10**40, "float")])
def test_value_problem_accepts(value, kind):
    assert safeio.value_problem(value, kind) is None


# ---------------------------------------------------------------------------------------------- layering


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_safeio_imports_only_the_standard_library_and_yaml():
    imported = _imported_modules(REPO / "advisor" / "core" / "safeio.py") - {"__future__"}
    assert imported - set(sys.stdlib_module_names) == {"yaml"}


def test_hw_probe_imports_nothing_from_the_advisor():
    for path in sorted((REPO / "hw_probe").glob("*.py")):
        assert not _imported_modules(path) & {"advisor", "rules", "tui"}, path
