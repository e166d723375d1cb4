"""What a TRL step spends outside its micro-batches on one GPU: gradient clipping, the optimizer step, zero_grad.

    python -m bench.optimizer_probe --out bench/results/optimizer-probe-h200-DATE.json [--cases MODEL:full:SEQ:MB,...]

Each case builds the benchmark's model (bench.kernel_probe.build: random bf16 weights, TRL's fused LM head; a model
id `ID@L<n>` cuts it to n decoder layers), runs one forward and backward to fill the gradients, then times, each
synchronised and repeated: torch.nn.utils.clip_grad_norm_ (the Trainer's max_grad_norm = 1.0), torch.optim.AdamW
with fused=True (the Trainer's default optim "adamw_torch_fused") and zero_grad(set_to_none=True). The speed model's
optimizer_step_seconds is a bandwidth term over the trained parameters (advisor/model/speed.py): this probe measures
it apart from the micro-batches. Results are data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Any

from bench.copy_probe import REPEATS, timed_median
from bench.kernel_probe import checked_cases, isolated, one_case
from bench.rows_file import save_json

CASES = (("qwen3-30b-a3b@L8", "full", 1024, 2), ("mixtral-8x7b@L4", "full", 1024, 2),
         ("mistral-7b-v0.3", "full", 1024, 2), ("qwen2.5-7b", "full", 1024, 2), ("qwen2.5-1.5b", "full", 1024, 2),
         ("gemma-3-1b", "full", 1024, 2), ("phi-3-mini", "full", 1024, 2))
"""MoE models at reduced depth next to dense models of about their size and smaller ones (the micro-batch only
fills the gradients: its size does not matter)."""
CASE_TIMEOUT_S = 300


def measure(torch, model_id: str, method: str, seq: int, mb: int) -> dict[str, Any]:
    from bench.kernel_probe import build

    if method != "full":
        raise ValueError("the optimizer probe trains every parameter: method must be full")
    loss_of, _, meta = build(torch, model_id, method, seq, mb)
    model = meta["model"]
    params = [p for p in model.parameters() if p.requires_grad]
    loss_of().backward()
    with_grad = [p for p in params if p.grad is not None]
    grads = [p.grad for p in with_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, fused=True)
    opt.step()  # allocates the moments (the first step of a run), not timed
    saved = [g.clone() for g in grads]

    def restore() -> None:
        for p, g in zip(with_grad, saved, strict=True):
            p.grad = g.clone()

    # median of REPEATS synchronised runs after a warm-up (bench.copy_probe.timed_median)
    clip = timed_median(lambda: torch.nn.utils.clip_grad_norm_(params, 1.0), torch)
    step = timed_median(opt.step, torch)
    zero_runs = []
    for _ in range(REPEATS):  # zero_grad once per restored set of gradients
        restore()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        zero_runs.append(time.perf_counter() - t0)
    return {"model": model_id, "method": method, "seq_len": seq, "micro_batch": mb, "layers": meta["layers"],
            "params": sum(p.numel() for p in params), "tensors": len(params),
            "param_dtype": str(params[0].dtype), "grad_dtype": str(grads[0].dtype) if grads else None,
            "clip_grad_norm_s": round(clip, 6), "adamw_fused_step_s": round(step, 6),
            "zero_grad_s": round(statistics.median(zero_runs), 6)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.optimizer_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="JSON file to write (must not exist); required")
    ap.add_argument("--cases", help="models to time instead of CASES: model:full:seq_len:micro_batch,...")
    ap.add_argument("--one-case", help=argparse.SUPPRESS)  # the child process of one case (kernel_probe.isolated)
    a = ap.parse_args(argv)
    if a.one_case:
        return one_case(measure, a.one_case)
    cases = checked_cases(ap, a, CASES, "qwen2.5-1.5b:full:1024:2")
    if any(method != "full" for _, method, _, _ in cases):
        ap.error("--cases: the optimizer probe trains every parameter, so each case's method must be full")
    import torch
    import transformers

    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU")
    result: dict[str, Any] = {
        "command": "python -m bench.optimizer_probe " + " ".join(argv if argv is not None else sys.argv[1:]),
        "gpu": torch.cuda.get_device_name(0), "python": platform.python_version(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__}, "cases": []}
    save_json(a.out, result)
    for case in cases:
        result["cases"].append(isolated("bench.optimizer_probe", case, CASE_TIMEOUT_S))
        print(json.dumps(result["cases"][-1]), flush=True)
        save_json(a.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
