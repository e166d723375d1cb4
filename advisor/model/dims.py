"""What the memory terms read: the architecture numbers of a ModelSpec (cached per instance: the planner evaluates
thousands of plans per model) and the bytes per element of each kind of tensor for a plan's precision."""

from __future__ import annotations

from advisor.core.plan import Plan
from advisor.core.specs import ModelSpec
from advisor.model.units import DS_PERSISTENCE_FACTOR, FP32, HALF

MOE_PARAM_TARGETS = 3
"""Parameters of a MoE layer PEFT 0.21 adapts with lora.ParamWrapper (target_parameters): the experts' fused
gate_up_proj and down_proj, and the router's weight (ModelSpec.lora_params)."""

# ---------------------------------------------------------------------------------------------------------------------
# Model-derived numbers, computed once per ModelSpec object (the planner evaluates thousands of plans per model)
# ---------------------------------------------------------------------------------------------------------------------
class Dims:
    """Architecture numbers the terms read, cached per ModelSpec instance."""

    __slots__ = ("model", "P", "vision", "L", "h", "I", "q", "kv", "V", "heads", "head_dim", "embed", "lm_head", "layer",
                 "quantized", "max_linear", "max_in", "largest_module", "largest_layer_module", "experts_per_layer", "tensors",
                 "param_modules", "persistent_modules", "linears_per_layer", "nn_linears_per_layer",
                 "adapted_per_layer",
                 "persistent_small", "moe", "experts_per_token", "moe_I", "shared_I", "num_experts", "matmul_active",
                 "norms", "qkv_linears", "gate_up_linears", "qk_norm", "gemma_norm", "attn_softcap",
                 "sliding_fraction", "fused_qkv", "rope_cat", "mlp_output_saved", "_lora")

    def __init__(self, m: ModelSpec) -> None:
        self.model = m
        self.P = m.params
        self.vision = m.vision_params  # loaded and frozen beside the decoder (ModelSpec.vision_params)
        self.L = m.layers
        self.h = m.hidden
        self.I = m.intermediate
        self.q = m.heads * m.head_dim
        self.kv = m.kv_heads * m.head_dim
        self.V = m.vocab
        self.heads = m.heads
        self.head_dim = m.head_dim
        self.embed = m.vocab * m.hidden
        self.lm_head = self.embed  # the LM head's weight (shared with the embedding when tied)
        self.layer = m.layer_params()
        shapes = m.linear_shapes_per_layer()
        # bitsandbytes quantizes every nn.Linear of the decoder layers; transformers keeps lm_head unquantized
        # (get_keys_to_not_convert) and embeddings / norms / biases are not Linear weights. A MoE's experts are 3-D
        # parameters, not nn.Linear (transformers 5): they stay in 16-bit (integrations/bitsandbytes.py replaces
        # nn.Linear / Conv1D only), which is most of a MoE's weights.
        self.quantized = m.layers * m.non_expert_linear_params_per_layer()
        self.max_linear = max(i * o for i, o, _ in shapes)
        self.max_in = max(i for i, _, _ in shapes)
        experts = m.num_experts * 3 * m.hidden * m.moe_intermediate if m.is_moe else 0
        # What ZeRO-3 gathers at once is one module's own parameters: the embedding (or LM head), the widest Linear,
        # or a fused MoE expert block (transformers 5 stores the experts of a layer as one module).
        self.largest_module = max(self.embed, self.max_linear, experts)
        self.experts_per_layer = experts  # one layer's fused expert stack (gate_up_proj + down_proj), parameters
        self.largest_layer_module = max(self.max_linear, experts)  # the same within the decoder layers
        self.norms = m.norms_per_layer
        self.qkv_linears = 1 if m.fused_qkv else 3
        self.fused_qkv = m.fused_qkv
        self.qk_norm = m.qk_norm
        self.rope_cat = m.model_type in ROPE_CAT_TYPES
        # Gemma's RMSNorm computes `(x * rsqrt(...)) * (1.0 + weight.float())` in fp32 and casts the result
        # (transformers models/gemma2, gemma3 Gemma*RMSNorm), so a trained weight's grad needs the fp32 normalized
        # tensor; Llama-style norms cast to the input dtype first (`weight * x.to(input_dtype)`).
        self.gemma_norm = m.model_type in GEMMA_NORM_TYPES
        # Gemma 2 caps attention logits (Gemma2Config attn_logit_softcapping = 50.0: eager_attention_forward divides,
        # takes tanh, multiplies); Gemma 3 has none (attn_logit_softcapping None).
        self.attn_softcap = m.model_type in ATTN_SOFTCAP_TYPES
        # Whether a later op of the layer saves the MLP's output for its backward: Gemma's post-feedforward RMSNorm
        # (norms beyond the two pre-norms) and a MoE's routing-weight multiply do; Llama/Qwen/Mistral/Phi-3 add it to
        # the residual stream, which saves nothing (what checkpointing's recompute may skip: speed.recompute_flops).
        self.mlp_output_saved = m.norms_per_layer > 2 or m.is_moe
        # Layers that attend through a sliding window: every layer ("sliding": Phi-3, Mistral v0.1), Gemma 2 every
        # other layer, Gemma 3 five of six (catalogue note, models.toml; Gemma2/3Config layer_types).
        if m.attention == "sliding" and m.sliding_window:
            self.sliding_fraction = 1.0
        elif m.attention == "sliding-mix" and m.sliding_window:
            self.sliding_fraction = SLIDING_MIX_FRACTION.get(m.model_type, 0.5)
        else:
            self.sliding_fraction = 0.0
        self.gate_up_linears = 1 if m.fused_gate_up else 2
        per_layer = (self.qkv_linears + 1) + (3 if m.qkv_bias else 0) + (2 if m.qk_norm else 0) + m.norms_per_layer
        per_layer += (2 + 1 + (3 if m.shared_expert_intermediate else 0)) if m.is_moe else self.gate_up_linears + 1
        self.tensors = m.layers * per_layer + 2 + (0 if m.tied_embeddings else 1)
        # Modules that hold parameters of their own, the unit DeepSpeed ZeRO-3's pre/post-forward hooks fetch and
        # release (partitioned_param_coordinator.fetch_sub_module: one params set, one wait loop, one prefetch
        # bookkeeping per module): a layer's attention Linears (a bias lives in its Linear), its norms (Qwen3's q/k
        # norms too), the MLP's Linears or a MoE's router and fused expert block (plus the shared expert's three
        # Linears); the embedding, the final norm and the LM head (a module even when its weight is tied).
        mlp_modules = (2 + (3 if m.shared_expert_intermediate else 0)) if m.is_moe else self.gate_up_linears + 1
        self.param_modules = m.layers * ((self.qkv_linears + 1) + (2 if m.qk_norm else 0) + m.norms_per_layer
                                         + mlp_modules) + 3
        # Of those, the modules whose every parameter is at most stage3_param_persistence_threshold (10 x hidden, as
        # transformers' DeepSpeed integration fills "auto"; partition_parameters.py marks them ds_persist): never
        # partitioned, so ZeRO-3's hooks find them gathered. The norms (hidden or head_dim values), the final norm,
        # and a router of at most ten experts (hidden x experts values: Mixtral's eight).
        router = 1 if m.is_moe and m.num_experts <= DS_PERSISTENCE_FACTOR else 0
        self.persistent_modules = m.layers * ((2 if m.qk_norm else 0) + m.norms_per_layer + router) + 1
        self.linears_per_layer = sum(c for _, _, c in shapes)
        # nn.Linear modules of a layer: all of them in a dense model; a MoE's attention and shared expert only
        # (transformers 5 keeps a layer's experts as 3-D parameters of one module: what bitsandbytes quantizes is
        # nn.Linear only, integrations/bitsandbytes.py).
        self.nn_linears_per_layer = sum(c for _, _, c in shapes if not m.is_moe or c < m.num_experts)
        # Modules PEFT's all-linear LoRA adapts per layer, each with its own adapter chain whatever it holds: the
        # nn.Linear ones, and of a MoE the three lora.ParamWrapper targets (the fused gate_up_proj, down_proj and the
        # router's weight: ModelSpec.lora_params), one adapter each over all the experts.
        self.adapted_per_layer = self.nn_linears_per_layer + (MOE_PARAM_TARGETS if m.is_moe else 0)
        # Params under stage3_param_persistence_threshold (10 * hidden): norms and q/k/v biases stay gathered.
        small = m.norms_per_layer * m.hidden + ((m.heads + 2 * m.kv_heads) * m.head_dim if m.qkv_bias else 0)
        self.persistent_small = m.layers * small + m.hidden
        self.moe = m.is_moe
        self.num_experts = m.num_experts
        self.experts_per_token = m.experts_per_token
        self.moe_I = m.moe_intermediate
        self.shared_I = m.shared_expert_intermediate
        # Weights a token multiplies by (MoE: routed experts only); the embedding is a lookup, the LM head a matmul.
        self.matmul_active = m.layers * m.layer_params(active_only=True) + self.lm_head
        self._lora: dict[int, int] = {}

    def lora(self, r: int) -> int:
        v = self._lora.get(r)
        if v is None:
            v = self._lora[r] = self.model.lora_params(r)
        return v


