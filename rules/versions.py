"""Version rules (VER*): the installed (probed) or pinned versions against what each feature needs."""

from __future__ import annotations

from rules import vercmp
from rules.common import uses_peft, uses_use_kernels
from rules.compat import unsloth_requires, vllm_requires, vllm_window
from rules.datafiles import requires
from rules.model import Context, Result, fail, na, ok, unknown
from rules.registry import rule


def _origin(ctx: Context, package: str) -> str:
    where = ctx.version_origin.get(package, "given")
    return {"probe": "installed", "pin": "pinned by the bundle", "bundle": "pinned in requirements.txt"}.get(
        where, "given")


def _need(ctx: Context, package: str, spec: str, feature: str) -> Result:
    """Pass when the known version of `package` satisfies `spec`; when unknown, pass if the bundle declares a floor
    that implies it (rules/data/pins.toml [requires]), else unknown."""
    have = ctx.version(package)
    if have is None:
        floor = requires().get(package)
        if floor and _floor_implies(floor, spec):
            return ok(f"{package} not probed; the bundle requires {package}{floor}")
        return unknown(f"{package} version not known; {feature} needs {package}{spec}",
                       f"install {package}{spec}")
    try:
        inside = vercmp.satisfies(have, spec)
    except vercmp.VersionError:
        return unknown(f"cannot read {package} version {have!r}")
    if inside:
        return ok(f"{package} {have} ({_origin(ctx, package)})")
    return fail(f"{feature} needs {package}{spec}; {package} {have} is {_origin(ctx, package)}",
                f"pip install '{package}{spec}'")


def _floor_implies(floor: str, spec: str) -> bool:
    """`>=2.6` implies `>=2.6` (and any `>=X` with X <= 2.6): enough for the floors this module asks for."""
    f = [c.strip() for c in floor.split(",") if c.strip().startswith(">=")]
    s = [c.strip() for c in spec.split(",")]
    if not f or any(not c.startswith(">=") for c in s):
        return False
    return all(vercmp.compare(f[0][2:], c[2:]) >= 0 for c in s)


@rule(id="VER001", name="vllm-version-window", severity="error", seed="V-08",
      reads=("plan.vllm_mode", "versions.vllm", "versions.trl", "versions.transformers", "versions.torch"))
def vllm_version_window(ctx: Context) -> Result:
    """vLLM must be inside the TRL release's window (TRL 1.16: 0.22.0 to 0.31.0), with the transformers and torch that vLLM release requires.

    ## Why
    TRL reaches into vLLM internals (colocate weight loading through
    `llm_engine.model_executor.driver_worker.model_runner`, the server's weight-transfer API); `trl[vllm]` pins
    `vllm>=0.22.0,<=0.31.0` and `is_vllm_available()` warns "TRL currently supports vLLM versions from 0.22.0 to
    0.31.0" outside it. Releases outside the window have broken server mode and weight sync.

    vLLM shares its environment with training in both modes (colocate builds the engine inside each training
    process; in server mode the trainer's `VLLMClient` imports vllm for the NCCL weight transfer), so its own
    requirements bind the training stack: vllm 0.31.0 requires `transformers>=5.10.4,<5.18.0` and `torch==2.13.0`.
    A requirements.txt pinning `transformers==5.24.0` beside `vllm==0.31.0` stops pip with ResolutionImpossible.

    ## Fix
    `pip install "vllm>=0.22.0,<=0.31.0"` (the bundle pins vllm 0.31.0 with trl 1.16.0, transformers 5.17.0 and
    torch 2.13.0); keep transformers and torch inside the vLLM release's requirements.

    ## Example
    trl 1.16.0 with vllm 0.33.0 fails; with vllm 0.31.0 it passes. vllm 0.31.0 with transformers 5.24.0 fails; with
    transformers 5.17.0 it passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/import_utils.py
    - https://huggingface.co/docs/trl/vllm_integration
    - https://pypi.org/project/vllm/0.31.0/
    """
    if ctx.plan.vllm_mode == "none":
        return na("no vLLM")
    trl_v = ctx.version("trl")
    window = vllm_window(trl_v)
    if window is None:
        return unknown(f"no vLLM window recorded for trl {trl_v}", "check the TRL release notes for its vLLM range")
    first = _need(ctx, "vllm", window, f"trl {trl_v}")
    if first.status != "pass":
        return first
    vllm_v = ctx.version("vllm")
    needs = vllm_requires(vllm_v)
    if needs is None:
        return first
    bad = vercmp.violations(ctx.version, needs)
    if bad:
        shown = ", ".join(f"{package}{spec}; {package} {have} is {_origin(ctx, package)}" for package, have, spec in bad)
        fix = " ".join(f"'{package}{spec}'" for package, _, spec in bad)
        return fail(f"vllm {vllm_v} requires {shown}: pip cannot install them together", f"pip install {fix}")
    known = ", ".join(f"{package} {ctx.version(package)}" for package in needs if ctx.version(package) is not None)
    if not known:
        return first
    return ok(f"{first.message}; {known} inside vllm {vllm_v}'s requirements")


