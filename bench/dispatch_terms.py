"""Host-side kernel counts and costs read off bench/dispatch_probe.py's records, next to the speed model's constants
(not used by the model yet: tests/model/test_dispatch_terms.py says why).

A tiny batch (one sequence of 32 tokens) leaves every kernel's GPU work below its launch, so its wall time is the
host's dispatch, and its profile counts the kernels launched. From the probe files:
- KERNELS_FWD_PER_LAYER, KERNELS_BWD_PER_LAYER and MICRO_BATCH_KERNELS: the kernels of the Qwen2.5 full fine-tunes
  (three depths of one family) against their layer count, a straight line per phase; its intercept less TRL's fused
  head's kernels at one tile is what a micro-batch launches outside its layers;
- LORA_KERNELS_PER_LINEAR: a LoRA case's kernels less the same model's full fine-tune's, per adapted Linear;
- LAUNCH_SECONDS: the tiny step's wall time per kernel launched, median over the cases without Liger;
- LIGER_KERNELS_FWD_PER_LAYER / _BWD_: Liger's Triton launches cost the host more than an eager op, so a Liger layer
  counts the launches its host time is worth: the phase's wall time over LAUNCH_SECONDS, less the kernels outside
  the layers, per layer;
- CKPT_LAYER_SECONDS and CKPT_FORWARD_SHARE: what transformers' gradient checkpointing adds to the tiny step per
  layer beyond the recomputed forward's launches (its own host work: torch.utils.checkpoint's saved-tensor hooks and
  recompute bookkeeping), and the part of it paid in the forward, median over the full fine-tunes without Liger.

    python -m bench.dispatch_terms          # the derived values next to the constants in use
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROBES = ("bench/results/dispatch-probe-h200-2026-12-02-1.json", "bench/results/dispatch-probe-h200-2026-12-02-2.json")
"""Two machines of 2026-12-02. The first ran the probe's first version, which profiled each phase right after timing
it; the second times every phase before the first profile. Their medians agree (25.9 and 25.0 us per kernel)."""
LINE_FAMILY = "qwen2.5-"
"""The family whose depths give the per-layer line (0.5B, 1.5B, 3B: 24, 28, 36 layers)."""


def load(paths: tuple[str, ...] = PROBES, root: Path = REPO) -> list[dict[str, Any]]:
    """Every case of every probe file, without the ones that failed."""
    out = []
    for p in paths:
        out += [c for c in json.loads((root / p).read_text())["cases"] if "error" not in c]
    return out


def _kernels(case: dict[str, Any], label: str = "no_ckpt") -> tuple[int, int]:
    """(forward, backward) kernels of the tiny batch."""
    t = case[label]["tiny"]
    return t["forward"]["kernels"], t["step"]["kernels"] - t["forward"]["kernels"]


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares intercept and slope."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


def _head_kernels_at_one_tile() -> tuple[int, int]:
    from advisor.model import speed as S

    return S.HEAD_KERNELS_PER_TILE, S.HEAD_KERNELS_PER_TILE


def _linears(model_id: str) -> int:
    from advisor.catalog import resolve_model
    from advisor.model import dims as MD

    return MD.dims(resolve_model(model_id)).linears_per_layer


def kernel_counts(cases: list[dict[str, Any]]) -> dict[str, Any]:
    line = [c for c in cases if c["model"].startswith(LINE_FAMILY) and c["method"] == "full"]
    fwd = _line([(c["layers"], _kernels(c)[0]) for c in line])
    bwd = _line([(c["layers"], _kernels(c)[1]) for c in line])
    hf, hb = _head_kernels_at_one_tile()
    out: dict[str, Any] = {"KERNELS_FWD_PER_LAYER": round(fwd[1]), "KERNELS_BWD_PER_LAYER": round(bwd[1]),
                           "MICRO_BATCH_KERNELS": (round(fwd[0]) - hf, round(bwd[0]) - hb)}
    full = {c["model"]: _kernels(c) for c in cases if c["method"] == "full"}
    per = [[], []]
    for c in cases:
        if c["method"] == "lora" and c["model"] in full:
            n = c["layers"] * _linears(c["model"])
            for i in (0, 1):
                per[i].append((_kernels(c)[i] - full[c["model"]][i]) / n)
    if all(per):
        out["LORA_KERNELS_PER_LINEAR"] = tuple(round(statistics.median(p)) for p in per)
    return out


def launch_seconds(cases: list[dict[str, Any]]) -> float:
    per = [c["no_ckpt"]["tiny"]["step_s"] / c["no_ckpt"]["tiny"]["step"]["kernels"] for c in cases
           if not c["method"].endswith("-liger")]
    return statistics.median(per)


def liger_kernels(cases: list[dict[str, Any]], launch: float, fixed: tuple[int, int]) -> tuple[int, int]:
    hf, hb = _head_kernels_at_one_tile()
    fwd, bwd = [], []
    for c in cases:
        if c["method"] != "full-liger":
            continue
        t = c["no_ckpt"]["tiny"]
        fwd.append((t["forward_s"] / launch - fixed[0] - hf) / c["layers"])
        bwd.append(((t["step_s"] - t["forward_s"]) / launch - fixed[1] - hb) / c["layers"])
    return round(statistics.median(fwd)), round(statistics.median(bwd))


def checkpointing(cases: list[dict[str, Any]], launch: float) -> list[dict[str, Any]]:
    """Per full fine-tune without Liger: checkpointing's own host seconds per layer (the tiny step with it less
    without it, less the recomputed forward's launches) and the part of them in the forward."""
    out = []
    for c in cases:
        if c["method"] != "full":
            continue
        n, k = c["no_ckpt"]["tiny"], c["ckpt"]["tiny"]
        recompute = (k["step"]["kernels"] - n["step"]["kernels"]) * launch
        total = (k["step_s"] - n["step_s"] - recompute) / c["layers"]
        forward = (k["forward_s"] - n["forward_s"]) / c["layers"]
        out.append({"model": c["model"], "seq_len": c["seq_len"], "micro_batch": c["micro_batch"],
                    "per_layer_s": total, "forward_per_layer_s": forward})
    return out


