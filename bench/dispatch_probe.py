"""What a training micro-batch costs the host CPU, with and without gradient checkpointing, on one GPU.

    python -m bench.dispatch_probe --out bench/results/dispatch-probe-h200-DATE.json [--cases MODEL:METHOD:SEQ:MB,...]

For each case (the benchmark worker's model, built as bench/kernel_probe.py builds it: random bf16 weights, SDPA, bf16
autocast, TRL's fused LM head, PEFT LoRA or Liger's kernels by method), without and then with transformers' gradient
checkpointing (as the Trainer enables it), at two batch sizes:
- the case's own micro-batch: the wall time of the forward (up to TRL's metric sync, .item()) and of forward +
  backward, next to the GPU's kernel time in the same calls (torch.profiler): how dispatch and GPU work overlap;
- a tiny batch (TINY: one sequence of 32 tokens), where every kernel's GPU work is shorter than its launch, so the
  wall time is the host's dispatch: per micro-batch, per kernel launched, and what checkpointing adds per layer
  (and the step again with Python's garbage collector off).
Each profiled call also counts the CUDA runtime calls that make the host wait for the GPU (synchronizations and
device-to-host copies). Each case runs in its own process (Liger patches transformers' classes). Results are data
(one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

from bench import kernel_probe as KP
from bench.rows_file import save_json

CASES = (("qwen2.5-0.5b", "full", 512, 1), ("qwen2.5-0.5b", "full", 1024, 2), ("qwen2.5-0.5b", "full", 1024, 8),
         ("qwen2.5-0.5b", "full-liger", 1024, 8), ("smollm2-360m", "full", 2048, 8), ("llama-3.2-1b", "full", 1024, 2),
         ("qwen3-0.6b", "full", 1024, 4), ("qwen2.5-1.5b", "full", 2048, 4), ("llama-3.2-1b", "lora", 2048, 1),
         ("qwen2.5-0.5b", "lora", 1024, 8), ("gemma-3-1b", "full", 2048, 4), ("qwen2.5-3b", "full", 2048, 4))
"""(model, method, sequence length, micro-batch): the benchmark's host-bound configurations (small models, few
tokens), where the fitted checkpointing cost and the launch cost disagree most with the steps, and two GPU-bound ones
to see how the overlap behaves when the GPU sets the pace."""
TINY = (1, 32)
"""(rows, tokens) of the dispatch-bound batch."""
REPEATS = 5
WARMUP = 2
CASE_TIMEOUT_S = 240
WAIT_CALLS = ("Synchronize", "cudaMemcpy", "cuMemcpy")
"""Substrings of the CUDA runtime / driver calls after which the host has waited for the GPU."""
LAUNCH_CALLS = ("LaunchKernel",)


def _timed(torch, call, repeats: int = REPEATS) -> float:
    """Median wall seconds of call() followed by a device synchronization."""
    out = []
    for _ in range(repeats):
        KP._sync(torch)
        t0 = time.perf_counter()
        call()
        KP._sync(torch)
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def _profiled(torch, call) -> dict[str, Any]:
    """One call under torch.profiler (CPU + CUDA): kernels and their summed GPU time, the host's launch calls and the
    calls that waited for the GPU."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        call()
        KP._sync(torch)
    gpu_us, kernels, launches, waits, wait_us = 0.0, 0, 0, {}, 0.0
    for e in prof.events():
        dev = str(getattr(e, "device_type", ""))
        if dev.endswith("CUDA"):
            kernels += 1
            gpu_us += float(e.time_range.elapsed_us())
            continue
        if any(k in e.name for k in LAUNCH_CALLS):
            launches += 1
        elif any(k in e.name for k in WAIT_CALLS):
            waits[e.name] = waits.get(e.name, 0) + 1
            wait_us += float(e.time_range.elapsed_us())
    return {"kernels": kernels, "kernel_s": round(gpu_us / 1e6, 5), "launch_calls": launches,
            "wait_calls": waits, "wait_s": round(wait_us / 1e6, 5)}


