"""Configuration-file rules (CFG*) for `check --bundle`: ds_config.json, the accelerate YAML, TRL arguments
(train.py and the TRL YAML) and the launch script, read as they are written; and what the model's own config.json
asks of them (its auto_map: CFG021, CFG022)."""

from __future__ import annotations

import difflib
import re

from advisor.catalog.hf_config import BUILT_IN_MODEL_TYPES
from rules import vercmp
from rules.common import NO_FILES, as_float, as_int, gib, is_auto, truthy, uses_peft, uses_zero3
from rules.datafiles import load_toml
from rules.model import Context, Result, fail, na, ok
from rules.registry import rule

DS_FILE_FORBIDDEN = ("gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
                     "offload_param_device", "offload_param_nvme_path", "offload_optimizer_nvme_path",
                     "zero3_save_16bit_model")
"""accelerate 1.15 DeepSpeedPlugin._deepspeed_config_checks: ignored (so rejected) beside deepspeed_config_file."""

ZERO_KEYS = frozenset({
    "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "use_multi_rank_bucket_allreduce",
    "allgather_partitions", "allgather_bucket_size", "overlap_comm", "load_from_fp32_weights", "elastic_checkpoint",
    "offload_param", "offload_optimizer", "sub_group_size", "cpu_offload_param", "cpu_offload_use_pin_memory",
    "cpu_offload", "prefetch_bucket_size", "stage3_prefetch_bucket_size", "param_persistence_threshold",
    "stage3_param_persistence_threshold", "model_persistence_threshold", "stage3_model_persistence_threshold",
    "max_live_parameters", "stage3_max_live_parameters", "max_reuse_distance", "stage3_max_reuse_distance",
    "gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save", "module_granularity_threshold", "stage3_module_granularity_threshold",
    "use_all_reduce_for_fetch_params", "stage3_use_all_reduce_for_fetch_params", "allgather_sequential",
    "stage3_allgather_sequential", "ignore_unused_parameters", "legacy_stage1", "round_robin_gradients",
    "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients", "memory_efficient_linear", "pipeline_loading_checkpoint", "override_module_apply", "log_trace_cache_warnings",
    "enable_sanity_checks", "compute_grad_norm", "parameter_alignment", "save_muon_momentum_buffer_in_memory",
    "leaf_module", "zenflow",
})
"""DeepSpeedZeroConfig (deepspeed 0.19.8, pydantic extra="forbid", populate_by_name) field names and aliases."""
OFFLOAD_PARAM_KEYS = frozenset({"device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pin_memory"})
OFFLOAD_OPTIMIZER_KEYS = frozenset({"device", "nvme_path", "buffer_count", "pin_memory", "pipeline_read",
                                   "pipeline_write", "fast_init", "ratio", "super_offload", "cpuadam_cores_perc"})
ACCELERATE_TOP_KEYS = frozenset({
    "command_file", "commands", "compute_environment", "debug", "deepspeed_config", "distributed_type",
    "downcast_bf16", "dynamo_config", "enable_cpu_affinity", "fp8_config", "fsdp_config", "gpu_ids", "machine_rank",
    "main_process_ip", "main_process_port", "main_training_function", "megatron_lm_config", "mixed_precision",
    "mpirun_config", "num_machines", "num_processes", "parallelism_config", "rdzv_backend", "same_network",
    "tpu_env", "tpu_name", "tpu_use_cluster", "tpu_use_sudo", "tpu_vm", "tpu_zone", "use_cpu",
    "fp16", "dynamo_backend",  # legacy keys accelerate converts
})
"""accelerate 1.15 ClusterConfig fields (commands/config/config_args.py); other top-level keys raise ValueError."""
GATHER_KEYS = ("stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save",
               "stage3_gather_fp16_weights_on_model_save")
ADAMW_OPTIMS = frozenset({"adamw_torch", "adamw_torch_fused", "adamw_hf", "adamw_apex_fused", "adamw_torch_xla",
                          "adamw_torch_npu_fused", "adamw_anyprecision", "adamw_torch_4bit", "adamw_torch_8bit"})
"""TrainingArguments `optim` values that are torch AdamW: accelerate maps them to DeepSpeedCPUAdam as they are."""


def _ds(ctx: Context) -> dict | None:
    return ctx.files.ds_config if ctx.files is not None else None


def _trl_expected(ctx: Context, name: str, plan_value):
    """What TrainingArguments will hold: the user's argument, else the plan value (the documented default)."""
    value = ctx.arg(name)
    return plan_value if value is None else value


@rule(id="CFG001", name="accelerate-ds-file-duplicates", severity="error",
      reads=("files.accelerate.deepspeed_config", "files.accelerate.mixed_precision"))
def accelerate_ds_file_duplicates(ctx: Context) -> Result:
    """An accelerate YAML with `deepspeed_config_file` must not also set the values that file owns.

    ## Why
    accelerate 1.15's `DeepSpeedPlugin._deepspeed_config_checks` raises "When using `deepspeed_config_file`, the
    following accelerate config variables will be ignored" when the YAML's deepspeed_config also sets
    gradient_accumulation_steps, gradient_clipping, zero_stage, offload_optimizer_device, offload_param_device,
    the nvme paths or zero3_save_16bit_model, or when the YAML has a top-level `mixed_precision` (any value).

    ## Fix
    Keep only `deepspeed_config_file`, `zero3_init_flag`, `deepspeed_moe_layer_cls_names` and the multinode keys
    in deepspeed_config, drop top-level `mixed_precision`, and set those values in the JSON (`"auto"` to follow
    the TRL arguments).

    ## Example
    deepspeed_config {deepspeed_config_file: ds_config.json, zero_stage: 3} fails; without zero_stage it passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/utils/dataclasses.py
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/commands/launch.py
    """
    if ctx.files is None or not ctx.files.accelerate:
        return na("no accelerate YAML")
    ds = ctx.files.accelerate_ds
    if not ds.get("deepspeed_config_file"):
        return na("no deepspeed_config_file")
    extra = [k for k in DS_FILE_FORBIDDEN if k in ds]
    if "mixed_precision" in ctx.files.accelerate:
        extra.append("mixed_precision (top level)")
    if not extra:
        return ok("only deepspeed_config_file and compatible keys")
    return fail(f"{ctx.files.accelerate_name} sets {', '.join(extra)} beside deepspeed_config_file: accelerate raises",
                f"remove {', '.join(extra)} from the YAML and set them in {ctx.files.ds_config_name or 'the JSON'}")


@rule(id="CFG002", name="deepspeed-auto-outside-hf", severity="error",
      reads=("files.ds_config.train_batch_size", "files.ds_config.train_micro_batch_size_per_gpu", "files.calls"))
