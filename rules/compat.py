"""Compatibility-matrix rules (CMP*) between vLLM, Liger, HF Kernels, Unsloth, DeepSpeed and FSDP2, and the matrix
itself as data (rules/data/compat.toml, shown by `trl-advisor rules --matrix`)."""

from __future__ import annotations

from rules import vercmp
from rules.common import NO_FILES, truthy, uses_hf_kernels, uses_use_kernels
from rules.datafiles import load_toml
from rules.environments import vllm_requires, vllm_window  # noqa: F401  (the compatibility data's readers)
from rules.model import Context, Result, fail, na, ok
from rules.registry import rule

VERDICTS = ("incompatible", "conditional", "overlap", "deprecated", "wasteful", "supported")


def compat_rows() -> list[dict]:
    return [dict(r) for r in load_toml("compat.toml")["row"]]


def compat_matrix() -> dict:
    """{"features": [...], "verdicts": [...], "rows": [{a, b, verdict, condition, rule, reason, source}],
    "cells": {"a|b": verdict}}: the table behind `rules --matrix` (symmetric: a|b and b|a)."""
    rows = compat_rows()
    features = sorted({r["a"] for r in rows} | {r["b"] for r in rows})
    cells: dict[str, str] = {}
    for r in rows:
        cells[f"{r['a']}|{r['b']}"] = r["verdict"]
        cells[f"{r['b']}|{r['a']}"] = r["verdict"]
    return {"features": features, "verdicts": list(VERDICTS),
            "rows": [{"a": r["a"], "b": r["b"], "verdict": r["verdict"], "condition": r.get("condition", ""),
                      "rule": r["rule"], "reason": r["reason"], "source": r["source"]} for r in rows],
            "cells": cells}


def liger_model_types() -> frozenset[str]:
    return frozenset(load_toml("compat.toml")["liger"]["model_types"])


def unsloth_requires() -> dict[str, str]:
    return dict(load_toml("compat.toml")["unsloth"]["requires"])


@rule(id="CMP001", name="deepspeed-fsdp-exclusive", severity="error", seed="DS-01",
      reads=("plan.backend", "files.trl_args.deepspeed", "files.trl_args.fsdp", "files.accelerate.distributed_type"))
def deepspeed_fsdp_exclusive(ctx: Context) -> Result:
    """DeepSpeed and FSDP cannot both drive one run.

    ## Why
    accelerate has a single `distributed_type`; transformers' Trainer raises "Using --fsdp xxx together with
    --deepspeed is not possible, deactivate one of those flags" when TrainingArguments carries both, and a
    `deepspeed=` argument under an FSDP accelerate YAML (or `fsdp=` under DEEPSPEED) asks for both.

    ## Fix
    Keep one backend: remove `fsdp`/`fsdp_config` from the TRL arguments when using DeepSpeed, or
    `deepspeed=` when using FSDP.

    ## Example
    `SFTConfig(deepspeed="ds_config.json", fsdp="full_shard")` fails; either alone passes.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/trainer.py
    - https://huggingface.co/docs/accelerate/concept_guides/fsdp_and_deepspeed
    """
    if ctx.files is None:
        return ok(f"the plan uses one backend ({ctx.plan.backend})")
    ds_arg = bool(ctx.arg("deepspeed"))
    fsdp_arg = bool(ctx.arg("fsdp")) and str(ctx.arg("fsdp")).strip().lower() not in ("", "false", "none", "[]")
    dist = str((ctx.files.accelerate or {}).get("distributed_type", "")).upper()
    if ds_arg and fsdp_arg:
        return fail("the TRL arguments set both deepspeed and fsdp: Trainer raises", "remove one of them")
    if ds_arg and dist == "FSDP":
        return fail("deepspeed= in the TRL arguments under an FSDP accelerate YAML", "drop deepspeed= (FSDP), or "
                    "use a DEEPSPEED accelerate YAML")
    if fsdp_arg and dist == "DEEPSPEED":
        return fail("fsdp= in the TRL arguments under a DEEPSPEED accelerate YAML", "drop fsdp= (DeepSpeed), or "
                    "use an FSDP accelerate YAML")
    return ok("one backend")


