"""A reader that stops early (`trl-advisor check ... | head -1`, `... 2>&1 | head -1`): stdout or stderr is a pipe
whose reading end is closed. The command still ends with its own exit code (a check with an error is 1, a usage
error 2; what `set -o pipefail` reports), with no traceback and no "Exception ignored" line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

FINDINGS = ["check", "--model", "70B", "--gpu", "T4", "--gpus", "1"]
"""An error finding: 70B does not fit one 16 GiB T4 (exit 1)."""
USAGE = ["estimate", "--model", "no-such-model-zz"]
CLEAN = ["estimate", "--model", "7B", "--gpu", "H100-80GB"]
MISSED_BUDGET = ["recommend", "--model", "0.5B", "--tokens", "1e9", "--gpu-types", "H100-80GB", "--max-gpus", "1",
                 "--budget-usd", "0.01"]


def run_into_closed_pipe(args: list[str], *, stderr_too: bool) -> subprocess.CompletedProcess:
    """The CLI with stdout (and stderr, when stderr_too) a pipe nobody reads any more."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "advisor", *args], stdout=write_end,
                              stderr=write_end if stderr_too else subprocess.PIPE, stdin=subprocess.DEVNULL,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=60)
    finally:
        os.close(write_end)


@pytest.mark.parametrize(("args", "expected"), [(FINDINGS, 1), (USAGE, 2), (CLEAN, 0), (MISSED_BUDGET, 1),
                                                (["rules"], 0)])
def test_a_closed_stdout_keeps_the_exit_code(args, expected):
    proc = run_into_closed_pipe(args, stderr_too=False)
    assert proc.returncode == expected, proc.stderr
    assert b"Traceback" not in proc.stderr and b"Exception ignored" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(("args", "expected"), [(FINDINGS, 1), (USAGE, 2), (CLEAN, 0)])
def test_closed_stdout_and_stderr_keep_the_exit_code(args, expected):
    # with stderr gone the exit code is all the caller gets: a usage error must not read as findings (1)
    assert run_into_closed_pipe(args, stderr_too=True).returncode == expected
