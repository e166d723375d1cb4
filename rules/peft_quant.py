"""PEFT and quantization rules (PEFT*): LoRA, QLoRA (bitsandbytes 4-bit) and 8-bit loading with the backends."""

from __future__ import annotations

from advisor.core.files import Unresolved
from rules import vercmp
from rules.common import NO_FILES, gib, uses_peft, uses_zero3
from rules.memory import estimate_without_offload, fits_planner_limit, planner_limit
from rules.model import Context, Result, fail, na, ok, unknown
from rules.registry import rule

FLOAT_DTYPES = ("bfloat16", "float16", "float32")


def _storage_matches(ctx: Context) -> tuple[bool, str, str]:
    """(matches, storage, model dtype) for a 4-bit model: storage must be a float dtype equal to the model's."""
    storage = ctx.files.quant_storage() or "uint8"
    dtype = ctx.files.model_dtype() or "float32"
    return storage == dtype and storage in FLOAT_DTYPES, storage, dtype


@rule(id="PEFT001", name="qlora-zero3-needs-float-quant-storage", severity="error", seed="Q-01",
      reads=("plan.method", "plan.zero_stage", "files.trl_args.bnb_4bit_quant_storage", "files.model_init_kwargs"))
def qlora_zero3_quant_storage(ctx: Context) -> Result:
    """QLoRA under ZeRO-3 needs `bnb_4bit_quant_storage` equal to the model's dtype (e.g. bfloat16).

    ## Why
    ZeRO-3 flattens and partitions every parameter of a group into one buffer of one dtype. bitsandbytes stores
    4-bit weights in uint8 by default, which cannot share the bf16 buffer ("all params must have the same dtype").
    PEFT's QLoRA + ZeRO-3 recipe sets `bnb_4bit_quant_storage` to the model dtype and `zero3_init_flag: true`.

    ## Fix
    `BitsAndBytesConfig(..., bnb_4bit_quant_storage=torch.bfloat16)` with the model loaded in bfloat16 (TRL CLI:
    `--bnb_4bit_quant_storage bfloat16 --dtype bfloat16`).

    ## Example
    load_in_4bit with ZeRO-3 and no quant storage fails; quant storage bfloat16 with dtype bfloat16 passes.

    ## References
    - https://huggingface.co/docs/peft/accelerate/deepspeed
    - https://github.com/huggingface/peft/pull/1550
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.method != "qlora" or not uses_zero3(ctx):
        return na("not QLoRA under ZeRO-3")
    good, storage, dtype = _storage_matches(ctx)
    if good:
        return ok(f"quant storage {storage} = model dtype")
    return fail(f"QLoRA under ZeRO-3 with bnb_4bit_quant_storage {storage} and model dtype {dtype}: ZeRO-3 needs "
                "one float dtype", "set bnb_4bit_quant_storage=bfloat16 and load the model with dtype=bfloat16")


@rule(id="PEFT002", name="qlora-fsdp2-quant-storage", severity="warning", seed="Q-03",
      reads=("plan.method", "plan.backend", "files.trl_args.bnb_4bit_quant_storage", "files.model_init_kwargs",
             "versions.torch"))
def qlora_fsdp2_quant_storage(ctx: Context) -> Result:
    """QLoRA under FSDP2 needs a float `bnb_4bit_quant_storage` for the 4-bit weights to be sharded.

    ## Why
    `fully_shard` turns parameters into DTensors and loses the uint8 Params4bit `quant_state`. accelerate 1.15
    therefore leaves non-float frozen Params4bit out of sharding on torch >= 2.7 (every GPU then holds the whole
    4-bit model, and warns), while older torch trains on corrupted weights (loss 0.0, NaN grad norm).

    ## Fix
    Set `bnb_4bit_quant_storage` to the model's dtype (bfloat16) and load the model in that dtype.

    ## Example
    QLoRA + FSDP2 with default (uint8) storage warns; bfloat16 storage with a bfloat16 model passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/utils/fsdp_utils.py
    - https://github.com/huggingface/accelerate/issues/3983
    - https://huggingface.co/docs/bitsandbytes/main/en/fsdp_qlora
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.method != "qlora" or ctx.plan.backend != "fsdp2":
        return na("not QLoRA under FSDP2")
    good, storage, dtype = _storage_matches(ctx)
    if good:
        return ok(f"quant storage {storage} = model dtype")
    torch_v = ctx.version("torch")
    old = torch_v is not None and vercmp.compare(torch_v, "2.7") < 0
    effect = ("torch < 2.7: the 4-bit weights are corrupted by sharding (loss 0.0 / NaN)" if old else
              "the 4-bit weights are left unsharded on every GPU")
    return fail(f"QLoRA under FSDP2 with bnb_4bit_quant_storage {storage} (model dtype {dtype}): {effect}",
                "set bnb_4bit_quant_storage=bfloat16 and load the model with dtype=bfloat16")