@rule(id="CMP002", name="unsloth-deepspeed-stages", severity="error", seed="U-02", auto_fix=True,
      reads=("plan.unsloth", "plan.backend", "plan.zero_stage", "plan.method", "plan.trainer"))
def unsloth_deepspeed_stages(ctx: Context) -> Result:
    """Unsloth runs under DeepSpeed ZeRO-2, and ZeRO-3 without 4-bit weights (and, for GRPO/RLOO, without a trained LM
    head).

    ## Why
    Unsloth 2026.10's loader detects the ZeRO stage (unsloth/models/loader_utils.py `deepspeed_zero_stage`, from the
    transformers/accelerate DeepSpeed config or ACCELERATE_DEEPSPEED_ZERO_STAGE). Under ZeRO-2 each rank gets its own
    GPU (`prepare_device_map`) and every patch stays on. Under ZeRO-3 it drops the automatic device_map
    (`deepspeed_zero3_device_map`) and marks MoE and fused-LoRA blocks as ZeRO-3 leaves; but it sets the 4-bit
    weights' quant storage only on its FSDP2 path (`set_fsdp2_quant_storage`), so QLoRA under ZeRO-3 keeps uint8
    storage ZeRO-3 cannot shard with the rest, and its fused cross-entropy raises NotImplementedError for a trainable
    lm_head under ZeRO-3 on the GRPO path (unsloth_zoo fused_losses `unsloth_zero3_gathered`). Its own FSDP2 path
    refuses a DeepSpeed launch.

    ## Fix
    Use ZeRO-2 with QLoRA (and with full GRPO/RLOO), or LoRA under ZeRO-3; or drop `--unsloth`.

    ## Example
    `--unsloth --method qlora --backend deepspeed --zero 3` fails; `--zero 2` passes.

    ## References
    - https://pypi.org/project/unsloth/2026.10.9/
    - https://github.com/unslothai/unsloth/blob/main/unsloth/models/loader_utils.py
    - https://github.com/unslothai/unsloth-zoo/blob/main/unsloth_zoo/fused_losses/cross_entropy_loss.py
    """
    p = ctx.plan
    if not p.unsloth:
        return na("no Unsloth")
    if p.backend != "deepspeed" or p.zero_stage < 3:
        return ok(f"backend {p.backend}" + (f" ZeRO-{p.zero_stage}" if p.backend == "deepspeed" else ""))
    if p.method == "qlora":
        return fail("Unsloth QLoRA under ZeRO-3: Unsloth sets the 4-bit quant storage only for FSDP2, so ZeRO-3 cannot "
                    "shard the 4-bit weights", "use --zero 2 with Unsloth QLoRA", {"zero_stage": 2})
    if p.trainer in ("grpo", "rloo") and p.method == "full":
        return fail("Unsloth full GRPO/RLOO under ZeRO-3: its fused loss refuses a trained lm_head there",
                    "use --zero 2, or LoRA", {"zero_stage": 2})
    return ok("ZeRO-3 with an adapter: Unsloth's ZeRO-3 set-up applies")


@rule(id="CMP003", name="unsloth-multi-gpu", severity="warning", seed="U-01",
      reads=("plan.unsloth", "plan.num_processes", "plan.backend", "files.launch_sh"))
