"""What the user asked for: every REQUEST flag of the command-line contract. None means "not pinned"."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

TRAINERS = ("sft", "dpo", "grpo", "rloo", "kto", "gkd")
METHODS = ("full", "lora", "qlora")
BACKENDS = ("single", "ddp", "deepspeed", "fsdp2")
OFFLOADS = ("none", "optimizer", "all")
OFFLOAD_DEVICES = ("cpu", "nvme")
PRECISIONS = ("bf16", "bf16-mixed", "fp16-mixed", "fp32")
VLLM_MODES = ("none", "colocate", "server")
REF_MODELS = ("copy", "precompute", "none")
ATTN_BUILTIN = ("sdpa", "flash_attention_2", "flash_attention_3", "eager")

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
    trust_remote_code: bool = False

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
