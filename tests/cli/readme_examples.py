"""The README's command examples as the commands print them now.

A README block that starts with `$ trl-advisor ...` shows that command's output. `python tests/cli/readme_examples.py
--write` runs each one (in an empty temporary folder, so a `generate` writes nothing here) and puts its output in
the block; a block whose last line is `...` keeps only the lines above it. tests/cli/test_readme_figures.py checks
that the README is current.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BLOCK = re.compile(r"```\n(\$ trl-advisor [^\n]*)\n(.*?)```", re.DOTALL)


def run(command: str) -> str:
    """The text `command` (a `$ trl-advisor ...` line) prints on stdout and stderr, as a user sees it."""
    sys.path.insert(0, str(ROOT))
    from advisor.cli import main

    argv = shlex.split(command[2:])[1:]
    here = os.getcwd()
    buf = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                main(argv)
        finally:
            os.chdir(here)
    return buf.getvalue()


def expected_block(command: str, shown: str) -> str:
    out = run(command).rstrip("\n").split("\n")
    lines = shown.rstrip("\n").split("\n")
    if lines and lines[-1] == "...":
        out = out[: len(lines) - 1] + ["..."]
    return "\n".join(out) + "\n"


def current_text() -> str:
    text = README.read_text(encoding="utf-8")

    def block(m: re.Match) -> str:
        return f"```\n{m.group(1)}\n{expected_block(m.group(1), m.group(2))}```"

    return BLOCK.sub(block, text)


if __name__ == "__main__":
    new = current_text()
    if "--write" in sys.argv:
        README.write_text(new, encoding="utf-8")
    else:
        sys.exit(0 if new == README.read_text(encoding="utf-8") else 1)