def unsloth_multi_gpu(ctx: Context) -> Result:
    """Multi-GPU Unsloth: DDP works; FSDP2 only through Unsloth's own wrap (`UNSLOTH_FSDP2=1`).

    ## Why
    Unsloth's documentation describes multi-GPU as DDP through `accelerate launch` (a full model copy per GPU).
    Unsloth 2026.10's code adds an FSDP2 path selected by `UNSLOTH_FSDP2=1` under torchrun/accelerate (accelerate >=
    1.7; `UNSLOTH_FSDP2_BACKEND=accelerate` keeps accelerate's wrap) and refuses FSDP version 1. Without the
    variable, Unsloth's patched modules and accelerate's FSDP wrap are not known to work together.

    ## Fix
    Use `--backend ddp` with Unsloth, or export `UNSLOTH_FSDP2=1` in the launch script for FSDP2.

    ## Example
    `--unsloth --backend fsdp2 --gpus 4` warns without UNSLOTH_FSDP2=1 in launch.sh; `--backend ddp` passes.

    ## References
    - https://unsloth.ai/docs/basics/multi-gpu-training-with-unsloth.md
    - https://pypi.org/project/unsloth/2026.10.9/
    """
    if not ctx.plan.unsloth or ctx.plan.num_processes < 2:
        return na("no multi-GPU Unsloth")
    if ctx.plan.backend == "ddp":
        return ok("DDP")
    if ctx.plan.backend != "fsdp2":
        return na("other backends are CMP002")
    if ctx.files is not None and ctx.files.launch_env("UNSLOTH_FSDP2") == "1":
        return ok("UNSLOTH_FSDP2=1")
    return fail(f"Unsloth on {ctx.plan.num_processes} GPUs with FSDP2 needs Unsloth's FSDP2 path",
                "export UNSLOTH_FSDP2=1 in the launch script (accelerate >= 1.7), or use --backend ddp")


@rule(id="CMP004", name="unsloth-needs-own-environment", severity="error", seed="U-01",
      reads=("plan.unsloth", "versions.trl", "versions.transformers", "versions.datasets"))
def unsloth_needs_own_environment(ctx: Context) -> Result:
    """Unsloth 2026.10 cannot share an environment with trl 1.16, transformers 5.18+ or datasets 5.

    ## Why
    unsloth and unsloth_zoo 2026.10.9 require `trl>=0.18.2,<=1.15.0`, `transformers>=4.52.4,<=5.17.0` and
    `datasets>=3.4.1,<5`. TRL 1.16's stack (trl 1.16.0, transformers 5.24.0, datasets 5.2.0) is outside them: pip
    refuses, or a forced install breaks Unsloth's patches. An Unsloth bundle therefore pins its own environment
    (rules/data/pins.toml [unsloth]); this rule checks the versions the run will actually see (the probe's, or
    the bundle's requirements.txt).

    ## Fix
    Build a separate environment for Unsloth: `pip install unsloth "trl<=1.15.0" "transformers<=5.17.0"
    "datasets<5"`, or drop `--unsloth` to use the TRL 1.16 stack.

    ## Example
    `--unsloth` on a machine whose probe shows trl 1.16.0 fails; a catalogue target (the bundle pins trl 1.15.0,
    transformers 5.17.0, datasets<5) passes.

    ## References
    - https://pypi.org/project/unsloth/2026.10.9/
    - https://pypi.org/project/unsloth-zoo/2026.10.9/
    """
    if not ctx.plan.unsloth:
        return na("no Unsloth")
    bad = _unsloth_conflicts(ctx)
    if not bad:
        return ok("trl/transformers/datasets within Unsloth's ranges")
    return fail(f"Unsloth 2026.10 requires {', '.join(f'{p}{s}' for p, _v, s in bad)}; this environment has "
                f"{', '.join(f'{p} {v}' for p, v, _s in bad)}",
                "use a separate environment: pip install unsloth 'trl<=1.15.0' 'transformers<=5.17.0' 'datasets<5'")


def _unsloth_conflicts(ctx: Context) -> list[tuple[str, str, str]]:
    return vercmp.violations(ctx.version, unsloth_requires())


@rule(id="CMP005", name="liger-overlaps-unsloth", severity="warning", auto_fix=True,
      reads=("plan.liger", "plan.unsloth"))
