"""What the 2026-12-06 H100 measurements say about the bundles verify ran since 2026-12-01: read off the committed
files, for docs/accuracy.md's known-gap line (bench.accuracy).

- gpu_windows: the GPU's clocks and power while each case ran (nvidia-smi samples every 250 ms, the case windows
  from its logs' file times): how many busy samples carried the software power cap, and the SM clock they ran at.
- liger_decode_extra: Liger's host cost per decode step and layer against the eager ops it replaces
  (bench/liger_probe.py's no_grad calls: a decode step's input is as tiny as the probe's), at the probe host and
  scaled to the model's median host.
- generate_steps: the GRPO bundle's generate calls under bench/bundle_phases.py: milliseconds per decode step, and
  the calls whose batch had a width the run had not seen before.
- new_width_costs: what a prompt width the process had not run before costs (bench/shape_probe.py, one H200 and one
  H100): generate's and the forward + backward's seconds over those of widths seen before, the kernels Triton
  compiled meanwhile, and, under the profiler, the op that took the extra.
"""

from __future__ import annotations

import csv
import json
import statistics
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLES = "bench/results/gpu-samples-h100-2026-12-06.csv"
WINDOWS = "bench/results/gpu-samples-h100-2026-12-06.windows.json"
LIGER_PROBE = "bench/results/liger-probe-h100-2026-12-06.json"
PHASES = "bench/results/bundle-phases-h100-2026-12-06.jsonl"
PHASES_COUNTERS = "bench/results/bundle-phases-h100-2026-12-06-counters.jsonl"
VERIFY = "bench/results/verify-h100-2026-12-06.jsonl"
VERIFY_AGAIN = "bench/results/verify-h100-2026-12-06-again.jsonl"
"""verify's records of the run beside PHASES_COUNTERS: the same commit's bundles, so the same plans."""
SHAPE_PROBES = ("bench/results/shape-probe-h200-2026-12-06.json", "bench/results/shape-probe-h100-2026-12-06.json")

BUSY_UTILIZATION_PCT = 50
"""A sample counts as the case's training when the GPU was busy at least this share of nvidia-smi's window: model
loading and the idle gaps between steps read 0-30 %."""
SW_POWER_CAP = 0x4
"""nvidia-smi's clocks_event_reasons bit for the software power cap (the board holding its power limit by clocks;
nvmlClocksEventReasonSwPowerCap)."""
CAPPED_SHARE_GPU_BOUND = 0.9
"""A case whose busy samples were this share or more under the power cap ran GPU-bound the whole time (the SFT
bundles: 97-99 %); the host-bound GRPO/RLOO bundles read 25-35 %."""
DECODE_OPS_PER_LAYER = {"rmsnorm": 2, "rope": 1, "swiglu": 1}
"""Liger's patched calls in one Llama decoder layer's forward: two RMSNorms, RoPE on q and k, the SiLU-gated
product."""


def _time(stamp: str) -> datetime:
    return datetime.strptime(stamp.strip()[:19], "%Y/%m/%d %H:%M:%S")


def _number(cell: str) -> float:
    return float(cell.strip().split()[0])