@rule(id="PEFT003", name="peft-with-cpu-offload", severity="warning", seed="Q-09", auto_fix=True,
      reads=("plan.method", "plan.offload", "memory.per_gpu_reserved_bytes", "memory.capacity_bytes"))
def peft_with_cpu_offload(ctx: Context) -> Result:
    """LoRA/QLoRA with optimizer offload where the same plan fits on the GPUs without it: the offload buys nothing.

    ## Why
    Optimizer offload exists to free GPU memory: with PEFT it moves only the adapter's gradients and Adam states,
    and adds host transfers and DeepSpeed's CPU Adam step to every step. Where the same plan (backend and ZeRO stage,
    micro-batch, checkpointing, GPUs) fits without it, within the limit that leaves the planner its error margin
    (rule MEM002), that memory is not needed. The rule re-estimates that plan rather than assume the adapter's states
    are small: they are for a small dense model (129 MiB for a Llama-3.2-1B LoRA r16 on one GPU), not for a large one
    or a mixture of experts, whose adapters cover every expert (1.39 GiB per GPU for a Qwen3-30B-A3B QLoRA on
    8 x T4), where the offload can be what makes a plan fit. PEFT's DeepSpeed guide also notes that QLoRA + ZeRO-3
    with CPU offload can use more GPU memory than without. The planner never chooses an offload this warns about
    (advisor.search.ranking.offload_buys_memory, with a test no stricter than this one's). Parameter offload
    (`--offload all`) moves the frozen base weights, the bulk of an adapter run's memory, and is not judged here.

    ## Fix
    `--offload none`: the finding gives what the plan reserves per GPU without it.

    ## Example
    Qwen2.5-0.5B LoRA on 2 x H100 with ZeRO-2 + optimizer offload warns (about 2 GiB per GPU without it);
    Qwen3-30B-A3B QLoRA on 8 x T4 with ZeRO-3 + optimizer offload, checkpointing and micro-batch 8 passes (15.3 GiB
    per GPU without it, over the limit).

    ## References
    - https://huggingface.co/docs/peft/accelerate/deepspeed
    - https://www.deepspeed.ai/tutorials/zero-offload/
    """
    if not uses_peft(ctx):
        return na("full fine-tuning")
    if ctx.plan.offload == "none":
        return ok("no offload")
    if ctx.plan.offload == "all":
        # parameter offload (ZeRO-3 offload_param, FSDP2 CPUOffloadPolicy) moves the frozen base weights to the host
        # too: that is what it saves, not the adapter's states
        return na("parameter offload moves the frozen base weights, not only the adapter's optimizer states")
    if ctx.memory is None:
        return na("no memory estimate: whether the plan fits without the offload is not known")
    mem = estimate_without_offload(ctx)
    if mem is None:
        return unknown("the plan without offload could not be estimated")
    limit = planner_limit(mem)
    if not fits_planner_limit(mem):
        return ok(f"without the offload the plan reserves {gib(mem.per_gpu_reserved_bytes)} per GPU, over the "
                  f"{gib(limit)} limit: the offload makes it fit")
    states = mem.optimizer
    size = f"{states / 2**20:.0f} MiB" if states < 1 << 30 else gib(states)
    return fail(f"{ctx.plan.method} with --offload {ctx.plan.offload}: the same plan fits on the GPUs without it "
                f"({gib(mem.per_gpu_reserved_bytes)} reserved per GPU, within the {gib(limit)} limit; {size} of it the "
                "adapter's optimizer states), so the offload frees memory nothing needs and adds host transfers and a "
                "CPU optimizer step to every step", "use --offload none", {"offload": "none"},
                reserved_without_offload=int(mem.per_gpu_reserved_bytes))


