"""Where a GKD micro-batch's time goes beyond the forward and backward of its two models, on one GPU.

    python -m bench.gkd_probe --out bench/results/gkd-probe-h100-DATE.json [--models qwen2.5-0.5b,qwen3-0.6b]

Two parts, each timed apart with TRL's own code (trl.experimental.gkd.GKDTrainer, 1.16):

- loss: GKDTrainer.compute_loss after the two forwards. accelerate's mixed-precision wrapper returns both models'
  logits in fp32 (convert_outputs_to_fp32), then generalized_jsd_loss (beta 0.5, temperature 1, the prompt's labels
  -100) runs over [tokens, vocab] tensors, compute_loss calls empty_cache() before returning, and the backward runs
  back into the bf16 logits. Timed for several tokens x vocab, with and without that empty_cache(), to say how many
  bytes per logit element the loss streams and what the emptied cache costs.
- generation: GKDTrainer.generate_on_policy_outputs with the trainer's own GenerationConfig (sampling at temperature
  0.9, top_k 0, max_new_tokens), as the bundles run it (SDPA without cuDNN in generate, Liger's kernels when asked),
  at two completion lengths: the difference over the extra tokens is one decode step, the rest the call's fixed cost
  and the prefill. With use_cache False (GKD's setting under gradient checkpointing) the step is a forward over the
  whole sequence so far.

Random logits and random weights from the catalogue's architecture; the host's dispatch speed is recorded beside it
(bench/host_probe.py). Results are data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from bench.host_probe import device as _device
from bench.host_probe import host_probe
from bench.host_probe import sync as _sync
from bench.rows_file import check_models, new_output_problem, probe_header, save_json

LOSS_CASES = ((1, 1024, 151936), (2, 1024, 151936), (4, 1024, 151936), (4, 1024, 128256), (2, 1024, 262144),
              (8, 1024, 49152), (16, 1024, 32768))
"""(micro-batch, tokens per row, vocabulary) of the loss cases: the catalogue's vocabularies (Qwen 151,936, Llama-3
128,256, Gemma-3 262,144, SmolLM2 49,152, Mistral 32,768), at most about 6.5e8 logit elements (17 fp32 copies and
the logits fit one 80 GB GPU)."""
DEFAULT_MODELS = ("qwen2.5-0.5b", "qwen3-0.6b")
GEN_BATCHES = (4, 16)
GEN_PROMPT = 512
"""The bundles' synthetic GKD rows: half the sequence is the user turn, the prompt GKD generates from."""
SHORT, LONG = 8, 40
REPEATS = 3


VIEW_OPS = ("slice", "detach", "select", "unsqueeze", "expand", "view", "alias", "lift_fresh", "t.default",
            "transpose", "permute", "squeeze", "_unsafe_view")
"""aten ops that return a view of their input: no kernel reads or writes memory."""


def loss_bytes_per_logit(torch, b: int = 2, s: int = 64, vocab: int = 4096) -> dict[str, float]:
    """Bytes the loss's ops read and write per [tokens, vocab] element, forward and backward apart, counted on the CPU
    by intercepting every aten op of the same code as loss_case (inputs and outputs of more than 1,000 elements: the
    [tokens, vocab] ones; views left out). A floor: ops that run several kernels (logsumexp's max, subtract, exp,
    sum, log and add) count once."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from trl.experimental.gkd import GKDTrainer

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.bytes = 0
            self.kernels = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = str(func)
            if not any(v in name for v in VIEW_OPS):
                big = [t for t in tree_flatten((args, kwargs, out))[0]
                       if isinstance(t, torch.Tensor) and t.numel() > 1000]
                self.bytes += sum(t.numel() * t.element_size() for t in big)
                self.kernels += 1 if big else 0
            return out

    student = torch.randn(b, s, vocab, dtype=torch.bfloat16, requires_grad=True)
    teacher = torch.randn(b, s, vocab, dtype=torch.bfloat16)
    labels = torch.randint(0, vocab - 4, (b, s))
    labels[:, : s // 2] = -100
    fwd, bwd = Count(), Count()
    with fwd:
        shifted = labels[:, 1:]
        loss = GKDTrainer.generalized_jsd_loss(student.float()[:, :-1, :], teacher.float()[:, :-1, :],
                                               labels=shifted, beta=0.5, num_items_in_batch=(shifted != -100).sum())
    with bwd:
        loss.backward()
    elements = b * (s - 1) * vocab
    return {"forward": round(fwd.bytes / elements, 1), "backward": round(bwd.bytes / elements, 1),
            "forward_kernels": fwd.kernels, "backward_kernels": bwd.kernels}


DECODE_PROBES = ("bench/results/decode-probe-h200-2026-12-01.json", "bench/results/decode-probe-h100-2026-12-05.json",
                 "bench/results/decode-probe-h100-2026-12-05-qwen25.json")


def generate_fixed_seconds(paths: tuple[str, ...] = DECODE_PROBES, max_rows: int = 16) -> tuple[float, int]:
    """(median, cases) of a generate call's fixed cost and prefill the decode probes measured at up to `max_rows`
    rows (the time of a call of few tokens less that many decode steps): advisor.model.gkd.GENERATE_CALL_SECONDS."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    values = [r["fixed_and_prefill_s"] for p in paths for r in json.loads((root / p).read_text())["rows"]
              if r["batch"] <= max_rows]
    return statistics.median(values), len(values)


