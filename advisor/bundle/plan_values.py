"""Whether values read from a bundle's files can build a Plan: the type of each field and the bounds the CLI's own
flags have. Shared by the plan reader (advisor.bundle.readback) and the cross-file check (advisor.bundle.consistency),
which import nothing of each other's at load time."""

from __future__ import annotations

from dataclasses import fields

from advisor.core import request, safeio
from advisor.core.plan import Plan


def _plan_limits() -> dict[str, tuple[str, float | None, float | None]]:
    """Plan field -> (kind, lowest, highest). Sizes and counts are bounded by the CLI's own flag limits
    (advisor.core.request.LIMITS), so that a value read from a file cannot drive a loop or an allocation the flags
    could not (rules.common.divisors walks up to the square root of a process count)."""
    limits = request.LIMITS
    most_processes = limits["gpus"][1] * limits["nodes"][1]
    ranges = {"zero_stage": limits["zero"][:2], "gpus_per_node": limits["gpus"][:2], "nodes": limits["nodes"][:2],
              "num_processes": (1, most_processes), "lora_alpha": (0, 2 * limits["lora_r"][1]),
              "num_generations": (0, limits["num_generations"][1]),
              "max_completion_len": (0, limits["max_completion_len"][1]), "vllm_mem_fraction": (0.0, 1.0)}
    out: dict[str, tuple[str, float | None, float | None]] = {}
    for f in fields(Plan):
        kind = f.type if isinstance(f.type, str) else f.type.__name__  # "int" either way
        low, high = ranges.get(f.name, limits[f.name][:2] if f.name in limits else (None, None))
        out[f.name] = (kind, low, high)
    return out


def plan_value_problem(values: dict, *, lower: bool = True) -> tuple[str, str] | None:
    """(field, why) for the first value of a Plan's keyword arguments with the wrong type (`gpus_per_node` as
    "eight", `nodes` as [2], true as a count) or outside its bound; None when every value can build a Plan.
    lower=False checks only the upper bounds: a value derived from several files may be 0 or negative (vLLM server
    GPUs taking every GPU), which a rule reports as a finding. Values of the right type that describe an
    inconsistent plan are the rules' business, not this check's."""
    limits = _plan_limits()
    for name, value in values.items():
        if name not in limits:
            continue
        kind, low, high = limits[name]
        problem = safeio.value_problem(value, kind, low=low if lower else None, high=high)
        if problem:
            return name, problem
    return None
