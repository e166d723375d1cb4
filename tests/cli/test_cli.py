"""Command-line contract: exit codes, one-line errors with hints, stdout for data and stderr for diagnostics."""

import json
import os
import subprocess
import sys

import pytest


def run(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True, env=env)


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> None:
    assert proc.returncode == code, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: "), proc.stderr
    assert any(line.startswith("hint: ") for line in lines), proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(lines) <= 3, proc.stderr


def test_help_lists_every_contract_command():
    proc = run("--help")
    assert proc.returncode == 0
    for command in ("probe", "models", "gpus", "estimate", "check", "generate", "explain", "rules", "verify"):
        assert command in proc.stdout


@pytest.mark.parametrize("args", [(), ("wizard",), ("wizard", "--model", "8B")])
def test_the_wizard_without_a_terminal_is_one_line_and_a_hint_naming_the_commands(args):
    proc = subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert_one_line_error(proc)
    assert len(proc.stderr.splitlines()) == 2 and "generate" in proc.stderr and "--help" in proc.stderr


def test_generate_json_prints_json_when_no_plan_fits(tmp_path):
    """A script reads "no plan" from stdout as it reads a plan: exit 1, the error and hint on stderr, and on stdout
    a JSON document with fits false, the smallest change and the plans rejected, and nothing written."""
    proc = run("generate", "--model", "70B", "--gpu", "RTX-4090", "--offload", "none", "--json",
               "--out", str(tmp_path / "b"))
    assert_one_line_error(proc, code=1)
    doc = json.loads(proc.stdout)
    assert doc["ok"] is False and doc["fits"] is False and doc["plan"] is None and doc["files"] == []
    assert doc["error"].startswith("no plan") and "--offload all" in doc["hint"]
    assert doc["request"]["offload"] == "none" and doc["hardware"]["gpu"] == "RTX-4090"
    assert doc["alternatives"] and all(a["rejected_because"] for a in doc["alternatives"])
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("args", [
    ("estimate",),  # --model missing
    ("estimate", "--model", "7B", "--micro-batch", "two"),
    ("nonsense-command",),
    ("estimate", "--model", "7B", "--bogus-flag"),
])
def test_usage_errors_are_one_line_with_a_hint(args):
    assert_one_line_error(run(*args))


def test_unknown_model_says_did_you_mean():
    proc = run("estimate", "--model", "qwen2.5-7", "--gpu", "H100-80GB")
    assert_one_line_error(proc)
    assert "qwen2.5-7b" in proc.stderr


def test_unknown_gpu_is_a_usage_error():
    assert_one_line_error(run("estimate", "--model", "7B", "--gpu", "H10"))


def test_missing_hardware_file_is_a_usage_error(tmp_path):
    assert_one_line_error(run("estimate", "--model", "7B", "--hardware", str(tmp_path / "missing.json")))


def test_corrupt_hardware_file_is_a_usage_error(tmp_path):
    bad = tmp_path / "hw.json"
    bad.write_text("{not json")
    assert_one_line_error(run("estimate", "--model", "7B", "--hardware", str(bad)))


def test_missing_config_json_is_a_usage_error(tmp_path):
    assert_one_line_error(run("estimate", "--model", str(tmp_path / "config.json"), "--gpu", "H100-80GB"))


def test_invalid_choice_names_the_valid_values():
    proc = run("estimate", "--model", "7B", "--gpu", "H100-80GB", "--trainer", "ppo")
    assert_one_line_error(proc)
    assert "sft" in proc.stderr and "grpo" in proc.stderr


