"""The host's dispatch speed, measured by `trl-advisor verify` before its run.

A step the host CPU sets (small models, DeepSpeed's per-tensor hooks, transformers' generate without vLLM) runs at
the speed of the host, and machines of one GPU kind differ in it: a configuration's records on H200 hosts measured
6.0-13.7 us per 1-element CUDA op and their steps followed (docs/accuracy.md, step time measured more than once). So
verify times that op here, in a child Python with the run's own torch (the advisor imports no torch), and reports
the files' estimate for this host (Target.host_op_seconds, advisor.model.speed.host_factor) beside the median host's
prediction, which the run is judged against (session._for_host says why). The child times exactly what the
calibration's records measured (bench/host_probe.py nograd_op_us: 20,000 in-place adds on a 1-element CUDA tensor
under no_grad after a tenth as many to warm the path, twice, the mean), so the figure is comparable with
REFERENCE_HOST_OP_SECONDS. A few seconds, mostly torch's import; no GPU, no torch or a child that fails or hangs
leaves the host unmeasured, and the report says why.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass

OPS = 20_000
ROUNDS = 2
TIMEOUT_SECONDS = 120.0
"""torch's import and CUDA's start-up on a cold machine take most of it; the ops themselves about 0.2 s per round."""

PROBE_CODE = f"""
import json, time
try:
    import torch
except Exception as exc:
    print(json.dumps({{"error": "torch does not import: " + type(exc).__name__}})); raise SystemExit(0)
if not torch.cuda.is_available():
    print(json.dumps({{"error": "no CUDA device"}})); raise SystemExit(0)
x = torch.zeros(1, device="cuda")
def run(n):
    with torch.no_grad():
        for _ in range(n):
            x.add_(1.0)
seconds = []
for _ in range({ROUNDS}):
    run({OPS} // 10)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    run({OPS})
    torch.cuda.synchronize()
    seconds.append((time.perf_counter() - t0) / {OPS})
print(json.dumps({{"op_seconds": sum(seconds) / len(seconds), "rounds": seconds,
                  "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}}))
"""


@dataclass(frozen=True)
class HostSpeed:
    op_seconds: float | None
    """Seconds per 1-element CUDA op under no_grad; None: not measured (`detail` says why)."""
    detail: str

    def to_json(self) -> dict:
        return {"op_seconds": self.op_seconds, "detail": self.detail}


def parse(stdout: str) -> HostSpeed:
    """The child's last output line: {"op_seconds": s, ...} or {"error": why}."""
    lines = [line for line in (stdout or "").strip().splitlines() if line.strip()]
    try:
        doc = json.loads(lines[-1]) if lines else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        return HostSpeed(None, "the host probe printed no result")
    op = doc.get("op_seconds")
    if isinstance(op, (int, float)) and not isinstance(op, bool) and math.isfinite(op) and 0 < op < 1:
        return HostSpeed(float(op), f"{op * 1e6:.2f} us per 1-element CUDA op under no_grad")
    why = doc.get("error")
    return HostSpeed(None, str(why)[:200] if isinstance(why, str) else "the host probe gave no op time")


def measure(python: str | None = None, timeout: float = TIMEOUT_SECONDS, env: dict | None = None) -> HostSpeed:
    """Time the host's op dispatch in a child `python` (default: this interpreter, the run's environment)."""
    try:
        proc = subprocess.run([python or sys.executable, "-c", PROBE_CODE], capture_output=True, text=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return HostSpeed(None, f"the host probe took longer than {timeout:.0f} s")
    except OSError as exc:
        return HostSpeed(None, f"the host probe did not start: {exc.strerror or exc}")
    if proc.returncode != 0:
        return HostSpeed(None, f"the host probe exited {proc.returncode}")
    return parse(proc.stdout)
