"""The benchmark's model architectures: catalogue numbers in, a transformers config out.

The numbers come from the catalogue (`advisor.catalog.resolve_model`). While the catalogue is missing (it is written
in parallel with this harness), `FALLBACK` below holds the same five rows, copied from each model's config.json, so
the harness never depends on the catalogue's state to run. `spec_source()` says which one a run used, and every
result line records it.
"""

from __future__ import annotations

from typing import Any

from advisor.core.specs import ModelSpec

# Copied from the Hugging Face config.json files named in `source`. Qwen2 always has a bias on q/k/v
# (transformers' Qwen2Attention hard-codes bias=True), hence qkv_bias=True on every Qwen2.5 row.
FALLBACK: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": dict(hf_id="Qwen/Qwen2.5-0.5B", model_type="qwen2", layers=24, hidden=896, intermediate=4864,
                         heads=14, kv_heads=2, head_dim=64, vocab=151936, tied_embeddings=True,
                         max_positions=32768, qkv_bias=True, size="0.5B",
                         source="https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json"),
    "qwen2.5-1.5b": dict(hf_id="Qwen/Qwen2.5-1.5B", model_type="qwen2", layers=28, hidden=1536, intermediate=8960,
                         heads=12, kv_heads=2, head_dim=128, vocab=151936, tied_embeddings=True,
                         max_positions=131072, qkv_bias=True, size="1.5B",
                         source="https://huggingface.co/Qwen/Qwen2.5-1.5B/blob/main/config.json"),
    "qwen2.5-3b": dict(hf_id="Qwen/Qwen2.5-3B", model_type="qwen2", layers=36, hidden=2048, intermediate=11008,
                       heads=16, kv_heads=2, head_dim=128, vocab=151936, tied_embeddings=True,
                       max_positions=32768, qkv_bias=True, size="3B",
                       source="https://huggingface.co/Qwen/Qwen2.5-3B/blob/main/config.json"),
    "qwen2.5-7b": dict(hf_id="Qwen/Qwen2.5-7B", model_type="qwen2", layers=28, hidden=3584, intermediate=18944,
                       heads=28, kv_heads=4, head_dim=128, vocab=152064, tied_embeddings=False,
                       max_positions=131072, qkv_bias=True, size="7B",
                       source="https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json"),
    "llama-3.1-8b": dict(hf_id="meta-llama/Llama-3.1-8B", model_type="llama", layers=32, hidden=4096,
                         intermediate=14336, heads=32, kv_heads=8, head_dim=128, vocab=128256,
                         tied_embeddings=False, max_positions=131072, qkv_bias=False, size="8B",
                         source="https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"),
}

# Settings the catalogue does not carry because they change neither memory nor FLOPs; taken from the same
# config.json files so the random-weight model runs the same kernels (RoPE variant, norm epsilon).
_EXTRAS: dict[str, dict[str, Any]] = {
    "qwen2": {"rms_norm_eps": 1e-6, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}},
    "llama": {"rms_norm_eps": 1e-5,
              "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                  "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 8192}},
}

SUPPORTED_MODEL_TYPES = tuple(_EXTRAS)


_catalog_error: str | None = None


def spec_source() -> str:
    """'catalog' when advisor.catalog answered, else 'bench-fallback' (with the catalogue's error, if any)."""
    if _catalog_error:
        return f"bench-fallback (catalog failed: {_catalog_error})"
    try:
        from advisor.catalog import resolve_model  # noqa: F401
    except ImportError:
        return "bench-fallback"
    return "catalog"


