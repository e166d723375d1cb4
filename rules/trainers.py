"""Trainer rules (TRN*): batch arithmetic and constraints each TRL 1.16 trainer enforces."""

from __future__ import annotations

import math

from rules.common import NO_FILES, as_float, as_int, divisors, is_flash, join, truthy, uses_peft
from rules.model import Context, Result, fail, na, ok
from rules.registry import rule

DEFAULT_NUM_GENERATIONS = {"grpo": 8, "rloo": 2}
DEFAULT_BETA = {"grpo": 0.0, "rloo": 0.05, "dpo": 0.1}


def generation_batch(ctx: Context) -> tuple[int, str]:
    """GRPOConfig/RLOOConfig `__post_init__`: generation_batch_size, else micro x processes x steps_per_generation
    (steps_per_generation defaults to gradient_accumulation_steps)."""
    p = ctx.plan
    gbs = as_int(ctx.arg("generation_batch_size"))
    if gbs:
        return gbs, f"generation_batch_size {gbs}"
    steps = as_int(ctx.arg("steps_per_generation")) or p.grad_accum
    what = "steps_per_generation" if ctx.has_arg("steps_per_generation") else "grad_accum"
    return p.micro_batch * p.num_processes * steps, f"micro_batch {p.micro_batch} x {p.num_processes} processes x " \
                                                    f"{what} {steps}"


def _num_generations(ctx: Context) -> int:
    value = as_int(ctx.arg("num_generations"))
    return value if value is not None else ctx.plan.num_generations


@rule(id="TRN001", name="generation-batch-divisible-by-num-generations", severity="error", seed="T-01",
      auto_fix=True, reads=("plan.trainer", "plan.micro_batch", "plan.num_processes", "plan.grad_accum",
                            "plan.num_generations", "files.trl_args.generation_batch_size"))