def test_probe_json_is_valid_without_a_gpu_and_round_trips(tmp_path):
    proc = run("probe", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["schema"] == "trl-advisor/hardware/1"
    saved = tmp_path / "hw.json"
    saved.write_text(proc.stdout)
    from advisor.resolve.hardware import load_report

    again = load_report(str(saved))
    assert json.loads(again.to_json()) == report


def test_models_and_gpus_list_the_catalogues():
    models = json.loads(run("models", "--json").stdout)
    gpus = json.loads(run("gpus", "--json").stdout)
    assert len(models) >= 30 and len(gpus) >= 15
    assert {"qwen2.5-7b", "llama-3.1-70b"} <= {m["id"] for m in models}
    assert "H100-80GB" in {g["id"] for g in gpus}


def test_an_internal_error_is_exit_3_with_the_traceback_in_a_file(monkeypatch, capsys, tmp_path):
    """A bug is not a verdict (1) nor a usage error (2): exit 3, one line on stderr naming the traceback's file."""
    import advisor.cli as cli

    def broken(args):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(cli, "cmd_models", broken)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    assert cli.main(["models"]) == 3
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("internal error: ZeroDivisionError")
    assert "Traceback" not in err
    (crash,) = tmp_path.glob("trl-advisor-crash-*.txt")
    assert "Traceback" in crash.read_text() and "ZeroDivisionError" in crash.read_text()
    assert cli.main(["--debug", "models"]) == 3
    assert "Traceback" in capsys.readouterr().err  # --debug prints it instead


def test_unsloth_figures_say_they_are_an_upper_bound(capsys):
    """No Unsloth run is in the calibration (one was measured, not fitted): every place its figures appear says that
    they are an upper bound and what was measured (text and bundle README)."""
    from advisor.cli import main

    assert main(["estimate", "--model", "8B", "--method", "qlora", "--unsloth", "--gpu", "RTX-4090", "--gpus", "1"]) == 0
    out = capsys.readouterr().out
    assert "Unsloth: the memory and speed predicted for this Unsloth plan" in out and "an upper bound" in out
    assert "Measured once, on one H200" in out
    assert main(["estimate", "--model", "8B", "--method", "qlora", "--gpu", "RTX-4090", "--gpus", "1"]) == 0
    assert "upper bound" not in capsys.readouterr().out


def test_a_host_bound_plan_says_its_speed_follows_the_host_cpu(capsys, tmp_path):
    """GRPO without vLLM on a small model is kernel launches (the host CPU); an 8B SFT on H100s is GPU work: only the
    first is told that its tokens/s moves with the CPU, in estimate and in generate."""
    from advisor.cli import main

    grpo = ["--model", "0.5B", "--trainer", "grpo", "--vllm", "none", "--gpu", "H200-141GB", "--gpus", "1"]
    assert main(["estimate", *grpo]) == 0
    assert "host-bound: " in capsys.readouterr().out
    assert main(["generate", *grpo, "--out", str(tmp_path / "g")]) == 0
    assert "note: speed: " in capsys.readouterr().err
    assert "Host-bound: " in (tmp_path / "g" / "README.md").read_text()
    sft = ["--model", "8B", "--gpu", "H100-80GB", "--gpus", "8"]
    assert main(["estimate", *sft]) == 0
    assert "host-bound" not in capsys.readouterr().out
    assert main(["generate", *sft, "--out", str(tmp_path / "s")]) == 0
    assert "host CPU" not in "".join(capsys.readouterr())


@pytest.mark.parametrize("command", ["estimate", "check", "generate"])
def test_single_backend_on_several_gpus_is_a_usage_error_everywhere(command, tmp_path):
    """One process cannot use 8 GPUs: estimate, check and generate all say so (they disagreed before)."""
    extra = ["--out", str(tmp_path / "b")] if command == "generate" else []
    proc = run(command, "--model", "0.5B", "--backend", "single", "--gpus", "8", "--gpu", "H100-80GB", *extra)
    assert_one_line_error(proc)
    assert "--backend single" in proc.stderr and "--gpus 1" in proc.stderr
    assert not (tmp_path / "b").exists()


def test_vllm_gpus_alone_means_server_mode_in_estimate_too():
    proc = run("estimate", "--model", "0.5B", "--trainer", "grpo", "--vllm-gpus", "1", "--gpus", "4", "--gpu",
               "H100-80GB", "--json")
    assert proc.returncode == 0, proc.stderr
    req = json.loads(proc.stdout)["request"]
    assert req["vllm"] == "server" and req["vllm_gpus"] == 1


def test_gpu_beside_hardware_names_the_reports_gpu(tmp_path):
    """--gpu is not ignored next to --hardware: it names the catalogue row for the report's GPUs (the hint for a GPU
    the catalogue does not know says to pass it), and the report keeps its GPU count."""
    from pathlib import Path

    data = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "hardware" /
                       "h100_sxm_x8_nvlink.json").read_text(encoding="utf-8"))
    for gpu in data["gpus"]:
        gpu["name"] = "NVIDIA Next-Gen 80GB"
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    proc = run("estimate", "--model", "0.5B", "--hardware", str(path))
    assert_one_line_error(proc)
    assert "--gpu" in proc.stderr
    proc = run("estimate", "--model", "0.5B", "--hardware", str(path), "--gpu", "H100-80GB", "--json")
    assert proc.returncode == 0, proc.stderr
    hw = json.loads(proc.stdout)["hardware"]
    assert hw["gpu"] == "H100-80GB" and hw["gpus_per_node"] == 8
    assert "(--gpu) for the report's 'NVIDIA Next-Gen 80GB'" in proc.stderr


@pytest.mark.parametrize("flags", [["--gpu", ""], ["--out", ""], ["--model", " "], ["--teacher", ""]])
def test_an_empty_value_is_a_usage_error_not_a_flag_left_out(flags, tmp_path):
    """A script whose variable was unset passes `--gpu ""`: planning for another GPU than meant would be wrong."""
    args = ["generate", "--model", "0.5B", *flags] if flags[0] != "--model" else ["generate", *flags]
    proc = run(*args, "--gpus", "1")
    assert_one_line_error(proc)
    assert f"{flags[0]} is empty" in proc.stderr


