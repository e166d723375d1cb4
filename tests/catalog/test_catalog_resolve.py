"""`--model` and `--gpu` name resolution: every accepted form, the local Hugging Face cache, offline behaviour,
"did you mean" hints, and mapping probed NVML names to catalogue rows."""

from __future__ import annotations

import json
import sys
import types

import pytest

from advisor.catalog import hf_cache_dir, lookup, match_nvml_name, resolve_gpu, resolve_model
from advisor.core.errors import InputFileError, UnknownNameError

# config.json of HuggingFaceTB/SmolLM2-135M (the keys that matter), used as a stand-in checkpoint.
SMOL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 576,
    "intermediate_size": 1536,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 9,
    "num_hidden_layers": 30,
    "num_key_value_heads": 3,
    "rope_theta": 100000,
    "tie_word_embeddings": True,
    "vocab_size": 49152,
}


@pytest.fixture(autouse=True)
def _isolated_hf_env(monkeypatch, tmp_path):
    """No test may see the real HF cache or reach the network by accident."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # importing it would fail loudly


def _fake_cache(root, repo_id, config, revision="0123abcd"):
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return snapshot


# ------------------------------------------------------------------------------------------------ catalogue forms


@pytest.mark.parametrize(
    "name",
    ["qwen2.5-7b", "QWEN2.5-7B", " qwen2.5-7b ", "Qwen/Qwen2.5-7B", "qwen/qwen2.5-7b", "QWEN/QWEN2.5-7B", "7B",
     "7b", "qwen-2.5-7b"],
)
def test_catalogue_forms_resolve_without_network(name):
    assert resolve_model(name, allow_network=False).id == "qwen2.5-7b"


def test_alias_with_old_repo_name():
    assert resolve_model("meta-llama/Meta-Llama-3.1-8B").id == "llama-3.1-8b"


# ------------------------------------------------------------------------------------------------ local files


def test_local_directory_with_config_json(tmp_path):
    ckpt = tmp_path / "my-ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps(SMOL_CONFIG))
    spec = resolve_model(str(ckpt))
    assert (spec.layers, spec.hidden, spec.kv_heads, spec.vocab) == (30, 576, 3, 49152)
    assert spec.id == "my-ckpt" and spec.hf_id == str(ckpt.resolve())
    assert spec.source == (ckpt / "config.json").resolve().as_uri()
    assert spec.params == resolve_model("smollm2-135m").params


def test_path_to_config_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(SMOL_CONFIG))
    assert resolve_model(str(path)).params == 134_515_008


def test_directory_without_config_json(tmp_path):
    with pytest.raises(InputFileError, match="no config.json"):
        resolve_model(str(tmp_path))


@pytest.mark.parametrize("content", ['{"model_type": "llama", ', "[1, 2, 3]", ""])
def test_malformed_config_json(tmp_path, content):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(InputFileError) as err:
        resolve_model(str(path))
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_config_json_missing_a_key_names_it(tmp_path):
    cfg = {k: v for k, v in SMOL_CONFIG.items() if k != "num_hidden_layers"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputFileError, match="num_hidden_layers"):
        resolve_model(str(tmp_path))


def test_missing_explicit_path():
    with pytest.raises(InputFileError, match="no such file"):
        resolve_model("./does/not/exist")
    with pytest.raises(InputFileError, match="no such file"):
        resolve_model("missing-config.json")


# ------------------------------------------------------------------------------------------------ hub ids


def test_cached_hub_id_is_read_from_the_cache(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    _fake_cache(hub, "SomeOrg/Tiny-Llama", SMOL_CONFIG, revision="feedbeef")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    spec = resolve_model("SomeOrg/Tiny-Llama")  # offline (HF_HUB_OFFLINE=1): the cache is enough
    assert spec.hf_id == "SomeOrg/Tiny-Llama" and spec.id == "someorg/tiny-llama"
    assert spec.source == "https://huggingface.co/SomeOrg/Tiny-Llama/blob/feedbeef/config.json"
    assert spec.params == 134_515_008
    assert resolve_model("someorg/tiny-llama").params == spec.params  # the cache folder's case does not matter


def test_hf_home_locates_the_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hf_cache_dir() == tmp_path / "hf" / "hub"
    _fake_cache(tmp_path / "hf" / "hub", "a/b", SMOL_CONFIG)
    assert resolve_model("a/b").layers == 30


def test_snapshot_without_refs_is_still_found(tmp_path, monkeypatch):
    snapshot = _fake_cache(tmp_path / "hub", "a/no-ref", SMOL_CONFIG)
    (snapshot.parent.parent / "refs" / "main").unlink()
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert resolve_model("a/no-ref").hidden == 576


def test_offline_uncached_hub_id_is_unknown():
    with pytest.raises(UnknownNameError, match="not in the catalogue or the local Hugging Face cache"):
        resolve_model("someorg/not-cached")


def test_allow_network_false_beats_the_environment(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with pytest.raises(UnknownNameError, match="downloads are off"):
        resolve_model("someorg/not-cached", allow_network=False)


def test_online_uncached_hub_id_downloads_config_json(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(lookup, "_hub_unreachable", lambda: None)
    calls = []

    def hf_hub_download(repo_id, filename, **kwargs):
        calls.append((repo_id, filename))
        path = tmp_path / "downloaded.json"
        path.write_text(json.dumps(SMOL_CONFIG))
        return str(path)

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(hf_hub_download=hf_hub_download))
    spec = resolve_model("someorg/fresh")
    assert calls == [("someorg/fresh", "config.json")]
    assert spec.hf_id == "someorg/fresh" and spec.source.endswith("/someorg/fresh/blob/main/config.json")


def test_failed_download_is_unknown_name(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(lookup, "_hub_unreachable", lambda: None)

    def hf_hub_download(repo_id, filename, **kwargs):
        raise OSError("404 Client Error: Repository Not Found\nmore lines")

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(hf_hub_download=hf_hub_download))
    with pytest.raises(UnknownNameError) as err:
        resolve_model("someorg/typo")
    assert "Repository Not Found" in str(err.value) and "\n" not in str(err.value)


def test_unreachable_hub_fails_at_once_without_a_download(monkeypatch):
    """No network: one error line in well under a second, instead of huggingface_hub's five retries (~20 s)."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HTTPS_PROXY", raising=False)
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)
    monkeypatch.delenv("all_proxy", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")  # .invalid never resolves (RFC 2606)

    def hf_hub_download(*args, **kwargs):
        raise AssertionError("no download is tried when the hub's host cannot be reached")

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(hf_hub_download=hf_hub_download))
    with pytest.raises(UnknownNameError) as err:
        resolve_model("someorg/offline")
    assert "hub.invalid cannot be reached" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("endpoint", ["http://[", "http://localhost:99999", "http://localhost:abc", "ftp://x",
                                      "huggingface.co"])
