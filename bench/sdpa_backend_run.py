"""Run a bundle's train.py with PyTorch's cuDNN attention as CUDNN_MODE says: on (PyTorch's default) or off
(torch.backends.cuda.enable_cudnn_sdp(False), for training and generation alike). Off inside generate only is what a
bundle that generates with transformers does itself (train.py generate_without_cudnn_attention).

    cd BUNDLE && CUDNN_MODE=off accelerate launch --config_file accelerate.yaml \\
        /path/to/bench/sdpa_backend_run.py train.py --max-steps 60 --no-save --random-init --synthetic-data

bench/bundle_shapes.sh runs bundles this way on rows of mixed lengths (bench/results/bundle-shapes-*.jsonl).
"""

from __future__ import annotations

import os
import runpy
import sys

MODES = ("on", "off")


def apply(mode: str) -> None:
    import torch

    torch.backends.cuda.enable_cudnn_sdp(mode != "off")


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
