"""What is alive on the GPU at the peak of a measured run: the allocations torch's caching allocator had handed out at
the moment its allocated total was highest, largest first, each with the Python frames that made it.

A benchmark row with `"memory_history": true` records torch's allocator history during training
(torch.cuda.memory._record_memory_history) and puts `live_at_peak(snapshot)` in its record as "memory_peak": used to
find which library call holds the memory a model term is missing, never to time a row (recording slows each
allocation)."""

from __future__ import annotations

from typing import Any

HISTORY_ENTRIES = 400_000
"""Allocator events kept (a ring buffer): a few training steps of a 1-2B model make well under this many."""
LIBRARY_MARKERS = ("deepspeed/", "transformers/", "trl/", "accelerate/", "peft/", "liger_kernel/", "torch/autograd",
                   "torch/utils/checkpoint", "torch/nn/")
"""Frames worth naming: where in the training stack an allocation was made."""


def _frames(entry: dict[str, Any], keep: int = 4) -> list[str]:
    """The innermost library frames of an allocation, as file:line function (site-packages prefix dropped)."""
    out = []
    for f in entry.get("frames") or []:
        name = str(f.get("filename", ""))
        if not any(m in name for m in LIBRARY_MARKERS):
            continue
        short = name.split("site-packages/")[-1]
        out.append(f"{short}:{f.get('line')} {f.get('name')}")
        if len(out) >= keep:
            break
    return out


def live_at_peak(snapshot: dict[str, Any], device: int = 0, top: int = 20) -> dict[str, Any]:
    """Replays the device's alloc / free events in order and returns the live set when the total was highest:
    its bytes (relative to what was live when recording began, which the replay cannot see), and the `top`
    largest allocations then alive with their frames."""
    traces = (snapshot.get("device_traces") or [[]])[device]

    def replay(stop: int | None) -> tuple[dict[int, dict[str, Any]], int, int]:
        live: dict[int, dict[str, Any]] = {}
        total = best = at = 0
        for i, ev in enumerate(traces if stop is None else traces[:stop + 1]):
            action, addr = ev.get("action"), ev.get("addr")
            if action == "alloc":
                live[addr] = ev
                total += int(ev.get("size") or 0)
                if total > best:
                    best, at = total, i
            elif action == "free_completed" and addr in live:
                total -= int(live.pop(addr).get("size") or 0)
        return live, best, at

    _, best, at = replay(None)  # where the total peaked, then the live set at that event
    live, _, _ = replay(at) if traces else ({}, 0, 0)
    largest = sorted(live.values(), key=lambda e: -int(e.get("size") or 0))[:top]
    return {"events": len(traces), "peak_bytes_above_start": best,
            "largest": [{"bytes": int(e.get("size") or 0), "frames": _frames(e)} for e in largest]}
