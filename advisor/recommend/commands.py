"""An option as a request again: every knob of its plan pinned (`estimate` then predicts what the search chose), or
the user's own pins plus the hardware (`generate` then searches the same space and writes the bundle).

Only knobs that apply to the plan's trainer and structure are pinned (a ZeRO stage for DeepSpeed plans, a LoRA
rank for adapters, vLLM settings for GRPO/RLOO, ...): the request checks refuse a pin that would be ignored.
"""

from __future__ import annotations

import shlex
from dataclasses import fields
from typing import TYPE_CHECKING

from advisor.core import request as R
from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.recommend.hardware import Hardware

if TYPE_CHECKING:
    from advisor.recommend.option import Option, Recommendation

_SWITCHES = ("grad_ckpt", "liger", "packing")
"""Request booleans with a `--no-` form on the command line (argparse BooleanOptionalAction)."""


def hardware_request(req: Request, hw: Hardware) -> Request:
    """The user's request on this hardware: what `generate --gpu --gpus --nodes` would plan."""
    return req.with_(gpu=hw.gpu.id, gpus=hw.gpus_per_node, nodes=hw.nodes if hw.nodes > 1 else None)


def generate_request(rec: Recommendation, option: Option) -> Request:
    """What `generate` needs to write this option's bundle: the user's pins, the compared method, the hardware."""
    return hardware_request(rec.request.with_(method=rec.method), option.hardware)


def pinned_request(req: Request, hw: Hardware, plan: Plan) -> Request:
    """The request whose documented defaults are this plan: every knob the plan has a value for, pinned."""
    generating = plan.trainer in R.GENERATING_TRAINERS
    pins: dict = {
        "method": plan.method, "backend": plan.backend, "offload": plan.offload, "precision": plan.precision,
        "seq_len": plan.seq_len, "micro_batch": plan.micro_batch, "grad_accum": plan.grad_accum,
        "grad_ckpt": plan.grad_ckpt, "liger": plan.liger, "attn": plan.attn,
        # the search's global batch follows from micro x accum x dp; the job size and the teacher stay as asked
        "global_batch": None,
        # knobs that apply only to some plans: cleared here, set below where this plan has them (a user pin of one
        # the chosen plan does not use, --lora-r when full training won, would be refused as ignored)
        "zero": None, "offload_device": None, "lora_r": None, "packing": None, "sp_size": None, "cp_size": None,
        "unsloth": None, "num_generations": None, "max_completion_len": None, "vllm": None, "vllm_gpus": None,
        "vllm_mem_fraction": None, "ref_model": None,
    }
    if plan.uses_deepspeed:
        pins["zero"] = plan.zero_stage
    if plan.offload != "none":
        pins["offload_device"] = plan.offload_device
    if plan.method != "full":
        pins["lora_r"] = plan.lora_r
    if plan.trainer == "sft":
        pins["packing"] = plan.packing
    if plan.sp_size > 1:
        pins["sp_size"] = plan.sp_size
    if plan.cp_size > 1:
        pins["cp_size"] = plan.cp_size
    if plan.unsloth:
        pins["unsloth"] = True
    if generating:
        pins.update(num_generations=plan.num_generations, max_completion_len=plan.max_completion_len,
                    vllm=plan.vllm_mode)
        if plan.vllm_mode == "server":
            pins["vllm_gpus"] = plan.vllm_gpus
        if plan.vllm_mode == "colocate":
            pins["vllm_mem_fraction"] = plan.vllm_mem_fraction
    if plan.trainer in (*R.PREFERENCE_TRAINERS, *R.GENERATING_TRAINERS):
        pins["ref_model"] = plan.ref_model
    return hardware_request(req, hw).with_(**pins)


def flags(req: Request) -> list[str]:
    """The command-line flags that make this request (Request's fields are the contract's flag names)."""
    args = ["--model", req.model]
    for f in fields(req):
        value = getattr(req, f.name)
        if f.name == "model" or value is None or (f.name == "trust_remote_code" and not value):
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            if value:
                args.append(flag)
            elif f.name in _SWITCHES:
                args.append("--no-" + f.name.replace("_", "-"))
        else:
            args += [flag, str(value)]
    return args


def command(name: str, req: Request) -> str:
    """`trl-advisor estimate ...` or `trl-advisor generate ...`, quoted for a POSIX shell."""
    return f"trl-advisor {name} " + " ".join(shlex.quote(a) for a in flags(req))
