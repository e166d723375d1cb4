"""The host's dispatch speed, measured where a benchmark row runs.

A launch-bound step (small models, DeepSpeed's per-module hooks, GRPO/RLOO generation with transformers' generate)
takes the speed of the host CPU, and machines of one GPU kind differ in it: the same GRPO configuration measured up to
77 % apart on H200 machines of one day (docs/accuracy.md, step time measured more than once). Recording this next to
each row lets records of different machines be put side by side. Imported lazily by the worker (torch is passed in).
"""

from __future__ import annotations

import os
import time

OPS = 20000
"""Ops timed per kind: about 0.2-0.3 s of a host at 8-14 us per op."""
PYTHON_CALLS = 200000


def sync(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def device(torch) -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def host_probe(torch, ops: int = OPS, python_calls: int = PYTHON_CALLS) -> dict[str, float]:
    """Microseconds per op of the host's dispatch: a 1-element CUDA add under no_grad (what a decode step's ops pay),
    the same op recording autograd (a training forward's), and a pure-Python call (the interpreter alone)."""
    x = torch.zeros(1, device=device(torch))
    w = torch.zeros(1, device=device(torch), requires_grad=True)

    def per_op(fn, n: int) -> float:
        fn(max(1, n // 10))  # warm the path (first-call dispatch, allocator) outside the timing
        sync(torch)
        t0 = time.perf_counter()
        fn(n)
        sync(torch)
        return (time.perf_counter() - t0) / n * 1e6

    def nograd(n):
        with torch.no_grad():
            for _ in range(n):
                x.add_(1.0)

    def autograd(n):
        y = w
        for _ in range(n):
            y = y * 1.0
        return y

    def python(n):
        def f(a):
            return a + 1

        a = 0
        for _ in range(n):
            a = f(a)
        return a

    out = {"nograd_op_us": per_op(nograd, ops), "autograd_op_us": per_op(autograd, ops),
           "python_call_us": per_op(python, python_calls)}
    return {k: round(v, 3) for k, v in out.items()}


def host_cpus(torch) -> dict[str, int | str | None]:
    """The CPUs a row's process could use: DeepSpeed's CPU Adam (ZeRO optimizer offload) runs one OpenMP thread per
    usable core, so its step time follows this count (advisor.model.speed offload_seconds takes Target.cpu_cores);
    the 1-GPU and 2-GPU H200 machines of bench/results have 16 and 32 cores. OMP_NUM_THREADS, when set, caps it."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        usable = os.cpu_count()
    return {"logical_cpus": os.cpu_count(), "usable_cpus": usable, "torch_threads": torch.get_num_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), **cpu_model()}


def cpu_model(path: str = "/proc/cpuinfo") -> dict[str, str | float | None]:
    """The host CPU's model name and its first core's clock (MHz) as the kernel reports them, None where unreadable
    (not Linux): the dispatch-bound steps and DeepSpeed's CPU optimizer step vary up to threefold between H200 hosts
    of one kind (docs/accuracy.md), and recording the CPU lets later records be grouped by it."""
    name = mhz = None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip(), value.strip()
                if key == "model name" and name is None:
                    name = value[:200]
                elif key == "cpu MHz" and mhz is None:
                    try:
                        mhz = float(value)
                    except ValueError:
                        pass
                if name is not None and mhz is not None:
                    break
    except OSError:
        pass
    return {"cpu_model": name, "cpu_mhz": mhz}