GEMMA_NORM_TYPES = ("gemma", "gemma2", "gemma3", "gemma3_text")
"""model_types whose RMSNorm runs in fp32 up to the output cast (Gemma*RMSNorm: `output * (1.0 + weight.float())`)."""
ATTN_SOFTCAP_TYPES = ("gemma2",)
"""model_types whose eager attention soft-caps the scores (tanh, whose output its backward saves)."""
ROPE_CAT_TYPES = ("phi3",)
"""model_types whose apply_rotary_pos_emb ends in `torch.cat([q_rot * cos + rotate_half(q_rot) * sin, q_pass], -1)`
(modeling_phi3.py, for partial rotary, also at full rotary where q_pass is empty): q and k are written as new
contiguous [b, heads, s, d] tensors, where Llama's elementwise rotary keeps q_proj's [b, s, heads, d] layout. SDPA's
cuDNN and flash backends allocate their output in the query's layout (torch/_meta_registrations.py
alloc_with_matching_layout), so `attn_output.transpose(1, 2).contiguous()` (integrations/sdpa_attention.py) copies,
and o_proj saves the copy. Checked on the CPU with saved-tensor hooks (Phi-3 against Llama of the same dimensions:
one extra [t, heads x head_dim] tensor per layer, gone when Llama's rotary is swapped in); on the H200 it is the
3.2 % the Phi-3-mini near-capacity row was under-predicted by (4.1 GiB at 22,528 tokens x 32 layers x 3072 x 2 B)."""
SLIDING_MIX_FRACTION = {"gemma2": 0.5, "gemma3": 5 / 6, "gemma3_text": 5 / 6}
"""Sliding-window layers per layer of a "sliding-mix" model (Gemma 2: alternating; Gemma 3: 5 local per global)."""

