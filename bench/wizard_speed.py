"""How soon the wizard shows its first screen, and then its first plan, in a real terminal (tmux).

    python -m bench.wizard_speed [--runs 5] [--json FILE]

Each run starts `trl-advisor wizard --gpu H100-80GB --gpus 8 --model 8B` in a new detached tmux session of 100 x 32
on a private tmux server, and reads the screen with `tmux capture-pane -p` every POLL_SECONDS. Two figures, both
from the moment tmux is asked to start the command (the server's own start counted in): the first screen (the tab
bar is drawn) and the first plan (its tokens/s are on screen). One warm-up run (page cache), then the median of
--runs. The reading's resolution is one poll plus one capture-pane process (a few ms on a 2-core machine). Other
work on the machine slows both figures (about twice at a load average of 5 on 2 cores): the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ARGS = ["wizard", "--gpu", "H100-80GB", "--gpus", "8", "--model", "8B"]
SIZE = (100, 32)
FIRST_SCREEN = "1 Target"
"""Text of the tab bar: the first screen is drawn."""
FIRST_PLAN = "tokens/s"
"""Shown once the first plan is on screen (the plan strip under every tab)."""
POLL_SECONDS = 0.01
TIMEOUT_SECONDS = 30.0
BUDGET_SECONDS = 1.0
"""The issue's target for each figure: the first screen within 1 s of the command, the plan within 1 s more."""


def command() -> list[str]:
    """`trl-advisor` as installed next to this interpreter, else `python -m advisor` (the same entry point)."""
    script = Path(sys.executable).with_name("trl-advisor")
    return [str(script)] if script.exists() else [sys.executable, "-m", "advisor"]


def first_seen(capture: Callable[[], str], markers: list[str], *, clock: Callable[[], float] = time.perf_counter,
               sleep: Callable[[float], None] = time.sleep, start: float, timeout: float = TIMEOUT_SECONDS) -> list[float]:
    """Seconds from `start` until each marker is first on screen, in order (a later marker is looked for only
    once the earlier ones were seen). TimeoutError when one never appears."""
    seen: list[float] = []
    while len(seen) < len(markers):
        screen = capture()
        while len(seen) < len(markers) and markers[len(seen)] in screen:
            seen.append(clock() - start)
        if len(seen) < len(markers):
            if clock() - start > timeout:
                raise TimeoutError(f"{markers[len(seen)]!r} did not appear within {timeout:.0f} s; the screen:\n{screen}")
            sleep(POLL_SECONDS)
    return seen


def one_run(socket: str) -> list[float]:
    tmux = ["tmux", "-L", socket, "-f", os.devnull]
    line = " ".join(shlex.quote(a) for a in command() + ARGS)
    start = time.perf_counter()
    subprocess.run(tmux + ["new-session", "-d", "-x", str(SIZE[0]), "-y", str(SIZE[1]), "-s", "bench", line],
                   check=True)
    try:
        def capture() -> str:
            return subprocess.run(tmux + ["capture-pane", "-p", "-t", "bench"], capture_output=True,
                                  text=True).stdout

        return first_seen(capture, [FIRST_SCREEN, FIRST_PLAN], start=start)
    finally:
        subprocess.run(tmux + ["send-keys", "-t", "bench", "q"], capture_output=True)
        end = time.monotonic() + 10
        while time.monotonic() < end and subprocess.run(tmux + ["has-session", "-t", "bench"],
                                                        capture_output=True).returncode == 0:
            time.sleep(0.05)
        subprocess.run(tmux + ["kill-server"], capture_output=True)  # our private server only


def measure(runs: int) -> dict:
    if shutil.which("tmux") is None:
        raise SystemExit("bench.wizard_speed needs tmux")
    socket = f"trl-advisor-bench-{os.getpid()}"
    one_run(socket)  # warm-up
    results = [one_run(socket) for _ in range(runs)]
    screen = statistics.median(r[0] for r in results)
    plan = statistics.median(r[1] for r in results)
    return {"command": " ".join(["trl-advisor", *ARGS]), "terminal": f"tmux {SIZE[0]}x{SIZE[1]}", "runs": runs,
            "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()], "first_screen_seconds": round(screen, 3), "first_plan_seconds": round(plan, 3),
            "plan_after_screen_seconds": round(plan - screen, 3),
            "within_budget": screen <= BUDGET_SECONDS and plan - screen <= BUDGET_SECONDS,
            "runs_seconds": [[round(x, 3) for x in r] for r in results]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wizard_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    out = measure(args.runs)
    print(f"{out['command']} in {out['terminal']}, {out['cpus']} CPUs (load average "
          f"{', '.join(map(str, out['load_average']))}), median of {out['runs']} runs:")
    print(f"  first screen  {out['first_screen_seconds'] * 1000:.0f} ms after the command")
    print(f"  first plan    {out['first_plan_seconds'] * 1000:.0f} ms after the command "
          f"({out['plan_after_screen_seconds'] * 1000:.0f} ms after the first screen)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0 if out["within_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