def deepspeed_auto_outside_hf(ctx: Context) -> Result:
    """`"auto"` in a DeepSpeed config only works when the Hugging Face Trainer/accelerate fills it in.

    ## Why
    DeepSpeed's own config reader has no notion of "auto": a literal "auto" in `train_batch_size` or
    `train_micro_batch_size_per_gpu` crashes it with a TypeError. The HF integration (Trainer, accelerate) replaces
    every "auto" before DeepSpeed sees the config; a script that calls `deepspeed.initialize` itself does not.

    ## Fix
    Write concrete batch values in the JSON when the script calls `deepspeed.initialize` directly, or train
    through a TRL/Trainer class.

    ## Example
    train.py calling `deepspeed.initialize(config="ds_config.json")` with train_batch_size "auto" fails; the same
    JSON used by `SFTTrainer` passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/config.py
    - https://huggingface.co/docs/transformers/deepspeed
    """
    ds = _ds(ctx)
    if ds is None:
        return na("no DeepSpeed config")
    autos = [k for k in ("train_batch_size", "train_micro_batch_size_per_gpu") if is_auto(ds.get(k))]
    if not autos:
        return ok("concrete batch values")
    files = ctx.files
    if files.train_py is None:
        return na("no train.py to tell who reads the config")
    plain = any(c == "deepspeed.initialize" or c.endswith(".deepspeed.initialize") for c in files.calls)
    hf = files.trainer is not None or "Trainer" in files.call_names() or "TrainingArguments" in files.configs
    if plain and not hf:
        return fail(f"{', '.join(autos)} = \"auto\" and train.py calls deepspeed.initialize directly: DeepSpeed "
                    "cannot resolve \"auto\"", "write concrete batch values in the JSON")
    return ok("the Hugging Face integration fills in \"auto\"")


def _mismatches(ctx: Context) -> list[str]:
    ds = _ds(ctx) or {}
    p = ctx.plan
    fp16 = truthy(_trl_expected(ctx, "fp16", False))
    bf16_arg = ctx.arg("bf16")
    bf16 = (not fp16) if bf16_arg is None else truthy(bf16_arg)  # TRL _BaseConfig: bf16=None -> not fp16
    checks = [
        ("train_micro_batch_size_per_gpu", ds.get("train_micro_batch_size_per_gpu"),
         _trl_expected(ctx, "per_device_train_batch_size", p.micro_batch), "per_device_train_batch_size"),
        ("gradient_accumulation_steps", ds.get("gradient_accumulation_steps"),
         _trl_expected(ctx, "gradient_accumulation_steps", p.grad_accum), "gradient_accumulation_steps"),
        ("gradient_clipping", ds.get("gradient_clipping"), _trl_expected(ctx, "max_grad_norm", 1.0), "max_grad_norm"),
        ("fp16.enabled", (ds.get("fp16") or {}).get("enabled") if isinstance(ds.get("fp16"), dict) else None, fp16,
         "fp16"),
        ("bf16.enabled", _bf16_enabled(ds), bf16, "bf16"),
    ]
    out = []
    for ds_key, ds_value, hf_value, hf_key in checks:
        if ds_value is None or is_auto(ds_value):
            continue
        if isinstance(hf_value, bool) or isinstance(ds_value, bool):
            same = truthy(ds_value) == truthy(hf_value)
        else:
            a, b = as_float(ds_value), as_float(hf_value)
            same = a is not None and b is not None and abs(a - b) < 1e-12
        if not same:
            out.append(f"ds {ds_key}={ds_value} vs {hf_key}={hf_value}")
    acc_ga = ctx.files.accelerate_ds.get("gradient_accumulation_steps") if ctx.files else None
    hf_ga = _trl_expected(ctx, "gradient_accumulation_steps", p.grad_accum)
    if acc_ga is not None and not is_auto(acc_ga) and as_int(acc_ga) != as_int(hf_ga):
        out.append(f"accelerate deepspeed_config gradient_accumulation_steps={acc_ga} vs gradient_accumulation_steps="
                   f"{hf_ga}")
    return out


def _bf16_enabled(ds: dict):
    for key in ("bf16", "bfloat16"):
        block = ds.get(key)
        if isinstance(block, dict) and "enabled" in block:
            return block["enabled"]
    return None


@rule(id="CFG003", name="deepspeed-values-match-trl-args", severity="error", seed="DS-04",
      reads=("files.ds_config", "files.trl_args.per_device_train_batch_size",
             "files.trl_args.gradient_accumulation_steps", "files.trl_args.max_grad_norm", "files.trl_args.bf16",
             "files.trl_args.fp16", "files.accelerate.deepspeed_config.gradient_accumulation_steps"))
def deepspeed_values_match(ctx: Context) -> Result:
    """Concrete DeepSpeed values must equal the TRL/TrainingArguments ones (or be "auto").

    ## Why
    transformers' `HfTrainerDeepSpeedConfig` fills every "auto" from TrainingArguments and records every concrete
    value that differs; `trainer_config_finalize` then raises "Please correct the following DeepSpeed config values
    that mismatch TrainingArguments values". Traps: TRL's bf16 defaults to True, so `bf16.enabled: false` fails;
    TRL's shipped zero1 YAML has `gradient_accumulation_steps: 1`, which fails with any other accumulation.

    ## Fix
    Set these keys to "auto" in the JSON (and drop gradient_accumulation_steps from the accelerate YAML).

    ## Example
    ds train_micro_batch_size_per_gpu 4 with per_device_train_batch_size 8 fails; "auto" passes.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/integrations/deepspeed.py
    - https://github.com/hiyouga/LlamaFactory/issues/1116
    """
    if ctx.files is None:
        return na(NO_FILES)
    if _ds(ctx) is None and not ctx.files.accelerate_ds:
        return na("no DeepSpeed config")
    bad = _mismatches(ctx)
    if not bad:
        return ok("no concrete value disagrees with the TRL arguments")
    return fail("DeepSpeed values mismatch the TRL arguments: " + "; ".join(bad),
                "set them to \"auto\" in the DeepSpeed config (drop them from the accelerate YAML)")


@rule(id="CFG004", name="deepspeed-train-batch-size-arithmetic", severity="error", seed="DS-05",
      reads=("files.ds_config.train_batch_size", "files.ds_config.train_micro_batch_size_per_gpu",
             "files.ds_config.gradient_accumulation_steps", "plan.num_processes"))
def deepspeed_train_batch_size(ctx: Context) -> Result:
    """A concrete `train_batch_size` must equal micro-batch x gradient accumulation x processes.

    ## Why
    DeepSpeed asserts "train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size";
    under the HF integration the same product (per_device_train_batch_size x gradient_accumulation_steps x
    world_size) must match or Trainer reports a mismatch. A hard-coded global batch breaks whenever the GPU
    count changes.

    ## Fix
    `"train_batch_size": "auto"`, or the exact product.

    ## Example
    train_batch_size 64 with micro 4, accumulation 2 on 4 processes (32) fails; 32 or "auto" passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/config.py
    - https://github.com/deepspeedai/DeepSpeed/issues/6914
    """
    ds = _ds(ctx)
    if ds is None:
        return na("no DeepSpeed config")
    tbs = ds.get("train_batch_size")
    if tbs is None or is_auto(tbs):
        return na("train_batch_size auto or unset")
    micro = ds.get("train_micro_batch_size_per_gpu")
    micro = as_int(_trl_expected(ctx, "per_device_train_batch_size", ctx.plan.micro_batch)) if micro is None or \
        is_auto(micro) else as_int(micro)
    accum = ds.get("gradient_accumulation_steps")
    accum = as_int(_trl_expected(ctx, "gradient_accumulation_steps", ctx.plan.grad_accum)) if accum is None or \
        is_auto(accum) else as_int(accum)
    world = ctx.plan.num_processes
    expected = (micro or 0) * (accum or 0) * world
    if as_int(tbs) == expected:
        return ok(f"{micro} x {accum} x {world} = {expected}")
    return fail(f"train_batch_size {tbs} != micro-batch {micro} x accumulation {accum} x {world} processes = "
                f"{expected}", f"set \"train_batch_size\": \"auto\" (or {expected})")


