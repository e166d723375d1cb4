"""The reference bundles: canonical scenarios whose bundles are committed under generated/reference/, so that every
change to what users run is a visible diff. `python -m advisor.bundle.references [NAME ...]` rewrites them through
the `trl-advisor` command line (all of them when no name is given)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REFERENCE_DIR = "generated/reference"

REFERENCE_SCENARIOS: dict[str, list[str]] = {
    "sft-8b-qlora-1x4090": ["--model", "8B", "--trainer", "sft", "--method", "qlora", "--gpu", "RTX-4090",
                            "--gpus", "1"],
    "sft-8b-full-1xh100": ["--model", "8B", "--trainer", "sft", "--method", "full", "--gpu", "H100-80GB",
                           "--gpus", "1"],
    "sft-70b-8xh100": ["--model", "70B", "--trainer", "sft", "--gpu", "H100-80GB", "--gpus", "8"],
    "sft-8b-128k-ulysses-8xh100": ["--model", "8B", "--trainer", "sft", "--seq-len", "131072", "--sp-size", "8",
                                   "--attn", "flash_attention_2", "--gpu", "H100-80GB", "--gpus", "8"],
    "dpo-8b-lora-2xa100": ["--model", "8B", "--trainer", "dpo", "--method", "lora", "--gpu", "A100-80GB",
                           "--gpus", "2"],
    "grpo-7b-vllm-server-8xh100": ["--model", "7B", "--trainer", "grpo", "--vllm", "server", "--gpu", "H100-80GB",
                                   "--gpus", "8"],
    "grpo-1.5b-vllm-colocate-1xh100": ["--model", "1.5B", "--trainer", "grpo", "--vllm", "colocate",
                                       "--gpu", "H100-80GB", "--gpus", "1"],
    "sft-70b-2x8xh100-slurm": ["--model", "70B", "--trainer", "sft", "--gpu", "H100-80GB", "--gpus", "8",
                               "--nodes", "2"],
}
"""Canonical scenarios as `trl-advisor generate` arguments; their bundles live in generated/reference/<name>/."""


def generate_reference(name: str, cwd: str | Path) -> subprocess.CompletedProcess:
    """Run `trl-advisor generate <scenario> --out generated/reference/<name> --force` in cwd (relative --out, so
    plan.json's "out" is the same wherever it runs)."""
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(repo) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "advisor", "generate", *REFERENCE_SCENARIOS[name],
           "--out", f"{REFERENCE_DIR}/{name}", "--force"]
    return subprocess.run(cmd, cwd=str(cwd), env=env, capture_output=True, text=True)


def regen_references(names: list[str] | None = None) -> int:
    repo = Path(__file__).resolve().parents[2]
    status = 0
    for name in names or list(REFERENCE_SCENARIOS):
        proc = generate_reference(name, repo)
        if proc.returncode != 0:
            sys.stderr.write(f"{name}: trl-advisor generate failed ({proc.returncode}):\n{proc.stderr}\n")
            status = 1
        else:
            sys.stderr.write(f"{name}: wrote {REFERENCE_DIR}/{name}\n")
    return status


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m advisor.bundle.references",
                                     description=f"Rewrite {REFERENCE_DIR}/<name>/ through the trl-advisor CLI.")
    parser.add_argument("names", nargs="*", metavar="NAME", help="scenarios to rewrite (default: all)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in REFERENCE_SCENARIOS]
    if unknown:
        sys.stderr.write(f"error: unknown reference scenario {unknown[0]!r}\n"
                         f"hint: one of {', '.join(REFERENCE_SCENARIOS)}\n")
        return 2
    return regen_references(args.names or None)


if __name__ == "__main__":
    raise SystemExit(main())
