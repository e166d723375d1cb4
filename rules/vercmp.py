"""A tiny PEP 440-style version comparator (the core does not depend on `packaging`).

Covers what package versions in this domain look like: `1.16.0`, `0.19.8`, `2026.10.9`, `5.24.0.dev0`,
`2.13.0+cpu`, `0.8.5rc1`, `1.0.post1`, and specifiers such as `>=0.22.0,<=0.31.0`, `==5.2.*`, `!=0.19.0`, `~=1.15`.
"""

from __future__ import annotations

import re

_VERSION = re.compile(
    r"^\s*v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[._-]?(?P<phase>dev|a|alpha|b|beta|c|rc|pre|preview|post)[._-]?(?P<num>\d*))?"
    r"(?:[._-]?(?P<phase2>dev|post)[._-]?(?P<num2>\d*))?"
    r"(?:\+[0-9A-Za-z.]+)?\s*$",
    re.IGNORECASE,
)
# PEP 440 order of the suffixes: X.devN < X.aN < X.bN < X.rcN < X < X.postN
_PHASE_RANK = {"dev": -4, "a": -3, "alpha": -3, "b": -2, "beta": -2, "c": -1, "rc": -1, "pre": -1, "preview": -1,
               "post": 1}
_OPERATORS = ("~=", "==", "!=", ">=", "<=", ">", "<")
MAX_VERSION_CHARS = 64
"""Longest version string read. Real ones are short (`2026.10.9`, `5.24.0.dev0`, `2.13.0+cu130` has 12 characters;
local labels of nightly builds reach about 30); a longer string is not a version of a package we check."""
MAX_RELEASE_PARTS = 12
"""Release components (`1.2.3` has 3): PEP 440 sets no limit, real releases have at most 4 or 5."""
MAX_PART_DIGITS = 9
"""Digits of one number in a version (calendar versions have 8: `20260110`). Python's int() refuses more than
4,300 digits with a ValueError; this keeps every number a small int and the error a VersionError."""


class VersionError(ValueError):
    """A version or specifier string this comparator cannot read."""


def parse(version: str) -> tuple[tuple[int, ...], int, int, int, int]:
    """`1.16.0rc1` -> ((1, 16), -1, 1, 0, 0): release without trailing zeros, suffix rank and number, then a
    second suffix (`1.0rc1.dev2`). Trailing zeros are dropped so that `1.16` == `1.16.0`. VersionError for
    anything else, including strings longer than MAX_VERSION_CHARS and numbers longer than MAX_PART_DIGITS."""
    m = _match(version)
    release = list(_release(m["release"], version))
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    phase = _PHASE_RANK[m["phase"].lower()] if m["phase"] else 0
    num = _number(m["num"], version)
    phase2 = _PHASE_RANK[m["phase2"].lower()] if m["phase2"] else 0
    num2 = _number(m["num2"], version)
    return tuple(release), phase, num, phase2, num2


def is_version(version: object) -> bool:
    """True when `version` is a version string parse() reads."""
    if not isinstance(version, str):
        return False
    try:
        parse(version)
    except VersionError:
        return False
    return True


def shown(text: object) -> str:
    """A version string as a message shows it: repr, cut after MAX_VERSION_CHARS characters."""
    value = repr(text)
    return value if len(value) <= MAX_VERSION_CHARS + 2 else value[:MAX_VERSION_CHARS - 1] + "...'"


def _match(version: object) -> re.Match:
    text = str(version)
    if len(text) > MAX_VERSION_CHARS:
        raise VersionError(f"not a version: {shown(text)} ({len(text)} characters, at most {MAX_VERSION_CHARS})")
    m = _VERSION.match(text)
    if not m:
        raise VersionError(f"not a version: {shown(text)}")
    return m


def _release(text: str, version: object) -> tuple[int, ...]:
    parts = text.split(".")
    if len(parts) > MAX_RELEASE_PARTS:
        raise VersionError(f"not a version: {shown(version)} (more than {MAX_RELEASE_PARTS} release numbers)")
    return tuple(_number(part, version) for part in parts)


def _number(digits: str | None, version: object) -> int:
    if not digits:
        return 0
    if len(digits) > MAX_PART_DIGITS or not digits.isdigit():
        raise VersionError(f"not a version: {shown(version)} (a number longer than {MAX_PART_DIGITS} digits)")
    return int(digits)


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as a is older than, equal to or newer than b."""
    ka, kb = _key(a), _key(b)
    return (ka > kb) - (ka < kb)


def _key(version: str) -> tuple:
    release, phase, num, phase2, num2 = parse(version)
    return _pad(release, 6), phase, num, phase2, num2


def _pad(release: tuple[int, ...], n: int) -> tuple[int, ...]:
    return release + (0,) * (n - len(release))


def satisfies(version: str, specifier: str) -> bool:
    """True when `version` meets every comma-separated clause of `specifier` (an empty specifier always holds)."""
    return all(_clause(version, clause.strip()) for clause in specifier.split(",") if clause.strip())


def _clause(version: str, clause: str) -> bool:
    for op in _OPERATORS:
        if clause.startswith(op):
            target = clause[len(op):].strip()
            break
    else:
        raise VersionError(f"not a version specifier: {shown(clause)} (use one of {', '.join(_OPERATORS)})")
    if target.endswith(".*"):
        if op not in ("==", "!="):
            raise VersionError(f"a wildcard is only allowed with == or !=: {shown(clause)}")
        if not re.fullmatch(r"\d+(?:\.\d+)*", target[:-2]):
            raise VersionError(f"not a version prefix: {shown(clause)}")
        prefix = _release(target[:-2], clause)
        release = _release(_match(version)["release"], version)
        matched = _pad(release, len(prefix))[: len(prefix)] == prefix
        return matched if op == "==" else not matched
    c = compare(version, target)
    if op == "==":
        return c == 0
    if op == "!=":
        return c != 0
    if op == ">=":
        return c >= 0
    if op == "<=":
        return c <= 0
    if op == ">":
        return c > 0
    if op == "<":
        return c < 0
    # ~= X.Y.Z: >= X.Y.Z and == X.Y.* (PEP 440 compatible release)
    parts = target.split(".")
    if len(parts) < 2:
        raise VersionError(f"~= needs at least two release numbers: {shown(clause)}")
    return c >= 0 and _clause(version, "==" + ".".join(parts[:-1]) + ".*")


def violations(version_of, specs) -> list[tuple[str, str, str]]:
    """(package, installed, specifier) for every known version outside its specifier; unknown or unparsable
    versions never count (a rule must not fail on what it cannot read). `specs` is a mapping or (package, spec)
    pairs; `version_of(package)` returns the version or None."""
    pairs = specs.items() if hasattr(specs, "items") else specs
    out = []
    for package, spec in pairs:
        have = version_of(package)
        if have is None:
            continue
        try:
            inside = satisfies(have, spec)
        except VersionError:
            continue
        if not inside:
            out.append((package, have, spec))
    return out
