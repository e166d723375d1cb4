"""A refusal's line names what the user typed and its hint what to do next: the command's own help for a flag it does
not take, --gpus for a count given to --gpu, the stray space in a value, the folder the user asked for rather than
a staging folder, the other jobs on the GPUs, and no hardware report that claims a host without RAM."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    err = capsys.readouterr().err.splitlines()
    error = next((line for line in err if line.startswith("error: ")), "")
    hint = next((line for line in err if line.startswith("hint: ")), "")
    return code, error, hint




@pytest.mark.parametrize("command", [["estimate", "--model", "7B"], ["generate", "--model", "7B"],
                                     ["check", "--model", "7B"]])
def test_a_flag_the_command_does_not_take_points_at_the_commands_help(capsys, command):
    code, error, hint = _run(capsys, *command, "--no-such-flag")
    assert code == 2 and "unrecognized arguments: --no-such-flag" in error
    assert hint == f"hint: see `trl-advisor {command[0]} --help`"


def test_a_count_given_to_gpu_suggests_gpus(capsys):
    code, error, hint = _run(capsys, "estimate", "--model", "7B", "--gpu", "8")
    assert code == 2 and "unknown GPU '8'" in error and "--gpus 8" in hint


def test_a_stray_space_in_a_value_shows(capsys):
    code, error, _ = _run(capsys, "estimate", "--model", "7B", "--gpu", "H100-80GB", "--attn", "sdpa ")
    assert code == 2 and "'sdpa '" in error


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_a_folder_that_cannot_be_made_is_named_as_given(capsys, tmp_path, where):
    if where == "proc":  # /proc takes no new folder, root or not: the staging folder is what fails first
        if not Path("/proc").is_dir():
            pytest.skip("no /proc")
        out = "/proc/trl-advisor-test-bundle"
    else:
        blocker = tmp_path / "file"
        blocker.write_text("x")
        out = str(blocker / "bundle")  # a file where a folder must go: nothing can be made under it
    code, error, _ = _run(capsys, "generate", "--model", "0.5B", "--gpu", "H100-80GB", "--out", out)
    assert code == 2 and ".tla-" not in error and out.rsplit("/", 2)[-2] in error


def test_memory_other_jobs_hold_is_named_when_nothing_fits(capsys, tmp_path, edited_report):
    def busy(data):
        for g in data["gpus"]:
            g["other_process_bytes"] = g["memory_used_bytes"] = g["memory_total_bytes"] - (2 << 30)
            g["memory_free_bytes"] = 2 << 30

    code, error, hint = _run(capsys, "generate", "--model", "7B", "--hardware", edited_report(busy),
                             "--out", str(tmp_path / "b"))
    assert code == 1 and "other processes hold" in error
    assert "nvidia-smi" in hint and "CUDA_VISIBLE_DEVICES" in hint


def test_a_report_of_a_host_without_ram_is_refused(capsys, tmp_path, edited_report):
    def no_ram(data):
        data["host"]["ram_total_bytes"] = 0

    code, error, _ = _run(capsys, "generate", "--model", "7B", "--hardware", edited_report(no_ram),
                          "--out", str(tmp_path / "b"))
    assert code == 2 and "ram_total_bytes" in error