def derived(cases: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    cases = load() if cases is None else cases
    out = kernel_counts(cases)
    launch = launch_seconds(cases)
    out["LAUNCH_SECONDS"] = launch
    out["LIGER_KERNELS_FWD_PER_LAYER"], out["LIGER_KERNELS_BWD_PER_LAYER"] = liger_kernels(
        cases, launch, out["MICRO_BATCH_KERNELS"])
    ck = checkpointing(cases, launch)
    per_layer = statistics.median(r["per_layer_s"] for r in ck)
    out["CKPT_LAYER_SECONDS"] = per_layer
    out["CKPT_FORWARD_SHARE"] = statistics.median(r["forward_per_layer_s"] for r in ck) / per_layer
    return out


def model_kernels(case: dict[str, Any], label: str = "no_ckpt", size: str = "tiny") -> int:
    """The speed model's kernel count of one probe case (what LAUNCH_SECONDS multiplies)."""
    from advisor.catalog import resolve_gpu, resolve_model
    from advisor.core.target import Target
    from advisor.model import dims as MD
    from advisor.model import speed as S
    from advisor.model.bench_rows import plan_from_bench_row
    from bench.matrix import row

    seq, mb = (case["tiny"]["seq_len"], case["tiny"]["micro_batch"]) if size == "tiny" else (case["seq_len"],
                                                                                             case["micro_batch"])
    r = row(case["model"], method=case["method"].split("-")[0], ckpt=label == "ckpt", seq=seq, mb=mb,
            liger=case["method"].endswith("-liger"))
    model = resolve_model(case["model"])
    plan = plan_from_bench_row(r)
    target = Target(gpu=resolve_gpu("H200"), gpus_per_node=1, nodes=1)
    m = S.micro_batch_times(MD.dims(model), model, plan, target, MD.Precision.of(plan))
    ckpt = MD.dims(model).L * S.CKPT_LAYER_SECONDS if label == "ckpt" else 0.0
    return round((m["dispatch"] - ckpt) / S.LAUNCH_SECONDS)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv:
        print("usage: python -m bench.dispatch_terms  (takes no arguments)", file=sys.stderr)
        return 2
    from advisor.model import speed as S

    cases = load()
    for name, value in derived(cases).items():
        print(f"{name:30s} derived {value!s:26.26} in use {getattr(S, name, None)}")
    for r in checkpointing(cases, launch_seconds(cases)):
        print(f"  checkpointing {r['model']:14s} s{r['seq_len']} b{r['micro_batch']}: "
              f"{r['per_layer_s'] * 1e3:.2f} ms per layer, {r['forward_per_layer_s'] * 1e3:.2f} in the forward")
    for c in cases:
        if c["method"].endswith("-liger"):
            continue
        for label in ("no_ckpt", "ckpt"):
            got = c[label]["tiny"]["step"]["kernels"]
            print(f"  kernels {c['model']:14s} {c['method']:5s} {label:7s}: measured {got}, model "
                  f"{model_kernels(c, label)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