def liger_overlaps_unsloth(ctx: Context) -> Result:
    """Liger Kernel and Unsloth patch the same layers: use one of them.

    ## Why
    Unsloth replaces RMSNorm, RoPE, the SwiGLU MLP and the cross-entropy with its own Triton kernels when imported;
    Liger's `apply_liger_kernel_to_*` monkey-patches the same modules. Whichever patches last wins, silently
    undoing the other's memory savings (and Unsloth's gradient-checkpointing assumptions).

    ## Fix
    Drop `--liger` when training with Unsloth.

    ## Example
    `--unsloth --liger` warns; `--unsloth --no-liger` passes.

    ## References
    - https://github.com/linkedin/Liger-Kernel/blob/v0.8.5/src/liger_kernel/transformers/monkey_patch.py
    - https://github.com/unslothai/unsloth/issues/2233
    """
    if not ctx.plan.unsloth:
        return na("no Unsloth")
    if not ctx.plan.liger:
        return ok("Unsloth without Liger")
    return fail("Liger and Unsloth both patch RMSNorm/RoPE/SwiGLU/cross-entropy", "drop --liger with --unsloth",
                {"liger": False})


@rule(id="CMP006", name="liger-kernel-deprecated", severity="warning", seed="K-04", auto_fix=False,
      reads=("files.trl_args.use_liger_kernel", "versions.trl"))
def liger_kernel_deprecated(ctx: Context) -> Result:
    """`use_liger_kernel=True` is deprecated in TRL 1.16 and only applies Liger's layer kernels.

    ## Why
    SFT, DPO, KTO, GRPO and RLOO warn that `use_liger_kernel` will be removed in v2.0.0, force
    `fused_linear_cross_entropy=False` (TRL's own chunked LM head replaces it) and point to
    `model_init_kwargs={"use_kernels": True}`, which downloads kernels from the Hub at run time. Bundles generated by
    trl-advisor apply Liger's kernels through Liger's own API instead (`apply_liger_kernel_to_<model_type>` before
    the model is built): the same RMSNorm/RoPE/SwiGLU kernels, no deprecation, no download.

    ## Fix
    Call `liger_kernel.transformers.apply_liger_kernel_to_<model_type>(rope=True, rms_norm=True, swiglu=True,
    cross_entropy=False, fused_linear_cross_entropy=False)` before `from_pretrained` and drop `use_liger_kernel`,
    or move to `model_init_kwargs={"use_kernels": True}` (needs the Hub, see CMP008).

    ## Example
    A TRL config with `use_liger_kernel: true` on trl 1.16 warns; the same run with Liger applied before loading passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    - https://huggingface.co/docs/trl/liger_kernel_integration
    - https://github.com/linkedin/Liger-Kernel#patching
    """
    if ctx.files is None:
        return na(NO_FILES)
    if not truthy(ctx.arg("use_liger_kernel")):
        return na("use_liger_kernel not set")
    trl_v = ctx.version("trl")
    if trl_v is not None and vercmp.compare(trl_v, "1.16") < 0:
        return ok(f"trl {trl_v}: use_liger_kernel not yet deprecated")
    return fail(f"use_liger_kernel is deprecated in trl {trl_v or '1.16'} (layer kernels only; fused "
                "linear cross-entropy forced off)", "apply Liger through liger_kernel.transformers."
                "apply_liger_kernel_to_<model_type>(...) before loading, and drop use_liger_kernel")


@rule(id="CMP007", name="liger-flce-rejected", severity="error",
      reads=("files.trl_args.use_liger_kernel", "files.trl_args.liger_kernel_config"))
