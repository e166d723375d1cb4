"""Distributed-backend rules (DS*): DeepSpeed ZeRO and FSDP2 choices that fail or silently misbehave."""

from __future__ import annotations

import re

from advisor.core.files import Unresolved
from rules.common import NO_FILES, as_int, truthy, uses_zero3
from rules.model import Context, Result, fail, na, ok, unknown
from rules.registry import rule


@rule(id="DS001", name="zero3-rejects-device-map", severity="error", seed="DS-03",
      reads=("plan.backend", "plan.zero_stage", "files.model_init_kwargs"))
def zero3_rejects_device_map(ctx: Context) -> Result:
    """Under DeepSpeed ZeRO-3 the model must be loaded without a `device_map`.

    ## Why
    ZeRO-3 partitions parameters while they load (zero.Init); a `device_map` asks accelerate to place whole
    modules itself. transformers raises "DeepSpeed Zero-3 is not compatible with passing a `device_map`".
    TRL passes `device_map=None` under DeepSpeed on its own; the error comes from a device_map the user adds
    (in `model_init_kwargs` or a `from_pretrained` call).

    ## Fix
    Remove `device_map` from `model_init_kwargs` / `from_pretrained(...)`; let ZeRO-3 place the shards.

    ## Example
    `model_init_kwargs={"device_map": "auto"}` with a ZeRO-3 ds_config fails; without device_map it passes.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/integrations/accelerate.py
    - https://github.com/huggingface/accelerate/issues/2543
    """
    if ctx.files is None:
        return na(NO_FILES)
    if not uses_zero3(ctx):
        return na("not ZeRO-3")
    device_map = ctx.files.model_init_kwargs.get("device_map")
    if device_map is None:
        return ok("no device_map")
    if isinstance(device_map, Unresolved):
        return unknown(f"device_map is computed at run time ({device_map}); under ZeRO-3 it must be None")
    return fail(f"device_map={device_map!r} is passed to from_pretrained under ZeRO-3",
                "remove device_map (TRL passes device_map=None under DeepSpeed by itself)")


@rule(id="DS002", name="offload-needs-sharding-backend", severity="error", auto_fix=True,
      reads=("plan.offload", "plan.backend"))
def offload_needs_sharding_backend(ctx: Context) -> Result:
    """CPU/NVMe offload exists only in DeepSpeed ZeRO; FSDP2 offloads parameters, gradients and optimizer together.

    ## Why
    Plain DDP and single-GPU training have no offload. DeepSpeed offloads the optimizer (`offload_optimizer`,
    ZeRO 1-3) and parameters (`offload_param`, ZeRO-3). FSDP2's only switch, `fsdp_offload_params`
    (torch `CPUOffloadPolicy`), moves parameters, gradients and optimizer states at once: there is no
    optimizer-only offload under FSDP2.

    ## Fix
    With DDP or one GPU: `--backend deepspeed` (ZeRO-2 + optimizer offload is the usual single-node choice).
    With FSDP2: `--offload all`, or DeepSpeed for optimizer-only offload.

    ## Example
    `--backend ddp --offload optimizer` fails; `--backend deepspeed --zero 2 --offload optimizer` passes.

    ## References
    - https://www.deepspeed.ai/docs/config-json/#zero-optimizations-for-fp16-training
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/utils/dataclasses.py
    """
    p = ctx.plan
    if p.offload == "none":
        return na("no offload")
    if p.backend == "deepspeed":
        return ok("DeepSpeed ZeRO offload")
    if p.backend == "fsdp2":
        if p.offload == "all":
            return ok("FSDP2 fsdp_offload_params")
        return fail("FSDP2 cannot offload only the optimizer: fsdp_offload_params moves parameters, gradients and "
                    "optimizer states together", "use --offload all with FSDP2, or --backend deepspeed for "
                    "optimizer-only offload", {"offload": "all"})
    return fail(f"--offload {p.offload} needs DeepSpeed or FSDP2; backend {p.backend} has no offload",
                "use --backend deepspeed (ZeRO-2 or 3) with the offload", {"backend": "deepspeed",
                                                                           "zero_stage": 3 if p.offload == "all"
                                                                           else 2})


