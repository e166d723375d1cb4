"""python -m bench.verify_summary VERIFY_JSON NAME: one line of what `trl-advisor verify --json` wrote (passed,
measured against predicted peak memory and tokens/s), for the GPU check scripts' logs."""

from __future__ import annotations

import json
import sys


def summary(path: str, name: str) -> str:
    try:
        with open(path) as f:
            v = json.load(f)
    except (OSError, ValueError):
        return f"{name}: verify wrote no JSON (see its log)"
    m, p, e = v["measured"], v["predicted"], v["error_pct"]
    return (f"{name}: passed={v['passed']} peak measured {m.get('per_gpu_peak_bytes')} predicted "
            f"{p.get('per_gpu_peak_bytes')} ({e.get('per_gpu_peak_bytes')}%), tokens/s measured "
            f"{m.get('tokens_per_second')} predicted {p.get('tokens_per_second')} ({e.get('tokens_per_second')}%)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m bench.verify_summary VERIFY_JSON NAME")
    print(summary(sys.argv[1], sys.argv[2]))
