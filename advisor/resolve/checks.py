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
    shown = attn if R.text_problem(attn) is None and len(attn) <= 80 else "(that value)"
    raise AdvisorError(f"--attn {shown} is neither an attention implementation transformers knows nor a hub kernel id",
                       hint=f"use one of {', '.join(R.ATTN_BUILTIN)}, or a hub kernel such as "
                            "kernels-community/flash-attn2")


def check_request(req: Request) -> None:
    """Values that are wrong whatever the hardware: one-line errors with the valid range as the hint."""
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
    if req.vllm_mem_fraction is not None and not (isinstance(req.vllm_mem_fraction, (int, float))
                                                   and 0.0 < req.vllm_mem_fraction < 1.0):
        raise AdvisorError(f"--vllm-mem-fraction {req.vllm_mem_fraction} is outside (0, 1)", hint="for example 0.3")
    if req.max_completion_len and req.seq_len and req.max_completion_len >= req.seq_len:
        raise AdvisorError("--max-completion-len must be shorter than --seq-len (which counts prompt + completion)",
                           hint=f"for example --seq-len {req.max_completion_len * 2}")


def check_against_target(req: Request, target: Target) -> None:
    """Values that contradict the hardware whatever the plan: one-line errors with the fix."""
    if req.vllm_gpus and req.vllm_gpus > target.gpus_per_node:
        raise AdvisorError(f"--vllm-gpus {req.vllm_gpus} is more than the {target.gpus_per_node} GPUs per node",
                           hint=f"use at most --vllm-gpus {max(1, target.gpus_per_node - 1)}")
    if req.vllm_gpus and req.vllm in (None, "server") and req.vllm_gpus >= target.gpus_per_node:
        hint = (f"give vLLM fewer GPUs (at most {target.gpus_per_node - 1}), or add GPUs with --gpus"
                if target.gpus_per_node > 1 else "server mode needs 2 GPUs or more: add --gpus, or use --vllm colocate")
        raise AdvisorError(f"--vllm-gpus {req.vllm_gpus} leaves no GPU to train on ({target.gpus_per_node} per node)",
                           hint=hint)
