"""What a GPU kernel costs the GPU itself, and where a training micro-batch's GPU time goes, on one GPU.

    python -m bench.kernel_probe --out bench/results/kernel-probe-h200-DATE.json [--cases MODEL:METHOD:SEQ:MB,...]

Three measurements, each free of the host CPU's dispatch speed:
1. elementwise kernels replayed from a CUDA graph (no host work between them) at sizes from 1 element to 64 MiB:
   time per kernel = a fixed cost + bytes / bandwidth; the fixed cost is what every kernel of a step costs the GPU
   however little it moves.
2. the skinny GEMMs of a LoRA adapter (tokens x hidden by hidden x r, and back), also from a graph: their time next to
   the bytes they stream (they are memory-bound: r = 16 columns).
3. one training micro-batch (forward + backward, as the benchmark's worker builds the model: random bf16 weights,
   SDPA, bf16 autocast, PEFT LoRA all-linear r 16 for LoRA cases, Liger's kernels patched in for "-liger" cases) under
   torch.profiler: kernels launched, their summed GPU time by kind (GEMM, attention, the rest), the kernels shorter
   than 5 us and the costliest kernels by name; the forward alone is profiled too (the backward is the difference).
   The loss is TRL's: SFTTrainer's fused LM head (trl add_fused_lm_head, chunked log-probs with entropy and top-1),
   as TRL 1.16 trains with and without Liger. Each case runs in its own process.
Results are data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Any

from bench.rows_file import new_output_problem, save_json

CASES = (("qwen2.5-0.5b", "full", 2048, 8), ("smollm2-360m", "full", 2048, 8), ("qwen3-0.6b", "full", 2048, 8),
         ("gemma-3-1b", "full", 2048, 8), ("llama-3.2-1b", "full", 4096, 4), ("llama-3.2-1b", "full", 8192, 2),
         ("qwen2.5-1.5b", "full", 2048, 4), ("qwen3-1.7b", "full", 2048, 8), ("phi-3-mini", "full", 2048, 4),
         ("qwen2.5-7b", "full", 2048, 2), ("mistral-7b-v0.3", "full", 2048, 2),
         ("qwen2.5-0.5b", "full-liger", 1024, 16), ("qwen2.5-1.5b", "full-liger", 2048, 4),
         ("qwen3-1.7b", "full-liger", 2048, 8), ("llama-3.2-1b", "lora", 2048, 4), ("qwen3-0.6b", "lora", 2048, 8),
         ("qwen2.5-0.5b", "lora", 2048, 8), ("qwen3-1.7b", "lora", 2048, 4), ("qwen2.5-3b", "lora", 4096, 4),
         ("llama-3.2-1b", "lora-liger", 2048, 4))
"""(model, method, sequence length, micro-batch): the catalogue's families and sizes at micro-batches where the GPU,
not the host, sets the step (8-16k tokens), full, LoRA and Liger."""
ELEMENTWISE_SIZES = (1, 1024, 65536, 1 << 20, 1 << 22, 1 << 24, 1 << 25)
"""bf16 elements per kernel (2 B each): up to 64 MiB read and 64 MiB written."""
GRAPH_KERNELS = 200
LORA_SHAPES = ((8192, 2048), (16384, 1024), (16384, 2048), (16384, 4096), (16384, 8192))
"""(tokens, features) of a LoRA adapter's input or output; r = LORA_R columns."""
LORA_R = 16
METHODS = ("full", "lora", "full-liger", "lora-liger")
SHORT_KERNEL_US = 5.0
TOP_KERNELS = 40
CASE_TIMEOUT_S = 300
LORA_ALPHA = 32
LORA_DROPOUT = 0.05


DEVICE = "cuda"
"""Where the micro-batches run (the harness's own smoke test sets "cpu")."""