def test_a_malformed_hf_endpoint_is_a_usage_error_before_the_hub_is_imported(monkeypatch, endpoint):
    """huggingface_hub raises ValueError while it is imported when HF_ENDPOINT's host or port cannot be parsed: the
    variable is checked first, so the user gets one line naming it, not an internal error."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.delitem(sys.modules, "huggingface_hub", raising=False)

    class Importing:  # the import must not happen: it is where huggingface_hub raises
        def __getattr__(self, name):
            raise AssertionError("huggingface_hub imported with a malformed HF_ENDPOINT")

    monkeypatch.setitem(sys.modules, "huggingface_hub", Importing())
    with pytest.raises(UnknownNameError) as err:
        resolve_model("someorg/anything")
    assert "HF_ENDPOINT" in str(err.value) and "HF_ENDPOINT" in err.value.hint and "\n" not in str(err.value)
    assert err.value.exit_code == 2


def test_a_long_download_error_is_cut_at_a_word():
    reason = lookup._short_reason(OSError("word " * 100))
    assert len(reason) <= lookup.REASON_CHARS + 4 and reason.endswith("word ...")


# ------------------------------------------------------------------------------------------------ did you mean


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("qwen2.5-7", "qwen2.5-7b"), ("lama-3.1-8b", "llama-3.1-8b"), ("mistral-7b-v03", "mistral-7b-v0.3"),
     ("Qwen/Qwen2.5-7B-Instrct", "Qwen/Qwen2.5-7B")],
)
def test_near_miss_suggests_the_catalogue_name(name, suggestion):
    with pytest.raises(UnknownNameError) as err:
        resolve_model(name, allow_network=False)
    assert err.value.hint and "did you mean" in err.value.hint and suggestion in err.value.hint
    assert "\n" not in err.value.message


def test_unknown_size_lists_the_sizes():
    with pytest.raises(UnknownNameError, match="size 13B") as err:
        resolve_model("13B")
    assert "7B" in err.value.hint and "70B" in err.value.hint


def test_gibberish_gets_a_general_hint():
    with pytest.raises(UnknownNameError) as err:
        resolve_model("zzzzzzzz")
    assert "trl-advisor models" in err.value.hint


def test_empty_name():
    with pytest.raises(UnknownNameError):
        resolve_model("  ")


# ------------------------------------------------------------------------------------------------ GPUs


@pytest.mark.parametrize(
    ("name", "gpu_id"),
    [
        ("H100-80GB", "H100-80GB"), ("h100", "H100-80GB"), ("H100-SXM5-80GB", "H100-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-80GB"), ("nvidia h100 80gb hbm3", "H100-80GB"),
        ("H200", "H200"), ("NVIDIA H200", "H200"), ("rtx-4090", "RTX-4090"), ("RTX_4090", "RTX-4090"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("4090", "RTX-4090"), ("Tesla T4", "T4"), ("t4", "T4"),
        ("A100", "A100-80GB"), ("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"), ("NVIDIA A10G", "A10G"), ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"), ("NVIDIA RTX A6000", "RTX-A6000"), ("Tesla V100-SXM2-32GB", "V100-32GB"),
        ("mi300x", "MI300X"),
    ],
)
def test_gpu_lookup_by_id_alias_or_nvml_name(name, gpu_id):
    assert resolve_gpu(name).id == gpu_id


@pytest.mark.parametrize(("name", "suggestion"), [("H10", "H100"), ("RTX-409", "RTX-4090"), ("A100-80G", "A100-80GB")])
def test_unknown_gpu_suggests(name, suggestion):
    with pytest.raises(UnknownNameError) as err:
        resolve_gpu(name)
    assert "did you mean" in err.value.hint and suggestion in err.value.hint


def test_unknown_gpu_without_near_match():
    with pytest.raises(UnknownNameError) as err:
        resolve_gpu("abacus")
    assert "trl-advisor gpus" in err.value.hint


@pytest.mark.parametrize(
    ("nvml", "memory_mib", "gpu_id"),
    [
        ("NVIDIA H200", 143771, "H200"),
        ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB"),
        ("Tesla T4", 15360, "T4"),
        ("NVIDIA H100 PCIe", None, "H100-PCIe"),
        # Not in the catalogue's NVML names: family + memory.
        ("Tesla V100-PCIE-32GB", 32510, "V100-32GB"),
        ("Tesla V100-PCIE-16GB", None, "V100-16GB"),  # memory from the name's "16GB"
        ("NVIDIA A100-PCIE-40GB", 40960, "A100-40GB-PCIe"),
        ("NVIDIA GeForce RTX 4090 D", 24564, "RTX-4090"),
        ("NVIDIA H100", 81559, "H100-80GB"),
    ],
)
def test_match_nvml_name(nvml, memory_mib, gpu_id):
    memory = memory_mib * (1 << 20) if memory_mib else None
    spec = match_nvml_name(nvml, memory)
    assert spec is not None and spec.id == gpu_id


@pytest.mark.parametrize(
    ("nvml", "memory_mib"),
    [
        ("NVIDIA GeForce GTX 1080", 8192),  # no family in the catalogue
        ("NVIDIA A10", 23028),  # A10 is not the A10G row
        ("NVIDIA L40", 46068),  # L40 is not the L40S row
        ("Quadro RTX 6000", 24576),  # Turing, not RTX 6000 Ada
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 16376),  # laptop part
        ("NVIDIA H100", 16384),  # right family, implausible memory
        ("", None),
    ],
)
def test_match_nvml_name_unknown_is_none(nvml, memory_mib):
    assert match_nvml_name(nvml, memory_mib * (1 << 20) if memory_mib else None) is None
