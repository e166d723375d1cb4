"""How soon the wizard shows its first screen, and then its first plan, in a real terminal (tmux).

    python -m bench.wizard_speed [--runs 5] [--scenario NAME ...] [--bytecode cached|as-is|both] [--json FILE]

Each run starts the command in a new detached tmux session of 100 x 32 on a private tmux server, and reads the
screen with `tmux capture-pane -p` every POLL_SECONDS. Two figures, both from the moment tmux is asked to start the
command (the server's own start counted in): the first screen (the tab bar is drawn) and the first plan (its
tokens/s are on screen; for bare `trl-advisor`, which has no model yet, the form's "choose a model"). One warm-up run
(page cache, bytecode), then the median and the worst of --runs. The reading's resolution is one poll plus one
capture-pane process (a few ms). Other work on the machine slows both figures (about twice at a load average of 5 on
2 cores): the load average before and after each scenario is recorded.

Scenarios (SCENARIOS): `catalog` (a catalogue GPU: no probe), `machine` (this machine as probed: on a machine
without GPUs, the built-in default target), `file` (a `probe --json` file of 8 x H100) and `bare` (`trl-advisor`
alone: the Training form is the first screen).

Bytecode: `cached` (default) runs with a private PYTHONPYCACHEPREFIX, written by the warm-up run, as an installed
trl-advisor runs (pip compiles on install; an editable checkout writes __pycache__ on its first run). `as-is` keeps the
environment as it is: with PYTHONDONTWRITEBYTECODE=1 set (as on the machine of 2026-12-01) the checkout's own
modules, tui.py among them (80 kB, about 60 ms), are compiled again at every start.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
H100_FILE = REPO / "tests" / "fixtures" / "hardware" / "h100_sxm_x8_nvlink.json"
SCENARIOS: dict[str, tuple[list[str], list[str]]] = {
    # name -> (arguments, the markers after the first screen's: the first plan on screen, then for bare
    # `trl-advisor` the whole Training form, whose first screen holds its first field only)
    "catalog": (["wizard", "--gpu", "H100-80GB", "--gpus", "8", "--model", "8B"], ["tokens/s"]),
    "machine": (["wizard", "--model", "8B"], ["tokens/s"]),
    "file": (["wizard", "--model", "8B", "--hardware", str(H100_FILE.relative_to(REPO))], ["tokens/s"]),
    "bare": ([], ["choose a model", "Remote code"]),
}
ARGS = SCENARIOS["catalog"][0]
"""The README's figure: `trl-advisor wizard --gpu H100-80GB --gpus 8 --model 8B`."""
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


def one_run(socket: str, args: list[str], markers: list[str], env: dict[str, str]) -> list[float]:
    tmux = ["tmux", "-L", socket, "-f", os.devnull]
    line = "cd " + shlex.quote(str(REPO)) + " && exec " + " ".join(shlex.quote(a) for a in command() + args)
    start = time.perf_counter()
    # a new server for each run: it (and so the command) gets `env`
    subprocess.run(tmux + ["new-session", "-d", "-x", str(SIZE[0]), "-y", str(SIZE[1]), "-s", "bench", line],
                   check=True, env=env)
    try:
        def capture() -> str:
            return subprocess.run(tmux + ["capture-pane", "-p", "-t", "bench"], capture_output=True,
                                  text=True).stdout

        return first_seen(capture, [FIRST_SCREEN, *markers], start=start)
    finally:
        subprocess.run(tmux + ["send-keys", "-t", "bench", "C-q"], capture_output=True)
        end = time.monotonic() + 10
        while time.monotonic() < end and subprocess.run(tmux + ["has-session", "-t", "bench"],
                                                        capture_output=True).returncode == 0:
            time.sleep(0.05)
        subprocess.run(tmux + ["kill-server"], capture_output=True)  # our private server only


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure_scenario(name: str, runs: int, env: dict[str, str]) -> dict:
    args, markers = SCENARIOS[name]
    socket = f"trl-advisor-bench-{os.getpid()}"
    load_before = _load()
    one_run(socket, args, markers, env)  # warm-up
    results = [one_run(socket, args, markers, env) for _ in range(runs)]
    screen = statistics.median(r[0] for r in results)
    plan = statistics.median(r[1] for r in results)
    after = statistics.median(r[1] - r[0] for r in results)
    form = {"form_complete_seconds": round(statistics.median(r[2] for r in results), 3)} if len(markers) > 1 else {}
    return {"command": " ".join(["trl-advisor", *args]), "markers": [FIRST_SCREEN, *markers], "runs": runs,
            "first_screen_seconds": round(screen, 3), "first_plan_seconds": round(plan, 3),
            "plan_after_screen_seconds": round(after, 3),
            "worst_first_screen_seconds": round(max(r[0] for r in results), 3),
            "worst_plan_after_screen_seconds": round(max(r[1] - r[0] for r in results), 3),
            **form, "within_budget": screen <= BUDGET_SECONDS and after <= BUDGET_SECONDS,
            "load_average_before": load_before, "load_average_after": _load(),
            "runs_seconds": [[round(x, 3) for x in r] for r in results]}


