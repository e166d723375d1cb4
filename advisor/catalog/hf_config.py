"""Turn a transformers `config.json` dict into a ModelSpec, without importing transformers.

Handles the Llama-style decoders (llama, mistral, qwen2, qwen3, phi3, gemma, gemma2, gemma3 / gemma3_text with the
multimodal `text_config` nesting), the MoE layouts (mixtral, qwen2_moe, qwen3_moe) and GPT-2-style key names
(n_layer / n_embd / n_head). Keys a config leaves out take the value transformers' config class would use; a key
that has no such default raises InputFileError naming it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from advisor.core.errors import InputFileError
from advisor.core.specs import CAUSAL_LM_LOADS_VISION_TOWER, QUANT_METHOD_RE, ModelSpec, SpecError

# Key names, in the order they are tried (GPT-2 / GPT-NeoX / Falcon spellings after the Llama ones).
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HIDDEN = ("hidden_size", "n_embd", "d_model")
_HEADS = ("num_attention_heads", "n_head", "num_heads")
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
_INTERMEDIATE = ("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim")
_POSITIONS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length")
_VOCAB = ("vocab_size", "padded_vocab_size")

# Defaults of the transformers config classes for keys their published config.json files leave out.
# gemma3_text: Gemma3TextConfig (the 4B/12B/27B text_config lists only a few keys; transformers 5.x defaults).
_TYPE_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262208,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "tie_word_embeddings": True,
    },
    "gemma2": {"vocab_size": 256000, "head_dim": 256, "max_position_embeddings": 8192, "sliding_window": 4096},
    "gemma": {"vocab_size": 256000, "head_dim": 256, "max_position_embeddings": 8192},
}

# tie_word_embeddings when the config omits it: False for the Llama-family classes, True for the Gemma classes and
# for PretrainedConfig itself (GPT-2 and anything unknown).
_UNTIED_BY_DEFAULT = frozenset(
    {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "olmo2", "granite"}
)

# Qwen2 / Qwen2-MoE put a bias on q, k and v in code, whatever the config says.
_ALWAYS_QKV_BIAS = frozenset({"qwen2", "qwen2_moe"})
# Per-head RMSNorm on q and k (head_dim weights each).
_QK_NORM = frozenset({"qwen3", "qwen3_moe", "gemma3_text"})
# Every layer alternates local / global attention in the model code even when the config has no layer_types.
_SLIDING_MIX = frozenset({"gemma2", "gemma3_text"})
# Models whose `sliding_window`, when set, applies to every layer.
_SLIDING_ALL = frozenset({"mistral", "mixtral", "phi3", "starcoder2"})
# Two-matrix (non-gated) MLPs. ModelSpec assumes gate/up/down (3 * hidden * width); the width is scaled by 2/3 so
# the parameter count stays right (LoRA shapes of these models are then approximate).
_NON_GATED = frozenset({"gpt2", "gpt_bigcode", "gptj", "gpt_neox", "gpt_neo", "phi", "opt", "bloom", "falcon", "starcoder2"})

BUILT_IN_MODEL_TYPES = frozenset(
    {"gemma", "gemma3", *_TYPE_DEFAULTS, *_UNTIED_BY_DEFAULT, *_QK_NORM, *_SLIDING_MIX, *_SLIDING_ALL, *_NON_GATED}
)
"""The model_types this reader knows by name, each a class of transformers itself (5.x models/auto/
configuration_auto.py CONFIG_MAPPING_NAMES and modeling_auto.py MODEL_FOR_CAUSAL_LM_MAPPING_NAMES; checked against the
installed transformers in tests/rules/test_rules_data_vs_installed.py). Such a config.json loads with
trust_remote_code=False even when it has an auto_map: transformers then uses its own class (dynamic_module_utils.py
resolve_trust_remote_code: has_local_code). Rules CFG021 / CFG022."""


def _first(cfg: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    return None


_CONFIG_KEYS_HINT = ("expected a transformers causal-LM config.json (num_hidden_layers, hidden_size, "
                     "num_attention_heads, vocab_size, ...)")
_WHOLE_NUMBER_HINT = "sizes and counts in config.json are whole numbers, as transformers writes them"
# A layer of zero width, heads or experts is built by transformers without complaint (intermediate_size 0 makes an
# MLP of empty matrices, num_attention_heads 0 divides by zero) and trains nothing: a size is at least 1.
_POSITIVE_HINT = "a model's sizes and counts are at least 1; correct config.json or download it again"
# transformers 5 config classes are @strict dataclasses typed `bool` (configuration_utils.py, huggingface_hub
# dataclasses.strict): "yes", 1 or "false" fail there when the model loads; null is the class default.
_BOOL_HINT = "switches in config.json are JSON true or false (or null for the default), as transformers writes them"
# transformers spells "no window" null (MistralConfig / Qwen2Config `sliding_window: int | None`); a window of 0 or
# fewer tokens masks every key (masking_utils.py sliding_window_overlay: kv_idx > q_idx - window), and the configs
# that check it refuse it (models/kolibri1/configuration_kolibri1.py: `sliding_window <= 0`).
_WINDOW_HINT = "sliding_window is the window in tokens, at least 1; transformers writes null for no window"
_AUTO_MAP_HINT = "auto_map maps transformers' Auto classes to code files of the model repository, as a JSON object"
_QUANT_HINT = ("quantization_config is the JSON object transformers writes for a pre-quantized checkpoint, with a "
               "quant_method such as gptq, awq or fp8")

MAX_CONFIG_INT = 1 << 40
"""Largest size or count accepted from a config.json (about 1.1e12). The largest real values are context lengths
(Llama 4 Scout: 10,485,760 positions) and vocabularies (Gemma 3: 262,208); a value beyond 2**40 is a typo or a
sentinel, and the parameter and memory arithmetic on it would be meaningless."""


def _shown(value: Any) -> str:
    return repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."


def _key(cfg: Mapping[str, Any], names: tuple[str, ...]) -> str:
    """The spelling of `names` this config uses (the first one set), to name it in an error."""
    return next((name for name in names if cfg.get(name) is not None), names[0])


def _int(cfg: Mapping[str, Any], names: tuple[str, ...], source: str, *, default: int | None = None,
         low: int = 1, hint: str = _POSITIVE_HINT) -> int:
    """The first of `names` that the config sets, as a whole number in [low, MAX_CONFIG_INT]; `default` when none is
    set. NaN, infinities, fractions, booleans, text, values below `low` (a size is at least 1; `low=0` for counts
    where 0 means none) and huge values raise InputFileError naming the key (`hint` for a value below `low`)."""
    key = next((name for name in names if cfg.get(name) is not None), None)
    if key is None:
        if default is not None:
            return default
        raise InputFileError(f"{source}: config.json has no '{names[0]}'", hint=_CONFIG_KEYS_HINT)
    value = cfg[key]
    whole = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if not whole:
        raise InputFileError(f"{source}: config.json key '{key}' is {_shown(value)}, not a whole number",
                             hint=_WHOLE_NUMBER_HINT)
    number = int(value)
    if not low <= number <= MAX_CONFIG_INT:
        raise InputFileError(f"{source}: config.json key '{key}' is {number}, outside {low} to {MAX_CONFIG_INT:,}",
                             hint=hint if number < low else _WHOLE_NUMBER_HINT)
    return number


def _flag(cfg: Mapping[str, Any], key: str, source: str, *, default: bool) -> bool:
    """A boolean key: JSON true or false, `default` when absent or null; anything else raises InputFileError (Python's
    truth would read the text "false" as true)."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InputFileError(f"{source}: config.json key '{key}' is {_shown(value)}, not true or false",
                             hint=_BOOL_HINT)
    return value


