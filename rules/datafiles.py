"""Read the rule engine's data files (rules/data/*.toml) as package data, never through __file__ paths."""

from __future__ import annotations

import sys
from functools import cache
from importlib import resources

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


@cache
def load_toml(name: str) -> dict:
    """The parsed contents of rules/data/NAME (cached; callers must not mutate the result)."""
    text = resources.files("rules.data").joinpath(name).read_text(encoding="utf-8")
    return tomllib.loads(text)


def pins() -> dict[str, str]:
    """Package -> exact version the bundle pins."""
    return dict(load_toml("pins.toml")["pins"])


def pins_when_used() -> dict[str, str]:
    return dict(load_toml("pins.toml").get("pins_when_used", {}))


def requires() -> dict[str, str]:
    """Package -> version floor the bundle declares (e.g. torch >=2.6)."""
    return dict(load_toml("pins.toml").get("requires", {}))


def is_exact(value: str) -> bool:
    """pins.toml convention: a value starting with a digit is an exact version, anything else a specifier."""
    return str(value)[:1].isdigit()


def unsloth_env() -> dict[str, str]:
    """The separate environment an Unsloth bundle pins (pins.toml [unsloth]): exact versions and specifiers."""
    return dict(load_toml("pins.toml").get("unsloth", {}))
