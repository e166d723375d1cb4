"""What Liger's kernels cost next to the eager ops they replace, per call: host dispatch and GPU time.

    python -m bench.liger_probe --out liger-probe.json [--hidden 896,2048] [--tokens 65536]

The speed model counts a Liger launch like an ATen kernel's (advisor.model.speed LAUNCH_SECONDS) and its HBM traffic
at the elementwise rate; plans with Liger measured slower than predicted more often than their twins without it
(docs/accuracy.md). This times, for Llama's three patched ops (RMSNorm, RoPE on q and k, SiLU-gated product), Liger's
module or function and transformers' eager one:

- host: seconds per call of a tiny input (the GPU idle, so the host's dispatch sets the rate), forward under no_grad
  (a decode step) and forward + backward (a training micro-batch), over CALLS calls;
- gpu: forward + backward of a training-sized input ([tokens, hidden], [tokens, intermediate], q/k of [1, heads,
  tokens, 64]) timed by CUDA events, the median of REPEATS.

Liger needs CUDA (Triton); without it only the eager rows are timed. Writes one JSON document.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

CALLS = 2000
REPEATS = 20


def _sync(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def host_seconds(torch, fn, calls: int = CALLS) -> float:
    """Seconds per call of fn() issued back to back, the queue drained at the end."""
    for _ in range(max(1, calls // 10)):
        fn()
    _sync(torch)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    _sync(torch)
    return (time.perf_counter() - t0) / calls


def gpu_seconds(torch, fn, repeats: int = REPEATS) -> float | None:
    """Median GPU seconds of fn() by CUDA events; None without CUDA."""
    if not torch.cuda.is_available():
        return None
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return statistics.median(times)


def ops(torch, hidden: int, tokens: int, liger: bool, dev: str):
    """{op: (make_fn(size) -> (forward_nograd, forward_backward))} for Llama's RMSNorm, RoPE and SwiGLU product."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm, apply_rotary_pos_emb

    dt = torch.bfloat16
    heads, head_dim = max(1, hidden // 64), 64
    inter = int(hidden * 8 / 3) // 64 * 64

    def rmsnorm(n: int):
        if liger:
            from liger_kernel.transformers.rms_norm import LigerRMSNorm
            m = LigerRMSNorm(hidden).to(dev, dt)
        else:
            m = LlamaRMSNorm(hidden).to(dev, dt)
        x = torch.randn(n, hidden, device=dev, dtype=dt, requires_grad=True)
        g = torch.randn(n, hidden, device=dev, dtype=dt)
        return (lambda: m(x.detach())), (lambda: m(x).backward(g))

    def swiglu(n: int):
        a = torch.randn(n, inter, device=dev, dtype=dt, requires_grad=True)
        b = torch.randn(n, inter, device=dev, dtype=dt, requires_grad=True)
        g = torch.randn(n, inter, device=dev, dtype=dt)
        if liger:
            from liger_kernel.ops.swiglu import LigerSiLUMulFunction
            f = LigerSiLUMulFunction.apply
        else:
            def f(x, y):
                return torch.nn.functional.silu(x) * y
        return (lambda: f(a.detach(), b.detach())), (lambda: f(a, b).backward(g))

    def rope(n: int):
        q = torch.randn(1, heads, n, head_dim, device=dev, dtype=dt, requires_grad=True)
        k = torch.randn(1, max(1, heads // 4), n, head_dim, device=dev, dtype=dt, requires_grad=True)
        cos = torch.randn(1, n, head_dim, device=dev, dtype=dt)
        sin = torch.randn(1, n, head_dim, device=dev, dtype=dt)
        gq, gk = torch.randn_like(q), torch.randn_like(k)
        if liger:
            from liger_kernel.transformers.rope import liger_rotary_pos_emb as f
        else:
            f = apply_rotary_pos_emb

        def fwd_bwd():
            qo, ko = f(q, k, cos, sin)
            torch.autograd.backward((qo, ko), (gq, gk))

        return (lambda: f(q.detach(), k.detach(), cos, sin)), fwd_bwd

    return {"rmsnorm": rmsnorm, "swiglu": swiglu, "rope": rope}


def probe(torch, hiddens: list[int], tokens: int, calls: int = CALLS, repeats: int = REPEATS) -> list[dict]:
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    for hidden in hiddens:
        for liger in ((False, True) if dev == "cuda" else (False,)):
            for name, make in ops(torch, hidden, tokens, liger, dev).items():
                tiny_nograd, tiny_train = make(8)
                with torch.no_grad():
                    nograd = host_seconds(torch, tiny_nograd, calls)
                train = host_seconds(torch, tiny_train, calls)
                _, big_train = make(tokens)
                rows.append({"op": name, "impl": "liger" if liger else "eager", "hidden": hidden,
                             "host_forward_nograd_s": nograd, "host_forward_backward_s": train,
                             "gpu_forward_backward_s": gpu_seconds(torch, big_train, repeats), "tokens": tokens})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(h) for h in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated whole numbers, e.g. 896,2048") from None
    if any(h < 64 or h % 64 for h in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: each hidden size a multiple of 64 (heads of 64)")
    return sizes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.liger_probe", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--hidden", type=_sizes, default=[896, 2048],
                   help="comma-separated hidden sizes, multiples of 64 (default: 0.5B's and 1B's)")
    p.add_argument("--tokens", type=int, default=65536, help="tokens of the GPU-timed input (default 64 x 1024)")
    p.add_argument("--calls", type=int, default=CALLS)
    args = p.parse_args(argv)
    if args.tokens < 1 or args.calls < 1:
        p.error("--tokens and --calls must be at least 1")
    import torch

    from bench.host_probe import host_probe
    from bench.verify_runs import versions

    doc = {"versions": versions(), "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
           "host_probe": host_probe(torch),
           "rows": probe(torch, args.hidden, args.tokens, args.calls)}
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
