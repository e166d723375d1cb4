"""Does a GRPO/RLOO batch whose prompt width the run has not seen before cost more than a repeated one?

    python -m bench.shape_probe --out bench/results/shape-probe-h100-DATE.json [--model llama-3.2-1b]

A bundle's GRPO step whose prompts came 511 tokens wide, after steps of 512, took three times the steady step in
every phase (bench/results/bundle-phases-h100-2026-12-06.jsonl). One hypothesis: Liger's Triton kernels are compiled
again for each new specialisation of their integer arguments (Triton specialises an integer on its divisibility by
16), so a new width pays compiles. This times, on one model with random weights (catalogue architecture, bf16,
SDPA), without and with Liger's kernels patched in as the Trainer patches them, a sequence of calls at the prompt
widths WIDTHS: each a `generate` as GRPOTrainer calls it (bench.worker's sampling kwargs, every other prompt one
token shorter and left-padded) then a forward + backward over the prompts and completions (the scoring pass and
the loss's backward), synchronised. Each call records its seconds and what it added to the one-time costs' counters
(bench.bundle_phases.one_time_counts: kernels Triton compiled, cudaMalloc calls, allocation retries). A width seen
before that still pays, or a new one that compiles nothing yet pays, tells which hypothesis holds: it was PyTorch's
cuDNN attention (shape-probe-h*-2026-12-06.json, profiled). `--attention no-cudnn` runs the same sequence without it,
`--liger off|on` one half only, and `--widths` any sequence (prompt widths padded to a multiple, say). Results are
data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from typing import Any

from bench.rows_file import new_output_problem, save_json

WIDTHS = (512, 512, 511, 512, 511, 500, 512, 500, 497, 512)
"""Prompt widths in call order: the first two warm the path; 511 and 500 come twice (a new width, then a seen one);
497 is new and, like 511, not divisible by 16; 500 is divisible by 4 only."""
BATCH = 64
NEW_TOKENS = 64
TRAIN_BATCH = 8
"""Sequences of the forward + backward after each generate (the scoring pass and backward of a micro-batch)."""
PROFILED_WIDTH_OFFSET = 11
"""--profile-new profiles a width this far below the narrowest of WIDTHS: new, and not divisible by 16."""
TOP_OPS = 25
LIGER_RUNS = {"both": (False, True), "off": (False,), "on": (True,)}
"""--liger: the sequence without Liger's kernels, with them, or both in turn."""


def set_attention(torch, choice: str) -> None:
    """--attention no-cudnn: SDPA without PyTorch's cuDNN backend, which builds and caches an execution graph per new
    key of q/k/v/mask sizes and strides (aten/src/ATen/native/cudnn/MHA.cpp); flash and memory-efficient attention
    build none. default: PyTorch's own choice (cuDNN first on Hopper in torch 2.11)."""
    torch.backends.cuda.enable_cudnn_sdp(choice != "no-cudnn")


def random_model(torch, model_id: str, arch: dict[str, Any] | None = None):
    """(model, special ids, device): the catalogue architecture of `model_id` (or `arch`) with random bf16 weights
    on the GPU if there is one, SDPA attention, seeded."""
    from transformers import AutoModelForCausalLM

    from bench.models import arch_dict, complete_arch, hf_config, resolve
    from bench.worker import special_ids

    arch = complete_arch(arch) if arch is not None else arch_dict(resolve(model_id))
    ids = special_ids(arch["vocab"])
    torch.manual_seed(0)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(dev):
        model = AutoModelForCausalLM.from_config(hf_config(arch, special_ids=ids), dtype=torch.bfloat16,
                                                 attn_implementation="sdpa")
    return model, ids, dev


