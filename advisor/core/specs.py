"""The catalogue row types: a model architecture and a GPU. Validated when built; every row cites its source.

Plain frozen dataclasses checked in __post_init__ (types, ranges, choices, consistency): the catalogue is read at
every start of `trl-advisor`, and a validation library would cost more start-up time than the whole plan search.
A bad value raises SpecError naming the field.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace

GIB = 1 << 30


class SpecError(ValueError):
    """A row value of the wrong type, out of range or inconsistent: `field` names it (or "(row)")."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _int(obj, name: str, *, low: int | None = None, above: int | None = None, optional: bool = False) -> None:
    value = getattr(obj, name)
    if value is None and optional:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise SpecError(name, f"expected a whole number, got {value!r:.40}")
    if low is not None and value < low:
        raise SpecError(name, f"must be at least {low}, got {value}")
    if above is not None and value <= above:
        raise SpecError(name, f"must be greater than {above}, got {value}")


def _float(obj, name: str, *, low: float | None = None, above: float | None = None, optional: bool = False) -> None:
    value = getattr(obj, name)
    if value is None and optional:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
        raise SpecError(name, f"expected a number, got {value!r:.40}")
    if low is not None and value < low:
        raise SpecError(name, f"must be at least {low}, got {value}")
    if above is not None and value <= above:
        raise SpecError(name, f"must be greater than {above}, got {value}")
    object.__setattr__(obj, name, float(value))


def _str(obj, name: str, *, optional: bool = False, choices: tuple[str, ...] | None = None) -> None:
    value = getattr(obj, name)
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise SpecError(name, f"expected text, got {value!r:.40}")
    if choices is not None and value not in choices:
        raise SpecError(name, f"must be one of {', '.join(choices)}, got {value!r:.40}")


def _bool(obj, name: str) -> None:
    if not isinstance(getattr(obj, name), bool):
        raise SpecError(name, f"expected true or false, got {getattr(obj, name)!r:.40}")


def _strings(obj, name: str) -> None:
    """A tuple of text (TOML gives a list: stored as a tuple, so the row stays hashable and frozen)."""
    value = getattr(obj, name)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise SpecError(name, f"expected a list of text, got {value!r:.40}")
    object.__setattr__(obj, name, tuple(value))


class _Row:
    """What the catalogue rows share: a dict view and a changed copy."""

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def with_(self, **changes):
        return replace(self, **changes)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


CAUSAL_LM_LOADS_VISION_TOWER = frozenset({"gemma3", "gemma3n", "gemma4", "gemma4_unified"})
"""model_types AutoModelForCausalLM maps to an image-text class (transformers 5.25 modeling_auto.py
MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, the *ForConditionalGeneration entries of text-and-image models)."""


MAX_MODEL_PARAMS = 10**14
"""100 trillion parameters, weights and any vision tower together: fifty times the largest open checkpoints (Kimi K2,
DeepSeek-V3: about 1T). Each config.json size is capped on its own (advisor.catalog.hf_config.MAX_CONFIG_INT), but
their products are not: a vocab_size of 10**12, or a vision image_size of 2**40, gives a model of 10**16 to 10**27
parameters whose "does not fit" and whose memory figures mean nothing."""

QUANT_METHOD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
"""A quantization method name as findings may print it: transformers' own are lower-case words with `_` and `-`
(utils/quantization_config.py QuantizationMethod); anything else in a config.json is refused before it reaches a
report."""


