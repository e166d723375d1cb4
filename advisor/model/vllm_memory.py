"""What a vLLM engine needs inside its `gpu_memory_utilization` share before it can serve one request: its weights,
the activation peak of its start-up profile, the memory outside PyTorch, and the KV cache of one request of
max_model_len tokens. Below that, vLLM refuses to start (vllm/v1/core/kv_cache_utils.py
check_enough_kv_cache_memory: "No available memory for the cache blocks", or "To serve at least one request with
the models's max seq len ..."). GRPO/RLOO colocate (one engine per training process, the share of GRPOConfig
vllm_gpu_memory_utilization) and server mode (`vllm serve --gpu-memory-utilization`) both meet it.

The profile's figures were checked against vLLM's own log of Meta-Llama-3-8B on an H100 (vLLM pull request 10511:
weights 14.96 GiB, activation peak 1.26 GiB at 8,192 batched tokens and 256 sequences; this model: 14.96 and
1.21 GiB; tests/model/test_vllm_memory.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.core.plan import Plan
from advisor.core.specs import GIB, ModelSpec
from advisor.core.target import Target
from advisor.model.dims import Dims, dims
from advisor.model.states import frozen_base_bytes
from advisor.model.units import FP32, HALF

COLOCATE_BATCHED_TOKENS = 4096
"""trl/generation/vllm_generation.py builds the colocated vllm.LLM with max_num_batched_tokens=4096 (TRL 1.16): the
tokens of vLLM's profile forward."""

SERVER_MEM_FRACTION = 0.9
"""`vllm serve --gpu-memory-utilization` the bundles pass (vLLM's and `trl vllm-serve`'s default): the server's GPUs
do nothing else."""

LARGE_GPU_BYTES = 70 * GIB
"""vllm/engine/arg_utils.py get_batch_defaults: GPUs of at least 70 GiB that are not A100s get the larger scheduler
defaults below."""
SERVER_BATCHED_TOKENS = {True: 8192, False: 2048}
"""`vllm serve` default max_num_batched_tokens on a large GPU / any other (OPENAI_API_SERVER usage context)."""
SERVER_MAX_SEQS = {True: 1024, False: 256}
"""`vllm serve` default max_num_seqs: the sequences of the profile's dummy sampler run."""

NON_TORCH_BYTES = int(0.2 * GIB)
"""Memory vLLM's profile finds allocated outside PyTorch on one GPU (cuBLAS workspaces and the like): 0.16-0.20 GiB
in vLLM's logs of single-GPU engines (pull requests 12126 and 14447, 'non_torch_memory takes')."""
TP_NCCL_BYTES = int(1.79 * GIB)
"""More outside PyTorch once tensor parallelism is on (NCCL's buffers): Meta-Llama-3-8B's non_torch_memory went from
1.79 GiB at TP 1 to 3.58 GiB at TP 2 (vLLM pull request 10511)."""

SAMPLER_VOCAB_COPIES = 3
"""fp32 [sequences, vocab] tensors of the profile's dummy sampler run: the logits, their softmax and log-softmax
(TRL asks for processed log-probs, logprobs_mode='processed_logprobs')."""


@dataclass(frozen=True)
class VllmNeed:
    """One engine's needs on one GPU, bytes."""

    weights: int
    activations: int
    non_torch: int
    kv_one_request: int
    kv_per_token: int
    tensor_parallel: int

    @property
    def floor(self) -> int:
        """Below this vLLM does not start: weights, profile, memory outside PyTorch and one request's KV cache."""
        return self.weights + self.activations + self.non_torch + self.kv_one_request

    def with_tokens(self, tokens: int) -> int:
        """The share that also caches `tokens` tokens at once (the completions one engine generates together)."""
        return self.weights + self.activations + self.non_torch + max(self.kv_one_request, tokens * self.kv_per_token)

    def describe(self) -> str:
        return (f"weights {_gib(self.weights)}, start-up profile {_gib(self.activations)}, outside PyTorch "
                f"{_gib(self.non_torch)}, KV cache of one {_gib(self.kv_one_request)} request")


