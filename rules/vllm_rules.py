"""vLLM generation rules (VLLM*): GRPO/RLOO generation through vLLM, in server or colocate mode."""

from __future__ import annotations

import re

from advisor.model.vllm_memory import (
    MAX_COLOCATE_FRACTION,
    SERVER_MEM_FRACTION,
    engine_need,
    server_parallelism,
    share_for,
    usable_server_gpus,
)
from rules.common import NO_FILES, as_int, divisors, gib, join, truthy, uses_zero3
from rules.model import Context, Result, fail, na, ok
from rules.registry import rule


@rule(id="VLLM001", name="vllm-needs-generating-trainer", severity="error", auto_fix=True,
      reads=("plan.trainer", "plan.vllm_mode"))
def vllm_needs_generating_trainer(ctx: Context) -> Result:
    """vLLM generation exists in the online trainers only (GRPO and RLOO among the planned ones).

    ## Why
    `use_vllm`/`vllm_mode` are GRPOConfig and RLOOConfig fields (and of the experimental online trainers); SFT,
    DPO, KTO and GKD never generate through vLLM, so a vLLM server or colocated engine would only hold memory.

    ## Fix
    `--vllm none` for SFT/DPO/KTO/GKD; use `--trainer grpo` or `rloo` for on-policy generation.

    ## Example
    `--trainer sft --vllm colocate` fails; `--trainer grpo --vllm colocate` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    - https://huggingface.co/docs/trl/vllm_integration
    """
    if ctx.plan.vllm_mode == "none":
        return na("no vLLM")
    if ctx.plan.trainer in ("grpo", "rloo"):
        return ok(f"{ctx.plan.trainer} generates with vLLM")
    return fail(f"--vllm {ctx.plan.vllm_mode} with trainer {ctx.plan.trainer}, which does not generate",
                "use --vllm none (or --trainer grpo / rloo)", {"vllm_mode": "none", "vllm_gpus": 0,
                                                               "vllm_mem_fraction": 0.0})


@rule(id="VLLM002", name="vllm-server-needs-dedicated-gpus", severity="error", seed="V-01", auto_fix=True,
      reads=("plan.vllm_mode", "plan.vllm_gpus", "plan.num_processes", "target.gpus_per_node", "target.nodes"))
def vllm_server_dedicated_gpus(ctx: Context) -> Result:
    """vLLM server mode needs its own GPUs: training GPUs = GPUs - vLLM GPUs, both at least 1, never shared.

    ## Why
    The trainer and `vllm serve` exchange weights through an NCCL group; two ranks on one device give "Duplicate
    GPU detected" / "invalid usage". The server therefore runs on GPUs the training processes do not use
    (CUDA_VISIBLE_DEVICES split), which a single-GPU machine cannot do: there, colocate mode is the answer.

    ## Fix
    Give the server `--vllm-gpus N` (>= 1) and train on the rest; on one GPU use `--vllm colocate`.

    ## Example
    8 GPUs with `--vllm server --vllm-gpus 2` trains on 6 and passes; 1 GPU with `--vllm server` fails.

    ## References
    - https://huggingface.co/docs/trl/vllm_integration
    - https://github.com/huggingface/trl/issues/3158
    - https://github.com/huggingface/trl/issues/3487
    """
    p, t = ctx.plan, ctx.target
    if p.vllm_mode != "server":
        return na("not vLLM server mode")
    total = t.gpus_per_node * t.nodes
    server = p.vllm_gpus * t.nodes
    if t.gpus_per_node < 2:
        return fail(f"vLLM server mode on {t.gpus_per_node} GPU per node: the server and training cannot share a GPU",
                    "use --vllm colocate on a single GPU", {"vllm_mode": "colocate", "vllm_gpus": 0,
                                                            "vllm_mem_fraction": 0.3})
    if p.vllm_gpus < 1:
        return fail("vLLM server mode with no GPU for the server", "use --vllm-gpus 1 (or more)", {"vllm_gpus": 1})
    if p.num_processes + server > total:
        return fail(f"{p.num_processes} training processes + {server} vLLM GPUs exceed the {total} GPUs",
                    f"train on {total - server} processes (GPUs minus vLLM GPUs)",
                    {"num_processes": total - server})
    return ok(f"vLLM on {server} GPU(s), training on {p.num_processes}")