@dataclass(frozen=True)
class ModelSpec(_Row):
    """The architecture numbers the memory and speed model needs (from the model's `config.json`)."""

    id: str
    """Catalogue id, lower case (`qwen2.5-7b`)."""
    hf_id: str
    """Hugging Face repository id (`Qwen/Qwen2.5-7B`)."""
    model_type: str
    """`config.json` model_type (llama, qwen2, qwen3, mistral, mixtral, gemma2, gemma3_text, phi3, qwen3_moe...)."""
    layers: int
    hidden: int
    intermediate: int
    """Dense MLP width; 0 for a model whose every layer is MoE."""
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    max_positions: int
    source: str
    """URL of the config.json (or model card) these numbers were copied from."""
    tied_embeddings: bool = False
    qkv_bias: bool = False
    qk_norm: bool = False
    norms_per_layer: int = 2
    """RMSNorms per decoder layer: 2 for Llama/Qwen/Mistral, 4 for Gemma 2/3 (pre- and post-norms)."""
    fused_qkv: bool = False
    """q, k and v are one nn.Linear (Phi-3/4 `qkv_proj`): same parameters, fewer LoRA adapters."""
    fused_gate_up: bool = False
    """gate and up are one nn.Linear (Phi-3/4 `gate_up_proj`)."""
    num_experts: int = 0
    """Routed experts per MoE layer; 0 for a dense model."""
    experts_per_token: int = 0
    moe_intermediate: int = 0
    shared_expert_intermediate: int = 0
    attention: str = "full"
    """full | sliding-mix (local and global layers alternate) | sliding."""
    sliding_window: int | None = None
    size: str | None = None
    """Size shorthand this row is the reference model for (`7B`); each shorthand names one row."""
    aliases: tuple[str, ...] = ()
    remote_code: bool = False
    """config.json has an `auto_map`: the checkpoint ships its own model code, which transformers runs only with
    trust_remote_code=True (dynamic_module_utils.py resolve_trust_remote_code). Rules CFG021 / CFG022."""
    quant_method: str | None = None
    """A pre-quantized checkpoint's method (config.json `quantization_config`), as transformers names its quantizer
    (quantizers/auto.py AUTO_QUANTIZER_MAPPING: gptq, awq, fp8, bitsandbytes_4bit ...); None for 16/32-bit weights.
    The memory model does not know these formats: it counts the weights as for the unquantized checkpoint (rules
    PEFT009 / PEFT010 say so, and which plans can train on them)."""
    vision_params: int = 0
    """Parameters AutoModelForCausalLM loads beside the text decoder (the vision tower and projector of an image-text
    model_type, CAUSAL_LM_LOADS_VISION_TOWER): the bundle's train.py freezes them (freeze_vision_tower), so they are
    weights on the GPU and in the reference copy, never gradients or optimizer states. Not in `params`, which is the
    decoder the speed model runs (a text batch never enters the tower). Gemma 3 4B-27B: SigLIP so400m at 896 px,
    416,866,032, plus the projector (1152 x hidden + 1152), counted on the meta device with transformers 5.25's
    Gemma3ForConditionalGeneration."""

    def __post_init__(self) -> None:
        for name in ("id", "hf_id", "model_type", "source"):
            _str(self, name)
        for name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "vocab", "max_positions"):
            _int(self, name, above=0)
        for name in ("intermediate", "num_experts", "experts_per_token", "moe_intermediate",
                     "shared_expert_intermediate", "vision_params"):
            _int(self, name, low=0)
        _int(self, "norms_per_layer", low=1)
        _int(self, "sliding_window", above=0, optional=True)
        for name in ("tied_embeddings", "qkv_bias", "qk_norm", "fused_qkv", "fused_gate_up", "remote_code"):
            _bool(self, name)
        _str(self, "quant_method", optional=True)
        if self.quant_method is not None and not QUANT_METHOD_RE.fullmatch(self.quant_method):
            raise SpecError("quant_method", f"expected a quantization method name such as gptq, got "
                                            f"{self.quant_method!r:.40}")
        _str(self, "attention", choices=("full", "sliding-mix", "sliding"))
        _str(self, "size", optional=True)
        _strings(self, "aliases")
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", self.model_type):
            # transformers' model_type names are lower-case identifiers; the bundle writes it into code (the Liger
            # function it imports), so nothing else may pass
            raise SpecError("model_type", f"expected a transformers model_type such as qwen2, got {self.model_type!r:.40}")
        if self.heads % self.kv_heads:
            raise SpecError("(row)", f"{self.id}: heads ({self.heads}) not a multiple of kv_heads ({self.kv_heads})")
        if self.vision_params and not self.loads_vision_tower:
            raise SpecError("vision_params", f"{self.id}: AutoModelForCausalLM loads no vision tower for model_type "
                                             f"{self.model_type} (only {', '.join(sorted(CAUSAL_LM_LOADS_VISION_TOWER))})")
        if self.num_experts and not (self.experts_per_token and self.moe_intermediate):
            raise SpecError("(row)", f"{self.id}: MoE rows need experts_per_token and moe_intermediate")
        if not self.source.startswith(("https://", "http://", "file://", "local:")):
            raise SpecError("source", f"{self.id}: source must be a URL")
        if self.loaded_params > MAX_MODEL_PARAMS:
            raise SpecError("(row)", f"{self.id}: its sizes make {self.loaded_params:.3g} parameters, more than the "
                                     f"{MAX_MODEL_PARAMS:.0e} of any model")

    # ---- parameter counts (exact for the Llama/Qwen/Mistral/Gemma/Phi decoder layout) ----
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def loads_vision_tower(self) -> bool:
        """AutoModelForCausalLM loads this model_type as its image-text model, vision tower included (transformers
        5.25 models/auto/modeling_auto.py MODEL_FOR_CAUSAL_LM_MAPPING_NAMES: gemma3 -> Gemma3ForConditionalGeneration),
        while the catalogue row describes the text decoder the estimate counts."""
        return self.model_type in CAUSAL_LM_LOADS_VISION_TOWER

    @property
    def loaded_params(self) -> int:
        """Every parameter from_pretrained loads: the decoder and, for an image-text model_type, its vision tower."""
        return self.params + self.vision_params

    def decoder_only(self) -> ModelSpec:
        """The model `train.py --random-init` builds: the text decoder alone (RANDOM_INIT_MODEL_TYPE in
        advisor/bundle/render.py), so no vision tower; what verify --random-init and the benchmark rows measured."""
        return self if not self.vision_params else self.with_(vision_params=0)

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
        """LoRA A (r x in) and B (out x r) for every linear layer of every block (PEFT `all-linear`, no lm_head).

        MoE (transformers 5 stores a layer's experts as 3-D parameters, not nn.Linear): PEFT 0.21 adapts them
        through lora.ParamWrapper (target_parameters: the fused `gate_up_proj`, `down_proj` and the router's
        `gate.weight`), whose lora_A / lora_B are sized r x num_experts, twice that for the fused gate_up. Counted
        with PEFT 0.21 on transformers 5.24's Qwen3-MoE and Mixtral: gate_up 2rE(h + 2I), down rE(I + h), router
        r(h + E); the attention and a shared expert are ordinary Linears."""
        if not self.is_moe:
            return self.layers * sum(count * r * (i + o) for i, o, count in self.linear_shapes_per_layer())
        h, inter, experts = self.hidden, self.moe_intermediate, self.num_experts
        dense = [(i, o, c) for i, o, c in self.linear_shapes_per_layer() if c < experts]
        per_layer = sum(count * r * (i + o) for i, o, count in dense)
        per_layer += 2 * r * experts * (h + 2 * inter) + r * experts * (inter + h) + r * (h + experts)
        return self.layers * per_layer

    def non_expert_linear_params_per_layer(self) -> int:
        """Weights of a layer's nn.Linear modules: all of them for a dense model; a MoE's attention (and shared
        expert) only, since its experts are 3-D parameters (what bitsandbytes quantizes: nn.Linear only)."""
        shapes = self.linear_shapes_per_layer()
        if self.is_moe:
            shapes = [(i, o, c) for i, o, c in shapes if c < self.num_experts]
        return sum(i * o * c for i, o, c in shapes)

    def largest_layer_params(self) -> int:
        """The biggest single module: what ZeRO-3 must gather at once (the embedding, usually)."""
        return max(self.vocab * self.hidden, self.layer_params())


