"""What the user asked for: every REQUEST flag of the command-line contract. None means "not pinned"."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass, fields, replace

TRAINERS = ("sft", "dpo", "grpo", "rloo", "kto", "gkd")
METHODS = ("full", "lora", "qlora")
BACKENDS = ("single", "ddp", "deepspeed", "fsdp2")
OFFLOADS = ("none", "optimizer", "all")
OFFLOAD_DEVICES = ("cpu", "nvme")
PRECISIONS = ("bf16", "bf16-mixed", "fp16-mixed", "fp32")
VLLM_MODES = ("none", "colocate", "server")
REF_MODELS = ("copy", "precompute", "none", "bema")
"""DPO/KTO reference: a frozen copy, log-probs precomputed before training, none (PEFT: the adapter-disabled base),
or a copy that follows the policy by BEMA (trl.experimental.bema_for_ref_model, DPO full fine-tuning)."""
ATTN_BUILTIN = ("sdpa", "eager", "flash_attention_2", "flash_attention_3", "flash_attention_4", "flex_attention",
                "paged|eager")
"""The attention implementations transformers 5.24 accepts by name (`eager` plus
`ALL_ATTENTION_FUNCTIONS.valid_keys()`, modeling_utils.py); anything else must be a hub kernel id."""

HUB_KERNEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}"
                           r"(?:@[A-Za-z0-9][A-Za-z0-9._-]{0,63})?(?::[A-Za-z_][A-Za-z0-9_]{0,63})?$")
"""A hub kernel as `attn_implementation`: `org/name[@revision][:function]`. transformers' own pattern
(integrations/hub_kernels.py `is_kernel`: `^[^/:]+/[^/:]+(?:@[^/:]+)?(?::[^/:]+)?$`) accepts any character but
`/` and `:`; this one keeps to the characters Hub repo ids and Python names use, so the value is safe in every
file it is written into."""

# Physical bounds of the numeric flags: beyond them a value is a typo (or an attack), and loops and allocations
# that grow with a number stay bounded. (flag, lowest, highest, why the highest)
LIMITS: dict[str, tuple[int | float, int | float, str]] = {
    "lora_r": (1, 65536, "LoRA ranks above the widest hidden size (about 30k) train nothing more"),
    "gpus": (1, 1024, "no machine has more GPUs per node (GB200 NVL72: 72)"),
    "nodes": (1, 16384, "larger than the largest published training clusters (about 100k GPUs)"),
    "seq_len": (1, 4_194_304, "beyond any model's context (4M tokens)"),
    "micro_batch": (1, 65536, "no GPU holds more sequences per step"),
    "grad_accum": (1, 1_000_000, "a million micro-batches per optimizer step"),
    "global_batch": (1, 100_000_000, "100M sequences per optimizer step"),
    "sp_size": (1, 1024, "the most GPUs a sequence can be split over here"),
    "cp_size": (1, 1024, "the most GPUs a sequence can be split over here"),
    "num_generations": (1, 4096, "completions per prompt; GRPO papers use 4-64"),
    "max_completion_len": (1, 4_194_304, "beyond any model's context (4M tokens)"),
    "vllm_gpus": (0, 1024, "no machine has more GPUs per node"),
    "zero": (0, 3, "DeepSpeed's ZeRO stages are 0, 1, 2 and 3"),
    "tokens": (1, 10**14, "100 trillion tokens, several times the 15T Llama 3 was pre-trained on (Meta, 2024)"),
    "steps": (1, 100_000_000, "100M optimizer steps: years of training at one step per second"),
}


def text_problem(value: str) -> str | None:
    """Why a text value cannot be written into a generated file or a terminal line, or None when it can.

    Control characters (a newline ends a comment line in a script and starts a command), format characters
    (bidirectional overrides hide code, CVE-2021-42574 "Trojan Source"), line/paragraph separators, and lone
    surrogates (the bytes of a non-UTF-8 argument, PEP 383) are refused."""
    for i, ch in enumerate(value):
        cat = unicodedata.category(ch)
        if cat in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            what = ("a byte that is not UTF-8" if cat == "Cs" else
                    "a newline" if ch in "\n\r" else f"the control character U+{ord(ch):04X}")
            return f"contains {what} at position {i}"
    return None

GENERATING_TRAINERS = ("grpo", "rloo")
"""Trainers that sample completions during training (and may use vLLM)."""
PREFERENCE_TRAINERS = ("dpo", "kto")
"""Trainers with a frozen reference model."""


@dataclass(frozen=True)
class Request:
    """A training request. Knobs left as None are defaulted by `estimate` and searched by `generate`."""

    model: str
    trainer: str = "sft"
    method: str | None = None
    lora_r: int | None = None
    gpus: int | None = None
    """GPUs per node."""
    nodes: int | None = None
    gpu: str | None = None
    hardware: str | None = None
    """Path to a `probe --json` file."""
    seq_len: int | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    global_batch: int | None = None
    backend: str | None = None
    zero: int | None = None
    offload: str | None = None
    offload_device: str | None = None
    nvme_path: str | None = None
    """NVMe offload: the local folder DeepSpeed swaps to (ds_config.json nvme_path); an absolute path."""
    grad_ckpt: bool | None = None
    liger: bool | None = None
    attn: str | None = None
    precision: str | None = None
    packing: bool | None = None
    sp_size: int | None = None
    cp_size: int | None = None
    unsloth: bool | None = None
    num_generations: int | None = None
    max_completion_len: int | None = None
    vllm: str | None = None
    vllm_gpus: int | None = None
    vllm_mem_fraction: float | None = None
    ref_model: str | None = None
    teacher: str | None = None
    """GKD: the teacher model (same forms as `model`); required for GKD, which distils it into the student."""
    trust_remote_code: bool = False
    tokens: int | None = None
    """Job size: trained tokens, as tokens/s counts them; estimate, generate and recommend say how long it takes."""
    steps: int | None = None
    """Job size: optimizer steps (global batch x seq_len tokens each); one of tokens and steps."""

    def to_dict(self) -> dict:
        return asdict(self)

    def pinned(self) -> dict:
        """Only the knobs the user set (`trust_remote_code` counts only when asked for: off is its default)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        if not self.trust_remote_code:
            out.pop("trust_remote_code", None)
        return out

    def with_(self, **changes) -> Request:
        return replace(self, **changes)

    @property
    def is_generating(self) -> bool:
        return self.trainer in GENERATING_TRAINERS
