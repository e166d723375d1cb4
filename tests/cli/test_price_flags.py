"""`recommend --price GPU=USD`: the dollars are read as the number flags are (ASCII digits, a point, an exponent;
not '1_0', not digits of other scripts, not 'infinity'), and one GPU priced twice, under one name or two, is a usage
error rather than a silent last-one-wins."""

from __future__ import annotations

import pytest

from advisor.catalog.prices import parse_price_flag, parse_price_flags
from advisor.cli import main
from advisor.core.errors import AdvisorError

RECOMMEND = ["recommend", "--model", "0.5B", "--tokens", "1e8", "--gpu-types", "H100-80GB,H200", "--max-gpus", "1"]


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))


def usage_error(capsys, *args: str) -> str:
    rc = main([*RECOMMEND, *args])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert [line.startswith("error:") for line in err.splitlines()].count(True) == 1 and "\nhint: " in err, err
    return err


@pytest.mark.parametrize("dollars", ["٣", "３", "1_0", "+3", "-3", "infinity", "NaN", "3$", "0x10", "3,5", "3.5.1"])
def test_a_price_that_is_not_an_ascii_number_is_refused(capsys, dollars):
    err = usage_error(capsys, "--price", f"H100-80GB={dollars}")
    assert "is not a number of US dollars" in err


@pytest.mark.parametrize("dollars", ["3", "3.", ".5", "2.49", "2.5e0", " 3 "])
def test_plain_prices_are_read(dollars):
    assert parse_price_flag(f"H100-80GB={dollars}") == ("H100-80GB", float(dollars))


@pytest.mark.parametrize("second", ["H100-80GB=2", "h100=2", "H100-80GB=1"])
def test_one_gpu_priced_twice_is_a_usage_error(capsys, second):
    err = usage_error(capsys, "--price", "H100-80GB=1", "--price", second)
    assert "H100-80GB twice" in err


def test_prices_of_different_gpus_are_keyed_by_catalogue_id():
    assert parse_price_flags(["h100=2", "H200=3.5"]) == {"H100-80GB": 2.0, "H200": 3.5}
    with pytest.raises(AdvisorError, match="unknown GPU"):
        parse_price_flags(["H10=2"])