def gpu_windows(samples: str = SAMPLES, windows: str = WINDOWS, root: Path = REPO) -> list[dict]:
    """Per case window: busy samples, those under the software power cap, the median and lowest SM clock (MHz)
    and the median power (W) of the busy samples, with the board's maximum SM clock."""
    meta = json.loads((root / windows).read_text())
    with (root / samples).open(newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for w in meta["windows"]:
        start, end = _time(w["start"]), _time(w["end"])
        busy = [r for r in rows if r["run"] == w["run"] and start <= _time(r["timestamp"]) <= end
                and _number(r["utilization.gpu [%]"]) >= BUSY_UTILIZATION_PCT]
        clocks = [_number(r["clocks.current.sm [MHz]"]) for r in busy]
        out.append({"run": w["run"], "case": w["case"], "busy": len(busy),
                    "capped": sum(int(r["clocks_event_reasons.active"], 16) & SW_POWER_CAP != 0 for r in busy),
                    "sm_mhz_median": statistics.median(clocks) if clocks else None,
                    "sm_mhz_min": min(clocks) if clocks else None,
                    "watts_median": statistics.median(_number(r["power.draw [W]"]) for r in busy) if busy else None,
                    "sm_mhz_max": meta["gpu"]["max_sm_mhz"]})
    return out


def _host_factor(op_seconds: float) -> float:
    """The model's scale for a host whose 1-element op takes op_seconds (advisor.model.speed.host_factor, which reads
    only the target's host_op_seconds)."""
    from types import SimpleNamespace

    from advisor.model import speed as S

    return S.host_factor(SimpleNamespace(host_op_seconds=op_seconds))


def _layer(rows: list[dict], impl: str, key: str) -> float:
    """Seconds (timing `key`) of one layer's patched calls (DECODE_OPS_PER_LAYER) in implementation `impl`."""
    per = {(r["op"], r["impl"]): r[key] for r in rows if key in r}
    return sum(n * per[(op, impl)] for op, n in DECODE_OPS_PER_LAYER.items())


def liger_decode_extra(probe: str = LIGER_PROBE, root: Path = REPO) -> dict:
    """Liger's host seconds per decode layer less the eager ops', from the probe's no_grad calls: per op and per
    layer (DECODE_OPS_PER_LAYER) at the probe's host, and the layer's figure at the model's median host (divided by
    the probe host's host_factor, as the model scales decode dispatch)."""
    d = json.loads((root / probe).read_text())
    ops = {op: {r["impl"]: r["host_forward_nograd_s"] for r in d["rows"] if r["op"] == op}
           for op in DECODE_OPS_PER_LAYER}
    layer = {impl: _layer(d["rows"], impl, "host_forward_nograd_s") for impl in ("liger", "eager")}
    host_op = d["host_probe"]["nograd_op_us"] * 1e-6
    extra = layer["liger"] - layer["eager"]
    return {"ops": ops, "layer": layer, "extra_s": extra, "host_op_s": host_op,
            "extra_reference_s": extra / _host_factor(host_op), "device": d.get("device"),
            "versions": d.get("versions", {})}


def generate_steps(phases: str = PHASES, root: Path = REPO) -> dict:
    """The GRPO bundle's generate calls, one per step (the bundle generates each step's batch in that step):
    milliseconds per decode step of each, which calls after the first had a batch shape (prompt width, padded or
    not) the run had not generated before, and the steady steps: neither the first, nor a new shape, nor profiled."""
    rec = json.loads((root / phases).read_text().splitlines()[0])
    iterations = rec.get("iterations", [])
    gens = rec.get("generate_calls", [])
    if len(gens) != len(iterations):
        raise ValueError(f"{phases}: {len(gens)} generate calls for {len(iterations)} steps")
    seen: set[tuple] = set()
    steps = []
    for i, (it, g) in enumerate(zip(iterations, gens, strict=True)):
        shape = (g["batch"], g["prompt_tokens"], g["padded_prompts"])
        steps.append({"step": it["step"], "step_s": it["step_s"], "generate_s": g["seconds"],
                      "ms_per_token": 1e3 * g["seconds"] / max(1, g["new_tokens"]), "prompt_tokens": g["prompt_tokens"],
                      "padded": g["padded_prompts"], "batch": g["batch"], "new_tokens": g["new_tokens"],
                      "first": i == 0, "new_shape": i > 0 and shape not in seen, "profiled": bool(it.get("profiled")),
                      "scoring_s": it.get("_get_per_token_logps_and_entropies_s"),
                      "backward_s": it.get("accelerator_backward_s")})
        seen.add(shape)
    return {"steps": steps, "steady": [s for s in steps if not (s["first"] or s["new_shape"] or s["profiled"])],
            "new_shape": [s for s in steps if s["new_shape"]], "host_probe": rec.get("host_probe"),
            "bundle": rec.get("bundle"), "versions": rec.get("versions", {})}


def verify_records(path: str = VERIFY, root: Path = REPO) -> list[dict]:
    return [json.loads(line) for line in (root / path).read_text().splitlines() if line.strip()]


def liger_launch_equivalents(probe: str = LIGER_PROBE, root: Path = REPO) -> dict:
    """Liger's launch-equivalents per layer from the probe, in the model's units: the eager layer's forward and
    backward (advisor.model.speed KERNELS_FWD_PER_LAYER, KERNELS_BWD_PER_LAYER at LAUNCH_SECONDS) plus Liger's host
    seconds less the eager ops' for the layer's patched calls (DECODE_OPS_PER_LAYER), brought to the median host by
    the model's own host_factor of the probe host. Forward: the no_grad calls (the probe's forward under autograd is
    timed with its backward); backward: forward + backward less that forward. decode: the forward's extra in decode
    launch-equivalents (DECODE_LAUNCH_SECONDS), which a decode layer adds to its DECODE_KERNELS_PER_LAYER."""
    from advisor.model import speed as S

    d = json.loads((root / probe).read_text())
    rows = d["rows"]
    host = _host_factor(d["host_probe"]["nograd_op_us"] * 1e-6)
    fwd = (_layer(rows, "liger", "host_forward_nograd_s") - _layer(rows, "eager", "host_forward_nograd_s")) / host
    both = (_layer(rows, "liger", "host_forward_backward_s") - _layer(rows, "eager", "host_forward_backward_s")) / host
    return {"fwd": S.KERNELS_FWD_PER_LAYER + fwd / S.LAUNCH_SECONDS,
            "bwd": S.KERNELS_BWD_PER_LAYER + (both - fwd) / S.LAUNCH_SECONDS,
            "decode": fwd / S.DECODE_LAUNCH_SECONDS, "host_factor": host}


def new_width_costs(probes: tuple[str, ...] = SHAPE_PROBES, root: Path = REPO) -> list[dict]:
    """Per probe file and Liger on or off: the median generate and forward + backward seconds of the calls at a width
    seen before (the first call, which pays the process's own warm-up, and profiled calls left out), and each call at
    a new width after the first (unprofiled) as seconds over those medians, with the kernels Triton compiled during
    it and the cudaMalloc calls it made. Where the file profiled a new width and then the same width again: the ops
    whose host seconds grew the most between the two, with both figures."""
    out = []
    for rel in probes:
        d = json.loads((root / rel).read_text())
        for liger in (False, True):
            rows = [r for r in d["rows"] if r["liger"] is liger]
            seen = [r for r in rows if r["width_seen_before"] and not r.get("profiled")]
            if not seen:
                continue
            gen = statistics.median(r["generate_s"] for r in seen)
            fwd = statistics.median(r["forward_backward_s"] for r in seen)
            new = [{"width": r["prompt_width"], "generate_extra_s": r["generate_s"] - gen,
                    "forward_backward_extra_s": r["forward_backward_s"] - fwd,
                    "triton_kernels": r["generate"]["triton_kernels_added"] + r["forward_backward"]["triton_kernels_added"],
                    "cuda_mallocs": r["generate"].get("cuda_mallocs_added", 0) + r["forward_backward"].get("cuda_mallocs_added", 0)}
                   for r in rows if r["call"] > 1 and not r["width_seen_before"] and not r.get("profiled")]
            grew = []
            prof = [r for r in rows if r.get("profiled")]
            if len(prof) == 2 and not prof[0]["width_seen_before"] and prof[1]["width_seen_before"]:
                first = {o["name"]: o["self_host_s"] for o in prof[0]["top_ops"]}
                again = {o["name"]: o["self_host_s"] for o in prof[1]["top_ops"]}
                grew = sorted(({"op": k, "new_s": v, "seen_s": again.get(k)} for k, v in first.items()),
                              key=lambda x: -(x["new_s"] - (x["seen_s"] or 0.0)))[:3]
            out.append({"file": rel, "gpu": d.get("gpu"), "liger": liger, "batch": d["batch"],
                        "new_tokens": d["new_tokens"], "train_batch": d["train_batch"],
                        "seen_generate_s": gen, "seen_forward_backward_s": fwd, "new": new, "grew": grew,
                        "seen_generate_range_s": (min(r["generate_s"] for r in seen), max(r["generate_s"] for r in seen)),
                        "seen_widths_again": sorted({r["prompt_width"] for r in seen if r["prompt_width"] != rows[0]["prompt_width"]}),
                        "versions": d.get("versions", {})})
    return out
