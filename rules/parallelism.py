"""Sequence- and context-parallel rules (SP*): DeepSpeed Ulysses/ALST (`sp_size`) and ring-attention CP (`cp_size`)."""

from __future__ import annotations

from rules.common import as_float, as_int, best_attn, divisors, is_flash, is_hub_kernel, join, truthy
from rules.model import Context, Result, fail, na, ok
from rules.registry import rule

SP_ATTN_BUILTIN = ("flash_attention_2", "flash_attention_3", "sdpa")
"""accelerate 1.15 DeepSpeedSequenceParallelConfig: these, or a Hub flash-attn kernel; eager/flex rejected."""


def ulysses_heads_ok(heads: int, kv_heads: int, sp: int) -> bool:
    """DeepSpeed UlyssesSPAttentionHF: heads % sp == 0, and kv % sp == 0 or sp % kv == 0 (KV heads replicated)."""
    return heads % sp == 0 and (kv_heads % sp == 0 or sp % kv_heads == 0)


def valid_sp_sizes(model, world_size: int) -> list[int]:
    """The Ulysses `sp_size` values this model accepts on `world_size` training processes: divisors of the world
    size that pass DeepSpeed's head checks (1 is always valid: no sequence parallelism)."""
    return [sp for sp in divisors(max(1, world_size)) if ulysses_heads_ok(model.heads, model.kv_heads, sp)]


def _sp(ctx: Context) -> int:
    return ctx.plan.sp_size


def _cp(ctx: Context) -> int:
    return ctx.plan.cp_size


@rule(id="SP001", name="ulysses-heads-divisible", severity="error", seed="SP-02", auto_fix=True,
      reads=("plan.sp_size", "model.heads", "model.kv_heads", "plan.num_processes"))
def ulysses_heads_divisible(ctx: Context) -> Result:
    """Ulysses SP splits attention heads across the SP group: the head counts must divide (or be divided by) sp.

    ## Why
    DeepSpeed's `UlyssesSPAttentionHF` all-to-alls the sequence shards into head shards. It raises "Attention head
    count H is not divisible by SP size" unless `num_attention_heads % sp == 0`, and "KV attention head count ... is
    not divisible by SP size or vice versa" unless `kv_heads % sp == 0` or `sp % kv_heads == 0` (then KV heads are
    replicated).

    ## Fix
    Use an sp size that divides both the heads (per the rule above) and the number of training processes; the
    finding lists them. Qwen2.5-7B (28 heads, 4 KV heads) on 8 GPUs accepts 1, 2 and 4.

    ## Example
    `--model qwen2.5-7b --gpus 8 --sp-size 7` fails (8 % 7 != 0 as well); `--sp-size 4` passes; `--sp-size 8`
    fails (28 % 8 = 4).

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/sequence_parallel/ulysses_sp.py
    - https://github.com/verl-project/verl/issues/1226
    """
    sp = _sp(ctx)
    if sp <= 1:
        return na("no Ulysses SP")
    m = ctx.model
    valid = valid_sp_sizes(m, ctx.world)
    if ulysses_heads_ok(m.heads, m.kv_heads, sp):
        return ok(f"sp {sp} divides {m.heads} heads / {m.kv_heads} KV heads", valid_sp_sizes=valid)
    if m.heads % sp:
        why = f"{m.heads} attention heads are not divisible by sp {sp}"
    else:
        why = f"{m.kv_heads} KV heads and sp {sp}: neither divides the other"
    smaller = [v for v in valid if 1 < v <= sp]
    auto = {"sp_size": max(smaller)} if smaller else {"sp_size": 1}
    return fail(f"{ctx.model.id}: {why}",
                f"valid --sp-size values for {m.id} on {ctx.world} GPUs: {join(valid)}", auto, valid_sp_sizes=valid)


@rule(id="SP002", name="ulysses-needs-deepspeed", severity="error", seed="SP-01", auto_fix=True,
      reads=("plan.sp_size", "plan.backend"))
