"""Values people type reach shell scripts, Python and YAML that run on clusters. For every field a user controls
(a local model folder's name and path, --attn, --out, --hardware's path), each injection payload is either refused
as a usage error (exit 2: newlines and control characters, or a value outside --attn's grammar) or written encoded:
the generated scripts are then run with stand-in `accelerate`, `srun`, `scontrol`, `vllm`, `curl` and stub Python
packages, and nothing of the payload executes (no marker file appears, the stand-ins see the expected commands).
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from model_configs import QWEN_SMALL

from advisor.cli import main

REPO = Path(__file__).resolve().parents[2]


def marker_payloads(marker: Path) -> dict[str, str]:
    """Payloads that would create `marker` if any generated file executed them (one line each)."""
    m = str(marker)
    return {
        "dollar-paren": f"m$(touch {m})",
        "backticks": f"m`touch {m}`",
        "semicolon": f"m; touch {m}; #",
        "single-quote": f"m'; touch {m}; echo '",
        "double-quote": f'm"; touch {m}; echo "',
        "triple-quote": f'm"""; __import__("os").system("touch {m}"); """',
        "backslash": f"m\\\"; touch {m}; #\\",
        "yaml-ish": "m: {a: 1} # &x *x",
        "sbatch-ish": "m --wrap=x #SBATCH --x",
    }


NEWLINE_PAYLOADS = {
    "newline-shell": "m\ntouch pwned\n#",
    "newline-python": "m\n__import__('os').system('touch pwned')\n#",
    "newline-yaml-key": "m\nmain_process_ip: 6.6.6.6\n#",
    "newline-sbatch": "m\n#SBATCH --wrap=touch-pwned\n#",
    "carriage-return": "m\rtouch pwned",
    "bidi-override": "m\u202etouch pwned",
    "nul": "m\x00x",
}


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _model_folder(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(QWEN_SMALL), encoding="utf-8")
    return folder


# --------------------------------------------------------------------------------------------- refused at input


@pytest.mark.parametrize("label", sorted(NEWLINE_PAYLOADS))
@pytest.mark.parametrize("flag", ["--attn", "--out", "--model", "--hardware"])
def test_control_characters_are_a_usage_error(tmp_path, capsys, monkeypatch, flag, label):
    monkeypatch.chdir(tmp_path)
    value = NEWLINE_PAYLOADS[label]
    argv = ["generate", "--model", "0.5B", "--gpus", "8", "--nodes", "2", "--gpu", "H100-80GB",
            "--out", str(tmp_path / "b")]
    if flag == "--model":
        argv[2] = value
    elif flag == "--out":
        argv[argv.index("--out") + 1] = value
    else:
        argv += [flag, value]
    rc, out, err = _run(argv, capsys)
    assert rc == 2, err
    assert err.startswith("error: ") and "\nhint: " in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 2  # the message itself stays on one line
    assert not list(tmp_path.rglob("pwned")) and not (tmp_path / "b").exists()


def test_a_model_folder_with_a_newline_in_its_name_is_refused(tmp_path, capsys):
    """The name reaches the files through the resolved path, not only through the flag (`--model .`)."""
    folder = _model_folder(tmp_path, "m\n__import__('os').system('touch pwned')\n#")
    rc, _, err = _run(["generate", "--model", str(folder), "--gpu", "H100-80GB", "--out", str(tmp_path / "b")],
                      capsys)
    assert rc == 2 and "Traceback" not in err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("attn", ["sdpa; touch pwned", "org/name:fn; touch x", "$(touch pwned)", "a/b/c", "x" * 300,
                                  "flash attention", "org/na me"])
def test_attn_outside_the_grammar_is_a_usage_error(tmp_path, capsys, attn):
    rc, _, err = _run(["estimate", "--model", "0.5B", "--gpu", "H100-80GB", "--attn", attn], capsys)
    assert rc == 2 and "hint:" in err and "Traceback" not in err


@pytest.mark.parametrize("attn", ["sdpa", "eager", "flash_attention_2", "flex_attention",
                                  "kernels-community/flash-attn2", "kernels-community/flash-attn3@v2:flash_attention"])
def test_attn_inside_the_grammar_is_accepted(capsys, attn):
    rc, _, err = _run(["estimate", "--model", "0.5B", "--gpu", "H100-80GB", "--attn", attn, "--json"], capsys)
    assert rc == 0, err


# ------------------------------------------------------------------------------ written encoded, run, inert

STUB_COMMANDS = ("accelerate", "srun", "scontrol", "vllm", "curl", "nvidia-smi")


def _stub_bin(root: Path, log: Path) -> Path:
    """Stand-ins that record their arguments (one JSON list per line) and succeed; `scontrol` prints a hostname."""
    stub = root / "stub-bin"
    stub.mkdir()
    actions = {
        "scontrol": "print('node0')",
        # srun runs its command (the arguments after its own --options) as task 0 of the job
        "srun": "import os, subprocess; cmd = [a for a in sys.argv[1:] if not a.startswith('--')]; "
                "sys.exit(subprocess.call(cmd, env={**os.environ, 'SLURM_PROCID': '0'}))",
        # the health probe succeeds once the server is up, i.e. once the vllm stand-in has logged its start (as a
        # real server answers /health only after it started): no race between the two stand-ins
        "curl": "import time\n"
                f"for _ in range(400):\n    if any('\"vllm\"' in line for line in open({str(log)!r})): break\n"
                "    time.sleep(0.025)",
        # a server runs until launch.sh stops it (one that exits on its own fails the run)
        "vllm": "import time; time.sleep(60)",
    }
    for name in STUB_COMMANDS:
        script = stub / name
        script.write_text(textwrap.dedent(f"""\
            #!{sys.executable}
            import json, sys
            with open({str(log)!r}, "a") as fh:
                fh.write(json.dumps([{name!r}, *sys.argv[1:]]) + "\\n")
            """) + actions.get(name, "pass") + "\n")
        script.chmod(0o755)
    return stub


STUB_PACKAGES = ("torch", "datasets", "transformers", "trl", "peft", "unsloth", "tokenizers", "safetensors")


def _stub_python_packages(root: Path) -> Path:
    """Importable stand-ins for the training stack: any attribute is a harmless class, any submodule exists. Running
    train.py against them executes its module-level code (where an injected statement would run) in milliseconds."""
    site = root / "stub-site"
    site.mkdir()
    (site / "stubfinder.py").write_text(textwrap.dedent(f"""\
        import importlib.abc, importlib.machinery, sys, types
        ROOTS = {STUB_PACKAGES!r}

        class Any:
            def __init__(self, *a, **k): pass
            def __call__(self, *a, **k): return Any()
            def __getattr__(self, name): return Any()
            def __init_subclass__(cls, **k): pass
            def __mro_entries__(self, bases): return (object,)

        class StubModule(types.ModuleType):
            def __getattr__(self, name):
                if name.startswith("__"):
                    raise AttributeError(name)
                return Any

        class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
            def find_spec(self, name, path, target=None):
                if name.split(".")[0] in ROOTS:
                    return importlib.machinery.ModuleSpec(name, self, is_package=True)
                return None
            def create_module(self, spec):
                module = StubModule(spec.name)
                module.__path__ = []
                return module
            def exec_module(self, module):
                pass

        sys.meta_path.insert(0, Finder())
        """), encoding="utf-8")
    return site


def _train_constant(bundle: Path, name: str):
    tree = ast.parse((bundle / "train.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == name)
    return ast.literal_eval(node.value)


def _run_bundle(bundle: Path, root: Path) -> list[list[str]]:
    log = root / "calls.jsonl"
    stub = _stub_bin(root, log)
    site = _stub_python_packages(root)
    env = {"PATH": f"{stub}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(root), "LC_ALL": "C.UTF-8",
           "MAIN_PROCESS_IP": "127.0.0.1", "SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "node0", "SLURM_NNODES": "2",
           "SLURM_SUBMIT_DIR": str(bundle), "PYTHONPATH": str(site)}
    for script in ("launch.sh", "slurm.sbatch"):
        if (bundle / script).exists():
            proc = subprocess.run(["bash", str(bundle / script), "--max-steps", "1"], cwd=str(root), env=env,
                                  capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, f"{script}: {proc.stderr[-2000:]}"
    # train.py's module-level code and argument parsing, against the stub packages
    proc = subprocess.run([sys.executable, "-c", "import stubfinder, runpy, sys; sys.argv = ['train.py', '--help'];"
                           f" runpy.run_path({str(bundle / 'train.py')!r}, run_name='__main__')"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the YAML loads to one mapping with no key a payload could add
    data = yaml.safe_load((bundle / "accelerate.yaml").read_text(encoding="utf-8"))
    assert "main_process_ip" not in data
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("label", sorted(marker_payloads(Path("/x"))))
def test_model_folder_payloads_are_encoded_and_inert(tmp_path, capsys, label):
    marker = tmp_path / "pwned"
    folder = _model_folder(tmp_path / "models", marker_payloads(marker)[label])
    bundle = tmp_path / "bundle"
    # two nodes with a vLLM server: the folder reaches train.py, launch.sh (the served model), slurm.sbatch, the YAML
    rc, _, err = _run(["generate", "--model", str(folder), "--trainer", "grpo", "--vllm", "server", "--gpus", "8",
                       "--nodes", "2", "--gpu", "H100-80GB", "--out", str(bundle)], capsys)
    assert rc == 0, err
    calls = _run_bundle(bundle, tmp_path)
    assert not marker.exists(), f"{label}: the payload ran"
    commands = [c[0] for c in calls]
    assert commands.count("accelerate") == 2 and "srun" in commands  # launch.sh once, and once more through srun
    served = [c for c in calls if c[0] == "vllm"]
    assert served and served[0][1:3] == ["serve", str(folder.resolve())]  # one argument, the path itself
    accelerate = next(c for c in calls if c[0] == "accelerate")
    assert accelerate[1:4] == ["launch", "--config_file", "accelerate.yaml"]
    assert _train_constant(bundle, "MODEL_ID") == str(folder.resolve())  # the value itself, intact


@pytest.mark.parametrize("label", sorted(marker_payloads(Path("/x"))))
def test_out_folder_payloads_are_inert(tmp_path, capsys, label):
    marker = tmp_path / "pwned"
    bundle = tmp_path / "out" / marker_payloads(marker)[label].replace("/", "_")
    rc, out, err = _run(["generate", "--model", "0.5B", "--trainer", "grpo", "--vllm", "server", "--gpus", "4",
                         "--gpu", "H100-80GB", "--out", str(bundle)], capsys)
    assert rc == 0, err
    # the commands printed for pasting into a shell (generate's report, the bundle README's verify lines) hold the
    # folder as one shell word, the path itself
    wrote = next(line for line in out.splitlines() if line.startswith("wrote"))
    assert shlex.split(wrote.split(": bash ", 1)[1]) == [f"{bundle}/launch.sh"]
    readme = (bundle / "README.md").read_text(encoding="utf-8")
    verify_lines = [line for line in readme.splitlines() if line.startswith("trl-advisor verify")]
    assert verify_lines and all(shlex.split(line, comments=True)[2] == str(bundle) for line in verify_lines)
    calls = _run_bundle(bundle, tmp_path)
    assert not marker.exists()
    # the server (started in the background: its stand-in may log at any moment), its readiness probe, then training
    commands = [c[0] for c in calls]
    assert sorted(commands) == ["accelerate", "curl", "vllm"]
    assert commands.index("curl") < commands.index("accelerate")


def test_hardware_path_payload_is_inert(tmp_path, capsys):
    marker = tmp_path / "pwned"
    hardware = tmp_path / "hw$(touch pwned)'\"`touch pwned`.json"  # the scripts run with cwd tmp_path
    hardware.write_bytes((REPO / "tests/fixtures/hardware/h100_sxm_x8_nvlink.json").read_bytes())
    bundle = tmp_path / "bundle"
    rc, _, err = _run(["generate", "--model", "0.5B", "--hardware", str(hardware), "--nodes", "2",
                       "--out", str(bundle)], capsys)
    assert rc == 0, err
    _run_bundle(bundle, tmp_path)
    assert not marker.exists()
    assert json.loads((bundle / "plan.json").read_text(encoding="utf-8"))["request"]["hardware"] == str(hardware)


@pytest.mark.parametrize("name", ["m\udcffx", "n\nl", "t\x1b[31mred"])
def test_a_model_folder_reached_as_dot_is_checked_too(tmp_path, capsys, monkeypatch, name):
    """`--model .` never puts the folder's name on the command line: the resolved path is checked as well."""
    folder = _model_folder(tmp_path, name)
    monkeypatch.chdir(folder)
    for command in (["estimate"], ["generate", "--out", str(tmp_path / "b")]):
        rc, out, err = _run([*command, "--model", ".", "--gpu", "H100-80GB"], capsys)
        assert rc == 2 and "model folder" in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def test_reports_escape_control_characters_from_user_files(tmp_path, capsys):
    """`check --bundle` quotes values from the user's files; an escape sequence among them is shown, not obeyed."""
    (tmp_path / "trl.yaml").write_text("model_name_or_path: Qwen/Qwen2.5-0.5B\nper_device_train_batch_size: 2\n",
                                       encoding="utf-8")
    (tmp_path / "accelerate.yaml").write_text('distributed_type: DEEPSPEED\nnum_processes: 1\n"bogus\\e[31mkey": 1\n',
                                              encoding="utf-8")
    (tmp_path / "ds_config.json").write_text('{"zero_optimization": {"stage": 3, "bad\\u001b[2Jkey": 1}}',
                                             encoding="utf-8")
    rc, out, err = _run(["check", "--bundle", str(tmp_path), "--gpu", "H100-80GB"], capsys)
    assert rc == 1 and "Traceback" not in err
    assert "bad\\x1b[2Jkey" in out and "bogus\\x1b[31mkey" in out  # quoted in the findings, escaped
    assert "\x1b" not in out and "\x1b" not in err


def test_error_messages_escape_control_characters_from_user_files(tmp_path, capsys):
    """A GPU name in a hardware file reaches the error line on stderr: it is shown escaped, not obeyed (a window
    title OSC, a screen clear)."""
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "hardware" / "h100_sxm_x8_nvlink.json"
    data = json.loads(fixture.read_text(encoding="utf-8"))
    for gpu in data["gpus"]:
        gpu["name"] = "NVIDIA \x1b]0;pwned\x07Bogus \x1b[2J"
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    rc, out, err = _run(["estimate", "--model", "0.5B", "--hardware", str(path)], capsys)
    assert rc == 2 and "\\x1b]0;pwned\\x07" in err
    assert "\x1b" not in err and "\x07" not in err