def _gib(n: int | float) -> str:
    return f"{n / GIB:.1f} GiB"


def weights_bytes(d: Dims, plan: Plan) -> int:
    """The model vLLM holds, in 16-bit (vLLM's dtype 'auto' is the checkpoint's bf16/fp16). TRL pushes the merged
    weights of a LoRA policy, so the engine holds the full model; a QLoRA policy's engine loads in-flight
    bitsandbytes 4-bit (vllm_generation.py passes quantization='bitsandbytes' when the model has Linear4bit)."""
    if plan.method == "qlora":
        return frozen_base_bytes(d, plan, HALF)
    return d.P * HALF


def tensor_parallel_fits(model: ModelSpec, tp: int) -> bool:
    """Whether vLLM can split `model` over `tp` tensor-parallel ranks. vLLM refuses attention heads that `tp` does not
    divide (vllm/config/model.py verify_with_parallel_config: "Total number of attention heads (H) must be divisible
    by tensor parallel size (T)"); QKVParallelLinear splits the KV heads over the ranks, or replicates them when
    there are fewer, with divide(), which asserts an exact quotient (vllm/model_executor/layers/linear.py,
    vllm/distributed/utils.py ensure_divisibility); the dense MLP's column-parallel projections divide their width
    the same way. Qwen2.5-7B (28 heads, 4 KV heads): 1, 2 and 4; 7 divides the heads but not the KV heads."""
    if tp < 1 or model.heads % tp or (model.kv_heads % tp and tp % model.kv_heads):
        return False
    return model.is_moe or not model.intermediate or model.intermediate % tp == 0


def usable_server_gpus(model: ModelSpec, most: int) -> list[int]:
    """The GPU counts, 1 to `most`, a bundle's `vllm serve` of `model` runs on in full. A dense model's server is one
    tensor-parallel group (data parallelism above 1 is refused for dense models: trl/scripts/vllm_serve.py
    data_parallel_size help, "will error out (see vLLM PR #30739)"; rule VLLM007), so its count is a tensor-parallel
    size vLLM accepts. An MoE server takes any count: server_parallelism's replicas (data parallel) fill what
    tensor parallelism leaves. One server only: TRL's client connects the main process to one base URL
    (trl/generation/vllm_generation.py, VLLMClient(base_url=...)), so GPUs no server size uses stay idle."""
    return [n for n in range(1, most + 1) if model.is_moe or tensor_parallel_fits(model, n)]


def server_parallelism(plan: Plan, model: ModelSpec, target: Target) -> tuple[int, int]:
    """(tensor parallel, data parallel) of the bundle's `vllm serve`. Dense models: vLLM >= 0.14 rejects
    --data-parallel-size > 1 (rule VLLM007, TRL's vLLM guide), so the server is one tensor-parallel group, of the
    largest size vLLM accepts (tensor_parallel_fits) that divides its GPUs: all of them when the count is one of
    usable_server_gpus, which the planner holds to (a pinned other count is refused, advisor.search.vllm_pins.check_vllm_gpus).
    MoE models: tensor parallelism only as far as needed (the bf16 weights should take at most half of a GPU, the
    rest is KV cache); replicas (data parallel, with expert parallelism) scale generation better (vLLM docs)."""
    gpus = max(1, plan.vllm_gpus)
    if not model.is_moe:
        return max(d for d in range(1, gpus + 1) if gpus % d == 0 and tensor_parallel_fits(model, d)), 1
    weights = HALF * model.params
    tp = 1
    while tp < gpus and weights / tp > 0.5 * target.gpu_memory_bytes and gpus % (2 * tp) == 0 \
            and tensor_parallel_fits(model, 2 * tp):
        tp *= 2
    return tp, gpus // tp


