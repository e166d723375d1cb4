"""Compare the memory/speed model with measured runs, and fit its FITTED constants.

    python tests/model/calibrate.py RESULTS.jsonl [...]                       # errors per row and a summary
    python tests/model/calibrate.py RESULTS.jsonl --fit FRAGMENTATION=0.05,0.1,0.15 --fit LAUNCH_SECONDS=2e-5,3e-5
    python tests/model/calibrate.py RESULTS.jsonl SPOT.jsonl --split fit --coordinate MFU_CEILING,LAUNCH_SECONDS

Rows are flat records (tests/model/data/h200_spot.jsonl): the Request/Plan knobs (model, trainer, method, precision,
backend, zero, offload, grad_ckpt, liger, attn, seq_len, micro_batch, grad_accum, num_generations,
max_completion_len, ref_model, lora_r, beta), `status`, and the measurements peak_allocated_bytes,
peak_reserved_bytes, step_seconds_median; or benchmark records (bench/results, bench/README.md), flattened here:
knobs from `row`, measurements from `memory` and `timing`, `split` kept, LoRA dropout from `resolved.lora`, the last
record of a name counting. Flat records without a split count as "fit". An optional `gpu` names the catalogue GPU
(default H200); `lora_dropout` overrides advisor.model.memory.LORA_DROPOUT.

--fit searches one constant on its grid, minimizing the median |log(predicted / measured)| of the quantity it drives
(memory constants: peak allocated, except FRAGMENTATION / STATIC_SLACK: peak reserved; speed constants: step time).
--coordinate fits several constants of one quantity together by coordinate descent over multiplicative steps,
minimizing the mean |log(predicted / measured)| (the median of ~40 rows is flat along too many directions for a
joint fit); run from the current values it shows whether they are at the optimum.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from advisor.core.specs import GpuSpec, ModelSpec  # noqa: E402
from advisor.core.target import Target  # noqa: E402
from advisor.model import calibration as MC
from advisor.model import speed as S  # noqa: E402
from advisor.model import units as MU
from advisor.model.activations import fixed_length_batches
from advisor.model.bench_rows import plan_from_bench_row
from advisor.model.estimate import estimate_plan  # noqa: E402

MEASURED = {"peak_allocated": "peak_allocated_bytes", "peak_reserved": "peak_reserved_bytes",
            "step_seconds": "step_seconds_median"}
RESERVED_CONSTANTS = ("FRAGMENTATION", "STATIC_SLACK")


def flatten(record: dict) -> dict:
    """A benchmark record (bench/README.md) as a flat row; flat rows are returned unchanged."""
    if "row" not in record:
        return record
    mem = record.get("memory") or {}
    timing = record.get("timing") or {}
    lora = (record.get("resolved") or {}).get("lora") or {}
    return {**record["row"], "name": record["name"], "split": record.get("split") or record["row"].get("split"),
            "status": record.get("status"), "peak_allocated_bytes": mem.get("peak_allocated_bytes"),
            "peak_reserved_bytes": mem.get("peak_reserved_bytes"),
            "step_seconds_median": timing.get("median_step_seconds"), "lora_dropout": lora.get("lora_dropout")}


def load_rows(paths: Iterable[str | Path], split: str = "all") -> list[dict]:
    """The "ok" rows of the files (split "fit" / "holdout" / "all"; flat rows without a split are "fit"), less the
    spot runs with reentrant checkpointing."""
    rows: dict[str, dict] = {}
    steps: dict[str, list[float]] = {}
    for n, path in enumerate(paths):
        for i, line in enumerate(Path(path).read_text().splitlines()):
            line = line.strip()
            if line:
                row = flatten(json.loads(line))
                # benchmark files: the last measured record of a name counts, its step time the median over the
                # name's records in every file (bench/accuracy.py step_of_records); flat files keep every line
                bench = "split" in row and row.get("split")
                key = row["name"] if bench else f"{n}:{i}"
                if bench and row.get("status") == "ok" and row.get("step_seconds_median"):
                    steps.setdefault(key, []).append(float(row["step_seconds_median"]))
                if not bench or row.get("status") in ("ok", "oom") or key not in rows:
                    rows[key] = row
    for key, values in steps.items():
        rows[key] = {**rows[key], "step_seconds_median": statistics.median(values)}
    out = []
    for row in rows.values():
        if row.get("status", "ok") != "ok" or row.get("use_reentrant"):
            continue  # reentrant checkpointing is not a plan knob (TRL forces it only for ZeRO-3 + PEFT)
        if split != "all" and (row.get("split") or "fit") != split:
            continue
        out.append(row)
    return out


def resolve_model(model_id: str) -> ModelSpec:
    try:
        from advisor.catalog import resolve_model as lookup
    except ImportError:
        from bench.models import resolve as lookup
    return lookup(model_id)


def resolve_gpu(name: str) -> GpuSpec:
    from advisor.catalog import resolve_gpu as lookup

    return lookup(name)


@contextmanager
def overrides(row: dict):
    """Per-row settings the Plan does not carry (the LoRA dropout of the measured script)."""
    old = MU.LORA_DROPOUT
    if row.get("lora_dropout") is not None:
        MU.LORA_DROPOUT = float(row["lora_dropout"])
    try:
        yield
    finally:
        MU.LORA_DROPOUT = old


def predict(row: dict, *, models: dict | None = None, gpus: dict | None = None) -> dict[str, float]:
    """Predicted peak allocated, peak reserved and step seconds for one row."""
    models = {} if models is None else models
    gpus = {} if gpus is None else gpus
    mid = row["model"]
    key = (mid, row.get("layers"))
    if key not in models:
        spec = resolve_model(mid)
        # a reduced-depth row (the MoE rows) is predicted at its own depth, as bench.accuracy does
        models[key] = spec.with_(layers=int(row["layers"])) if row.get("layers") else spec
    gname = row.get("gpu", "H200")
    if gname not in gpus:
        gpus[gname] = resolve_gpu(gname)
    plan = plan_from_bench_row(row)
    target = Target(gpu=gpus[gname], gpus_per_node=plan.gpus_per_node, nodes=plan.nodes)
    with overrides(row), fixed_length_batches():  # benchmark rows all have one length (bench/worker.py)
        mem, spd = estimate_plan(models[key], plan, target)
    return {"peak_allocated": mem.per_gpu_peak_bytes, "peak_reserved": mem.per_gpu_reserved_bytes,
            "step_seconds": spd.step_seconds}


def errors(rows: list[dict]) -> list[dict]:
    """predicted / measured - 1 per row and quantity (None where not measured)."""
    models: dict = {}
    gpus: dict = {}
    out = []
    for row in rows:
        pred = predict(row, models=models, gpus=gpus)
        out.append({"name": row.get("name", ""), **{k: (pred[k] / row[v] - 1 if row.get(v) else None)
                                                    for k, v in MEASURED.items()}})
    return out


def summary(errs: list[dict]) -> dict[str, dict[str, float]]:
    out = {}
    for key in MEASURED:
        vals = [abs(e[key]) for e in errs if e[key] is not None]
        if vals:
            out[key] = {"n": len(vals), "median_abs": statistics.median(vals), "max_abs": max(vals)}
    return out


def score(rows: list[dict], key: str) -> float:
    vals = [abs(math.log1p(e[key])) for e in errors(rows) if e[key] is not None]
    return statistics.median(vals) if vals else float("inf")


def fit(rows: list[dict], name: str, grid: list[float]) -> tuple[float, float]:
    """Best grid value of one constant (left set to it) and its score."""
    module = MC if hasattr(MC, name) else S
    if not hasattr(module, name):
        raise SystemExit(f"no constant {name} in advisor.model.calibration or advisor.model.speed")
    key = "peak_reserved" if name in RESERVED_CONSTANTS else ("peak_allocated" if module is MC else "step_seconds")
    best = None
    for value in grid:
        setattr(module, name, value)
        s = score(rows, key)
        if best is None or s < best[1]:
            best = (value, s)
    setattr(module, name, best[0])
    return best


def quantity(name: str) -> str:
    module = MC if hasattr(MC, name) else S
    if not hasattr(module, name):
        raise SystemExit(f"no constant {name} in advisor.model.calibration or advisor.model.speed")
    return "peak_reserved" if name in RESERVED_CONSTANTS else ("peak_allocated" if module is MC else "step_seconds")


def mean_log_error(rows: list[dict], key: str) -> float:
    vals = [abs(math.log1p(e[key])) for e in errors(rows) if e[key] is not None]
    return sum(vals) / len(vals) if vals else float("inf")


COORDINATE_STEPS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 1.02, 1.05, 1.1, 1.2, 1.3, 1.5, 2.0)


def coordinate_fit(rows: list[dict], names: list[str], rounds: int = 4) -> tuple[dict[str, float], float]:
    """Coordinate descent over multiplicative steps of each constant (all driving one quantity), minimizing the
    mean |log(predicted / measured)|; the constants are left at the best values found."""
    keys = {quantity(n) for n in names}
    if len(keys) != 1:
        raise SystemExit(f"--coordinate constants must drive one quantity, these drive {sorted(keys)}")
    key = keys.pop()
    modules = {n: (MC if hasattr(MC, n) else S) for n in names}
    best = mean_log_error(rows, key)
    for _ in range(rounds):
        moved = False
        for n in names:
            v0 = getattr(modules[n], n)
            for f in COORDINATE_STEPS:
                setattr(modules[n], n, type(v0)(v0 * f))
                s = mean_log_error(rows, key)
                if s < best - 1e-9:
                    best, v0, moved = s, type(v0)(v0 * f), True
            setattr(modules[n], n, v0)
        if not moved:
            break
    return {n: getattr(modules[n], n) for n in names}, best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+")
    p.add_argument("--split", choices=("fit", "holdout", "all"), default="all")
    p.add_argument("--fit", action="append", default=[], metavar="NAME=v1,v2,...")
    p.add_argument("--coordinate", default="", metavar="NAME,NAME,...")
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args(argv)
    rows = load_rows(args.results, args.split)
    if args.coordinate:
        names = [n for n in args.coordinate.split(",") if n]
        start = {n: getattr(MC if hasattr(MC, n) else S, n) for n in names}
        start_score = mean_log_error(rows, quantity(names[0]))
        values, s = coordinate_fit(rows, names, args.rounds)
        print(f"mean |log error| {start_score:.4f} -> {s:.4f} over {len(rows)} rows")
        for n in names:
            change = values[n] / start[n] - 1 if start[n] else float("inf")
            print(f"{n} = {values[n]:g}" + ("  (unchanged)" if values[n] == start[n]
                                             else f"  (was {start[n]:g}, {change:+.1%})"))
    for spec in args.fit:
        name, _, values = spec.partition("=")
        value, s = fit(rows, name, [float(v) for v in values.split(",")])
        print(f"{name} = {value:g}  (median |log error| {s:.3f})")
    for e in errors(rows):
        cells = "  ".join(f"{k} {v:+6.1%}" if v is not None else f"{k}    n/a" for k, v in e.items() if k != "name")
        print(f"{e['name']:<40} {cells}")
    for key, st in summary(errors(rows)).items():
        print(f"{key}: n={st['n']} median |err| {st['median_abs']:.1%}, max {st['max_abs']:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