def ulysses_needs_deepspeed(ctx: Context) -> Result:
    """Ulysses/ALST sequence parallelism runs only on the DeepSpeed backend.

    ## Why
    accelerate's only `sp_backend` is "deepspeed" (ParallelismConfig rejects others) and the SP groups are built
    by DeepSpeed (`UlyssesSPAttentionHF`, `UlyssesSPDataLoaderAdapter`) when the accelerator prepares a DeepSpeed
    engine. With FSDP or DDP there is no SP. Tested with ZeRO-2 and ZeRO-3.

    ## Fix
    Use `--backend deepspeed --zero 3` (or 2) with `--sp-size`; for FSDP2 use ring attention (`--cp-size`).

    ## Example
    `--backend fsdp2 --sp-size 4` fails; `--backend deepspeed --zero 3 --sp-size 4` passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/parallelism_config.py
    - https://huggingface.co/docs/accelerate/concept_guides/sequence_parallelism
    """
    if _sp(ctx) <= 1:
        return na("no Ulysses SP")
    if ctx.plan.backend == "deepspeed":
        return ok("DeepSpeed backend")
    return fail(f"--sp-size {_sp(ctx)} needs DeepSpeed; backend is {ctx.plan.backend}",
                "use --backend deepspeed --zero 3 (or 2); with FSDP2 use --cp-size (ring attention) instead",
                {"backend": "deepspeed", "zero_stage": 3})


@rule(id="SP003", name="ulysses-attention-implementation", severity="error", seed="SP-04", auto_fix=True,
      reads=("plan.sp_size", "plan.attn", "target.gpu.compute_capability"))
def ulysses_attention_implementation(ctx: Context) -> Result:
    """Ulysses SP accepts sdpa, flash_attention_2/3 or a Hub flash-attn kernel; eager and flex_attention are rejected.

    ## Why
    accelerate's `DeepSpeedSequenceParallelConfig` raises for `eager` and `flex_attention`, and accepts only the
    three built-ins or a Hub kernel whose id contains "flash-attn". DeepSpeed also refuses eager: it materialises a
    4-D mask of O(n^2) memory, which defeats long-sequence training.

    ## Fix
    Use `--attn flash_attention_2` (Ampere or newer) or `--attn sdpa`.

    ## Example
    `--sp-size 2 --attn eager` fails; `--attn flash_attention_2` passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/utils/dataclasses.py
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/sequence_parallel/ulysses_sp.py
    """
    if _sp(ctx) <= 1:
        return na("no Ulysses SP")
    attn = ctx.plan.attn
    if attn in SP_ATTN_BUILTIN or (is_hub_kernel(attn) and "flash-attn" in attn):
        return ok(f"attention {attn}")
    alt = best_attn(ctx)
    return fail(f"attention {attn} is not supported with Ulysses SP (accepted: {join(SP_ATTN_BUILTIN)} or a Hub "
                "flash-attn kernel)", f"use --attn {alt}", {"attn": alt})


@rule(id="SP004", name="ulysses-sdpa-with-packing", severity="warning", seed="SP-04", auto_fix=True,
      reads=("plan.sp_size", "plan.attn", "plan.packing", "files.trl_args.padding_free"))
def ulysses_sdpa_with_packing(ctx: Context) -> Result:
    """Under Ulysses SP, sdpa treats a packed (padding-free) row as one sequence: documents attend to each other.

    ## Why
    SP passes `position_ids` instead of an attention mask. FlashAttention's varlen path splits documents at the
    position resets; SDPA cannot, so packed samples silently attend across their boundaries (wrong loss, no error).

    ## Fix
    Use `--attn flash_attention_2` (or a Hub flash-attn kernel) with packing, or turn packing off.

    ## Example
    `--sp-size 2 --attn sdpa --packing` warns; with `--attn flash_attention_2` it passes.

    ## References
    - https://huggingface.co/docs/accelerate/concept_guides/sequence_parallelism
    - https://github.com/huggingface/accelerate/pull/3817
    """
    if _sp(ctx) <= 1:
        return na("no Ulysses SP")
    packed = ctx.plan.packing or truthy(ctx.arg("padding_free"))
    if not packed:
        return na("no packing")
    if is_flash(ctx.plan.attn):
        return ok(f"attention {ctx.plan.attn} separates packed documents")
    fix = {"attn": "flash_attention_2"} if ctx.target.gpu.has_bf16 else {"packing": False}
    return fail(f"Ulysses SP with packing and attention {ctx.plan.attn}: packed documents attend to each other",
                "use --attn flash_attention_2, or --no-packing", fix)


