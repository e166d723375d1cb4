"""Every file trl-advisor reads from user input, made hostile, through the real CLI: named pipes and devices where a
file is expected, YAML alias bombs, NaN/Infinity/huge/negative/boolean sizes, nesting thousands deep, bytes that
are not UTF-8, plan.json values of the wrong type, 5,000-digit versions, oversized files in a bundle folder and
hardware reports with impossible memory. Each ends as a usage error (exit 2: one `error:` line, a `hint:` line),
or, where the input is acceptable but odd, a clean 0 or 1; never a traceback, never a hang.

Where a hang is the failure mode (a pipe or a device) the CLI runs in a subprocess with a timeout; elsewhere
in-process (`advisor.cli.main`) under a SIGALRM guard.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from advisor.cli import main

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "hardware"
HANG_SECONDS = 20
"""A subprocess still running after this long is hung: every refusal here takes well under a second."""

QWEN_SMALL = {  # the keys of Qwen2.5-0.5B's config.json that the reader uses
    "architectures": ["Qwen2ForCausalLM"], "hidden_size": 896, "intermediate_size": 4864,
    "max_position_embeddings": 32768, "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
    "num_key_value_heads": 2, "tie_word_embeddings": True, "vocab_size": 151936,
}

BILLION_LAUGHS = "".join(
    [f'a: &a [{", ".join(["lol"] * 9)}]\n']
    + [f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
    + ["distributed_type: *i\n"])
"""Nine levels of nine aliases, under 1 KB: 9**9 strings once expanded."""


# ------------------------------------------------------------------------------------------------ helpers


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    """No test reads the real Hugging Face cache or reaches the network."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@contextmanager
def within(seconds: float):
    """Fail instead of hanging: SIGALRM interrupts a blocked system call and the handler raises."""
    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with within(HANG_SECONDS):
        rc = main(list(args))
    out, err = capsys.readouterr()
    return int(rc), out, err