def _run_text(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine() -> dict:
    """What the figures were measured on."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    mem = next((int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal:")), None) if Path("/proc/meminfo").exists() else None
    distro = ""
    if Path("/etc/os-release").exists():
        distro = next((line.split("=", 1)[1].strip('"') for line in Path("/etc/os-release").read_text().splitlines()
                       if line.startswith("PRETTY_NAME=")), "")
    return {"cpu": cpu, "cpus": os.cpu_count(), "memory_gib": round(mem / 2**30, 1) if mem else None,
            "kernel": platform.release(), "os": distro, "machine": platform.machine()}


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "tmux": _run_text(["tmux", "-V"]).removeprefix("tmux ")}
    for package in ("textual", "rich", "trl-advisor"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = None
    commit = _run_text(["git", "rev-parse", "--short", "HEAD"])
    dirty = _run_text(["git", "status", "--porcelain", "--untracked-files=no"])
    out["trl_advisor_commit"] = commit + (" (with uncommitted changes)" if commit and dirty else "")
    return out


def environment(bytecode: str, cache_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
    env["TERM"] = "xterm-256color"
    if bytecode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache_dir
    return env


def measure(runs: int, scenarios: list[str] | None = None, bytecode: str = "cached") -> dict:
    """The figures of every scenario, for one bytecode mode or (`both`) each."""
    if shutil.which("tmux") is None:
        raise SystemExit("bench.wizard_speed needs tmux")
    out = {"date": datetime.date.today().isoformat(), "terminal": f"tmux {SIZE[0]}x{SIZE[1]}", "runs": runs,
           "budget_seconds": BUDGET_SECONDS, "machine": machine(), "versions": versions(),
           "PYTHONDONTWRITEBYTECODE_here": os.environ.get("PYTHONDONTWRITEBYTECODE"), "bytecode": {}}
    for mode in ("cached", "as-is") if bytecode == "both" else (bytecode,):
        with tempfile.TemporaryDirectory(prefix="trl-advisor-pyc-") as cache:
            env = environment(mode, cache)
            out["bytecode"][mode] = {name: measure_scenario(name, runs, env) for name in scenarios or list(SCENARIOS)}
    out["within_budget"] = all(s["within_budget"] for mode in out["bytecode"].values() for s in mode.values())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wizard_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scenario", action="append", choices=list(SCENARIOS), help="default: all of them")
    parser.add_argument("--bytecode", choices=("cached", "as-is", "both"), default="cached")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    out = measure(args.runs, args.scenario, args.bytecode)
    m = out["machine"]
    for mode, scenarios in out["bytecode"].items():
        print(f"{out['terminal']}, {m['cpus']} CPUs ({m['cpu']}), bytecode {mode}, median (worst) of {args.runs} runs:")
        for name, s in scenarios.items():
            print(f"  {name:8} first screen {s['first_screen_seconds'] * 1000:5.0f} ms "
                  f"({s['worst_first_screen_seconds'] * 1000:.0f}), first plan "
                  f"{s['plan_after_screen_seconds'] * 1000:5.0f} ms after it "
                  f"({s['worst_plan_after_screen_seconds'] * 1000:.0f})"
                  + (f", whole form {s['form_complete_seconds'] * 1000:.0f} ms" if "form_complete_seconds" in s else "")
                  + f"   load {s['load_average_before'][0]}"
                  f"-{s['load_average_after'][0]}   {s['command']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0 if out["within_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