@rule(id="SP005", name="ulysses-attn-matches-model", severity="error", seed="SP-04",
      reads=("files.accelerate.parallelism_config.parallelism_config_sp_attn_implementation", "plan.attn"))
def ulysses_attn_matches_model(ctx: Context) -> Result:
    """The accelerate `sp_attn_implementation` must equal the model's `attn_implementation`.

    ## Why
    DeepSpeed's `register_with_transformers` raises "core_attn_implementation=... does not match model config
    attn_implementation=..." when they differ. accelerate's default `sp_attn_implementation` is `sdpa`, so a model
    loaded with FlashAttention under an SP YAML that does not name it fails.

    ## Fix
    Set `parallelism_config_sp_attn_implementation` to the model's attention (and load the model with the same
    value in `model_init_kwargs`).

    ## Example
    sp_attn_implementation flash_attention_2 with a model loaded with sdpa fails; both flash_attention_2 passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/sequence_parallel/ulysses_sp.py
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/utils/dataclasses.py
    """
    if ctx.files is None or not ctx.files.parallelism:
        return na("no parallelism_config in the files")
    if _sp(ctx) <= 1:
        return na("no Ulysses SP")
    sp_attn = str(ctx.files.parallelism.get("parallelism_config_sp_attn_implementation") or "sdpa")
    if sp_attn == ctx.plan.attn:
        return ok(f"both {sp_attn}")
    return fail(f"sp_attn_implementation is {sp_attn} but the model loads with {ctx.plan.attn}",
                f"set parallelism_config_sp_attn_implementation: {ctx.plan.attn} (or load the model with {sp_attn})")


@rule(id="SP006", name="sp-divides-world-size", severity="error", seed="SP-03", auto_fix=True,
      reads=("plan.sp_size", "plan.num_processes", "model.heads", "model.kv_heads",
             "files.accelerate.parallelism_config"))
def sp_divides_world_size(ctx: Context) -> Result:
    """Ulysses SP groups tile the training processes: dp x sp must equal the world size.

    ## Why
    SP ranks overlap the data-parallel ranks (no extra GPUs): world = dp_replicate x dp_shard x sp. accelerate
    skips its own product check for DeepSpeed SP, so a world size that sp does not divide fails later inside
    DeepSpeed's group setup.

    ## Fix
    Choose an sp size that divides the number of training processes (the finding lists those the model accepts);
    in an accelerate YAML make dp_replicate x dp_shard x sp equal num_processes.

    ## Example
    8 processes with sp 3 fails; sp 4 (dp 2) passes.

    ## References
    - https://huggingface.co/docs/accelerate/concept_guides/sequence_parallelism
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/parallelism_config.py
    """
    sp = _sp(ctx)
    if sp <= 1:
        return na("no Ulysses SP")
    world = ctx.world
    valid = valid_sp_sizes(ctx.model, world)
    if world % sp:
        smaller = [v for v in valid if 1 < v <= sp]
        return fail(f"sp {sp} does not divide the {world} training processes",
                    f"valid --sp-size values for {ctx.model.id} on {world} GPUs: {join(valid)}",
                    {"sp_size": max(smaller) if smaller else 1}, valid_sp_sizes=valid)
    par = ctx.files.parallelism if ctx.files is not None else {}
    if par:
        rep = as_int(par.get("parallelism_config_dp_replicate_size")) or 1
        shard = as_int(par.get("parallelism_config_dp_shard_size")) or 1
        if rep * shard * sp != world:
            return fail(f"dp_replicate {rep} x dp_shard {shard} x sp {sp} = {rep * shard * sp}, not the {world} "
                        "processes", f"set parallelism_config_dp_shard_size to {world // sp} (dp_replicate 1)")
    return ok(f"dp {world // sp} x sp {sp} = {world}")