@rule(id="VER002", name="unsloth-installed-pins", severity="error", seed="U-01",
      reads=("plan.unsloth", "versions.unsloth", "versions.trl", "versions.transformers", "versions.datasets"))
def unsloth_installed_pins(ctx: Context) -> Result:
    """An installed Unsloth 2026.10 is broken by trl > 1.15, transformers > 5.17 or datasets >= 5 beside it.

    ## Why
    unsloth/unsloth_zoo 2026.10.9 declare `trl>=0.18.2,<=1.15.0`, `transformers>=4.52.4,<=5.17.0`,
    `datasets>=3.4.1,<5.0.0` and `torch<2.15`. An environment where pip was forced past these (or where trl was
    upgraded later) fails at `import unsloth` or trains with missing patches.

    ## Fix
    Keep Unsloth in its own environment with trl<=1.15.0, transformers<=5.17.0, datasets<5; or uninstall it from
    the TRL 1.16 environment.

    ## Example
    An `--unsloth` plan on a probe showing unsloth 2026.10.9 with trl 1.16.0 fails; unsloth with trl 1.15.0,
    transformers 5.17.0 and datasets 4.3.0 passes. A plan without `--unsloth` does not import it: not applicable.

    ## References
    - https://pypi.org/project/unsloth/2026.10.9/
    - https://pypi.org/project/unsloth-zoo/2026.10.9/
    """
    have = ctx.version("unsloth")
    if have is None:
        return na("Unsloth not installed")
    if not ctx.plan.unsloth:
        # nothing imports unsloth unless the plan does (train.py imports it only for --unsloth): an Unsloth left in
        # this environment does not touch a TRL 1.16 run
        return na(f"unsloth {have} is installed, but this plan does not use it")
    bad = [f"{package} {v} (needs {spec})" for package, v, spec in vercmp.violations(ctx.version, unsloth_requires())]
    if not bad:
        return ok(f"unsloth {have} with compatible dependencies")
    return fail(f"unsloth {have} is installed with {', '.join(bad)}", "give Unsloth its own environment (trl<=1.15.0, "
                "transformers<=5.17.0, datasets<5), or uninstall it here")


@rule(id="VER003", name="ulysses-needs-accelerate-1-12-deepspeed-0-18-2", severity="error",
      reads=("plan.sp_size", "versions.accelerate", "versions.deepspeed"))
def ulysses_versions(ctx: Context) -> Result:
    """Ulysses/ALST SP needs accelerate >= 1.12 and deepspeed >= 0.18.2.

    ## Why
    accelerate added `parallelism_config_sp_*` in 1.12 and checks "Deepspeed ALST/Ulysses requires
    deepspeed>=0.18.2" before importing `UlyssesSPAttentionHF`; TRL only switches its collator to position ids for
    SP from accelerate 1.12.

    ## Fix
    `pip install "accelerate>=1.12" "deepspeed>=0.18.2"` (the bundle pins 1.15.0 and 0.19.8).

    ## Example
    sp 2 with accelerate 1.11.0 fails; with accelerate 1.15.0 and deepspeed 0.19.8 it passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/accelerator.py
    - https://huggingface.co/docs/accelerate/concept_guides/sequence_parallelism
    """
    if ctx.plan.sp_size <= 1:
        return na("no Ulysses SP")
    first = _need(ctx, "accelerate", ">=1.12", "Ulysses SP")
    if first.status != "pass":
        return first
    return _need(ctx, "deepspeed", ">=0.18.2", "Ulysses SP")