def _remote_code(cfg: Mapping[str, Any], source: str) -> bool:
    """Whether config.json has an auto_map (code of its own for AutoConfig / AutoModelForCausalLM ...): transformers
    loads that code only with trust_remote_code=True (models/auto/auto_factory.py, configuration_auto.py:
    `has_remote_code = "auto_map" in config_dict`)."""
    auto_map = cfg.get("auto_map")
    if auto_map is None:
        return False
    if not isinstance(auto_map, Mapping):
        raise InputFileError(f"{source}: config.json key 'auto_map' is {_shown(auto_map)}, not a JSON object",
                             hint=_AUTO_MAP_HINT)
    return bool(auto_map)


def _quant_method(cfg: Mapping[str, Any], t: Mapping[str, Any], source: str) -> str | None:
    """The quantization method of a pre-quantized checkpoint, as transformers 5.x resolves it (quantizers/auto.py
    get_hf_quantizer reads config.quantization_config, else the text config's; AutoQuantizationConfig.from_dict
    turns load_in_4bit / load_in_8bit into bitsandbytes_4bit / _8bit and refuses a config without quant_method).
    None when there is none (an empty object counts as none there too)."""
    quant = cfg.get("quantization_config") or t.get("quantization_config")
    if not quant:
        return None
    if not isinstance(quant, Mapping):
        raise InputFileError(f"{source}: config.json key 'quantization_config' is {_shown(quant)}, not a JSON object",
                             hint=_QUANT_HINT)
    if _flag(quant, "load_in_4bit", source, default=False):
        return "bitsandbytes_4bit"
    if _flag(quant, "load_in_8bit", source, default=False):
        return "bitsandbytes_8bit"
    method = quant.get("quant_method")
    if method is None:
        raise InputFileError(f"{source}: config.json quantization_config has no quant_method", hint=_QUANT_HINT)
    if not isinstance(method, str) or not QUANT_METHOD_RE.fullmatch(method):
        raise InputFileError(f"{source}: config.json quantization_config quant_method is {_shown(method)}, not a "
                             "quantization method name", hint=_QUANT_HINT)
    return method