@rule(id="CFG005", name="bf16-and-fp16-both-enabled", severity="error", seed="DS-06",
      reads=("files.ds_config.bf16.enabled", "files.ds_config.fp16.enabled", "files.trl_args.bf16",
             "files.trl_args.fp16"))
def bf16_and_fp16_both(ctx: Context) -> Result:
    """bf16 and fp16 cannot both be enabled (DeepSpeed config, or TRL arguments).

    ## Why
    DeepSpeed asserts "bfloat16 and fp16 modes cannot be simultaneously enabled"; TrainingArguments refuses
    `bf16=True` with `fp16=True` too.

    ## Fix
    Enable one: bf16 on Ampere or newer, fp16 before; "auto" in the JSON follows the TRL arguments.

    ## Example
    `"bf16": {"enabled": true}, "fp16": {"enabled": true}` fails; fp16 "auto" passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/config.py
    - https://github.com/huggingface/transformers/issues/39849
    """
    if ctx.files is None:
        return na(NO_FILES)
    ds = _ds(ctx) or {}
    fp16_block = ds.get("fp16") if isinstance(ds.get("fp16"), dict) else {}
    ds_both = _bf16_enabled(ds) is True and fp16_block.get("enabled") is True
    trl_both = truthy(ctx.arg("bf16")) and truthy(ctx.arg("fp16"))
    if ds_both:
        return fail(f"{ctx.files.ds_config_name} enables both bf16 and fp16", "set one of them to false (or \"auto\")")
    if trl_both:
        return fail("the TRL arguments set both bf16=True and fp16=True", "keep one")
    return ok("one precision")


@rule(id="CFG006", name="zero3-save-needs-16bit-gather", severity="warning", seed="DS-07",
      reads=("plan.zero_stage", "files.ds_config.zero_optimization.stage3_gather_16bit_weights_on_model_save",
             "files.accelerate.deepspeed_config.zero3_save_16bit_model"))
def zero3_save_gather(ctx: Context) -> Result:
    """ZeRO-3 needs `stage3_gather_16bit_weights_on_model_save` to save a usable model.

    ## Why
    Without it, `save_model()` under ZeRO-3 writes placeholder (empty) weights, and only the sharded checkpoint
    holds the model; LoRA adapters come out empty the same way. Under the HF integration "auto" is filled from
    accelerate's `zero3_save_16bit_model`, which defaults to false.

    ## Fix
    `"stage3_gather_16bit_weights_on_model_save": true` in the JSON (or `zero3_save_16bit_model: true` in the
    accelerate YAML when it builds the config); otherwise plan a `zero_to_fp32.py` step.

    ## Example
    A ZeRO-3 JSON without the key (and no zero3_save_16bit_model) warns; with it set to true it passes.

    ## References
    - https://github.com/huggingface/transformers/pull/25817
    - https://github.com/deepspeedai/DeepSpeed/issues/3841
    """
    if ctx.files is None:
        return na(NO_FILES)
    if not uses_zero3(ctx):
        return na("not ZeRO-3")
    acc_flag = truthy(ctx.files.accelerate_ds.get("zero3_save_16bit_model"))
    zero = ctx.files.zero
    value = next((zero[k] for k in GATHER_KEYS if k in zero), None)
    if value is True or (is_auto(value) and acc_flag) or (value is None and _ds(ctx) is None and acc_flag):
        return ok("16-bit weights gathered on save")
    where = ctx.files.ds_config_name or ctx.files.accelerate_name or "the config"
    return fail(f"ZeRO-3 without stage3_gather_16bit_weights_on_model_save in {where}: save_model writes empty "
                "weights", "set \"stage3_gather_16bit_weights_on_model_save\": true (accelerate: "
                "zero3_save_16bit_model: true)")


def _offload_device(block) -> str:
    return str(block.get("device", "none")).lower() if isinstance(block, dict) else "none"


@rule(id="CFG007", name="offload-param-below-zero3-ignored", severity="warning",
      reads=("files.ds_config.zero_optimization.stage", "files.ds_config.zero_optimization.offload_param"))
def offload_param_below_zero3(ctx: Context) -> Result:
    """`offload_param` in a ZeRO-1/2 config is ignored: parameters stay on the GPU.

    ## Why
    DeepSpeed documents `offload_param` as valid only with stage 3; stages 1 and 2 never read it, so the memory
    the user expected to free stays allocated (no error, an OOM later).

    ## Fix
    Use `"stage": 3` for parameter offload, or remove `offload_param`.

    ## Example
    stage 2 with offload_param.device cpu warns; stage 3 passes.

    ## References
    - https://www.deepspeed.ai/docs/config-json/#parameter-offloading
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/config.py
    """
    if _ds(ctx) is None:
        return na("no DeepSpeed config")
    zero = ctx.files.zero
    if _offload_device(zero.get("offload_param")) == "none":
        return na("no offload_param")
    stage = as_int(zero.get("stage"))
    if stage == 3 or (stage is None and ctx.plan.zero_stage == 3):
        return ok("stage 3")
    return fail(f"offload_param at ZeRO stage {stage}: ignored below stage 3", "use \"stage\": 3, or remove "
                "offload_param")


@rule(id="CFG008", name="offload-ratio-needs-zero3", severity="error",
      reads=("files.ds_config.zero_optimization.stage", "files.ds_config.zero_optimization.offload_optimizer.ratio"))
def offload_ratio_needs_zero3(ctx: Context) -> Result:
    """Partial optimizer offload (`offload_optimizer.ratio` < 1) is supported at ZeRO-3 only.

    ## Why
    DeepSpeedZeroConfig asserts "Partial offloading only supported for ZeRO Stage 3" when the optimizer offload
    ratio is below 1.0 at another stage.

    ## Fix
    Use `"stage": 3`, or `ratio` 1.0 (full optimizer offload).

    ## Example
    stage 2 with offload_optimizer.ratio 0.5 fails; stage 3 passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/config.py
    """
    if _ds(ctx) is None:
        return na("no DeepSpeed config")
    zero = ctx.files.zero
    block = zero.get("offload_optimizer")
    ratio = as_float(block.get("ratio")) if isinstance(block, dict) else None
    if ratio is None or ratio >= 1.0:
        return na("no partial offload")
    stage = as_int(zero.get("stage"))
    if stage == 3:
        return ok("stage 3")
    return fail(f"offload_optimizer.ratio {ratio} at ZeRO stage {stage}: DeepSpeed asserts", "use \"stage\": 3, or "
                "ratio 1.0")


@rule(id="CFG009", name="zero-optimization-unknown-key", severity="error",
      reads=("files.ds_config.zero_optimization",))
