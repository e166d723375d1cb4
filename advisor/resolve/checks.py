"""Input checks: values that are wrong whatever the hardware (a grammar, a bound, a choice), and values that
contradict the hardware. Each is a one-line usage error with the valid range as its hint."""

from __future__ import annotations

from advisor.core import request as R
from advisor.core.errors import AdvisorError
from advisor.core.request import Request
from advisor.core.target import Target


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_text(flag: str, value: str | None) -> None:
    """A text value that may reach a generated file: printable, valid UTF-8, one line (R.text_problem)."""
    if value is None:
        return
    problem = R.text_problem(value)
    if problem:
        raise AdvisorError(f"{flag} {problem}: it cannot be written safely into the bundle's scripts",
                           hint=f"pass {flag} without control characters or newlines")


def check_attn(attn: str | None) -> None:
    """--attn: an implementation transformers accepts by name, or a hub kernel id `org/name[@rev][:function]`."""
    if attn is None or attn in R.ATTN_BUILTIN or R.HUB_KERNEL_ID.match(attn):
        return
    # quoted: a stray space ('sdpa ') is the usual mistake, and unquoted it does not show
    shown = repr(attn) if R.text_problem(attn) is None and len(attn) <= 80 else "(that value)"
    raise AdvisorError(f"--attn {shown} is neither an attention implementation transformers knows nor a hub kernel id",
                       hint=f"use one of {', '.join(R.ATTN_BUILTIN)}, or a hub kernel such as "
                            "kernels-community/flash-attn2")


NVME_PATH_MAX = 4096
"""PATH_MAX of Linux (limits.h): a longer path cannot be opened."""


def check_nvme_path(req: Request) -> None:
    """--nvme-path: an absolute folder path, one printable line, for NVMe offload only. It is written into
    ds_config.json (JSON-encoded) and launch.sh (shell-quoted); DeepSpeed joins its swap folders onto it
    (os.path.join), which a relative path would put under wherever the run starts."""
    path = req.nvme_path
    if path is None:
        return
    check_text("--nvme-path", path)
    if req.offload_device != "nvme":
        raise AdvisorError("--nvme-path is the folder DeepSpeed swaps to when it offloads to NVMe",
                           hint="add --offload-device nvme (with --offload optimizer or all), or drop --nvme-path")
    if not path.startswith("/") or len(path) > NVME_PATH_MAX:
        raise AdvisorError(f"--nvme-path must be an absolute path (starting with /) of at most {NVME_PATH_MAX} "
                           "characters",
                           hint="for example --nvme-path /local_nvme/$USER")


