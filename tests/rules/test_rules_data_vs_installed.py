"""The rule data copied from the libraries (key lists, version windows) still matches the installed versions.

Each test skips when the library is not installed (the core never needs them); in the project venv they run against
trl 1.16.0, accelerate 1.15.0, deepspeed 0.19.8, liger-kernel 0.8.5 and transformers 5.24.0.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from rules.compat import liger_model_types, vllm_window
from rules.configfiles import ACCELERATE_TOP_KEYS, DS_FILE_FORBIDDEN, ZERO_KEYS, class_fields
from rules.datafiles import load_toml


def test_zero_optimization_keys_match_deepspeed():
    config = pytest.importorskip("deepspeed.runtime.zero.config")
    fields = config.DeepSpeedZeroConfig.model_fields
    names = set(fields) | {f.alias for f in fields.values() if f.alias}
    assert ZERO_KEYS == names


def test_accelerate_top_level_keys_match_cluster_config():
    config_args = pytest.importorskip("accelerate.commands.config.config_args")
    fields = set(config_args.ClusterConfig.__dataclass_fields__)
    assert fields <= ACCELERATE_TOP_KEYS
    assert ACCELERATE_TOP_KEYS - fields == {"fp16", "dynamo_backend"}  # legacy keys accelerate converts


def test_deepspeed_config_file_forbidden_keys_match_accelerate():
    dataclasses_mod = pytest.importorskip("accelerate.utils.dataclasses")
    source = inspect.getsource(dataclasses_mod.DeepSpeedPlugin._deepspeed_config_checks)
    for key in DS_FILE_FORBIDDEN:
        assert f"ACCELERATE_{key.upper()}" in source or f"ACCELERATE_DEEPSPEED_{key.upper()}" in source, key
    assert "ACCELERATE_MIXED_PRECISION" in source


def test_trl_config_fields_match_trl():
    trl = pytest.importorskip("trl")
    assert load_toml("trl_fields.toml")["versions"]["trl"] == trl.__version__
    for name in ("SFTConfig", "DPOConfig", "GRPOConfig", "RLOOConfig", "KTOConfig", "ModelConfig"):
        expected = {f.name for f in dataclasses.fields(getattr(trl, name))}
        assert class_fields(name) == expected, name
    assert set(load_toml("trl_fields.toml")["exports"]["names"]) == {n for n in trl.__all__ if not n.startswith("_")}
    for removed in ("max_seq_length", "max_prompt_length", "use_liger_loss"):
        assert removed not in class_fields("SFTConfig") | class_fields("DPOConfig") | class_fields("GRPOConfig")


def test_liger_model_types_match_liger():
    patch = pytest.importorskip("liger_kernel.transformers.monkey_patch")
    assert liger_model_types() == set(patch.MODEL_TYPE_TO_APPLY_LIGER_FN)


def test_vllm_window_and_liger_floor_match_trl():
    import_utils = pytest.importorskip("trl.import_utils")
    source = inspect.getsource(import_utils)
    assert 'Version("0.22.0") <= _vllm_base_version <= Version("0.31.0")' in source
    assert vllm_window("1.16.0") == ">=0.22.0,<=0.31.0"
    assert import_utils.LIGER_KERNEL_MIN_VERSION == "0.8.2"


def test_ulysses_head_rule_matches_deepspeed_source():
    ulysses = pytest.importorskip("deepspeed.runtime.sequence_parallel.ulysses_sp")
    source = inspect.getsource(ulysses)
    assert "self.attn_head_count % self.world_size != 0" in source
    assert "self.global_kv_head_count % self.world_size == 0 or self.world_size % self.global_kv_head_count == 0" \
        in source


def test_sp_attention_implementations_match_accelerate():
    dataclasses_mod = pytest.importorskip("accelerate.utils.dataclasses")
    from rules.parallelism import SP_ATTN_BUILTIN

    source = inspect.getsource(dataclasses_mod.DeepSpeedSequenceParallelConfig)
    assert "_builtin_sp_attn = " + str(list(SP_ATTN_BUILTIN)).replace("'", '"') in source
    assert '_unsupported_sp_attn = ["eager", "flex_attention"]' in source


def test_quantization_split_matches_transformers_quantizers():
    """PEFT009 / PEFT010's split of transformers' quantizers by `is_trainable` (rules/peft_quant.py) covers every
    quantizer the installed release has, and the ones called untrainable return False unconditionally."""
    auto = pytest.importorskip("transformers.quantizers.auto")
    from rules.peft_quant import QUANT_NOT_TRAINABLE, QUANT_TRAINABLE, QUANT_TRAINABLE_IF

    split = (QUANT_TRAINABLE, set(QUANT_TRAINABLE_IF), QUANT_NOT_TRAINABLE)
    assert set().union(*split) == set(auto.AUTO_QUANTIZER_MAPPING)
    assert sum(len(part) for part in split) == len(auto.AUTO_QUANTIZER_MAPPING)  # no method in two parts
    for method, quantizer in auto.AUTO_QUANTIZER_MAPPING.items():
        body = inspect.getsource(quantizer.is_trainable.fget if isinstance(quantizer.is_trainable, property)
                                 else quantizer.is_trainable)
        returns = [line.strip() for line in body.splitlines() if line.strip().startswith("return")]
        if method in QUANT_NOT_TRAINABLE:
            assert returns == ["return False"], (method, returns)
        elif method in QUANT_TRAINABLE:
            assert returns == ["return True"], (method, returns)
        else:
            assert returns not in (["return True"], ["return False"]), (method, returns)


def test_built_in_model_types_are_transformers_causal_lm_classes():
    """CFG021 / CFG022 take the model_types the config reader knows by name as classes of transformers itself."""
    modeling_auto = pytest.importorskip("transformers.models.auto.modeling_auto")
    configuration_auto = pytest.importorskip("transformers.models.auto.configuration_auto")
    from advisor.catalog.hf_config import BUILT_IN_MODEL_TYPES

    assert BUILT_IN_MODEL_TYPES <= set(configuration_auto.CONFIG_MAPPING_NAMES)
    assert BUILT_IN_MODEL_TYPES <= set(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
