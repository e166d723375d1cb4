"""Reference on-demand prices per GPU-hour (advisor/catalog/data/prices.toml), checked when read, and the
`--price GPU=USD` overrides that replace them.

A GPU without a row has no price: `recommend` shows its options without a cost rather than guessing one.
"""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

from advisor.catalog.lookup import DATA_PACKAGE, CatalogError, all_gpus, resolve_gpu
from advisor.core.errors import AdvisorError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PRICES_FILE = "prices.toml"

MIN_USD_PER_GPU_HOUR = 0.01
"""One cent: costs are shown to the cent, so a cheaper price shows every option at $0.00 and ranks nothing (a value
such as 1e-300 is a typo, not a price)."""
MAX_USD_PER_GPU_HOUR = 1000.0
"""Far above any listed price (prices.toml's dearest row is a B200 at $6.79; a hyperscaler H100 lists near $12 per
GPU-hour): a larger value is a typo, and it keeps every cost a finite number."""

_REINSTALL = "the price table shipped with trl-advisor is damaged; reinstall it, or undo the edit to " \
             "advisor/catalog/data/prices.toml"
_URL = re.compile(r"^https://[^\s]+$")
_REQUIRED = ("usd_per_gpu_hour", "provider", "offer", "source", "read_on", "listed_on")
_OPTIONAL = ("provider_page",)


@dataclass(frozen=True)
class GpuPrice:
    """What one GPU costs for one hour, and where that figure comes from."""

    gpu: str
    """Catalogue GPU id (gpus.toml)."""
    usd_per_gpu_hour: float
    provider: str
    offer: str
    source: str
    """The page the figure was read from; `--price` for a user's own figure."""
    read_on: date | None = None
    listed_on: date | None = None
    provider_page: str | None = None

    @property
    def from_user(self) -> bool:
        return self.source == "--price"

    def label(self) -> str:
        """One line for a table footnote or the JSON `price_source`."""
        if self.from_user:
            return "--price"
        return f"{self.provider} {self.offer}, listed {self.listed_on} ({self.provider_page or self.source})"

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "usd_per_gpu_hour": self.usd_per_gpu_hour, "provider": self.provider,
                "offer": self.offer, "source": self.source,
                "read_on": self.read_on.isoformat() if self.read_on else None,
                "listed_on": self.listed_on.isoformat() if self.listed_on else None,
                "provider_page": self.provider_page}