def probe(torch, model_id: str, liger: bool, widths, save, rows: list[dict[str, Any]],
          arch: dict[str, Any] | None = None, batch: int = BATCH, new_tokens: int = NEW_TOKENS,
          profile_new: bool = False) -> None:
    """Append one record per width to `rows`, calling `save` after each. `arch`: an architecture dict instead of the
    catalogue's row for `model_id` (the tests use a tiny one). `profile_new`: then a width none of them had, twice,
    under torch.profiler (the first pays whatever a new width costs, the second is the same width seen)."""
    from bench.bundle_phases import count_deltas, one_time_counts
    from bench.worker import GRPO_TOP_K

    model, ids, dev = random_model(torch, model_id, arch)
    if liger:
        # what transformers' Trainer does for use_liger_kernel (trainer.py: _apply_liger_kernel_to_instance)
        from liger_kernel.transformers import _apply_liger_kernel_to_instance

        _apply_liger_kernel_to_instance(model=model)
    cuda = dev == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize()

    seen: set[int] = set()

    def call(w: int, i: int, profiled: bool = False) -> None:
        inp = torch.randint(0, ids["unk"], (batch, w), device=dev)
        mask = torch.ones_like(inp)
        mask[1::2, 0] = 0  # every other prompt one token shorter, left-padded, as GRPO pads a batch
        before = one_time_counts(torch, cuda)
        prof = None
        if profiled:
            from torch.profiler import ProfilerActivity, profile

            prof = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else []))
            prof.start()
        sync()
        t0 = time.perf_counter()
        model.eval()
        with torch.no_grad():
            out = model.generate(input_ids=inp, attention_mask=mask, max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=True, top_k=GRPO_TOP_K, top_p=1.0,
                                 temperature=1.0, remove_invalid_values=True, pad_token_id=ids["pad"],
                                 eos_token_id=ids["eos"])
        sync()
        t1 = time.perf_counter()
        mid = one_time_counts(torch, cuda)
        model.train()
        seq = out[:TRAIN_BATCH]
        logits = model(input_ids=seq, attention_mask=torch.ones_like(seq)).logits
        logits.float().mean().backward()
        model.zero_grad(set_to_none=True)
        del logits
        sync()
        t2 = time.perf_counter()
        row = {"model": model_id, "liger": liger, "call": i + 1, "prompt_width": w,
               "width_seen_before": w in seen, "generate_s": round(t1 - t0, 4),
               "forward_backward_s": round(t2 - t1, 4),
               "generate": count_deltas(before, mid), "forward_backward": count_deltas(mid, one_time_counts(torch, cuda))}
        if prof is not None:
            prof.stop()
            # the ops the host spent the call in: a one-time cost shows as an op far above its steady share
            row["profiled"] = True
            row["top_ops"] = [{"name": e.key, "calls": e.count, "self_host_s": round(e.self_cpu_time_total / 1e6, 6),
                               "device_s": round((getattr(e, "self_device_time_total", 0) or 0) / 1e6, 6)}
                              for e in sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:TOP_OPS]]
        rows.append(row)
        seen.add(w)
        print(json.dumps({k: v for k, v in row.items() if k != "top_ops"}), flush=True)
        save()

    for i, w in enumerate(widths):
        call(w, i)
    if profile_new:
        # one more width none of the calls had, under torch.profiler (its timing is the profiler's)
        call(min(widths) - PROFILED_WIDTH_OFFSET, len(widths), profiled=True)
        call(min(widths) - PROFILED_WIDTH_OFFSET, len(widths) + 1, profiled=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.shape_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--model", default="llama-3.2-1b", help="catalogue id (random weights from its architecture)")
    ap.add_argument("--widths", default=",".join(map(str, WIDTHS)), help="prompt widths, in call order")
    ap.add_argument("--profile-new", action="store_true",
                    help="then one new width twice under torch.profiler: the ops a new width's call spends its time in")
    ap.add_argument("--liger", choices=tuple(LIGER_RUNS), default="both",
                    help="run the sequence without Liger, with it, or both (default)")
    ap.add_argument("--attention", choices=("default", "no-cudnn"), default="default",
                    help="no-cudnn: SDPA without its cuDNN backend (flash or memory-efficient kernels, which build "
                         "no graph per shape)")
    a = ap.parse_args(argv)
    problem = new_output_problem(a.out)
    if problem:
        ap.error(problem)
    try:
        widths = tuple(int(x) for x in a.widths.split(","))
    except ValueError:
        ap.error("--widths takes comma-separated integers, e.g. --widths 512,511")
    if min(widths) < 2 + (PROFILED_WIDTH_OFFSET if a.profile_new else 0):
        ap.error("--widths must be at least 2 (every other prompt is one token shorter), "
                 f"and {2 + PROFILED_WIDTH_OFFSET} with --profile-new")
    from bench.models import resolve

    try:
        resolve(a.model)
    except Exception as exc:  # the catalogue's unknown-name error, with its suggestion
        ap.error(f"--model: {exc}")
    # a fresh Triton cache, so that every compile of this run is counted (bench.bundle_phases.triton_cache_dir)
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="shape-probe-triton-")
    import torch
    import transformers

    from bench.host_probe import host_probe

    set_attention(torch, a.attention)

    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "python": platform.python_version()}
    try:
        from importlib.metadata import version

        versions["liger-kernel"] = version("liger-kernel")
        versions["triton"] = version("triton")
    except Exception:  # a CPU machine without them still runs the eager half
        pass
    result: dict[str, Any] = {
        "command": "python -m bench.shape_probe " + " ".join(argv if argv is not None else sys.argv[1:]),
        "versions": versions, "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "batch": BATCH, "new_tokens": NEW_TOKENS, "train_batch": TRAIN_BATCH,
        "cudnn_sdp": bool(torch.backends.cuda.cudnn_sdp_enabled()), "host": host_probe(torch), "rows": []}

    def save() -> None:
        save_json(a.out, result)

    for liger in LIGER_RUNS[a.liger]:
        probe(torch, a.model, liger, widths, save, result["rows"], profile_new=a.profile_new)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    result["host_after"] = host_probe(torch)
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
