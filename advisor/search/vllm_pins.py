"""A pinned --vllm-gpus the vLLM server cannot use in full is refused: a check on the request that needs the
model's vLLM parallelism (advisor.model.vllm_memory), so it sits above the estimate, not with advisor.resolve's
request checks."""

from __future__ import annotations

from advisor.core.errors import AdvisorError
from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.model.vllm_memory import tensor_parallel_fits, usable_server_gpus


def _or_list(values: list[int]) -> str:
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def check_vllm_gpus(req: Request, model: ModelSpec, target: Target) -> None:
    """A pinned --vllm-gpus the server cannot run on in full: refused rather than planned with GPUs that stay idle.
    One `vllm serve` generates for the whole run (TRL's client connects the main process to one base URL:
    trl/generation/vllm_generation.py), and a dense model's server is one tensor-parallel group, since vLLM >= 0.14
    rejects --data-parallel-size > 1 for dense models (trl/scripts/vllm_serve.py data_parallel_size help, vLLM pull
    request 30739). So the count must be a tensor-parallel size vLLM accepts for this model
    (advisor.model.vllm_memory.tensor_parallel_fits); an MoE server fills any count with replicas. Run after
    check_against_target, which refuses counts that leave no GPU to train on."""
    server = req.vllm == "server" or (req.vllm is None and bool(req.vllm_gpus))
    if not server or not req.vllm_gpus or req.vllm_gpus >= target.gpus_per_node:
        return
    usable = usable_server_gpus(model, target.gpus_per_node - 1)
    if req.vllm_gpus in usable:
        return
    used = max(n for n in usable if req.vllm_gpus % n == 0)
    # name the MLP width only where it, not the heads, rules a count out
    mlp = any(not tensor_parallel_fits(model, n) for n in range(1, target.gpus_per_node)
              if model.heads % n == 0 and (model.kv_heads % n == 0 or n % model.kv_heads == 0))
    shape = (f"{model.heads} attention heads, {model.kv_heads} KV heads and MLP width {model.intermediate}" if mlp
             else f"{model.heads} attention heads and {model.kv_heads} KV heads")
    raise AdvisorError(
        f"--vllm-gpus {req.vllm_gpus} leaves {req.vllm_gpus - used} of its GPUs idle: {model.hf_id}'s vLLM server is "
        f"one tensor-parallel group (vLLM refuses data parallelism for a dense model), and its {shape} split over "
        f"{_or_list(usable)} GPUs, not {req.vllm_gpus} (it would run tensor-parallel {used})",
        hint=f"use --vllm-gpus {_or_list(usable)}, or drop --vllm-gpus and the planner chooses")