LOSS_PROBES = ("bench/results/gkd-probe-h100-2026-12-07.json",)
"""The loss cases timed on a GPU (python -m bench.gkd_probe): advisor.model.gkd.LOSS_BW_EFFICIENCY is read off them."""


def loss_bandwidth_efficiency(paths: tuple[str, ...] = LOSS_PROBES, *, empty_cache: bool = True) -> dict[str, float]:
    """The share of its GPU's catalogue HBM bandwidth the loss sustained in each probe's loss cases, as the trainer
    runs it (compute_loss's empty_cache() included) or without it: the bytes it streams (LOSS_BYTES_PER_LOGIT per
    [tokens, vocab] element) over the case's seconds. {"median", "low", "high", "cases", "empty_cache_share"}: the
    last is the median share of the loss's time the emptied cache adds."""
    from pathlib import Path

    from advisor.catalog import match_nvml_name
    from advisor.model import gkd as MGKD
    from advisor.model.units import GB

    root = Path(__file__).resolve().parents[1]
    rates, extra = [], []
    for rel in paths:
        doc = json.loads((root / rel).read_text())
        gpu = match_nvml_name(doc["gpu"], None)
        peak = gpu.mem_bw_gbps * GB
        rows = [r for r in doc["rows"] if r["part"] == "loss"]
        by_case = {(r["micro_batch"], r["tokens_per_row"], r["vocab"], r["empty_cache"]): r for r in rows}
        for r in rows:
            if r["empty_cache"] == empty_cache:
                rates.append(MGKD.LOSS_BYTES_PER_LOGIT * r["logit_elements"] / r["seconds"] / peak)
            if r["empty_cache"]:
                plain = by_case.get((r["micro_batch"], r["tokens_per_row"], r["vocab"], False))
                if plain:
                    extra.append(r["seconds"] / plain["seconds"] - 1)
    return {"median": statistics.median(rates), "low": min(rates), "high": max(rates), "cases": len(rates),
            "empty_cache_share": statistics.median(extra) if extra else 0.0}


def _timed(torch, fn) -> float:
    _sync(torch)
    t0 = time.perf_counter()
    fn()
    _sync(torch)
    return time.perf_counter() - t0