def zero_unknown_key(ctx: Context) -> Result:
    """`zero_optimization` accepts only DeepSpeedZeroConfig's fields: any other key is a validation error.

    ## Why
    DeepSpeedZeroConfig (and its offload_param/offload_optimizer blocks) is a pydantic model with
    `extra="forbid"`: an unknown or misspelled key raises a ValidationError when the engine starts. Keys whose
    value is "auto" are dropped before validation, so only concrete values fail.

    ## Fix
    Fix the spelling (the finding suggests the closest valid key) or remove the key.

    ## Example
    `"stage3_gather_16bit_weights_on_save": true` fails (did you mean ..._on_model_save?); the right key passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/config.py
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/offload_config.py
    """
    if _ds(ctx) is None or "zero_optimization" not in ctx.files.ds_config:
        return na("no zero_optimization block")
    zero = ctx.files.zero
    bad = []
    for key, value in zero.items():
        if key not in ZERO_KEYS and not is_auto(value):
            bad.append((key, ZERO_KEYS))
    for block, keys in (("offload_param", OFFLOAD_PARAM_KEYS), ("offload_optimizer", OFFLOAD_OPTIMIZER_KEYS)):
        sub = zero.get(block)
        if isinstance(sub, dict):
            bad += [(f"{block}.{k}", keys) for k, v in sub.items() if k not in keys and not is_auto(v)]
    if not bad:
        return ok("every key is a DeepSpeedZeroConfig field")
    parts = []
    for key, keys in bad:
        close = difflib.get_close_matches(key.rsplit(".", 1)[-1], sorted(keys), n=1)
        parts.append(f"{key}" + (f" (did you mean {close[0]}?)" if close else ""))
    return fail(f"unknown zero_optimization keys: {', '.join(parts)}", "fix or remove them (DeepSpeedZeroConfig "
                "forbids extra keys)")


@rule(id="CFG010", name="zero-optimization-invalid-value", severity="error",
      reads=("files.ds_config.zero_optimization.stage", "files.ds_config.zero_optimization.offload_param.device",
             "files.ds_config.zero_optimization.offload_optimizer.device"))
def zero_invalid_value(ctx: Context) -> Result:
    """ZeRO stage must be 0-3 and offload devices none, cpu or nvme.

    ## Why
    DeepSpeedZeroConfig validates `stage` against ZeroStageEnum (0, 1, 2, 3: 4 is rejected) and the offload
    `device` against none/cpu/nvme (`gpu` is rejected).

    ## Fix
    Use a stage from 0 to 3 and an offload device among none, cpu, nvme.

    ## Example
    `"stage": 4` fails; `"stage": 3` passes. `"offload_param": {"device": "gpu"}` fails.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/config.py
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/offload_config.py
    """
    if _ds(ctx) is None or "zero_optimization" not in ctx.files.ds_config:
        return na("no zero_optimization block")
    zero = ctx.files.zero
    bad = []
    stage = zero.get("stage")
    if stage is not None and not is_auto(stage) and as_int(stage) not in (0, 1, 2, 3):
        bad.append(f"stage {stage!r} (0-3)")
    for block in ("offload_param", "offload_optimizer"):
        sub = zero.get(block)
        if isinstance(sub, dict) and "device" in sub and not is_auto(sub["device"]):
            if str(sub["device"]).lower() not in ("none", "cpu", "nvme"):
                bad.append(f"{block}.device {sub['device']!r} (none, cpu or nvme)")
    if not bad:
        return ok("stage and devices valid")
    return fail(f"invalid zero_optimization values: {'; '.join(bad)}", "use stage 0-3 and offload device none, cpu "
                "or nvme")


@rule(id="CFG011", name="accelerate-unknown-top-level-key", severity="error",
      reads=("files.accelerate",))
def accelerate_unknown_key(ctx: Context) -> Result:
    """An accelerate YAML accepts only ClusterConfig's top-level keys; another key raises.

    ## Why
    accelerate 1.15's `load_config_from_file` compares the YAML's keys with ClusterConfig's fields and raises
    "The config file at ... had unknown keys" (nested keys inside deepspeed_config/fsdp_config are silently
    ignored instead).

    ## Fix
    Remove or fix the key (the finding suggests the closest valid one); nest DeepSpeed/FSDP options under
    `deepspeed_config` / `fsdp_config`.

    ## Example
    A top-level `zero_stage: 3` fails (it belongs under deepspeed_config); `num_processes: 8` passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/commands/config/config_args.py
    """
    if ctx.files is None or not ctx.files.accelerate:
        return na("no accelerate YAML")
    unknown = sorted(k for k in ctx.files.accelerate if k not in ACCELERATE_TOP_KEYS)
    if not unknown:
        return ok("all top-level keys known")
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, sorted(ACCELERATE_TOP_KEYS), n=1)
        hints.append(key + (f" (did you mean {close[0]}?)" if close else ""))
    return fail(f"{ctx.files.accelerate_name}: unknown top-level keys {', '.join(hints)}: accelerate raises",
                "remove them, or nest DeepSpeed/FSDP options under deepspeed_config / fsdp_config")


@rule(id="CFG012", name="accelerate-num-processes", severity="error",
      reads=("files.accelerate.num_processes", "files.accelerate.num_machines", "target.gpus_per_node",
             "plan.vllm_gpus"))
def accelerate_num_processes(ctx: Context) -> Result:
    """accelerate's `num_processes` is the total over all machines: it must split evenly and fit the GPUs.

    ## Why
    accelerate launches `num_processes // num_machines` processes per node (num_processes counts all nodes). A
    count that does not divide by num_machines leaves nodes uneven, and more processes per node than GPUs (minus
    any GPUs set aside for a vLLM server) fails with "invalid device ordinal". TRL's shipped configs all say
    `num_processes: 8`.

    ## Fix
    Set `num_processes` to machines x training GPUs per node (or -1 and pass `--num_processes` at launch).

    ## Example
    num_processes 8 on a 4-GPU node fails; 4 passes. num_processes 8 with num_machines 3 fails.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/commands/launch.py
    - https://huggingface.co/docs/trl/distributing_training
    """
    acc = (ctx.files.accelerate if ctx.files is not None else None) or {}
    if not acc:
        return na("no accelerate YAML")
    procs = as_int(acc.get("num_processes"))
    machines = as_int(acc.get("num_machines")) or 1
    if procs is None or procs < 1:
        return na("num_processes not fixed in the YAML")
    if procs % machines:
        return fail(f"num_processes {procs} does not split evenly over num_machines {machines}",
                    f"use a multiple of {machines}")
    per_node = procs // machines
    gpus = ctx.target.gpus_per_node - (ctx.plan.vllm_gpus if ctx.plan.vllm_mode == "server" else 0)
    if per_node > gpus:
        return fail(f"num_processes {procs} over {machines} machine(s) = {per_node} per node, but the node has {gpus} "
                    "training GPU(s)", f"set num_processes to {gpus * machines}")
    return ok(f"{per_node} processes per node on {gpus} GPUs")


def _trl_fields() -> dict:
    return load_toml("trl_fields.toml")


def class_fields(cls: str) -> frozenset[str] | None:
    data = _trl_fields()
    spec = data["configs"].get(cls)
    if spec is None:
        return None
    fields = set(spec["fields"])
    if spec.get("extends"):
        fields |= set(data[spec["extends"]]["fields"])
    return frozenset(fields)


REMOVAL_NOTES = {
    "max_seq_length": "renamed max_length",
    "max_prompt_length": "removed: max_length (prompt + completion) is the only limit",
    "use_liger_loss": "removed: TRL 1.16 always uses its chunked fused LM head",
    "torch_dtype": "renamed dtype",
    "max_completion_length": "removed from DPOConfig/KTOConfig: max_length covers prompt + completion",
}


def _replacement(key: str, valid: frozenset[str]) -> str:
    note = REMOVAL_NOTES.get(key)
    if note:
        return note
    close = difflib.get_close_matches(key, sorted(valid), n=1)
    return f"did you mean {close[0]}?" if close else "not an argument of TRL 1.16"


@rule(id="CFG013", name="trl-argument-removed", severity="error", applies_to={"trl": ">=1.16"},
      reads=("files.configs",))