def _usd(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CatalogError(f"{where}: expected a number of US dollars, got {value!r:.40}", hint=_REINSTALL)
    if not MIN_USD_PER_GPU_HOUR <= value <= MAX_USD_PER_GPU_HOUR:
        raise CatalogError(f"{where}: {value} is outside [{MIN_USD_PER_GPU_HOUR:g}, {MAX_USD_PER_GPU_HOUR:g}] USD per "
                           "GPU-hour",
                           hint=_REINSTALL)
    return float(value)


def _row(gpu_id: str, row: dict, filename: str) -> GpuPrice:
    where = f"{filename}: row [{gpu_id}]"
    unknown = sorted(set(row) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise CatalogError(f"{where}, field {unknown[0]}: not a field of a price row", hint=_REINSTALL)
    missing = [name for name in _REQUIRED if name not in row]
    if missing:
        raise CatalogError(f"{where}, field {missing[0]}: missing", hint=_REINSTALL)
    for name in ("provider", "offer"):
        if not isinstance(row[name], str) or not row[name].strip():
            raise CatalogError(f"{where}, field {name}: expected text", hint=_REINSTALL)
    for name in ("source", "provider_page"):
        if name in row and not (isinstance(row[name], str) and _URL.match(row[name])):
            raise CatalogError(f"{where}, field {name}: expected an https:// URL, got {row[name]!r:.60}",
                               hint=_REINSTALL)
    for name in ("read_on", "listed_on"):
        # TOML dates (2026-12-01, unquoted) arrive as datetime.date; a datetime or a string is not a date
        if type(row[name]) is not date:
            raise CatalogError(f"{where}, field {name}: expected a date such as 2026-12-01, got {row[name]!r:.40}",
                               hint=_REINSTALL)
    if row["listed_on"] > row["read_on"]:
        raise CatalogError(f"{where}: listed_on {row['listed_on']} is after read_on {row['read_on']}: a page cannot "
                           "report a price it was read before", hint=_REINSTALL)
    return GpuPrice(gpu=gpu_id, usd_per_gpu_hour=_usd(row["usd_per_gpu_hour"], f"{where}, field usd_per_gpu_hour"),
                    provider=row["provider"], offer=row["offer"], source=row["source"], read_on=row["read_on"],
                    listed_on=row["listed_on"], provider_page=row.get("provider_page"))


def parse_prices(text: str, filename: str, gpu_ids: set[str]) -> dict[str, GpuPrice]:
    """Every row of a price table, checked: a known GPU id, a price in range, a source URL and the dates it was
    listed and read."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{filename}: not valid TOML ({exc})", hint=_REINSTALL) from None
    prices: dict[str, GpuPrice] = {}
    for key, row in data.items():
        if not isinstance(row, dict):
            raise CatalogError(f"{filename}: '{key}' is not a table", hint=_REINSTALL)
        if key not in gpu_ids:
            raise CatalogError(f"{filename}: row [{key}] is not a GPU of gpus.toml (ids are exact: "
                               "`trl-advisor gpus`)", hint=_REINSTALL)
        prices[key] = _row(key, row, filename)
    return prices


@functools.lru_cache(maxsize=1)
def _reference_prices() -> dict[str, GpuPrice]:
    from importlib.resources import files

    text = files(DATA_PACKAGE).joinpath(PRICES_FILE).read_text(encoding="utf-8")
    return parse_prices(text, PRICES_FILE, {gpu.id for gpu in all_gpus()})


def reference_prices() -> dict[str, GpuPrice]:
    """GPU id -> its reference price (a copy: callers may add their overrides)."""
    return dict(_reference_prices())


_USD = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
"""What the dollar part of --price may look like: ASCII digits, a point, an exponent. Python's float() also takes
'1_0', 'nan', 'infinity' and digits of other scripts ('٣'), none of which a user means as a price; a sign is left
out because no price is negative (and '+3' is no clearer than '3')."""


def parse_price_flag(text: str) -> tuple[str, float]:
    """`--price GPU=USD_PER_GPU_HOUR` as (GPU name, dollars); `price_override` checks both."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise AdvisorError(f"--price {text!r:.60} is not GPU=USD_PER_GPU_HOUR", hint="for example --price H100=2.49")
    if not _USD.fullmatch(value.strip()):
        raise AdvisorError(f"--price {name.strip()[:40]}: {value.strip()!r:.30} is not a number of US dollars",
                           hint="for example --price H100=2.49")
    return name.strip(), float(value)


def parse_price_flags(texts: Iterable[str]) -> dict[str, float]:
    """Every `--price GPU=USD` of a command line as {catalogue GPU id: dollars}. A GPU priced twice, under one name
    or two (`H100=2 --price H100-80GB=3`), is a usage error: which of the two prices the ranking used would
    otherwise depend on the flags' order, and nothing would say so."""
    prices: dict[str, float] = {}
    given: dict[str, str] = {}
    for text in texts:
        name, usd = parse_price_flag(text)
        gpu_id = resolve_gpu(name).id
        if gpu_id in prices:
            raise AdvisorError(f"--price names {gpu_id} twice ({given[gpu_id]!r:.60} and {text!r:.60})",
                               hint=f"give one --price for {gpu_id}")
        prices[gpu_id], given[gpu_id] = usd, text
    return prices


def price_override(name: str, usd: float) -> GpuPrice:
    """A user's price for a catalogue GPU (any name `--gpu` takes), in [MIN_USD_PER_GPU_HOUR, MAX_USD_PER_GPU_HOUR]
    per GPU-hour."""
    gpu = resolve_gpu(name)
    if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not math.isfinite(usd) \
            or not MIN_USD_PER_GPU_HOUR <= usd <= MAX_USD_PER_GPU_HOUR:
        raise AdvisorError(f"--price {gpu.id}: {usd!r:.20} is outside [{MIN_USD_PER_GPU_HOUR:g}, "
                           f"{MAX_USD_PER_GPU_HOUR:g}] USD per GPU-hour",
                           hint="give the price of one GPU for one hour, for example --price H100=2.49")
    return GpuPrice(gpu=gpu.id, usd_per_gpu_hour=float(usd), provider="you", offer="--price", source="--price")