@rule(id="SP007", name="ulysses-zero-stage", severity="warning", auto_fix=True,
      reads=("plan.sp_size", "plan.backend", "plan.zero_stage"))
def ulysses_zero_stage(ctx: Context) -> Result:
    """Ulysses/ALST is tested with ZeRO-2 and ZeRO-3 only.

    ## Why
    accelerate's sequence-parallelism guide and TRL's ALST recipe (alst_ulysses_4gpu.yaml, ZeRO-3) validate SP on
    ZeRO stages 2 and 3; the long-sequence memory savings ALST targets also assume sharded optimizer states.
    Stages 0/1 are untested paths.

    ## Fix
    Use `--zero 3` (the recipe's choice) or `--zero 2`.

    ## Example
    `--backend deepspeed --zero 1 --sp-size 2` warns; `--zero 3` passes.

    ## References
    - https://huggingface.co/docs/accelerate/concept_guides/sequence_parallelism
    - https://huggingface.co/docs/trl/distributing_training
    """
    if _sp(ctx) <= 1 or ctx.plan.backend != "deepspeed":
        return na("no DeepSpeed Ulysses SP")
    if ctx.plan.zero_stage in (2, 3):
        return ok(f"ZeRO-{ctx.plan.zero_stage}")
    return fail(f"Ulysses SP with ZeRO-{ctx.plan.zero_stage}: only ZeRO-2 and ZeRO-3 are tested",
                "use --zero 3 (or 2)", {"zero_stage": 3})


@rule(id="SP008", name="ulysses-seq-len-divisible", severity="error", seed="SP-05", auto_fix=True,
      reads=("plan.sp_size", "plan.seq_len", "files.trl_args.pad_to_multiple_of", "model.heads", "model.kv_heads",
             "plan.num_processes"))
def ulysses_seq_len_divisible(ctx: Context) -> Result:
    """Every batch's sequence length must be divisible by sp: pad to a multiple of `sp_size`.

    ## Why
    `UlyssesSPDataLoaderAdapter` shards each batch along the sequence and raises "batch's seqlen=N isn't divisible
    by sp-size=S". TRL's collators pad to `pad_to_multiple_of`; it must be a multiple of sp (TRL's docs set it to
    sp_size), and the planned sequence length should be one too.

    ## Fix
    Set `pad_to_multiple_of` to sp_size in the TRL config and use a `--seq-len` that sp divides.

    ## Example
    `--sp-size 4 --seq-len 1026` fails; `--seq-len 1024` passes. A TRL config without pad_to_multiple_of fails.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/sequence_parallel/ulysses_sp.py
    - https://github.com/huggingface/trl/pull/6812
    """
    sp = _sp(ctx)
    if sp <= 1:
        return na("no Ulysses SP")
    if sp not in valid_sp_sizes(ctx.model, ctx.plan.num_processes):
        # the degree itself is wrong (SP001, SP006): a length fitted to it would be fitted to a value that changes
        return na(f"sp {sp} is itself not a valid degree here (SP001/SP006 name the valid ones)")
    if ctx.files is not None:
        pad = as_int(ctx.arg("pad_to_multiple_of"))
        if pad is None or pad % sp:
            return fail(f"pad_to_multiple_of is {ctx.arg('pad_to_multiple_of')!r}: batch lengths are not padded to "
                        f"a multiple of sp {sp}", f"set pad_to_multiple_of={sp} in the TRL config")
    seq = ctx.plan.seq_len
    if seq % sp:
        down = seq - seq % sp
        lengths = f"{down} (or {down + sp})" if down else f"{sp}"
        return fail(f"seq_len {seq} is not divisible by sp {sp}",
                    f"use --seq-len {lengths} and pad_to_multiple_of={sp}", {"seq_len": down or sp})
    return ok(f"seq_len {seq} divisible by sp {sp}")


