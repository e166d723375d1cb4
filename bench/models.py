"""The benchmark's model architectures: catalogue numbers in, a transformers config out.

The numbers come from the catalogue (`advisor.catalog.resolve_model`); the config fields from
`advisor.bundle.render.model_config_fields`, which the generated bundles use for their random-weight models, so
both build the same architecture for every model_type of the catalogue. Should the catalogue fail to load (it is
edited in parallel with this harness), `FALLBACK` below holds the five original benchmark rows, copied from each
model's config.json. `spec_source()` says which one a run used, and every result line records it.
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

SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "qwen3", "qwen3_moe", "mistral", "mixtral", "gemma2", "gemma3",
                         "gemma3_text", "phi3")
"""The catalogue's model_types, each of which advisor.bundle.render.model_config_fields writes a complete
`AutoConfig.for_model` field set for (gemma3, the multimodal type, as its text decoder gemma3_text)."""

# ModelSpec fields a child needs to rebuild the spec (a forked or spawned child gets plain JSON, no dataclass).
_ARCH_KEYS = ("id", "hf_id", "model_type", "layers", "hidden", "intermediate", "heads", "kv_heads", "head_dim",
              "vocab", "max_positions", "source", "tied_embeddings", "qkv_bias", "qk_norm", "norms_per_layer",
              "fused_qkv", "fused_gate_up", "num_experts", "experts_per_token", "moe_intermediate",
              "shared_expert_intermediate", "attention", "sliding_window")


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


def row_spec(row: dict[str, Any]) -> ModelSpec:
    """The architecture a row trains: its inline `arch` or the catalogue row, at the row's `layers` when it names a
    reduced depth (an MoE model cut to fit the machine). The advisor's prediction must use this same spec."""
    if row.get("arch"):
        spec = spec_from_arch(row["arch"])
    else:
        spec = resolve(row["model"])
    if row.get("layers") and row["layers"] != spec.layers:
        spec = spec.with_(layers=int(row["layers"]))
    return spec


def arch_dict(spec: ModelSpec) -> dict[str, Any]:
    """The architecture fields a child needs, as plain JSON (a forked or spawned child gets no pydantic object)."""
    out = {k: getattr(spec, k) for k in _ARCH_KEYS}
    out["params"] = spec.params
    return out


def spec_from_arch(arch: dict[str, Any]) -> ModelSpec:
    """arch_dict's inverse (the parameter count is derived, so a stale `params` is ignored)."""
    return ModelSpec(**{k: v for k, v in arch.items() if k in ModelSpec.field_names()})


def hf_config_kwargs(arch: dict[str, Any], *, special_ids: dict[str, int] | None = None) -> tuple[str, dict]:
    """(model_type, keyword arguments) for `transformers.AutoConfig.for_model(model_type, **kwargs)`.

    The fields are advisor.bundle.render.model_config_fields, the same set the generated bundles write to
    model_config.json and build their --random-init model from, so a benchmark row and a verified bundle build the
    same architecture. Raises ValueError for an architecture that cannot be built exactly: a model_type outside
    SUPPORTED_MODEL_TYPES, or a Qwen2 without q/k/v bias (transformers' Qwen2Attention hard-codes bias=True).
    """
    from advisor.bundle.render import model_config_fields

    mt = arch["model_type"]
    if mt not in SUPPORTED_MODEL_TYPES:
        raise ValueError(f"model_type {mt!r} is not supported by the benchmark (supported: {SUPPORTED_MODEL_TYPES})")
    if mt == "qwen2" and not arch["qkv_bias"]:
        raise ValueError("Qwen2 always has a q/k/v bias; a qwen2 row without qkv_bias cannot be built exactly")
    kw = model_config_fields(spec_from_arch(arch))
    if special_ids:
        kw.update(bos_token_id=special_ids["bos"], eos_token_id=special_ids["eos"], pad_token_id=special_ids["pad"])
    return kw.pop("model_type"), kw


def hf_config(arch: dict[str, Any], *, special_ids: dict[str, int] | None = None):
    """The transformers config object (imports transformers): `AutoConfig.for_model`, as the bundles' train.py."""
    from transformers import AutoConfig

    model_type, kw = hf_config_kwargs(arch, special_ids=special_ids)
    return AutoConfig.for_model(model_type, **kw)


def random_causal_lm(torch, arch: dict[str, Any], special_ids: dict[str, int], device: str):
    """A bf16 SDPA model of the architecture with random weights (seed 0), built on `device`, in eval mode: what the
    probes time generate and the forward on."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(hf_config(arch, special_ids=special_ids), dtype=torch.bfloat16,
                                                 attn_implementation="sdpa")
    return model.eval()


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


def installed_attention_packages() -> dict[str, str]:
    """The distributions installed here that make flash_attention_2 loadable (advisor.resolve.attention
    FLASH_PACKAGES), with their versions: what a probe of this machine would report."""
    from importlib import metadata

    from advisor.resolve.attention import FLASH_PACKAGES

    found = {}
    for name in FLASH_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def machine_attention(row: dict[str, Any], spec: ModelSpec, installed: dict[str, str] | None = None,
                      gpu: str = "H200", device: str = "cuda") -> tuple[str, str]:
    """(attn_implementation, why) for a row: its own `attn` when it names one, else what the advisor chooses for
    this model on this machine (advisor.resolve.attention.choose_attention against a probed-like target whose
    software is what is installed here), so a Gemma-2 row loads eager where neither flash-attn nor kernels is
    installed, as a bundle generated on this machine would, and on a CPU run (`device`), where neither can run."""
    from advisor.catalog import resolve_gpu
    from advisor.core.request import Request
    from advisor.core.target import Target
    from advisor.resolve.attention import choose_attention

    pinned = row.get("attn")
    if pinned and pinned != "auto":
        return pinned, "row pin"
    installed = installed_attention_packages() if installed is None else installed
    if device != "cuda":
        # flash-attn and the Hub kernel the `kernels` package fetches are CUDA kernels: a CPU run has neither, however
        # installed (transformers >= 5.25 installs `kernels` with itself)
        installed = {}
    target = Target(gpu=resolve_gpu(gpu), gpus_per_node=1, origin="probe", software=dict(installed))
    return choose_attention(Request(model=spec.id), spec, target, row["precision"])