def _sync(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _graph_seconds(torch, body, repeats: int = 5) -> float:
    """Median seconds of one replay of a CUDA graph holding `body` (captured after a warm-up on a side stream)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        body()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    g.replay()
    _sync(torch)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        g.replay()
        _sync(torch)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares intercept and slope."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


def elementwise(torch) -> dict[str, Any]:
    rows = []
    for n in ELEMENTWISE_SIZES:
        x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)

        def body(x=x, y=y):
            for _ in range(GRAPH_KERNELS):
                torch.mul(x, 1.0001, out=y)

        sec = _graph_seconds(torch, body) / GRAPH_KERNELS
        rows.append({"elements": n, "bytes": 4 * n, "us_per_kernel": round(sec * 1e6, 3)})
    a, b = _fit_line([r["bytes"] for r in rows], [r["us_per_kernel"] for r in rows])
    return {"rows": rows, "fixed_us": round(a, 3), "bandwidth_gbps": round(1e-3 / b, 1) if b > 0 else None,
            "note": "torch.mul(x, s, out=y) on bf16, GRAPH_KERNELS per graph; bytes = read + write"}


def lora_gemms(torch) -> list[dict[str, Any]]:
    rows = []
    for t, f in LORA_SHAPES:
        x = torch.randn(t, f, device="cuda", dtype=torch.bfloat16)
        a = torch.randn(LORA_R, f, device="cuda", dtype=torch.bfloat16)
        h = torch.randn(t, LORA_R, device="cuda", dtype=torch.bfloat16)
        out_down = torch.empty(t, LORA_R, device="cuda", dtype=torch.bfloat16)
        out_up = torch.empty(t, f, device="cuda", dtype=torch.bfloat16)

        def down(x=x, a=a, o=out_down):
            for _ in range(20):
                torch.mm(x, a.t(), out=o)

        def up(h=h, a=a, o=out_up):
            for _ in range(20):
                torch.mm(h, a, out=o)

        for kind, body in (("down: tokens x features @ features x r", down), ("up: tokens x r @ r x features", up)):
            sec = _graph_seconds(torch, body) / 20
            nbytes = 2 * (t * f + t * LORA_R + LORA_R * f)
            rows.append({"kind": kind, "tokens": t, "features": f, "r": LORA_R, "us": round(sec * 1e6, 2),
                         "bytes": nbytes, "gbps": round(nbytes / sec / 1e9, 1)})
    return rows


def _kind(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("flash", "fmha", "attention", "efficient_attention", "mem_eff")):
        return "attention"
    if any(k in n for k in ("gemm", "cutlass", "nvjet", "sm90_xmma", "cublas", "splitk", "matmul")):
        return "gemm"
    return "other"


def _kernel_stats(prof) -> dict[str, Any]:
    """Kernels of one profiled call: count, summed GPU time, span, by kind, and the TOP_KERNELS names by time."""
    by_kind: dict[str, list[float]] = {"gemm": [], "attention": [], "other": []}
    by_name: dict[str, list[float]] = {}
    starts, ends = [], []
    for e in prof.events():
        if not str(getattr(e, "device_type", "")).endswith("CUDA"):
            continue
        us = float(e.time_range.elapsed_us())
        by_kind[_kind(e.name)].append(us)
        by_name.setdefault(e.name[:160], []).append(us)
        starts.append(e.time_range.start)
        ends.append(e.time_range.end)
    every = [u for v in by_kind.values() for u in v]
    short = [u for u in every if u < SHORT_KERNEL_US]
    top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:TOP_KERNELS]
    return {"kernels": len(every), "kernel_s": round(sum(every) / 1e6, 4),
            "span_s": round((max(ends) - min(starts)) / 1e6, 4) if every else None,
            "short_kernels": len(short), "short_kernel_s": round(sum(short) / 1e6, 4),
            "by_kind": {k: {"kernels": len(v), "s": round(sum(v) / 1e6, 4)} for k, v in by_kind.items()},
            "top": [{"name": n, "kind": _kind(n), "count": len(v), "ms": round(sum(v) / 1e3, 3)} for n, v in top]}


def _add_trl_lm_head(model) -> bool:
    """TRL 1.16 SFTTrainer's loss head: add_fused_lm_head with the outputs its metrics read (sft_trainer.py), on the
    base model before PEFT wraps it. False where this TRL has none (then transformers' own loss runs)."""
    try:
        from trl.trainer.utils import add_fused_lm_head
    except ImportError:
        return False
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "is_top1"))
    return True