def _text_part(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The decoder's own keys: `text_config` of a multimodal config over the top level, then class defaults."""
    text = cfg.get("text_config")
    merged: dict[str, Any] = dict(cfg)
    if isinstance(text, Mapping):
        merged = {k: v for k, v in cfg.items() if k not in ("text_config", "vision_config", "audio_config")}
        merged.update(text)
        if cfg.get("model_type") == "gemma3" and "model_type" not in text:
            merged["model_type"] = "gemma3_text"
    inner_type = str(merged.get("model_type") or "")
    for key, value in _TYPE_DEFAULTS.get(inner_type, {}).items():
        if merged.get(key) is None:
            merged[key] = value
    return merged


def _attention(t: Mapping[str, Any], inner_type: str, max_positions: int, source: str) -> tuple[str, int | None]:
    window = (_int(t, ("sliding_window",), source, low=-MAX_CONFIG_INT, hint=_WINDOW_HINT)
              if t.get("sliding_window") is not None else None)
    use_window = _flag(t, "use_sliding_window", source, default=False)
    layer_types = t.get("layer_types")
    if window is not None and window <= 0:
        # A window the model uses must hold a token; one it never applies (Qwen2/Qwen2-MoE with use_sliding_window
        # false write sliding_window 0 in some configs, and transformers builds them) is no window.
        applies = (inner_type in _SLIDING_MIX or inner_type in _SLIDING_ALL or use_window
                   or (isinstance(layer_types, list) and any("sliding" in str(kind) for kind in layer_types)))
        if applies:
            raise InputFileError(f"{source}: config.json key 'sliding_window' is {window}, outside 1 to "
                                 f"{MAX_CONFIG_INT:,}", hint=_WINDOW_HINT)
        window = None
    if isinstance(layer_types, list) and layer_types:
        sliding = sum(1 for kind in layer_types if "sliding" in str(kind))
        if sliding == 0:
            return "full", None
        return ("sliding" if sliding == len(layer_types) else "sliding-mix"), window
    if window is None or window >= max_positions:
        return "full", None
    if inner_type in _SLIDING_MIX:
        return "sliding-mix", window
    if inner_type in _SLIDING_ALL:
        return "sliding", window
    if use_window:
        # Qwen2: layers from max_window_layers on use the window.
        first = t.get("max_window_layers")
        layers = _first(t, _LAYERS)
        if isinstance(first, int) and isinstance(layers, int) and first > 0:
            return ("sliding-mix" if first < layers else "full"), (window if first < layers else None)
        return "sliding", window
    return "full", None


_SIGLIP_DEFAULTS: dict[str, Any] = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                                    "num_channels": 3, "image_size": 224, "patch_size": 16}
"""SiglipVisionConfig's defaults (transformers 5.25 models/siglip/configuration_siglip.py), for the keys a Gemma 3
config.json leaves out (vision_use_head defaults to true there)."""


