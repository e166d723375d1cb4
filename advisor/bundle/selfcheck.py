"""The generator checks its own output before anything is written: each file parses in its language and reads
back as the data that was meant to go into it.

Values reach the bundle's files from flags, folder names and hardware files that other people typed. The templates
encode each value for its position (shell words, Python literals, docstrings, JSON in YAML) and refuse newlines
(advisor.bundle.render._finalize); this module is the last line: a file that does not parse, a Python constant, a YAML
mapping or a `#SBATCH` directive that is not what the plan says, and the bundle is refused (exit 2) instead of
written. Pure functions, no I/O except `bash -n` for shell syntax where bash exists.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

import yaml

BASH_CHECK_SECONDS = 10
"""`bash -n` of a 200-line script takes milliseconds; a stuck bash must not hang `generate`."""


class RenderedFileError(ValueError):
    """A rendered file is not what the plan meant: names the file and the first difference."""


def check_python(name: str, text: str, constants: Mapping[str, Any], docstring_parts: tuple[str, ...] = ()) -> None:
    """The file parses; each module-level constant named in `constants` is a literal equal to its value; the
    module docstring is the first statement and contains each of `docstring_parts` verbatim (a value that broke out
    of the docstring would leave it without them, or add statements before the constants)."""
    try:
        tree = ast.parse(text, filename=name)
    except SyntaxError as exc:
        raise RenderedFileError(f"{name} does not parse as Python (line {exc.lineno}: {exc.msg})") from None
    doc = ast.get_docstring(tree, clean=False)
    if docstring_parts and doc is None:
        raise RenderedFileError(f"{name}: the module docstring is missing")
    for part in docstring_parts:
        if part not in (doc or ""):
            raise RenderedFileError(f"{name}: the module docstring does not hold {part[:60]!r} as written")
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            key = node.targets[0].id
            if key in constants:
                if key in found:
                    raise RenderedFileError(f"{name}: {key} is assigned twice")
                try:
                    found[key] = ast.literal_eval(node.value)
                except ValueError:
                    raise RenderedFileError(f"{name}: {key} is not a literal") from None
    for key, want in constants.items():
        if key not in found:
            raise RenderedFileError(f"{name}: no module-level {key} literal")
        if found[key] != want or type(found[key]) is not type(want):
            raise RenderedFileError(f"{name}: {key} reads back as {found[key]!r:.80}, not {want!r:.80}")


def check_yaml(name: str, text: str, expected: Mapping[str, Any]) -> None:
    """The file is YAML without aliases and loads to exactly `expected` (no key added, removed or changed)."""
    try:
        events = list(yaml.parse(text, Loader=yaml.SafeLoader))
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RenderedFileError(f"{name} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if any(isinstance(e, yaml.AliasEvent) for e in events):
        raise RenderedFileError(f"{name}: holds a YAML alias")
    if loaded != dict(expected):
        raise RenderedFileError(f"{name} loads differently from the plan: {_first_difference(loaded, expected)}")


def check_json(name: str, text: str, expected: Any) -> None:
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RenderedFileError(f"{name} is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    # json.dumps(default=...) may have turned objects into dicts: compare through the same encoding
    if loaded != json.loads(json.dumps(expected, default=_plain)):
        raise RenderedFileError(f"{name} does not read back as the data written")


_SBATCH_LINE = re.compile(r"^#SBATCH --([a-z][a-z-]*)(?:=([A-Za-z0-9._%:@,-]+))?$")
"""`#SBATCH --option` or `#SBATCH --option=value`, the value one word of safe characters."""


def check_shell(name: str, text: str, *, sbatch: bool = False) -> None:
    """`bash -n` accepts the script (where bash exists); for a batch script, every `#SBATCH` line is one option of
    the strict form above, each option once: sbatch reads every `#SBATCH` line before the first command, so an
    injected or doubled one is an option nobody chose."""
    if sbatch:
        seen: set[str] = set()
        for line in text.splitlines():
            if not line.startswith("#SBATCH"):
                continue
            m = _SBATCH_LINE.match(line)
            if not m:
                raise RenderedFileError(f"{name}: #SBATCH line not of the form --option[=word]: {line[:80]!r}")
            if m.group(1) in seen:
                raise RenderedFileError(f"{name}: #SBATCH --{m.group(1)} given twice")
            seen.add(m.group(1))
    bash = shutil.which("bash")
    if bash is None:
        return
    try:
        proc = subprocess.run([bash, "-n"], input=text, capture_output=True, text=True, timeout=BASH_CHECK_SECONDS)
    except (OSError, subprocess.TimeoutExpired):
        return  # no verdict from bash; the encoding and the checks above still hold
    if proc.returncode != 0:
        first = (proc.stderr.strip().splitlines() or ["syntax error"])[0]
        raise RenderedFileError(f"{name} is not valid bash: {first[:160]}")


def _plain(value):
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(type(value).__name__)


def _first_difference(got: Any, want: Mapping[str, Any]) -> str:
    if not isinstance(got, dict):
        return f"a {type(got).__name__}, not a mapping"
    for key in sorted(set(got) | set(want), key=str):
        if key not in want:
            return f"extra key {str(key)[:60]!r}"
        if key not in got:
            return f"missing key {key!r}"
        if got[key] != want[key]:
            return f"{key}: {str(got[key])[:60]!r} instead of {str(want[key])[:60]!r}"
    return "types differ"
