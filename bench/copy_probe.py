"""The host-side copies around DeepSpeed's CPU optimizer step, timed apart, where a benchmark row runs.

    python -m bench.copy_probe --out bench/results/copy-probe-DATE.json [--elements N]

After DeepSpeedCPUAdam updates a partition's fp32 master weights in pinned host memory, the 16-bit weights go back to
the GPU, differently by stage (deepspeed 0.19.8):
- ZeRO-3 (stage3.py _reassign_or_swap_out_partitioned_parameters): `fp16_flat.data.copy_(fp32_flat.data)`, a blocking
  copy from host fp32 into the GPU's 16-bit partition. torch converts a blocking cross-device copy's dtype on the
  CPU (aten/src/ATen/native/cuda/Copy.cu copy_kernel_cuda: "For blocking transfers conversions are performed on
  CPU"), into a new, pageable tensor, then copies that to the GPU;
- ZeRO-1/2 (stage_1_and_2.py step, cpu_offload): the conversion into a pinned 16-bit host buffer, then a
  non_blocking copy to the GPU.
Each is timed here on one tensor of --elements fp32 values, and the parts apart (the CPU conversion into pageable and
into pinned memory, pageable and pinned host-to-GPU copies of the 16-bit tensor), with the CPUs this process may use
(run it under taskset to time fewer). Results are data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Any

from bench.rows_file import new_output_problem, save_json

REPEATS = 5


def timed_median(fn, torch, repeats: int = REPEATS, warmup: int = 1) -> float:
    """Median seconds of `repeats` calls (after `warmup` calls), the GPU synchronized around each."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    got = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        got.append(time.perf_counter() - t0)
    return statistics.median(got)


def measure(elements: int) -> dict[str, Any]:
    import torch

    master = torch.empty(elements, dtype=torch.float32, pin_memory=True).uniform_()
    gpu16 = torch.empty(elements, dtype=torch.bfloat16, device="cuda")
    pinned16 = torch.empty(elements, dtype=torch.bfloat16, pin_memory=True)
    pageable16 = torch.empty(elements, dtype=torch.bfloat16)
    seconds = {
        "zero3_blocking_copy": timed_median(lambda: gpu16.data.copy_(master.data), torch),
        "zero2_pinned_convert_then_async_copy": timed_median(
            lambda: (pinned16.copy_(master), gpu16.copy_(pinned16, non_blocking=True)), torch),
        "cpu_convert_to_new_tensor": timed_median(lambda: master.to(torch.bfloat16), torch),
        "cpu_convert_into_pinned": timed_median(lambda: pinned16.copy_(master), torch),
        "h2d_pageable_16bit": timed_median(lambda: gpu16.copy_(pageable16), torch),
        "h2d_pinned_16bit_async": timed_median(lambda: gpu16.copy_(pinned16, non_blocking=True), torch),
        "h2d_pinned_fp32_to_fp32": timed_median(lambda: torch.empty(elements, dtype=torch.float32, device="cuda")
                                          .copy_(master, non_blocking=True), torch),
    }
    return {"seconds": {k: round(v, 5) for k, v in seconds.items()},
            "ns_per_element": {k: round(v / elements * 1e9, 4) for k, v in seconds.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.copy_probe", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write (refused if it exists)")
    ap.add_argument("--elements", type=int, default=500_000_000, help="fp32 elements of the timed partition")
    a = ap.parse_args(argv)
    if a.elements < 1_000_000:
        print("--elements must be at least 1000000 (copies below that time their launch)", file=sys.stderr)
        return 2
    problem = new_output_problem(a.out)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: the probe times host-to-GPU copies", file=sys.stderr)
        return 1
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    out = {"elements": a.elements, "usable_cpus": usable, "logical_cpus": os.cpu_count(),
           "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name(0), "python": platform.python_version(), **measure(a.elements)}
    save_json(a.out, out)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
