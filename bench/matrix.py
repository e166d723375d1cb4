"""The benchmark matrix: which TRL runs the calibration measures on one GPU.

Each row is a plain dict. Its knob names are those of `advisor.core.request.Request` (model, trainer, method, lora_r,
seq_len, micro_batch, grad_accum, backend, zero, offload, grad_ckpt, liger, attn, precision, num_generations,
max_completion_len, ref_model), so `request_kwargs(row)` feeds a row straight to the advisor for its prediction.
Bench-only keys: `name` (stable, derived from the knobs), `split` ("fit" or "holdout", from a hash of the name),
`beta` (GRPO KL coefficient), `expect` (a planning guess: "fit", "near" the memory limit, or "oom"),
`est_peak_gib` and `est_seconds` (the planning guesses below, used only to order rows and to plan the time budget).

The guesses are deliberately crude: they exist to place rows near the 139 GiB limit and to put cheap rows first,
not to predict anything; predicting is the advisor's job and these measurements are what it is checked against.
"""

from __future__ import annotations

import hashlib
from typing import Any

GIB = 1 << 30
GPU_CAPACITY_GIB = 139.0
"""One H200 as torch sees it (NVML reports 143771 MiB; the CUDA context and libraries take the rest)."""

HOLDOUT_FRACTION = 0.25

DEFAULT_LORA_R = 16

# Request knobs every row carries (values of the advisor's Request with the same names).
REQUEST_KEYS = ("model", "trainer", "method", "lora_r", "seq_len", "micro_batch", "grad_accum", "backend", "zero",
                "offload", "grad_ckpt", "liger", "attn", "precision", "num_generations", "max_completion_len",
                "ref_model")

MODELS = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "llama-3.1-8b")
_SHORT = {"qwen2.5-0.5b": "q0.5b", "qwen2.5-1.5b": "q1.5b", "qwen2.5-3b": "q3b", "qwen2.5-7b": "q7b",
          "llama-3.1-8b": "l8b"}


def _backend_tag(r: dict) -> str:
    if r["backend"] == "single":
        return "single"
    tag = f"z{r['zero']}"
    return tag + "off" if r["offload"] == "optimizer" else tag


def make_name(r: dict) -> str:
    """A stable name from the knobs alone, so a row keeps its name (and its split) when rows are added."""
    parts = [r["trainer"], _SHORT.get(r["model"], r["model"]), r["method"],
             "bf16m" if r["precision"] == "bf16-mixed" else "bf16", _backend_tag(r),
             "ckpt" if r["grad_ckpt"] else "nockpt"]
    if r["liger"]:
        parts.append("liger")
    parts.append(f"s{r['seq_len']}")
    parts.append(f"b{r['micro_batch']}")
    if r["grad_accum"] != 1:
        parts.append(f"ga{r['grad_accum']}")
    if r["trainer"] == "grpo":
        parts.append(f"g{r['num_generations']}c{r['max_completion_len']}")
        parts.append(f"beta{r['beta']:g}")
    if r["trainer"] == "dpo":
        parts.append(f"ref-{r['ref_model']}")
    return "-".join(parts)