def build(torch, model_id: str, method: str, seq: int, mb: int, ckpt: bool = False):
    """The benchmark worker's model for one case (random bf16 weights, SDPA; Liger's layer kernels for "-liger";
    PEFT LoRA for "lora"; transformers' gradient checkpointing with its defaults, as the Trainer enables it, when
    `ckpt`), a batch of `mb` x `seq` tokens and TRL's loss. Returns (loss_of, step, meta): loss_of() runs the
    forward under bf16 autocast and returns the loss; step(sync) runs forward + backward (with TRL's metric sync
    between them when `sync`) and drops the grads; meta says whether TRL's fused head is in, the layer count, the
    checkpoint function's keyword arguments, and holds the model and set_batch(rows, tokens), a new batch."""
    from transformers import AutoModelForCausalLM

    from bench.models import arch_dict, hf_config
    from bench.worker import special_ids

    spec = case_spec(model_id)
    arch = arch_dict(spec)
    ids = special_ids(arch["vocab"])
    torch.manual_seed(0)
    with torch.device(DEVICE):
        model = AutoModelForCausalLM.from_config(hf_config(arch, special_ids=ids), dtype=torch.bfloat16,
                                                 attn_implementation=case_attention(spec))
    liger = method.endswith("-liger")
    if liger:
        # TRL 1.16 SFTTrainer with use_liger_kernel: the layer kernels only, Liger's fused linear cross-entropy
        # switched off (sft_trainer.py: it would replace the forward that carries TRL's fused LM head)
        from liger_kernel.transformers import _apply_liger_kernel_to_instance

        _apply_liger_kernel_to_instance(model=model, fused_linear_cross_entropy=False)
    fused = _add_trl_lm_head(model)
    if method.split("-")[0] == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=LORA_DROPOUT,
                                                 target_modules="all-linear", task_type="CAUSAL_LM"))
    meta = {"fused": fused, "layers": arch["layers"], "checkpoint_kwargs": enable_checkpointing(model) if ckpt else None}
    model.train()
    batch = {"inp": torch.randint(0, ids["unk"], (mb, seq), device=DEVICE)}

    def loss_of():
        inp = batch["inp"]
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            if not fused:
                return model(input_ids=inp, labels=inp).loss
            # SFTTrainer.compute_loss: -log_probs summed over the label tokens, divided by their count
            out = model(input_ids=inp, labels=inp, fused_lm_head=True)
            return -out.log_probs.sum() / out.label_mask.sum().clamp(min=1)

    def step(sync: bool = False):
        loss = loss_of()
        if sync:
            # TRL's compute_loss calls .item() on its metrics between the forward and the backward
            loss.detach().float().item()
        loss.backward()
        model.zero_grad(set_to_none=True)

    def set_batch(rows: int, tokens: int) -> None:
        batch["inp"] = torch.randint(0, ids["unk"], (rows, tokens), device=DEVICE)

    meta.update(model=model, set_batch=set_batch)
    return loss_of, step, meta


def case_spec(model_id: str):
    """A case's architecture: a catalogue id, or `ID@L<n>` for the same model cut to n decoder layers (an MoE model
    whose full depth does not fit one GPU, as the benchmark's `layers` rows build it: bench.models.row_spec)."""
    from bench.models import row_spec

    name, _, depth = model_id.partition("@L")
    return row_spec({"model": name, "layers": int(depth)} if depth else {"model": name})


def case_attention(spec) -> str:
    """SDPA, except eager for Gemma-2: its soft-capped attention has no SDPA path, and the benchmark and the advisor
    train it eager where flash-attn is not installed (bench.worker, advisor/resolve/attention.py)."""
    return "eager" if spec.model_type == "gemma2" else "sdpa"


def enable_checkpointing(model) -> dict[str, str]:
    """Transformers' gradient checkpointing as the Trainer turns it on with gradient_checkpointing_kwargs=None (the
    library's default keyword arguments), and the inputs made to require grad, as TRL does for a frozen (PEFT) base.
    Returns the checkpoint function's keyword arguments, as used."""
    model.gradient_checkpointing_enable()
    if hasattr(model, "enable_input_require_grads"):
        model.enable_input_require_grads()
    layer = next((m for m in model.modules() if hasattr(m, "_gradient_checkpointing_func")), None)
    func = getattr(layer, "_gradient_checkpointing_func", None)
    return {k: repr(v) for k, v in (getattr(func, "keywords", None) or {}).items()}


def micro_batch(torch, model_id: str, method: str, seq: int, mb: int) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    loss_of, step, meta = build(torch, model_id, method, seq, mb)
    fused = meta["fused"]
    for _ in range(2):
        step()
    _sync(torch)
    t0 = time.perf_counter()
    for _ in range(3):
        step()
    _sync(torch)
    wall = (time.perf_counter() - t0) / 3

    def forward_only():
        loss_of().detach()

    out = {"model": model_id, "method": method, "seq_len": seq, "micro_batch": mb, "layers": meta["layers"],
           "loss": "trl fused LM head (log_probs, entropy, is_top1)" if fused else "transformers (full logits)",
           "wall_s": round(wall, 4)}
    for phase, call in (("forward_backward", step), ("forward", forward_only)):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            _sync(torch)
        out[phase] = _kernel_stats(prof)
    out.update({k: out["forward_backward"][k] for k in ("kernels", "kernel_s", "span_s", "by_kind")})
    return out