@rule(id="SP009", name="ulysses-rejects-dft-loss", severity="error",
      reads=("plan.sp_size", "plan.trainer", "files.trl_args.loss_type", "files.trl_args.label_smoothing_factor"))
def ulysses_rejects_dft_loss(ctx: Context) -> Result:
    """SFT under DeepSpeed SP rejects `loss_type="dft"`, a custom loss function and label smoothing.

    ## Why
    Under Ulysses/ALST Trainer reduces the model's own negative log-likelihood across the SP ranks; SFTTrainer
    1.16 raises "`loss_type='dft'`, `compute_loss_func` and `label_smoothing_factor` are not supported with
    DeepSpeed sequence parallelism".

    ## Fix
    Use `loss_type="nll"` (the default) and `label_smoothing_factor=0`, or drop SP.

    ## Example
    `SFTConfig(loss_type="dft")` with sp_size 2 fails; `loss_type="nll"` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    """
    if _sp(ctx) <= 1 or ctx.plan.trainer != "sft":
        return na("no SFT with Ulysses SP")
    if ctx.files is None:
        return ok("the planned SFT uses the default nll loss")
    loss = ctx.arg("loss_type", "nll")
    smoothing = as_float(ctx.arg("label_smoothing_factor", 0.0)) or 0.0
    if loss == "dft" or smoothing > 0:
        what = "loss_type='dft'" if loss == "dft" else f"label_smoothing_factor={smoothing}"
        return fail(f"{what} with DeepSpeed sequence parallelism raises in SFTTrainer",
                    "use loss_type='nll' and label_smoothing_factor=0, or disable SP")
    return ok(f"loss_type {loss}")


@rule(id="SP010", name="ring-cp-needs-fsdp2", severity="error", seed="CP-01", auto_fix=True,
      reads=("plan.cp_size", "plan.backend", "files.accelerate.fsdp_config.fsdp_version"))
def ring_cp_needs_fsdp2(ctx: Context) -> Result:
    """Ring-attention context parallelism (`cp_size > 1`) runs only under FSDP2.

    ## Why
    accelerate's torch CP backend shards the sequence over the `dp_shard_cp` mesh of FSDP2 ("Context parallelism
    only works if you use FSDP2"); ParallelismConfig refuses CP without FSDP version 2, DeepSpeed or DDP.

    ## Fix
    Use `--backend fsdp2` with `--cp-size`; with DeepSpeed use Ulysses (`--sp-size`).

    ## Example
    `--backend deepspeed --cp-size 2` fails; `--backend fsdp2 --cp-size 2` passes.

    ## References
    - https://huggingface.co/docs/accelerate/concept_guides/context_parallelism
    - https://github.com/huggingface/trl/pull/3994
    """
    if _cp(ctx) <= 1:
        return na("no context parallelism")
    if ctx.plan.backend != "fsdp2":
        return fail(f"--cp-size {_cp(ctx)} needs FSDP2; backend is {ctx.plan.backend}",
                    "use --backend fsdp2 (or Ulysses --sp-size with DeepSpeed)", {"backend": "fsdp2", "zero_stage": 0})
    if ctx.files is not None and ctx.files.accelerate_fsdp:
        version = str(ctx.files.accelerate_fsdp.get("fsdp_version", 1))
        if version != "2":
            return fail(f"context parallelism with fsdp_version {version}", "set fsdp_version: 2")
    return ok("FSDP2")


@rule(id="SP011", name="ring-cp-needs-sdpa", severity="error", seed="CP-02", auto_fix=True,
      reads=("plan.cp_size", "plan.attn"))
