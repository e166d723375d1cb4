"""What batch shapes cost a bundle on rows of mixed lengths, read off bench/bundle_shapes.sh's records.

    python -m bench.bundle_shapes [RESULTS.jsonl]

Each record is one bundle run (train.py's per-step wall seconds): an SFT bundle with cuDNN attention on, off, and on
with its batches padded to a multiple of 64 tokens; a GRPO bundle without vLLM with cuDNN attention on and off inside
transformers' generate (RESULTS). AS_GENERATED holds a later call's runs of the bundles as generated then (SFT padded
to 64; GRPO padded to 64, its prompts and completions apart, and generating without cuDNN attention) beside the same
bundles edited back to no multiple, and the GRPO one also back to cuDNN attention in generate. The bundle generator
quotes these totals (advisor/bundle/render.py SHAPE_MULTIPLE and pad_reason, train.py's
generate_without_cudnn_attention, the bundle README); tests/bench/test_bundle_shapes.py ties the quotes to the files.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = "bench/results/bundle-shapes-h100-2026-12-06.jsonl"
AS_GENERATED = "bench/results/bundle-shapes-h100-2026-12-06-as-generated.jsonl"
"""One H100 call, one run per case: sft-as-generated, sft-nopad (stopped by the call's time limit at 55 of 60
steps: compare first_steps_s over 55), grpo-as-generated, grpo-nopad, grpo-cudnn."""
SDPA_PROBES = ("bench/results/sdpa-probe-h100-2026-12-06-llama-3.2-1b.json",
               "bench/results/sdpa-probe-h100-2026-12-06-qwen2.5-1.5b.json")
"""bench/sdpa_probe.py's records: what turning cuDNN attention off costs where a shape repeats."""
SHAPE_PASSES = {"cuDNN attention": "bench/results/shape-probe-real-h100-2026-12-06-cudnn.json",
                "without it": "bench/results/shape-probe-real-h100-2026-12-06-nocudnn.json",
                "cuDNN attention, widths rounded up to a multiple of 64":
                    "bench/results/shape-probe-real-h100-2026-12-06-pad64.json"}
"""bench/shape_probe.py on one machine in one call: two warm-up calls at 512, then 16 random widths of 300-512 twice
(the first pass new to the process, the second seen)."""
PASS_WIDTHS = 16
WARM_STEPS = 2
"""Steps left out of the steady median: the first pays the process's own warm-up (allocator, kernels)."""


def summary(path: str = RESULTS, root: Path = REPO, first: int | None = None) -> dict[str, dict]:
    """{case: {steps, total_s, first_steps_s, steady_median_s, last10_median_s, peak_allocated_gib}}; first_steps_s
    sums the first `first` steps (every step without it), for runs of unequal length."""
    out = {}
    for line in (root / path).read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        s = r["step_seconds"]
        out[r["case"]] = {"steps": len(s), "total_s": sum(s), "first_steps_s": sum(s[:first]),
                          "steady_median_s": statistics.median(s[WARM_STEPS:]),
                          "last10_median_s": statistics.median(s[-10:]),
                          "peak_allocated_gib": r["peak_allocated_bytes"] / 2**30, "gpu": r["gpu"]}
    return out


def sdpa_costs(probes: tuple[str, ...] = SDPA_PROBES, root: Path = REPO) -> list[dict]:
    """Per probe and case (forward + backward at a width and mask, generate): the median seconds with cuDNN
    attention and without, and without / with - 1."""
    out = []
    for rel in probes:
        d = json.loads((root / rel).read_text(encoding="utf-8"))
        by = {(r["case"], r["width"], r["mask"], r["cudnn_sdp"]): r["median_s"] for r in d["rows"]}
        for (case, width, mask, cudnn), on in by.items():
            off = by.get((case, width, mask, False))
            if cudnn and off is not None:
                out.append({"model": d["rows"][0]["model"], "gpu": d["gpu"], "case": case, "width": width,
                            "mask": mask, "with_s": on, "without_s": off, "change": off / on - 1})
    return out


def width_passes(files: dict[str, str] = SHAPE_PASSES, root: Path = REPO) -> dict[str, dict]:
    """{variant: {first_s, again_s}}: generate + forward + backward seconds summed over the first pass of the random
    widths (new to the process) and over the second (the same widths again)."""
    out = {}
    for variant, rel in files.items():
        rows = json.loads((root / rel).read_text(encoding="utf-8"))["rows"]
        calls = [r["generate_s"] + r["forward_backward_s"] for r in rows[WARM_STEPS:]]
        out[variant] = {"first_s": sum(calls[:PASS_WIDTHS]), "again_s": sum(calls[PASS_WIDTHS:2 * PASS_WIDTHS])}
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for path in args[:1] or [RESULTS, AS_GENERATED]:
        print(path)
        for case, s in summary(path).items():
            print(f"  {case}: {s['steps']} steps, {s['total_s']:.1f} s in all, steady median "
                  f"{s['steady_median_s']:.3f} s, last 10 {s['last10_median_s']:.3f} s, peak "
                  f"{s['peak_allocated_gib']:.2f} GiB ({s['gpu']})")
    for variant, p in width_passes().items():
        print(f"shape probe, {variant}: {p['first_s']:.1f} s at new widths, {p['again_s']:.1f} s at the same again")
    for c in sdpa_costs():
        print(f"{c['model']} {c['case']} {c['width']} {c['mask']}: {c['with_s']:.3f} s with cuDNN attention, "
              f"{c['without_s']:.3f} s without ({c['change']:+.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