@rule(id="VER004", name="context-parallel-needs-accelerate-1-11", severity="error",
      reads=("plan.cp_size", "versions.accelerate"))
def context_parallel_versions(ctx: Context) -> Result:
    """Ring-attention context parallelism needs accelerate >= 1.11.

    ## Why
    `ParallelismConfig` with `cp_size` and the torch CP backend arrived in accelerate 1.10-1.11; TRL's CP guide
    requires accelerate 1.11 or newer.

    ## Fix
    `pip install "accelerate>=1.11"` (the bundle pins 1.15.0).

    ## Example
    cp 2 with accelerate 1.10.1 fails; with 1.15.0 it passes.

    ## References
    - https://huggingface.co/docs/trl/distributing_training
    - https://huggingface.co/docs/accelerate/concept_guides/context_parallelism
    """
    if ctx.plan.cp_size <= 1:
        return na("no context parallelism")
    return _need(ctx, "accelerate", ">=1.11", "context parallelism")


@rule(id="VER005", name="fsdp2-needs-torch-2-6", severity="error",
      reads=("plan.backend", "versions.torch"))
def fsdp2_needs_torch(ctx: Context) -> Result:
    """FSDP2 (`fully_shard`) needs torch >= 2.6 under accelerate 1.15.

    ## Why
    accelerate's FSDP2 path imports `torch.distributed.fsdp.fully_shard` and its mixed-precision/offload policies,
    public from torch 2.6; older torch raises on `fsdp_version: 2`.

    ## Fix
    `pip install "torch>=2.6"` (or use FSDP1/DeepSpeed on an older torch).

    ## Example
    FSDP2 on torch 2.5.1 fails; on torch 2.13.0 it passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/utils/fsdp_utils.py
    - https://huggingface.co/docs/accelerate/concept_guides/fsdp1_vs_fsdp2
    """
    if ctx.plan.backend != "fsdp2":
        return na("not FSDP2")
    return _need(ctx, "torch", ">=2.6", "FSDP2")


@rule(id="VER006", name="use-kernels-needs-transformers-5-4", severity="error",
      reads=("files.model_init_kwargs.use_kernels", "versions.transformers"))
def use_kernels_transformers(ctx: Context) -> Result:
    """`use_kernels=True` is rejected on transformers 5.2.x and 5.3.x.

    ## Why
    transformers 5.2/5.3 pin a `kernels<0.11` that fails to load the Hub kernels; TRL 1.16's
    `create_model_from_path` raises "`use_kernels=True` requires transformers>=5.4.0" for them (fixed in 5.4.0).

    ## Fix
    `pip install "transformers>=5.4"` (the bundle pins 5.24.0), or drop use_kernels.

    ## Example
    use_kernels with transformers 5.3.0 fails; with 5.24.0 it passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/utils.py
    """
    if not uses_use_kernels(ctx):
        return na("no use_kernels")
    have = ctx.version("transformers")
    if have is None:
        return unknown("transformers version not known", "use transformers>=5.4")
    if vercmp.satisfies(have, ">=5.2.0,<5.4.0"):
        return fail(f"use_kernels=True with transformers {have}: TRL raises (5.2.x/5.3.x cannot load Hub kernels)",
                    "pip install 'transformers>=5.4'")
    return ok(f"transformers {have}")


@rule(id="VER007", name="liger-kernel-minimum", severity="error",
      reads=("plan.liger", "versions.liger-kernel"))