def liger_flce_rejected(ctx: Context) -> Result:
    """`liger_kernel_config={"fused_linear_cross_entropy": True}` raises in TRL 1.16.

    ## Why
    Liger's fused linear cross-entropy replaces the model's forward; TRL 1.16 patches the forward with its own
    chunked fused LM head, so the trainers raise ValueError when FLCE is requested explicitly.

    ## Fix
    Remove `fused_linear_cross_entropy` from `liger_kernel_config` (TRL's chunked head gives the memory saving).

    ## Example
    `liger_kernel_config={"fused_linear_cross_entropy": True}` fails; `{"rms_norm": True}` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    """
    if ctx.files is None:
        return na("no configuration files")
    if not truthy(ctx.arg("use_liger_kernel")):
        return na("use_liger_kernel off")
    cfg = ctx.arg("liger_kernel_config") or {}
    if isinstance(cfg, dict) and truthy(cfg.get("fused_linear_cross_entropy")):
        return fail("liger_kernel_config requests fused_linear_cross_entropy: TRL 1.16 raises",
                    "remove fused_linear_cross_entropy from liger_kernel_config")
    return ok("no fused linear cross-entropy requested")


@rule(id="CMP008", name="hf-kernels-need-hub-access", severity="warning", seed="K-07",
      reads=("plan.attn", "files.model_init_kwargs.use_kernels", "versions.kernels", "files.launch_sh"))
def hf_kernels_need_hub(ctx: Context) -> Result:
    """Hub kernels (`use_kernels=True`, `kernels-community/...` attention) need the `kernels` package and the Hub.

    ## Why
    transformers fetches kernels from the Hugging Face Hub (kernels-community/liger-kernels, flash-attn2 ...) when
    the model loads, through the `kernels` package (`>=0.18.2,<0.19` for transformers 5.24). Offline clusters
    (`HF_HUB_OFFLINE=1`, no egress) fail at load time.

    ## Fix
    `pip install "transformers[kernels]"` and make sure the Hub is reachable (or pre-download the kernel repos into
    the cache); otherwise use a built-in attention (`flash_attention_2`, `sdpa`) and no use_kernels.

    ## Example
    A user's files with `kernels-community/flash-attn2` attention and no `kernels` among the installed packages warn;
    a probe that found `kernels` installed passes, and so does a plan for a catalogue target (nothing installed yet:
    its bundle's requirements.txt pins `kernels`).

    ## References
    - https://huggingface.co/docs/trl/kernels_hub
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    """
    if not uses_hf_kernels(ctx):
        return na("no Hub kernels")
    offline = ctx.files is not None and ctx.files.launch_env("HF_HUB_OFFLINE") == "1"
    if offline:
        return fail("Hub kernels requested but the launch script sets HF_HUB_OFFLINE=1",
                    "pre-download the kernel repos into the HF cache, or use a built-in attention")
    if ctx.version("kernels") is None:
        if ctx.files is None and ctx.target.origin not in ("probe", "file"):
            # a catalogue target has nothing installed yet: the plan's own requirements.txt brings `kernels`
            from rules.environments import bundle_pins

            pinned = bundle_pins(ctx.plan).get("kernels")
            if pinned:
                return ok(f"the bundle's requirements install kernels{pinned}; it fetches the kernel from the Hub "
                          "when the model loads")
        return fail("Hub kernels need the `kernels` package (not found) and Hub access when the model loads",
                    "pip install 'transformers[kernels]' and allow Hub access at runtime, or use "
                    "--attn flash_attention_2 / sdpa")
    return ok(f"kernels {ctx.version('kernels')} installed")


@rule(id="CMP009", name="liger-and-hf-kernels-overlap", severity="warning", auto_fix=True,
      reads=("plan.liger", "files.model_init_kwargs.use_kernels"))