def ring_cp_needs_sdpa(ctx: Context) -> Result:
    """Ring-attention CP works with `sdpa` attention exactly (no FlashAttention, no eager).

    ## Why
    Torch's context-parallel attention patches `scaled_dot_product_attention` only; transformers 5.24's Trainer
    raises "Context parallelism is supported only with SDPA attention" for anything else, and TRL's docs say
    FlashAttention is not supported with CP.

    ## Fix
    Use `--attn sdpa` with `--cp-size`.

    ## Example
    `--cp-size 2 --attn flash_attention_2` fails; `--attn sdpa` passes.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/trainer.py
    - https://huggingface.co/docs/accelerate/concept_guides/context_parallelism
    """
    if _cp(ctx) <= 1:
        return na("no context parallelism")
    if ctx.plan.attn == "sdpa":
        return ok("sdpa")
    return fail(f"context parallelism needs sdpa attention, the plan uses {ctx.plan.attn}", "use --attn sdpa",
                {"attn": "sdpa"})


@rule(id="SP012", name="ring-cp-seq-len-divisible", severity="error", seed="CP-03", auto_fix=True,
      reads=("plan.cp_size", "plan.seq_len", "files.trl_args.pad_to_multiple_of", "plan.num_processes"))
def ring_cp_seq_len_divisible(ctx: Context) -> Result:
    """Ring attention splits each sequence into 2 x cp chunks: lengths must be divisible by 2 x cp_size.

    ## Why
    The load-balanced ring gives every rank two chunks (one early, one late) so causal work is even; the sequence
    must split into 2 x cp equal chunks. TRL's CP guide sets `pad_to_multiple_of = 2 * cp_size`.

    ## Fix
    Set `pad_to_multiple_of` to 2 x cp_size and use a `--seq-len` divisible by it.

    ## Example
    `--cp-size 4 --seq-len 1020` fails (1020 % 8 = 4); `--seq-len 1024` passes.

    ## References
    - https://github.com/huggingface/trl/pull/3994
    - https://huggingface.co/docs/trl/distributing_training
    """
    cp = _cp(ctx)
    if cp <= 1:
        return na("no context parallelism")
    if ctx.world % cp:
        # the degree itself is wrong (SP016): a length fitted to it would be fitted to a value that changes
        return na(f"cp {cp} is itself not a valid degree here (SP016 names the valid ones)")
    unit = 2 * cp
    if ctx.files is not None:
        pad = as_int(ctx.arg("pad_to_multiple_of"))
        if pad is None or pad % unit:
            return fail(f"pad_to_multiple_of is {ctx.arg('pad_to_multiple_of')!r}: ring attention needs lengths "
                        f"divisible by 2 x cp = {unit}", f"set pad_to_multiple_of={unit}")
    seq = ctx.plan.seq_len
    if seq % unit:
        down = seq - seq % unit
        lengths = f"{down} (or {down + unit})" if down else f"{unit}"
        return fail(f"seq_len {seq} is not divisible by 2 x cp = {unit}",
                    f"use --seq-len {lengths} and pad_to_multiple_of={unit}", {"seq_len": down or unit})
    return ok(f"seq_len {seq} divisible by {unit}")


@rule(id="SP013", name="ring-cp-rejects-packing", severity="error", seed="CP-04", auto_fix=True,
      reads=("plan.cp_size", "plan.packing", "files.trl_args.eval_packing"))
def ring_cp_rejects_packing(ctx: Context) -> Result:
    """SFTTrainer 1.16 rejects packing with context parallelism.

    ## Why
    CP drops the per-layer attention mask and uses `is_causal=True`; packed documents would attend across their
    boundaries. SFTTrainer raises "Packing is not compatible with context parallelism (`cp_size > 1`)" for
    `packing=True` or `eval_packing=True` (older docs recommended packing with CP: the code now forbids it).

    ## Fix
    `--no-packing` (and `eval_packing=False`) with `--cp-size`.

    ## Example
    `--cp-size 2 --packing` fails; `--cp-size 2 --no-packing` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/sft_trainer.py
    - https://github.com/huggingface/trl/pull/6843
    """
    if _cp(ctx) <= 1:
        return na("no context parallelism")
    if ctx.plan.packing or truthy(ctx.arg("eval_packing")):
        return fail(f"packing with cp_size {_cp(ctx)}: SFTTrainer raises", "use --no-packing (and eval_packing=False)",
                    {"packing": False})
    return ok("no packing")