def _vision_params(cfg: Mapping[str, Any], top_type: str, text_hidden: int, source: str) -> int:
    """Parameters of the vision tower and projector AutoModelForCausalLM loads with an image-text model_type
    (ModelSpec.vision_params), counted from `vision_config` as transformers builds them: a SigLIP ViT (patch
    embedding Conv2d with bias, a position embedding per patch, per layer q/k/v/o and fc1/fc2 with biases and two
    LayerNorms, the post-LayerNorm, the attention-pooling head when vision_use_head) and Gemma 3's projector
    (mm_input_projection_weight [vision hidden, text hidden] and its RMSNorm). Checked against
    Gemma3ForConditionalGeneration on the meta device (tests/catalog/test_vision_params.py). 0 for a text-only
    model_type, and for a tower of another kind (Gemma 3n's MobileNet, audio towers): not modelled."""
    if top_type not in CAUSAL_LM_LOADS_VISION_TOWER:
        return 0
    vision = cfg.get("vision_config")
    if vision is None:
        vision = {}  # Gemma3Config builds SiglipVisionConfig() when the file has none
    if not isinstance(vision, Mapping):
        raise InputFileError(f"{source}: config.json key 'vision_config' is {_shown(vision)}, not a JSON object",
                             hint=_CONFIG_KEYS_HINT)
    if top_type != "gemma3" or str(vision.get("model_type") or "siglip_vision_model") != "siglip_vision_model":
        return 0
    v = {**_SIGLIP_DEFAULTS, **{k: val for k, val in vision.items() if val is not None}}
    h = _int(v, ("hidden_size",), source, hint=_WHOLE_NUMBER_HINT)
    inner = _int(v, ("intermediate_size",), source, hint=_WHOLE_NUMBER_HINT)
    layers = _int(v, ("num_hidden_layers",), source, hint=_WHOLE_NUMBER_HINT)
    channels = _int(v, ("num_channels",), source, hint=_WHOLE_NUMBER_HINT)
    # one number each: SiglipVisionEmbeddings computes (image_size // patch_size) ** 2 and fails on a pair
    image = _int(v, ("image_size",), source, hint=_WHOLE_NUMBER_HINT)
    patch = _int(v, ("patch_size",), source, hint=_WHOLE_NUMBER_HINT)
    patches = (image // patch) ** 2
    layer = 4 * (h * h + h) + 2 * 2 * h + (h * inner + inner) + (inner * h + h)
    tower = (channels * patch * patch * h + h) + patches * h + layers * layer + 2 * h
    if _flag(vision, "vision_use_head", source, default=True):
        # SiglipMultiheadAttentionPoolingHead: probe, nn.MultiheadAttention (in_proj 3h x h + 3h, out_proj), the
        # LayerNorm and an MLP
        tower += h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * inner + inner) + (inner * h + h)
    projector = h * text_hidden + h
    return tower + projector