@rule(id="PEFT004", name="lora-on-lm-head", severity="error",
      reads=("files.trl_args.lora_target_modules", "files.configs.LoraConfig.target_modules"))
def lora_on_lm_head(ctx: Context) -> Result:
    """TRL 1.16 rejects a PEFT adapter on `lm_head`.

    ## Why
    TRL computes log-probabilities from `lm_head.weight` directly (its chunked fused LM head), so an adapter on the
    LM head would never train: SFT, DPO, GRPO, RLOO and KTO raise "Applying a PEFT adapter to `lm_head` is not
    supported". `all-linear` already leaves the output layer out.

    ## Fix
    Remove `lm_head` from `target_modules` (use `all-linear`); put it in `modules_to_save` if it must train.

    ## Example
    `LoraConfig(target_modules=["q_proj", "lm_head"])` fails; `target_modules="all-linear"` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_trainer.py
    """
    if ctx.files is None:
        return na(NO_FILES)
    targets = ctx.files.lora_target_modules()
    if not targets:
        return na("no LoRA target modules in the files")
    if any(t == "lm_head" or t.endswith(".lm_head") for t in targets):
        return fail(f"LoRA target_modules {targets} include lm_head: TRL raises",
                    "remove lm_head (use target_modules='all-linear'; modules_to_save=['lm_head'] to train it fully)")
    return ok(f"targets {targets}")


@rule(id="PEFT005", name="lora-merge-under-zero3", severity="error", seed="Q-08",
      reads=("plan.backend", "plan.zero_stage", "files.calls"))
def lora_merge_under_zero3(ctx: Context) -> Result:
    """Merging a LoRA adapter (`merge_and_unload`) while the model is ZeRO-3 partitioned fails.

    ## Why
    Under ZeRO-3 each rank holds a slice of every weight; `merge_and_unload`/`merge_adapter` add the adapter to
    the local (empty) placeholders. PEFT: "Merging when using PEFT and DeepSpeed is currently unsupported and will
    raise error".

    ## Fix
    Save the adapter, then merge offline in a separate script (load the base model on CPU/one GPU, apply the
    adapter, `merge_and_unload()`), or merge inside `deepspeed.zero.GatheredParameters`.

    ## Example
    train.py calling `model.merge_and_unload()` under ZeRO-3 fails; saving the adapter only passes.

    ## References
    - https://huggingface.co/docs/peft/accelerate/deepspeed
    """
    if ctx.files is None or ctx.files.train_py is None:
        return na("no train.py")
    if not uses_zero3(ctx):
        return na("not ZeRO-3")
    merges = sorted({"merge_and_unload", "merge_adapter"} & ctx.files.call_names())
    if not merges:
        return ok("no adapter merge in train.py")
    if any(c.endswith("GatheredParameters") for c in ctx.files.calls):
        return ok("merge inside GatheredParameters")
    return fail(f"train.py calls {', '.join(merges)} under ZeRO-3", "save the adapter and merge offline after "
                "training (or merge inside deepspeed.zero.GatheredParameters)")


@rule(id="PEFT006", name="device-map-with-data-parallel", severity="error", seed="Q-05",
      reads=("plan.backend", "plan.num_processes", "files.model_init_kwargs"))
