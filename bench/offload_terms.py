"""DeepSpeed's CPU optimizer step per parameter, read off the benchmark's ZeRO optimizer-offload rows.

An offload row's step is the GPU's micro-batches plus the CPU optimizer (advisor.model.speed.offload_seconds), which
takes cpu_optimizer_seconds_per_param(cores) = (CPU_ADAM_SERIAL_NS + CPU_ADAM_CORE_NS / cores) ns per fp32 parameter
on a host with `cores` usable CPUs. Each run, predicted on the CPUs its records name (bench.accuracy.record_cpu_cores),
implies the CPU step per parameter that makes its predicted step equal its measured one: the rest of the step is
predicted by the model's other terms, so it is a residual, as good as those terms on the run.
- CPU_ADAM_CORE_NS (core_term): the same rows run on one host with all 16 of its CPUs and then with 8 (taskset), in
  one hour (CORE_PAIRS): the rest of the step is the same on both, so the difference per parameter over
  (1/8 - 1/16) is the part the cores share, free of the rest's error; the median over the pairs.
- CPU_ADAM_SERIAL_NS (serial_term): each record's implied ns per parameter less CPU_ADAM_CORE_NS / its CPUs, the
  median per host (a results file is one machine in one session), then the median over the hosts. The CPU step
  follows the host, and hosts of one GPU kind differ by up to twice, so this term is held out by host, not by row:
  leave_one_host_out predicts each host's records from the others' (docs/accuracy.md; tests/model/
  test_offload_terms.py).

    python -m bench.offload_terms       # each offload run's implied CPU step next to the constants in use
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

from advisor.model import speed as S

CORE_PAIRS = (("bench/results/h200-2026-12-02-offload-16cpu.jsonl", "bench/results/h200-2026-12-02-offload-8cpu.jsonl"),)
"""(all CPUs, fewer CPUs) results files of the same rows on one host (bench/rows/offload-cores-2026-12-02.json)."""


def implied_ns(measured_seconds: float, predicted_seconds: float, cpu_seconds: float, cores: int) -> float | None:
    """The CPU step per parameter (ns) that makes a run's predicted step equal its measured one: the model's CPU part
    is cpu_seconds at cpu_optimizer_seconds_per_param(cores), so the needed share of it scales that. None when the
    rest of the step already takes at least the measured time (no CPU time left to explain)."""
    needed = measured_seconds - (predicted_seconds - cpu_seconds)
    if cpu_seconds <= 0 or needed <= 0:
        return None
    return S.cpu_optimizer_seconds_per_param(cores) * 1e9 * needed / cpu_seconds


def base_name(name: str) -> str:
    """A run's configuration name without its host suffix (bench.accuracy.host_run_name)."""
    return name.split("@", 1)[0]


def offload_rows(prepared) -> list[dict[str, Any]]:
    """Every prepared benchmark run (bench.accuracy._prepared) with a CPU optimizer: its split, CPUs, measured and
    predicted step, CPU seconds and implied ns per parameter, and its records by results file."""
    out = []
    for e, plan, target, mem in prepared:
        if plan.offload == "none":
            continue
        spd = S.estimate_speed(e.model, plan, target, mem)
        cpu = spd.breakdown["cpu_adam"]
        cores = target.cpu_cores or S.DEFAULT_CPU_CORES
        out.append({"name": e.run.name, "base": base_name(e.run.name), "split": e.run.split,
                    "cores": target.cpu_cores, "stage": plan.zero_stage, "measured": e.run.step_seconds,
                    "predicted": spd.step_seconds, "cpu": cpu, "rest": spd.step_seconds - cpu,
                    "ns": implied_ns(e.run.step_seconds, spd.step_seconds, cpu, cores),
                    "records": dict(zip(e.run.step_files, e.run.step_records, strict=False))})
    return out


def core_pairs(rows: list[dict[str, Any]], pairs=CORE_PAIRS) -> list[dict[str, Any]]:
    """Each configuration measured in both files of a pair: its CPUs, step and implied ns per parameter on each."""
    out = []
    for many_file, few_file in pairs:
        many = {r["base"]: r for r in rows if many_file in r["records"]}
        few = {r["base"]: r for r in rows if few_file in r["records"]}
        for base in sorted(set(many) & set(few)):
            a, b = many[base], few[base]
            if not (a["cores"] and b["cores"]) or a["cores"] == b["cores"]:
                continue
            ns = []
            for r, rel in ((a, many_file), (b, few_file)):
                ns.append(implied_ns(r["records"][rel], r["predicted"], r["cpu"], r["cores"]))
            if None in ns:
                continue
            out.append({"base": base, "cores": (a["cores"], b["cores"]),
                        "step": (a["records"][many_file], b["records"][few_file]), "ns": tuple(ns),
                        "core_ns": (ns[1] - ns[0]) / (1 / b["cores"] - 1 / a["cores"])})
    return out


