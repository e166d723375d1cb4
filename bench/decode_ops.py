"""The ops one decode step of transformers' `generate` dispatches, counted on the CPU, with and without a padded batch.

    python -m bench.decode_ops --out bench/results/decode-ops-cpu-DATE.json [--models llama-3.2-1b,qwen2.5-0.5b]

Every op an eager PyTorch program runs reaches the dispatcher, and every one that is not a view (a view only rewrites
a tensor's metadata) launches a kernel when the tensors live on a GPU. So the non-view ops counted under a
TorchDispatchMode on the CPU are the decode step's kernel launches, without a GPU: Qwen2.5-0.5B at 24 layers counts
1,123 here where bench/decode_probe.py's profile counted 1,106 CUDA kernels on an H200
(bench/results/decode-probe-h200-2026-12-01.json). A one-element `.item()` (aten._local_scalar_dense) is counted
apart: on a GPU it waits for the queue (a sync), it launches no kernel.

For each model (random weights from the catalogue's architecture at 1 and 3 layers, bf16, SDPA, generate as TRL
calls it: bench.worker's sampling kwargs) and each batch kind, the ops of a generate of LONG tokens less those of
SHORT tokens, per decode step; the 3-layer count less the 1-layer one, halved, is the per-layer part, the rest the
step's own. "padded" left-pads every other prompt by one token, as GRPO/RLOO batches of prompts of different lengths
are (bench/decode_probe.py --padded). Results are data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from bench.rows_file import check_models, new_output_problem, probe_header, save_json

DEFAULT_MODELS = ("llama-3.2-1b", "qwen2.5-0.5b", "qwen3-0.6b", "gemma-3-1b")
SHORT, LONG = 4, 12
"""Completion lengths counted per case: (ops(LONG) - ops(SHORT)) / (LONG - SHORT) is one decode step."""
DEPTHS = (1, 3)
SYNC_OP = "aten._local_scalar_dense.default"


def count_generate(torch, arch: dict[str, Any], padded: bool, new_tokens: int) -> Counter:
    """Non-view ops by name of one generate of `new_tokens` tokens (4 prompts of 16 tokens)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import AutoModelForCausalLM

    from bench.models import hf_config
    from bench.worker import GRPO_TOP_K, special_ids

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: Counter = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view:
                self.ops[str(func)] += 1
            return func(*args, **(kwargs or {}))

    ids = special_ids(arch["vocab"])
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(hf_config(arch, special_ids=ids), dtype=torch.bfloat16,
                                             attn_implementation="sdpa").eval()
    inp = torch.randint(0, ids["unk"], (4, 16))
    mask = torch.ones_like(inp)
    if padded:
        mask[::2, 0] = 0
    counter = Count()
    with torch.no_grad(), counter:
        model.generate(input_ids=inp, attention_mask=mask, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                       do_sample=True, top_k=GRPO_TOP_K, top_p=1.0, temperature=1.0, remove_invalid_values=True,
                       pad_token_id=ids["pad"], eos_token_id=ids["eos"])
    return counter.ops


def _per_step(torch, arch: dict[str, Any], padded: bool) -> Counter:
    long, short = count_generate(torch, arch, padded, LONG), count_generate(torch, arch, padded, SHORT)
    long.subtract(short)
    return long


def count_model(torch, model_id: str, arch: dict[str, Any] | None = None) -> dict[str, Any]:
    """One record: per decode step, the kernels per layer and outside the layers, and the syncs, unpadded and padded,
    and the ops the padded step adds by name. `arch`: an architecture dict instead of the catalogue's row."""
    from bench.models import arch_dict, complete_arch, resolve

    base = complete_arch(arch) if arch is not None else arch_dict(resolve(model_id))
    out: dict[str, Any] = {"model": model_id, "layers": base["layers"]}
    steps = LONG - SHORT
    by_depth: dict[tuple[int, bool], Counter] = {}
    for padded in (False, True):
        for depth in DEPTHS:
            by_depth[(depth, padded)] = _per_step(torch, {**base, "layers": depth}, padded)
        lo, hi = by_depth[(DEPTHS[0], padded)], by_depth[(DEPTHS[1], padded)]

        def kernels(c: Counter) -> float:
            return sum(v for k, v in c.items() if k != SYNC_OP) / steps

        per_layer = (kernels(hi) - kernels(lo)) / (DEPTHS[1] - DEPTHS[0])
        out["padded" if padded else "unpadded"] = {
            "kernels_per_layer": round(per_layer, 2),
            "kernels_per_step": round(kernels(lo) - DEPTHS[0] * per_layer, 2),
            "syncs_per_step": round(lo.get(SYNC_OP, 0) / steps, 2),
            "kernels_at_full_depth": round(kernels(lo) + (base["layers"] - DEPTHS[0]) * per_layer, 1),
        }
    added = by_depth[(DEPTHS[0], True)].copy()
    added.subtract(by_depth[(DEPTHS[0], False)])
    out["padded_adds_per_step_at_one_layer"] = {k: round(v / steps, 2) for k, v in sorted(added.items()) if v}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.decode_ops", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated catalogue ids")
    a = ap.parse_args(argv)
    problem = new_output_problem(a.out)
    if problem:
        ap.error(problem)
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    check_models(ap, "--models", models)
    import torch

    result: dict[str, Any] = {
        **probe_header("bench.decode_ops", argv),
        "short_long": [SHORT, LONG], "depths": list(DEPTHS), "rows": [],
    }
    for m in models:
        result["rows"].append(count_model(torch, m))
        print(result["rows"][-1], flush=True)
        save_json(a.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
