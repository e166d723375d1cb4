"""Driving the wizard headless: a settled screen, its text, deterministic SVG snapshots, and the committed
screenshots.

    python tests/tui/wizard_harness.py snapshots   # rewrite tests/tui/snapshots/*.svg (look at them first)
    python tests/tui/wizard_harness.py docs        # rewrite docs/wizard/*.svg (shown in README.md)
    python tests/tui/wizard_harness.py text [NAME] # print the screens as text, at both sizes (to look at them)

Snapshots are compared byte for byte; they depend only on the request, the fixture hardware files and the
terminal size (no clock, no probe of the machine the tests run on, cursor blink off).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: the repository's modules first
    sys.path.insert(0, str(REPO))

FIXTURES = REPO / "tests" / "fixtures" / "hardware"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
DOCS = REPO / "docs" / "wizard"
VERSIONS_FILE = SNAPSHOTS / "VERSIONS"
SIZES = ((100, 32), (80, 24))
DOC_SCREENS = ("target", "machine", "training", "plan", "rules", "bundle", "rent")
"""The screens docs/wizard/ shows (README.md), at 100 x 32."""
H100_FILE = "h100_sxm_x8_nvlink.json"


def fixture_probe(name: str):
    """A probe that answers with a saved report (tests never probe the machine they run on)."""
    from advisor.resolve import load_report

    report = load_report(FIXTURES / name)
    return lambda: report


def versions() -> str:
    from importlib.metadata import version

    return f"textual=={version('textual')}\nrich=={version('rich')}\n"


async def until(pilot, condition, timeout: float = 30.0) -> None:
    """Wait until condition() holds (polled every 0.05 s): a fixed pause flakes on a loaded 2-core host."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"the wizard did not reach the state awaited within {timeout:.0f} s")
        await pilot.pause(0.05)


async def settle(app, pilot, timeout: float = 60.0) -> None:
    """Wait until the plan on screen is the current request's and nothing is left to draw."""
    start = time.monotonic()
    while True:
        await pilot.pause(0.02)
        busy = [w for w in app.workers if w.is_running and w.group in ("plan", "probe", "write", "verify", "rent", "forms")]
        if app.settled and not busy:
            break
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"the wizard did not settle (generation {app.generation}, shown "
                               f"{app.shown_generation}, busy {busy})")
    for _ in range(3):
        await pilot.pause(0.02)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause(0.02)


def screen_text(app) -> str:
    """The screen as plain text (what a user reads)."""
    from rich.console import Console

    console = Console(width=app.size.width, height=app.size.height, record=True, force_terminal=True,
                      color_system=None, file=open(__import__("os").devnull, "w"))  # noqa: SIM115
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens,
                                                       simplify=True))
    return console.export_text()


def no_blink(app) -> None:
    from textual.widgets import Input

    for widget in app.query(Input):
        widget.cursor_blink = False


# ---------------------------------------------------------------------------------------------- the screens

def screens() -> dict[str, dict]:
    """name -> how to reach it: the request, the tab, then fields typed (`fields`: name -> text), the folder, the
    widget focused and keys pressed. The probe is always the no_gpu.json fixture ("this machine" has no GPU)."""
    from advisor.core.request import Request

    h100 = Request(model="8B", gpu="H100-80GB", gpus=8)
    grpo_file = Request(model="qwen2.5-7b", trainer="grpo", hardware=H100_FILE)
    return {
        "target": {"request": grpo_file, "tab": "target"},
        "machine": {"request": Request(model="8B"), "tab": "target"},
        "training": {"request": grpo_file, "tab": "training"},
        "plan": {"request": h100, "tab": "plan"},
        "rules": {"request": Request(model="qwen2.5-7b", gpu="H100-80GB", gpus=8, seq_len=32768, sp_size=7),
                  "tab": "rules"},
        "bundle": {"request": h100, "tab": "bundle", "out": "bundles/llama-8b", "keys": ("down", "down")},
        "help": {"request": h100, "tab": "plan", "keys": ("f1",)},
        "light": {"request": h100, "tab": "bundle", "out": "bundles/llama-8b", "keys": ("t",)},
        "rent": {"request": Request(model="8B", tokens=1_000_000_000), "tab": "rent", "fields": {"max_gpus": "16"},
                 "focus": "#options", "keys": ("down",)},
    }


