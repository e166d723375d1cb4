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


class VersionError(ValueError):
    """A version or specifier string this comparator cannot read."""


def parse(version: str) -> tuple[tuple[int, ...], int, int, int, int]:
    """`1.16.0rc1` -> ((1, 16), -1, 1, 0, 0): release without trailing zeros, suffix rank and number, then a
    second suffix (`1.0rc1.dev2`). Trailing zeros are dropped so that `1.16` == `1.16.0`."""
    m = _VERSION.match(str(version))
    if not m:
        raise VersionError(f"not a version: {version!r}")
    release = [int(x) for x in m["release"].split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    phase = _PHASE_RANK[m["phase"].lower()] if m["phase"] else 0
    num = int(m["num"] or 0)
    phase2 = _PHASE_RANK[m["phase2"].lower()] if m["phase2"] else 0
    num2 = int(m["num2"] or 0)
    return tuple(release), phase, num, phase2, num2


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
        raise VersionError(f"not a version specifier: {clause!r} (use one of {', '.join(_OPERATORS)})")
    if target.endswith(".*"):
        if op not in ("==", "!="):
            raise VersionError(f"a wildcard is only allowed with == or !=: {clause!r}")
        prefix = tuple(int(x) for x in target[:-2].split("."))
        full = _VERSION.match(str(version))
        if not full:
            raise VersionError(f"not a version: {version!r}")
        release = tuple(int(x) for x in full["release"].split("."))
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
        raise VersionError(f"~= needs at least two release numbers: {clause!r}")
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