def row(model: str, *, trainer: str = "sft", method: str = "full", precision: str = "bf16", backend: str = "single",
        zero: int = 0, offload: str = "none", ckpt: bool = True, liger: bool = False, seq: int = 2048, mb: int = 1,
        ga: int = 1, num_generations: int | None = None, completion: int | None = None, beta: float | None = None,
        expect: str = "fit", stratum: str | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {
        "model": model, "trainer": trainer, "method": method,
        "lora_r": DEFAULT_LORA_R if method in ("lora", "qlora") else None,
        "seq_len": seq, "micro_batch": mb, "grad_accum": ga,
        "backend": backend, "zero": zero if backend == "deepspeed" else 0,
        "offload": offload, "grad_ckpt": ckpt, "liger": liger, "attn": "sdpa", "precision": precision,
        "num_generations": num_generations, "max_completion_len": completion,
        # DPO: a full fine-tune gets an explicit reference copy; LoRA uses the base model with adapters disabled.
        "ref_model": ("copy" if method == "full" else "none") if trainer == "dpo" else None,
        "beta": beta, "expect": expect,
    }
    if stratum:
        r["stratum"] = stratum
    r["name"] = make_name(r)
    return r


def _rows() -> list[dict[str, Any]]:
    """The matrix, grouped by family. Comments give the planning guess of the peak (see estimate_peak_gib)."""
    Q05, Q15, Q3, Q7, L8 = MODELS
    Z = dict(backend="deepspeed")
    NEAR2 = "near-capacity-2"  # added after the first calibration (see family())
    return [
        # --- SFT, full fine-tune, plain single GPU ---
        row(Q05, seq=512, mb=1),
        row(Q05, seq=512, mb=16),
        row(Q05, seq=1024, mb=8, ckpt=False),  # the 0.12 s/step point measured earlier on this GPU
        row(Q05, seq=2048, mb=4, ckpt=False, precision="bf16-mixed"),
        row(Q05, seq=4096, mb=4, ckpt=False, liger=True),
        row(Q05, seq=1024, mb=2, ga=4),
        row(Q15, seq=2048, mb=4, ckpt=False),
        row(Q15, seq=2048, mb=4, ckpt=False, liger=True),
        row(Q15, seq=4096, mb=4, precision="bf16-mixed"),
        row(Q15, seq=16384, mb=1),
        row(Q3, seq=4096, mb=4),
        row(Q3, seq=3072, mb=6, ckpt=False, expect="near"),
        row(Q3, seq=8192, mb=2, precision="bf16-mixed"),
        row(Q3, seq=4096, mb=4, ckpt=False, liger=True),
        row(Q7, seq=4096, mb=2),
        row(Q7, seq=4096, mb=2, ckpt=False, expect="near"),
        row(Q7, seq=16384, mb=1, liger=True),
        row(Q7, seq=1024, mb=1, precision="bf16-mixed", expect="near"),
        row(L8, seq=8192, mb=1),
        row(L8, seq=4096, mb=2, ckpt=False, liger=True),
        row(L8, seq=4096, mb=2, ckpt=False, expect="near"),
        row(L8, seq=1024, mb=1, precision="bf16-mixed", expect="oom"),
        # runs planned to peak at 88-92 % of the GPU (the advisor predicted 125-126 GiB allocated before they ran),
        # for the near-capacity target: no ok run of the first H200 session got within 10 % of the capacity
        row(L8, seq=2048, mb=6, ckpt=False, expect="near", stratum=NEAR2),
        row(Q3, seq=4096, mb=8, ckpt=False, liger=True, expect="near", stratum=NEAR2),
        # --- SFT, LoRA r16 all-linear ---
        row(Q05, method="lora", seq=2048, mb=8, ckpt=False),
        row(Q15, method="lora", seq=8192, mb=4),
        row(Q15, method="lora", seq=4096, mb=4, precision="bf16-mixed"),
        row(Q3, method="lora", seq=4096, mb=4, ckpt=False),
        row(Q7, method="lora", seq=8192, mb=2, ckpt=False, expect="near"),
        row(L8, method="lora", seq=8192, mb=2, ckpt=False, liger=True),
        row(L8, method="lora", seq=8192, mb=2, ckpt=False, expect="near"),
        row(L8, method="lora", seq=16384, mb=2),
        # --- SFT, QLoRA (nf4, double quant, bf16 compute and storage) ---
        row(Q15, method="qlora", seq=2048, mb=4),
        row(Q3, method="qlora", seq=2048, mb=4, ckpt=False),
        row(L8, method="qlora", seq=4096, mb=4, liger=True),
        row(L8, method="qlora", seq=4096, mb=4, ckpt=False, expect="near"),
        # --- SFT, DeepSpeed (one process) ---
        row(Q05, seq=1024, mb=8, zero=2, **Z),  # the 0.25 s/step point measured earlier
        row(Q05, seq=1024, mb=8, zero=3, **Z),  # the 0.50 s/step point measured earlier
        row(Q15, seq=2048, mb=4, ckpt=False, zero=2, **Z),
        row(Q15, seq=4096, mb=4, liger=True, zero=3, **Z),
        row(Q15, seq=2048, mb=4, zero=3, offload="optimizer", **Z),
        row(Q15, method="lora", seq=4096, mb=4, zero=2, **Z),
        row(Q3, seq=4096, mb=4, zero=2, **Z),
        row(Q3, seq=3072, mb=4, ckpt=False, zero=3, expect="near", **Z),
        row(Q3, seq=4096, mb=4, zero=3, offload="optimizer", **Z),
        row(Q3, seq=2048, mb=4, precision="bf16-mixed", zero=2, **Z),
        row(Q7, method="lora", seq=4096, mb=4, zero=3, **Z),
        row(Q7, seq=1024, mb=1, zero=2, expect="oom", **Z),
        # --- DPO (prompt + completion = seq_len; chosen and rejected both run) ---
        row(Q05, trainer="dpo", seq=1024, mb=4),
        row(Q15, trainer="dpo", seq=2048, mb=4),
        row(Q3, trainer="dpo", method="lora", seq=2048, mb=2, ckpt=False),
        row(Q3, trainer="dpo", seq=2048, mb=2, zero=3, **Z),
        row(Q7, trainer="dpo", method="lora", seq=4096, mb=2),
        row(Q3, trainer="dpo", method="lora", seq=2048, mb=6, ckpt=False, expect="near", stratum=NEAR2),
        row(L8, trainer="dpo", method="lora", seq=4096, mb=2, ckpt=False, expect="near", stratum=NEAR2),
        row(L8, trainer="dpo", seq=2048, mb=1),
        # --- GRPO, full fine-tune, generation with transformers (no vLLM); micro_batch counts completions ---
        row(Q05, trainer="grpo", seq=1024, mb=8, num_generations=8, completion=512, beta=0.0),
        row(Q05, trainer="grpo", seq=1024, mb=8, num_generations=4, completion=128, beta=0.04),
        row(Q15, trainer="grpo", seq=1024, mb=8, num_generations=8, completion=256, beta=0.04),
        row(Q15, trainer="grpo", seq=2048, mb=4, num_generations=4, completion=256, beta=0.0, ckpt=False),
        row(Q3, trainer="grpo", seq=2048, mb=8, num_generations=8, completion=128, beta=0.04),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Planning guesses (NOT the advisor's model): bytes of model state plus saved activations, and seconds of wall time.
# ---------------------------------------------------------------------------------------------------------------

def _arch(model: str) -> dict[str, Any]:
    from bench.models import arch_dict, resolve

    return arch_dict(resolve(model))


def _act_per_token_layer(a: dict, liger: bool) -> int:
    """Bytes a decoder layer saves for backward per token in bf16 (sdpa attention, no dropout).

    Without Liger: two RMSNorms keep an fp32 copy of their input and the bf16 result (about 6h each), the q/k/v
    input, q, the attention output and the MLP input (about 8h in all), and the gated MLP keeps gate, act(gate),
    up and their product (4 tensors of width i). Liger's RMSNorm keeps only the bf16 input and its SwiGLU
    recomputes act(gate): about 12h + 6i.
    """
    h, i = a["hidden"], a["intermediate"]
    return 2 * (6 * h + 3 * i) if liger else 2 * (10 * h + 4 * i)


def estimate_peak_gib(r: dict, a: dict | None = None) -> float:
    a = a or _arch(r["model"])
    P, L, h, V = a["params"], a["layers"], a["hidden"], a["vocab"]
    emb = V * h * (1 if a["tied_embeddings"] else 2)
    mixed = r["precision"] == "bf16-mixed"
    w = 4 if mixed else 2  # bytes per weight as loaded
    if r["method"] == "qlora":
        states = 0.56 * (P - emb) + 2 * emb  # nf4 + double-quant constants; embeddings and lm_head stay bf16
    elif r["method"] == "lora":
        states = w * P + (2 * P if mixed else 0)  # autocast keeps a bf16 copy of each fp32 weight for backward
    elif r["backend"] == "deepspeed":
        # bf16 params + bf16 grads on the GPU; fp32 master, fp32 grads and Adam moments there unless offloaded
        states = 4 * P + (0 if r["offload"] == "optimizer" else 16 * P)
    else:
        states = (16 * P + 2 * P) if mixed else 8 * P  # weights + grads + AdamW moments in the weights' dtype
    ref = 0
    if r["trainer"] == "dpo" and r["ref_model"] == "copy":
        ref = w * P
    if r["trainer"] == "grpo" and (r["beta"] or 0) > 0 and r["method"] == "full":
        ref = w * P
    seqs = r["micro_batch"] * (2 if r["trainer"] == "dpo" else 1)
    tokens = seqs * r["seq_len"]
    per_layer = _act_per_token_layer(a, r["liger"]) * (1.15 if mixed else 1.0)
    if r["grad_ckpt"]:
        act = tokens * (L * 2 * h + per_layer)
    else:
        act = tokens * L * per_layer
    logits = min(tokens, 4096) * min(V, 32768) * 4 * 2  # TRL's chunked LM head works on tiles, never full logits
    overhead = 1.5 * GIB
    return (states + ref + act + logits + overhead) / GIB


def estimate_seconds(r: dict, a: dict | None = None, *, warmup: int = 1, steps: int = 3) -> float:
    """Wall seconds of one row, child start to exit: fixed costs plus warmup + measured optimizer steps (GRPO
    measures at most 2, see bench.worker.GRPO_MEASURED_STEPS)."""
    a = a or _arch(r["model"])
    if r["trainer"] == "grpo":
        steps = min(steps, 2)
    steps = warmup + steps
    P = a["params"]
    seqs = r["micro_batch"] * r["grad_accum"] * (2 if r["trainer"] == "dpo" else 1)
    tokens = seqs * r["seq_len"]
    flops_per_token = (4 if r["method"] != "full" else 6) * P  # adapters: no weight gradients of the base
    if r["grad_ckpt"]:
        flops_per_token += 2 * P
    if r["trainer"] == "dpo" and r["ref_model"] == "copy":
        flops_per_token += 2 * P / 2  # reference forward over the same tokens (counted once per pair)
    rate = 350e12 if P > 2e9 else 180e12  # rough sustained bf16 FLOP/s on an H200 (small models launch-bound)
    if r["method"] == "qlora":
        rate *= 0.5  # dequantisation on every matmul
    step = tokens * flops_per_token / rate + 0.05
    if r["backend"] == "deepspeed":
        step = step * 1.6 + (0.3 if r["zero"] == 3 else 0.1)
        if r["offload"] == "optimizer":
            step += P / 1e9 * 1.2  # CPU Adam and the fp32 copies across PCIe
    if r["trainer"] == "grpo":
        per_token = 0.012 + a["layers"] * 0.0004  # one decode step of transformers' generate
        step += r["max_completion_len"] * per_token
    fixed = 8.0 + P / 1e9 * 0.4
    if r["backend"] == "deepspeed":
        fixed += 6.0 if r["zero"] == 3 else 4.0
        if r["offload"] == "optimizer":
            fixed += P / 1e9 * 2.0  # pinned host buffers
    if r["method"] == "qlora":
        fixed += 6.0 + P / 1e9 * 3.0  # save bf16 once, then load with quantisation
    if r["trainer"] == "grpo" and (r["beta"] or 0) > 0:
        fixed += 3.0 + P / 1e9 * 1.0  # reference model saved and loaded from a checkpoint
    if r["liger"]:
        fixed += 4.0  # Triton kernels compiled (disk cache makes later rows cheaper)
    if r.get("expect") == "oom":
        return fixed + 5.0
    return fixed + steps * step


# ---------------------------------------------------------------------------------------------------------------

def _hash01(name: str) -> float:
    return int(hashlib.sha256(name.encode()).hexdigest()[:12], 16) / float(1 << 48)


def family(r: dict) -> str:
    """The stratum a row is held out within, so the holdout spreads over trainers, methods and backends. Rows added
    after a calibration name their own stratum, so adding them moves no earlier row between fit and holdout."""
    if r.get("stratum"):
        return r["stratum"]
    if r["trainer"] != "sft":
        return r["trainer"]
    if r["backend"] == "deepspeed":
        return "sft-deepspeed"
    return f"sft-{r['method']}"


def assign_splits(rows: list[dict], fraction: float = HOLDOUT_FRACTION) -> None:
    """In each family, the round(fraction * n) rows with the smallest name hash are the holdout (at least one
    per family of three or more). Deterministic and not hand-picked: adding a row can move at most its family's
    boundary."""
    by_family: dict[str, list[dict]] = {}
    for r in rows:
        by_family.setdefault(family(r), []).append(r)
    for members in by_family.values():
        k = round(fraction * len(members))
        if len(members) >= 3:
            k = max(k, 1)
        ranked = sorted(members, key=lambda r: (_hash01(r["name"]), r["name"]))
        for idx, r in enumerate(ranked):
            r["split"] = "holdout" if idx < k else "fit"


def build_matrix(*, warmup: int = 1, steps: int = 3) -> list[dict[str, Any]]:
    """All rows, split assigned, planning guesses filled, cheapest first (ties broken by name)."""
    rows = _rows()
    archs = {m: _arch(m) for m in {r["model"] for r in rows}}
    for r in rows:
        a = archs[r["model"]]
        r["est_peak_gib"] = round(estimate_peak_gib(r, a), 1)
        r["est_seconds"] = round(estimate_seconds(r, a, warmup=warmup, steps=steps), 1)
    assign_splits(rows)
    rows.sort(key=lambda r: (r["est_seconds"], r["name"]))
    return rows


def coverage_key(r: dict) -> tuple:
    """Rows with the same key exercise the same code path (trainer, method, backend and offload)."""
    return (r["trainer"], r["method"], _backend_tag(r))


def order_rows(rows: list[dict], how: str = "cost") -> list[dict]:
    """"cost": cheapest first (the default). "coverage": the cheapest row of every coverage_key first, then the
    rest cheapest first, so a run cut short by its time budget still touches every code path."""
    by_cost = sorted(rows, key=lambda r: (r["est_seconds"], r["name"]))
    if how == "cost":
        return by_cost
    if how != "coverage":
        raise ValueError(f"unknown order {how!r}")
    first, seen = [], set()
    for r in by_cost:
        if coverage_key(r) not in seen:
            seen.add(coverage_key(r))
            first.append(r)
    picked = {id(r) for r in first}
    return first + [r for r in by_cost if id(r) not in picked]


def validate(rows: list[dict]) -> list[str]:
    """Problems with a list of rows (an empty list means valid); used for the built-in matrix and --rows-file."""
    problems: list[str] = []
    seen: set[str] = set()
    for r in rows:
        name = r.get("name")
        if not name:
            problems.append(f"row without a name: {r}")
            continue
        if name in seen:
            problems.append(f"duplicate name {name}")
        seen.add(name)
        missing = [k for k in (*REQUEST_KEYS, "split") if k not in r]
        if missing:
            problems.append(f"{name}: missing {missing}")
            continue
        if r["trainer"] not in ("sft", "dpo", "grpo"):
            problems.append(f"{name}: trainer {r['trainer']!r} not benchmarked")
        if r["method"] not in ("full", "lora", "qlora"):
            problems.append(f"{name}: method {r['method']!r}")
        if r["precision"] not in ("bf16", "bf16-mixed"):
            problems.append(f"{name}: precision {r['precision']!r}")
        if r["backend"] not in ("single", "deepspeed"):
            problems.append(f"{name}: backend {r['backend']!r}")
        if r["backend"] == "deepspeed" and r["zero"] not in (2, 3):
            problems.append(f"{name}: zero must be 2 or 3 under deepspeed")
        if r["offload"] not in ("none", "optimizer"):
            problems.append(f"{name}: offload {r['offload']!r}")
        if r["offload"] == "optimizer" and r["backend"] != "deepspeed":
            problems.append(f"{name}: optimizer offload needs deepspeed")
        if r["method"] == "qlora" and r["backend"] != "single":
            problems.append(f"{name}: qlora is benchmarked on a single GPU only")
        if r["split"] not in ("fit", "holdout"):
            problems.append(f"{name}: split {r['split']!r}")
        if r["trainer"] == "grpo":
            ng, c = r.get("num_generations"), r.get("max_completion_len")
            if not ng or not c:
                problems.append(f"{name}: grpo needs num_generations and max_completion_len")
            else:
                if (r["micro_batch"] * r["grad_accum"]) % ng:
                    # GRPOConfig: generation_batch_size (= micro_batch * grad_accum * world) % num_generations == 0
                    problems.append(f"{name}: micro_batch * grad_accum must be divisible by num_generations")
                if c >= r["seq_len"]:
                    problems.append(f"{name}: max_completion_len must be below seq_len")
            if r["method"] != "full":
                problems.append(f"{name}: grpo rows are full fine-tunes")
        if r["trainer"] == "dpo" and r.get("ref_model") not in ("copy", "none"):
            problems.append(f"{name}: dpo ref_model must be copy or none")
        if r["trainer"] == "dpo" and r["seq_len"] < 8:
            problems.append(f"{name}: dpo seq_len too short")
    return problems


def request_kwargs(r: dict, *, gpu: str = "H200") -> dict[str, Any]:
    """The advisor Request fields for a row (one GPU of the given catalogue id)."""
    out = {k: r[k] for k in REQUEST_KEYS if r.get(k) is not None}
    out.update(gpus=1, nodes=1, gpu=gpu)
    if r["backend"] == "single":
        out.pop("zero", None)
        out.pop("offload", None)
    return out


def select(rows: list[dict], *, only: list[str] | None = None, split: str = "all") -> list[dict]:
    if only:
        known = {r["name"] for r in rows}
        unknown = [n for n in only if n not in known]
        if unknown:
            raise KeyError(f"unknown row name(s): {', '.join(unknown)}")
        wanted = set(only)
        rows = [r for r in rows if r["name"] in wanted]
    if split != "all":
        rows = [r for r in rows if r["split"] == split]
    return rows
