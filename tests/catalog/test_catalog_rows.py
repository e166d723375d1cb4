"""The catalogue files: every row loads, the required rows are there, names and sizes are unambiguous, and a
damaged row fails loudly, naming the file, the row and the field."""

from __future__ import annotations

import re

import pytest

from advisor import catalog
from advisor.catalog import (
    CatalogError,
    all_gpus,
    all_models,
    model_sizes,
    parse_rows,
    resolve_model,
    validate_gpus,
    validate_models,
)
from advisor.core.errors import AdvisorError
from advisor.core.specs import GpuSpec, ModelSpec

MIB = 1 << 20

REQUIRED_MODELS = {
    "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.2-3b", "llama-3.3-70b",
    "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b",
    "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
    "mistral-7b-v0.3", "mixtral-8x7b", "gemma-2-2b", "gemma-2-9b", "gemma-2-27b",
    "gemma-3-1b", "gemma-3-4b", "gemma-3-12b", "gemma-3-27b", "phi-3-mini", "phi-3-medium", "phi-4",
    "deepseek-r1-distill-qwen-7b", "deepseek-r1-distill-llama-8b", "smollm2-135m", "smollm2-360m", "smollm2-1.7b",
}
REQUIRED_GPUS = {
    "H100-80GB", "H100-PCIe", "H200", "B200", "A100-80GB", "A100-40GB", "A10G", "L4", "L40S", "RTX-3090",
    "RTX-4090", "RTX-5090", "RTX-A6000", "V100-32GB", "V100-16GB", "T4", "MI300X",
}
# The size shorthands the contract and the docs promise, with their reference rows.
REFERENCE_SIZES = {
    "0.5B": "qwen2.5-0.5b", "1.5B": "qwen2.5-1.5b", "3B": "qwen2.5-3b", "7B": "qwen2.5-7b", "8B": "llama-3.1-8b",
    "14B": "qwen2.5-14b", "32B": "qwen2.5-32b", "70B": "llama-3.1-70b", "72B": "qwen2.5-72b",
    "405B": "llama-3.1-405b", "1B": "llama-3.2-1b", "0.6B": "qwen3-0.6b", "1.7B": "qwen3-1.7b", "4B": "qwen3-4b",
}


# ------------------------------------------------------------------------------------------------ models


def test_model_catalogue_loads_and_has_the_required_rows():
    models = all_models()
    assert len(models) >= 32
    assert all(isinstance(m, ModelSpec) for m in models)
    assert REQUIRED_MODELS <= {m.id for m in models}


def test_model_sources_are_the_config_json_of_the_repo():
    for spec in all_models():
        assert spec.source == f"https://huggingface.co/{spec.hf_id}/blob/main/config.json", spec.id


def test_no_two_models_share_a_name():
    seen: dict[str, str] = {}
    for spec in all_models():
        for name in {spec.id, spec.hf_id.lower(), *(a.lower() for a in spec.aliases)}:
            assert seen.setdefault(name, spec.id) == spec.id, f"{name}: {seen[name]} and {spec.id}"


def test_each_size_names_exactly_one_row():
    sizes = [spec.size for spec in all_models() if spec.size]
    assert len(sizes) == len(set(sizes))
    assert {s: m.id for s, m in model_sizes().items()}.items() >= REFERENCE_SIZES.items()


@pytest.mark.parametrize("size", sorted(model_sizes()))
def test_every_size_resolves_to_its_row_in_any_spelling(size):
    row = model_sizes()[size]
    assert resolve_model(size) is row
    assert resolve_model(size.lower()) is row
    assert resolve_model(f" {size[:-1]} {size[-1].lower()} ") is row


def test_size_spellings():
    assert resolve_model("70b").id == "llama-3.1-70b"
    assert resolve_model("1.5b").id == "qwen2.5-1.5b"
    assert resolve_model("7.0B").id == "qwen2.5-7b"
    assert resolve_model("135m").id == "smollm2-135m"