@rule(id="SP014", name="cp-and-sp-exclusive", severity="error", auto_fix=True,
      reads=("plan.cp_size", "plan.sp_size"))
def cp_and_sp_exclusive(ctx: Context) -> Result:
    """Context parallelism and Ulysses sequence parallelism cannot be combined.

    ## Why
    accelerate's ParallelismConfig raises "Context Parallelism (CP) and Sequence Parallelism (SP) are mutually
    exclusive" when both sizes exceed 1 (they also need different backends: FSDP2 and DeepSpeed).

    ## Fix
    Keep one: `--sp-size` with DeepSpeed, or `--cp-size` with FSDP2.

    ## Example
    `--sp-size 2 --cp-size 2` fails; `--sp-size 2` alone passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/parallelism_config.py
    """
    if _sp(ctx) <= 1 and _cp(ctx) <= 1:
        return na("no SP or CP")
    if _sp(ctx) <= 1 or _cp(ctx) <= 1:
        return ok("only one of SP and CP")
    fix = {"cp_size": 1} if ctx.plan.backend == "deepspeed" else {"sp_size": 1}
    return fail(f"sp_size {_sp(ctx)} and cp_size {_cp(ctx)} are both set", "keep --sp-size (DeepSpeed) or "
                "--cp-size (FSDP2), not both", fix)


@rule(id="SP015", name="generating-trainers-reject-sp-cp", severity="error", auto_fix=True,
      reads=("plan.trainer", "plan.sp_size", "plan.cp_size"))
def generating_trainers_reject_sp_cp(ctx: Context) -> Result:
    """GRPO and RLOO do not support sequence or context parallelism.

    ## Why
    GRPOConfig and RLOOConfig raise "does not support sequence-dim parallelism (`parallelism_config.cp_size > 1` or
    `parallelism_config.sp_size > 1`)": the trainer builds model inputs after generation, which the sequence
    sharding would split.

    ## Fix
    `--sp-size 1 --cp-size 1` for GRPO/RLOO; shorten completions or use ZeRO-3/offload for memory.

    ## Example
    `--trainer grpo --sp-size 2` fails; `--trainer sft --sp-size 2` is checked by the other SP rules.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/rloo_config.py
    """
    if ctx.plan.trainer not in ("grpo", "rloo"):
        return na("not GRPO/RLOO")
    if _sp(ctx) <= 1 and _cp(ctx) <= 1:
        return ok("no SP/CP")
    return fail(f"{ctx.plan.trainer.upper()} rejects sp_size {_sp(ctx)} / cp_size {_cp(ctx)}",
                "use --sp-size 1 --cp-size 1", {"sp_size": 1, "cp_size": 1})


PAIRED_TRAINERS = ("dpo", "kto", "gkd")
"""Trainers whose batches are pairs or prompt/completion masks built by their own collators (DPO, KTO, GKD)."""


@rule(id="SP017", name="paired-trainers-reject-sp-cp", severity="error", auto_fix=True,
      reads=("plan.trainer", "plan.sp_size", "plan.cp_size"))