def liger_kernel_minimum(ctx: Context) -> Result:
    """TRL 1.16 needs liger-kernel >= 0.8.2 for `use_liger_kernel`.

    ## Why
    TRL's `LIGER_KERNEL_MIN_VERSION` is 0.8.2 (the `trl[liger]` extra); older Liger lacks the `liger_kernel_config`
    options the trainers pass.

    ## Fix
    `pip install "liger-kernel>=0.8.2"` (the bundle pins 0.8.5), or drop `--liger`.

    ## Example
    `--liger` with liger-kernel 0.6.4 fails; with 0.8.5 it passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/import_utils.py
    """
    if not ctx.plan.liger:
        return na("no Liger")
    return _need(ctx, "liger-kernel", ">=0.8.2", "use_liger_kernel with TRL 1.16")


@rule(id="VER008", name="trl-deepspeed-minimum", severity="error",
      reads=("plan.backend", "versions.deepspeed", "versions.transformers"))
def trl_deepspeed_minimum(ctx: Context) -> Result:
    """TRL 1.16's DeepSpeed support needs deepspeed >= 0.18.6 and a transformers other than 5.1.0.

    ## Why
    The `trl[deepspeed]` extra requires `deepspeed>=0.18.6` and `transformers!=5.1.0` (a release whose DeepSpeed
    integration broke ZeRO-3 loading).

    ## Fix
    `pip install "deepspeed>=0.18.6"` (the bundle pins 0.19.8) and avoid transformers 5.1.0.

    ## Example
    ZeRO-2 with deepspeed 0.17.5 fails; with 0.19.8 it passes.

    ## References
    - https://pypi.org/project/trl/1.16.0/
    - https://github.com/huggingface/trl/blob/v1.16.0/pyproject.toml
    """
    if ctx.plan.backend != "deepspeed":
        return na("not DeepSpeed")
    first = _need(ctx, "deepspeed", ">=0.18.6", "TRL's DeepSpeed integration")
    if first.status != "pass":
        return first
    tf = ctx.version("transformers")
    if tf and vercmp.compare(tf, "5.1.0") == 0:
        return fail("transformers 5.1.0 is excluded by trl[deepspeed]", "pip install 'transformers!=5.1.0'")
    return first


@rule(id="VER009", name="peft-minimum", severity="error",
      reads=("plan.method", "versions.peft"))
def peft_minimum(ctx: Context) -> Result:
    """LoRA/QLoRA with TRL 1.16 needs peft >= 0.13.0.

    ## Why
    The `trl[peft]` extra requires `peft>=0.13.0`; TRL's ZeRO-3 adapter handling (`autocast_adapter_dtype=False`)
    and QLoRA + ZeRO-3 fixes rely on it.

    ## Fix
    `pip install "peft>=0.13.0"` (the bundle pins 0.21.2).

    ## Example
    `--method lora` with peft 0.12.0 fails; with 0.21.2 it passes.

    ## References
    - https://pypi.org/project/trl/1.16.0/
    - https://huggingface.co/docs/peft/accelerate/deepspeed
    """
    if not uses_peft(ctx):
        return na("full fine-tuning")
    return _need(ctx, "peft", ">=0.13.0", f"--method {ctx.plan.method}")


@rule(id="VER010", name="bitsandbytes-minimum", severity="error",
      reads=("plan.method", "versions.bitsandbytes"))
def bitsandbytes_minimum(ctx: Context) -> Result:
    """QLoRA with TRL 1.16 needs bitsandbytes >= 0.45.1.

    ## Why
    The `trl[quantization]` extra requires `bitsandbytes>=0.45.1`; QLoRA under ZeRO-3 needs at least 0.43.3 for a
    float `bnb_4bit_quant_storage`.

    ## Fix
    `pip install "bitsandbytes>=0.45.1"`.

    ## Example
    `--method qlora` with bitsandbytes 0.41.3 fails; with 0.48.1 it passes.

    ## References
    - https://pypi.org/project/trl/1.16.0/
    - https://huggingface.co/docs/peft/accelerate/deepspeed
    """
    if ctx.plan.method != "qlora":
        return na("not QLoRA")
    return _need(ctx, "bitsandbytes", ">=0.45.1", "QLoRA")


RULES = (vllm_version_window, unsloth_installed_pins, ulysses_versions, context_parallel_versions, fsdp2_needs_torch,
         use_kernels_transformers, liger_kernel_minimum, trl_deepspeed_minimum, peft_minimum, bitsandbytes_minimum)