def idle_server_gpus(plan: Plan, model: ModelSpec, target: Target) -> int:
    """GPUs of node 0 set aside for the server that its tensor-parallel x data-parallel layout leaves out."""
    if plan.vllm_mode != "server":
        return 0
    tp, dp = server_parallelism(plan, model, target)
    return max(0, plan.vllm_gpus - tp * dp)


def engine_need(model: ModelSpec, plan: Plan, target: Target, *, tensor_parallel: int | None = None,
                max_model_len: int | None = None, batched_tokens: int | None = None,
                max_seqs: int | None = None) -> VllmNeed:
    """One vLLM engine of `plan` on one GPU of `target`: colocated (TP from GRPOConfig vllm_tensor_parallel_size,
    1 in the bundles) or the server's (TP from server_parallelism)."""
    d = dims(model)
    server = plan.vllm_mode == "server"
    tp = max(1, tensor_parallel or (server_parallelism(plan, model, target)[0] if server else 1))
    large = target.gpu_memory_bytes >= LARGE_GPU_BYTES and "a100" not in target.gpu.id.lower()
    if server:
        tokens, seqs = SERVER_BATCHED_TOKENS[large], SERVER_MAX_SEQS[large]
    else:
        # GRPOTrainer passes max_num_seqs = per_device_train_batch_size x TP x steps_per_generation
        tokens, seqs = COLOCATE_BATCHED_TOKENS, plan.micro_batch * tp * plan.grad_accum
    tokens, seqs = batched_tokens or tokens, max_seqs or seqs
    # The profile's forward, one decoder layer at a time: the MLP's gate/up output and its activation (3 x I / TP
    # per token), and the residual stream, its norm and the layer's output (3 x h); then the dummy sampler's fp32
    # copies of [sequences, vocab].
    mlp = (d.moe_I * d.experts_per_token if d.moe else d.I)
    forward = tokens * (3 * mlp // tp + 3 * d.h) * HALF
    sampler = min(seqs, tokens) * d.V * FP32 * SAMPLER_VOCAB_COPIES
    kv_heads_per_rank = max(1, model.kv_heads // tp)
    kv_per_token = 2 * d.L * kv_heads_per_rank * model.head_dim * HALF
    length = max_model_len or plan.seq_len
    return VllmNeed(weights=math.ceil(weights_bytes(d, plan) / tp), activations=forward + sampler,
                    non_torch=NON_TORCH_BYTES + (TP_NCCL_BYTES if tp > 1 else 0),
                    kv_one_request=length * kv_per_token, kv_per_token=kv_per_token, tensor_parallel=tp)


FRACTION_STEP = 0.05
"""The colocate fraction the planner raises is rounded up to this step (a number a person would write)."""
MAX_COLOCATE_FRACTION = 0.95
"""The largest colocate share the planner sets; what needs more cannot colocate (rule VLLM011 says so)."""


def share_for(need: VllmNeed, tokens: int, gpu_bytes: int) -> float:
    """The smallest share, in steps of FRACTION_STEP, that holds `need` and caches `tokens` tokens at once."""
    return round(math.ceil(round(need.with_tokens(tokens) / gpu_bytes / FRACTION_STEP, 6)) * FRACTION_STEP, 2)


def colocate_fraction(model: ModelSpec, plan: Plan, target: Target, default: float) -> float:
    """The colocated engine's share the planner sets when none is pinned: GRPOConfig's default, raised (in steps of
    FRACTION_STEP) where it cannot hold the engine's weights, profile and the KV cache of one group of
    num_generations completions (a share below engine_need's floor does not start at all)."""
    group = max(1, plan.num_generations) * plan.seq_len
    wanted = share_for(engine_need(model, plan, target), group, target.gpu_memory_bytes)
    return default if wanted <= default else min(MAX_COLOCATE_FRACTION, wanted)