def paired_trainers_reject_sp_cp(ctx: Context) -> Result:
    """DPO, KTO and GKD batches cannot be split by Ulysses sequence parallelism or ring-attention context parallelism.

    ## Why
    Ulysses (DeepSpeed, `--sp-size`): transformers wraps the dataloader in DeepSpeed's UlyssesSPDataLoaderAdapter,
    which raises "Ulysses SP requires `position_ids` in every dataloader batch" (deepspeed 0.19.8
    runtime/sequence_parallel/ulysses_sp.py) and pops `labels`; the DPO, KTO and GKD collators emit neither (they
    send prompt/completion ids and masks, GKD its chat-ML batch). Ring attention (FSDP2, `--cp-size`): the Trainer
    shards only input_ids, labels, shift_labels, attention_mask and position_ids along the sequence
    (transformers trainer.py), and DPO/KTO then combine the sharded ids with their full-length `completion_mask`
    ("The size of tensor a must match the size of tensor b"). Only SFT splits its sequences this way in TRL 1.16.

    ## Fix
    `--sp-size 1 --cp-size 1` for DPO/KTO/GKD: gradient checkpointing, a smaller micro-batch, ZeRO-3 or offload for
    long pairs.

    ## Example
    `--trainer dpo --sp-size 2` fails; `--trainer sft --sp-size 2` is checked by the other SP rules.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/sequence_parallel/ulysses_sp.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/dpo_trainer.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/kto_trainer.py
    """
    if ctx.plan.trainer not in PAIRED_TRAINERS:
        return na("not DPO/KTO/GKD")
    if _sp(ctx) <= 1 and _cp(ctx) <= 1:
        return ok("no SP/CP")
    return fail(f"{ctx.plan.trainer.upper()} batches cannot be split: sp_size {_sp(ctx)} / cp_size {_cp(ctx)}",
                "use --sp-size 1 --cp-size 1", {"sp_size": 1, "cp_size": 1})


@rule(id="SP016", name="cp-divides-world-size", severity="error", auto_fix=True,
      reads=("plan.cp_size", "plan.num_processes", "files.accelerate.parallelism_config"))
def cp_divides_world_size(ctx: Context) -> Result:
    """The context-parallel size must divide the training processes, and CP needs FSDP sharding beside it.

    ## Why
    accelerate checks that dp_replicate x dp_shard x cp equals num_processes, and rejects CP with pure replication
    (`dp_replicate_size > 1` and `dp_shard_size == 1`): CP composes with FSDP's shard dimension.

    ## Fix
    Choose a cp size that divides the number of training processes; in the YAML put the remaining factor in
    `parallelism_config_dp_shard_size`, not `dp_replicate_size`.

    ## Example
    8 processes with cp 3 fails; cp 2 with dp_shard 4 passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/parallelism_config.py
    """
    cp = _cp(ctx)
    if cp <= 1:
        return na("no context parallelism")
    world = ctx.world
    if world % cp:
        options = [d for d in divisors(world) if d > 1]
        return fail(f"cp {cp} does not divide the {world} training processes",
                    f"valid --cp-size values on {world} GPUs: {join(options) or 'none (1 GPU)'}",
                    {"cp_size": max([d for d in options if d <= cp], default=1)})
    par = ctx.files.parallelism if ctx.files is not None else {}
    if par:
        rep = as_int(par.get("parallelism_config_dp_replicate_size")) or 1
        shard = as_int(par.get("parallelism_config_dp_shard_size")) or 1
        if rep > 1 and shard == 1:
            return fail(f"cp {cp} with dp_replicate {rep} and dp_shard 1: CP cannot be used with pure replication",
                        f"set parallelism_config_dp_shard_size to {rep} and dp_replicate_size to 1")
        if rep * shard * cp != world:
            return fail(f"dp_replicate {rep} x dp_shard {shard} x cp {cp} = {rep * shard * cp}, not the {world} "
                        "processes", f"set parallelism_config_dp_shard_size to {world // cp}")
    return ok(f"cp {cp} divides {world}")


RULES = (ulysses_heads_divisible, ulysses_needs_deepspeed, ulysses_attention_implementation, ulysses_sdpa_with_packing,
         ulysses_attn_matches_model, sp_divides_world_size, ulysses_zero_stage, ulysses_seq_len_divisible,
         ulysses_rejects_dft_loss, ring_cp_needs_fsdp2, ring_cp_needs_sdpa, ring_cp_seq_len_divisible,
         ring_cp_rejects_packing, cp_and_sp_exclusive, generating_trainers_reject_sp_cp, paired_trainers_reject_sp_cp,
         cp_divides_world_size)
