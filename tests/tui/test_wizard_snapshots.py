"""Each screen of the wizard at 100 x 32 and 80 x 24, compared byte for byte with the committed SVG.

A change on screen fails here; when it is wanted, look at the new SVG (the failure names it), then regenerate all of
them with `python tests/tui/wizard_harness.py snapshots` and commit them. The SVGs are Textual's own
`export_screenshot()`, so they depend on the Textual and Rich versions recorded in snapshots/VERSIONS: with other
versions the comparison would fail on every pixel of styling, so it is skipped with that reason.
"""

import asyncio

import pytest

pytest.importorskip("textual")

from wizard_harness import SIZES, VERSIONS_FILE, capture, screens, snapshot_path, versions  # noqa: E402

REGENERATE = "python tests/tui/wizard_harness.py snapshots"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(screens()))
def test_screen_matches_its_snapshot(name, size, tmp_path):
    if VERSIONS_FILE.read_text(encoding="utf-8") != versions():
        pytest.skip(f"snapshots were made with {VERSIONS_FILE.read_text().split()}, this is {versions().split()}: "
                    f"{REGENERATE}")
    work = tmp_path / "work"
    work.mkdir()
    svg = asyncio.run(capture(name, size, work))
    want = snapshot_path(name, size)
    if svg != want.read_text(encoding="utf-8"):
        got = tmp_path / want.name
        got.write_text(svg, encoding="utf-8")
        pytest.fail(f"{name} at {size[0]}x{size[1]} differs from {want.name}; the new screen is {got}. If it is "
                    f"what you want: {REGENERATE}")