@rule(id="DS003", name="offload-all-needs-zero3", severity="error", auto_fix=True,
      reads=("plan.backend", "plan.zero_stage", "plan.offload"))
def offload_all_needs_zero3(ctx: Context) -> Result:
    """Parameter offload (`offload_param`) is a ZeRO-3 feature; below stage 3 DeepSpeed ignores it.

    ## Why
    DeepSpeed documents `offload_param` as "valid only with stage 3": stages 1 and 2 keep full parameters on
    every GPU and never read it. A plan that offloads parameters at ZeRO-1/2 would be sized for memory it does
    not save.

    ## Fix
    Use `--zero 3` for parameter offload, or `--offload optimizer` at ZeRO-1/2.

    ## Example
    `--backend deepspeed --zero 2 --offload all` fails; `--zero 3 --offload all` passes.

    ## References
    - https://www.deepspeed.ai/docs/config-json/#parameter-offloading
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/config.py
    """
    p = ctx.plan
    if p.backend != "deepspeed" or p.offload != "all":
        return na("no DeepSpeed parameter offload")
    if p.zero_stage == 3:
        return ok("ZeRO-3 parameter offload")
    return fail(f"--offload all at ZeRO-{p.zero_stage}: parameters are only offloaded at ZeRO-3",
                "use --zero 3, or --offload optimizer", {"zero_stage": 3})


@rule(id="DS004", name="nvme-offload-needs-async-io", severity="warning", seed="DS-10",
      reads=("plan.offload", "plan.offload_device"))
def nvme_offload_needs_async_io(ctx: Context) -> Result:
    """NVMe offload needs DeepSpeed's `async_io` op (libaio) and a fast local NVMe path.

    ## Why
    ZeRO-Infinity reads and writes the NVMe swap through the `async_io` op, built against libaio
    (`libaio-dev`, >= 0.3.112). When it is not compatible (`ds_report` shows async_io [NO]) the run fails at
    initialisation; pinned swap buffers also need host RAM.

    ## Fix
    Install `libaio-dev`, check `ds_report` lists async_io as compatible, point `nvme_path` at a local NVMe
    drive; or use `--offload-device cpu` when host RAM allows.

    ## Example
    `--offload optimizer --offload-device nvme` warns; `--offload-device cpu` passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/issues/3000
    - https://www.deepspeed.ai/tutorials/zero/
    """
    p = ctx.plan
    if p.offload == "none":
        return na("no offload")
    if p.offload_device != "nvme":
        return ok(f"offload to {p.offload_device}")
    return fail("NVMe offload needs DeepSpeed's async_io op (libaio) and a local NVMe path",
                "apt install libaio-dev, check `ds_report` shows async_io [OKAY], set nvme_path to a local NVMe "
                "drive; or use --offload-device cpu")


@rule(id="DS005", name="zero-stage-needs-deepspeed", severity="error", auto_fix=True,
      reads=("plan.backend", "plan.zero_stage"))
def zero_stage_needs_deepspeed(ctx: Context) -> Result:
    """A ZeRO stage only means something under DeepSpeed.

    ## Why
    ZeRO stages are DeepSpeed's `zero_optimization.stage`. FSDP2 always shards parameters, gradients and
    optimizer states (its knob is `fsdp_reshard_after_forward`); DDP shards nothing. A plan that pairs
    `--zero N` with another backend is sized for sharding it will not get.

    ## Fix
    Use `--backend deepspeed` with `--zero`, or drop `--zero` for FSDP2/DDP.

    ## Example
    `--backend fsdp2 --zero 3` fails; `--backend deepspeed --zero 3` passes.

    ## References
    - https://huggingface.co/docs/accelerate/concept_guides/fsdp_and_deepspeed
    """
    p = ctx.plan
    if p.zero_stage == 0:
        return na("no ZeRO stage")
    if p.backend == "deepspeed":
        return ok(f"DeepSpeed ZeRO-{p.zero_stage}")
    return fail(f"ZeRO-{p.zero_stage} requested with backend {p.backend}", "use --backend deepspeed, or leave "
                "--zero unset for FSDP2/DDP", {"backend": "deepspeed"})


