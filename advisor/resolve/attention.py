"""Which attention implementation a plan loads the model with, when --attn does not say: the one the model, the GPU
and the packages accept, fastest first, and why.

transformers 5.24 declares per model class whether it accepts SDPA (`_supports_sdpa`); a model that does not raises
at load when asked for it. FlashAttention 2 needs compute capability 8.0+ and 16-bit compute; in transformers 5.24
`attn_implementation="flash_attention_2"` runs the `flash_attn` package, or, when that is not installed and the
`kernels` package is, the Hub kernel `kernels-community/flash-attn2` (modeling_utils.py
_check_and_adjust_attn_implementation, FLASH_ATTN_KERNEL_FALLBACK). Eager attention works everywhere, at the cost of
the full score matrix in memory and time.
"""

from __future__ import annotations

from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.core.target import Target

SDPA_UNSUPPORTED: dict[str, str] = {
    "gemma2": "it soft-caps attention logits, which SDPA cannot express",
    "gpt_oss": "its attention sinks are not expressible in SDPA",
    "gemma4": "transformers declares no SDPA support for it",
    "deepseek_v4": "transformers declares no SDPA support for it",
}
"""model_type -> why: the classes with `_supports_sdpa = False` in transformers 5.24 (models/gemma2/modeling_gemma2.py
line 353 "sdpa does not support softcapping", gpt_oss/modeling_gpt_oss.py, gemma4, deepseek_v4) among the model
types this tool plans for."""

FLASH_PACKAGES = ("flash-attn", "flash_attn", "kernels")
"""Installed distributions that make `flash_attention_2` load (the package itself, or the Hub-kernel fallback)."""


def _flash_installed(target: Target) -> bool | None:
    """Whether the machine planned for can load flash_attention_2: None for a catalogue target (nothing installed
    yet: the bundle's requirements bring the `kernels` package)."""
    if target.origin not in ("probe", "file"):
        return None
    software = {name.lower(): version for name, version in (target.software or {}).items()}
    return any(software.get(name) for name in FLASH_PACKAGES)


def choose_attention(req: Request, model: ModelSpec, target: Target, precision: str) -> tuple[str, str]:
    """(attn_implementation, why). A pinned --attn wins (the rules judge it); else FlashAttention 2 for a packed plan
    where the GPU and packages allow it (TRL's padding-free rows, rule TRN008); else SDPA where the model accepts it
    (PyTorch's fused kernels: no extra package, as fast as FlashAttention 2 for training on Ampere and newer);
    else FlashAttention 2 where the GPU and packages allow it; else eager."""
    if req.attn:
        return req.attn, f"user pin (--attn {req.attn})"
    why_not_sdpa = SDPA_UNSUPPORTED.get(model.model_type)
    reasons = flash_obstacles(target, precision)
    if req.packing and not reasons:
        # TRL packs with BFD into padding-free rows, which only FlashAttention's varlen kernels keep apart; under SDPA
        # the packed sequences attend to each other (rule TRN008), so a packed plan takes FlashAttention 2
        return "flash_attention_2", ("flash_attention_2: --packing gives padding-free rows, which FlashAttention keeps "
                                     "apart by their position_ids (SDPA would let them attend to each other)")
    if why_not_sdpa is None:
        return "sdpa", "sdpa: PyTorch's fused attention, no extra package"
    if not reasons:
        installed = _flash_installed(target)
        how = ("the installed flash-attn or kernels package" if installed else
               "the kernels package (requirements.txt), which fetches kernels-community/flash-attn2 from the Hub")
        return "flash_attention_2", (f"flash_attention_2: {model.model_type} rejects sdpa ({why_not_sdpa}); "
                                     f"FlashAttention 2 supports it on this GPU, through {how}")
    return "eager", (f"eager: {model.model_type} rejects sdpa ({why_not_sdpa}), and FlashAttention 2 is out: "
                     + "; ".join(reasons))


def flash_obstacles(target: Target, precision: str) -> list[str]:
    """Why FlashAttention 2 cannot run here (empty when it can)."""
    reasons = []
    if target.gpu.cc < (8, 0):
        reasons.append(f"{target.gpu.id} has compute capability {target.gpu.compute_capability} (FlashAttention 2 "
                       "needs 8.0+)")
    if precision == "fp32":
        reasons.append("fp32 training (FlashAttention runs in 16-bit only)")
    if _flash_installed(target) is False:
        reasons.append("neither flash-attn nor kernels is installed on this machine")
    return reasons


FLASH_ATTN_KERNEL = "kernels-community/flash-attn2"
"""The Hub kernel transformers 5 loads for `flash_attention_2` when the flash-attn package is absent (and `kernels`
is installed), as in every bundle's environment (the bundle does not build flash-attn)."""


def sp_attention(attn: str, sp_size: int) -> str:
    """The attention a Ulysses SP plan loads, named as the model will report it. transformers replaces
    `flash_attention_2` by FLASH_ATTN_KERNEL at load (modeling_utils.py _check_and_adjust_attn_implementation) and
    DeepSpeed then refuses an `sp_attn_implementation` that differs from the model's ("core_attn_implementation=...
    does not match model config attn_implementation=...", ulysses_sp.py); accelerate and DeepSpeed both accept the
    Hub kernel's id. So an SP plan names the kernel itself, in CONFIG, the model load and accelerate.yaml alike."""
    return FLASH_ATTN_KERNEL if sp_size > 1 and attn == "flash_attention_2" else attn
