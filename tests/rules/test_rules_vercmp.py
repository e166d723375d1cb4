"""The version comparator against PEP 440 orderings worked out by hand."""

from __future__ import annotations

import pytest

from rules.vercmp import VersionError, compare, satisfies


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("1.16.0", "1.15.0", 1), ("1.16", "1.16.0", 0), ("0.19.8", "0.19.10", -1), ("2026.10.9", "2026.9.30", 1),
    ("5.24.0.dev0", "5.24.0", -1), ("5.24.0rc1", "5.24.0", -1), ("5.24.0a1", "5.24.0b1", -1),
    ("5.24.0", "5.24.0.post1", -1), ("2.13.0+cpu", "2.13.0", 0), ("1.0rc1.dev2", "1.0rc1", -1),
    ("v1.2.3", "1.2.3", 0),
])
def test_compare(a, b, expected):
    assert compare(a, b) == expected


@pytest.mark.parametrize(("version", "spec", "expected"), [
    ("0.31.0", ">=0.22.0,<=0.31.0", True), ("0.33.0", ">=0.22.0,<=0.31.0", False), ("0.21.9", ">=0.22.0", False),
    ("5.3.0", ">=5.2.0,<5.4.0", True), ("5.4.0", ">=5.2.0,<5.4.0", False), ("0.19.0", ">=0.18.2,!=0.19.0", False),
    ("5.2.7", "==5.2.*", True), ("5.3.0", "==5.2.*", False), ("5.3.0", "!=5.2.*", True),
    ("1.15.2", "~=1.15.0", True), ("1.16.0", "~=1.15.0", False), ("1.16.0", "", True), ("2.6", ">2.5", True),
])
def test_satisfies(version, spec, expected):
    assert satisfies(version, spec) is expected


def test_bad_input_raises():
    with pytest.raises(VersionError):
        compare("banana", "1.0")
    with pytest.raises(VersionError):
        satisfies("1.0", "=>1.0")
