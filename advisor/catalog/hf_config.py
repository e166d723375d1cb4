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
from advisor.core.specs import ModelSpec, SpecError

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


def _first(cfg: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    return None


_CONFIG_KEYS_HINT = ("expected a transformers causal-LM config.json (num_hidden_layers, hidden_size, "
                     "num_attention_heads, vocab_size, ...)")
_WHOLE_NUMBER_HINT = "sizes and counts in config.json are whole numbers, as transformers writes them"

MAX_CONFIG_INT = 1 << 40
"""Largest size or count accepted from a config.json (about 1.1e12). The largest real values are context lengths
(Llama 4 Scout: 10,485,760 positions) and vocabularies (Gemma 3: 262,208); a value beyond 2**40 is a typo or a
sentinel, and the parameter and memory arithmetic on it would be meaningless."""


def _int(cfg: Mapping[str, Any], names: tuple[str, ...], source: str, *, default: int | None = None) -> int:
    """The first of `names` that the config sets, as a whole number in [0, MAX_CONFIG_INT]; `default` when none is
    set. NaN, infinities, fractions, booleans, text, negatives and huge values raise InputFileError naming the key."""
    key = next((name for name in names if cfg.get(name) is not None), None)
    if key is None:
        if default is not None:
            return default
        raise InputFileError(f"{source}: config.json has no '{names[0]}'", hint=_CONFIG_KEYS_HINT)
    value = cfg[key]
    whole = (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if not whole:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise InputFileError(f"{source}: config.json key '{key}' is {shown}, not a whole number",
                             hint=_WHOLE_NUMBER_HINT)
    number = int(value)
    if not 0 <= number <= MAX_CONFIG_INT:
        raise InputFileError(f"{source}: config.json key '{key}' is {number}, outside 0 to {MAX_CONFIG_INT:,}",
                             hint=_WHOLE_NUMBER_HINT)
    return number


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


def _attention(t: Mapping[str, Any], inner_type: str, max_positions: int) -> tuple[str, int | None]:
    window = t.get("sliding_window")
    layer_types = t.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        sliding = sum(1 for kind in layer_types if "sliding" in str(kind))
        if sliding == 0:
            return "full", None
        return ("sliding" if sliding == len(layer_types) else "sliding-mix"), window
    if not isinstance(window, int) or window <= 0 or window >= max_positions:
        return "full", None
    if inner_type in _SLIDING_MIX:
        return "sliding-mix", window
    if inner_type in _SLIDING_ALL:
        return "sliding", window
    if t.get("use_sliding_window"):
        # Qwen2: layers from max_window_layers on use the window.
        first = t.get("max_window_layers")
        layers = _first(t, _LAYERS)
        if isinstance(first, int) and isinstance(layers, int) and first > 0:
            return ("sliding-mix" if first < layers else "full"), (window if first < layers else None)
        return "sliding", window
    return "full", None


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
    if t.get("multi_query") is True and _first(t, _KV_HEADS) is None:
        kv_heads = 1  # GPT-BigCode / Falcon-7B multi-query attention
    head_dim = _int(t, ("head_dim",), source, default=hidden // heads if heads else 0)
    vocab = _int(t, _VOCAB, source)
    max_positions = _int(t, _POSITIONS, source)

    num_experts = _int(t, ("num_experts", "num_local_experts", "n_routed_experts"), source, default=0)
    experts_per_token = moe_intermediate = shared = 0
    if num_experts:
        experts_per_token = _int(t, ("num_experts_per_tok", "moe_topk"), source)
        if inner_type == "mixtral" or t.get("moe_intermediate_size") is None:
            # Mixtral names the expert width intermediate_size and has no dense MLP.
            moe_intermediate = _int(t, _INTERMEDIATE, source)
            intermediate = 0
        else:
            moe_intermediate = _int(t, ("moe_intermediate_size",), source)
            # Every layer is MoE unless mlp_only_layers / decoder_sparse_step say otherwise; ModelSpec has no
            # per-layer mix, so such a config is counted as all-MoE.
            intermediate = 0
        shared = _int(t, ("shared_expert_intermediate_size",), source, default=0)
    else:
        intermediate = _int(t, _INTERMEDIATE, source, default=4 * hidden if inner_type in _NON_GATED else None)
        if inner_type in _NON_GATED or ("n_embd" in t and "intermediate_size" not in t):
            intermediate = round(2 * intermediate / 3)

    tie_default = inner_type not in _UNTIED_BY_DEFAULT and top_type not in _UNTIED_BY_DEFAULT
    tied = t.get("tie_word_embeddings", cfg.get("tie_word_embeddings", tie_default))
    qkv_bias = bool(t.get("attention_bias")) or bool(t.get("qkv_bias")) or inner_type in _ALWAYS_QKV_BIAS
    if "n_embd" in t and inner_type in _NON_GATED:
        qkv_bias = True  # GPT-2 style: every linear has a bias
    attention, window = _attention(t, inner_type, max_positions)

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
            tied_embeddings=bool(tied),
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
        )
    except SpecError as exc:
        where = "config" if exc.field == "(row)" else exc.field
        raise InputFileError(f"{source}: config.json gives an invalid {where}: {exc.message}",
                             hint=_CONFIG_KEYS_HINT) from None