@rule(id="DS006", name="zero3-init-flag-off", severity="warning", seed="DS-11",
      reads=("plan.backend", "plan.zero_stage", "files.accelerate.deepspeed_config.zero3_init_flag"))
def zero3_init_flag_off(ctx: Context) -> Result:
    """ZeRO-3 with `zero3_init_flag: false` loads the full model on every rank before partitioning it.

    ## Why
    With ZeRO-Init (zero3_init_flag true, accelerate's default at stage 3) each rank materialises only its
    shard. Turned off, every process loads the whole checkpoint into CPU RAM first: 8 processes x a 70B model
    in bf16 is ~1.1 TB of host RAM. PEFT's QLoRA + ZeRO-3 recipe requires it on.

    ## Fix
    Set `zero3_init_flag: true` in the accelerate YAML's deepspeed_config (or drop the key).

    ## Example
    An accelerate YAML with zero_stage 3 and zero3_init_flag false warns; true passes.

    ## References
    - https://huggingface.co/docs/peft/accelerate/deepspeed
    - https://huggingface.co/docs/accelerate/usage_guides/deepspeed
    """
    if ctx.files is None or not ctx.files.accelerate:
        return na("no accelerate YAML")
    if not uses_zero3(ctx):
        return na("not ZeRO-3")
    flag = ctx.files.accelerate_ds.get("zero3_init_flag")
    if flag is None or truthy(flag):
        return ok("ZeRO-Init on")
    return fail(f"zero3_init_flag is false in {ctx.files.accelerate_name}: every rank loads the full model into "
                "host RAM before partitioning", "set zero3_init_flag: true")


@rule(id="DS007", name="zeropp-hpz-partition-size", severity="warning", seed="DS-12",
      reads=("files.ds_config.zero_optimization.zero_hpz_partition_size", "target.nodes", "target.gpus_per_node"))
def zeropp_hpz_partition_size(ctx: Context) -> Result:
    """ZeRO++ hierarchical partitioning (hpZ) only helps multi-node, with a partition size of GPUs per node.

    ## Why
    hpZ keeps a secondary copy of the weights inside each node so that the forward all-gather stays on NVLink;
    `zero_hpz_partition_size` must be the GPUs per node. On one node it costs memory and brings nothing, and
    users report stuck losses and NaN grad norms with mismatched sizes.

    ## Fix
    Set `zero_hpz_partition_size` to the GPUs per node on multi-node runs; leave it at 1 on a single node.

    ## Example
    zero_hpz_partition_size 8 on 2 nodes of 8 GPUs passes; 8 on one node warns.

    ## References
    - https://www.deepspeed.ai/tutorials/zeropp/
    - https://github.com/deepspeedai/DeepSpeed/issues/3654
    """
    if ctx.files is None or ctx.files.ds_config is None:
        return na("no DeepSpeed config")
    hpz = as_int(ctx.files.zero.get("zero_hpz_partition_size"))
    if hpz is None or hpz <= 1:
        return na("hpZ off")
    t = ctx.target
    if t.nodes > 1 and hpz == t.gpus_per_node:
        return ok(f"hpZ partition of {hpz} = GPUs per node")
    if t.nodes == 1:
        return fail(f"zero_hpz_partition_size {hpz} on a single node: hpZ only removes inter-node all-gathers",
                    "set zero_hpz_partition_size to 1 (off) on one node")
    return fail(f"zero_hpz_partition_size {hpz} differs from the {t.gpus_per_node} GPUs per node",
                f"set zero_hpz_partition_size to {t.gpus_per_node}")