def _calls(loss_of, step):
    def forward():
        loss_of().detach().float().item()  # TRL's metric sync ends the forward phase

    def forward_backward():
        step(sync=True)

    return forward, forward_backward


def _timings(torch, loss_of, step, gc_too: bool) -> dict[str, Any]:
    """Wall times of the forward and of forward + backward; with `gc_too`, the step again with Python's garbage
    collector off (how much of the host's time is its collections)."""
    import gc

    forward, forward_backward = _calls(loss_of, step)
    for _ in range(WARMUP):
        forward_backward()
    out = {"forward_s": round(_timed(torch, forward), 5), "step_s": round(_timed(torch, forward_backward), 5)}
    if gc_too:
        gc.collect()
        gc.disable()
        try:
            out["step_s_gc_off"] = round(_timed(torch, forward_backward), 5)
        finally:
            gc.enable()
    return out


def _profiles(torch, loss_of, step) -> dict[str, Any]:
    forward, forward_backward = _calls(loss_of, step)
    forward_backward()
    return {"forward": _profiled(torch, forward), "step": _profiled(torch, forward_backward)}


def measure(torch, model_id: str, method: str, seq: int, mb: int) -> dict[str, Any]:
    """The case without and with checkpointing, at its own batch and at TINY. Every wall time is taken before the
    first profiled call, so that none follows the profiler's CPU tracing; the profiles come last, for their kernel
    and call counts."""
    loss_of, step, meta = KP.build(torch, model_id, method, seq, mb)
    model = meta["model"]
    out: dict[str, Any] = {"model": model_id, "method": method, "seq_len": seq, "micro_batch": mb,
                           "layers": meta["layers"], "tiny": {"micro_batch": TINY[0], "seq_len": TINY[1]},
                           "no_ckpt": {}, "ckpt": {}}
    sizes = (("batch", (mb, seq)), ("tiny", TINY))
    for label, ckpt in (("no_ckpt", False), ("ckpt", True)):
        if ckpt:
            out["checkpoint_kwargs"] = KP.enable_checkpointing(model)
        for size, shape in sizes:
            meta["set_batch"](*shape)
            out[label][size] = _timings(torch, loss_of, step, gc_too=size == "tiny")
        if torch.cuda.is_available():
            out[label]["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
            torch.cuda.reset_peak_memory_stats()
    for label, ckpt in (("ckpt", True), ("no_ckpt", False)):
        if not ckpt:
            model.gradient_checkpointing_disable()
        for size, shape in sizes:
            meta["set_batch"](*shape)
            out[label][size].update(_profiles(torch, loss_of, step))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.dispatch_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="JSON file to write (must not exist); required")
    ap.add_argument("--cases", help="cases instead of CASES: model:method:seq_len:micro_batch,...")
    ap.add_argument("--one-case", help=argparse.SUPPRESS)  # the child process of one case (kernel_probe.isolated)
    a = ap.parse_args(argv)
    if a.one_case:
        return KP.one_case(measure, a.one_case)
    cases = KP.checked_cases(ap, a, CASES, "qwen2.5-0.5b:full:1024:2")
    import torch
    import transformers

    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU")
    result: dict[str, Any] = {
        "command": "python -m bench.dispatch_probe " + " ".join(argv if argv is not None else sys.argv[1:]),
        "gpu": torch.cuda.get_device_name(0), "python": platform.python_version(), "host_cpus": os.cpu_count(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__}, "cases": []}
    try:
        import peft

        result["versions"]["peft"] = peft.__version__
    except ImportError:
        pass
    from bench.host_probe import host_probe

    # this host's per-op dispatch, as the benchmark worker records it next to each row
    result["host"] = host_probe(torch)
    for case in cases:
        result["cases"].append(KP.isolated("bench.dispatch_probe", case, CASE_TIMEOUT_S))
        print(json.dumps(result["cases"][-1]), flush=True)
        save_json(a.out, result)
    save_json(a.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
