"""The benchmark matrix: which TRL runs the calibration measures on one GPU.

Each row is a plain dict. Its knob names are those of `advisor.core.request.Request` (model, trainer, method, lora_r,
seq_len, micro_batch, grad_accum, backend, zero, offload, grad_ckpt, liger, attn, precision, num_generations,
max_completion_len, ref_model), so `request_kwargs(row)` feeds a row straight to the advisor for its prediction.
Bench-only keys: `name` (stable, derived from the knobs), `split` ("fit" or "holdout", from a hash of the name),
`beta` (GRPO/RLOO KL coefficient), `expect` (a planning guess: "fit", "near" the memory limit, or "oom"),
`est_peak_gib` and `est_seconds` (the planning guesses below, used only to order rows and to plan the time budget),
`stratum` (the holdout stratum of rows added after a calibration), `layers` (a reduced depth: the model is built,
and predicted, with this many decoder layers; MoE models whose full depth does not fit the machine) and `steps`
(measured steps when fewer than the run's --steps: costly rows). `attn` None means the implementation the advisor
chooses on the machine that runs the row (advisor.resolve.attention.choose_attention), resolved by bench.run and
recorded.

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
"""The models of the first calibration (2026-11-29)."""
FAMILY_MODELS = ("qwen3-0.6b", "qwen3-1.7b", "llama-3.2-1b", "llama-3.2-3b", "smollm2-360m", "smollm2-1.7b",
                 "gemma-2-2b", "gemma-3-1b", "phi-3-mini", "mistral-7b-v0.3", "qwen3-30b-a3b", "mixtral-8x7b")
"""Added for issue 14: at least one model of every model_type of the catalogue, small ones where it has them."""
_SHORT = {"qwen2.5-0.5b": "q0.5b", "qwen2.5-1.5b": "q1.5b", "qwen2.5-3b": "q3b", "qwen2.5-7b": "q7b",
          "llama-3.1-8b": "l8b", "qwen3-0.6b": "q3-0.6b", "qwen3-1.7b": "q3-1.7b", "llama-3.2-1b": "l1b",
          "llama-3.2-3b": "l3b", "smollm2-360m": "sm360m", "smollm2-1.7b": "sm1.7b", "gemma-2-2b": "g2-2b",
          "gemma-3-1b": "g3-1b", "phi-3-mini": "phi3mini", "mistral-7b-v0.3": "m7b", "qwen3-30b-a3b": "q3moe",
          "mixtral-8x7b": "mx8x7b"}
TRAINERS = ("sft", "dpo", "kto", "grpo", "rloo")
GENERATING = ("grpo", "rloo")


def _backend_tag(r: dict) -> str:
    if r["backend"] == "single":
        return "single"
    tag = f"z{r['zero']}"
    return tag + "off" if r["offload"] == "optimizer" else tag


def make_name(r: dict) -> str:
    """A stable name from the knobs alone, so a row keeps its name (and its split) when rows are added."""
    parts = [r["trainer"], _SHORT.get(r["model"], r["model"]) + (f"-L{r['layers']}" if r.get("layers") else ""),
             r["method"],
             "bf16m" if r["precision"] == "bf16-mixed" else "bf16", _backend_tag(r),
             "ckpt" if r["grad_ckpt"] else "nockpt"]
    if r["liger"]:
        parts.append("liger")
    parts.append(f"s{r['seq_len']}")
    parts.append(f"b{r['micro_batch']}")
    if r["grad_accum"] != 1:
        parts.append(f"ga{r['grad_accum']}")
    if r["trainer"] in GENERATING:
        parts.append(f"g{r['num_generations']}c{r['max_completion_len']}")
        parts.append(f"beta{r['beta']:g}")
    if r["trainer"] in ("dpo", "kto"):
        parts.append(f"ref-{r['ref_model']}")
    if r.get("steps"):
        parts.append(f"st{r['steps']}")
    return "-".join(parts)


def row(model: str, *, trainer: str = "sft", method: str = "full", precision: str = "bf16", backend: str = "single",
        zero: int = 0, offload: str = "none", ckpt: bool = True, liger: bool = False, seq: int = 2048, mb: int = 1,
        ga: int = 1, num_generations: int | None = None, completion: int | None = None, beta: float | None = None,
        expect: str = "fit", stratum: str | None = None, attn: str | None = "sdpa", layers: int | None = None,
        steps: int | None = None, priority: int | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {
        "model": model, "trainer": trainer, "method": method,
        "lora_r": DEFAULT_LORA_R if method in ("lora", "qlora") else None,
        "seq_len": seq, "micro_batch": mb, "grad_accum": ga,
        "backend": backend, "zero": zero if backend == "deepspeed" else 0,
        "offload": offload, "grad_ckpt": ckpt, "liger": liger, "attn": attn, "precision": precision,
        "num_generations": num_generations, "max_completion_len": completion,
        # DPO/KTO: a full fine-tune gets an explicit reference copy; LoRA uses the base model with adapters disabled.
        "ref_model": ("copy" if method == "full" else "none") if trainer in ("dpo", "kto") else None,
        "beta": beta, "expect": expect,
    }
    if stratum:
        r["stratum"] = stratum
    if layers:
        r["layers"] = layers
    if steps:
        r["steps"] = steps
    if priority is not None:
        r["priority"] = priority
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
        *_family_rows(),
        *_generation_size_rows(),
    ]


def _generation_size_rows() -> list[dict[str, Any]]:
    """GRPO generation against model size, every other knob held (issue 14): Qwen2.5 0.5B to 7B, 448-token prompts,
    4 completions of 128 tokens each, 8 completions per step, no KL reference. The 2026-12-01 rows had the 1.5B and
    3B generation-bound rows 9-17 % slower than predicted and the 0.5B ones faster: one size sweep separates what
    grows with the weights (HBM bytes per decode step) from the per-kernel CPU cost that does not."""
    return [row(m, trainer="grpo", seq=512, mb=8, num_generations=4, completion=128, beta=0.0,
                stratum="generation-size-4", attn=None) for m in MODELS[:4]]


def _family_rows() -> list[dict[str, Any]]:
    """Rows added for issue 14 (models and plans the first calibration never saw), each in a stratum of its own so
    that no row measured before changes split; the attention is the one the advisor chooses on the machine (attn
    None). Sized by the planning guesses to fit one ~9-minute GPU command together with bench.plan_quality's rows
    (bench/calibration_run.sh); the peaks quoted are what the advisor predicted (reserved, % of the usable 134.8 GiB
    of an H200) when the rows were written, 2026-12-01."""
    Q06, Q17, L1, L3, S360, S17, G2, G3, PHI, M7, QMOE, MX = FAMILY_MODELS

    def new(model: str, stratum: str, **kw) -> dict[str, Any]:
        return row(model, stratum=stratum, attn=None, **kw)

    ARCH, NEAR, CKPT, ADAPT, Z3, GEN, KTO = ("families-3", "near-capacity-3", "ckpt-microbatch-3", "adapters-3",
                                             "zero3-attention-3", "generation-3", "kto-3")
    Z3OFF = dict(backend="deepspeed", zero=3, offload="optimizer")
    return [
        # --- one SFT row per model_type the first calibration never built (Qwen3, Gemma-2 with eager attention and
        # soft-capping, Gemma-3, Phi-3, Mistral, the two MoE types at reduced depth), Liger on the new paths
        new(Q06, ARCH, seq=2048, mb=8),
        new(Q17, ARCH, seq=2048, mb=8, ckpt=False, liger=True),
        new(G2, ARCH, seq=2048, mb=4),  # eager: Gemma-2 rejects sdpa, and the machine has no flash-attn
        new(G2, ARCH, seq=2048, mb=4, liger=True),  # Liger's GeGLU and Gemma RMSNorm
        new(G3, ARCH, seq=2048, mb=8),
        new(PHI, ARCH, seq=2048, mb=4),  # multi-head attention (32 of 32 KV heads), fused qkv and gate_up
        new(M7, ARCH, seq=2048, mb=2),
        # MoE at reduced depth, predicted with the same depth: 8 of 48 layers (5.5B parameters, 128 experts of
        # which 8 run) and 4 of 32 (5.9B, 8 experts, 2 run); full depth would not fit one GPU for full training
        new(QMOE, ARCH, seq=2048, mb=4, layers=8),
        new(MX, ARCH, seq=2048, mb=2, layers=4),
        new(S17, ARCH, seq=2048, mb=8, ckpt=False),  # Llama layout, multi-head attention, 49k vocabulary
        # --- planned at 85-95 % of the usable memory: the near-capacity under-prediction quantile
        new(G2, NEAR, seq=2048, mb=8, ckpt=False, expect="near"),  # 123.9 GiB, 92 %
        new(L1, NEAR, seq=4096, mb=16, ckpt=False, expect="near"),  # 126.8 GiB, 94 %
        new(PHI, NEAR, seq=2048, mb=11, ckpt=False, expect="near"),  # 125.9 GiB, 93 %
        # --- checkpointing x micro-batch: 1B at 4k tokens, 1 to 64 sequences (64 was over-predicted by a quarter)
        new(L1, CKPT, seq=4096, mb=1),
        new(L1, CKPT, seq=4096, mb=64, steps=2),  # 68.1 GiB allocated predicted; about 6 s a step, steady
        # --- LoRA / QLoRA x model size (small models were over-predicted by 10-17 %)
        new(Q06, ADAPT, method="lora", seq=2048, mb=8, ckpt=False),
        new(L3, ADAPT, method="lora", seq=2048, mb=4),
        new(L1, ADAPT, method="qlora", seq=2048, mb=8),
        # --- ZeRO-3 with optimizer offload x attention shape: multi-head attention with a small vocabulary (SmolLM2,
        # 32 of 32 KV heads, 49k) near the top of the GPU (119.6 GiB, 89 %), and a small model. Three measured steps
        # (no `steps`): ZeRO-3's second step is still slow (2026-11-29 records), the median needs the third.
        new(S360, Z3, seq=2048, mb=8, **Z3OFF),
        new(S17, Z3, seq=4096, mb=10, ckpt=False, expect="near", **Z3OFF),
        # --- generation: GRPO without vLLM on a sub-1B model (predicted ~40 % too slow), 4 and 16 completions per
        # prompt; RLOO with its default KL reference (beta 0.05: a copy the trainer loads from a saved checkpoint)
        # and longer completions
        new(Q06, GEN, trainer="grpo", seq=512, mb=8, num_generations=4, completion=64, beta=0.0),
        new(Q06, GEN, trainer="grpo", seq=512, mb=16, num_generations=16, completion=64, beta=0.0),
        new(Q06, GEN, trainer="rloo", seq=512, mb=8, num_generations=4, completion=96, beta=0.05),
        # --- KTO, full fine-tuning with a reference copy, 1k tokens, micro-batch 8-32, with and without Liger
        # (without Liger it was under-predicted by 7-11 %, with Liger within 2 %); run first (priority 0)
        *(new(Q17, KTO, trainer="kto", seq=1024, mb=mb, liger=lg, priority=0) for mb in (8, 16, 32)
          for lg in (False, True)),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Planning guesses (NOT the advisor's model): bytes of model state plus saved activations, and seconds of wall time.
# ---------------------------------------------------------------------------------------------------------------

def _arch(model: str | dict) -> dict[str, Any]:
    """The architecture dict of a model id, or of a row (its `layers` override and inline `arch` honoured)."""
    from bench.models import arch_dict, resolve, row_spec

    return arch_dict(row_spec(model) if isinstance(model, dict) else resolve(model))


def _active_params(a: dict) -> float:
    """Parameters one token passes through: an MoE layer runs experts_per_token of its num_experts experts."""
    if not a.get("num_experts"):
        return float(a["params"])
    expert = 3 * a["hidden"] * a["moe_intermediate"]
    routed = a["layers"] * a["num_experts"] * expert
    return a["params"] - routed * (1 - a["experts_per_token"] / a["num_experts"])


def _act_per_token_layer(a: dict, liger: bool) -> int:
    """Bytes a decoder layer saves for backward per token in bf16 (sdpa attention, no dropout).

    Without Liger: two RMSNorms keep an fp32 copy of their input and the bf16 result (about 6h each), the q/k/v
    input, q, the attention output and the MLP input (about 8h in all), and the gated MLP keeps gate, act(gate),
    up and their product (4 tensors of width i). Liger's RMSNorm keeps only the bf16 input and its SwiGLU
    recomputes act(gate): about 12h + 6i. An MoE layer keeps that for the experts_per_token experts it runs.
    """
    h = a["hidden"]
    i = a["intermediate"] or a.get("moe_intermediate", 0) * max(1, a.get("experts_per_token", 1))
    return 2 * (6 * h + 3 * i) if liger else 2 * (10 * h + 4 * i)


def estimate_peak_gib(r: dict, a: dict | None = None) -> float:
    a = a or _arch(r)
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
    if r["trainer"] in ("dpo", "kto") and r["ref_model"] == "copy":
        ref = w * P
    if r["trainer"] in GENERATING and (r["beta"] or 0) > 0 and r["method"] == "full":
        ref = w * P
    seqs = r["micro_batch"] * (2 if r["trainer"] == "dpo" else 1)
    tokens = seqs * r["seq_len"]
    per_layer = _act_per_token_layer(a, r["liger"]) * (1.15 if mixed else 1.0)
    if r["grad_ckpt"]:
        act = tokens * (L * 2 * h + per_layer)
    else:
        act = tokens * L * per_layer
    if r.get("attn") == "eager":
        # eager attention keeps the softmax probabilities, bf16, heads x seq^2 per sequence and layer
        act += seqs * a["heads"] * r["seq_len"] ** 2 * 2 * (1 if r["grad_ckpt"] else L)
    logits = min(tokens, 4096) * min(V, 32768) * 4 * 2  # TRL's chunked LM head works on tiles, never full logits
    overhead = 1.5 * GIB
    return (states + ref + act + logits + overhead) / GIB


# Wall-time guess, child start to exit, fitted by hand to the wall_seconds of the 2026-11-29 H200 records
# (bench/results/h200-2026-11-29-part1.jsonl, h200x2-2026-11-29-part2.jsonl; tests/bench/test_bench_matrix.py
# checks the fit): a fixed cost (fork, model build, Trainer init, the first step's cuBLAS and allocator warm-up),
# the warm-up step and the measured steps.
SUSTAINED_FLOPS = 450e12
"""bf16 FLOP/s the runs sustained at hidden size 2048 and above (qwen2.5-3b s4096 b4: 430e12; 7B/8B: 450-500e12);
narrower models sustain (hidden / 2048) ** 0.7 of it (qwen2.5-0.5b, hidden 896: 240-275e12 measured)."""
FIRST_STEP_EXTRA_SECONDS = 1.8
"""What the first step took beyond the median step (plain rows: 1.5-2.5 s): cuBLAS handles, autotuning, caching
allocator growth."""
DECODE_SECONDS = (0.002, 0.0009, 0.006)
"""One generated token of transformers' generate under GRPO: (fixed, per layer, per billion parameters) seconds;
measured 24-28 ms for qwen2.5-0.5b (24 layers), 33-35 ms for 1.5B (28), 53 ms for 3B (36)."""


def _step_guess(r: dict, a: dict) -> float:
    """Seconds of one optimizer step."""
    P = a["params"]
    N = _active_params(a)
    seqs = r["micro_batch"] * r["grad_accum"] * (2 if r["trainer"] == "dpo" else 1)
    tokens = seqs * r["seq_len"]
    flops_per_token = (4 if r["method"] != "full" else 6) * N  # adapters: no weight gradients of the base
    if r["grad_ckpt"]:
        flops_per_token += 2 * N
    if r["trainer"] == "dpo" and r["ref_model"] == "copy":
        flops_per_token += 2 * N  # reference forward over the same tokens
    if r["trainer"] == "kto":
        # the policy's no-grad forward over the KL batch, and the reference's over both (a copy, or the
        # adapter-disabled base)
        flops_per_token += 2 * N + 4 * N
    rate = SUSTAINED_FLOPS * min(1.0, a["hidden"] / 2048) ** 0.7
    if r["method"] == "qlora":
        rate *= 0.5  # dequantisation on every matmul
    step = tokens * flops_per_token / rate + 0.05
    if a.get("num_experts"):
        # transformers runs the routed experts one after another: a few kernels per expert and layer, each pass
        step += a["layers"] * a["num_experts"] * 3 * 3 * 10e-6
    if r.get("attn") == "eager":
        step *= 1.15  # the score matrix written and read through HBM
    if r["backend"] == "deepspeed":
        step = step * 1.3 + (0.3 if r["zero"] == 3 else 0.1)
        if r["offload"] == "optimizer":
            step += P / 1e9 * 1.2  # CPU Adam and the fp32 copies across PCIe
    if r["trainer"] in GENERATING:
        fixed, per_layer, per_b = DECODE_SECONDS
        step += r["max_completion_len"] * (fixed + per_layer * a["layers"] + per_b * P / 1e9)
    return step


CHECKPOINT_SAVE_SECONDS_PER_B = 3.3
"""save_pretrained of a random bf16 model to /dev/shm, seconds per billion parameters (2026-11-29: 3.6 s for 1.5B,
10.2-10.4 s for 3B, 22.5-22.8 s for 8B). Paid by the first row of a run that needs the checkpoint (QLoRA, a GRPO/RLOO
reference); later rows reuse it (discount_shared_checkpoints)."""


def checkpoint_save_seconds(r: dict, a: dict | None = None) -> float:
    from bench.worker import ckpt_keys

    if not ckpt_keys(r):
        return 0.0
    a = a or _arch(r)
    return 1.0 + CHECKPOINT_SAVE_SECONDS_PER_B * a["params"] / 1e9


def discount_shared_checkpoints(rows: list[dict]) -> None:
    """For a listing, in run order: a row whose checkpoints an earlier row of the same run saves does not pay the
    save (its est_seconds is lowered in place). bench.run itself looks at the checkpoint folder before each row."""
    from bench.worker import ckpt_keys

    saved: set[str] = set()
    for r in rows:
        keys = set(ckpt_keys(r))
        if keys and keys <= saved:
            r["est_seconds"] = round(max(1.0, r["est_seconds"] - checkpoint_save_seconds(r, r.get("arch"))), 1)
        saved |= keys


def estimate_seconds(r: dict, a: dict | None = None, *, warmup: int = 1, steps: int = 3) -> float:
    """Wall seconds of one row, child start to exit: fixed costs plus warmup + measured optimizer steps (a row's
    own `steps` when fewer; GRPO/RLOO measure at most 2, or their own `generation_steps`, see
    bench.worker.measured_steps)."""
    a = a or _arch(r)
    if r.get("steps"):
        steps = min(steps, int(r["steps"]))
    if r["trainer"] in GENERATING:
        steps = int(r["generation_steps"]) if r.get("generation_steps") else min(steps, 2)
    P = a["params"] / 1e9
    step = _step_guess(r, a)
    fixed = 2.2 + 0.15 * P
    if r["method"] in ("lora", "qlora"):
        fixed += 1.0 + 0.3 * P  # PEFT wraps every linear layer
    if r["backend"] == "deepspeed":
        fixed += 1.2 if r["zero"] == 2 else 7.0 + 1.0 * P
        if r["offload"] == "optimizer":
            fixed += 6.0 + 12.0 * P  # pinned fp32 host buffers, DeepSpeedCPUAdam set-up
    if r["method"] == "qlora":
        fixed += 0.5 + 0.9 * P  # quantising load from the saved checkpoint (2026-11-29: 0.6-0.8 s per B)
    if r["trainer"] in GENERATING and (r["beta"] or 0) > 0 and r["method"] == "full":
        fixed += 1.0 + 0.6 * P  # the reference loaded again by the trainer from the saved copy
    fixed += checkpoint_save_seconds(r, a)
    if r["trainer"] in ("dpo", "kto") and r["ref_model"] == "copy":
        fixed += 0.3
    if r["liger"]:
        fixed += 1.0  # Triton kernels compiled at the first step (a disk cache makes later rows cheaper)
    # GRPO/RLOO's first step (2026-11-29 and 12-01 records): 2.6-3.9 times a later one, the most for small models
    first = 2.5 * step + 4.0 if r["trainer"] in GENERATING else step + FIRST_STEP_EXTRA_SECONDS
    if r.get("expect") == "oom":
        return fixed + first
    return fixed + warmup * first + steps * step


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
    archs = {(r["model"], r.get("layers")): _arch(r) for r in rows}
    for r in rows:
        a = archs[(r["model"], r.get("layers"))]
        r["est_peak_gib"] = round(estimate_peak_gib(r, a), 1)
        r["est_seconds"] = round(estimate_seconds(r, a, warmup=warmup, steps=steps), 1)
    assign_splits(rows)
    rows.sort(key=lambda r: (r["est_seconds"], r["name"]))
    return rows


def coverage_key(r: dict) -> tuple:
    """Rows with the same key exercise the same code path (trainer, method, backend and offload)."""
    return (r["trainer"], r["method"], _backend_tag(r))


def model_family(r: dict) -> str:
    """The architecture family of a row: its model_type (inline arch or catalogue)."""
    if r.get("arch"):
        return r["arch"]["model_type"]
    from bench.models import resolve

    return resolve(r["model"]).model_type


def order_rows(rows: list[dict], how: str = "cost") -> list[dict]:
    """"cost": cheapest first (the default). "coverage": rows of a lower `priority` (default 1) first; within a
    priority, first (cheapest first) every row that brings a model family (model_type), a holdout stratum or a code
    path (coverage_key) no earlier row brought, then the rest cheapest first. A run cut short by its time budget
    still touches every family, stratum and code path."""
    by_cost = sorted(rows, key=lambda r: (r["est_seconds"], r["name"]))
    if how == "cost":
        return by_cost
    if how != "coverage":
        raise ValueError(f"unknown order {how!r}")
    levels = sorted({r.get("priority", 1) for r in rows})
    if len(levels) > 1:
        return [r for p in levels for r in order_rows([r for r in rows if r.get("priority", 1) == p], how)]
    first, seen = [], set()
    for r in by_cost:
        # a row planned near the memory limit is a path of its own: the allocator there is what the near-capacity
        # margin is measured on
        keys = {("family", model_family(r)), ("stratum", family(r)),
                ("path", *coverage_key(r), r.get("expect") == "near")}
        if not keys <= seen:
            seen |= keys
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
        if r["trainer"] not in TRAINERS:
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
        if r["trainer"] in GENERATING:
            ng, c = r.get("num_generations"), r.get("max_completion_len")
            if not ng or not c:
                problems.append(f"{name}: {r['trainer']} needs num_generations and max_completion_len")
            else:
                if (r["micro_batch"] * r["grad_accum"]) % ng:
                    # GRPOConfig: generation_batch_size (= micro_batch * grad_accum * world) % num_generations == 0
                    problems.append(f"{name}: micro_batch * grad_accum must be divisible by num_generations")
                if c >= r["seq_len"]:
                    problems.append(f"{name}: max_completion_len must be below seq_len")
            if ng and ng < 2:
                problems.append(f"{name}: num_generations must be at least 2 (the group baseline needs two)")
            if r["method"] != "full":
                problems.append(f"{name}: {r['trainer']} rows are full fine-tunes")
        if r["trainer"] in ("dpo", "kto") and r.get("ref_model") not in ("copy", "none"):
            problems.append(f"{name}: {r['trainer']} ref_model must be copy or none")
        if r["trainer"] == "kto" and r["micro_batch"] < 2:
            # KTOTrainer: the KL term pairs each prompt with another sample's completion of the same micro-batch
            problems.append(f"{name}: kto needs micro_batch >= 2")
        if r.get("layers") is not None and (not isinstance(r["layers"], int) or r["layers"] < 1):
            problems.append(f"{name}: layers must be a positive integer")
        if r.get("steps") is not None and (not isinstance(r["steps"], int) or r["steps"] < 1):
            problems.append(f"{name}: steps must be a positive integer")
        g = r.get("generation_steps")
        if g is not None and (not isinstance(g, int) or g < 1 or r["trainer"] not in GENERATING):
            problems.append(f"{name}: generation_steps must be a positive integer, on a GRPO/RLOO row")
        for flag in ("profile_step", "memory_history"):
            if r.get(flag) is not None and not isinstance(r[flag], bool):
                problems.append(f"{name}: {flag} must be true or false")
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