@dataclass(frozen=True)
class GpuSpec(_Row):
    """One GPU model: memory, peak rates and links, from the vendor's datasheet."""

    id: str
    """Catalogue id used by `--gpu` (`H100-80GB`)."""
    name: str
    """Marketing name (`NVIDIA H100 80GB HBM3 SXM`)."""
    memory_bytes: int
    """Usable device memory as NVML reports it (total), in bytes."""
    fp16_tflops: float
    fp32_tflops: float
    mem_bw_gbps: float
    """Device memory bandwidth, GB/s."""
    pcie_gen: int
    compute_capability: str
    """`major.minor`; bf16 needs >= 8.0, fp8 >= 8.9."""
    source: str
    vendor: str = "nvidia"
    bf16_tflops: float | None = None
    """Dense (no sparsity) bf16 tensor-core TFLOP/s; None where the GPU has no bf16."""
    fp8_tflops: float | None = None
    nvlink_gbps: float | None = None
    """NVLink bandwidth per GPU, both directions together, GB/s; None for PCIe-only parts."""
    pcie_lanes: int = 16
    tdp_watts: int | None = None
    consumer: bool = False
    """GeForce cards: NCCL peer-to-peer is disabled by the driver on most of them."""
    supported: bool = True
    """False for GPUs this tool can plan for but not probe (AMD: no NVML)."""
    aliases: tuple[str, ...] = ()
    nvml_names: tuple[str, ...] = ()
    """Names NVML reports for this part, to match a probed GPU to its catalogue row."""

    def __post_init__(self) -> None:
        for name in ("id", "name", "compute_capability", "source"):
            _str(self, name)
        _str(self, "vendor", choices=("nvidia", "amd"))
        _int(self, "memory_bytes", above=0)
        for name in ("fp16_tflops", "fp32_tflops", "mem_bw_gbps"):
            _float(self, name, above=0)
        for name in ("bf16_tflops", "fp8_tflops", "nvlink_gbps"):
            _float(self, name, low=0, optional=True)
        _int(self, "pcie_gen", low=3)
        if self.pcie_gen > 6:
            raise SpecError("pcie_gen", f"must be at most 6, got {self.pcie_gen}")
        _int(self, "pcie_lanes", above=0)
        _int(self, "tdp_watts", above=0, optional=True)
        for name in ("consumer", "supported"):
            _bool(self, name)
        _strings(self, "aliases")
        _strings(self, "nvml_names")
        if not re.fullmatch(r"[0-9]+\.[0-9]+", self.compute_capability):
            raise SpecError("compute_capability", f"expected major.minor, got {self.compute_capability!r:.20}")

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