def check_request(req: Request, *, applicable: bool = True) -> None:
    """Values that are wrong whatever the hardware: one-line errors with the valid range as the hint.
    `applicable=False` skips the check that each pin means something for the trainer (the rules' own tests build
    such requests on purpose, to exercise the rules that catch the same mistakes in users' files)."""
    for name in ("model", "gpu", "hardware", "attn"):
        check_text(_flag(name), getattr(req, name))
    check_attn(req.attn)
    choices = {"trainer": R.TRAINERS, "method": R.METHODS, "backend": R.BACKENDS, "offload": R.OFFLOADS,
               "offload_device": R.OFFLOAD_DEVICES, "precision": R.PRECISIONS, "vllm": R.VLLM_MODES,
               "ref_model": R.REF_MODELS}
    for name, allowed in choices.items():
        value = getattr(req, name)
        if value is not None and value not in allowed:
            shown = repr(value) if R.text_problem(str(value)) is None and len(str(value)) <= 40 else "(that value)"
            raise AdvisorError(f"{_flag(name)} {shown} is not one of {', '.join(allowed)}",
                               hint=f"use one of: {', '.join(allowed)}")
    for name, (low, high, why) in R.LIMITS.items():
        value = getattr(req, name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise AdvisorError(f"{_flag(name)} must be a whole number, got {value!r}", hint=f"for example {_flag(name)} 1")
        if value < low:
            raise AdvisorError(f"{_flag(name)} must be at least {low}, got {value}", hint=f"for example {_flag(name)} "
                               f"{max(low, 1)}")
        if value > high:
            raise AdvisorError(f"{_flag(name)} {value} is above {high:,}: {why}", hint=f"use at most {high}")
    if req.vllm_gpus == 0:
        # a plan's vllm_gpus is 0 without a server (LIMITS allow it there); pinned, 0 would read as unset and the
        # planner would choose a count the user never asked for
        raise AdvisorError("--vllm-gpus must be at least 1, got 0",
                           hint="for example --vllm-gpus 1, or leave it out and the planner chooses")
    if req.vllm_mem_fraction is not None and not (isinstance(req.vllm_mem_fraction, (int, float))
                                                   and 0.0 < req.vllm_mem_fraction < 1.0):
        raise AdvisorError(f"--vllm-mem-fraction {req.vllm_mem_fraction} is outside (0, 1)", hint="for example 0.3")
    if req.max_completion_len and req.seq_len and req.max_completion_len >= req.seq_len:
        raise AdvisorError("--max-completion-len must be shorter than --seq-len (which counts prompt + completion)",
                           hint=f"for example --seq-len {req.max_completion_len * 2}")
    if req.tokens is not None and req.steps is not None:
        raise AdvisorError("--tokens and --steps both size the job: give one",
                           hint="--tokens counts trained tokens; --steps counts optimizer steps")
    check_text("--teacher", req.teacher)
    check_nvme_path(req)
    if applicable:
        check_applicable(req)


# Flag -> the trainers it means something for. A pin outside them would be dropped silently (written into the bundle
# as if it had been honoured): it is a usage error that names it.
_TRAINERS_OF_FLAG: dict[str, tuple[str, ...]] = {
    "num_generations": R.GENERATING_TRAINERS,
    "max_completion_len": (*R.GENERATING_TRAINERS, "gkd"),
    "vllm": R.GENERATING_TRAINERS,
    "vllm_gpus": R.GENERATING_TRAINERS,
    "vllm_mem_fraction": R.GENERATING_TRAINERS,
    "ref_model": (*R.PREFERENCE_TRAINERS, *R.GENERATING_TRAINERS),
    "teacher": ("gkd",),
    "packing": ("sft",),
}
_WHAT_IT_IS = {
    "num_generations": "completions per prompt, for the trainers that sample (grpo, rloo)",
    "max_completion_len": "the sampled part of a sequence (grpo, rloo, gkd)",
    "vllm": "vLLM generates completions for grpo and rloo",
    "vllm_gpus": "vLLM generates completions for grpo and rloo",
    "vllm_mem_fraction": "vLLM generates completions for grpo and rloo",
    "ref_model": "the frozen reference of dpo and kto (grpo/rloo: the KL reference, copy or none)",
    "teacher": "the model gkd distils into the student",
    "packing": "SFTConfig packing; the other trainers do not pack",
}


def check_applicable(req: Request) -> None:
    """Every pinned knob must mean something for this trainer and the other pins: none is dropped silently."""
    trainer = req.trainer
    for name, trainers in _TRAINERS_OF_FLAG.items():
        value = getattr(req, name)
        if value is None or trainer not in trainers:
            if value is not None and not (name == "packing" and value is False):
                raise AdvisorError(f"{_flag(name)} does not apply to --trainer {trainer}: {_WHAT_IT_IS[name]}",
                                   hint=f"drop {_flag(name)}, or use --trainer {trainers[0]}")
    if trainer in R.GENERATING_TRAINERS and req.ref_model not in (None, "copy", "none"):
        raise AdvisorError(f"--ref-model {req.ref_model} does not apply to --trainer {trainer}: its reference is a "
                           "KL term, a copy of the policy (copy) or none", hint="use --ref-model copy or none")
    if req.ref_model == "bema" and trainer != "dpo":
        raise AdvisorError("--ref-model bema is DPO's (trl.experimental.bema_for_ref_model wraps DPOTrainer)",
                           hint="use --trainer dpo, or --ref-model copy")
    if req.ref_model in ("none", "bema") and trainer in R.PREFERENCE_TRAINERS and req.method == "full":
        why = ("TRL 1.16 builds its own reference copy when a fully trained model gets none (dpo_trainer.py, "
               "kto_trainer.py): it would be a copy anyway" if req.ref_model == "none" else "")
        if why:
            raise AdvisorError(f"--ref-model none with --method full: {why}",
                               hint="use --ref-model copy or precompute (or --method lora, whose reference is the "
                                    "base model with the adapter off)")
    if req.ref_model == "copy" and trainer in R.PREFERENCE_TRAINERS and req.method in ("lora", "qlora"):
        # the bundle passes ref_model=None for an adapter: TRL then scores the reference with the adapter disabled
        # (dpo_trainer.py / kto_trainer.py "If PEFT is used, the reference model is not needed"); a pinned copy would
        # be written as planned and never loaded
        raise AdvisorError(f"--ref-model copy with --method {req.method}: the reference of an adapter is the base model "
                           "with the adapter off (TRL disables it for the reference pass), not a second copy",
                           hint="drop --ref-model (or use --ref-model none, or precompute to score it once up front)")
    if req.ref_model == "bema" and req.method in ("lora", "qlora"):
        raise AdvisorError("--ref-model bema needs --method full: BEMA averages the trained weights into a copy of "
                           "the whole model (trl BEMACallback), which an adapter does not have",
                           hint="use --method full, or --ref-model none with LoRA")
    if trainer == "gkd" and not req.teacher:
        raise AdvisorError("--trainer gkd needs --teacher MODEL: GKD distils a teacher into the student",
                           hint="for example --model qwen2.5-0.5b --teacher qwen2.5-1.5b (the same vocabulary)")
    if req.vllm == "none" and (req.vllm_gpus or req.vllm_mem_fraction):
        flag = "--vllm-gpus" if req.vllm_gpus else "--vllm-mem-fraction"
        raise AdvisorError(f"{flag} with --vllm none: there is no vLLM to give it to", hint=f"drop {flag}")
    if req.vllm == "colocate" and req.vllm_gpus:
        raise AdvisorError("--vllm-gpus with --vllm colocate: colocated vLLM shares the training GPUs",
                           hint="drop --vllm-gpus, or use --vllm server")
    if req.vllm == "server" and req.vllm_mem_fraction:
        raise AdvisorError("--vllm-mem-fraction with --vllm server: the server's GPUs are its own (it takes 0.9 of "
                           "them)", hint="drop --vllm-mem-fraction, or use --vllm colocate")
    if req.vllm_gpus and req.vllm_mem_fraction:
        raise AdvisorError("--vllm-gpus (server) and --vllm-mem-fraction (colocate) exclude each other",
                           hint="keep one of them")
    if req.lora_r is not None and req.method == "full":
        raise AdvisorError("--lora-r with --method full: full fine-tuning has no adapter", hint="drop --lora-r")
    if req.zero is not None and req.backend not in (None, "deepspeed"):
        raise AdvisorError(f"--zero {req.zero} with --backend {req.backend}: ZeRO stages are DeepSpeed's",
                           hint="use --backend deepspeed, or drop --zero")
    if req.offload_device is not None and req.offload == "none":
        raise AdvisorError("--offload-device with --offload none: nothing is offloaded", hint="drop --offload-device")
    if req.zero == 0 and req.backend in (None, "deepspeed"):
        # DeepSpeed's stage 0 shards nothing (DDP with DeepSpeed's engine), and with an optimizer offload accelerate's
        # DeepSpeedCPUAdam asserts on the fp32 master copy stage 0 keeps on the GPU (deepspeed ops/adam/cpu_adam.py)
        raise AdvisorError("--zero 0 is DeepSpeed without ZeRO: every GPU holds everything, as with DDP, and it "
                           "cannot offload (stage 0 keeps the optimizer's master weights on the GPU)",
                           hint="use --backend ddp for plain data parallelism, or --zero 1, 2 or 3")
    if req.offload_device == "nvme" and req.backend == "fsdp2":
        # FSDP2's CPUOffloadPolicy moves parameters to host RAM only; NVMe offload is DeepSpeed ZeRO-Infinity's
        raise AdvisorError("--offload-device nvme with --backend fsdp2: FSDP2 offloads to CPU memory only "
                           "(torch CPUOffloadPolicy); NVMe offload is DeepSpeed ZeRO-3's (ZeRO-Infinity)",
                           hint="use --backend deepspeed --zero 3 for NVMe, or --offload-device cpu with fsdp2")
    if req.offload_device == "nvme" and req.zero is not None and req.zero < 3:
        # stage_1_and_2.py takes any offload device as cpu_offload: the states would sit in host RAM, not on NVMe
        raise AdvisorError(f"--offload-device nvme with --zero {req.zero}: DeepSpeed offloads to NVMe under ZeRO-3 "
                           "only (ZeRO-1/2 keep offloaded optimizer states in CPU memory whatever the device says)",
                           hint="use --zero 3 for NVMe, or --offload-device cpu")
    if req.unsloth and req.backend == "fsdp2":
        # The planner leaves FSDP2 out of Unsloth's plans (advisor.search.candidates): Unsloth's own FSDP2 path needs
        # its wrap switched on (UNSLOTH_FSDP2=1, rule CMP003), which the bundles do not set up
        raise AdvisorError("--unsloth with --backend fsdp2: trl-advisor plans Unsloth on one GPU, DDP or DeepSpeed; "
                           "Unsloth's FSDP2 needs its own wrap (UNSLOTH_FSDP2=1), which the bundles do not set up",
                           hint="use --backend ddp or --backend deepspeed --zero 2, or drop --unsloth")
    if req.offload not in (None, "none") and req.backend in ("single", "ddp"):
        raise AdvisorError(f"--offload {req.offload} with --backend {req.backend}: offloading is DeepSpeed's or FSDP2's",
                           hint="use --backend deepspeed (or fsdp2 for --offload all)")


def check_against_target(req: Request, target: Target) -> None:
    """Values that contradict the hardware whatever the plan: one-line errors with the fix."""
    server = req.vllm == "server" or (req.vllm is None and bool(req.vllm_gpus))
    training = target.world_size - ((req.vllm_gpus or 1) * target.nodes if server else 0)
    if req.backend == "single" and training > 1:
        raise AdvisorError(f"--backend single trains in one process, and {target.describe()} gives it {training} "
                           "GPUs", hint="use --gpus 1 for one GPU, or --backend ddp (deepspeed, fsdp2) for all of them")
    if req.vllm_gpus and req.vllm_gpus > target.gpus_per_node:
        raise AdvisorError(f"--vllm-gpus {req.vllm_gpus} is more than the {target.gpus_per_node} GPUs per node",
                           hint=f"use at most --vllm-gpus {max(1, target.gpus_per_node - 1)}")
    if req.vllm_gpus and req.vllm in (None, "server") and req.vllm_gpus >= target.gpus_per_node:
        hint = (f"give vLLM fewer GPUs (at most {target.gpus_per_node - 1}), or add GPUs with --gpus"
                if target.gpus_per_node > 1 else "server mode needs 2 GPUs or more: add --gpus, or use --vllm colocate")
        raise AdvisorError(f"--vllm-gpus {req.vllm_gpus} leaves no GPU to train on ({target.gpus_per_node} per node)",
                           hint=hint)
