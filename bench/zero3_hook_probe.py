"""What DeepSpeed ZeRO-3's module hooks cost the host CPU, by kind of module, on one GPU.

    python -m bench.zero3_hook_probe --out bench/results/zero3-hook-probe-HOST-DATE.json [--modules N] [--hidden H]

ZeRO-3 registers a pre- and post-forward hook (and their backward twins) on every module of the model
(deepspeed/runtime/zero/parameter_offload.py); the pre hooks call the partitioned-parameter coordinator's
fetch_sub_module and the post hooks release_sub_module (partitioned_param_coordinator.py). A module whose parameters
are partitioned pays an all-gather submit, a wait and the release of the gathered weight; one whose parameters are all
under stage3_param_persistence_threshold (norms: the HF integration sets it to 10 x hidden) is never partitioned, so
its fetch finds every parameter available and its release frees none; a module without parameters of its own runs
the hooks' bookkeeping only. The speed model counts these hooks per module and pass (advisor.model.speed
DS_FETCH_SECONDS); this probe times the three kinds apart: a stack of --modules modules of one kind (bias-free
Linear H x H, an RMSNorm-like weight of H, a parameter-free module), each under ZeRO-3 and without DeepSpeed, on a
batch of a few tokens so that the GPU's work is shorter than the host's, and reports the host seconds ZeRO-3 adds per
module, in the forward and in the backward with the optimizer step (AdamW on both sides: torch's, foreach). Results are data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from typing import Any

from bench.copy_probe import timed_median
from bench.rows_file import new_output_problem, save_json

KINDS = ("partitioned", "persistent", "paramless")
TOKENS = 8
REPEATS = 7
WARMUP = 3
PERSISTENCE_FACTOR = 10
"""transformers' DeepSpeed integration sets stage3_param_persistence_threshold to 10 x hidden (integrations/
deepspeed.py trainer_config_finalize): a norm's weight (hidden values) stays gathered, a Linear's (hidden^2) does not."""


def _stack(torch, kind: str, n: int, hidden: int):
    nn = torch.nn

    class Norm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden))

        def forward(self, x):
            return x * self.weight

    class Paramless(nn.Module):
        def forward(self, x):
            return x * 1.0001

    def one():
        if kind == "partitioned":
            return nn.Linear(hidden, hidden, bias=False)
        return Norm() if kind == "persistent" else Paramless()

    # a trainable Linear at the end, so every kind has a backward through its stack
    return nn.Sequential(*[one() for _ in range(n)], nn.Linear(hidden, 1, bias=False))


def _timed(torch, fn) -> float:
    """Median seconds of REPEATS synchronised calls after WARMUP (bench.copy_probe.timed_median)."""
    return timed_median(fn, torch, repeats=REPEATS, warmup=WARMUP)


def measure(torch, deepspeed, kind: str, n: int, hidden: int) -> dict[str, Any]:
    x = torch.randn(1, TOKENS, hidden, device="cuda", dtype=torch.bfloat16)
    plain = _stack(torch, kind, n, hidden).to("cuda", torch.bfloat16)

    def plain_fwd():
        with torch.no_grad():
            plain(x)

    opt = torch.optim.AdamW(plain.parameters(), lr=1e-5, foreach=True)

    def plain_step():
        plain(x).float().sum().backward()
        opt.step()
        opt.zero_grad()

    base = {"forward_s": _timed(torch, plain_fwd), "step_s": _timed(torch, plain_step)}
    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-5, "torch_adam": True}},
              "zero_optimization": {"stage": 3, "overlap_comm": True, "contiguous_gradients": True,
                                    "reduce_bucket_size": hidden * hidden,
                                    "stage3_prefetch_bucket_size": int(0.9 * hidden * hidden),
                                    "stage3_param_persistence_threshold": PERSISTENCE_FACTOR * hidden}}
    engine, *_ = deepspeed.initialize(model=_stack(torch, kind, n, hidden), config=config)

    def ds_fwd():
        with torch.no_grad():
            engine(x)

    def ds_step():
        engine.backward(engine(x).float().sum())
        engine.step()

    zero = {"forward_s": _timed(torch, ds_fwd), "step_s": _timed(torch, ds_step)}
    persistent = sum(1 for p in engine.module.parameters() if getattr(p, "ds_persist", False))
    torch.cuda.empty_cache()
    fwd = (zero["forward_s"] - base["forward_s"]) / n
    step = (zero["step_s"] - base["step_s"]) / n
    return {"kind": kind, "modules": n, "hidden": hidden, "tokens": TOKENS, "persistent_params": persistent,
            "plain": base, "zero3": zero, "added_per_module_forward_s": fwd,
            "added_per_module_step_s": step, "added_per_module_backward_s": step - fwd}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.zero3_hook_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write (must not exist)")
    ap.add_argument("--modules", type=int, default=96, help="modules per stack (default 96)")
    ap.add_argument("--hidden", type=int, default=512, help="width of each module (default 512)")
    a = ap.parse_args(argv)
    if not 8 <= a.modules <= 2048:
        ap.error("--modules must be 8 to 2048: fewer hide the hooks in the timing noise")
    if not 64 <= a.hidden <= 8192 or a.hidden % 64:
        ap.error("--hidden must be a multiple of 64 from 64 to 8192")
    problem = new_output_problem(a.out)
    if problem:
        ap.error(f"--out {problem}")
    import torch

    if not torch.cuda.is_available():
        print("zero3_hook_probe: no CUDA GPU visible; ZeRO-3's hooks are timed on one", file=sys.stderr)
        return 1
    for k, v in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": os.environ.get("MASTER_PORT", "29517")}.items():
        os.environ.setdefault(k, v)
    import deepspeed

    from bench.host_probe import host_cpus

    deepspeed.init_distributed(dist_backend="nccl")
    result: dict[str, Any] = {
        "command": "python -m bench.zero3_hook_probe " + " ".join(argv if argv is not None else sys.argv[1:]),
        "python": platform.python_version(), "host_cpus": host_cpus(torch), "gpu": torch.cuda.get_device_name(),
        "versions": {"torch": torch.__version__, "deepspeed": deepspeed.__version__}, "cases": []}
    for kind in KINDS:
        result["cases"].append(measure(torch, deepspeed, kind, a.modules, a.hidden))
        c = result["cases"][-1]
        print(f"{kind:12s} +{c['added_per_module_forward_s'] * 1e6:7.1f} us/module forward, "
              f"+{c['added_per_module_backward_s'] * 1e6:7.1f} us backward ({c['persistent_params']} persistent)",
              flush=True)
        save_json(a.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
