"""Installed versions of the training stack, from package metadata: nothing is imported (importing torch
alone takes seconds and may initialise CUDA)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata

from hw_probe.model import SoftwareInfo

# Report key -> distribution names to try. Lookups normalise `-`/`_`/case on Python >= 3.10, but older
# metadata (an .egg-info written by `setup.py develop`) may keep the underscore spelling, so try both.
PACKAGES: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "transformers": ("transformers",),
    "trl": ("trl",),
    "accelerate": ("accelerate",),
    "deepspeed": ("deepspeed",),
    "peft": ("peft",),
    "liger-kernel": ("liger-kernel", "liger_kernel"),
    "vllm": ("vllm",),
    "unsloth": ("unsloth",),
    "flash-attn": ("flash-attn", "flash_attn"),
    "bitsandbytes": ("bitsandbytes",),
    "kernels": ("kernels",),
    "datasets": ("datasets",),
}


def installed_version(names: tuple[str, ...], lookup: Callable[[str], str] = metadata.version) -> str | None:
    """The first of `names` that is installed, or None."""
    for name in names:
        try:
            return lookup(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:  # a broken dist-info (no METADATA / no Version) counts as not installed
            continue
    return None


def read_software(lookup: Callable[[str], str] = metadata.version) -> SoftwareInfo:
    """Versions of every package in PACKAGES (None when not installed)."""
    return SoftwareInfo.model_validate({key: installed_version(names, lookup) for key, names in PACKAGES.items()})
