"""Kill `trl-advisor generate --force` at random moments and count what is left behind.

    python -m bench.kill_writes [--runs 250] [--out FILE.json]

Each run replaces an existing bundle, next to a folder of the user's, and is sent SIGINT, SIGTERM or SIGKILL after a
random delay. After each kill:
no work folder of ours may remain once the next write has run (SIGKILL cannot be caught: the next write sweeps it),
the bundle folder is either the old one or the new one and complete, and the user's files are untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GENERATE = ["-m", "advisor", "generate", "--model", "8B", "--gpus", "8", "--nodes", "2", "--gpu", "H100-80GB"]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def _bundle_ok(folder: Path) -> bool:
    return (folder / "plan.json").is_file() and (folder / "train.py").is_file() and (folder / "launch.sh").is_file()


def run(runs: int, seed: int) -> dict:
    rng = random.Random(seed)
    counts = {"runs": runs, "killed": 0, "finished_before_signal": 0, "staging_left_after_next_write": 0,
              "bundle_incomplete": 0, "user_files_lost": 0, "by_signal": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        user = root / "mine"  # the user's own folder beside the bundles: must never change
        user.mkdir()
        (user / "thesis.tex").write_text("keep")
        out = root / "bundle"
        subprocess.run([sys.executable, *GENERATE, "--out", str(out)], check=True, capture_output=True)
        for _ in range(runs):
            sig = rng.choice(SIGNALS)
            proc = subprocess.Popen([sys.executable, *GENERATE, "--out", str(out), "--force"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.05, 0.6))  # start-up is ~0.3 s: kills land before, during and after the write
            if proc.poll() is None:
                proc.send_signal(sig)
                counts["killed"] += 1
                counts["by_signal"][sig.name] = counts["by_signal"].get(sig.name, 0) + 1
            else:
                counts["finished_before_signal"] += 1
            proc.wait()
            if not _bundle_ok(out):
                counts["bundle_incomplete"] += 1
            # the next write sweeps what a SIGKILL left; then nothing of ours may remain
            subprocess.run([sys.executable, *GENERATE, "--out", str(out), "--force"], capture_output=True)
            left = [p.name for p in root.iterdir() if p.name.startswith(".tla-")]
            counts["staging_left_after_next_write"] += len(left)
            if (user / "thesis.tex").read_text() != "keep":
                counts["user_files_lost"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kill_writes", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the counts as JSON here")
    args = parser.parse_args(argv)
    counts = run(args.runs, args.seed)
    counts["python"] = sys.version.split()[0]
    text = json.dumps(counts, indent=2, sort_keys=True) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return 0 if not (counts["staging_left_after_next_write"] or counts["bundle_incomplete"]
                     or counts["user_files_lost"]) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
