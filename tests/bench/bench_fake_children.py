"""Child functions for the runner tests: they need no GPU and no training stack.

Each takes (row, ctx) like bench.worker.run_config. `row["behaviour"]` picks what it does; `row["arg"]` tunes it.
Importable by name ("bench_fake_children:child") for the spawn-mode tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import time


def child(row: dict, ctx: dict) -> dict:
    b = row.get("behaviour", "ok")
    if b == "ok":
        return {"status": "ok", "payload": row.get("arg"), "ctx_device": ctx.get("device"),
                "memory": {"peak_allocated_bytes": 123}, "timing": {"median_step_seconds": 0.5}}
    if b == "oom":
        return {"status": "oom", "error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                "memory": {"peak_allocated_bytes": 999}}
    if b == "sleep":
        time.sleep(float(row.get("arg", 60)))
        return {"status": "ok"}
    if b == "partial_then_hang":
        with open(ctx["partial_path"], "w") as f:
            json.dump({"status": "error", "phase": "train", "steps_done": 2,
                       "memory": {"peak_allocated_bytes": 456}}, f)
        time.sleep(600)
        return {"status": "ok"}
    if b == "grandchild_then_hang":
        p = subprocess.Popen(["sleep", "600"])
        with open(row["arg"], "w") as f:
            f.write(str(p.pid))
        time.sleep(600)
        return {"status": "ok"}
    if b == "exit3":
        os._exit(3)
    if b == "raise":
        raise RuntimeError("boom from the fake child")
    if b == "count_lines":
        # proves the parent appended earlier rows before starting this one
        with open(row["arg"]) as f:
            return {"status": "ok", "lines_seen": sum(1 for _ in f)}
    raise ValueError(b)