def device_map_with_data_parallel(ctx: Context) -> Result:
    """With several data-parallel processes, a `device_map` such as "auto" spreads each replica over every GPU.

    ## Why
    `device_map="auto"` is naive model parallelism inside one process: under DDP each rank would place layers on
    all visible GPUs, which collides with the other ranks ("can't train a model loaded in 8-bit on a different
    device", or a world size that collapses to 1). TRL passes `device_map=None` for multi-GPU runs by itself;
    QLoRA scripts that pass their own device_map break it.

    ## Fix
    Drop `device_map`, or pass `device_map={"": local_rank}` (`PartialState().local_process_index`; TRL 1.16 no
    longer exports `get_kbit_device_map`).

    ## Example
    `model_init_kwargs={"device_map": "auto"}` on 4 DDP processes fails; without device_map it passes.

    ## References
    - https://github.com/huggingface/accelerate/issues/2713
    - https://github.com/huggingface/trl/issues/2834
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.num_processes < 2 or ctx.plan.backend not in ("ddp", "fsdp2"):
        return na("no multi-process DDP/FSDP")
    dm = ctx.files.model_init_kwargs.get("device_map")
    if isinstance(dm, Unresolved):
        return unknown(f"device_map is computed at run time ({dm}); it must place each process on its own GPU")
    if dm is None or isinstance(dm, dict) or isinstance(dm, int):
        return ok(f"device_map {dm!r}")
    if str(dm) in ("auto", "balanced", "balanced_low_0", "sequential"):
        return fail(f"device_map={dm!r} with {ctx.plan.num_processes} {ctx.plan.backend} processes spreads each "
                    "replica over all GPUs", "remove device_map, or use device_map={'': "
                    "PartialState().local_process_index}")
    return ok(f"device_map {dm!r}")


@rule(id="PEFT007", name="vllm-rejects-8bit-model", severity="error",
      reads=("plan.vllm_mode", "files.trl_args.load_in_8bit"))
def vllm_rejects_8bit(ctx: Context) -> Result:
    """vLLM colocate generation refuses a model loaded in 8-bit (bitsandbytes LLM.int8).

    ## Why
    TRL's colocate engine loads the policy in vLLM with `quantization="bitsandbytes"` for 4-bit layers, and raises
    "vLLM does not support in-flight 8-bit quantization" when it finds `Linear8bitLt` modules.

    ## Fix
    Use 4-bit QLoRA (`load_in_4bit`) or bf16 LoRA with vLLM, or generate without vLLM.

    ## Example
    GRPO with `load_in_8bit=True` and `use_vllm=True` (colocate) fails; `load_in_4bit=True` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/generation/vllm_generation.py
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.vllm_mode != "colocate":
        return na("no vLLM colocate")
    if ctx.files.quant_8bit():
        return fail("8-bit (load_in_8bit) model with vLLM colocate: TRL raises", "use load_in_4bit (QLoRA) or bf16 "
                    "LoRA, or set use_vllm=False")
    return ok("no 8-bit layers")


@rule(id="PEFT008", name="8bit-with-fsdp", severity="error", seed="Q-04",
      reads=("plan.backend", "files.trl_args.load_in_8bit"))
