"""The speed model's GPU rates, read off the kernels of profiled micro-batches (bench/kernel_probe.py), not fitted to
step times.

A profiled micro-batch gives, free of the host CPU's dispatch, the GPU time of its GEMMs, its attention kernels and
everything else (elementwise ops, casts, reductions, TRL's loss head). Set against the model's own work for the same
configuration (advisor.model.speed.micro_batch_times), each gives a rate:
- GEMM efficiency: the model's GEMM FLOPs over the measured GEMM time and the dense peak, per case; MFU_CEILING,
  HIDDEN_HALF and TOKENS_HALF are the curve through the full fine-tunes' cases (LoRA cases add the adapters' skinny
  GEMMs, which are memory-bound and have their own term);
- ATTENTION_EFFICIENCY and ATTENTION_SEQ_HALF: attention FLOPs over the measured attention-kernel time and the
  peak, per case; the curve in the sequence length through every case;
- ELEMENTWISE_BW_EFFICIENCY: the model's elementwise bytes over the measured time of the other kernels (less TRL's
  fused head, its own term) and the HBM bandwidth, median over the full fine-tunes;
- LORA_GEMM_BW_EFFICIENCY: the graph-replayed LoRA GEMMs' bytes over their time and the HBM bandwidth.

    python -m bench.kernel_terms            # the derived values next to the constants in use, and per-case errors
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROBE = "bench/results/kernel-probe-h200-2026-12-02.json"
FAMILIES_PROBE = "bench/results/kernel-probe-h200-2026-12-02-families.json"
"""The families the first probe had little or nothing of (the MoE models at reduced depth, Gemma-2 eager, Gemma-3,
Phi-3, Mistral), at 4-8k tokens per micro-batch, profiled on another H200 of the same day."""
HEAD_DIM_CHECK_PROBE = "bench/results/kernel-probe-h100-2026-12-06-headdim.json"
"""Held out from the attention curve: seven micro-batches profiled the same way on one H100 (--skip-graphs) once the
head-size factors were in, two of models no probe had run (Gemma-3-4B at head_dim 256, Qwen3-4B at 128)."""
GPU_ID = "H200"
GEMM_GRID = {"ceiling": [x / 1000 for x in range(650, 951, 5)], "hidden_half": [0, 32, 64, 128, 192, 256, 384, 512],
             "tokens_half": [0, 128, 256, 512, 768, 1024, 1536]}
"""The grid the GEMM curve is chosen on (mean |log error| over the full fine-tunes' cases)."""
ATTENTION_GRID = {"ceiling": [x / 1000 for x in range(250, 601, 5)], "seq_half": [0, 128, 256, 384, 512, 768, 1024]}


def load(path: str = PROBE, root: Path = REPO) -> dict[str, Any]:
    return json.loads((root / path).read_text())


def probe_gpu(probe: dict[str, Any]):
    """The catalogue GPU a probe ran on (its NVML name), so each case is modelled on that GPU's rates; GPU_ID for
    a probe that names none."""
    from advisor.catalog import match_nvml_name, resolve_gpu

    return match_nvml_name(probe.get("gpu") or "", None) or resolve_gpu(GPU_ID)


def _case_plan(case: dict[str, Any], versions: dict[str, str] | None = None, gpu=None):
    """(model, plan, target) of a profiled case, on `gpu` (a catalogue GPU; default GPU_ID); the target names the
    probe's transformers release, which the model's MoE term depends on (advisor.model.speed.moe_sentinel_masks)."""
    from advisor.catalog import resolve_gpu
    from advisor.core.target import Target
    from advisor.model.bench_rows import plan_from_bench_row
    from bench.kernel_probe import case_attention, case_spec
    from bench.matrix import row

    method = case["method"].split("-")[0]
    model = case_spec(case["model"])
    r = row(model.id, method=method, ckpt=False, seq=case["seq_len"], mb=case["micro_batch"],
            liger=case["method"].endswith("-liger"), attn=case_attention(model),
            layers=model.layers if "@L" in case["model"] else None)
    software = {"transformers": versions["transformers"]} if (versions or {}).get("transformers") else {}
    return model, plan_from_bench_row(r), Target(gpu=gpu or resolve_gpu(GPU_ID), gpus_per_node=1, nodes=1,
                                                  software=software)


def cases(probe: dict[str, Any]) -> list[dict[str, Any]]:
    """Per profiled micro-batch: measured GPU seconds by kind next to the model's, and the rates they imply."""
    from advisor.model import activations as MA
    from advisor.model import dims as MD
    from advisor.model import speed as S

    out = []
    gpu = probe_gpu(probe)
    for c in probe["micro_batches"]:
        if "error" in c:
            continue
        model, plan, target = _case_plan(c, probe.get("versions"), gpu)
        d = MD.dims(model)
        pr = MD.Precision.of(plan)
        m = S.micro_batch_times(d, model, plan, target, pr)
        t = MA.local_tokens(plan)
        peak = S.peak_flops(plan, target)
        eff = S.gemm_efficiency(d.h, t)
        kind = c["forward_backward"]["by_kind"]
        gemm_s, attn_s, other_s = (kind[k]["s"] for k in ("gemm", "attention", "other"))
        lora = plan.method != "full"
        lora_gemm = S.lora_gemm_seconds(d, plan, target, pr) if lora else 0.0
        lora_elem = S.lora_elementwise_seconds(d, plan, target, pr) if lora else 0.0
        head = S.fused_head_seconds(d, target, MA.logit_tokens(plan)) if plan.trainer in S.FUSED_HEAD_TRAINERS else 0.0
        base_elem = m["elementwise"] - head
        flops_gemm = m["compute"] * peak * eff
        flops_attn = m["attention"] * peak * S.attention_efficiency(plan.seq_len, d.head_dim)
        out.append({
            "case": f"{c['model']} {c['method']} s{c['seq_len']} x{c['micro_batch']}", "model": c["model"],
            "method": c["method"], "hidden": d.h, "tokens": t, "seq_len": plan.seq_len, "head_dim": d.head_dim,
            "lora": lora,
            "liger": plan.liger,
            "measured": {"gemm": gemm_s, "attention": attn_s, "other": other_s,
                         "total": c["forward_backward"]["kernel_s"]},
            "model_s": {"gemm": m["compute"] + lora_gemm, "attention": m["attention"],
                        "other": base_elem + head + lora_elem, "total": m["gpu"]},
            # the rates each case implies (LoRA cases' GEMM time holds the adapters' memory-bound GEMMs: not a rate)
            "gemm_efficiency": flops_gemm / (peak * gemm_s) if not lora and gemm_s else None,
            "attention_efficiency": flops_attn / (peak * attn_s) if attn_s else None,
            "elementwise_efficiency": (base_elem * S.ELEMENTWISE_BW_EFFICIENCY / (other_s - head)
                                       if not lora and other_s > head else None),
        })
    return out


def strided_factor(probes: tuple[dict[str, Any], ...]) -> float:
    """STRIDED_ELEMENTWISE_FACTOR from the profiled full fine-tunes without Liger of models with fused projections
    (Phi-3): the factor on the strided ops' bytes that makes the model's non-GEMM, non-attention time equal the
    measured one, per case (the model's time is linear in it), the median over the cases."""
    from advisor.model import speed as S

    def other(c, factor):
        old = S.STRIDED_ELEMENTWISE_FACTOR
        S.STRIDED_ELEMENTWISE_FACTOR = factor
        try:
            return next(r for r in cases({"micro_batches": [c], "versions": probe.get("versions")}))
        finally:
            S.STRIDED_ELEMENTWISE_FACTOR = old

    got = []
    for probe in probes:
        for c in probe["micro_batches"]:
            if "error" in c or c["method"] != "full":
                continue
            model, _, _ = _case_plan(c)
            if not model.fused_qkv:
                continue
            one, two = other(c, 1.0), other(c, 2.0)
            per_unit = two["model_s"]["other"] - one["model_s"]["other"]
            got.append(1.0 + (one["measured"]["other"] - one["model_s"]["other"]) / per_unit)
    return statistics.median(got)


def gemm_curve(rows: list[dict[str, Any]]) -> dict[str, float]:
    """MFU_CEILING x h / (h + HIDDEN_HALF) x t / (t + TOKENS_HALF) through the full fine-tunes' measured GEMM
    efficiencies: the grid point of least mean |log error|."""
    pts = [(r["hidden"], r["tokens"], r["gemm_efficiency"]) for r in rows if r["gemm_efficiency"]]
    best: tuple[float, float, float, float] | None = None
    for c in GEMM_GRID["ceiling"]:
        for hh in GEMM_GRID["hidden_half"]:
            for th in GEMM_GRID["tokens_half"]:
                err = sum(abs(math.log(c * h / (h + hh) * t / (t + th) / e)) for h, t, e in pts) / len(pts)
                if best is None or err < best[0] - 1e-12:
                    best = (err, c, hh, th)
    assert best is not None, "no full fine-tune case in the probe"
    return {"MFU_CEILING": best[1], "HIDDEN_HALF": best[2], "TOKENS_HALF": best[3], "mean_abs_log_error": best[0]}


HEAD_DIM_FACTORS = {96: "ATTENTION_HEAD_DIM_96", 128: "ATTENTION_HEAD_DIM_128", 256: "ATTENTION_HEAD_DIM_256"}
"""The head sizes whose attention efficiency has its own factor over head_dim 64's (advisor.model.speed
attention_head_dim_factor)."""


def attention_curve(rows: list[dict[str, Any]]) -> dict[str, float]:
    """ATTENTION_EFFICIENCY x s / (s + ATTENTION_SEQ_HALF) x the head size's factor through every case's measured
    attention efficiency (each case's rate at its own head size: the model's attention FLOPs over the measured
    kernel time): per grid point, each head size's factor is the geometric mean of its cases over the curve
    (head_dim 64's is 1 by definition), and the grid point of least mean |log error| is taken."""
    pts = [(r["seq_len"], r["head_dim"], r["attention_efficiency"]) for r in rows if r["attention_efficiency"]]
    unknown = {hd for _, hd, _ in pts} - set(HEAD_DIM_FACTORS) - {64}
    assert not unknown, f"cases at head sizes with no factor: {sorted(unknown)}"
    best: tuple[float, float, float, dict[int, float]] | None = None
    for a in ATTENTION_GRID["ceiling"]:
        for sh in ATTENTION_GRID["seq_half"]:
            logs: dict[int, list[float]] = {}
            for s, hd, e in pts:
                logs.setdefault(hd, []).append(math.log(e / (a * s / (s + sh))))
            factor = {hd: (0.0 if hd == 64 else sum(v) / len(v)) for hd, v in logs.items()}
            err = sum(abs(x - factor[hd]) for hd, v in logs.items() for x in v) / len(pts)
            if best is None or err < best[0] - 1e-12:
                best = (err, a, sh, {hd: math.exp(f) for hd, f in factor.items()})
    assert best is not None, "no case with attention kernels in the probe"
    assert 64 in best[3] and set(HEAD_DIM_FACTORS) <= set(best[3]), "the probes miss a head size the model scales"
    return {"ATTENTION_EFFICIENCY": best[1], "ATTENTION_SEQ_HALF": best[2],
            **{name: best[3][hd] for hd, name in HEAD_DIM_FACTORS.items()}, "mean_abs_log_error": best[0]}


def lora_gemm_efficiency(probe: dict[str, Any]) -> float:
    """Bytes over time of every graph-replayed LoRA GEMM shape (down and up alike: the backward runs both kinds as
    often as the forward), over the catalogue's HBM bandwidth of the GPU the probe ran on."""
    rows = probe["lora_gemms"]
    bw = probe_gpu(probe).mem_bw_gbps * 1e9
    return sum(r["bytes"] for r in rows) / (sum(r["us"] for r in rows) * 1e-6) / bw


def derived(probe: dict[str, Any] | None = None, families: dict[str, Any] | None = None) -> dict[str, float]:
    """The values the probe gives the GPU-rate constants of advisor/model/speed.py; the attention curve also runs
    through the cases of `families` (default: FAMILIES_PROBE when `probe` is the default one), whose Phi-3, Gemma-3,
    Mistral and MoE cases add head sizes 96, 128 and 256."""
    if probe is None:
        probe = load()
        families = families or load(FAMILIES_PROBE)
    rows = cases(probe)
    curve = gemm_curve(rows)
    attention_rows = rows + (cases(families) if families else [])
    return {
        "MFU_CEILING": curve["MFU_CEILING"], "HIDDEN_HALF": curve["HIDDEN_HALF"], "TOKENS_HALF": curve["TOKENS_HALF"],
        **{k: v for k, v in attention_curve(attention_rows).items() if k != "mean_abs_log_error"},
        "ELEMENTWISE_BW_EFFICIENCY": statistics.median(r["elementwise_efficiency"] for r in rows
                                                       if r["elementwise_efficiency"]),
        # a probe run with --skip-graphs replayed no LoRA GEMMs: it gives no bandwidth for them
        **({"LORA_GEMM_BW_EFFICIENCY": lora_gemm_efficiency(probe)} if probe.get("lora_gemms") else {}),
    }


def step_gaps(probe: dict[str, Any], rows=None) -> list[dict[str, Any]]:
    """The benchmark rows that ran a profiled micro-batch's configuration as a TRL step (one GPU, no accumulation,
    no checkpointing): their measured step time less the profiled micro-batch's wall time, less what the model adds
    outside the micro-batch (STEP_FIXED_SECONDS, the data path, the optimizer step). LoRA's remainder per adapter
    tensor is LORA_STEP_SECONDS_PER_TENSOR."""
    from advisor.catalog import resolve_gpu
    from advisor.model import dims as MD
    from advisor.model import speed as S

    if probe_gpu(probe).id != resolve_gpu(GPU_ID).id:
        return []  # the benchmark's steps ran on GPU_ID: another GPU's micro-batches have no step to set them against
    if rows is None:
        from bench.accuracy import build

        rows = build().rows
    by_config = {}
    for e in rows:
        k = e.run.knobs
        if e.run.status != "ok" or not e.run.step_seconds or k.get("backend") != "single" or k.get("trainer") != "sft":
            continue
        if k.get("grad_ckpt") or (k.get("grad_accum") or 1) != 1 or k.get("precision") != "bf16":
            continue
        by_config.setdefault((k["model"], k["method"], k["seq_len"], k["micro_batch"], bool(k.get("liger"))), e)
    out = []
    for c in probe["micro_batches"]:
        if "error" in c:
            continue
        method = c["method"].split("-")[0]
        e = by_config.get((c["model"], method, c["seq_len"], c["micro_batch"], c["method"].endswith("-liger")))
        if e is None:
            continue
        model, plan, target = _case_plan(c, probe.get("versions"))
        d = MD.dims(model)
        pr = MD.Precision.of(plan)
        outside = S.STEP_FIXED_SECONDS + S.data_seconds(plan) + S.optimizer_step_seconds(d, plan, target, pr)
        gap = e.run.step_seconds - c["wall_s"] - outside
        tensors = S.adapter_tensors(d, plan)
        out.append({"case": f"{c['model']} {c['method']} s{c['seq_len']} x{c['micro_batch']}", "row": e.run.name,
                    "step_s": e.run.step_seconds, "micro_batch_wall_s": c["wall_s"], "outside_s": outside,
                    "gap_s": gap, "adapter_tensors": tensors,
                    "gap_per_adapter_tensor_s": gap / tensors if tensors else None})
    return out


def lora_step_seconds_per_tensor(gaps: list[dict[str, Any]]) -> float:
    """The median gap per adapter tensor over the LoRA pairs."""
    return statistics.median(g["gap_per_adapter_tensor_s"] for g in gaps if g["gap_per_adapter_tensor_s"])


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bench.kernel_terms", description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe", default=PROBE, help=f"the kernel probe's JSON file (default {PROBE})")
    a = ap.parse_args(argv)
    if not (REPO / a.probe).is_file():
        ap.error(f"--probe {a.probe}: no such file")
    from advisor.model import speed as S

    probe = load(a.probe)
    got = derived(probe, load(FAMILIES_PROBE) if a.probe == PROBE else None)
    print(f"{a.probe} ({probe['gpu']}, torch {probe['versions'].get('torch')}, transformers "
          f"{probe['versions'].get('transformers')})")
    for k, v in got.items():
        print(f"  {k:26s} derived {v:.4g}   in use {getattr(S, k):.4g}")
    gaps = step_gaps(probe)
    if any(g["gap_per_adapter_tensor_s"] for g in gaps):
        print(f"  LORA_STEP_SECONDS_PER_TENSOR derived {lora_step_seconds_per_tensor(gaps):.3g}   in use "
              f"{S.LORA_STEP_SECONDS_PER_TENSOR:.3g}")
    for g in gaps:
        print(f"    {g['row']:48s} TRL step {g['step_s']:.3f} s, micro-batch {g['micro_batch_wall_s']:.3f} s, "
              f"modelled outside {g['outside_s']:.3f} s: gap {g['gap_s'] * 1e3:+.1f} ms")
    print("  per case, measured / model GPU seconds (gemm, attention, other, total):")
    for r in cases(probe):
        ratio = " ".join(f"{r['measured'][k] / r['model_s'][k]:.2f}" if r["model_s"][k] else "-"
                         for k in ("gemm", "attention", "other", "total"))
        print(f"    {r['case']:40s} {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
