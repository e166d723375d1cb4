"""On a machine with a GPU: drive the wizard headless through a whole run, verify included, with the real probe and
the real `advisor.verify.verify`, and keep what the screen showed.

    python tests/tui/gpu_verify_from_app.py RESULTS_DIR [--model qwen2.5-0.5b]

Plans the model for the GPUs here (bare probe, as `trl-advisor` does), writes the bundle, ticks verify's offline
options (random init, synthetic data: nothing is downloaded) and presses v; RESULTS_DIR gets the screen as text and
SVG at the end, the verify log lines, and the bundle's verify report. Exit 0 when verify passed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wizard_harness import REPO, screen_text, settle  # noqa: E402

sys.path.insert(0, str(REPO))


async def drive(model: str, results: Path, bundle: Path, timeout: float) -> bool | None:
    from advisor.core.request import Request
    from tui import make_app

    app = make_app(Request(model=model, liger=False))
    async with app.run_test(size=(100, 32)) as pilot:
        await settle(app, pilot)
        (results / "plan.txt").write_text(screen_text(app))
        await app.action_show_tab("bundle")
        app.query_one("#out").value = str(bundle)
        await settle(app, pilot)
        await pilot.press("w")
        await settle(app, pilot)
        app.query_one("#random-init").value = True
        app.query_one("#synthetic-data").value = True
        await pilot.press("v")
        start = time.monotonic()
        while (app.verifying or start + 1 > time.monotonic()) and time.monotonic() - start < timeout:
            await pilot.pause(1.0)
        await settle(app, pilot)
        (results / "bundle-tab.txt").write_text(screen_text(app))
        (results / "bundle-tab.svg").write_text(app.export_screenshot(title="trl-advisor: verify on a GPU"))
        (results / "verify-log.txt").write_text("\n".join(app.query_one("#verify-log").lines))
        return getattr(app, "verify_passed", None)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--model", default="qwen2.5-0.5b")
    parser.add_argument("--timeout", type=float, default=420.0)
    args = parser.parse_args()
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    bundle = Path("/tmp/wizard-gpu-bundle")
    shutil.rmtree(bundle, ignore_errors=True)
    passed = asyncio.run(drive(args.model, results, bundle, args.timeout))
    for name in ("verify-report.json", "verify-report.md"):
        if (bundle / name).is_file():
            shutil.copy(bundle / name, results / name)
    print(json.dumps({"passed": passed}))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