def resolve(model_id: str) -> ModelSpec:
    """The catalogue's row for `model_id`; the fallback copy when the catalogue cannot answer (missing, or broken
    while it is being edited) and the id is one of the five benchmark models."""
    global _catalog_error
    try:
        from advisor.catalog import resolve_model

        return resolve_model(model_id)
    except Exception as exc:
        if model_id not in FALLBACK:
            if isinstance(exc, ImportError):
                raise KeyError(f"unknown benchmark model {model_id!r}; known: {', '.join(FALLBACK)}") from exc
            raise
        if not isinstance(exc, ImportError):
            _catalog_error = f"{type(exc).__name__}: {exc}"
    return ModelSpec(id=model_id, **FALLBACK[model_id])


def arch_dict(spec: ModelSpec) -> dict[str, Any]:
    """The architecture fields a child needs, as plain JSON (a forked or spawned child gets no pydantic object)."""
    keys = ("id", "model_type", "layers", "hidden", "intermediate", "heads", "kv_heads", "head_dim", "vocab",
            "tied_embeddings", "max_positions", "qkv_bias")
    out = {k: getattr(spec, k) for k in keys}
    out["params"] = spec.params
    return out


def hf_config_kwargs(arch: dict[str, Any], *, special_ids: dict[str, int] | None = None) -> tuple[str, dict]:
    """(config class name, keyword arguments) of the transformers config for an architecture dict.

    Raises ValueError for an architecture this harness cannot express exactly (another model_type, a Qwen2 without
    qkv bias or with head_dim != hidden / heads, which Qwen2Config cannot represent).
    """
    mt = arch["model_type"]
    if mt not in _EXTRAS:
        raise ValueError(f"model_type {mt!r} is not supported by the benchmark (supported: {SUPPORTED_MODEL_TYPES})")
    kw: dict[str, Any] = dict(
        vocab_size=arch["vocab"],
        hidden_size=arch["hidden"],
        intermediate_size=arch["intermediate"],
        num_hidden_layers=arch["layers"],
        num_attention_heads=arch["heads"],
        num_key_value_heads=arch["kv_heads"],
        max_position_embeddings=arch["max_positions"],
        tie_word_embeddings=bool(arch["tied_embeddings"]),
        **{k: (dict(v) if isinstance(v, dict) else v) for k, v in _EXTRAS[mt].items()},
    )
    if special_ids:
        kw.update(bos_token_id=special_ids["bos"], eos_token_id=special_ids["eos"], pad_token_id=special_ids["pad"])
    if mt == "qwen2":
        if not arch["qkv_bias"]:
            raise ValueError("Qwen2 always has a q/k/v bias; a qwen2 row without qkv_bias cannot be built exactly")
        if arch["head_dim"] * arch["heads"] != arch["hidden"]:
            raise ValueError("Qwen2Config derives head_dim = hidden / heads; this row's head_dim differs")
        kw["use_sliding_window"] = False
        return "Qwen2Config", kw
    kw.update(head_dim=arch["head_dim"], attention_bias=bool(arch["qkv_bias"]), mlp_bias=False)
    return "LlamaConfig", kw


def hf_config(arch: dict[str, Any], *, special_ids: dict[str, int] | None = None):
    """The transformers config object (imports transformers)."""
    import transformers

    cls_name, kw = hf_config_kwargs(arch, special_ids=special_ids)
    return getattr(transformers, cls_name)(**kw)


def complete_arch(arch: dict[str, Any]) -> dict[str, Any]:
    """An inline architecture (a --rows-file row's "arch") checked through ModelSpec and given its parameter
    count; used for models outside the catalogue, such as the tiny models of the CPU tests."""
    fields = dict(arch)
    fields.pop("params", None)
    fields.setdefault("hf_id", "local/" + str(fields.get("id", "inline")))
    fields.setdefault("source", "local:inline")
    fields.setdefault("id", "inline")
    fields.setdefault("head_dim", fields["hidden"] // fields["heads"])
    fields.setdefault("max_positions", 4096)
    fields.setdefault("qkv_bias", fields.get("model_type") == "qwen2")
    spec = ModelSpec(**{k: v for k, v in fields.items() if k in ModelSpec.field_names()})
    return arch_dict(spec)