@rule(id="DS008", name="auto-find-batch-size-with-zero3", severity="error", seed="DS-13",
      reads=("files.trl_args.auto_find_batch_size", "plan.backend", "plan.zero_stage"))
def auto_find_batch_size_with_zero3(ctx: Context) -> Result:
    """`auto_find_batch_size=True` is rejected under DeepSpeed ZeRO-3.

    ## Why
    transformers' Trainer raises "`auto_find_batch_size` isn't supported yet with DeepSpeed Zero-3" when the
    DeepSpeed plugin's stage is 3 (ZeRO-1/2 and FSDP are accepted).

    ## Fix
    Set `auto_find_batch_size=False` and pick `per_device_train_batch_size` yourself (the estimate says what
    fits), or use ZeRO-2.

    ## Example
    `SFTConfig(auto_find_batch_size=True)` with a ZeRO-3 ds_config fails; with ZeRO-2 it passes.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/trainer.py
    - https://github.com/huggingface/transformers/pull/29058
    """
    if ctx.files is None:
        return na(NO_FILES)
    if not truthy(ctx.arg("auto_find_batch_size")):
        return na("auto_find_batch_size off")
    if uses_zero3(ctx):
        return fail("auto_find_batch_size=True under DeepSpeed ZeRO-3 raises in Trainer",
                    "set auto_find_batch_size=False and pin per_device_train_batch_size, or use ZeRO-2")
    return ok(f"backend {ctx.plan.backend}")


@rule(id="DS009", name="fsdp-and-trainer-checkpointing-both-on", severity="error",
      reads=("files.accelerate.fsdp_config.fsdp_activation_checkpointing", "files.trl_args.gradient_checkpointing",
             "files.trl_args.activation_checkpointing"))
def fsdp_and_trainer_checkpointing(ctx: Context) -> Result:
    """FSDP's `fsdp_activation_checkpointing` and the trainer's gradient checkpointing cannot both be on.

    ## Why
    transformers 5.24's Trainer raises "`fsdp_config['activation_checkpointing']` ... and the
    `activation_checkpointing` training argument can't both be set to True". TRL turns `gradient_checkpointing`
    on by default (its `_BaseConfig`), and it is an alias of `activation_checkpointing` from transformers 5.23:
    any FSDP YAML with activation checkpointing (TRL's context_parallel_2gpu.yaml has it) fails with default TRL
    arguments.

    ## Fix
    Keep FSDP's activation checkpointing and pass `gradient_checkpointing=False` to the TRL config (or turn
    `fsdp_activation_checkpointing` off).

    ## Example
    fsdp_activation_checkpointing true with no gradient_checkpointing argument fails (TRL defaults it to True);
    adding `gradient_checkpointing: false` passes.

    ## References
    - https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/trainer.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/base_config.py
    """
    if ctx.files is None or not ctx.files.accelerate:
        return na("no accelerate YAML")
    if str(ctx.files.accelerate.get("distributed_type", "")).upper() != "FSDP":
        return na("not FSDP")
    if not truthy(ctx.files.accelerate_fsdp.get("fsdp_activation_checkpointing")):
        return na("FSDP activation checkpointing off")
    trainer_ckpt = ctx.arg("activation_checkpointing", ctx.arg("gradient_checkpointing", True))
    if not truthy(trainer_ckpt):
        return ok("trainer gradient_checkpointing=False")
    said = "set" if (ctx.has_arg("gradient_checkpointing") or ctx.has_arg("activation_checkpointing")) else \
        "left at TRL's default"
    return fail(f"fsdp_activation_checkpointing is on and the trainer's gradient_checkpointing is True ({said}): "
                "Trainer raises", "pass gradient_checkpointing=False in the TRL config (FSDP checkpoints the layers)")


