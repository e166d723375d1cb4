"""The core stays headless and light: importing it must not pull in torch, textual or pynvml, and `generate` for a
catalogue GPU loads neither a validation library nor the probe (start-up time: `python -m bench.cli_speed`)."""

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


def test_generate_for_a_catalogue_gpu_loads_only_what_it_uses(tmp_path):
    code = ("import advisor.cli as c\n"
            f"c.main(['generate', '--model', '8B', '--gpus', '8', '--gpu', 'H100-80GB', '--out', {str(tmp_path / 'b')!r}])")
    loaded = _modules_after(code)
    assert (tmp_path / "b" / "train.py").is_file()
    unneeded = {"pydantic", "jsonschema", "textual", "rich", "hw_probe", "pynvml", *HEAVY}
    assert not loaded & unneeded, f"generate imported {sorted(loaded & unneeded)}"