def eight_bit_with_fsdp(ctx: Context) -> Result:
    """FSDP cannot shard an 8-bit (LLM.int8) model; FSDP-QLoRA is a 4-bit-only path.

    ## Why
    int8 weights cannot be flattened or sharded with float parameters ("got torch.float16 and torch.int8");
    the bitsandbytes FSDP support covers 4-bit weights stored in a float `quant_storage` only.

    ## Fix
    Use 4-bit QLoRA with `bnb_4bit_quant_storage` = model dtype under FSDP2, or DDP for an 8-bit model.

    ## Example
    `load_in_8bit=True` with an FSDP accelerate YAML fails; `load_in_4bit=True` passes this rule.

    ## References
    - https://github.com/bitsandbytes-foundation/bitsandbytes/issues/1709
    - https://huggingface.co/docs/bitsandbytes/main/en/fsdp_qlora
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.backend != "fsdp2":
        return na("not FSDP")
    if ctx.files.quant_8bit():
        return fail("8-bit model under FSDP: int8 weights cannot be sharded", "use load_in_4bit with "
                    "bnb_4bit_quant_storage=bfloat16, or DDP")
    return ok("no 8-bit weights")


# Pre-quantized checkpoints (config.json quantization_config), by transformers' quantizer names
# (quantizers/auto.py AUTO_QUANTIZER_MAPPING), split by each quantizer's `is_trainable`
# (quantizers/quantizer_*.py), which Trainer checks (trainer_utils.py validate_quantization_for_training: a quantized
# model trains only with adapters, and only when is_trainable). Read in transformers 5.25.0 (the project venv; the
# bundles pin 5.24.0); tests/rules/test_rules_data_vs_installed.py holds the split to the installed release.
QUANT_TRAINABLE = frozenset({"bitsandbytes_4bit", "bitsandbytes_8bit", "eetq", "fp8", "gptq", "hqq", "mxfp8", "quanto",
                             "sinq"})
"""is_trainable returns True."""
QUANT_TRAINABLE_IF: dict[str, str] = {
    "aqlm": "with aqlm >= 1.0.2 installed",
    "awq": "with gptqmodel >= 5.0.0 installed",
    "bitnet": "with quantization_config linear_class autobitlinear and quantization_mode online",
    "compressed-tensors": "when loaded without its FP8 inference kernel",
    "fouroversix": "with quantization_config keep_master_weights",
    "fp_quant": "with quantization_config store_master_weights",
    "torchao": "for an 8-bit quant_type only",
}
"""is_trainable depends on an installed package or the checkpoint's settings: when."""
QUANT_NOT_TRAINABLE = frozenset({"auto-round", "fbgemm_fp8", "gemma", "gguf", "higgs", "metal", "mxfp4", "nvfp4", "quark",
                                 "spqr", "vptq"})
"""is_trainable returns False: transformers refuses to fine-tune the checkpoint at all."""


def _quantized(ctx: Context) -> str:
    return f"{ctx.model.hf_id} is a pre-quantized {ctx.model.quant_method} checkpoint (config.json quantization_config)"


@rule(id="PEFT009", name="prequantized-checkpoint-trains-adapters-only", severity="error",
      reads=("model.quant_method", "plan.method"))