@rule(id="DS010", name="fsdp-sharded-state-dict-final-save", severity="warning", seed="F-02",
      reads=("files.accelerate.fsdp_config.fsdp_state_dict_type",))
def fsdp_sharded_state_dict(ctx: Context) -> Result:
    """FSDP with `SHARDED_STATE_DICT` saves the final model as shards, not as a loadable Hugging Face model.

    ## Why
    Trainer.save_model gathers a full state dict only for FULL_STATE_DICT; with SHARDED_STATE_DICT it writes
    the distributed checkpoint format, which `from_pretrained` cannot read until it is merged.

    ## Fix
    Use `fsdp_state_dict_type: FULL_STATE_DICT` for the final save, or run `accelerate merge-weights` on the
    output folder after training.

    ## Example
    `fsdp_state_dict_type: SHARDED_STATE_DICT` warns; FULL_STATE_DICT passes.

    ## References
    - https://github.com/huggingface/transformers/issues/30491
    - https://huggingface.co/docs/accelerate/en/package_reference/fsdp
    """
    if ctx.files is None or not ctx.files.accelerate_fsdp:
        return na("no FSDP config")
    kind = str(ctx.files.accelerate_fsdp.get("fsdp_state_dict_type", "FULL_STATE_DICT")).upper()
    if kind != "SHARDED_STATE_DICT":
        return ok(kind)
    return fail("fsdp_state_dict_type SHARDED_STATE_DICT: the final model is saved as FSDP shards",
                "use FULL_STATE_DICT, or run `accelerate merge-weights OUTPUT_DIR/pytorch_model_fsdp_0 MERGED` after "
                "training")


@rule(id="DS011", name="deepspeed-multinode-launcher", severity="warning",
      reads=("files.accelerate.num_machines", "files.accelerate.distributed_type",
             "files.accelerate.deepspeed_config.deepspeed_multinode_launcher"))
def deepspeed_multinode_launcher(ctx: Context) -> Result:
    """Multi-node DeepSpeed through accelerate defaults to the pdsh launcher (ssh from the main node).

    ## Why
    With `deepspeed_multinode_launcher` unset accelerate uses `pdsh`: it runs `deepspeed --hostfile` from the
    main node and reaches the others over passwordless ssh. Under SLURM's `srun` (one accelerate per node) that
    starts every process several times or fails for lack of a hostfile; `standard` makes accelerate run torchrun
    on each node.

    ## Fix
    Set `deepspeed_multinode_launcher: standard` when each node runs its own `accelerate launch` (srun);
    keep pdsh only with a hostfile and passwordless ssh.

    ## Example
    num_machines 2, DEEPSPEED, no launcher key warns; `deepspeed_multinode_launcher: standard` passes.

    ## References
    - https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/commands/launch.py
    - https://huggingface.co/docs/accelerate/usage_guides/deepspeed
    """
    acc = (ctx.files.accelerate if ctx.files is not None else None) or {}
    if not acc:
        return na("no accelerate YAML")
    machines = as_int(acc.get("num_machines")) or 1
    if machines < 2 or str(acc.get("distributed_type", "")).upper() != "DEEPSPEED":
        return na("not multi-node DeepSpeed")
    launcher = ctx.files.accelerate_ds.get("deepspeed_multinode_launcher")
    if launcher is not None and str(launcher) != "pdsh":
        return ok(f"launcher {launcher}")
    return fail(f"{machines} machines with deepspeed_multinode_launcher {launcher or 'unset (pdsh)'}: pdsh needs a "
                "hostfile and passwordless ssh from the main node", "set deepspeed_multinode_launcher: standard "
                "when every node runs accelerate launch (srun)")