def test_size_shorthand_is_near_the_rows_parameter_count():
    # Guards against a size put on the wrong row: the shorthand is the rounded marketing size.
    for size, spec in model_sizes().items():
        nominal = float(size[:-1]) * (1e6 if size.endswith("M") else 1e9)
        assert abs(spec.params - nominal) <= 0.35 * nominal, (size, spec.id, spec.params)


def test_architecture_flags_by_family():
    for spec in all_models():
        if spec.model_type == "qwen2":
            assert spec.qkv_bias and not spec.qk_norm, spec.id
        if spec.model_type in ("qwen3", "qwen3_moe"):
            assert spec.qk_norm and not spec.qkv_bias and spec.head_dim == 128, spec.id
        if spec.model_type.startswith("gemma"):
            assert spec.tied_embeddings and spec.attention == "sliding-mix" and spec.sliding_window, spec.id
        if spec.is_moe:
            assert spec.intermediate == 0 and spec.experts_per_token < spec.num_experts, spec.id
    mixtral = resolve_model("mixtral-8x7b")
    assert (mixtral.num_experts, mixtral.experts_per_token, mixtral.moe_intermediate) == (8, 2, 14336)
    assert resolve_model("gemma-2-2b").head_dim == 256 != 2304 // 8  # larger than hidden / heads


# ------------------------------------------------------------------------------------------------ GPUs


def test_gpu_catalogue_loads_and_has_the_required_rows():
    gpus = all_gpus()
    assert len(gpus) >= 17
    assert all(isinstance(g, GpuSpec) for g in gpus)
    assert REQUIRED_GPUS <= {g.id for g in gpus}


@pytest.mark.parametrize(
    ("gpu_id", "mib"),
    # Totals NVML reports on real cards (nvidia-smi), independent of the catalogue.
    [("H100-80GB", 81559), ("H200", 143771), ("A100-80GB", 81920), ("A100-40GB", 40960), ("RTX-4090", 24564),
     ("T4", 15360)],
)
def test_gpu_memory_is_the_nvml_total(gpu_id, mib):
    assert catalog.resolve_gpu(gpu_id).memory_bytes == mib * MIB


def test_capability_flags_follow_compute_capability():
    for gpu in all_gpus():
        assert gpu.has_bf16 == (gpu.bf16_tflops is not None), gpu.id
        assert gpu.has_fp8 == (gpu.fp8_tflops is not None), gpu.id
        assert re.fullmatch(r"\d+\.\d", gpu.compute_capability), gpu.id
    assert not catalog.resolve_gpu("V100-32GB").has_bf16
    assert not catalog.resolve_gpu("T4").has_bf16
    assert not catalog.resolve_gpu("A100-80GB").has_fp8
    assert catalog.resolve_gpu("L4").has_fp8 and catalog.resolve_gpu("H100-80GB").has_fp8


def test_rates_are_dense_and_ordered():
    for gpu in all_gpus():
        half = gpu.bf16_tflops or gpu.fp16_tflops
        assert gpu.fp32_tflops < half, gpu.id  # tensor cores beat plain FP32
        if gpu.fp8_tflops:
            assert gpu.fp8_tflops == pytest.approx(2 * half, rel=0.02), gpu.id  # fp8 is twice bf16, dense
    # Dense, not the 2:4-sparse headline: H100 SXM bf16 is 1979 / 2.
    assert catalog.resolve_gpu("H100-80GB").bf16_tflops == pytest.approx(989.5)


def test_gpu_kind_flags():
    consumer = {g.id for g in all_gpus() if g.consumer}
    assert consumer == {"RTX-3090", "RTX-4090", "RTX-5090"}
    for gpu in all_gpus():
        if gpu.consumer:
            assert gpu.nvlink_gbps is None, gpu.id
        assert gpu.source.startswith("https://"), gpu.id
    mi300x = catalog.resolve_gpu("MI300X")
    assert mi300x.vendor == "amd" and not mi300x.supported
    assert all(g.supported for g in all_gpus() if g.vendor == "nvidia")