def trl_argument_removed(ctx: Context) -> Result:
    """A TRL config in train.py passes an argument TRL 1.16 no longer has: a TypeError at start-up.

    ## Why
    TRL's configs are dataclasses: an unknown keyword raises "unexpected keyword argument". Renamed or removed
    since the seed era: SFTConfig `max_seq_length` (now `max_length`), DPOConfig/GRPOConfig `max_prompt_length`
    and DPOConfig `max_completion_length` (only `max_length` remains), `use_liger_loss` (gone), ModelConfig
    `torch_dtype` (now `dtype`).

    ## Fix
    Use the new name the finding gives, or drop the argument.

    ## Example
    `SFTConfig(max_seq_length=2048)` fails; `SFTConfig(max_length=2048)` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_config.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/dpo_config.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/model_config.py
    """
    if ctx.files is None or ctx.files.train_py is None:
        return na("no train.py")
    bad = []
    for cls, kwargs in ctx.files.configs.items():
        valid = class_fields(cls)
        if valid is None:
            continue
        bad += [f"{cls}({key}=...): {_replacement(key, valid)}" for key in kwargs if key not in valid]
    checked = [c for c in ctx.files.configs if class_fields(c) is not None]
    if not checked:
        return na("no TRL config call in train.py")
    if not bad:
        return ok(f"{', '.join(checked)} arguments exist in TRL 1.16")
    return fail("TRL 1.16 rejects: " + "; ".join(bad), "rename or drop these arguments")


YAML_EXTRA_KEYS = frozenset({"accelerate_config", "env", "config"})


@rule(id="CFG014", name="trl-yaml-key-ignored", severity="warning", applies_to={"trl": ">=1.16"},
      reads=("files.trl_yaml",))
def trl_yaml_key_ignored(ctx: Context) -> Result:
    """A key in the TRL CLI config YAML that no TRL 1.16 argument reads is silently ignored.

    ## Why
    The `trl sft|dpo|grpo|rloo|kto` scripts parse the YAML with `fail_with_unknown_args=False`: an old name such as
    `max_seq_length` or `max_prompt_length` is dropped without an error, so the run trains with the default
    (max_length 1024) instead of what the file says.

    ## Fix
    Rename the key as the finding says (max_seq_length -> max_length, torch_dtype -> dtype) or remove it.

    ## Example
    A TRL YAML with `max_seq_length: 4096` warns; `max_length: 4096` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/scripts/sft.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/scripts/utils.py
    """
    if ctx.files is None or not ctx.files.trl_yaml:
        return na("no TRL config YAML")
    cls = {"sft": "SFTConfig", "dpo": "DPOConfig", "grpo": "GRPOConfig", "rloo": "RLOOConfig",
           "kto": "KTOConfig", "gkd": "GKDConfig"}.get(ctx.plan.trainer, "SFTConfig")
    valid = set(class_fields(cls) or ()) | YAML_EXTRA_KEYS
    for other in ("ModelConfig", "ScriptArguments", "DatasetMixtureConfig"):
        valid |= set(class_fields(other) or ())
    unknown = [k for k in ctx.files.trl_yaml if k not in valid]
    if not unknown:
        return ok(f"every key is a {cls}/ModelConfig/ScriptArguments argument")
    frozen = frozenset(valid)
    return fail(f"{ctx.files.trl_yaml_name}: keys ignored by the TRL {ctx.plan.trainer} script: " +
                "; ".join(f"{k} ({_replacement(k, frozen)})" for k in unknown), "rename or remove them")


@rule(id="CFG015", name="warmup-num-steps-positive", severity="error", applies_to={"deepspeed": ">=0.19.6"},
      reads=("files.ds_config.scheduler.params.warmup_num_steps",))
def warmup_num_steps_positive(ctx: Context) -> Result:
    """A DeepSpeed WarmupLR scheduler needs `warmup_num_steps` >= 1 (DeepSpeed 0.19.6+).

    ## Why
    deepspeed 0.19.6 made WarmupLR raise "warmup_num_steps must be a positive integer" for 0 or less. Under the HF
    integration "auto" becomes max(1, warmup_steps); a literal 0 (common in older configs) now fails.

    ## Fix
    `"warmup_num_steps": "auto"` (or a positive integer).

    ## Example
    scheduler.params.warmup_num_steps 0 fails; "auto" or 100 passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/lr_schedules.py
    - https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/integrations/deepspeed.py
    """
    ds = _ds(ctx)
    if ds is None or not isinstance(ds.get("scheduler"), dict):
        return na("no DeepSpeed scheduler")
    params = ds["scheduler"].get("params") or {}
    value = params.get("warmup_num_steps")
    if value is None or is_auto(value):
        return ok("auto or default (1000)")
    number = as_int(value)
    if number is not None and number >= 1:
        return ok(f"warmup_num_steps {number}")
    return fail(f"scheduler.params.warmup_num_steps {value!r}: DeepSpeed >= 0.19.6 requires a positive integer",
                "set \"warmup_num_steps\": \"auto\" or a positive integer")


def _ckpt_kwargs(ctx: Context) -> dict:
    value = ctx.arg("gradient_checkpointing_kwargs") or ctx.arg("activation_checkpointing_kwargs") or {}
    return value if isinstance(value, dict) else {}


@rule(id="CFG016", name="zero3-peft-reentrant-checkpointing", severity="warning", seed="GC-02",
      reads=("plan.zero_stage", "plan.method", "files.trl_args.gradient_checkpointing_kwargs",
             "files.trl_args.activation_checkpointing_kwargs", "versions.transformers"))
def zero3_peft_reentrant(ctx: Context) -> Result:
    """PEFT under ZeRO-3 must checkpoint reentrantly, and from transformers 5.23 only the file can make it so.

    ## Why
    Non-reentrant checkpointing fails under ZeRO-3 with frozen (LoRA) parameters ("Recomputed values ... shape [0]"),
    so the SFT/DPO/KTO/GRPO/RLOO trainers force `use_reentrant=True`, warning when the user asked for False. They do
    it by assigning a new dict to `args.gradient_checkpointing_kwargs`. From transformers 5.23 that name is a
    deprecated alias which `TrainingArguments.__post_init__` mirrors from `activation_checkpointing_kwargs` once, and
    the Trainer reads `activation_checkpointing_kwargs` when it turns checkpointing on: TRL's dict never reaches it,
    and with the kwargs unset the model checkpoints with transformers' default `use_reentrant=False`.

    ## Fix
    Pass `activation_checkpointing_kwargs={"use_reentrant": True}` (`gradient_checkpointing_kwargs` before
    transformers 5.23) for PEFT + ZeRO-3.

    ## Example
    LoRA + ZeRO-3 with `gradient_checkpointing_kwargs={"use_reentrant": False}`, or with nothing set on transformers
    5.25, warns; with `activation_checkpointing_kwargs={"use_reentrant": True}` it passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    - https://github.com/huggingface/transformers/blob/v5.25.0/src/transformers/training_args.py
    - https://github.com/huggingface/trl/issues/2514
    """
    if ctx.files is None:
        return na(NO_FILES)
    if not (uses_zero3(ctx) and uses_peft(ctx) and ctx.plan.grad_ckpt):
        return na("no PEFT + ZeRO-3 + gradient checkpointing")
    reentrant = _ckpt_kwargs(ctx).get("use_reentrant")
    if reentrant is False:
        return fail("use_reentrant=False with PEFT under ZeRO-3: TRL forces True (with a warning)",
                    "remove use_reentrant from gradient_checkpointing_kwargs")
    transformers = (ctx.versions or {}).get("transformers")
    if reentrant is not True and transformers and vercmp.is_version(transformers) \
            and vercmp.compare(transformers, "5.23.0") >= 0:
        return fail(f"use_reentrant unset with PEFT under ZeRO-3: on transformers {transformers} TRL's forced "
                    "use_reentrant=True lands on the deprecated gradient_checkpointing_kwargs, which the Trainer no "
                    "longer reads, so checkpointing runs non-reentrant",
                    'pass activation_checkpointing_kwargs={"use_reentrant": True} to the TRL config')
    return ok("reentrant checkpointing")


