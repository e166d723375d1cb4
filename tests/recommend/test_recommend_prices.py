"""The reference price table: every row a catalogue GPU with a price in range, the page it was read from and the
dates; a damaged row is refused at load; `--price` overrides are checked the same way."""

from __future__ import annotations

import math
from datetime import date

import pytest

from advisor.catalog import all_gpus
from advisor.catalog.lookup import CatalogError
from advisor.catalog.prices import (
    MAX_USD_PER_GPU_HOUR,
    MIN_USD_PER_GPU_HOUR,
    parse_price_flag,
    parse_prices,
    price_override,
    reference_prices,
)
from advisor.core.errors import AdvisorError

GPU_IDS = {g.id for g in all_gpus()}

GOOD_ROW = """
[H100-80GB]
usd_per_gpu_hour = 3.99
provider = "RunPod"
offer = "Secure Cloud, H100 SXM 80GB, on-demand, per GPU"
source = "https://example.org/prices.json"
read_on = 2026-12-01
listed_on = 2026-11-09
"""


def test_every_shipped_row_cites_a_page_and_its_dates():
    prices = reference_prices()
    assert len(prices) >= 10  # the data-center parts the issue names have a price
    for gpu, p in prices.items():
        assert gpu in GPU_IDS and p.gpu == gpu
        assert p.source.startswith("https://") and (p.provider_page is None or p.provider_page.startswith("https://"))
        assert isinstance(p.read_on, date) and isinstance(p.listed_on, date) and p.listed_on <= p.read_on
        assert 0 < p.usd_per_gpu_hour <= MAX_USD_PER_GPU_HOUR
        assert p.provider and p.offer
        assert str(p.listed_on) in p.label()


def test_gpus_without_a_public_figure_have_no_price():
    """No price is guessed: these rows were left out for want of a readable source (prices.toml header)."""
    prices = reference_prices()
    for gpu in ("RTX-5090", "T4", "L4", "MI300X"):
        assert gpu not in prices


def test_a_good_row_parses():
    row = parse_prices(GOOD_ROW, "t.toml", GPU_IDS)["H100-80GB"]
    assert row.usd_per_gpu_hour == 3.99 and row.listed_on == date(2026, 11, 9)


@pytest.mark.parametrize("old, new, problem", [
    ("[H100-80GB]", "[H100-99GB]", "not a GPU of gpus.toml"),
    ('source = "https://example.org/prices.json"\n', "", "source: missing"),
    ("https://example.org/prices.json", "http://example.org/prices.json", "https:// URL"),
    ("usd_per_gpu_hour = 3.99", "usd_per_gpu_hour = 0", "outside"),
    ("usd_per_gpu_hour = 3.99", "usd_per_gpu_hour = 1e-300", "outside"),
    ("usd_per_gpu_hour = 3.99", "usd_per_gpu_hour = 5000.0", "outside"),
    ("usd_per_gpu_hour = 3.99", 'usd_per_gpu_hour = "3.99"', "number"),
    ("usd_per_gpu_hour = 3.99", "usd_per_gpu_hour = nan", "number"),
    ("read_on = 2026-12-01", 'read_on = "2026-12-01"', "expected a date"),
    ("listed_on = 2026-11-09", "listed_on = 2026-12-24", "after read_on"),
    ('offer = "', 'discount = 0.5\noffer = "', "not a field"),
    ("[H100-80GB]", "[H100-80GB", "not valid TOML"),
])
def test_a_damaged_row_is_refused_naming_the_field(old, new, problem):
    assert old in GOOD_ROW
    with pytest.raises(CatalogError) as err:
        parse_prices(GOOD_ROW.replace(old, new), "t.toml", GPU_IDS)
    assert problem in err.value.message


def test_a_price_override_takes_any_gpu_name_and_checks_the_value():
    p = price_override("h100", 2.5)
    assert (p.gpu, p.usd_per_gpu_hour, p.from_user, p.label()) == ("H100-80GB", 2.5, True, "--price")
    for bad in (0, 1e-300, MIN_USD_PER_GPU_HOUR / 2, -1, math.nan, math.inf, MAX_USD_PER_GPU_HOUR * 2):
        with pytest.raises(AdvisorError):
            price_override("H100", bad)
    with pytest.raises(AdvisorError, match="unknown GPU"):
        price_override("H10", 2.0)


@pytest.mark.parametrize("text", ["H100", "=3", "H100=", "H100=abc"])
def test_a_malformed_price_flag_is_a_usage_error(text):
    with pytest.raises(AdvisorError):
        parse_price_flag(text)


def test_a_price_flag_splits_name_and_dollars():
    assert parse_price_flag(" A100-80GB = 1.5") == ("A100-80GB", 1.5)
