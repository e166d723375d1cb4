"""Small predicates and formatters the rule modules share (no rule lives here)."""

from __future__ import annotations

import re
from typing import Any

from rules.model import Context

GIB = 1 << 30

# Release trees the References sections point to: the versions the rules were checked against.
TRL = "https://github.com/huggingface/trl/blob/v1.16.0"
TRANSFORMERS = "https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers"
ACCELERATE = "https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate"
DEEPSPEED = "https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8"

FLASH_BUILTINS = ("flash_attention_2", "flash_attention_3")
_HUB_KERNEL = re.compile(r"^[^/:\s]+/[^/:\s]+(?:@[^/:\s]+)?(?::[^/:\s]+)?$")
"""`kernels-community/flash-attn2`, optionally `@revision` and `:function` (DeepSpeed's ulysses_sp.py pattern)."""


def gib(n: int | float | None) -> str:
    return "?" if n is None else f"{n / GIB:.1f} GiB"


def join(values) -> str:
    return ", ".join(str(v) for v in values)


def is_hub_kernel(attn: str) -> bool:
    return bool(_HUB_KERNEL.match(attn or ""))


def is_flash(attn: str) -> bool:
    """FlashAttention 2/3, built in or as a Hub kernel (`kernels-community/flash-attn2`, `.../vllm-flash-attn3`)."""
    attn = attn or ""
    return attn in FLASH_BUILTINS or (is_hub_kernel(attn) and "flash-attn" in attn)


def is_flash3(attn: str) -> bool:
    return attn == "flash_attention_3"


def cc(ctx: Context) -> tuple[int, int]:
    return ctx.target.gpu.cc


def gpu_name(ctx: Context) -> str:
    return f"{ctx.target.gpu.id} (compute capability {ctx.target.gpu.compute_capability})"


def best_attn(ctx: Context) -> str:
    """The fastest attention this GPU runs: FlashAttention 2 from Ampere on, else SDPA."""
    return "flash_attention_2" if cc(ctx) >= (8, 0) else "sdpa"


def half_precision(ctx: Context) -> str:
    return "bf16-mixed" if ctx.target.gpu.has_bf16 else "fp16-mixed"


def uses_zero3(ctx: Context) -> bool:
    return ctx.plan.backend == "deepspeed" and ctx.plan.zero_stage == 3


def uses_peft(ctx: Context) -> bool:
    return ctx.plan.method in ("lora", "qlora")


def trainer_generates(ctx: Context) -> bool:
    return ctx.plan.trainer in ("grpo", "rloo")


def divisors(n: int) -> list[int]:
    """The divisors of n in increasing order, by trial division up to sqrt(n) (n is a GPU count or a batch size:
    bounded by advisor.core.request.LIMITS, so at most a few thousand steps)."""
    if n < 1:
        return []
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def is_auto(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() == "auto"


def features(ctx: Context) -> set[str]:
    """The plan's features in the vocabulary of the compatibility matrix (rules/data/compat.toml)."""
    p = ctx.plan
    out = {p.trainer, p.method}
    if p.backend == "deepspeed":
        out.add("deepspeed")
        if p.zero_stage == 3:
            out.add("zero3")
    if p.backend == "fsdp2":
        out.add("fsdp2")
    if p.vllm_mode != "none":
        out.update({"vllm", f"vllm-{p.vllm_mode}"})
    if p.liger:
        out.add("liger")
    if p.unsloth:
        out.add("unsloth")
    if p.sp_size > 1:
        out.add("ulysses-sp")
    if p.cp_size > 1:
        out.add("ring-cp")
    if p.num_processes > 1:
        out.add("multi-gpu")
    if p.packing:
        out.add("packing")
    if uses_hf_kernels(ctx):
        out.add("hf-kernels")
    if ctx.files is not None:
        if ctx.files.trl_args.get("deepspeed") or (ctx.files.accelerate or {}).get("distributed_type") == "DEEPSPEED":
            out.add("deepspeed")
        if ctx.files.trl_args.get("fsdp") or (ctx.files.accelerate or {}).get("distributed_type") == "FSDP":
            out.add("fsdp2")
    return out


def uses_hf_kernels(ctx: Context) -> bool:
    """transformers Hub kernels: `use_kernels=True` when loading, or an attention given as a Hub kernel id."""
    if is_hub_kernel(ctx.plan.attn):
        return True
    if ctx.files is not None:
        return truthy(ctx.files.model_init_kwargs.get("use_kernels")) or truthy(ctx.files.trl_args.get("use_kernels"))
    return False


def uses_use_kernels(ctx: Context) -> bool:
    return ctx.files is not None and (truthy(ctx.files.model_init_kwargs.get("use_kernels"))
                                       or truthy(ctx.files.trl_args.get("use_kernels")))


NO_FILES = "no configuration files to read (this rule checks `check --bundle` folders)"