@rule(id="CFG017", name="selective-checkpointing-constraints", severity="error",
      reads=("files.trl_args.gradient_checkpointing_kwargs", "plan.grad_ckpt", "plan.zero_stage", "plan.method"))
def selective_checkpointing(ctx: Context) -> Result:
    """TRL's selective activation checkpointing (`{"selective": True}`) needs non-reentrant checkpointing.

    ## Why
    SFTTrainer 1.16 raises when `gradient_checkpointing_kwargs={"selective": True}` comes with
    `gradient_checkpointing=False`, with `use_reentrant=True`, or with PEFT under ZeRO-3 (which forces reentrant
    checkpointing).

    ## Fix
    Drop `selective`, or use it with gradient checkpointing on, `use_reentrant` unset, and no PEFT + ZeRO-3.

    ## Example
    `{"selective": True, "use_reentrant": True}` fails; `{"selective": True}` with full fine-tuning passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    """
    if ctx.files is None:
        return na(NO_FILES)
    kwargs = _ckpt_kwargs(ctx)
    if not truthy(kwargs.get("selective")):
        return na("no selective checkpointing")
    if not ctx.plan.grad_ckpt:
        return fail("selective checkpointing with gradient_checkpointing=False", "turn gradient checkpointing on")
    if truthy(kwargs.get("use_reentrant")):
        return fail("selective checkpointing with use_reentrant=True", "leave use_reentrant unset")
    if uses_zero3(ctx) and uses_peft(ctx):
        return fail("selective checkpointing with PEFT under ZeRO-3 (which forces reentrant checkpointing)",
                    "drop selective, or use ZeRO-2")
    return ok("selective checkpointing usable")


@rule(id="CFG018", name="trl-import-moved", severity="error", applies_to={"trl": ">=1.16"},
      reads=("files.imports",))
def trl_import_moved(ctx: Context) -> Result:
    """train.py imports a name `trl` no longer exports (moved to trl.experimental, or removed).

    ## Why
    TRL 1.16 exports only its core trainers at the top level: GKD, Online DPO, ORPO and CPO live in
    `trl.experimental.*`; PPO, NashMD, XPO, PRM, BCO, `get_kbit_device_map`, `setup_chat_format` and
    `DataCollatorForCompletionOnlyLM` are gone. `from trl import GKDConfig` is an ImportError.

    ## Fix
    Import from the module the finding names (e.g. `from trl.experimental.gkd import GKDConfig, GKDTrainer`), or
    replace a removed helper (SFT's `completion_only_loss`, `clone_chat_template`).

    ## Example
    `from trl import GKDConfig` fails; `from trl.experimental.gkd import GKDConfig` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/__init__.py
    - https://github.com/huggingface/trl/tree/v1.16.0/trl/experimental
    """
    if ctx.files is None or ctx.files.train_py is None:
        return na("no train.py")
    data = _trl_fields()
    exports = set(data["exports"]["names"])
    moved = data["moved"]
    names = [name for module, name in ctx.files.imports if module == "trl" and name and name != "*"]
    if not names:
        return na("no `from trl import ...`")
    bad = []
    for name in names:
        if name in exports:
            continue
        where = moved.get(name)
        bad.append(f"{name} (now in {where})" if where else f"{name} (removed)" if where == "" else
                   f"{name} (not exported)")
    if not bad:
        return ok(f"imports {', '.join(names)} exist")
    return fail(f"`from trl import` fails for: {', '.join(bad)}", "import from trl.experimental.<trainer> where "
                "given; replace removed helpers")


_DISTRIBUTED_LAUNCH = re.compile(r"\b(accelerate\s+launch|torchrun|torch\.distributed\.(run|launch)|deepspeed\s+"
                                 r"|trl\s+(sft|dpo|grpo|rloo|kto|reward|distillation)\b|srun\s)")
_PLAIN_PYTHON = re.compile(r"\bpython[0-9.]*\s+(?!-m\s+torch)\S+\.py\b")


@rule(id="CFG019", name="launch-needs-distributed-launcher", severity="error",
      reads=("files.launch_sh", "plan.num_processes"))
def launch_needs_launcher(ctx: Context) -> Result:
    """Several GPUs need `accelerate launch`/`torchrun`: one `python train.py` process sees all GPUs and TRL refuses.

    ## Why
    A single process with several visible GPUs makes Trainer use nn.DataParallel, which TRL 1.16's trainers reject
    ("does not support `nn.DataParallel` ... Launch the script with `accelerate launch` or `torchrun`").

    ## Fix
    `accelerate launch --config_file accelerate.yaml train.py` (or torchrun / the `trl` CLI), or restrict the run
    to one GPU with CUDA_VISIBLE_DEVICES.

    ## Example
    A launch.sh running `python train.py` for a 4-GPU plan fails; `accelerate launch ... train.py` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    """
    if ctx.files is None or not ctx.files.launch_sh:
        return na("no launch script")
    if ctx.plan.num_processes < 2:
        return na("one training process")
    text = "\n".join(ctx.files.launch_lines())
    if _DISTRIBUTED_LAUNCH.search(text):
        return ok("distributed launcher")
    if _PLAIN_PYTHON.search(text):
        return fail(f"launch script runs `python ...py` for {ctx.plan.num_processes} GPUs: TRL rejects nn.DataParallel",
                    "use `accelerate launch --config_file <yaml> train.py` (or torchrun)")
    return na("no training command recognised")


@rule(id="CFG020", name="offload-replaces-client-optimizer", severity="warning", seed="DS-08",
      reads=("files.trl_args.optim", "files.ds_config.optimizer", "plan.offload",
             "files.ds_config.zero_force_ds_cpu_optimizer"))