def prequantized_adapters_only(ctx: Context) -> Result:
    """A pre-quantized checkpoint (GPTQ, AWQ, FP8, bitsandbytes ...) trains with LoRA only, and only if its method can.

    ## Why
    `from_pretrained` loads a checkpoint whose config.json has a `quantization_config` with that method's quantizer,
    whatever the plan asks. Trainer then refuses to fine-tune quantized weights themselves ("You cannot perform
    fine-tuning on purely quantized models", trainer_utils.py validate_quantization_for_training): full fine-tuning
    fails. QLoRA fails too: it passes a bitsandbytes 4-bit config, which transformers refuses beside another method's
    ("The model is quantized with ... but you are passing a BitsAndBytesConfig", quantizers/auto.py
    merge_quantization_configs) and ignores beside bitsandbytes' own. LoRA adapters on the checkpoint's weights work
    when the quantizer's `is_trainable` is true; for a method whose quantizer is not trainable (GGUF, MXFP4, NVFP4,
    VPTQ ...) or one transformers does not know (it then loads the checkpoint as if unquantized), nothing trains.

    ## Fix
    `--method lora` for a trainable method; for the others, plan the model's unquantized (bf16) checkpoint.

    ## Example
    A GPTQ checkpoint with `--method full` or `--method qlora` fails, with `--method lora` passes; an MXFP4
    checkpoint fails with every method.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.25.0/src/transformers/trainer_utils.py
    - https://github.com/huggingface/transformers/blob/v5.25.0/src/transformers/quantizers/auto.py
    - https://github.com/huggingface/transformers/blob/v5.25.0/src/transformers/quantizers/base.py
    - https://huggingface.co/docs/transformers/quantization/overview
    """
    method = ctx.model.quant_method
    if method is None:
        return na("the checkpoint is not pre-quantized")
    unquantized = "plan the model's unquantized (bf16) checkpoint instead"
    if method in QUANT_NOT_TRAINABLE:
        return fail(f"{_quantized(ctx)}: transformers cannot train on {method} weights (its quantizer's is_trainable "
                    "is False), with adapters or without", unquantized)
    if method not in QUANT_TRAINABLE and method not in QUANT_TRAINABLE_IF:
        return fail(f"{_quantized(ctx)}: transformers has no quantizer named {method} and would load the checkpoint "
                    "as if it were not quantized", unquantized)
    if ctx.plan.method == "full":
        return fail(f"{_quantized(ctx)}: full fine-tuning of quantized weights fails (transformers trains them only "
                    "through adapters)", "use --method lora: LoRA adapters train on top of the quantized weights")
    if ctx.plan.method == "qlora":
        return fail(f"{_quantized(ctx)}: QLoRA's bitsandbytes 4-bit loading does not apply to weights quantized "
                    "already", "use --method lora: LoRA adapters train on top of the checkpoint's own quantization")
    return ok(f"LoRA adapters on the {method} checkpoint")


@rule(id="PEFT010", name="prequantized-checkpoint-estimate", severity="warning",
      reads=("model.quant_method", "plan.method"))
def prequantized_estimate(ctx: Context) -> Result:
    """LoRA on a pre-quantized checkpoint: the estimate counts its weights at 16 bits; its quantizer needs a package.

    ## Why
    The memory model knows bf16 weights and QLoRA's bitsandbytes 4-bit weights; a checkpoint quantized with another
    method (GPTQ, AWQ, FP8 ...) is estimated as if its base weights were bf16, which over-states their memory
    (every quantization method stores fewer bits). transformers loads the checkpoint with that method's quantizer,
    whose `validate_environment` needs its package (gptqmodel, optimum-quanto, hqq ...), which the bundle's
    requirements.txt does not list; some methods train only with a package version or settings
    (`is_trainable` of quantizers/quantizer_*.py).

    ## Fix
    Install the quantizer's package beside requirements.txt; read the memory figures as an upper bound.

    ## Example
    `--method lora` on a GPTQ checkpoint warns; a bf16 checkpoint is not applicable.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.25.0/src/transformers/quantizers/auto.py
    - https://huggingface.co/docs/transformers/quantization/overview
    """
    method = ctx.model.quant_method
    if method is None:
        return ok("not a pre-quantized checkpoint: the estimate counts its weights as the plan loads them")
    if ctx.plan.method != "lora" or not (method in QUANT_TRAINABLE or method in QUANT_TRAINABLE_IF):
        return na("no LoRA plan on a trainable quantization (rule PEFT009)")
    when = f"; transformers trains on {method} weights only {QUANT_TRAINABLE_IF[method]}" \
        if method in QUANT_TRAINABLE_IF else ""
    return fail(f"{_quantized(ctx)}: the memory estimate counts its base weights at 16 bits, an over-estimate, and "
                f"train.py needs the package of transformers' {method} quantizer{when}",
                "install that package beside requirements.txt; read the memory figures as an upper bound")


RULES = (qlora_zero3_quant_storage, qlora_fsdp2_quant_storage, peft_with_cpu_offload, lora_on_lm_head,
         lora_merge_under_zero3, device_map_with_data_parallel, vllm_rejects_8bit, eight_bit_with_fsdp,
         prequantized_adapters_only, prequantized_estimate)

