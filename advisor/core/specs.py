"""The catalogue row types: a model architecture and a GPU. Validated at load; every row cites its source."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

GIB = 1 << 30


class ModelSpec(BaseModel):
    """The architecture numbers the memory and speed model needs (from the model's `config.json`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """Catalogue id, lower case (`qwen2.5-7b`)."""
    hf_id: str
    """Hugging Face repository id (`Qwen/Qwen2.5-7B`)."""
    model_type: str
    """`config.json` model_type (llama, qwen2, qwen3, mistral, mixtral, gemma2, gemma3_text, phi3, qwen3_moe...)."""
    layers: int = Field(gt=0)
    hidden: int = Field(gt=0)
    intermediate: int = Field(ge=0)
    """Dense MLP width; 0 for a model whose every layer is MoE."""
    heads: int = Field(gt=0)
    kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    vocab: int = Field(gt=0)
    tied_embeddings: bool = False
    max_positions: int = Field(gt=0)
    qkv_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = Field(default=2, ge=1)
    """RMSNorms per decoder layer: 2 for Llama/Qwen/Mistral, 4 for Gemma 2/3 (pre- and post-norms)."""
    fused_qkv: bool = False
    """q, k and v are one nn.Linear (Phi-3/4 `qkv_proj`): same parameters, fewer LoRA adapters."""
    fused_gate_up: bool = False
    """gate and up are one nn.Linear (Phi-3/4 `gate_up_proj`)."""
    num_experts: int = Field(default=0, ge=0)
    """Routed experts per MoE layer; 0 for a dense model."""
    experts_per_token: int = Field(default=0, ge=0)
    moe_intermediate: int = Field(default=0, ge=0)
    shared_expert_intermediate: int = Field(default=0, ge=0)
    attention: Literal["full", "sliding-mix", "sliding"] = "full"
    sliding_window: int | None = None
    size: str | None = None
    """Size shorthand this row is the reference model for (`7B`); each shorthand names one row."""
    aliases: tuple[str, ...] = ()
    source: str
    """URL of the config.json (or model card) these numbers were copied from."""

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.id}: heads ({self.heads}) not a multiple of kv_heads ({self.kv_heads})")
        if self.num_experts and not (self.experts_per_token and self.moe_intermediate):
            raise ValueError(f"{self.id}: MoE rows need experts_per_token and moe_intermediate")
        if not self.source.startswith(("https://", "http://", "file://", "local:")):
            raise ValueError(f"{self.id}: source must be a URL")
        return self

    # ---- parameter counts (exact for the Llama/Qwen/Mistral/Gemma/Phi decoder layout) ----
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def attention_params_per_layer(self) -> int:
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        bias = (self.heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        norm = 2 * self.head_dim if self.qk_norm else 0
        return q + kv + o + bias + norm

    def mlp_params_per_layer(self, *, active_only: bool = False) -> int:
        """Gated MLP (gate, up, down): 3 * hidden * width. MoE adds the router and counts routed experts."""
        if not self.is_moe:
            return 3 * self.hidden * self.intermediate
        experts = self.experts_per_token if active_only else self.num_experts
        routed = experts * 3 * self.hidden * self.moe_intermediate
        shared = 3 * self.hidden * self.shared_expert_intermediate
        router = self.hidden * self.num_experts
        return routed + shared + router

    def layer_params(self, *, active_only: bool = False) -> int:
        return (self.attention_params_per_layer() + self.mlp_params_per_layer(active_only=active_only)
                + self.norms_per_layer * self.hidden)

    def embedding_params(self) -> int:
        """Input embedding plus the LM head when it is not tied to it."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def params(self) -> int:
        return self.layers * self.layer_params() + self.embedding_params() + self.hidden

    @property
    def active_params(self) -> int:
        """Parameters a token passes through (MoE: only the routed experts); drives FLOPs."""
        return self.layers * self.layer_params(active_only=True) + self.embedding_params() + self.hidden

    def linear_shapes_per_layer(self) -> list[tuple[int, int, int]]:
        """(in, out, count) of every nn.Linear in one decoder layer: what LoRA `all-linear` targets."""
        if self.fused_qkv:
            shapes = [(self.hidden, (self.heads + 2 * self.kv_heads) * self.head_dim, 1)]
        else:
            shapes = [(self.hidden, self.heads * self.head_dim, 1), (self.hidden, self.kv_heads * self.head_dim, 2)]
        shapes.append((self.heads * self.head_dim, self.hidden, 1))
        if self.is_moe:
            shapes += [(self.hidden, self.moe_intermediate, 2 * self.num_experts),
                       (self.moe_intermediate, self.hidden, self.num_experts)]
            if self.shared_expert_intermediate:
                shapes += [(self.hidden, self.shared_expert_intermediate, 2),
                           (self.shared_expert_intermediate, self.hidden, 1)]
        elif self.fused_gate_up:
            shapes += [(self.hidden, 2 * self.intermediate, 1), (self.intermediate, self.hidden, 1)]
        else:
            shapes += [(self.hidden, self.intermediate, 2), (self.intermediate, self.hidden, 1)]
        return shapes

    def lora_params(self, r: int) -> int:
        """LoRA A (r x in) and B (out x r) for every linear layer of every block (PEFT `all-linear`, no lm_head)."""
        per_layer = sum(count * r * (i + o) for i, o, count in self.linear_shapes_per_layer())
        return self.layers * per_layer

    def largest_layer_params(self) -> int:
        """The biggest single module: what ZeRO-3 must gather at once (the embedding, usually)."""
        return max(self.vocab * self.hidden, self.layer_params())


class GpuSpec(BaseModel):
    """One GPU model: memory, peak rates and links, from the vendor's datasheet."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """Catalogue id used by `--gpu` (`H100-80GB`)."""
    name: str
    """Marketing name (`NVIDIA H100 80GB HBM3 SXM`)."""
    vendor: Literal["nvidia", "amd"] = "nvidia"
    memory_bytes: int = Field(gt=0)
    """Usable device memory as NVML reports it (total), in bytes."""
    bf16_tflops: float | None = Field(default=None, ge=0)
    """Dense (no sparsity) bf16 tensor-core TFLOP/s; None where the GPU has no bf16."""
    fp16_tflops: float = Field(gt=0)
    fp8_tflops: float | None = Field(default=None, ge=0)
    fp32_tflops: float = Field(gt=0)
    mem_bw_gbps: float = Field(gt=0)
    """Device memory bandwidth, GB/s."""
    nvlink_gbps: float | None = Field(default=None, ge=0)
    """NVLink bandwidth per GPU, both directions together, GB/s; None for PCIe-only parts."""
    pcie_gen: int = Field(ge=3, le=6)
    pcie_lanes: int = 16
    compute_capability: str
    """`major.minor`; bf16 needs >= 8.0, fp8 >= 8.9."""
    tdp_watts: int | None = None
    consumer: bool = False
    """GeForce cards: NCCL peer-to-peer is disabled by the driver on most of them."""
    supported: bool = True
    """False for GPUs this tool can plan for but not probe (AMD: no NVML)."""
    aliases: tuple[str, ...] = ()
    nvml_names: tuple[str, ...] = ()
    """Names NVML reports for this part, to match a probed GPU to its catalogue row."""
    source: str

    @property
    def cc(self) -> tuple[int, int]:
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

    @property
    def has_bf16(self) -> bool:
        return self.cc >= (8, 0)

    @property
    def has_fp8(self) -> bool:
        return self.cc >= (8, 9)

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB

    def peak_tflops(self, dtype: str) -> float:
        if dtype in ("bf16", "bf16-mixed") and self.bf16_tflops:
            return self.bf16_tflops
        if dtype in ("fp16", "fp16-mixed", "bf16", "bf16-mixed"):
            return self.fp16_tflops
        if dtype == "fp8" and self.fp8_tflops:
            return self.fp8_tflops
        return self.fp32_tflops