WORK_ROOT = Path("/tmp/trl-advisor-wizard-snapshots")
"""Where each screen runs: a fixed folder per screen and size, because the wizard's re-create line names the
hardware file by its absolute path, which a fresh temporary folder would change on every run."""


def screen_workdir(name: str, size: tuple[int, int]) -> Path:
    """The screen's own folder under WORK_ROOT, emptied (one per screen and size: parallel test workers never
    share one)."""
    work = WORK_ROOT / f"{name}-{size[0]}x{size[1]}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return work


async def capture(name: str, size: tuple[int, int], workdir: Path | None = None, *, title: str | None = None,
                  text: bool = False) -> str:
    """The SVG of one screen at one size (`text`: the screen as plain text instead), run with its screen_workdir
    as the current folder (the fixture file copied in); `workdir` is not used (the folder must not vary)."""
    import os

    from tui import make_app

    spec = screens()[name]
    workdir = screen_workdir(name, size)
    shutil.copy(FIXTURES / H100_FILE, workdir / H100_FILE)
    old = os.getcwd()
    os.chdir(workdir)
    try:
        app = make_app(spec["request"], probe=fixture_probe("no_gpu.json"))
        async with app.run_test(size=size) as pilot:
            no_blink(app)
            await settle(app, pilot)
            await app.action_show_tab(spec["tab"])
            await settle(app, pilot)
            for field, typed in spec.get("fields", {}).items():
                app.query_one(f"#f-{field}").value = typed
                await settle(app, pilot)
            if "out" in spec:
                app.query_one("#out").value = spec["out"]
                await settle(app, pilot)
            if "focus" in spec:
                app.query_one(spec["focus"]).focus()
                await settle(app, pilot)
            for key in spec.get("keys", ()):
                await pilot.press(key)
            no_blink(app)
            await settle(app, pilot)
            if text:
                return screen_text(app)
            return app.export_screenshot(title=title or f"trl-advisor wizard: {name}")
    finally:
        os.chdir(old)
        shutil.rmtree(workdir, ignore_errors=True)


def snapshot_path(name: str, size: tuple[int, int]) -> Path:
    return SNAPSHOTS / f"{name}_{size[0]}x{size[1]}.svg"


def write_snapshots() -> None:
    import tempfile

    SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    for name in screens():
        for size in SIZES:
            with tempfile.TemporaryDirectory() as tmp:
                snapshot_path(name, size).write_text(asyncio.run(capture(name, size, Path(tmp))), encoding="utf-8")
    VERSIONS_FILE.write_text(versions(), encoding="utf-8")


def write_docs() -> None:
    import tempfile

    DOCS.mkdir(parents=True, exist_ok=True)
    for name in DOC_SCREENS:
        with tempfile.TemporaryDirectory() as tmp:
            svg = asyncio.run(capture(name, (100, 32), Path(tmp), title="trl-advisor"))
        (DOCS / f"{name}.svg").write_text(svg, encoding="utf-8")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "snapshots":
        write_snapshots()
    elif what == "docs":
        write_docs()
    elif what == "text":
        import tempfile

        for name in sys.argv[2:] or list(screens()):
            for size in SIZES:
                with tempfile.TemporaryDirectory() as tmp:
                    print(f"--- {name} {size[0]}x{size[1]}\n" + asyncio.run(capture(name, size, Path(tmp), text=True)))
    else:
        sys.exit("usage: python tests/tui/wizard_harness.py snapshots|docs|text [NAME ...]")
