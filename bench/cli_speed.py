"""How fast `trl-advisor generate` and `recommend` answer, next to a bare interpreter.

    python -m bench.cli_speed [--runs 5] [--json FILE]

Each command is started as a new process (imports included, as a user runs it), RUNS times after one warm-up run,
alternating with `python -c pass` so that drift of the machine's speed hits both alike; the figure is the median
wall time of each and their difference. The commands write their bundles into a temporary folder (--force).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "70B SFT, 8 x H100": ["--model", "70B", "--gpus", "8", "--gpu", "H100-80GB"],
    "8B SFT, 1 x RTX 4090": ["--model", "8B", "--gpus", "1", "--gpu", "RTX-4090"],
    "Qwen2.5-7B GRPO, 8 x H100": ["--model", "Qwen/Qwen2.5-7B", "--trainer", "grpo", "--gpus", "8", "--gpu",
                                  "H100-80GB"],
}
BUDGET_SECONDS = 0.300
"""The target: `generate` answers within 300 ms of a bare `python -c pass`."""
RECOMMEND_COMMANDS = {
    "recommend 8B SFT, 1B tokens, <= 16 GPUs": ["--model", "8B", "--trainer", "sft", "--tokens", "1000000000",
                                                "--max-gpus", "16"],
    "recommend Qwen3-8B GRPO, 500 steps, <= 16 GPUs": ["--model", "qwen3-8b", "--trainer", "grpo", "--steps", "500",
                                                       "--max-gpus", "16"],
}
RECOMMEND_BUDGET_SECONDS = 2.0
"""The target for `recommend` (issue: the 8B SFT example answers in under 2 s), wall time of the whole command."""


def _wall(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(runs: int) -> dict:
    bare = [sys.executable, "-c", "pass"]
    out: dict = {"python": sys.version.split()[0], "runs": runs, "budget_seconds": BUDGET_SECONDS, "commands": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for label, args in COMMANDS.items():
            cmd = [sys.executable, "-m", "advisor", "generate", *args, "--out", str(Path(tmp) / "b"), "--force"]
            _wall(cmd)  # warm-up: the page cache, the catalogue's first read
            ours, base = [], []
            for _ in range(runs):
                ours.append(_wall(cmd))
                base.append(_wall(bare))
            mo, mb = statistics.median(ours), statistics.median(base)
            out["commands"][label] = {"generate_seconds": round(mo, 4), "bare_python_seconds": round(mb, 4),
                                      "over_bare_seconds": round(mo - mb, 4), "within_budget": mo - mb <= BUDGET_SECONDS,
                                      "runs_seconds": [round(x, 4) for x in ours]}
        out["recommend_budget_seconds"] = RECOMMEND_BUDGET_SECONDS
        for label, args in RECOMMEND_COMMANDS.items():
            cmd = [sys.executable, "-m", "advisor", "recommend", *args]
            _wall(cmd)
            walls = sorted(_wall(cmd) for _ in range(runs))
            med = statistics.median(walls)
            out["commands"][label] = {"wall_seconds": round(med, 4), "within_budget": med <= RECOMMEND_BUDGET_SECONDS,
                                      "runs_seconds": [round(x, 4) for x in walls]}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cli_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    result = measure(args.runs)
    for label, r in result["commands"].items():
        if "wall_seconds" in r:
            sys.stdout.write(f"{label:<48} {r['wall_seconds']:.2f} s  ({'within' if r['within_budget'] else 'OVER'} "
                             f"{RECOMMEND_BUDGET_SECONDS:.0f} s)\n")
            continue
        sys.stdout.write(f"{label:<28} generate {r['generate_seconds'] * 1e3:6.0f} ms   python -c pass "
                         f"{r['bare_python_seconds'] * 1e3:4.0f} ms   over bare {r['over_bare_seconds'] * 1e3:5.0f} ms"
                         f"  ({'within' if r['within_budget'] else 'OVER'} {BUDGET_SECONDS * 1e3:.0f} ms)\n")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
