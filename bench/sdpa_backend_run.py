"""Run a bundle's train.py with PyTorch's cuDNN attention as CUDNN_MODE says: on (PyTorch's default), off, or off
inside transformers' generate only (what a bundle that generates with transformers now does itself).

    cd BUNDLE && CUDNN_MODE=generate accelerate launch --config_file accelerate.yaml \\
        /path/to/bench/sdpa_backend_run.py train.py --max-steps 12 --no-save --random-init --synthetic-data

bench/bundle_shapes.sh runs bundles this way on rows of mixed lengths (bench/results/bundle-shapes-*.jsonl).
"""

from __future__ import annotations

import functools
import os
import runpy
import sys

MODES = ("on", "off", "generate")


def apply(mode: str) -> None:
    import torch

    if mode == "off":
        torch.backends.cuda.enable_cudnn_sdp(False)
    elif mode == "generate":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from transformers.generation.utils import GenerationMixin

        generate = GenerationMixin.generate

        @functools.wraps(generate)
        def without_cudnn(self, *args, **kwargs):
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
                return generate(self, *args, **kwargs)

        GenerationMixin.generate = without_cudnn


def main() -> int:
    mode = os.environ.get("CUDNN_MODE", "on")
    if mode not in MODES or len(sys.argv) < 2:
        print(f"usage: CUDNN_MODE={'|'.join(MODES)} python -m bench.sdpa_backend_run train.py [args...]",
              file=sys.stderr)
        return 2
    apply(mode)
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