@rule(id="VLLM003", name="vllm-colocate-tp-divides-processes", severity="error", seed="V-06",
      reads=("plan.vllm_mode", "plan.num_processes", "files.trl_args.vllm_tensor_parallel_size"))
def vllm_colocate_tp(ctx: Context) -> Result:
    """In colocate mode `vllm_tensor_parallel_size` must divide the number of training processes.

    ## Why
    Colocated engines form tensor-parallel groups of consecutive ranks ([0,1], [2,3] ...); TRL raises
    "tensor_parallel_size (T) must divide world size (W) evenly" otherwise.

    ## Fix
    Use a `vllm_tensor_parallel_size` among the divisors of the process count (the finding lists them).

    ## Example
    6 processes with vllm_tensor_parallel_size 4 fails; 2 passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/generation/vllm_generation.py
    - https://github.com/huggingface/trl/pull/3162
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.vllm_mode != "colocate":
        return na("not vLLM colocate")
    tp = as_int(ctx.arg("vllm_tensor_parallel_size")) or 1
    if ctx.plan.num_processes % tp == 0:
        return ok(f"TP {tp} divides {ctx.plan.num_processes}")
    return fail(f"vllm_tensor_parallel_size {tp} does not divide the {ctx.plan.num_processes} processes",
                f"use vllm_tensor_parallel_size in {{{join(divisors(ctx.plan.num_processes))}}}")


@rule(id="VLLM004", name="vllm-max-model-length-covers-sequence", severity="error", seed="V-05",
      reads=("files.trl_args.vllm_max_model_length", "files.trl_args.max_completion_length"))
def vllm_max_model_length(ctx: Context) -> Result:
    """`vllm_max_model_length` must leave room for the prompt: it has to exceed `max_completion_length`.

    ## Why
    vLLM refuses or truncates requests longer than `max_model_len`; GRPOConfig documents that it must be at least
    the longest prompt plus `max_completion_length`, and hangs were traced to exceeding it.

    ## Fix
    Set `vllm_max_model_length` to the longest prompt plus `max_completion_length` (e.g. 1024 + 512).

    ## Example
    vllm_max_model_length 512 with max_completion_length 512 fails; 1536 passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    - https://github.com/huggingface/trl/issues/2923
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.vllm_mode == "none":
        return na("no vLLM")
    limit = as_int(ctx.arg("vllm_max_model_length"))
    if limit is None:
        return na("vllm_max_model_length not set (vLLM uses the model's context)")
    completion = as_int(ctx.arg("max_completion_length")) or 512
    if limit > completion:
        return ok(f"{limit - completion} tokens left for the prompt")
    return fail(f"vllm_max_model_length {limit} <= max_completion_length {completion}: no room for the prompt",
                f"set vllm_max_model_length to the longest prompt + {completion}")


@rule(id="VLLM005", name="vllm-needs-zero3-gather", severity="error", seed="V-09",
      reads=("plan.vllm_mode", "plan.zero_stage", "files.trl_args.ds3_gather_for_generation"))