def spec_from_config(
    cfg: Mapping[str, Any], *, source: str, id: str | None = None, hf_id: str | None = None
) -> ModelSpec:
    """Read the numbers ModelSpec needs from a transformers config dict.

    `source` is the URL (or file:// path) the dict came from and names it in errors; `id` and `hf_id` default to the
    config's `_name_or_path`, then to its model_type.
    """
    if not isinstance(cfg, Mapping):
        raise InputFileError(f"{source}: config.json is not a JSON object", hint=_CONFIG_KEYS_HINT)
    top_type = str(cfg.get("model_type") or "")
    t = _text_part(cfg)
    inner_type = str(t.get("model_type") or top_type)
    if _first(t, ("kv_lora_rank",)) is not None:
        raise InputFileError(
            f"{source}: model_type '{top_type}' uses multi-head latent attention, which this version cannot model",
            hint="pick a catalogue model (`trl-advisor models`) or a Llama/Qwen/Mistral/Gemma/Phi-style model",
        )

    layers = _int(t, _LAYERS, source)
    hidden = _int(t, _HIDDEN, source)
    heads = _int(t, _HEADS, source)
    kv_heads = _int(t, _KV_HEADS, source, default=heads)
    if _flag(t, "multi_query", source, default=False) and _first(t, _KV_HEADS) is None:
        kv_heads = 1  # GPT-BigCode / Falcon-7B multi-query attention
    if t.get("head_dim") is None and hidden < heads:
        # transformers' default head_dim is hidden_size // num_attention_heads (MistralConfig.__post_init__): 0 here
        raise InputFileError(f"{source}: config.json key '{_key(t, _HIDDEN)}' ({hidden}) is smaller than "
                             f"'{_key(t, _HEADS)}' ({heads}): each head would be 0 wide",
                             hint="hidden_size is num_attention_heads x head_dim; correct config.json or set head_dim")
    head_dim = _int(t, ("head_dim",), source, default=hidden // heads)
    vocab = _int(t, _VOCAB, source)
    max_positions = _int(t, _POSITIONS, source)

    # 0 experts is a dense model: Qwen2/3-MoE build a dense MLP in every layer then (modeling_qwen3_moe.py
    # Qwen3MoeDecoderLayer: `config.num_experts > 0 and ...`).
    experts_keys = ("num_experts", "num_local_experts", "n_routed_experts")
    num_experts = _int(t, experts_keys, source, default=0, low=0, hint=_WHOLE_NUMBER_HINT)
    experts_per_token = moe_intermediate = shared = 0
    if num_experts:
        experts_per_token = _int(t, ("num_experts_per_tok", "moe_topk"), source)
        if experts_per_token > num_experts:
            # the router's torch.topk(k) over num_experts scores fails at the first step
            raise InputFileError(f"{source}: config.json key '{_key(t, ('num_experts_per_tok', 'moe_topk'))}' is "
                                 f"{experts_per_token}, more than '{_key(t, experts_keys)}' ({num_experts})",
                                 hint="a token is routed to at most as many experts as the layer has")
        if inner_type == "mixtral" or t.get("moe_intermediate_size") is None:
            # Mixtral names the expert width intermediate_size and has no dense MLP.
            moe_intermediate = _int(t, _INTERMEDIATE, source)
            intermediate = 0
        else:
            moe_intermediate = _int(t, ("moe_intermediate_size",), source)
            # Every layer is MoE unless mlp_only_layers / decoder_sparse_step say otherwise; ModelSpec has no
            # per-layer mix, so such a config is counted as all-MoE.
            intermediate = 0
        # 0: no shared expert (Qwen2-MoE's shared MLP of width 0 adds nothing)
        shared = _int(t, ("shared_expert_intermediate_size",), source, default=0, low=0, hint=_WHOLE_NUMBER_HINT)
    else:
        intermediate = _int(t, _INTERMEDIATE, source, default=4 * hidden if inner_type in _NON_GATED else None)
        if inner_type in _NON_GATED or ("n_embd" in t and "intermediate_size" not in t):
            intermediate = round(2 * intermediate / 3)

    tie_default = inner_type not in _UNTIED_BY_DEFAULT and top_type not in _UNTIED_BY_DEFAULT
    tied = _flag(t, "tie_word_embeddings", source,
                 default=_flag(cfg, "tie_word_embeddings", source, default=tie_default))
    attention_bias = _flag(t, "attention_bias", source, default=False)
    qkv_bias = _flag(t, "qkv_bias", source, default=False) or attention_bias or inner_type in _ALWAYS_QKV_BIAS
    if "n_embd" in t and inner_type in _NON_GATED:
        qkv_bias = True  # GPT-2 style: every linear has a bias
    attention, window = _attention(t, inner_type, max_positions, source)
    remote_code = _remote_code(cfg, source)
    quant_method = _quant_method(cfg, t, source)
    vision_params = _vision_params(cfg, top_type, hidden, source)

    name = hf_id or id or str(cfg.get("_name_or_path") or "") or top_type or "model"
    try:
        return ModelSpec(
            id=(id or name).lower(),
            hf_id=hf_id or name,
            model_type=top_type or inner_type or "unknown",
            layers=layers,
            hidden=hidden,
            intermediate=intermediate,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            vocab=vocab,
            tied_embeddings=tied,
            max_positions=max_positions,
            qkv_bias=qkv_bias,
            qk_norm=inner_type in _QK_NORM,
            # Gemma 2/3 add pre- and post-feedforward norms (modeling_gemma2.py Gemma2DecoderLayer): 4 per layer.
            norms_per_layer=4 if inner_type.startswith("gemma2") or inner_type.startswith("gemma3") else 2,
            # Phi-3/4 fuse q,k,v into qkv_proj and gate,up into gate_up_proj (modeling_phi3.py).
            fused_qkv=inner_type == "phi3",
            fused_gate_up=inner_type == "phi3",
            num_experts=num_experts,
            experts_per_token=experts_per_token,
            moe_intermediate=moe_intermediate,
            shared_expert_intermediate=shared,
            attention=attention,
            sliding_window=window,
            source=source,
            remote_code=remote_code,
            quant_method=quant_method,
            vision_params=vision_params,
        )
    except SpecError as exc:
        where = "config" if exc.field == "(row)" else exc.field
        raise InputFileError(f"{source}: config.json gives an invalid {where}: {exc.message}",
                             hint=_CONFIG_KEYS_HINT) from None