_DIMS: dict[int, Dims] = {}


def dims(model: ModelSpec) -> Dims:
    d = _DIMS.get(id(model))
    if d is None or d.model is not model:
        if len(_DIMS) > 256:
            _DIMS.clear()
        d = _DIMS[id(model)] = Dims(model)
    return d


# ---------------------------------------------------------------------------------------------------------------------
# Precision: bytes per element of each kind of tensor (CONTRACT.md definitions)
# ---------------------------------------------------------------------------------------------------------------------
class Precision:
    """Bytes per element for a plan.

    load: the dtype the model is loaded in (bf16 -> 2: `dtype=bfloat16`, trained by the HF Trainer with no fp32
      master; bf16-mixed / fp16-mixed / fp32 -> 4: fp32 weights, autocast for the mixed ones).
    work: DeepSpeed's working copy (bf16/fp16 enabled -> 2, the engine casts the module; fp32 -> 4).
    master: DeepSpeed's fp32 master copy (4; 0 when training in fp32, where the working copy is the master).
    act: linear-layer activations (2 under bf16 / autocast / DeepSpeed / FSDP2 mixed precision, 4 in fp32).
    res: the residual stream and norm inputs (4 under autocast with fp32 weights: the embedding output is fp32 and
      `fp32 + bf16` promotes; else like act).
    adapter: LoRA weights. PEFT 0.21 get_peft_model(autocast_adapter_dtype=True) upcasts bf16/fp16 adapters to fp32;
      TRL 1.16 passes autocast_adapter_dtype=False under DeepSpeed ZeRO-3 (sft_trainer.py: mixed-dtype ZeRO-3
      persistent params) and casts QLoRA adapters to bf16 (sft_trainer.py "QLoRA ... converted to bf16"); and the
      DeepSpeed engine casts every floating parameter to the 16-bit dtype anyway (engine.py
      _configure_distributed_model -> _cast_module_mixed_precision), so adapters are 16-bit under any ZeRO stage.
    trained: full fine-tuning's trainable parameters as the optimizer holds them: the load dtype, except under FSDP2
      with mixed precision (the bundle's accelerate.yaml and TRL's bf16=True both say "bf16"), where accelerate 1.15
      upcasts every trainable parameter to fp32 before fully_shard (accelerate/utils/fsdp_utils.py
      fsdp2_prepare_model: "FSDP upcast of low precision parameters to fp32"): fp32 master weights, grads and AdamW
      states, sharded. Found on 2 x H200 (2026-11-29): a DPO 8B FSDP2 plan predicted at 116.5 GiB without it ran out
      of memory at 137 GiB.
    """

    __slots__ = ("load", "work", "master", "act", "res", "adapter", "compute", "autocast", "fp32_weights_amp",
                 "trained")

    @classmethod
    def of(cls, plan: Plan) -> Precision:
        """The Precision of a plan, shared by every plan of the same precision, backend and method (they are pure
        functions of those three; the planner asks for it twice per candidate, thousands of times a search)."""
        key = (plan.precision, plan.backend, plan.method)
        pr = _PRECISIONS.get(key)
        if pr is None:
            pr = _PRECISIONS[key] = cls(plan)
        return pr

    def __init__(self, plan: Plan) -> None:
        p = plan.precision
        fp32 = p == "fp32"
        mixed = p in ("bf16-mixed", "fp16-mixed")
        ds = plan.backend == "deepspeed"
        fsdp = plan.backend == "fsdp2"
        self.load = HALF if p == "bf16" else FP32
        self.work = FP32 if fp32 else HALF
        self.master = 0 if fp32 else FP32
        self.act = FP32 if fp32 else HALF
        self.compute = self.act
        # torch.autocast: TRL's bf16=True default makes accelerate run the forward under autocast (native AMP) for
        # single/DDP, also when the model itself is bf16; DeepSpeed casts the module to bf16 instead and FSDP2's
        # MixedPrecisionPolicy all-gathers bf16 parameters. Only fp32 weights under autocast (the *-mixed precisions)
        # make the residual stream fp32 and get bf16 weight copies cached.
        self.autocast = not fp32 and not ds and not fsdp
        self.fp32_weights_amp = mixed and self.autocast
        self.res = FP32 if (fp32 or self.fp32_weights_amp) else HALF
        self.trained = FP32 if fsdp else self.load
        if plan.method == "qlora":
            self.adapter = HALF
        elif ds:
            self.adapter = self.work
        else:
            self.adapter = FP32


_PRECISIONS: dict[tuple[str, str, str], Precision] = {}