def test_a_gkd_teacher_of_another_vocabulary_names_ones_that_fit():
    proc = run("generate", "--model", "qwen2.5-0.5b", "--trainer", "gkd", "--teacher", "qwen2.5-7b", "--gpus", "1",
               "--gpu", "H100-80GB")
    assert_one_line_error(proc)
    hint = next(line for line in proc.stderr.splitlines() if line.startswith("hint: "))
    # larger catalogue models with the student's exact vocabulary, its own family first
    assert "151,936-token vocabulary: qwen2.5-1.5b, qwen2.5-3b" in hint


def test_a_gpu_other_processes_fill_has_nothing_usable_not_a_negative_amount(tmp_path):
    from pathlib import Path

    data = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "hardware" /
                       "h100_sxm_x8_nvlink.json").read_text(encoding="utf-8"))
    for gpu in data["gpus"]:
        gpu["other_process_bytes"] = gpu["memory_used_bytes"] = gpu["memory_total_bytes"] - 10**8
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    proc = run("estimate", "--model", "0.5B", "--hardware", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    memory = json.loads(proc.stdout)["memory"]
    assert memory["gpu_capacity_bytes"] == 0 and not memory["fits"]
    assert "other processes hold 79.6 GiB" in proc.stderr


def _closing(fd: int):
    """preexec_fn for a child whose descriptor fd is closed, as `trl-advisor ... >&-` leaves it."""
    return lambda: os.close(fd)


@pytest.mark.parametrize("args", [(), ("wizard", "--model", "7B")])
def test_a_closed_stdin_is_no_terminal_not_an_internal_error(args):
    """Python sets sys.stdin to None for a closed descriptor: the wizard's isatty() raised AttributeError (exit 3)."""
    proc = subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True,
                          preexec_fn=_closing(0))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "\ninternal error:" not in "\n" + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]  # after the usage text
    assert errors == ["error: the wizard needs a terminal: stdin and stdout are not both one"], proc.stderr


@pytest.mark.parametrize("command", ["estimate", "generate", "rules"])
def test_a_closed_stdout_is_a_usage_error_before_anything_is_written(command, tmp_path):
    args = {"estimate": ("estimate", "--model", "0.5B", "--gpu", "H100-80GB"),
            "generate": ("generate", "--model", "0.5B", "--gpu", "H100-80GB", "--out", str(tmp_path / "b")),
            "rules": ("rules",)}[command]
    proc = subprocess.run([sys.executable, "-m", "advisor", *args], stderr=subprocess.PIPE, text=True,
                          preexec_fn=_closing(1))
    assert_one_line_error(proc)
    assert "stdout is closed" in proc.stderr
    assert not (tmp_path / "b").exists()  # no bundle whose report nobody could read


def test_a_closed_stderr_keeps_the_exit_code_of_a_usage_error():
    """With stderr closed the error line cannot be shown, but the exit code must still say "usage" (2): writing it
    raised AttributeError inside the error handler and Python ended with 1, which scripts read as findings."""
    proc = subprocess.run([sys.executable, "-m", "advisor", "estimate", "--model", "no-such-model", "--gpu",
                           "H100-80GB"], stdout=subprocess.PIPE, text=True, preexec_fn=_closing(2))
    assert proc.returncode == 2


def test_an_out_dir_a_thousand_folders_deep_is_written_not_a_crash(tmp_path):
    out = tmp_path.joinpath(*["d"] * 1200) / "b"
    try:
        proc = run("generate", "--model", "0.5B", "--gpu", "H100-80GB", "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        assert (out / "plan.json").is_file()
    finally:  # one level at a time: shutil.rmtree (pytest's tmp_path cleanup) recurses once per level
        folder = out
        while folder != tmp_path:
            if folder.is_dir():
                for child in folder.iterdir():
                    if not child.is_dir():
                        child.unlink()
                folder.rmdir()
            folder = folder.parent


@pytest.mark.parametrize("args", [
    ["estimate", "--model", "7B", "--gpu", "H100-80GB", *["--seq-len", "1024"] * 20_000],
    ["recommend", "--model", "7B", "--tokens", "1e9", *["--price", "H100-80GB=2"] * 20_000],
])
def test_a_flood_of_repeated_flags_is_refused_at_once(args, capsys):
    """argparse's time grows with the square of the number of options: 40,000 repeated flags (within ARG_MAX)
    parsed for 30 s, a hang; they are a usage error instead, before any parsing."""
    import time

    from advisor.cli import MAX_ARGUMENTS, main

    start = time.monotonic()
    rc = main(args)
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert rc == 2 and elapsed < 10, (rc, elapsed)  # the hang was 30 s; 10 leaves a loaded 2-core host room
    assert err.startswith("error: 40,00") and f"at most {MAX_ARGUMENTS:,}" in err and "\nhint: " in err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_stdout_after_the_bundle_is_written_says_the_bundle_is_there(tmp_path):
    out = tmp_path / "b"
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "advisor", "generate", "--model", "qwen2.5-0.5b", "--gpu",
                               "H100-80GB", "--out", str(out)], stdout=full, stderr=subprocess.PIPE, text=True)
    assert_one_line_error(proc)
    assert f"the bundle was written to {out}" in proc.stderr and (out / "train.py").exists()