def test_no_two_gpus_share_a_name():
    seen: dict[str, str] = {}
    for gpu in all_gpus():
        for name in {gpu.id.lower(), *(a.lower() for a in gpu.aliases), *(n.lower() for n in gpu.nvml_names)}:
            assert seen.setdefault(name, gpu.id) == gpu.id, f"{name}: {seen[name]} and {gpu.id}"


# ------------------------------------------------------------------------------------------------ bad rows

GOOD_MODEL = """
["tiny-1"]
hf_id = "org/Tiny-1"
model_type = "llama"
layers = 2
hidden = 64
intermediate = 128
heads = 4
kv_heads = 2
head_dim = 16
vocab = 100
max_positions = 256
source = "https://huggingface.co/org/Tiny-1/blob/main/config.json"
"""


def test_good_row_parses():
    (spec,) = parse_rows(GOOD_MODEL, "models.toml", ModelSpec)
    assert spec.id == "tiny-1" and spec.layers == 2


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (("layers = 2\n", ""), "layers"),  # missing field
        (("layers = 2", "layers = 0"), "layers"),  # out of range
        (("heads = 4", 'heads = "four"'), "heads"),  # wrong type
        (("vocab = 100", "vocab = 100\nexperts = 8"), "experts"),  # unknown field
    ],
)
def test_bad_model_row_names_file_row_and_field(edit, field):
    with pytest.raises(CatalogError) as err:
        parse_rows(GOOD_MODEL.replace(*edit), "models.toml", ModelSpec)
    message = str(err.value)
    assert "models.toml" in message and "[tiny-1]" in message and field in message
    assert isinstance(err.value, AdvisorError) and err.value.hint


def test_row_level_rule_failure_names_the_row():
    with pytest.raises(CatalogError, match=r"models\.toml: row \[tiny-1\].*kv_heads"):
        parse_rows(GOOD_MODEL.replace("kv_heads = 2", "kv_heads = 3"), "models.toml", ModelSpec)


def test_invalid_toml_is_a_catalog_error():
    with pytest.raises(CatalogError, match="gpus.toml: not valid TOML"):
        parse_rows("[A100\nname = 1", "gpus.toml", GpuSpec)


def test_duplicate_alias_across_rows_is_rejected():
    second = GOOD_MODEL.replace('["tiny-1"]', '["tiny-2"]').replace("org/Tiny-1", "org/Tiny-2")
    text = GOOD_MODEL + 'aliases = ["tiny"]\n' + second + 'aliases = ["TINY"]\n'
    models = parse_rows(text, "models.toml", ModelSpec)
    with pytest.raises(CatalogError, match=r"\[tiny-1\] and \[tiny-2\].*'tiny'"):
        validate_models(models)


def test_duplicate_size_and_bad_size_are_rejected():
    second = GOOD_MODEL.replace('["tiny-1"]', '["tiny-2"]').replace("org/Tiny-1", "org/Tiny-2")
    models = parse_rows(GOOD_MODEL + 'size = "1B"\n' + second + 'size = "1B"\n', "models.toml", ModelSpec)
    with pytest.raises(CatalogError, match="size 1B"):
        validate_models(models)
    with pytest.raises(CatalogError, match="field size"):
        validate_models(parse_rows(GOOD_MODEL + 'size = "1b"\n', "models.toml", ModelSpec))


def test_duplicate_nvml_name_across_gpus_is_rejected():
    row = """
[{id}]
name = "x"
memory_bytes = 1024
fp16_tflops = 1.0
fp32_tflops = 1.0
mem_bw_gbps = 1.0
pcie_gen = 4
compute_capability = "8.0"
nvml_names = ["NVIDIA Same"]
source = "https://example.com"
"""
    gpus = parse_rows(row.format(id="A") + row.format(id="B"), "gpus.toml", GpuSpec)
    with pytest.raises(CatalogError, match=r"\[A\] and \[B\]"):
        validate_gpus(gpus)