ARCH_SUFFIX = re.compile(r"\d+\.\d+[A-Za-z]+")
"""A TORCH_CUDA_ARCH_LIST entry with an arch-specific or family suffix: `9.0a`, `10.0a`, `12.0f` (`+PTX` is not
one: DeepSpeed splits it off before int())."""


def deepspeed_cuda_ops(ctx: Context) -> list[str]:
    """The CUDA ops DeepSpeed JIT-builds for this configuration (each goes through compute_capability_args).

    DeepSpeedCPUAdam is left out on purpose: on a CUDA machine DeepSpeed 0.19.8 builds it with the CPU accelerator's
    CPUOpBuilder (accelerator/cuda_accelerator.py, `_lazy_init_class_dict`), whose arguments never read the arch list.
    """
    p = ctx.plan
    ops: list[str] = []
    ds = ctx.files.ds_config if ctx.files is not None else None
    zero = ctx.files.zero if ctx.files is not None else {}

    def block(value) -> dict:  # a block of another type is reported by the file's own check (rule CFG010, FILES001)
        return value if isinstance(value, dict) else {}

    offload_opt = str(block(zero.get("offload_optimizer")).get("device", "none")).lower() if ds else "none"
    offload_par = str(block(zero.get("offload_param")).get("device", "none")).lower() if ds else "none"
    optimizer = (ds or {}).get("optimizer")
    if isinstance(optimizer, dict) and offload_opt not in ("cpu", "nvme"):
        kind = str(optimizer.get("type", "")).lower()
        torch_adam = truthy(block(optimizer.get("params")).get("torch_adam", False))
        if kind in ("adam", "adamw") and not torch_adam:
            ops.append("FusedAdam (the ds_config optimizer block, on the GPU)")
        elif kind == "lamb":
            ops.append("FusedLamb (the ds_config optimizer block)")
        elif kind == "lion":
            ops.append("FusedLion (the ds_config optimizer block)")
    if "nvme" in (offload_opt, offload_par) or (p.offload != "none" and p.offload_device == "nvme"):
        ops.append("async_io (NVMe offload)")
    if truthy(zero.get("zero_quantized_weights")) or truthy(zero.get("zero_quantized_gradients")):
        ops.append("quantizer (ZeRO++ quantized weights/gradients)")
    return ops


def launch_sets_arch_list(ctx: Context) -> tuple[str, str] | None:
    """How the launch script handles TORCH_CUDA_ARCH_LIST: ("clean", why) when it unsets it, rewrites it from its
    own value (the generated launch.sh strips suffixes) or sets it without suffix; ("suffix", value) when it sets a
    suffixed value; None when it does not touch it."""
    if ctx.files is None:
        return None
    for line in reversed(ctx.files.launch_lines()):
        if "TORCH_CUDA_ARCH_LIST" not in line:
            continue
        if re.search(r"\bunset\s+(-v\s+)?TORCH_CUDA_ARCH_LIST\b", line):
            return "clean", "launch.sh unsets TORCH_CUDA_ARCH_LIST"
        m = re.search(r"(?:^|[\s;])TORCH_CUDA_ARCH_LIST=(\S.*)$", line)
        if not m:
            continue
        value = m.group(1)
        if "$" in value:
            # A rewrite of its own value through sed or a ${VAR//...} substitution (the generated launch.sh);
            # any other expression (another variable, an appended entry) cannot be judged without running it.
            if "TORCH_CUDA_ARCH_LIST" in value and ("sed" in value or "${TORCH_CUDA_ARCH_LIST/" in value):
                return "clean", "launch.sh rewrites TORCH_CUDA_ARCH_LIST without arch suffixes before launching"
            continue
        value = value.split()[0].strip("'\"")
        if ARCH_SUFFIX.search(value):
            return "suffix", value
        return "clean", f"launch.sh sets TORCH_CUDA_ARCH_LIST={value}"
    return None


