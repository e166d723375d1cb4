"""What README.md says of the wizard is what the wizard does: every key it names is bound, the tab count and the alt
keys match the tabs (the help screen's line too), and the start-up table quotes the bench record it names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("textual")

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
WORDS = {5: "Five", 6: "Six", 7: "Seven"}


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("### The wizard")
    return " ".join(text[start:text.index("\n## ", start)].split())


def _app_class():
    import tui

    return tui.WizardApp


def test_the_tabs_and_their_keys():
    import tui

    n = len(tui.TABS)
    text = _section()
    assert f"{WORDS[n]} tabs, keys `1`-`{n}` (`alt+1`-`alt+{n}` from inside a field)" in text
    assert len(tui.ALT_DIGITS) == n
    keys = {k.strip() for binding in _app_class().BINDINGS for k in binding.key.split(",")}
    assert {str(i) for i in range(1, n + 1)} <= keys and set(tui.ALT_DIGITS) <= keys
    leave = next(what for _, action, _, what in tui.KEYS if action == "leave_field")
    assert f"alt+1 to alt+{n}" in leave  # the help screen's line


def test_every_key_the_readme_names_is_bound():
    """Keys the README writes as `x` in the wizard section (one letter, a digit, F1, ctrl+...)."""
    keys = {k.strip() for binding in _app_class().BINDINGS for k in binding.key.split(",")}
    named = set(re.findall(r"`((?:ctrl\+)?[a-z0-9]|F\d+|enter)`", _section()))
    assert {"c", "p", "u", "f", "e", "w", "v", "o", "t", "ctrl+o", "ctrl+p", "F1", "enter"} <= named
    missing = []
    for key in named:
        k = key.lower()
        if k in ("enter", "ctrl+p"):  # enter: the tables' own selection; ctrl+p: Textual's command palette
            continue
        if k not in keys:
            missing.append(key)
    assert not missing


def _s(seconds: float) -> str:
    """Seconds as the README rounds them: two places, halves up (0.745 s is 0.75)."""
    from decimal import ROUND_HALF_UP, Decimal

    return str(Decimal(str(seconds)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def test_the_start_up_table_is_the_bench_record():
    text = _section()
    name = re.search(r"bench/results/(wizard-speed-[0-9-]+\.json)", text).group(1)
    record = json.loads((ROOT / "bench" / "results" / name).read_text(encoding="utf-8"))
    cached = record["bytecode"]["cached"]
    assert f"Each figure is the median of {record['runs']} runs" in text
    for scenario in cached.values():
        command = scenario["command"].replace("tests/fixtures/hardware/", "")
        row = (f"| `{command}`" + (' (no model yet: "choose a model")' if command == "trl-advisor" else "")
               + ("" if command != "trl-advisor wizard --model 8B" else " (this machine, probed)")
               + f" | {_s(scenario['first_screen_seconds'])} s ({_s(scenario['worst_first_screen_seconds'])}) | "
               f"{_s(scenario['plan_after_screen_seconds'])} s ({_s(scenario['worst_plan_after_screen_seconds'])}) |")
        assert row in text, row