def core_term(rows: list[dict[str, Any]]) -> float | None:
    """CPU_ADAM_CORE_NS: the median over the pairs of their ns x cores (None without a pair)."""
    got = [p["core_ns"] for p in core_pairs(rows)]
    return statistics.median(got) if got else None


def record_points(rows: list[dict[str, Any]], core_ns: float) -> list[dict[str, Any]]:
    """Every measured record of every offload run: its results file (one machine, one session), run, split, step, and
    the serial part it implies: implied ns per parameter less core_ns / its CPUs (None where the rest of the step
    already takes the measured time)."""
    out = []
    for r in rows:
        cores = r["cores"] or S.DEFAULT_CPU_CORES
        for rel, step in r["records"].items():
            ns = implied_ns(step, r["predicted"], r["cpu"], cores)
            out.append({"file": rel, "run": r, "step": step,
                        "serial": ns - core_ns / cores if ns is not None else None})
    return out


def serial_term(rows: list[dict[str, Any]], core_ns: float, exclude: str | None = None) -> float | None:
    """CPU_ADAM_SERIAL_NS: the median over the hosts (results files) of each host's median serial part, `exclude`
    left out. Hosts of one GPU kind differ here by up to twice (docs/accuracy.md), so every host counts once however
    many rows it ran, and leave_one_host_out holds each host out in turn."""
    per_file: dict[str, list[float]] = {}
    for p in record_points(rows, core_ns):
        if p["serial"] is not None and p["file"] != exclude:
            per_file.setdefault(p["file"], []).append(p["serial"])
    medians = [statistics.median(v) for v in per_file.values()]
    return statistics.median(medians) if medians else None


def leave_one_host_out(rows: list[dict[str, Any]], core_ns: float) -> list[dict[str, Any]]:
    """Each host's offload records predicted with the serial part derived from the other hosts: the run's predicted
    step with its CPU part rescaled to that serial part. core_ns is held (it comes from one host's pairs)."""
    out = []
    for rel in sorted({p["file"] for p in record_points(rows, core_ns)}):
        serial = serial_term(rows, core_ns, exclude=rel)
        if serial is None:
            continue
        for p in record_points(rows, core_ns):
            if p["file"] != rel:
                continue
            r = p["run"]
            cores = r["cores"] or S.DEFAULT_CPU_CORES
            scale = (serial + core_ns / cores) * 1e-9 / S.cpu_optimizer_seconds_per_param(cores)
            predicted = r["rest"] + r["cpu"] * scale
            out.append({"file": rel, "name": r["name"], "split": r["split"], "cores": cores, "serial": serial,
                        "measured": p["step"], "predicted": predicted, "error": predicted / p["step"] - 1})
    return out


def main(argv: list[str] | None = None) -> int:
    if argv:
        print("usage: python -m bench.offload_terms   (no arguments)", file=sys.stderr)
        return 2
    from bench import accuracy as A

    rows = offload_rows(A._prepared(A.build().rows))
    for r in rows:
        ns = f"{r['ns']:.3f}" if r["ns"] else "-"
        print(f"{r['split']:8s} {r['name']:52s} ZeRO-{r['stage']} CPUs {r['cores']}  measured {r['measured']:.3f} s  "
              f"predicted {r['predicted']:.3f} s (CPU {r['cpu']:.3f} s)  implied {ns} ns/param")
    core = core_term(rows)
    for p in core_pairs(rows):
        print(f"pair {p['base']}: CPUs {p['cores']} step {p['step'][0]:.3f} / {p['step'][1]:.3f} s, "
              f"ns/param {p['ns'][0]:.3f} / {p['ns'][1]:.3f} -> {p['core_ns']:.2f} ns x cores")
    serial = serial_term(rows, core) if core is not None else None
    if core is not None:
        for x in leave_one_host_out(rows, core):
            print(f"held out {x['file'].split('/')[-1]:45s} {x['name']:52s} serial {x['serial']:.3f} ns: predicted "
                  f"{x['predicted']:.3f} s, measured {x['measured']:.3f} s ({100 * x['error']:+.1f} %)")
    print(f"CPU_ADAM_CORE_NS in use {S.CPU_ADAM_CORE_NS}, derived {core and round(core, 3)}; "
          f"CPU_ADAM_SERIAL_NS in use {S.CPU_ADAM_SERIAL_NS}, derived {serial and round(serial, 3)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
