"""A plan: every knob resolved to a concrete value. The memory model, the rules and the generator read plans."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Plan:
    trainer: str
    method: str
    """full | lora | qlora"""
    lora_r: int
    backend: str
    """single | ddp | deepspeed | fsdp2"""
    zero_stage: int
    """DeepSpeed ZeRO stage; 0 when the backend is not DeepSpeed."""
    offload: str
    """none | optimizer | all (all = optimizer and parameters)"""
    offload_device: str
    precision: str
    """bf16 | bf16-mixed | fp16-mixed | fp32"""
    seq_len: int
    """Tokens per sequence (prompt + completion for DPO, KTO, GRPO, RLOO)."""
    micro_batch: int
    """TRL per_device_train_batch_size (completions for GRPO/RLOO; pairs for DPO)."""
    grad_accum: int
    grad_ckpt: bool
    liger: bool
    attn: str
    packing: bool
    sp_size: int
    cp_size: int
    num_processes: int
    """Training processes over all nodes (one per training GPU)."""
    nodes: int
    gpus_per_node: int
    """GPUs on each node, training and vLLM together."""
    unsloth: bool = False
    num_generations: int = 0
    max_completion_len: int = 0
    vllm_mode: str = "none"
    vllm_gpus: int = 0
    """GPUs given to a vLLM server (server mode); they do not train."""
    vllm_mem_fraction: float = 0.0
    ref_model: str = "none"
    """copy | precompute | none | bema (DPO/KTO reference; GRPO/RLOO: copy when beta > 0; GKD: the teacher)."""
    teacher: str = ""
    """GKD: the teacher's hub id or folder (what train.py loads); empty for the other trainers."""
    teacher_params: int = 0
    """GKD: the teacher's parameter count, for its weights in memory and its forward in the step time."""
    lora_alpha: int = 32
    trust_remote_code: bool = False
    overlap_comm: bool = True
    """DeepSpeed zero_optimization.overlap_comm: gradient reduction (and, with the optimizer offloaded, the gradients'
    copies to the host) on a side stream, overlapping the backward. The bundles write true at every stage;
    DeepSpeed's own default is true at stage 3 only (runtime/zero/config.py), which is what a config that does not
    set it gets (bundle readback). Off, ZeRO-1/2 run those copies on the compute stream, in series with it."""

    @property
    def dp_size(self) -> int:
        """Data-parallel replicas: processes divided by the sequence/context-parallel degree."""
        return max(1, self.num_processes // max(self.sp_size, self.cp_size, 1))

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.grad_accum * self.dp_size

    @property
    def tokens_per_step(self) -> int:
        """Tokens one optimizer step trains on over all GPUs (DPO counts chosen and rejected)."""
        per_seq = self.seq_len * (2 if self.trainer == "dpo" else 1)
        return self.global_batch * per_seq

    @property
    def uses_deepspeed(self) -> bool:
        return self.backend == "deepspeed"

    @property
    def trainable_is_adapter(self) -> bool:
        return self.method in ("lora", "qlora")

    def to_dict(self) -> dict:
        return asdict(self)

    def with_(self, **changes) -> Plan:
        """A copy with some fields changed. The planner makes thousands per search: a dict copy instead of
        dataclasses.replace, which re-runs __init__ through keyword arguments (about 10x slower); unknown names are
        refused as replace would."""
        unknown = changes.keys() - _FIELDS
        if unknown:
            raise TypeError(f"Plan has no field {sorted(unknown)[0]!r}")
        new = object.__new__(Plan)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new

    def short(self) -> str:
        """One line a person can read: `deepspeed ZeRO-3 + optimizer offload, lora r16, mb 4 x ga 8, ckpt`."""
        backend = {"single": "1 GPU", "ddp": "DDP", "fsdp2": "FSDP2"}.get(self.backend, f"ZeRO-{self.zero_stage}")
        if self.offload != "none":
            backend += f" + {self.offload} offload ({self.offload_device})"
        method = self.method if self.method == "full" else f"{self.method} r{self.lora_r}"
        bits = [backend, method, self.precision, f"mb {self.micro_batch} x ga {self.grad_accum}"]
        if self.grad_ckpt:
            bits.append("grad-ckpt")
        if self.liger:
            bits.append("liger")
        if self.unsloth:
            bits.append("unsloth")
        if self.sp_size > 1:
            bits.append(f"ulysses sp={self.sp_size}")
        if self.cp_size > 1:
            bits.append(f"ring cp={self.cp_size}")
        if self.vllm_mode != "none":
            bits.append(f"vllm {self.vllm_mode}" + (f" on {self.vllm_gpus} GPU" if self.vllm_gpus else ""))
        if self.ref_model in ("precompute", "bema"):
            bits.append("precomputed reference" if self.ref_model == "precompute" else "BEMA reference")
        return ", ".join(bits)


_FIELDS = frozenset(Plan.__dataclass_fields__)
