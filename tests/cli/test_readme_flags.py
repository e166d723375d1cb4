"""Every flag the README names is one the command it names takes: a `trl-advisor CMD ...` line or span names only
CMD's flags, every command's own flags are in the usage table, the REQUEST paragraph names every REQUEST flag, and a
flag named in prose is trl-advisor's or the bundle's (launch.sh passes its options to train.py)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from advisor.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TRAIN_TEMPLATE = ROOT / "advisor" / "bundle" / "templates" / "train.py.j2"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
NOT_OFFERED = {"--epochs"}
PIP_FLAGS = {"--index-url", "--extra-index-url"}
"""pip's own flags, which the set-up prose names beside the pip command."""
"""Flags the README names only to say they are not offered (`--dataset NAME --epochs E` is not offered)."""
OWN_ONLY = {"-h", "--help"}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _top_flags() -> set[str]:
    return _flags(build_parser())


def _request_flags() -> set[str]:
    """The REQUEST flags: those estimate, check and generate share."""
    subs = _subcommands()
    return (_flags(subs["estimate"]) & _flags(subs["check"]) & _flags(subs["generate"])) - OWN_ONLY - {"--json"}


def _bundle_flags() -> set[str]:
    return set(re.findall(r'add_argument\("(--[a-z0-9-]+)"', TRAIN_TEMPLATE.read_text(encoding="utf-8")))


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _readme_without_pip() -> str:
    """The README less its `pip ...` lines, whose flags are pip's."""
    return "\n".join(line for line in _readme().splitlines() if not line.startswith("pip "))


def _command_mentions(text: str) -> list[tuple[str, str]]:
    """(command, the text that follows it up to the end of its span or line) for each `trl-advisor CMD ...` in code
    spans, fenced lines and `$ trl-advisor` example lines. Flags after a `|` cell border or a `#` comment are not
    the command's."""
    out = []
    for span in re.findall(r"`([^`\n]*trl-advisor [a-z][^`\n]*)`", text):
        out.append(span)
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL):
        out.extend(line for line in block.splitlines() if "trl-advisor " in line)
    mentions = []
    names = "|".join(_subcommands())
    for cmd, rest in re.findall(rf"`(?:\[?|/ )?({names}) ([^`\n]*)`", text):  # `recommend --model 8B ...`
        mentions.append((cmd, rest))
    for line in out:
        for m in re.finditer(r"trl-advisor ((?:--[a-z-]+ )*)([a-z]+)\b(.*)", line):
            rest = re.split(r"\s#|\s\|\s|`", m.group(3))[0]
            mentions.append((m.group(2), m.group(1) + rest))
    return mentions


def test_each_command_line_names_only_flags_its_command_takes():
    subs = _subcommands()
    mentions = _command_mentions(_readme())
    assert len(mentions) > 20
    wrong = []
    for command, rest in mentions:
        if command not in subs:
            continue  # `trl-advisor` alone (the wizard) followed by prose
        allowed = _flags(subs[command]) | _top_flags()
        wrong += [f"trl-advisor {command}: {f}" for f in FLAG.findall(rest) if f not in allowed]
    assert not wrong


def test_the_usage_table_names_every_flag_of_every_command():
    """The `| command | does |` table: each command's own flags (REQUEST flags apart) appear in its rows."""
    text = _readme()
    rows = [line for line in text.splitlines() if line.startswith("| `trl-advisor ")]
    assert rows
    subs = _subcommands()
    request = _request_flags()
    missing = []
    for name, sub in subs.items():
        if name == "wizard":  # takes the REQUEST flags only; the wizard section says so
            continue
        mine = [row for row in rows if re.search(rf"`trl-advisor {name}\b|/ `{name}\b", row)]
        assert mine, f"no usage row for {name}"
        named = set(FLAG.findall(" ".join(mine)))
        missing += [f"{name} {f}" for f in sorted(_flags(sub) - request - OWN_ONLY) if f not in named]
    assert not missing


def test_the_request_paragraph_names_every_request_flag():
    text = " ".join(_readme().split())
    start = text.index("REQUEST flags (the full contract")
    paragraph = text[start:text.index("Anything you pin", start)]
    named = set(FLAG.findall(paragraph))
    negated = {"--no-" + f[2:] for f in named}
    missing = sorted(f for f in _request_flags() if f not in named and f not in negated)
    assert not missing


def test_every_flag_the_readme_names_exists():
    subs = _subcommands()
    known = _top_flags() | _bundle_flags() | NOT_OFFERED | PIP_FLAGS
    for sub in subs.values():
        known |= _flags(sub)
    unknown = sorted(set(FLAG.findall(_readme_without_pip())) - known)
    assert not unknown


@pytest.mark.parametrize("flag", sorted(NOT_OFFERED))
def test_a_flag_said_not_to_be_offered_is_not(flag):
    assert f"{flag}" in _readme()
    for sub in _subcommands().values():
        assert flag not in _flags(sub)
    assert flag not in _bundle_flags()