def generation_batch_divisible(ctx: Context) -> Result:
    """GRPO/RLOO: the generation batch (micro-batch x processes x grad-accum by default) must be a multiple of
    num_generations.

    ## Why
    Every prompt's `num_generations` completions must land in one generation batch to compute group-relative
    advantages. GRPOConfig/RLOOConfig raise "generation_batch_size (N) must be divisible by num_generations (G)".
    `per_device_train_batch_size` counts completions, not prompts, and the generation batch is
    micro-batch x processes x steps_per_generation (= gradient_accumulation_steps unless set), not the per-step
    global batch.

    ## Fix
    Pick num_generations among the divisors of the generation batch (the finding lists them), or raise the
    micro-batch / gradient accumulation so that it divides.

    ## Example
    1 GPU, `--micro-batch 4 --grad-accum 1 --num-generations 8` fails (4 % 8); `--grad-accum 2` passes (8 % 8).

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    - https://github.com/huggingface/trl/issues/2858
    - https://github.com/huggingface/trl/pull/3388
    """
    if ctx.plan.trainer not in ("grpo", "rloo"):
        return na("not GRPO/RLOO")
    ng = _num_generations(ctx)
    if ng < 2:
        return na("num_generations < 2 (TRN002)")
    gbs, how = generation_batch(ctx)
    if gbs % ng == 0:
        return ok(f"generation batch {gbs} = {gbs // ng} prompts x {ng} completions")
    valid = [d for d in divisors(gbs) if d >= 2]
    p = ctx.plan
    per_step = p.micro_batch * p.num_processes
    # the next accumulation that makes per_step x ga a multiple of ng: ga must be a multiple of ng / gcd(per_step, ng)
    # (closed form: a search one value at a time would take ng steps, and ng comes from the user)
    unit = ng // math.gcd(per_step, ng) if per_step > 0 else 0
    ga = (p.grad_accum // unit + 1) * unit if unit else None
    choices = [f"num_generations in {{{join(valid)}}}"] if valid else []
    if ga and not ctx.has_arg("generation_batch_size"):
        choices.append(f"--grad-accum {ga} to keep num_generations {ng}")
    # a batch no num_generations >= 2 divides (a prime) leaves only the accumulation; with neither, raise the batch
    options = " or ".join(choices) if choices else "a larger micro-batch or gradient accumulation"
    auto = {"num_generations": max(d for d in valid if d <= ng)} if [d for d in valid if d <= ng] else (
        {"grad_accum": ga} if ga else None)
    return fail(f"generation batch {gbs} ({how}) is not divisible by num_generations {ng}", f"use {options}", auto)


@rule(id="TRN002", name="num-generations-at-least-2", severity="error", seed="T-02", auto_fix=True,
      reads=("plan.trainer", "plan.num_generations", "files.trl_args.num_generations"))
def num_generations_at_least_2(ctx: Context) -> Result:
    """GRPO/RLOO need at least 2 completions per prompt.

    ## Why
    A group-relative advantage compares a completion with the others of its group; with one completion the
    advantage is 0 (or a division by zero). GRPOConfig/RLOOConfig raise for `num_generations < 2`.

    ## Fix
    `--num-generations 2` or more (GRPO's default is 8, RLOO's 2).

    ## Example
    `--trainer grpo --num-generations 1` fails; `--num-generations 4` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    - https://github.com/huggingface/trl/pull/3199
    """
    if ctx.plan.trainer not in ("grpo", "rloo"):
        return na("not GRPO/RLOO")
    ng = _num_generations(ctx)
    if ng >= 2:
        return ok(f"num_generations {ng}")
    return fail(f"num_generations {ng}: a group needs at least 2 completions", "use --num-generations 2 or more",
                {"num_generations": 2})


@rule(id="TRN003", name="eval-batch-divisible-by-num-generations", severity="error", seed="T-03",
      reads=("plan.trainer", "plan.num_processes", "files.trl_args.per_device_eval_batch_size",
             "files.trl_args.num_generations_eval", "files.trl_args.eval_strategy"))
def eval_batch_divisible(ctx: Context) -> Result:
    """GRPO/RLOO with evaluation: per-device eval batch x processes must be divisible by the eval num_generations.

    ## Why
    The grouping invariant also holds for evaluation: GRPOConfig raises when `per_device_eval_batch_size x
    num_processes` is not divisible by `num_generations_eval` (or `num_generations` when unset).

    ## Fix
    Set `per_device_eval_batch_size` so that the product divides, or `num_generations_eval` to a divisor of it.

    ## Example
    eval on, 1 process, eval batch 4 with num_generations 8 fails; eval batch 8 passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    - https://github.com/huggingface/trl/pull/3889
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.trainer not in ("grpo", "rloo"):
        return na("not GRPO/RLOO")
    strategy = str(ctx.arg("eval_strategy", "no")).lower()
    if strategy in ("no", "none") and not truthy(ctx.arg("do_eval")):
        return na("no evaluation")
    eval_bs = as_int(ctx.arg("per_device_eval_batch_size")) or 8
    ng = as_int(ctx.arg("num_generations_eval")) or _num_generations(ctx)
    total = eval_bs * ctx.plan.num_processes
    if ng and total % ng == 0:
        return ok(f"eval batch {total} divisible by {ng}")
    return fail(f"per_device_eval_batch_size {eval_bs} x {ctx.plan.num_processes} processes = {total} is not "
                f"divisible by num_generations {ng}", f"use num_generations_eval in {{{join(d for d in divisors(total) if d >= 2)}}}"
                f" or a per_device_eval_batch_size that is a multiple of {ng}")


@rule(id="TRN004", name="generating-trainers-reject-auto-find-batch-size", severity="error", seed="T-04",
      reads=("plan.trainer", "files.trl_args.auto_find_batch_size"))
def generating_reject_auto_find(ctx: Context) -> Result:
    """GRPO and RLOO reject `auto_find_batch_size=True`.

    ## Why
    Halving the batch on out-of-memory would split prompt groups; GRPOConfig/RLOOConfig raise "auto_find_batch_size
    is not supported by GRPO".

    ## Fix
    `auto_find_batch_size=False` and a `per_device_train_batch_size` that fits (see `trl-advisor estimate`).

    ## Example
    `GRPOConfig(auto_find_batch_size=True)` fails; without it passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    - https://github.com/huggingface/trl/pull/6411
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.trainer not in ("grpo", "rloo"):
        return na("not GRPO/RLOO")
    if truthy(ctx.arg("auto_find_batch_size")):
        return fail(f"{ctx.plan.trainer.upper()} rejects auto_find_batch_size=True",
                    "set auto_find_batch_size=False and pin per_device_train_batch_size")
    return ok("auto_find_batch_size off")


@rule(id="TRN005", name="kto-kl-needs-micro-batch-2", severity="error", seed="T-05", auto_fix=True,
      reads=("plan.trainer", "plan.micro_batch", "files.trl_args.loss_type"))
def kto_kl_micro_batch(ctx: Context) -> Result:
    """KTO's KL term needs a per-device batch of at least 2 (except with loss_type apo_zero_unpaired).

    ## Why
    KTO estimates its KL reference point from mismatched completions inside the micro-batch; with one example the
    KL term equals the implied reward. KTOTrainer raises "Actual (not effective) batch size must be > 1".

    ## Fix
    `--micro-batch 2` or more (keep the global batch with a smaller gradient accumulation), or
    `loss_type="apo_zero_unpaired"`.

    ## Example
    `--trainer kto --micro-batch 1` fails; `--micro-batch 2` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/kto_trainer.py
    - https://github.com/huggingface/trl/issues/2554
    """
    if ctx.plan.trainer != "kto":
        return na("not KTO")
    if ctx.arg("loss_type", "kto") == "apo_zero_unpaired":
        return na("apo_zero_unpaired computes no KL term")
    if ctx.plan.micro_batch >= 2:
        return ok(f"micro-batch {ctx.plan.micro_batch}")
    return fail(f"KTO with micro-batch {ctx.plan.micro_batch}: the KL term needs >= 2 examples per device",
                "use --micro-batch 2 (halve --grad-accum to keep the global batch)",
                {"micro_batch": 2, "grad_accum": max(1, ctx.plan.grad_accum // 2)})


@rule(id="TRN006", name="kto-kl-needs-sequential-sampling", severity="error",
      reads=("plan.trainer", "files.trl_args.train_sampling_strategy", "files.trl_args.loss_type"))
def kto_sequential_sampling(ctx: Context) -> Result:
    """KTO with a KL term needs `train_sampling_strategy="sequential"`.

    ## Why
    The KL completion of each example is precomputed against its neighbours in a fixed-order batch; KTOTrainer
    1.16 raises for any other sampling strategy when the loss estimates the KL term.

    ## Fix
    Keep `train_sampling_strategy="sequential"` (the default), or use `loss_type="apo_zero_unpaired"`.

    ## Example
    `KTOConfig(train_sampling_strategy="random")` fails; the default passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/kto_trainer.py
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.trainer != "kto" or ctx.arg("loss_type", "kto") == "apo_zero_unpaired":
        return na("no KTO KL term")
    strategy = ctx.arg("train_sampling_strategy", "sequential")
    if strategy == "sequential":
        return ok("sequential")
    return fail(f"train_sampling_strategy {strategy!r} with KTO's KL term: KTOTrainer raises",
                "use train_sampling_strategy='sequential'")


@rule(id="TRN007", name="dpo-padding-free-unavailable", severity="warning", seed="K-08",
      reads=("plan.trainer", "files.trl_args.padding_free"))
def dpo_padding_free(ctx: Context) -> Result:
    """DPO's `padding_free=True` is temporarily unavailable in TRL 1.16: it warns and pads instead.

    ## Why
    After a refactor DPOTrainer ignores padding-free ("temporarily unavailable ... Falling back to standard
    padding"), so a memory plan that counted on it is off.

    ## Fix
    Set `padding_free=False` and size the micro-batch for padded batches.

    ## Example
    `DPOConfig(padding_free=True)` warns; `padding_free=False` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/dpo_trainer.py
    - https://github.com/huggingface/trl/pull/6972
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.trainer != "dpo":
        return na("not DPO")
    if truthy(ctx.arg("padding_free")):
        return fail("DPO padding_free=True is ignored in TRL 1.16 (falls back to padding)",
                    "set padding_free=False and plan for padded batches")
    return ok("padding_free off")


@rule(id="TRN008", name="padding-free-needs-flash-attention", severity="warning", seed="K-06", auto_fix=True,
      reads=("plan.trainer", "plan.packing", "plan.attn", "files.trl_args.packing_strategy",
             "files.trl_args.padding_free"))
def padding_free_needs_flash(ctx: Context) -> Result:
    """SFT packing (BFD) and padding-free batches need FlashAttention to keep documents apart.

    ## Why
    With `packing=True` and the default `bfd` strategy SFTTrainer turns padding-free on: documents share a row
    and are separated only by `position_ids`, which FlashAttention's varlen kernels read. SDPA and eager ignore
    them, so documents attend to each other (measured 0.03-0.15 worse final loss). TRL's docs require FA2/FA3;
    the code does not check.

    ## Fix
    `--attn flash_attention_2` (or `kernels-community/flash-attn2`) with packing; or `packing_strategy="wrapped"`,
    or no packing.

    ## Example
    `--packing --attn sdpa` warns; `--packing --attn flash_attention_2` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    - https://github.com/huggingface/trl/issues/3695
    """
    if ctx.plan.trainer not in ("sft", "gkd"):
        return na("not SFT")
    strategy = ctx.arg("packing_strategy", "bfd")
    padding_free = truthy(ctx.arg("padding_free")) or (ctx.plan.packing and strategy in ("bfd", "bfd_split",
                                                                                          "bfd-requeue"))
    if not padding_free:
        return na("no padding-free batches")
    if is_flash(ctx.plan.attn):
        return ok(f"attention {ctx.plan.attn}")
    fix = {"attn": "flash_attention_2"} if ctx.target.gpu.has_bf16 else {"packing": False}
    return fail(f"padding-free batches with attention {ctx.plan.attn}: packed documents attend to each other",
                "use --attn flash_attention_2, or packing_strategy='wrapped', or --no-packing", fix)


@rule(id="TRN009", name="padding-free-without-packing-needs-no-max-length", severity="error",
      reads=("files.trl_args.padding_free", "files.trl_args.packing", "files.trl_args.max_length"))
def padding_free_without_packing(ctx: Context) -> Result:
    """SFT `padding_free=True` without packing requires `max_length=None`.

    ## Why
    Without packing the padding-free collator concatenates whole examples and never truncates; SFTTrainer raises
    "When `padding_free=True` without packing, `max_length` is not enforced" unless max_length is None.

    ## Fix
    Enable packing (`packing=True`), or set `max_length=None` and filter long examples yourself.

    ## Example
    `SFTConfig(padding_free=True)` (max_length defaults to 1024) fails; adding `packing=True` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.trainer != "sft" or not truthy(ctx.arg("padding_free")):
        return na("no SFT padding_free")
    if truthy(ctx.arg("packing")):
        return ok("packing on")
    max_length = ctx.arg("max_length", 1024)
    if max_length is None or str(max_length).lower() in ("none", "null"):
        return ok("max_length None")
    return fail(f"padding_free=True without packing and max_length {max_length}: SFTTrainer raises",
                "set packing=True, or max_length=None")


@rule(id="TRN010", name="sync-ref-model-constraints", severity="error",
      reads=("plan.trainer", "plan.method", "files.trl_args.sync_ref_model", "files.trl_args.beta"))
def sync_ref_model_constraints(ctx: Context) -> Result:
    """`sync_ref_model=True` needs a reference model: not with PEFT, and (GRPO/RLOO) not with beta = 0.

    ## Why
    With PEFT the reference is the base model with the adapter disabled, so there is no model to sync: GRPO,
    RLOO and DPO raise NotImplementedError. GRPO/RLOO with `beta=0.0` load no reference at all and raise
    ValueError. GRPO's beta defaults to 0.0.

    ## Fix
    `sync_ref_model=False`, or full fine-tuning with `beta > 0` (e.g. 0.04).

    ## Example
    `GRPOConfig(sync_ref_model=True)` (beta 0.0) fails; with `beta=0.04` and full fine-tuning it passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_trainer.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/dpo_trainer.py
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.trainer not in ("grpo", "rloo", "dpo") or not truthy(ctx.arg("sync_ref_model")):
        return na("sync_ref_model off")
    if uses_peft(ctx):
        return fail(f"sync_ref_model=True with {ctx.plan.method}: there is no separate reference model to sync",
                    "set sync_ref_model=False, or train the full model")
    beta = as_float(ctx.arg("beta"))
    beta = DEFAULT_BETA[ctx.plan.trainer] if beta is None else beta
    if ctx.plan.trainer in ("grpo", "rloo") and beta == 0.0:
        return fail(f"sync_ref_model=True with beta {beta}: no reference model is loaded", "set beta > 0 "
                    "(e.g. 0.04), or sync_ref_model=False")
    return ok(f"beta {beta}, full fine-tuning")


@rule(id="TRN011", name="seq-len-exceeds-model-context", severity="warning",
      reads=("plan.seq_len", "model.max_positions"))
def seq_len_exceeds_context(ctx: Context) -> Result:
    """The sequence length is longer than the model's `max_position_embeddings`.

    ## Why
    Positions past `max_position_embeddings` are outside what the RoPE scaling was configured and trained for:
    quality degrades (and some models raise for position ids out of range). The memory plan also grows with it.

    ## Fix
    Use `--seq-len` at most the model's context, or configure RoPE scaling (`rope_scaling`) deliberately.

    ## Example
    `--model qwen2.5-0.5b --seq-len 65536` warns (32768 positions); `--seq-len 4096` passes.

    ## References
    - https://huggingface.co/docs/transformers/main_classes/configuration
    - https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json
    """
    limit = ctx.model.max_positions
    if ctx.plan.seq_len <= limit:
        return ok(f"seq_len {ctx.plan.seq_len} <= {limit}")
    return fail(f"seq_len {ctx.plan.seq_len} exceeds {ctx.model.id}'s max_position_embeddings {limit}",
                f"use --seq-len {limit} or less, or configure rope_scaling", {"seq_len": limit})


@rule(id="TRN012", name="global-batch-not-reachable", severity="warning", auto_fix=False,
      reads=("request.global_batch", "plan.micro_batch", "plan.grad_accum", "plan.dp_size"))
def global_batch_not_reachable(ctx: Context) -> Result:
    """The requested global batch is not micro-batch x grad-accum x data-parallel size for any integer grad-accum.

    ## Why
    TrainingArguments has no global batch: it is per_device_train_batch_size x gradient_accumulation_steps x
    data-parallel processes (divided by the SP/CP degree). A global batch the product cannot reach is silently
    rounded, which changes the learning dynamics the user asked for.

    ## Fix
    Pick a global batch that micro-batch x data-parallel size divides, or change the micro-batch.

    ## Example
    `--global-batch 100 --micro-batch 8` on 8 GPUs warns (64 per step); `--global-batch 128` passes.

    ## References
    - https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments
    """
    req = ctx.request
    if req is None or not req.global_batch:
        return na("no --global-batch")
    p = ctx.plan
    if p.global_batch == req.global_batch:
        return ok(f"global batch {p.global_batch}")
    unit = p.micro_batch * p.dp_size
    if req.global_batch % unit == 0:
        # reachable: the accumulation (a pinned --grad-accum) is what makes another global batch
        accum = req.global_batch // unit
        return fail(f"--global-batch {req.global_batch} is micro-batch {p.micro_batch} x {p.dp_size} data-parallel "
                    f"ranks x grad-accum {accum}, but the plan accumulates {p.grad_accum}: it trains with "
                    f"{p.global_batch}", f"use --grad-accum {accum}, or drop --grad-accum")
    near = sorted({max(unit, (req.global_batch // unit) * unit), ((req.global_batch + unit - 1) // unit) * unit})
    return fail(f"--global-batch {req.global_batch} is not a multiple of micro-batch {p.micro_batch} x {p.dp_size} "
                f"data-parallel ranks: the plan trains with {p.global_batch}",
                f"use --global-batch {' or '.join(str(n) for n in near)}")


@rule(id="TRN013", name="generation-batch-settings", severity="error",
      reads=("files.trl_args.generation_batch_size", "files.trl_args.steps_per_generation", "plan.micro_batch",
             "plan.num_processes"))
def generation_batch_settings(ctx: Context) -> Result:
    """GRPO/RLOO `generation_batch_size` must be a multiple of the per-step batch, and excludes steps_per_generation.

    ## Why
    GRPOConfig raises when both `generation_batch_size` and `steps_per_generation` are set, and when
    generation_batch_size is not divisible by per_device_train_batch_size x num_processes (the generated batch is
    consumed in whole optimizer micro-steps).

    ## Fix
    Set one of the two; make generation_batch_size a multiple of micro-batch x processes.

    ## Example
    micro-batch 4 on 2 processes with generation_batch_size 12 fails (12 % 8); 16 passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.trainer not in ("grpo", "rloo"):
        return na("not GRPO/RLOO")
    gbs = as_int(ctx.arg("generation_batch_size"))
    steps = as_int(ctx.arg("steps_per_generation"))
    if gbs is None:
        return na("generation_batch_size not set")
    if steps is not None:
        return fail("generation_batch_size and steps_per_generation are both set: GRPOConfig raises",
                    "keep one of them")
    step = ctx.plan.micro_batch * ctx.plan.num_processes
    if gbs % step:
        return fail(f"generation_batch_size {gbs} is not divisible by micro-batch {ctx.plan.micro_batch} x "
                    f"{ctx.plan.num_processes} processes = {step}", f"use a multiple of {step}, e.g. "
                    f"{((gbs + step - 1) // step) * step}")
    return ok(f"generation_batch_size {gbs} = {gbs // step} steps of {step}")


DEFAULT_SFT_DATASET = "trl-lib/Capybara"
"""The SFT bundles' default data (advisor.bundle.render.DEFAULT_DATASETS; a test keeps the two equal): 15,806
conversations in 71.9 MB of train split (its dataset card's dataset_info), about 4.5 kB each; the source dataset's
card (LDJnr/Capybara) gives an average context of a little over 1,000 tokens per conversation."""
DEFAULT_SFT_DATASET_TOKENS = 1000
LONG_CONTEXT_TOKENS = 8192
"""From here on a sequence is several times longer than the default data's conversations."""


@rule(id="TRN014", name="default-data-shorter-than-seq-len", severity="warning",
      reads=("plan.trainer", "plan.seq_len", "plan.packing", "request.seq_len"))
def default_data_shorter_than_seq_len(ctx: Context) -> Result:
    """A long-context SFT plan on the bundle's default dataset, without packing, trains mostly on padding.

    ## Why
    The generated SFT bundle trains on trl-lib/Capybara unless given other data: conversations of about a thousand
    tokens on average. Without packing each one is padded (or batched) to its own length, so a 64k- or 128k-token
    plan neither fills its sequences nor reaches the tokens per step it was sized for: the memory and speed
    predicted for seq_len tokens per sequence describe data that is not there.

    ## Fix
    Train on long documents of your own (`bash launch.sh --data-files ...`), or pass `--packing` so that short
    conversations are packed into full sequences (packing changes which samples share a sequence).

    ## Example
    `--model 8B --seq-len 131072 --sp-size 8` warns; with `--packing` it passes.

    ## References
    - https://huggingface.co/datasets/trl-lib/Capybara
    - https://huggingface.co/datasets/LDJnr/Capybara
    - https://huggingface.co/docs/trl/sft_trainer#packing
    """
    if ctx.files is not None:
        return na("the files name their own data")
    p = ctx.plan
    if p.trainer != "sft":
        return na("not SFT")
    if p.seq_len < LONG_CONTEXT_TOKENS:
        return ok(f"seq_len {p.seq_len}")
    if p.packing:
        return ok("packing fills the sequences")
    return fail(f"seq_len {p.seq_len:,} without packing on the default dataset ({DEFAULT_SFT_DATASET}, conversations "
                f"of about {DEFAULT_SFT_DATASET_TOKENS:,} tokens): each step trains on far fewer than "
                f"{p.tokens_per_step:,} tokens", "train on long documents of your own (launch.sh --data-files), or "
                "pass --packing")


@rule(id="TRN015", name="bema-needs-whole-weights", severity="error",
      reads=("plan.ref_model", "plan.backend", "plan.zero_stage", "plan.method"))
def bema_needs_whole_weights(ctx: Context) -> Result:
    """BEMA reference updates need every process to hold whole, unsharded weights: not ZeRO-3, not FSDP2.

    ## Why
    trl's BEMACallback builds its running model as `type(model)(model.config)` on the CPU and loads the policy's
    `state_dict()` into it, then copies each trainable parameter (`named_parameters`) at every update. Under ZeRO-3 the
    parameters are partitioned (each rank's tensors are empty placeholders) and under FSDP2 they are DTensor shards:
    the copies would be shards, and the reference reloaded from them wrong. It trains the whole model (no adapter).

    ## Fix
    Use `--ref-model bema` with a single GPU, DDP or DeepSpeed ZeRO-1/2; for ZeRO-3 or FSDP2 use `--ref-model copy`
    or `precompute`.

    ## Example
    `--trainer dpo --ref-model bema --backend deepspeed --zero 3` fails; `--zero 2` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/callbacks.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/experimental/bema_for_ref_model/callback.py
    - https://arxiv.org/abs/2508.00180
    """
    p = ctx.plan
    if p.ref_model != "bema":
        return na("no BEMA reference")
    if p.method != "full":
        return fail(f"BEMA with {p.method}: it averages the whole model's weights", "use --method full",
                    {"method": "full"})
    if p.backend == "fsdp2" or (p.backend == "deepspeed" and p.zero_stage == 3):
        where = "FSDP2" if p.backend == "fsdp2" else "ZeRO-3"
        return fail(f"BEMA under {where}: the weights are sharded", "use ZeRO-2, DDP or one GPU, or --ref-model copy",
                    {"zero_stage": 2} if p.backend == "deepspeed" else {"backend": "ddp" if p.num_processes > 1
                                                                          else "single"})
    return ok(f"{p.backend} keeps whole weights")


RULES = (generation_batch_divisible, num_generations_at_least_2, eval_batch_divisible, generating_reject_auto_find,
         kto_kl_micro_batch, kto_sequential_sampling, dpo_padding_free, padding_free_needs_flash,
         padding_free_without_packing, sync_ref_model_constraints, seq_len_exceeds_context, global_batch_not_reachable,
         generation_batch_settings, default_data_shorter_than_seq_len, bema_needs_whole_weights)
