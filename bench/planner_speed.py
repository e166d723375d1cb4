"""How long the plan search takes (CPU only). `python -m bench.planner_speed` prints the median of several runs
for the largest case of the issue (405B on 16 nodes x 8 H100) and a few others. Not a test: timings vary by machine."""

from __future__ import annotations

import statistics
import time

from advisor.core.request import Request
from advisor.resolve import resolve_model, resolve_target
from advisor.search import search

CASES = {
    "405B, 16 nodes x 8 x H100": Request(model="405B", gpu="H100-80GB", gpus=8, nodes=16),
    "70B, 8 x H100": Request(model="70B", gpu="H100-80GB", gpus=8),
    "8B at 128k tokens, 8 x H100": Request(model="8B", gpu="H100-80GB", gpus=8, seq_len=131072),
    "7B GRPO, 8 x H100 (vLLM split searched)": Request(model="7B", trainer="grpo", gpu="H100-80GB", gpus=8),
    "0.5B, 1 x H200": Request(model="0.5B", gpu="H200", gpus=1),
}


def main(repeats: int = 7) -> None:
    for name, req in CASES.items():
        model, target = resolve_model(req), resolve_target(req)
        search(req, model, target)  # warm caches (catalogue, rule registry)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            decision = search(req, model, target)
            times.append(time.perf_counter() - t0)
        print(f"{name:42s} {statistics.median(times) * 1e3:7.1f} ms  ({decision.considered} estimates)")


if __name__ == "__main__":
    main()