def liger_and_hf_kernels_overlap(ctx: Context) -> Result:
    """`use_liger_kernel` and `use_kernels` both replace RMSNorm/SwiGLU: use one.

    ## Why
    `use_kernels=True` maps transformers' layers onto kernels-community/liger-kernels (LigerRMSNorm,
    LigerSwiGLUMLP ...); `use_liger_kernel` then monkey-patches the same modules again. TRL 1.16 presents
    use_kernels as the replacement of use_liger_kernel, not a complement.

    ## Fix
    Keep `use_kernels` and drop `use_liger_kernel` (or the reverse on an offline cluster).

    ## Example
    `use_liger_kernel=True` with `model_init_kwargs={"use_kernels": True}` warns; either alone passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    - https://huggingface.co/docs/trl/kernels_hub
    """
    if not uses_use_kernels(ctx):
        return na("no use_kernels")
    if not ctx.plan.liger:
        return ok("use_kernels without Liger")
    return fail("use_liger_kernel and use_kernels both patch RMSNorm/SwiGLU", "drop use_liger_kernel (use_kernels "
                "replaces it)", {"liger": False})


@rule(id="CMP010", name="liger-unsupported-model-type", severity="warning", seed="K-03", auto_fix=True,
      reads=("plan.liger", "model.model_type"))
def liger_unsupported_model_type(ctx: Context) -> Result:
    """`use_liger_kernel` does nothing for a model type Liger 0.8.5 does not patch.

    ## Why
    Liger applies kernels through `MODEL_TYPE_TO_APPLY_LIGER_FN` (53 model types in 0.8.5); for any other
    `model_type` it logs at info level and applies nothing, so the planned memory savings do not happen.

    ## Fix
    Drop `--liger` for this model, or check the model type against Liger's supported list.

    ## Example
    `--liger` on a llama or qwen2 model passes; on a model_type such as starcoder2 it warns.

    ## References
    - https://github.com/linkedin/Liger-Kernel/blob/v0.8.5/src/liger_kernel/transformers/monkey_patch.py
    - https://github.com/hiyouga/LlamaFactory/issues/5528
    """
    if not ctx.plan.liger:
        return na("no Liger")
    if ctx.model.model_type in liger_model_types():
        return ok(f"Liger patches {ctx.model.model_type}")
    return fail(f"Liger 0.8.5 has no kernels for model_type {ctx.model.model_type}: use_liger_kernel is a no-op",
                "drop --liger for this model", {"liger": False})


@rule(id="CMP011", name="unsloth-import-order", severity="warning", seed="U-03",
      reads=("plan.unsloth", "files.imports"))
def unsloth_import_order(ctx: Context) -> Result:
    """`import unsloth` must come before transformers, trl and peft.

    ## Why
    Unsloth patches transformers, TRL and PEFT when it is imported; imported after them, the already-bound classes
    keep their original code: Unsloth warns that its patches are missing and the run is slower and uses more memory
    (multi-GPU runs have failed outright).

    ## Fix
    Make `import unsloth` (or `from unsloth import FastLanguageModel`) the first import of train.py.

    ## Example
    `from trl import SFTTrainer` then `from unsloth import FastLanguageModel` warns; the reverse order passes.

    ## References
    - https://github.com/unslothai/unsloth/issues/2233
    - https://github.com/unslothai/unsloth/pull/602
    """
    if ctx.files is None or ctx.files.train_py is None:
        return na("no train.py")
    modules = [m.split(".")[0] for m, _n in ctx.files.imports]
    if "unsloth" not in modules:
        return na("train.py does not import unsloth")
    first_unsloth = modules.index("unsloth")
    before = sorted({m for m in modules[:first_unsloth] if m in ("transformers", "trl", "peft")})
    if not before:
        return ok("unsloth imported first")
    return fail(f"train.py imports {', '.join(before)} before unsloth: Unsloth's patches are not applied to them",
                "move `import unsloth` to the top of train.py")


RULES = (deepspeed_fsdp_exclusive, unsloth_deepspeed_stages, unsloth_multi_gpu, unsloth_needs_own_environment,
         liger_overlaps_unsloth, liger_kernel_deprecated, liger_flce_rejected, hf_kernels_need_hub,
         liger_and_hf_kernels_overlap, liger_unsupported_model_type, unsloth_import_order)