def vllm_needs_zero3_gather(ctx: Context) -> Result:
    """Under ZeRO-3, vLLM generation needs `ds3_gather_for_generation=True` (the default).

    ## Why
    The weight sync to vLLM gathers the ZeRO-3 shards; GRPOConfig documents that disabling
    `ds3_gather_for_generation` "is not compatible with vLLM generation".

    ## Fix
    Leave `ds3_gather_for_generation=True` with vLLM.

    ## Example
    ZeRO-3 + use_vllm + ds3_gather_for_generation False fails; True passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/trainer/grpo_config.py
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.vllm_mode == "none" or not uses_zero3(ctx):
        return na("no vLLM under ZeRO-3")
    if truthy(ctx.arg("ds3_gather_for_generation", True)):
        return ok("ds3_gather_for_generation on")
    return fail("ds3_gather_for_generation=False with vLLM under ZeRO-3", "set ds3_gather_for_generation=True")


@rule(id="VLLM006", name="zero3-gather-off-without-vllm", severity="warning", seed="V-10",
      reads=("plan.vllm_mode", "plan.zero_stage", "files.trl_args.ds3_gather_for_generation"))
def zero3_gather_off_without_vllm(ctx: Context) -> Result:
    """ZeRO-3 generation with `ds3_gather_for_generation=False` all-gathers weights at every decoding step.

    ## Why
    Without the one-time gather, each generated token triggers ZeRO-3 all-gathers of every layer: step 0 can look
    hung for hours. It only makes sense for models too large to gather on one GPU.

    ## Fix
    Keep `ds3_gather_for_generation=True` when the model fits on one GPU, or generate with vLLM colocate.

    ## Example
    GRPO on ZeRO-3 without vLLM and ds3_gather_for_generation False warns; True passes.

    ## References
    - https://github.com/huggingface/trl/issues/3858
    - https://github.com/huggingface/trl/pull/2667
    """
    if ctx.files is None:
        return na(NO_FILES)
    if ctx.plan.trainer not in ("grpo", "rloo") or not uses_zero3(ctx) or ctx.plan.vllm_mode != "none":
        return na("no ZeRO-3 generation without vLLM")
    if truthy(ctx.arg("ds3_gather_for_generation", True)):
        return ok("ds3_gather_for_generation on")
    return fail("ds3_gather_for_generation=False: every decoding step all-gathers the ZeRO-3 shards (very slow)",
                "set ds3_gather_for_generation=True, or use vLLM colocate")


_DP_FLAG = re.compile(r"--data[-_]parallel[-_]size[=\s]+(\d+)")
_TP_FLAG = re.compile(r"--tensor[-_]parallel[-_]size[=\s]+(\d+)")
_SERVE = re.compile(r"(\btrl\s+vllm-serve\b|\bvllm\s+serve\b)")


def _serve_lines(ctx: Context) -> list[str]:
    lines = ctx.files.launch_lines() if ctx.files is not None else []
    return [line for line in lines if _SERVE.search(line)]


@rule(id="VLLM007", name="vllm-serve-dense-data-parallel", severity="error", seed="V-07",
      applies_to={"vllm": ">=0.14"}, reads=("files.launch_sh", "model.num_experts"))
def vllm_serve_dense_data_parallel(ctx: Context) -> Result:
    """`vllm serve --data-parallel-size > 1` is rejected for dense (non-MoE) models from vLLM 0.14.

    ## Why
    TRL's vLLM guide: from vLLM 0.14 data parallelism above 1 for a dense model errors; scale the server with
    tensor parallelism instead (data parallelism remains for MoE expert parallelism).

    ## Fix
    Use `--tensor-parallel-size N` (and `--data-parallel-size 1`) for a dense model.

    ## Example
    launch.sh `trl vllm-serve --model Qwen/Qwen2.5-7B --data_parallel_size 2` fails; `--tensor_parallel_size 2`
    passes.

    ## References
    - https://huggingface.co/docs/trl/vllm_integration
    """
    lines = _serve_lines(ctx)
    if not lines:
        return na("no vLLM server command")
    sizes = [int(m) for line in lines for m in _DP_FLAG.findall(line)]
    dp = max(sizes, default=1)
    if dp <= 1:
        return ok("data-parallel size 1")
    if ctx.model.is_moe:
        return ok(f"data-parallel {dp} for an MoE model")
    return fail(f"vLLM server with data-parallel size {dp} for the dense model {ctx.model.id}",
                f"use --tensor-parallel-size {dp} --data-parallel-size 1")


@rule(id="VLLM008", name="trl-vllm-serve-deprecated", severity="warning", applies_to={"trl": ">=1.16"},
      reads=("files.launch_sh",))
def trl_vllm_serve_deprecated(ctx: Context) -> Result:
    """`trl vllm-serve` is deprecated in TRL 1.16: it only re-executes `vllm serve` and goes away in v2.

    ## Why
    TRL 1.16's vllm-serve warns that it is deprecated and `os.execve`s vLLM's own server with
    `VLLM_SERVER_DEV_MODE=1`, the NCCL weight-transfer config and processed logprobs. Scripts built on it break
    at TRL v2.0.

    ## Fix
    Start the server directly: `VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --weight-transfer-config
    '{"backend": "nccl"}' --logprobs-mode processed_logprobs --max-logprobs -1 ...`.

    ## Example
    launch.sh with `trl vllm-serve --model ...` warns; with `vllm serve ...` it passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/scripts/vllm_serve.py
    """
    lines = _serve_lines(ctx)
    if not lines:
        return na("no vLLM server command")
    if any(re.search(r"\btrl\s+vllm-serve\b", line) for line in lines):
        return fail("launch script uses the deprecated `trl vllm-serve`", "call `VLLM_SERVER_DEV_MODE=1 vllm serve "
                    "MODEL --weight-transfer-config '{\"backend\": \"nccl\"}' --logprobs-mode processed_logprobs "
                    "--max-logprobs -1` directly")
    return ok("vllm serve")


@rule(id="VLLM009", name="vllm-server-tp-fits-its-gpus", severity="error",
      reads=("files.launch_sh", "plan.vllm_gpus", "plan.vllm_mode"))
def vllm_server_tp_fits(ctx: Context) -> Result:
    """The vLLM server's tensor-parallel size cannot exceed the GPUs set aside for it.

    ## Why
    `vllm serve --tensor-parallel-size T` needs T GPUs visible to the server; the training processes hold the
    others. With fewer, vLLM fails at start-up or lands on the training GPUs (NCCL duplicate-GPU errors).

    ## Fix
    `--tensor-parallel-size` at most `--vllm-gpus` (and visible through the server's CUDA_VISIBLE_DEVICES).

    ## Example
    `--vllm-gpus 1` with `vllm serve ... --tensor-parallel-size 2` fails; `--vllm-gpus 2` passes.

    ## References
    - https://huggingface.co/docs/trl/vllm_integration
    """
    lines = _serve_lines(ctx)
    if not lines or ctx.plan.vllm_mode != "server":
        return na("no vLLM server command")
    tp = max((int(m) for line in lines for m in _TP_FLAG.findall(line)), default=1)
    if tp <= max(1, ctx.plan.vllm_gpus):
        return ok(f"TP {tp} on {ctx.plan.vllm_gpus} GPU(s)")
    return fail(f"vLLM server tensor-parallel size {tp} exceeds its {ctx.plan.vllm_gpus} GPU(s)",
                f"use --tensor-parallel-size {ctx.plan.vllm_gpus} or give the server {tp} GPUs")


def served_model(ctx: Context) -> str | None:
    """The model `vllm serve MODEL` / `trl vllm-serve --model MODEL` starts, `$VARS` resolved from launch.sh."""
    for line in _serve_lines(ctx):
        m = re.search(r"\bvllm\s+serve\s+(\S+)", line) or re.search(r"--model[=\s]+(\S+)", line)
        if not m:
            continue
        name = m.group(1).strip("'\"")
        var = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", name)
        if var:  # the first plain assignment (a `$(...)` one is a runtime alternative, e.g. --random-init)
            values = [v for v in ctx.files.launch_env_all(var.group(1)) if not v.startswith("$")]
            name = values[0] if values else ""
        return name or None
    return None


@rule(id="VLLM010", name="vllm-server-serves-the-trained-model", severity="error", seed="V-03",
      reads=("files.launch_sh", "model.hf_id", "plan.vllm_mode"))
def vllm_server_serves_trained_model(ctx: Context) -> Result:
    """The vLLM server must serve the model being trained.

    ## Why
    In server mode the trainer pushes its updated weights into the server by parameter name after every step; a
    server started on another checkpoint (another size, or the instruct variant of a base model) either rejects
    the names and shapes or generates from weights that are not the policy's. TRL's maintainers: the model used in
    training must be the one used for generation.

    ## Fix
    Start `vllm serve` with the same model id (or path) the training script loads.

    ## Example
    Training Qwen/Qwen2.5-7B with `vllm serve Qwen/Qwen2.5-7B-Instruct` fails; the same id on both sides passes.

    ## References
    - https://github.com/huggingface/trl/issues/3487
    - https://huggingface.co/docs/trl/vllm_integration
    """
    served = served_model(ctx)
    if served is None:
        return na("no vLLM server command with a model")
    trained = {ctx.model.hf_id.lower(), ctx.model.id.lower()}
    if ctx.files is not None:
        from advisor.core.files import model_id

        named = model_id(ctx.files)
        if named:
            trained.add(named.lower())
    if served.lower() in trained or served.rstrip("/").rsplit("/", 1)[-1].lower() == ctx.model.id.lower():
        return ok(f"serves {served}")
    if served.startswith(("/", "./", "~")):
        return ok(f"serves a local path ({served}): cannot compare by name")
    return fail(f"vLLM serves {served} but training loads {ctx.model.hf_id}",
                f"start the server with {ctx.model.hf_id}")


_MEM_FLAG = re.compile(r"--gpu[-_]memory[-_]utilization[=\s]+'?([0-9.]+)")
_LEN_FLAG = re.compile(r"--max[-_]model[-_]len[=\s]+'?(\d+)")


def _launch_value(ctx: Context, pattern: re.Pattern, cast):
    """The last value a `vllm serve` line of launch.sh gives the flag, else None."""
    found = [m for line in _serve_lines(ctx) for m in pattern.findall(line)]
    try:
        return cast(found[-1]) if found else None
    except ValueError:
        return None


@rule(id="VLLM011", name="vllm-share-holds-the-engine", severity="error", auto_fix=True,
      reads=("plan.vllm_mode", "plan.vllm_mem_fraction", "plan.vllm_gpus", "plan.seq_len", "model.params",
             "target.gpu_memory_bytes", "files.trl_args.vllm_tensor_parallel_size",
             "files.trl_args.vllm_max_model_length", "files.launch_sh"))
def vllm_share_holds_engine(ctx: Context) -> Result:
    """vLLM's share of a GPU must hold its weights, its start-up profile and the KV cache of one full-length
    request, or the engine does not start.

    ## Why
    vLLM takes `gpu_memory_utilization` x the GPU's memory, loads the weights, runs a profile forward, and gives
    what is left to the KV cache; when that is not positive, or smaller than one request of max_model_len tokens,
    it raises "No available memory for the cache blocks" or "To serve at least one request with the models's max
    seq len ..." (vllm/v1/core/kv_cache_utils.py). GRPOConfig's colocate default of 0.3 holds an 8B model's 15 GiB
    of bf16 weights on an 80 GiB GPU (24 GiB) but not on a 48 GiB one (14.4 GiB); a 70B server needs its weights
    split over enough GPUs. The estimate is advisor.model.vllm_memory.engine_need (weights / TP, the profile's
    activations at TRL's max_num_batched_tokens, memory outside PyTorch, one request's KV cache).

    ## Fix
    Colocate: raise `--vllm-mem-fraction` to the share the finding gives (training must still fit beside it, rule
    MEM005), or use `--vllm server`. Server: give it more GPUs (`--vllm-gpus`), which tensor parallelism splits the
    weights over.

    ## Example
    Llama-3.1-8B colocated on one L40S (45 GiB) with fraction 0.3 (13.5 GiB) fails: the engine needs 15.7 GiB; 0.4
    passes. Llama-3.1-70B on a one-GPU H100 server (72 GiB at 0.9) fails; two GPUs (tensor parallel 2) pass.

    ## References
    - https://github.com/vllm-project/vllm/blob/v0.11.0/vllm/v1/core/kv_cache_utils.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/generation/vllm_generation.py
    - https://github.com/vllm-project/vllm/pull/10511
    """
    p = ctx.plan
    if p.vllm_mode not in ("colocate", "server") or p.trainer not in ("grpo", "rloo"):
        return na("no vLLM engine")
    total = int(ctx.target.gpu_memory_bytes)
    if p.vllm_mode == "colocate":
        tp = as_int(ctx.arg("vllm_tensor_parallel_size")) or 1
        length = as_int(ctx.arg("vllm_max_model_length")) or p.seq_len
        share = float(p.vllm_mem_fraction)
    else:
        tp = _launch_value(ctx, _TP_FLAG, int) or server_parallelism(p, ctx.model, ctx.target)[0]
        length = _launch_value(ctx, _LEN_FLAG, int) or p.seq_len
        given = _launch_value(ctx, _MEM_FLAG, float)  # 0 is a value given (and fails), not a default
        share = SERVER_MEM_FRACTION if given is None else given
    if not 0.0 <= share <= 1.0:  # vLLM refuses it (CacheConfig: gpu_memory_utilization <= 1)
        return fail(f"vLLM's gpu_memory_utilization {share:g} is not a share of the GPU (0 to 1)",
                    f"use at most {SERVER_MEM_FRACTION} (`vllm serve --gpu-memory-utilization`)")
    need = engine_need(ctx.model, p, ctx.target, tensor_parallel=tp, max_model_len=length)
    has = int(share * total)
    if has >= need.floor:
        return ok(f"vLLM's {share:g} x {gib(total)} = {gib(has)} holds its {gib(need.floor)} ({need.describe()})")
    told = (f"vLLM's share {share:g} x {gib(total)} = {gib(has)} cannot hold {gib(need.floor)}: {need.describe()} "
            f"({length} tokens, tensor parallel {tp}); it does not start")
    if p.vllm_mode == "colocate":
        fraction = share_for(need, max(1, p.num_generations) * p.seq_len, total)
        if fraction <= MAX_COLOCATE_FRACTION:
            return fail(told, f"use --vllm-mem-fraction {fraction} (training must still fit beside it), or --vllm "
                        "server", {"vllm_mem_fraction": fraction})
        return fail(told, "use --vllm server on GPUs of its own: one GPU cannot hold both", {
            "vllm_mode": "server", "vllm_gpus": 1, "vllm_mem_fraction": 0.0})
    for gpus in range(p.vllm_gpus + 1, p.gpus_per_node):
        bigger = p.with_(vllm_gpus=gpus)
        btp = server_parallelism(bigger, ctx.model, ctx.target)[0]
        if btp > tp and int(share * total) >= engine_need(ctx.model, bigger, ctx.target, tensor_parallel=btp,
                                                          max_model_len=length).floor:
            return fail(told, f"give the server {gpus} GPUs (--vllm-gpus {gpus}: tensor parallel {btp})",
                        {"vllm_gpus": gpus})
    return fail(told, "no server of fewer GPUs than a node holds it: train a smaller model, or quantize the served "
                "one")


@rule(id="VLLM012", name="vllm-server-uses-its-gpus", severity="error",
      reads=("plan.vllm_mode", "plan.vllm_gpus", "plan.gpus_per_node", "files.launch_sh", "model.heads",
             "model.kv_heads", "model.intermediate", "model.num_experts"))
def vllm_server_uses_its_gpus(ctx: Context) -> Result:
    """The vLLM server must run on every GPU set aside for it: tensor-parallel x data-parallel = its GPUs.

    ## Why
    The training processes never use the server's GPUs (rule VLLM002), and one server generates for the whole run:
    TRL's client connects the main process to one base URL (trl/generation/vllm_generation.py). A dense model's
    server is one tensor-parallel group, since vLLM >= 0.14 refuses `--data-parallel-size` above 1 for dense models
    (trl/scripts/vllm_serve.py: "will error out (see vLLM PR #30739)"; rule VLLM007), and its size must divide the
    attention heads and split or replicate the KV heads (vLLM's QKVParallelLinear). So `--vllm-gpus 3` for
    Qwen2.5-7B (28 heads, 4 KV heads) runs tensor-parallel 1 and leaves 2 reserved GPUs idle for the whole run. An
    MoE server fills any count with data-parallel replicas.

    ## Fix
    Give the server a count its layout uses in full (the finding lists them for the model: for a dense model the
    tensor-parallel sizes vLLM accepts), or launch it with tensor-parallel x data-parallel equal to its GPUs.

    ## Example
    Qwen2.5-7B on 8 GPUs with `--vllm-gpus 3` (`VLLM_GPUS=5,6,7`, `--tensor-parallel-size 1`) fails; `--vllm-gpus 2`
    or 4 passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/scripts/vllm_serve.py
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/generation/vllm_generation.py
    - https://github.com/huggingface/trl/pull/5214
    - https://github.com/vllm-project/vllm/pull/30739
    """
    p = ctx.plan
    if p.vllm_mode != "server" or p.vllm_gpus < 1:
        return na("no vLLM server")
    if _serve_lines(ctx):  # what launch.sh starts (vLLM's defaults: 1 and 1)
        tp, dp = _launch_value(ctx, _TP_FLAG, int) or 1, _launch_value(ctx, _DP_FLAG, int) or 1
        where = "launch.sh's vllm serve"
    else:
        tp, dp = server_parallelism(p, ctx.model, ctx.target)
        where = "the planned server"
    used = tp * dp
    if used == p.vllm_gpus:
        return ok(f"{where} runs tensor-parallel {tp} x data-parallel {dp} on its {p.vllm_gpus} GPU(s)")
    if used > p.vllm_gpus:
        return fail(f"{where} runs tensor-parallel {tp} x data-parallel {dp} = {used} GPUs but has {p.vllm_gpus}",
                    f"give it {used} GPUs, or launch it with tensor-parallel x data-parallel = {p.vllm_gpus}")
    usable = [str(n) for n in usable_server_gpus(ctx.model, max(1, p.gpus_per_node - 1))]
    counts = usable[0] if len(usable) == 1 else ", ".join(usable[:-1]) + " or " + usable[-1]
    return fail(f"{where} runs tensor-parallel {tp} x data-parallel {dp} on {used} of its {p.vllm_gpus} GPUs, "
                f"leaving {p.vllm_gpus - used} idle for the whole run",
                f"give the server {counts} GPUs (the counts {ctx.model.id}'s server runs on in full: generate with "
                f"--vllm-gpus N), or keep {used} for it and train on the others")


@rule(id="VLLM013", name="vllm-server-needs-unquantized-weights", severity="error", auto_fix=True,
      reads=("plan.vllm_mode", "plan.method", "plan.gpus_per_node", "target.nodes"))
def vllm_server_needs_unquantized_weights(ctx: Context) -> Result:
    """QLoRA's policy cannot feed a vLLM server: its synced weights are packed 4-bit tensors, the server's are bf16.

    ## Why
    Before each generation TRL merges the LoRA adapters into the base weights and streams every parameter to the
    server (VLLMGeneration._iter_named_params, server mode). On a bitsandbytes 4-bit base, PEFT's merge writes the
    result back as a packed `Params4bit` (peft/tuners/lora/bnb.py, Linear4bit.merge), so the server receives uint8
    tensors of shape [n, 1] for weights it holds as bf16 matrices, and the first weight sync fails. Only colocate
    mode starts its engine with `quantization="bitsandbytes"` when the policy has 4-bit layers
    (trl/generation/vllm_generation.py), so the packed weights load there.

    ## Fix
    `--vllm colocate` (the engine shares each training GPU and loads the 4-bit weights), or `--method lora` to keep
    the server.

    ## Example
    GRPO, `--method qlora --vllm server` on 4 GPUs fails; `--method qlora --vllm colocate` or `--method lora
    --vllm server` passes.

    ## References
    - https://github.com/huggingface/trl/blob/v1.16.0/trl/generation/vllm_generation.py
    - https://github.com/huggingface/peft/blob/v0.21.0/src/peft/tuners/lora/bnb.py
    """
    p = ctx.plan
    if p.vllm_mode != "server":
        return na("no vLLM server")
    if p.method != "qlora":
        return ok(f"{p.method} weights are synced to the server as bf16")
    return fail("QLoRA with a vLLM server: the merged 4-bit weights reach the bf16 server packed (uint8), and the "
                "first weight sync fails",
                "use --vllm colocate (the engine loads the 4-bit weights), or --method lora to keep the server",
                {"vllm_mode": "colocate", "vllm_gpus": 0, "vllm_mem_fraction": 0.3,
                 "num_processes": p.gpus_per_node * ctx.target.nodes})

RULES = (vllm_needs_generating_trainer, vllm_server_dedicated_gpus, vllm_colocate_tp, vllm_max_model_length,
         vllm_needs_zero3_gather, zero3_gather_off_without_vllm, vllm_serve_dense_data_parallel,
         trl_vllm_serve_deprecated, vllm_server_tp_fits, vllm_server_serves_trained_model,
         vllm_share_holds_engine, vllm_server_uses_its_gpus, vllm_server_needs_unquantized_weights)