def loss_case(torch, b: int, s: int, vocab: int, empty_cache: bool) -> dict[str, Any]:
    from trl.experimental.gkd import GKDTrainer

    dev = _device(torch)
    x = {"student": torch.randn(b, s, vocab, device=dev, dtype=torch.bfloat16, requires_grad=True),
         "teacher": torch.randn(b, s, vocab, device=dev, dtype=torch.bfloat16),
         "labels": torch.randint(0, vocab - 4, (b, s), device=dev)}
    x["labels"][:, : s // 2] = -100  # the prompt half, as GKD's collator masks it

    def step() -> None:
        s_logits, t_logits = x["student"].float(), x["teacher"].float()  # accelerate's convert_outputs_to_fp32
        labels = x["labels"][:, 1:]
        loss = GKDTrainer.generalized_jsd_loss(s_logits[:, :-1, :], t_logits[:, :-1, :], labels=labels,
                                               beta=0.5, num_items_in_batch=(labels != -100).sum())
        if empty_cache:
            torch.cuda.empty_cache()  # GKDTrainer.compute_loss
        loss.backward()
        x["student"].grad = None

    step()  # warm-up: the allocator's segments, the kernels' first launch
    seconds = statistics.median(_timed(torch, step) for _ in range(REPEATS))
    torch.cuda.reset_peak_memory_stats()
    step()
    peak = torch.cuda.max_memory_allocated()
    x.clear()
    torch.cuda.empty_cache()
    elements = b * (s - 1) * vocab
    return {"micro_batch": b, "tokens_per_row": s, "vocab": vocab, "empty_cache": empty_cache,
            "logit_elements": elements, "seconds": round(seconds, 5), "peak_allocated_bytes": peak}


def generation_case(torch, model, ids: dict[str, int], batch: int, use_cache: bool) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import GenerationConfig
    from trl.experimental.gkd import GKDTrainer

    dev = _device(torch)
    prompts = torch.randint(0, ids["unk"], (batch, GEN_PROMPT), device=dev)
    inputs = {"prompts": prompts, "prompt_attention_mask": torch.ones_like(prompts)}

    def call(n: int) -> None:
        # GKDTrainer.__init__'s generation_kwargs; eos None: no row stops early, as random weights rarely do
        config = GenerationConfig(max_new_tokens=n, temperature=0.9, do_sample=True, top_k=0, top_p=1.0,
                                  use_cache=use_cache, pad_token_id=ids["pad"], eos_token_id=None)
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            ids_out, _, _ = GKDTrainer.generate_on_policy_outputs(model, inputs, config)
        assert ids_out.shape[1] == GEN_PROMPT + n, ids_out.shape

    call(SHORT)  # warm-up
    short = statistics.median(_timed(torch, lambda: call(SHORT)) for _ in range(REPEATS))
    long = statistics.median(_timed(torch, lambda: call(LONG)) for _ in range(REPEATS))
    step = (long - short) / (LONG - SHORT)
    return {"batch": batch, "prompt": GEN_PROMPT, "use_cache": use_cache,
            "seconds_short": round(short, 4), "seconds_long": round(long, 4),
            "decode_step_ms": round(step * 1e3, 3), "fixed_and_prefill_s": round(short - SHORT * step, 4),
            "host": host_probe(torch)}


def probe_generation(torch, model_id: str, liger: bool, rows: list[dict[str, Any]], save) -> None:
    from bench.models import arch_dict, random_causal_lm, resolve
    from bench.worker import special_ids

    arch = arch_dict(resolve(model_id))
    if liger:
        import liger_kernel.transformers as lk

        getattr(lk, f"apply_liger_kernel_to_{arch['model_type']}")()  # the bundles' apply_liger_kernels
    ids = special_ids(arch["vocab"])
    model = random_causal_lm(torch, arch, ids, _device(torch))
    cases = [(g, True) for g in GEN_BATCHES] + [(GEN_BATCHES[0], False)]
    for g, cache in cases:
        row = {"part": "generation", "model": model_id, "layers": arch["layers"], "liger": liger,
               **generation_case(torch, model, ids, g, cache)}
        rows.append(row)
        print(json.dumps(row), flush=True)
        save()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gkd_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated catalogue ids")
    ap.add_argument("--parts", default="loss,generation", help="comma-separated: loss, generation")
    a = ap.parse_args(argv)
    problem = new_output_problem(a.out)
    if problem:
        ap.error(problem)
    parts = {p.strip() for p in a.parts.split(",")}
    if not parts or parts - {"loss", "generation"}:
        ap.error("--parts takes loss, generation or both, comma-separated")
    models = [m.strip() for m in a.models.split(",")]
    check_models(ap, "--models", models)
    import torch

    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU")
    result: dict[str, Any] = {
        **probe_header("bench.gkd_probe", argv), "gpu": torch.cuda.get_device_name(0),
        "loss_bytes_per_logit": loss_bytes_per_logit(torch),
        "logical_cpus": os.cpu_count(), "load_average": list(os.getloadavg()),
        "short_long": [SHORT, LONG], "repeats": REPEATS, "host": host_probe(torch), "rows": [],
    }

    def save() -> None:
        save_json(a.out, result)  # after every case: a run cut short keeps what it measured

    if "loss" in parts:
        for b, s, vocab in LOSS_CASES:
            for empty in (True, False):
                row = {"part": "loss", **loss_case(torch, b, s, vocab, empty)}
                result["rows"].append(row)
                print(json.dumps(row), flush=True)
                save()
    if "generation" in parts:
        for m in models:
            for liger in ((False, True) if m.startswith("qwen3") else (False,)):
                probe_generation(torch, m, liger, result["rows"], save)
                torch.cuda.empty_cache()
    result["host_after"] = host_probe(torch)
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
