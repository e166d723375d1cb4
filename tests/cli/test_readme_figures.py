"""Figures the README states that the code can recompute: they must be what it computes now."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_rule_count_is_the_rulebook_s():
    from rules.rulebook import all_rules

    stated = {int(n) for n in re.findall(r"checks (\d+) rules", README.read_text(encoding="utf-8"))}
    assert stated == {len(all_rules())}


def test_the_command_examples_are_what_the_commands_print():
    """Each `$ trl-advisor ...` block shows what the command prints now (refresh: tests/cli/readme_examples.py)."""
    import readme_examples

    blocks = readme_examples.BLOCK.findall(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 4  # generate, check, two recommend examples
    for command, shown in blocks:
        assert readme_examples.expected_block(command, shown) == shown, command
