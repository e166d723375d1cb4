"""Verify's numbers and why: the default number of steps, the run's time limit, the memory and speed tolerances,
the warm-up steps dropped, and the size caps of what it reads."""

from __future__ import annotations

GIB = 1 << 30
DEFAULT_STEPS = 10
DEFAULT_TIMEOUT_SECONDS = 20 * 60
"""Wall-clock limit of the short run, seconds. Before its N steps a first run may download the weights (or write
the random-init checkpoint) and JIT-build DeepSpeed ops, each minutes long; the steps themselves take seconds."""
MEMORY_TOLERANCE_PCT = 15.0
MEMORY_TOLERANCE_FLOOR_BYTES = 2 * GIB
SPEED_TOLERANCE_PCT = 35.0
WARMUP_STEPS = 2
"""Optimizer steps dropped before timing: the first includes CUDA/NCCL set-up and kernel selection, the second can
still include allocator growth (the caching allocator reaches its working set) and ZeRO-3 prefetch set-up."""
GPU_MEMORY_SLACK = 0.02
"""A probed GPU may report up to 2 % less memory than the plan's and still count as the same size (NVML totals
differ by driver and ECC setting)."""
STRICT_PACKAGES = ("trl", "transformers", "accelerate", "deepspeed", "vllm", "unsloth", "unsloth-zoo")
"""Packages whose API or file formats the bundle is written against (train.py's TRL/transformers calls, the
accelerate YAML, ds_config.json keys, vLLM server flags): another major.minor fails, another patch passes with a
note. Other exact pins (peft, datasets, liger-kernel, bitsandbytes) only note a difference."""


MAX_BUNDLE_FILE_BYTES = 2_000_000
"""The files of a bundle are a few KiB to tens of KiB (plan.json lists its alternatives); 2 MB is the limit
`check --bundle` reads too (advisor.bundle.read.MAX_FILE_BYTES)."""
MAX_METRICS_BYTES = 64 * 1024 * 1024
"""One rank's metrics file: a line of about 300 bytes per logged step, so 64 MiB is some 200,000 steps, far more
than a verify run takes."""
MAX_LOG_TAIL_BYTES = 1024 * 1024
"""Of verify.log only the end is read (the last LOG_TAIL_LINES lines): 1 MiB holds them even with long lines."""
