"""A number flag takes the numbers a user types: ASCII digits (and, for job sizes, 1e9), nothing Python's int() or
float() would also take: '1_0', ' 4', '+4', digits of other scripts ('٨'), 'nan' and 'inf' are one-line usage
errors (exit 2) naming the flag, never read as another value."""

from __future__ import annotations

import contextlib
import io

import pytest

from advisor.cli import main


def _cli(*argv: str) -> tuple[int, str]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(list(argv))
    return rc, err.getvalue()


BASE = ("estimate", "--model", "0.5B", "--gpu", "H100-80GB")


@pytest.mark.parametrize("flag", ["--micro-batch", "--seq-len", "--gpus", "--grad-accum", "--lora-r"])
@pytest.mark.parametrize("text", ["٨", "1_0", "+4", " 4", "4 ", "3.0", "0x10", "۴"])
def test_whole_number_flags_take_ascii_digits_only(flag, text):
    rc, err = _cli(*BASE, flag, text)
    assert rc == 2 and f"argument {flag}: expected a whole number, got {text!r}" in err


@pytest.mark.parametrize("text", ["1_000", "١٠٠", "nan", "inf", "1e", " 1e9"])
def test_job_sizes_take_ascii_numbers_only(text):
    rc, err = _cli(*BASE, "--tokens", text)
    assert rc == 2 and "argument --tokens: expected a whole number" in err


@pytest.mark.parametrize("text", ["1e9", "2.5e9", "1000000"])
def test_job_sizes_in_the_forms_the_help_names(text):
    assert _cli(*BASE, "--tokens", text)[0] == 0


@pytest.mark.parametrize("text", ["nan", "inf", "٠.٥", "0_5", "0.5.1"])
def test_fraction_flags_take_finite_ascii_numbers(text):
    rc, err = _cli("generate", "--model", "0.5B", "--gpu", "H100-80GB", "--gpus", "1", "--trainer", "grpo", "--vllm",
                   "colocate", "--vllm-mem-fraction", text, "--out", "unused-never-written")
    assert rc == 2 and f"argument --vllm-mem-fraction: expected a number, got {text!r}" in err
