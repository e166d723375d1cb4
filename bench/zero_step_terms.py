"""DeepSpeed ZeRO's optimizer step, derived from profiled steps: each ZeRO-2 row of RESULTS next to the same row
without DeepSpeed (bench/rows/zero-step-2026-12-03.json, `profile_step`: one step's CUDA kernels).

    python -m bench.zero_step_terms        # print the derivation and the three constants it gives

- DS_STEP_BYTES_PER_PARAM and DS_STEP_KERNEL_SECONDS_PER_TENSOR (advisor.model.speed): the kernel time ZeRO-2 adds,
  plus the step without DeepSpeed that it replaces (the model's optimizer_step for the plain row), fitted by least
  squares to trainable parameters / the elementwise rate and trainable tensors;
- DS_STEP_HOST_SECONDS_PER_TENSOR: the step less its kernel time (what the GPU waited for the host), ZeRO-2 less
  plain, per trainable tensor; the median over the records.

ZeRO-3's rows are printed, not fitted: their step adds ZeRO-3's fetch hooks (DS_FETCH_SECONDS) to the same optimizer
step.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from advisor.catalog import resolve_gpu, resolve_model
from advisor.core.target import Target
from advisor.model import dims as MD
from advisor.model import speed as S
from advisor.model import states as MS
from advisor.model.bench_rows import plan_from_bench_row

REPO = Path(__file__).resolve().parents[1]
RESULTS = ("bench/results/h200-2026-12-03-zero-step.jsonl",)
GPU_ID = "H200"


def _records(results: tuple[str, ...], root: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for rel in results:
        for line in (root / rel).read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if rec.get("status") == "ok" and rec.get("profile"):
                out[rec["name"]] = rec
    return out


def plain_twin(name: str) -> str:
    """The same row without DeepSpeed (the rows file names both)."""
    return name.replace("-z2-", "-single-").replace("-z3-", "-single-").removesuffix("-oc")


def pairs(results: tuple[str, ...] = RESULTS, root: Path = REPO) -> list[dict]:
    """Each ZeRO row with its plain twin: trainable parameters and tensors, the kernel time it adds plus the plain
    optimizer step the model counts, and the host gap it adds."""
    recs = _records(results, root)
    target = Target(gpu=resolve_gpu(GPU_ID), gpus_per_node=1, nodes=1)
    out = []
    for name in sorted(recs):
        twin = plain_twin(name)
        if twin == name or twin not in recs:
            continue
        zrec, prec = recs[name], recs[twin]
        row = zrec["row"]
        d = MD.dims(resolve_model(row["model"]))
        plan, plain = plan_from_bench_row(row), plan_from_bench_row(prec["row"])
        plain_opt = S.optimizer_step_seconds(d, plain, target, S.Precision.of(plain))

        def gap(rec):
            return rec["timing"]["median_step_seconds"] - rec["profile"]["kernel_s"]

        out.append({"name": name, "stage": row["zero"], "params": MS.trainable_params(d, plan),
                    "tensors": S.adapter_tensors(d, plan) or d.tensors,
                    "step_gpu_s": zrec["profile"]["kernel_s"] - prec["profile"]["kernel_s"] + plain_opt,
                    "host_gap_s": gap(zrec) - gap(prec),
                    "added_step_s": zrec["timing"]["median_step_seconds"] - prec["timing"]["median_step_seconds"]})
    return out


def fit(rows: list[dict], el_bw: float) -> tuple[float, float]:
    """Least squares of step_gpu_s on (params / el_bw, tensors), no intercept: (bytes per param, s per tensor)."""
    a11 = sum((r["params"] / el_bw) ** 2 for r in rows)
    a12 = sum(r["params"] / el_bw * r["tensors"] for r in rows)
    a22 = sum(r["tensors"] ** 2 for r in rows)
    b1 = sum(r["params"] / el_bw * r["step_gpu_s"] for r in rows)
    b2 = sum(r["tensors"] * r["step_gpu_s"] for r in rows)
    det = a11 * a22 - a12 * a12
    return (b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det


def derive(results: tuple[str, ...] = RESULTS, root: Path = REPO) -> dict[str, float]:
    rows = [r for r in pairs(results, root) if r["stage"] == 2]
    el_bw = S.elementwise_bw(Target(gpu=resolve_gpu(GPU_ID), gpus_per_node=1, nodes=1))
    per_byte, per_tensor = fit(rows, el_bw)
    host = statistics.median(r["host_gap_s"] / r["tensors"] for r in rows)
    return {"DS_STEP_BYTES_PER_PARAM": round(per_byte, 1), "DS_STEP_KERNEL_SECONDS_PER_TENSOR": float(f"{per_tensor:.3g}"),
            "DS_STEP_HOST_SECONDS_PER_TENSOR": float(f"{host:.2g}")}


def main() -> int:
    for r in pairs():
        print(f"{r['name']:52s} stage {r['stage']}  {r['params'] / 1e9:5.2f} B params  {r['tensors']:4d} tensors  "
              f"step GPU {r['step_gpu_s'] * 1e3:6.1f} ms  host gap {r['host_gap_s'] * 1e3:6.1f} ms  "
              f"step +{r['added_step_s'] * 1e3:5.1f} ms")
    for k, v in derive().items():
        print(f"{k} = {v:g} (in use: {getattr(S, k):g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