def isolated(module: str, case: tuple[str, str, int, int], timeout: int) -> dict[str, Any]:
    """One case in a fresh interpreter (`python -m MODULE --one-case SPEC`): Liger patches transformers' classes, not
    only the instance, so a case after a Liger one would run Liger's kernels too; the process also returns all of its
    GPU memory."""
    import subprocess

    spec = ":".join(map(str, case))
    try:
        done = subprocess.run([sys.executable, "-m", module, "--one-case", spec], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"case": list(case), "error": f"timed out after {timeout} s"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"case": list(case), "error": (done.stderr.strip().splitlines() or ["no output"])[-1][:400]}
    return json.loads(lines[-1])


def one_case(measure, spec: str) -> int:
    """The child process of isolated(): measure(torch, model, method, seq_len, micro_batch), printed as one JSON line;
    a failure (an OOM, a missing package) is recorded as the case's error and the next case runs."""
    import torch

    m, meth, seq, mb = spec.split(":")
    try:
        out = measure(torch, m, meth, int(seq), int(mb))
    except Exception as exc:
        out = {"case": [m, meth, int(seq), int(mb)], "error": f"{type(exc).__name__}: {exc}"[:400]}
    print(json.dumps(out), flush=True)
    return 0


def parse_cases(text: str) -> tuple[tuple[str, str, int, int], ...]:
    """model:method:seq_len:micro_batch, comma-separated (model may be ID@L<n>: case_spec); ValueError on anything
    else."""
    cases = tuple((m, meth, int(s), int(b)) for m, meth, s, b in (c.split(":") for c in text.split(",")))
    if any(meth not in METHODS for _, meth, _, _ in cases) or min(min(s, b) for _, _, s, b in cases) < 1:
        raise ValueError(text)
    for m, *_ in cases:
        depth = m.partition("@L")[2]
        if depth and not (depth.isdigit() and int(depth) >= 1):
            raise ValueError(text)
    return cases


def checked_cases(ap: argparse.ArgumentParser, a: argparse.Namespace, default, example: str):
    """A probe's --out (required, must not exist) and --cases (parse_cases, else `default`), checked before any
    import of torch: a usage error exits 2 with one line, writing nothing."""
    if not a.out:
        ap.error("--out is required")
    problem = new_output_problem(a.out)
    if problem:
        ap.error(problem)
    if not a.cases:
        return default
    try:
        return parse_cases(a.cases)
    except ValueError:
        ap.error(f"--cases takes model:method:seq_len:micro_batch, comma-separated (e.g. {example}); method is one of "
                 f"{', '.join(METHODS)}; seq_len and micro_batch are positive")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.kernel_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="JSON file to write (must not exist); required")
    ap.add_argument("--skip-micro-batches", action="store_true", help="only the graph-replayed kernels")
    ap.add_argument("--cases", help="micro-batches to profile instead of CASES: model:method:seq_len:micro_batch,...")
    ap.add_argument("--skip-graphs", action="store_true", help="only the profiled micro-batches")
    ap.add_argument("--one-case", help=argparse.SUPPRESS)  # the child process of one case (kernel_probe.isolated)
    a = ap.parse_args(argv)
    if a.one_case:
        return one_case(micro_batch, a.one_case)
    cases = checked_cases(ap, a, CASES, "qwen2.5-0.5b:full:2048:8")
    import torch
    import transformers

    if not torch.cuda.is_available():
        ap.error("needs a CUDA GPU")
    result: dict[str, Any] = {
        "command": "python -m bench.kernel_probe " + " ".join(argv if argv is not None else sys.argv[1:]),
        "gpu": torch.cuda.get_device_name(0), "python": platform.python_version(),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "elementwise": None if a.skip_graphs else elementwise(torch),
        "lora_gemms": None if a.skip_graphs else lora_gemms(torch), "micro_batches": []}
    print(json.dumps(result["elementwise"]), flush=True)
    print(json.dumps(result["lora_gemms"]), flush=True)

    def save() -> None:
        save_json(a.out, result)

    save()
    if not a.skip_micro_batches:
        try:
            import peft

            result["versions"]["peft"] = peft.__version__
        except ImportError:
            pass
        for case in cases:
            result["micro_batches"].append(isolated("bench.kernel_probe", case, CASE_TIMEOUT_S))
            print(json.dumps(result["micro_batches"][-1]), flush=True)
            save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
