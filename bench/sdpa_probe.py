"""What turning PyTorch's cuDNN attention off costs a training step at a shape seen before.

    python -m bench.sdpa_probe --out bench/results/sdpa-probe-h100-DATE.json [--model llama-3.2-1b]

bench/shape_probe.py found that a GRPO/RLOO batch of a prompt width the process has not run before pays up to 3.2 s
more in transformers' generate and up to 0.9 s more in the forward + backward (bench/results/shape-probe-*.json),
spent in aten::_cudnn_attention_forward: PyTorch's cuDNN attention builds and caches an execution graph per new key
of q/k/v/mask sizes and strides (aten/src/ATen/native/cudnn/MHA.cpp); with torch.backends.cuda.enable_cudnn_sdp(False)
the same new widths cost at most 0.13 s more. A bundle that turns cuDNN attention off for generation must know what it costs where the shapes
repeat. This times, on one model with random weights (catalogue architecture, bf16, SDPA), a forward + backward of
BATCH x SEQ tokens, causal without a mask (SFT's padded batch has one too: MASKS) and with a left-padded mask (GRPO's
scoring batch), and a generate of GEN_BATCH prompts, each with cuDNN attention on and off, REPEATS times after a
warm-up at the same shape. Results are data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench.rows_file import check_models, new_output_problem, probe_header, save_json

SEQS = (1024, 4096)
"""Tokens per sequence of the timed forward + backward: a short and a long context, where attention's share of the
step differs most."""
BATCH = 4
MASKS = ("causal", "left-padded")
"""causal: an all-ones mask (SDPA runs is_causal, no mask tensor); left-padded: every other row one token shorter,
which makes transformers pass a mask tensor, as a GRPO scoring batch and a padded SFT batch do."""
GEN_BATCH = 64
GEN_PROMPT = 512
GEN_TOKENS = 64
REPEATS = 5


def probe(torch, model_id: str, rows: list[dict[str, Any]], save, arch: dict[str, Any] | None = None,
          seqs=SEQS, batch: int = BATCH, gen_batch: int = GEN_BATCH, gen_prompt: int = GEN_PROMPT,
          gen_tokens: int = GEN_TOKENS, repeats: int = REPEATS) -> None:
    """Append one record per (case, cuDNN on/off) to `rows`, calling `save` after each. `arch`: an architecture dict
    instead of the catalogue's row for `model_id` (the tests use a tiny one)."""
    from bench.shape_probe import random_model
    from bench.worker import GRPO_TOP_K

    model, ids, dev = random_model(torch, model_id, arch)

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    def batch_of(n: int, width: int, mask_kind: str):
        inp = torch.randint(0, ids["unk"], (n, width), device=dev)
        mask = torch.ones_like(inp)
        if mask_kind == "left-padded":
            mask[1::2, 0] = 0
        return inp, mask

    def train_once(inp, mask) -> None:
        model.train()
        logits = model(input_ids=inp, attention_mask=mask).logits
        logits.float().mean().backward()
        model.zero_grad(set_to_none=True)

    def generate_once(inp, mask) -> None:
        model.eval()
        with torch.no_grad():
            model.generate(input_ids=inp, attention_mask=mask, max_new_tokens=gen_tokens, min_new_tokens=gen_tokens,
                           do_sample=True, top_k=GRPO_TOP_K, top_p=1.0, temperature=1.0, remove_invalid_values=True,
                           pad_token_id=ids["pad"], eos_token_id=ids["eos"])

    cases = [("forward_backward", seq, m) for seq in seqs for m in MASKS] + [("generate", gen_prompt, "left-padded")]
    for kind, width, mask_kind in cases:
        n = batch if kind == "forward_backward" else gen_batch
        inp, mask = batch_of(n, width, mask_kind)
        fn = train_once if kind == "forward_backward" else generate_once
        for cudnn in (True, False):
            torch.backends.cuda.enable_cudnn_sdp(cudnn)
            fn(inp, mask)  # warm-up: the shape's one-time costs (a cuDNN graph build) fall here
            sync()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn(inp, mask)
                sync()
                times.append(time.perf_counter() - t0)
            rows.append({"model": model_id, "case": kind, "batch": n, "width": width, "mask": mask_kind,
                         "cudnn_sdp": cudnn, "seconds": [round(t, 5) for t in times],
                         "median_s": round(statistics.median(times), 5)})
            save()
    torch.backends.cuda.enable_cudnn_sdp(True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sdpa_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--model", default="llama-3.2-1b", help="catalogue id (random weights from its architecture)")
    a = ap.parse_args(argv)
    problem = new_output_problem(a.out)
    if problem:
        ap.error(problem)
    check_models(ap, "--model", [a.model])
    import torch

    from bench.host_probe import host_probe

    result: dict[str, Any] = {
        **probe_header("bench.sdpa_probe", argv),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "repeats": REPEATS,
        "host": host_probe(torch), "rows": []}
    probe(torch, a.model, result["rows"], lambda: save_json(a.out, result))
    result["host_after"] = host_probe(torch)
    save_json(a.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
