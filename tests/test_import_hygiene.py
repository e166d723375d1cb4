"""The core stays headless and light: importing it must not pull in torch, textual or pynvml."""

import json
import subprocess
import sys

HEAVY = ("torch", "textual", "pynvml", "transformers", "trl", "deepspeed")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_core_imports_no_heavy_library():
    loaded = _modules_after("import advisor, advisor.cli, advisor.resolve, advisor.core.plan, advisor.core.request, hw_probe")
    assert not loaded & set(HEAVY), f"the core imported {sorted(loaded & set(HEAVY))}"


def test_cli_help_imports_no_pydantic():
    # `trl-advisor --help` must answer fast: the parser is built without the engine's dependencies.
    loaded = _modules_after("import advisor.cli as c\ntry:\n    c.main(['--help'])\nexcept SystemExit:\n    pass")
    assert "pydantic" not in loaded
    assert not loaded & set(HEAVY)