def cli_process(*args: str) -> tuple[int, str, str]:
    """The CLI in a child process: a read that blocks shows up as a timeout, not as a hung test run."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    try:
        proc = subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True,
                              timeout=HANG_SECONDS, cwd=REPO, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"trl-advisor {' '.join(args)} hung (still running after {HANG_SECONDS} s)")
    return proc.returncode, proc.stdout, proc.stderr


def usage_error(result: tuple[int, str, str], *needles: str) -> str:
    """Exit 2, exactly one `error:` line (returned) containing every needle, a `hint:` line, no traceback."""
    rc, out, err = result
    assert "Traceback" not in out + err, err
    assert rc == 2, (rc, out[-2000:], err)
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, err
    assert any(line.startswith("hint: ") for line in lines), err
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def clean(result: tuple[int, str, str], codes: tuple[int, ...] = (0, 1)) -> tuple[int, str, str]:
    rc, out, err = result
    assert "Traceback" not in out + err, err
    assert rc in codes, (rc, out[-2000:], err)
    return result


def write_config(folder: Path, config: dict | str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = config if isinstance(config, str) else json.dumps(config)
    (folder / "config.json").write_text(text, encoding="utf-8")
    return folder


def hardware_file(tmp_path: Path, change=None, fixture: str = "h100_sxm_x8_nvlink") -> str:
    data = json.loads((FIXTURES / f"{fixture}.json").read_text(encoding="utf-8"))
    if change:
        change(data)
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """One bundle written by `generate` (1.5B, 1 x H100): each test corrupts a copy."""
    out = tmp_path_factory.mktemp("generated") / "b"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    assert main(["generate", "--model", "1.5B", "--gpus", "1", "--gpu", "H100-80GB", "--out", str(out)]) == 0
    return out


@pytest.fixture
def bundle(generated, tmp_path) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(generated, copy)
    return copy


def edit_plan_json(folder: Path, change) -> None:
    path = folder / "plan.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    change(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")


def replace_with_fifo(path: Path) -> Path:
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    return path


# ------------------------------------------------------------------------------------------------ pipes and devices


@pytest.mark.parametrize("form", ["fifo", "folder-with-fifo", "dev-zero", "link-to-dev-zero", "folder-with-link"])
def test_model_path_that_is_a_pipe_or_device_is_refused_at_once(tmp_path, form):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    folder = tmp_path / "model"
    folder.mkdir()
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    model = {"fifo": str(fifo), "dev-zero": "/dev/zero", "link-to-dev-zero": str(link), "folder-with-fifo": str(folder),
             "folder-with-link": str(folder)}[form]
    if form == "folder-with-fifo":
        os.mkfifo(folder / "config.json")
    elif form == "folder-with-link":
        (folder / "config.json").symlink_to("/dev/zero")
    start = time.monotonic()
    line = usage_error(cli_process("estimate", "--model", model, "--gpu", "H100-80GB"), "not a regular file")
    assert time.monotonic() - start < HANG_SECONDS / 2
    assert ("named pipe" if "fifo" in form else "character device") in line


def test_model_path_that_is_a_symlink_to_a_real_config_is_read(tmp_path, capsys):
    real = write_config(tmp_path / "real", QWEN_SMALL) / "config.json"
    link = tmp_path / "linked" / "config.json"
    link.parent.mkdir()
    link.symlink_to(real)
    clean(cli(capsys, "estimate", "--model", str(link.parent), "--gpu", "H100-80GB"), (0,))


@pytest.mark.parametrize("form", ["fifo", "dev-zero", "link-to-dev-zero"])
def test_hardware_file_that_is_a_pipe_or_device_is_refused_at_once(tmp_path, form, generated):
    path = {"dev-zero": "/dev/zero", "fifo": str(tmp_path / "hw.json"), "link-to-dev-zero": str(tmp_path / "z.json")}
    if form == "fifo":
        os.mkfifo(path["fifo"])
    if form == "link-to-dev-zero":
        os.symlink("/dev/zero", path[form])
    for args in (("estimate", "--model", "1.5B", "--hardware", path[form]),
                 ("check", "--bundle", str(generated), "--hardware", path[form])):
        line = usage_error(cli_process(*args), "hardware file", "not a regular file")
        assert path[form] in line


@pytest.mark.parametrize("name", ["plan.json", "train.py", "accelerate.yaml"])
def test_check_bundle_with_an_essential_file_that_is_a_pipe(bundle, name):
    replace_with_fifo(bundle / name)
    usage_error(cli_process("check", "--bundle", str(bundle)), name, "named pipe")


def test_verify_on_a_bundle_whose_plan_json_is_a_pipe_returns_2_quickly(bundle):
    replace_with_fifo(bundle / "plan.json")
    start = time.monotonic()
    usage_error(cli_process("verify", str(bundle)), "plan.json", "named pipe")
    assert time.monotonic() - start < HANG_SECONDS / 2


@pytest.mark.parametrize("name", ["train.py", "launch.sh", "requirements.txt"])
def test_verify_with_a_bundle_file_that_is_a_pipe_fails_its_bundle_step(bundle, name):
    replace_with_fifo(bundle / name)
    rc, out, err = clean(cli_process("verify", str(bundle)), (1,))
    first = out.splitlines()[0]
    assert "Bundle files" in first and "✗" in first and "named pipe" in first and name in first


def test_plan_json_model_id_naming_a_pipe(bundle, tmp_path):
    fifo = tmp_path / "model-pipe"
    os.mkfifo(fifo)
    edit_plan_json(bundle, lambda d: d["model"].update(id=str(fifo)))
    usage_error(cli_process("check", "--bundle", str(bundle)), str(fifo), "named pipe")
    rc, out, err = clean(cli_process("verify", str(bundle)), (1,))
    assert "named pipe" in out


def test_verify_does_not_open_a_log_that_is_a_pipe(bundle):
    from advisor.verify import verify
    from hw_probe.fake import fixture_report

    replace_with_fifo(bundle / "verify.log")
    ran = []
    with within(HANG_SECONDS):
        outcome = verify(bundle, runner=lambda *a, **k: ran.append(a) or 0, probe=lambda: fixture_report("h100_sxm_x8_nvlink"),
                         progress=None)
    run = outcome.step("run")
    assert not ran and run.status == "fail" and "named pipe" in run.detail


# ------------------------------------------------------------------------------------------------ YAML alias bombs


@pytest.mark.parametrize("name", ["accelerate.yaml", "extra.yaml"])
def test_billion_laughs_yaml_in_check_bundle_is_refused_at_once(bundle, capsys, name):
    assert len(BILLION_LAUGHS) < 1024
    (bundle / name).write_text(BILLION_LAUGHS, encoding="utf-8")
    start = time.monotonic()
    usage_error(cli(capsys, "check", "--bundle", str(bundle)), name, "aliases")
    assert time.monotonic() - start < 10  # expanded, the bomb never ends; a loaded 2-core host needs room


def test_billion_laughs_accelerate_yaml_in_verify_fails_quickly(bundle, capsys):
    (bundle / "accelerate.yaml").write_text(BILLION_LAUGHS, encoding="utf-8")
    start = time.monotonic()
    rc, out, err = clean(cli(capsys, "verify", str(bundle)), (1,))
    assert time.monotonic() - start < 15  # expanded, the bomb never ends
    assert "aliases" in out


# ------------------------------------------------------------------------------------------------ config.json numbers


@pytest.mark.parametrize("key", ["num_hidden_layers", "hidden_size", "vocab_size", "max_position_embeddings"])
@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e400", "-5", "true", '"eight"', "1.5",
                                 "1" + "0" * 22, "9" * 5000, "[24]", "null"])
def test_config_json_size_that_is_not_a_whole_number_names_the_key(tmp_path, capsys, key, raw):
    text = json.dumps(QWEN_SMALL).replace(f'"{key}": {QWEN_SMALL[key]}', f'"{key}": {raw}')
    folder = write_config(tmp_path / "model", text)
    usage_error(cli(capsys, "estimate", "--model", str(folder), "--gpu", "H100-80GB"), key)


def test_config_json_size_written_as_an_integral_float_is_accepted(tmp_path, capsys):
    folder = write_config(tmp_path / "model", {**QWEN_SMALL, "num_hidden_layers": 24.0})
    clean(cli(capsys, "estimate", "--model", str(folder), "--gpu", "H100-80GB"), (0,))


# ------------------------------------------------------------------------------------------------ nesting


DEEP_JSON = "[" * 5000 + "]" * 5000
DEEP_YAML_FLOW = "x: " + "[" * 5000 + "]" * 5000 + "\n"
DEEP_YAML_BLOCK = "distributed_type: NO\nx:\n" + "".join("  " * i + "- \n" for i in range(1, 200))  # 40 KB, 200 deep


def test_deep_json_config(tmp_path, capsys):
    folder = write_config(tmp_path / "model", '{"num_hidden_layers": ' + DEEP_JSON + "}")
    usage_error(cli(capsys, "estimate", "--model", str(folder), "--gpu", "H100-80GB"), "nested deeper than 64")


def test_deep_json_hardware_file(tmp_path, capsys):
    path = tmp_path / "hw.json"
    path.write_text('{"schema": ' + DEEP_JSON + "}", encoding="utf-8")
    usage_error(cli(capsys, "estimate", "--model", "1.5B", "--hardware", str(path)), "nested deeper than 64")


@pytest.mark.parametrize(("name", "text"), [
    ("plan.json", '{"plan": ' + DEEP_JSON + "}"),
    ("ds_config.json", '{"zero_optimization": ' + DEEP_JSON + "}"),
    ("accelerate.yaml", DEEP_YAML_FLOW),
    ("accelerate.yaml", DEEP_YAML_BLOCK),
    ("sft.yaml", "model_name_or_path: x\n" + DEEP_YAML_FLOW),
])
def test_deep_bundle_files(bundle, capsys, name, text):
    (bundle / name).write_text(text, encoding="utf-8")
    usage_error(cli(capsys, "check", "--bundle", str(bundle)), name, "nested deeper than 64")
    if name == "plan.json":
        usage_error(cli(capsys, "verify", str(bundle)), name, "nested deeper than 64")
    else:
        clean(cli(capsys, "verify", str(bundle)), (1,))


def test_a_nested_expression_python_compiles_anywhere_is_read_and_checked_clean(bundle, capsys):
    """40 levels (`1+1+...`) compile at any stack depth: the reader takes the file and the cross-file check does not
    call it uncompilable (it did once the plan reader could evaluate arithmetic, from a deep call stack)."""
    with (bundle / "train.py").open("a", encoding="utf-8") as fh:
        fh.write("\nX = 1" + "+1" * 40 + "\n")
    rc, out, err = clean(cli(capsys, "check", "--bundle", str(bundle)), (0,))
    assert "FILES001" not in out


@pytest.mark.parametrize("expression", ["1" + "+1" * 600, "-" * 100_000 + "1", "not " * 100_000 + "x"])
def test_deeply_nested_expression_in_train_py(bundle, capsys, expression):
    with (bundle / "train.py").open("a", encoding="utf-8") as fh:
        fh.write(f"\nX = {expression}\n")
    usage_error(cli(capsys, "check", "--bundle", str(bundle)), "train.py", "nested too deeply")
    rc, out, err = clean(cli(capsys, "verify", str(bundle)), (1,))


# ------------------------------------------------------------------------------------------------ not UTF-8


def test_non_utf8_config_json(tmp_path, capsys):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_bytes(json.dumps(QWEN_SMALL).encode().replace(b'"qwen2"', b'"qw\xe9n2"'))
    usage_error(cli(capsys, "estimate", "--model", str(folder), "--gpu", "H100-80GB"), "not UTF-8", "0xe9")


def test_non_utf8_hardware_file(tmp_path, capsys):
    path = tmp_path / "hw.json"
    path.write_bytes(b'{"schema": "\xff"}')
    usage_error(cli(capsys, "estimate", "--model", "1.5B", "--hardware", str(path)), "not UTF-8", "offset 12")


def test_non_utf8_essential_bundle_file_is_a_usage_error(bundle, capsys):
    with (bundle / "accelerate.yaml").open("ab") as fh:
        fh.write(b"\n# caf\xe9\n")
    usage_error(cli(capsys, "check", "--bundle", str(bundle)), "accelerate.yaml", "not UTF-8")
    rc, out, err = clean(cli(capsys, "verify", str(bundle)), (1,))
    assert "not UTF-8" in out.splitlines()[0]


@pytest.mark.parametrize("char", ["\x00", "\x80", "\x1b", "\ufffe"])
def test_yaml_with_a_character_yaml_refuses_is_a_usage_error(bundle, capsys, char):
    with (bundle / "accelerate.yaml").open("a", encoding="utf-8") as fh:
        fh.write(f"\n# {char}\n")
    usage_error(cli(capsys, "check", "--bundle", str(bundle)), "accelerate.yaml", f"U+{ord(char):04X}")
    rc, out, err = clean(cli(capsys, "verify", str(bundle)), (1,))


def test_non_utf8_other_bundle_file_is_skipped_with_a_note(bundle, capsys):
    (bundle / "notes.txt").write_bytes(b"\xff\xfe binary")
    rc, out, err = clean(cli(capsys, "check", "--bundle", str(bundle)))
    assert "note: skipped notes.txt: not UTF-8 text (byte 0xff at offset 0)" in err


def test_non_utf8_hub_cache_ref_falls_back_to_the_snapshot(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "hub" / "models--org--tiny"
    write_config(repo / "snapshots" / "abc123", QWEN_SMALL)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_bytes(b"\xff\xfe")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    clean(cli(capsys, "estimate", "--model", "org/tiny", "--gpu", "H100-80GB"), (0,))
    (repo / "refs" / "main").write_text("../../../../etc", encoding="utf-8")  # never a path out of snapshots/
    clean(cli(capsys, "estimate", "--model", "org/tiny", "--gpu", "H100-80GB"), (0,))


# ------------------------------------------------------------------------------------------------ plan.json types


@pytest.mark.parametrize(("key", "change"), [
    ("hardware.gpus_per_node", lambda d: d["hardware"].update(gpus_per_node="eight")),
    ("hardware.nodes", lambda d: d["hardware"].update(nodes=[2])),
    ("hardware.gpu", lambda d: d["hardware"].update(gpu=["H100-80GB"])),
    ("hardware.gpus_per_node", lambda d: d["hardware"].update(gpus_per_node=10**12)),
    ("plan.gpus_per_node", lambda d: d["plan"].update(gpus_per_node="eight")),
    ("plan.nodes", lambda d: d["plan"].update(nodes=[2])),
    ("plan.micro_batch", lambda d: d["plan"].update(micro_batch=True)),
    ("plan.seq_len", lambda d: d["plan"].update(seq_len=-1)),
    ("plan.vllm_mem_fraction", lambda d: d["plan"].update(vllm_mem_fraction="0.3")),
    ("model.id", lambda d: d["model"].update(id=5)),
    ("model.id", lambda d: d["model"].update(id="qwen\nrm -rf /")),
    ("hardware", lambda d: d.update(hardware=[1])),
    ("memory", lambda d: d.update(memory="lots")),
    ("files", lambda d: d.update(files="train.py")),
])
def test_plan_json_value_of_the_wrong_type_is_a_usage_error_naming_the_key(bundle, capsys, key, change):
    edit_plan_json(bundle, change)
    usage_error(cli(capsys, "check", "--bundle", str(bundle)), f"plan.json: {key} ")
    usage_error(cli(capsys, "verify", str(bundle)), f"plan.json: {key} ")


def test_train_py_config_of_the_wrong_type_fails_verify_cleanly(bundle, capsys):
    train = bundle / "train.py"
    train.write_text(train.read_text(encoding="utf-8").replace("'nodes': 1,", "'nodes': '1',", 1), encoding="utf-8")
    assert "'nodes': '1'" in train.read_text(encoding="utf-8")
    rc, out, err = clean(cli(capsys, "verify", str(bundle)), (1,))


@pytest.mark.parametrize(("text", "key"), [
    ("per_device_train_batch_size: eight\n", "per_device_train_batch_size"),
    ("lora_r: [16]\nuse_peft: true\n", "lora_r"),
    ("gradient_accumulation_steps: true\n", "gradient_accumulation_steps"),
])
def test_trl_yaml_value_of_the_wrong_type_names_the_key(tmp_path, capsys, text, key):
    (tmp_path / "sft.yaml").write_text(f"model_name_or_path: Qwen/Qwen2.5-1.5B\n{text}", encoding="utf-8")
    usage_error(cli(capsys, "check", "--bundle", str(tmp_path)), "sft.yaml", key)


def test_accelerate_process_count_beyond_any_cluster_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "accelerate.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 1000000000000\n",
                                              encoding="utf-8")
    (tmp_path / "sft.yaml").write_text("model_name_or_path: Qwen/Qwen2.5-1.5B\n", encoding="utf-8")
    usage_error(cli(capsys, "check", "--bundle", str(tmp_path)), "num_processes")


def test_unresolved_lora_rank_in_train_py_is_assumed_not_a_crash(tmp_path, capsys):
    (tmp_path / "train.py").write_text(
        "from trl import SFTConfig\nfrom peft import LoraConfig\n"
        "cfg = SFTConfig(output_dir='o', model_name_or_path='Qwen/Qwen2.5-1.5B')\n"
        "lora = LoraConfig(r=args.rank, lora_alpha=args.alpha)\n", encoding="utf-8")
    clean(cli(capsys, "check", "--bundle", str(tmp_path)))


# ------------------------------------------------------------------------------------------------ versions


def test_requirements_with_a_5000_digit_version_is_read_as_unknown(bundle, capsys):
    with (bundle / "requirements.txt").open("a", encoding="utf-8") as fh:
        fh.write("\ntorch==" + "9" * 5000 + "\ntrl==1." + "1" * 5000 + "\n")
    rc, out, err = clean(cli(capsys, "check", "--bundle", str(bundle), "--json"))
    assumptions = json.loads(out)["assumptions"]
    assert any(a.startswith("torch version unknown") for a in assumptions)
    assert any(a.startswith("trl version unknown") for a in assumptions)
    assert all(len(a) < 200 for a in assumptions)
    clean(cli(capsys, "verify", str(bundle)), (1,))


def test_hardware_file_with_an_unreadable_software_version_is_unknown(tmp_path, capsys):
    path = hardware_file(tmp_path, lambda d: d["software"].update(trl="1." + "1" * 5000, torch="9" * 70))
    clean(cli(capsys, "check", "--model", "1.5B", "--hardware", path, "--liger"))


# ------------------------------------------------------------------------------------------------ skipped files


def test_check_bundle_reports_every_file_it_skips(bundle, capsys):
    (bundle / "dataset.json").write_bytes(b"[" + b"0," * 1_500_000 + b"0]")  # 3 MB: above the 2 MB limit
    os.mkfifo(bundle / "extra.yaml")
    (bundle / "zeros.txt").symlink_to("/dev/zero")
    rc, out, err = clean(cli(capsys, "check", "--bundle", str(bundle)))
    assert "note: skipped dataset.json: is 2.9 MiB, above the 2 MB limit" in err
    assert "note: skipped extra.yaml: is a named pipe (FIFO), not a regular file" in err
    assert "note: skipped zeros.txt: is a character device, not a regular file" in err
    rc, out, err = clean(cli(capsys, "check", "--bundle", str(bundle), "--json"))
    notes = json.loads(out)["notes"]
    assert [n.split(":")[0] for n in notes[:3]] == ["skipped dataset.json", "skipped extra.yaml", "skipped zeros.txt"]


def test_an_oversized_essential_file_is_a_usage_error(bundle, capsys):
    (bundle / "ds_config.json").write_text('{"zero_optimization": {"stage": 2}, "pad": "' + "x" * 2_100_000 + '"}',
                                           encoding="utf-8")
    usage_error(cli(capsys, "check", "--bundle", str(bundle)), "ds_config.json", "above the 2 MB limit")


def test_a_large_yaml_file_is_skipped_at_once(bundle, capsys):
    """YAML parses at tens of KB/s in pure Python: a 1.8 MB one under the 2 MB file limit took 46 s to check."""
    (bundle / "extra.yaml").write_text("".join(f"k{i}: {i}\n" for i in range(60_000)), encoding="utf-8")
    with within(5):
        rc, out, err = clean(cli(capsys, "check", "--bundle", str(bundle)))
    assert "note: skipped extra.yaml: is 798.6 KiB, above the 64 KiB limit" in err


def test_an_oversized_accelerate_yaml_is_a_usage_error_at_once(bundle, capsys):
    text = (bundle / "accelerate.yaml").read_text(encoding="utf-8")
    (bundle / "accelerate.yaml").write_text(text + "".join(f"# {i:070d}\n" for i in range(1000)), encoding="utf-8")
    with within(5):
        usage_error(cli(capsys, "check", "--bundle", str(bundle)), "accelerate.yaml", "above the 64 KiB limit")


def test_a_folder_of_thousands_of_files_is_read_in_part(bundle, capsys):
    for i in range(2000):
        (bundle / f"c{i:05d}.yaml").write_text(f"key: {i}\n", encoding="utf-8")
    with within(10):
        rc, out, err = clean(cli(capsys, "check", "--bundle", str(bundle)))
    assert "of the folder's 20" in err and "the bundle's own names first" in err
    assert rc == 0  # the bundle's own files were read: its plan checks clean


def test_a_folder_named_like_a_config_file_is_noted(bundle, capsys):
    (bundle / "configs.json").mkdir()
    rc, out, err = clean(cli(capsys, "check", "--bundle", str(bundle)))
    assert "note: skipped configs.json: is a folder, not a regular file" in err


# ------------------------------------------------------------------------------------------------ hardware sanity


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["gpus"][0].update(memory_total_bytes=1024), "gpus.0.memory_total_bytes is 1024, below 1 GiB"),
    (lambda d: d["gpus"][0].update(memory_total_bytes=0), "gpus.0.memory_total_bytes is 0"),
    (lambda d: d["gpus"][5].update(memory_total_bytes=2**60), "gpus.5.memory_total_bytes"),
    (lambda d: d["gpus"][2].update(other_process_bytes=10**12), "gpus.2.other_process_bytes is 1000000000000, more"),
    (lambda d: d["gpus"][1].update(memory_used_bytes=10**12), "gpus.1.memory_used_bytes"),
    (lambda d: d["gpus"][0].update(other_process_bytes=-1), "gpus.0.other_process_bytes"),
    (lambda d: d["gpus"][0].update(memory_total_bytes="80GB"), "gpus.0.memory_total_bytes"),
    (lambda d: d["cluster"].update(slurm=True, slurm_nodes=10**9), "cluster.slurm_nodes"),
])
def test_hardware_file_with_impossible_numbers_names_the_field(tmp_path, capsys, generated, change, field):
    path = hardware_file(tmp_path, change)
    usage_error(cli(capsys, "estimate", "--model", "1.5B", "--hardware", path), field)
    usage_error(cli(capsys, "check", "--bundle", str(generated), "--hardware", path), field)


def test_hardware_file_with_a_mig_slice_larger_than_its_gpu(tmp_path, capsys):
    def change(d):
        d["gpus"][0]["mig_devices"][0]["memory_total_bytes"] = 10 * d["gpus"][0]["memory_total_bytes"]

    path = hardware_file(tmp_path, change, fixture="a100_mig")
    usage_error(cli(capsys, "estimate", "--model", "1.5B", "--hardware", path), "gpus.0.mig_devices.0")


@pytest.mark.parametrize("fixture", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_every_hardware_fixture_still_loads(fixture):
    from advisor.resolve.hardware import load_report

    assert load_report(FIXTURES / f"{fixture}.json").schema_id == "trl-advisor/hardware/1"


def test_hw_probe_reports_its_own_error_type():
    import hw_probe

    with pytest.raises(hw_probe.ReportError) as info:
        hw_probe.report_from_data({"schema": "trl-advisor/hardware/1"}, where="hw.json")
    assert isinstance(info.value, ValueError) and info.value.hint
    assert "hw.json is not a valid hardware report" in info.value.message


def test_plan_json_prediction_that_is_not_a_number_is_nothing_to_compare(bundle):
    from advisor.verify import RunResult, verify
    from hw_probe.fake import fixture_report

    edit_plan_json(bundle, lambda d: (d["memory"].update(per_gpu_peak_bytes="80 GiB"),
                                      d["speed"].update(tokens_per_second=True)))

    def out_of_memory(command, *, cwd, log_path, timeout_seconds):
        Path(log_path).write_text("torch.OutOfMemoryError: CUDA out of memory.\n", encoding="utf-8")
        return RunResult(returncode=1)

    with within(HANG_SECONDS):
        outcome = verify(bundle, runner=out_of_memory, probe=lambda: fixture_report("h100_sxm_x8_nvlink"),
                         progress=None)
    # plan.json's own figures are nothing to compare; what verify predicts is the estimate of the files, a number
    assert outcome.planned["per_gpu_peak_bytes"] is None and outcome.planned["tokens_per_second"] is None
    assert isinstance(outcome.predicted["per_gpu_peak_bytes"], int)
    assert outcome.step("memory").status == "fail"
