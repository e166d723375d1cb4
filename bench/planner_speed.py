"""How long the plan search takes (CPU only).

    python -m bench.planner_speed [--repeats 7] [--json FILE]

For each case (the largest of the issue, 405B on 16 nodes x 8 H100, and a few others) the search runs once to warm
the caches (catalogue, rule registry), then `repeats` times; the figure is the median wall time of
advisor.search.search in this process (imports and the CLI not included: bench.cli_speed times whole commands).
`--json` writes the record the README quotes (bench/results/planner-speed-<date>.json). Not a test: timings vary
by machine and with its load, which the record notes (the load average before the runs).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from advisor.core.request import Request
from advisor.resolve import resolve_model, resolve_target
from advisor.search import search

CASES = {
    "405B, 16 nodes x 8 x H100": Request(model="405B", gpu="H100-80GB", gpus=8, nodes=16),
    "70B, 8 x H100": Request(model="70B", gpu="H100-80GB", gpus=8),
    "8B at 128k tokens, 8 x H100": Request(model="8B", gpu="H100-80GB", gpus=8, seq_len=131072),
    "7B GRPO, 8 x H100 (vLLM split searched)": Request(model="7B", trainer="grpo", gpu="H100-80GB", gpus=8),
    "0.5B, 1 x H200": Request(model="0.5B", gpu="H200", gpus=1),
}
REPO = Path(__file__).resolve().parents[1]


def measure_case(req: Request, repeats: int) -> dict:
    model, target = resolve_model(req), resolve_target(req)
    search(req, model, target)  # warm caches (catalogue, rule registry)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        decision = search(req, model, target)
        times.append(time.perf_counter() - t0)
    return {"median_ms": round(statistics.median(times) * 1e3, 1), "runs_ms": [round(t * 1e3, 1) for t in times],
            "estimates": decision.considered}


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def measure(repeats: int) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    from bench.wizard_speed import machine

    try:
        ours = version("trl-advisor")
    except PackageNotFoundError:
        ours = None
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    out = {"date": datetime.date.today().isoformat(), "repeats": repeats, "machine": machine(),
           "versions": {"python": platform.python_version(), "trl-advisor": ours,
                        "trl_advisor_commit": commit + (" (with uncommitted changes)" if commit and dirty else "")},
           "load_average_before": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
           "cases": {}}
    for name, req in CASES.items():
        out["cases"][name] = measure_case(req, repeats)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.planner_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed searches per case (default %(default)s)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.json:
        from bench.rows_file import new_output_problem

        problem = new_output_problem(args.json)  # a record is never replaced, and a bad folder fails before the runs
        if problem:
            parser.error(problem)
    result = measure(args.repeats)
    for name, r in result["cases"].items():
        sys.stdout.write(f"{name:42s} {r['median_ms']:7.1f} ms  ({r['estimates']} estimates)\n")
    if args.json:
        try:  # created, never replaced (the check above can race another writer)
            with Path(args.json).open("x", encoding="utf-8") as f:
                f.write(json.dumps(result, indent=2) + "\n")
        except OSError as exc:
            sys.stderr.write(f"python -m bench.planner_speed: cannot write {args.json}: {exc.strerror or exc}\n")
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