@rule(id="DS012", name="cuda-arch-suffix-breaks-deepspeed-op-build", severity="warning",
      reads=("plan.backend", "plan.offload", "plan.offload_device", "files.ds_config.optimizer",
             "files.ds_config.zero_optimization", "files.launch_sh"))
def cuda_arch_suffix_breaks_op_build(ctx: Context) -> Result:
    """DeepSpeed's JIT op builder crashes when TORCH_CUDA_ARCH_LIST holds an arch-specific suffix such as `9.0a`.

    ## Why
    DeepSpeed 0.19.8 sorts the entries of TORCH_CUDA_ARCH_LIST with
    `tuple(int(part.split('+')[0]) for part in cc.split('.'))` (op_builder/builder.py, `compute_capability_args`):
    `9.0a` gives `int('0a')` and every CUDA op build stops with
    "ValueError: invalid literal for int() with base 10: '0a'". PyTorch itself accepts `9.0a` (sm_90a, Hopper's
    wgmma kernels), and some CUDA images export it (an H200 image with TORCH_CUDA_ARCH_LIST=9.0a: every
    ZeRO run with a ds_config optimizer block failed at setup). The build happens for FusedAdam (an Adam/AdamW
    optimizer block without optimizer offload), async_io (NVMe offload) and ZeRO++ quantization. CPU optimizer
    offload is not affected: DeepSpeedCPUAdam is built by the CPU op builder, which never reads the arch list.
    The hardware probe does not record environment variables, so this is a warning about the configuration.

    ## Fix
    Strip the suffix before launching (`9.0a` -> `9.0`, `9.0a;10.0a` -> `9.0;10.0`), or unset
    TORCH_CUDA_ARCH_LIST so that DeepSpeed reads the capability from the GPUs. The launch.sh that
    `trl-advisor generate` writes for DeepSpeed plans strips the suffixes itself.

    ## Example
    A ds_config with `"optimizer": {"type": "AdamW"}` and a launch script that leaves TORCH_CUDA_ARCH_LIST alone
    warns; the generated launch.sh, which rewrites the variable without suffixes, passes.

    ## References
    - https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/op_builder/builder.py
    - https://github.com/deepspeedai/DeepSpeed/pull/8619
    - https://github.com/deepspeedai/DeepSpeed/issues/7589
    """
    if ctx.plan.backend != "deepspeed":
        return na("not DeepSpeed")
    ops = deepspeed_cuda_ops(ctx)
    if not ops:
        return na("DeepSpeed JIT-builds no CUDA op here (no ds_config optimizer block on the GPU, no NVMe offload, "
                  "no ZeRO++ quantization)")
    handled = launch_sets_arch_list(ctx)
    fix = ("strip the suffix before launching (9.0a -> 9.0), or unset TORCH_CUDA_ARCH_LIST; the launch.sh trl-advisor "
           "generates does this for DeepSpeed plans")
    if handled and handled[0] == "clean":
        return ok(handled[1], ops=ops)
    if handled:
        return fail(f"launch.sh sets TORCH_CUDA_ARCH_LIST={handled[1]}: DeepSpeed's build of {', '.join(ops)} "
                    "crashes on the suffix (ValueError: invalid literal for int())", fix, ops=ops)
    return fail(f"DeepSpeed JIT-builds {', '.join(ops)}: a TORCH_CUDA_ARCH_LIST entry with a suffix such as 9.0a "
                "makes the build crash (ValueError: invalid literal for int() with base 10: '0a')", fix, ops=ops)


RULES = (zero3_rejects_device_map, offload_needs_sharding_backend, offload_all_needs_zero3,
         nvme_offload_needs_async_io, zero_stage_needs_deepspeed, zero3_init_flag_off, zeropp_hpz_partition_size,
         auto_find_batch_size_with_zero3, fsdp_and_trainer_checkpointing, fsdp_sharded_state_dict,
         deepspeed_multinode_launcher, cuda_arch_suffix_breaks_op_build)