def offload_replaces_optimizer(ctx: Context) -> Result:
    """With DeepSpeed optimizer offload, accelerate swaps a non-AdamW `optim` for DeepSpeedCPUAdam.

    ## Why
    ZeRO-Offload refuses client optimizers other than DeepSpeed's CPU ones (`zero_force_ds_cpu_optimizer`, default
    true). accelerate 1.15 therefore maps the Trainer's optimizer to DeepSpeedCPUAdam when no `optimizer` block is
    in the JSON: an 8-bit or paged optimizer (`paged_adamw_8bit`, `adamw_bnb_8bit`, `adafactor`, ...) is silently
    replaced by 32-bit Adam, and its memory saving with it.

    ## Fix
    Use `optim="adamw_torch"` with offload (the CPU holds the states anyway), or define the optimizer in the JSON,
    or set `"zero_force_ds_cpu_optimizer": false` knowingly.

    ## Example
    `optim="paged_adamw_8bit"` with offload_optimizer cpu warns; `optim="adamw_torch"` passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/utils/deepspeed.py
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/engine.py
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.backend != "deepspeed" or ctx.plan.offload == "none":
        return na("no DeepSpeed optimizer offload")
    ds = _ds(ctx) or {}
    if "optimizer" in ds or ds.get("zero_force_ds_cpu_optimizer") is False:
        return ok("optimizer defined in the DeepSpeed config")
    optim = str(ctx.arg("optim", "adamw_torch_fused"))
    if optim in ADAMW_OPTIMS:
        return ok(f"optim {optim} maps to DeepSpeedCPUAdam")
    return fail(f"optim {optim!r} with optimizer offload: accelerate replaces it with DeepSpeedCPUAdam (32-bit Adam)",
                "use optim='adamw_torch', or define the optimizer in the DeepSpeed config")


TRUST_FIX = "pass --trust-remote-code if you trust this model's code"


@rule(id="CFG021", name="remote-code-needs-trust", severity="error",
      reads=("model.remote_code", "model.model_type", "plan.trust_remote_code"))
def remote_code_needs_trust(ctx: Context) -> Result:
    """A model with an auto_map and a model_type transformers has no class for needs --trust-remote-code.

    ## Why
    An `auto_map` in config.json names Python files of the model repository that define its config and model
    classes. transformers runs them only with `trust_remote_code=True` (dynamic_module_utils.py
    resolve_trust_remote_code); when the model_type is not one of its own classes it has nothing else to load, and
    `from_pretrained` raises "contains custom code which must be executed". trl-advisor never turns remote code on
    by itself: train.py passes `trust_remote_code=False` unless you ask, so the bundle would fail at load.
    trl-advisor knows a model_type to be built into transformers only for the families it reads by name (Llama,
    Qwen, Mistral, Gemma, Phi, GPT-2 ...); for any other, the code named in auto_map is taken as needed.

    ## Fix
    Read the code the repository ships (the files auto_map names), then pass `--trust-remote-code` if you trust it.
    The estimate models the architecture from config.json's sizes as for a Llama-style decoder.

    ## Example
    A local model folder with `"model_type": "internlm2"` and an auto_map fails without `--trust-remote-code` and
    passes with it.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.25.0/src/transformers/dynamic_module_utils.py
    - https://huggingface.co/docs/transformers/custom_models
    """
    model = ctx.model
    if not model.remote_code:
        return na("config.json has no auto_map")
    if model.model_type in BUILT_IN_MODEL_TYPES:
        return na(f"transformers has its own {model.model_type} class (rule CFG022)")
    if ctx.plan.trust_remote_code:
        return ok("--trust-remote-code: train.py runs the code the model repository ships")
    return fail(f"{model.hf_id}: config.json has an auto_map and model_type '{model.model_type}', not a transformers "
                "class trl-advisor knows: loading it runs the model repository's own code, and train.py passes "
                "trust_remote_code=False unless asked", TRUST_FIX)


@rule(id="CFG022", name="remote-code-not-run", severity="warning",
      reads=("model.remote_code", "model.model_type", "plan.trust_remote_code"))
def remote_code_not_run(ctx: Context) -> Result:
    """A model with an auto_map but a built-in model_type trains transformers' own class, not the repository's code.

    ## Why
    transformers has a class of its own for this model_type, so without `trust_remote_code=True` it ignores the
    auto_map and builds its built-in class (dynamic_module_utils.py resolve_trust_remote_code: local code exists,
    remote code is not run). That is usually what you want (Phi-3 repositories, for one, still carry the code they
    shipped before transformers had Phi-3), and it is the architecture the estimate models; but the repository's own
    code, if it differs, is not what trains. trl-advisor never turns remote code on by itself.

    ## Fix
    Nothing, when the built-in class is the model. If you need the repository's code and trust it, pass
    `--trust-remote-code` (transformers then prefers that code to its own class).

    ## Example
    A local Phi-3 folder whose config.json has an auto_map warns without `--trust-remote-code`; with it, passes.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.25.0/src/transformers/dynamic_module_utils.py
    - https://github.com/huggingface/transformers/blob/v5.25.0/src/transformers/models/auto/auto_factory.py
    """
    model = ctx.model
    if not model.remote_code:
        return na("config.json has no auto_map")
    if model.model_type not in BUILT_IN_MODEL_TYPES:
        return na(f"transformers has no {model.model_type} class trl-advisor knows (rule CFG021)")
    if ctx.plan.trust_remote_code:
        return ok("--trust-remote-code: train.py runs the code the model repository ships")
    return fail(f"{model.hf_id}: config.json has an auto_map (code of the model repository), but train.py passes "
                f"trust_remote_code=False: transformers trains its own {model.model_type} class instead, the one the "
                "estimate models", f"nothing if the built-in class is the model; else {TRUST_FIX}")


# (argument, trainers it belongs to (None: every one), low, low inclusive, high, high inclusive, whole number,
#  where the bound is enforced or why it matters). The TRL config's own fields (files.trl_args) as train.py passes
# them, CONFIG's edits included (`beta=CONFIG["beta"]`).
_HYPER = (
    ("beta", ("grpo", "rloo", "dpo", "kto"), 0.0, True, None, False, False,
     "the KL / preference coefficient: a negative one rewards moving away from the reference, None fails in the loss"),
    ("beta", ("gkd",), 0.0, True, 1.0, True, False, "GKDConfig.__post_init__: beta must be in [0, 1]"),
    ("lmbda", ("gkd",), 0.0, True, 1.0, True, False, "GKDConfig.__post_init__: lmbda must be in [0, 1]"),
    ("temperature", ("grpo", "rloo", "gkd"), 0.0, False, None, False, False,
     "sampling divides the logits by it (logits / temperature)"),
    ("num_generations", ("grpo", "rloo"), 2, True, None, False, True,
     "GRPOConfig/RLOOConfig.__post_init__: at least 2 completions per prompt to compute advantages"),
    ("max_completion_length", ("grpo", "rloo", "gkd"), 1, True, None, False, True, "completions of no token"),
    ("logging_steps", None, 0.0, False, None, False, False,
     "TrainingArguments.__post_init__: logging strategy steps requires non-zero logging_steps"),
    ("save_steps", None, 0.0, False, None, False, False,
     "TrainingArguments.__post_init__: save strategy steps requires non-zero save_steps"),
    ("max_grad_norm", None, 0.0, True, None, False, False, "clip_grad_norm_ to a negative norm"),
    ("weight_decay", None, 0.0, True, None, False, False, "AdamW's decay: a negative one grows the weights"),
)
_LORA = (
    ("lora_dropout", 0.0, True, 1.0, False, False, "torch.nn.Dropout(p) needs 0 <= p <= 1; p = 1 zeroes the adapter's input"),
    ("r", 1, True, None, False, True, "LoraConfig: a rank of at least 1"),
    ("lora_alpha", 0.0, False, None, False, False, "the adapter's scale is lora_alpha / r"),
)


def _out_of_range(name, value, low, low_in, high, high_in, whole) -> str | None:
    """Why `value` is no valid `name`, or None. Unread values (an expression) are not judged."""
    from advisor.core.files import Unresolved

    if isinstance(value, Unresolved):
        return None
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return f"{name} is {value!r:.40}, not a number"
    if whole and value != int(value):
        return f"{name} is {value}, not a whole number"
    bounds = (f"{'>=' if low_in else '>'} {low:g}" if low is not None else "") + \
        (f"{' and ' if low is not None else ''}{'<=' if high_in else '<'} {high:g}" if high is not None else "")
    if (low is not None and (value < low or (value == low and not low_in))) or \
            (high is not None and (value > high or (value == high and not high_in))):
        return f"{name} is {value:g}, must be {bounds}"
    if name in ("logging_steps", "save_steps") and value > 1 and value != int(value):
        return f"{name} is {value:g}: above 1 it must be a whole number of steps (a fraction of the run below 1)"
    return None


@rule(id="CFG023", name="trainer-hyperparameters-in-range", severity="error",
      reads=("plan.trainer", "files.trl_args", "files.configs"))
def trainer_hyperparameters_in_range(ctx: Context) -> Result:
    """The trainer's and the adapter's numbers must be ones the libraries accept: beta, lmbda, temperature,
    num_generations, logging/save steps, the gradient norm, weight decay, and LoRA's dropout, rank and alpha.

    ## Why
    A hand-edited value outside its range either stops the run at start-up (GKDConfig refuses lmbda or beta outside
    [0, 1]; GRPOConfig and RLOOConfig refuse fewer than 2 generations; TrainingArguments refuses logging_steps 0 and
    a fractional count above 1) or trains something else than meant (a negative KL coefficient pushes the policy
    away from its reference, a negative weight decay grows the weights, lora_dropout 1 zeroes every adapter input),
    and None fails inside the loss after the model has loaded. The memory and speed check says nothing about these.

    ## Fix
    Put the value back in range (the finding names it and its bounds), or re-create the bundle with
    `trl-advisor generate --force`.

    ## Example
    GKD with `lmbda=1.5` fails, with 0.5 passes; GRPO with `beta=-0.1` fails; `lora_dropout=5` fails, 0.05 passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/experimental/gkd/gkd_config.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    - https://github.com/huggingface/transformers/blob/v5.25.0/src/transformers/training_args.py
    - https://github.com/huggingface/peft/blob/v0.21.0/src/peft/tuners/lora/config.py
    """
    if ctx.files is None:
        return na(NO_FILES)
    trainer = ctx.plan.trainer
    problems = []
    checked = 0
    for name, trainers, low, low_in, high, high_in, whole, why in _HYPER:
        if (trainers is None or trainer in trainers) and ctx.has_arg(name):
            checked += 1
            problem = _out_of_range(name, ctx.arg(name), low, low_in, high, high_in, whole)
            if problem:
                problems.append(f"{problem} ({why})")
    lora = ctx.files.configs.get("LoraConfig") or {}
    for name, low, low_in, high, high_in, whole, why in _LORA:
        if name in lora:
            checked += 1
            problem = _out_of_range(name, lora[name], low, low_in, high, high_in, whole)
            if problem:
                problems.append(f"LoraConfig {problem} ({why})")
    if not checked:
        return na("the files set none of these numbers")
    if problems:
        return fail("; ".join(problems), "put each value back in its range, or re-create the bundle "
                    "(trl-advisor generate --force)")
    return ok(f"{checked} value(s) in range")


_BUCKETS = (
    # (key, what the estimate assumes for "auto" in elements as a multiple of hidden^2, copies held on the GPU)
    ("reduce_bucket_size", 1.0, None),
    ("stage3_prefetch_bucket_size", 0.9, 1),
)
"""ZeRO's GPU buffers sized by ds_config: the HF integration fills "auto" with hidden^2 elements for the reduce
bucket and 0.9 x hidden^2 for ZeRO-3's prefetch (transformers integrations/deepspeed.py trainer_config_finalize),
which advisor.model.buffers.zero_bucket_bytes counts; a number written instead is a buffer of that many elements."""


@rule(id="CFG024", name="zero-buffers-fit-the-headroom", severity="error",
      reads=("files.ds_config.zero_optimization", "plan.zero_stage", "plan.overlap_comm", "plan.precision",
             "model.hidden"))
def zero_buffers_fit_the_headroom(ctx: Context) -> Result:
    """ZeRO bucket sizes written as numbers must fit in what the plan leaves free: the estimate counts "auto".

    ## Why
    ZeRO-1/2 allocate their reduce bucket (two with overlap_comm) and ZeRO-3 its reduce bucket, staging buffer and
    prefetched parameters at the size ds_config gives, in the 16-bit dtype (stage_1_and_2.py setup_buckets,
    stage3.py). The bundles write "auto", which the HF integration turns into hidden^2 elements (0.9 x hidden^2 for
    the prefetch), and the memory estimate counts those. A number written by hand is a buffer of that many
    elements: 5e10 is about 93 GiB in bf16, an out-of-memory the estimate cannot see.

    ## Fix
    Write "auto" back, or a size whose extra bytes fit in the plan's headroom (the finding says how much that is).

    ## Example
    ZeRO-2 on an 8B model with `"reduce_bucket_size": 5e10` fails; "auto" or 5e8 passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/stage_1_and_2.py
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/stage3.py
    - https://github.com/huggingface/transformers/blob/v5.25.0/src/transformers/integrations/deepspeed.py
    """
    if _ds(ctx) is None or not ctx.files.zero:
        return na("no zero_optimization block")
    p = ctx.plan
    if p.backend != "deepspeed" or p.zero_stage == 0:
        return na("no ZeRO-1/2/3 buckets")
    if ctx.memory is None:
        return na("no memory estimate")
    width = 4 if p.precision == "fp32" else 2
    hidden2 = ctx.model.hidden * ctx.model.hidden
    extra, written = 0, []
    for key, auto_share, copies in _BUCKETS:
        value = ctx.files.zero.get(key)
        if key.startswith("stage3_") and p.zero_stage != 3:
            continue
        if value is None or is_auto(value):
            continue
        elements = as_float(value)
        if elements is None or elements < 0:
            continue  # DeepSpeed's own validation (CFG010's kind) refuses it
        held = copies if copies is not None else (2 if p.zero_stage == 3 or p.overlap_comm else 1)
        more = int(max(0.0, elements - auto_share * hidden2) * width * held)
        extra += more
        written.append(f"{key} {elements:.3g} ({gib(more)} more than 'auto')")
    if not written:
        return na("bucket sizes are 'auto' or not written")
    spare = int(getattr(ctx.memory, "headroom_bytes", 0))
    if extra <= max(spare, 0):
        return ok(f"{'; '.join(written)}: within the plan's {gib(spare)} headroom")
    return fail(f"{'; '.join(written)}: {gib(extra)} of ZeRO buffers the estimate does not count, and the plan leaves "
                f"{gib(max(spare, 0))} free per GPU", "write \"auto\" back (hidden^2 elements), or a size whose extra "
                "bytes fit the headroom")


RULES = (accelerate_ds_file_duplicates, deepspeed_auto_outside_hf, deepspeed_values_match, deepspeed_train_batch_size,
         bf16_and_fp16_both, zero3_save_gather, offload_param_below_zero3, offload_ratio_needs_zero3, zero_unknown_key,
         zero_invalid_value, accelerate_unknown_key, accelerate_num_processes, trl_argument_removed,
         trl_yaml_key_ignored, warmup_num_steps_positive, zero3_peft_reentrant, selective_checkpointing,
         trl_import_moved, launch_needs_launcher, offload_replaces_optimizer, remote_code_needs_trust,
         remote_code_not_run, trainer_hyperparameters_in_range, zero_buffers_fit_the_headroom)
