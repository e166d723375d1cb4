"""What the estimators users reach for today would have said about the measured runs.

Two published formulas, implemented from their source as pure functions (no torch, no deepspeed, no accelerate
import), so bench/accuracy.py can put their figures next to ours:

- accelerate's `accelerate estimate-memory` "Training using Adam" column (accelerate 1.15,
  src/accelerate/commands/estimate.py: `estimate_training_usage`, `gather_data`, `estimate_command`;
  shared/reference/anchors-tools.md section 2.1).
- DeepSpeed's `estimate_zero2_model_states_mem_needs` (deepspeed 0.19.8, deepspeed/runtime/zero/stage_1_and_2.py)
  and `estimate_zero3_model_states_mem_needs` (deepspeed/runtime/zero/stage3.py); shared/reference/api-facts.md
  section 4, anchors-tools.md section 2.3. Their GPU figure, in bytes.

Both count model states only (no activations, no logits, no CUDA workspaces), and neither knows LoRA: they are fed
the whole model's parameter count, as a user would (DeepSpeed issue #5304: frozen parameters are counted as
trainable). That is the comparison the accuracy report makes.
"""

from __future__ import annotations

from advisor.core.specs import ModelSpec

ACCELERATE_DTYPES = ("float32", "float16", "int8", "int4")
"""`accelerate estimate-memory --dtypes` choices (estimate.py estimate_command_parser). There is no bfloat16 choice;
`estimate_training_usage` treats "float16" and "bfloat16" alike."""


# ---------------------------------------------------------------------------------------------------------------------
# accelerate estimate-memory
# ---------------------------------------------------------------------------------------------------------------------
def accelerate_training_usage(fp32_bytes: int, mixed_precision: str) -> dict[str, int]:
    """accelerate.commands.estimate.estimate_training_usage, line for line: `fp32_bytes` is the model's size as
    `calculate_maximum_sizes` reports it for the empty (fp32, meta-device) model; -1 marks "not estimated".

    float32: model 4P, gradients 4P, optimizer 8P, step 16P (in bytes for P parameters, fp32_bytes = 4P).
    float16 / bfloat16 (and fp8 without MS-AMP): model 4P, gradients 4P + 2P ("1.5 from weight gradient +
    computation"), optimizer 8P, step = optimizer. Anything else (int8, int4): all -1."""
    sizes = {"model": -1, "optimizer": -1, "gradients": -1, "step": -1}
    fp32_size = fp32_bytes
    fp16_size = fp32_bytes // 2
    if mixed_precision == "float32":
        sizes["model"] = fp32_size
        sizes["gradients"] = fp32_size
        sizes["optimizer"] = fp32_size * 2
        sizes["step"] = fp32_size * 4
    elif mixed_precision in ("float16", "bfloat16", "fp8"):
        sizes["model"] = fp32_size
        sizes["gradients"] = fp32_size + fp16_size
        sizes["optimizer"] = fp32_size * 2
        sizes["step"] = sizes["optimizer"]
    return sizes


def accelerate_training_adam_bytes(params: int, dtype: str) -> int | None:
    """The "Training using Adam" cell for one `--dtypes` value: estimate_command prints max(values) of
    estimate_training_usage (the largest component, not their sum), "N/A" when that is -1 (int8, int4).

    gather_data passes the fp32 size of the whole model (4 bytes per parameter; tied weights once, buffers such as
    RoPE's inv_freq are a few hundred bytes and left out here) for every dtype: 16 B/param for float32, 8 B/param for
    float16. None stands for "N/A"."""
    if dtype not in ACCELERATE_DTYPES:
        raise ValueError(f"accelerate estimate-memory has no dtype {dtype!r} (choices: {', '.join(ACCELERATE_DTYPES)})")
    usage = max(accelerate_training_usage(4 * params, dtype).values())
    return None if usage == -1 else usage


def accelerate_dtype_for(precision: str, method: str) -> str:
    """The `--dtypes` value that matches a run's model dtype: a bf16 model -> "float16" (the CLI's only 16-bit choice),
    fp32 weights (bf16-mixed, fp16-mixed, fp32) -> "float32", a QLoRA 4-bit base -> "int4" (printed N/A)."""
    if method == "qlora":
        return "int4"
    return "float16" if precision in ("bf16", "fp16") else "float32"


# ---------------------------------------------------------------------------------------------------------------------
# DeepSpeed ZeRO estimators
# ---------------------------------------------------------------------------------------------------------------------
def deepspeed_zero2_model_states_mem_needs(total_params: int, num_gpus_per_node: int = 1, num_nodes: int = 1,
                                           cpu_offload: bool = True,
                                           additional_buffer_factor: float = 1.5) -> tuple[int, int]:
    """deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs: (cpu bytes, gpu bytes).

    Offload: gpu 2P, cpu P * max(4 * total_gpus, 16) * abf. No offload: gpu 2P + int(18P / total_gpus) ("2 =
    params_16bit, 18 = 2_grads_16bit + 4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit"), cpu
    P * 4 * num_gpus_per_node * abf."""
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def deepspeed_zero3_model_states_mem_needs(total_params: int, largest_layer_params: int, num_gpus_per_node: int = 1,
                                           num_nodes: int = 1, cpu_offload: bool = True,
                                           cpu_offload_params: bool = True, zero_init: bool = True,
                                           additional_buffer_factor: float = 1.5) -> tuple[int, int, int]:
    """deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs: (cpu bytes, gpu bytes,
    largest_layer_memory), largest_layer_memory = 4 * largest_layer_params (16-bit params and grads of the biggest
    module, gathered).

    Optimizer and params offloaded: gpu LLM. Optimizer only: gpu LLM + int(2P / total_gpus). No offload:
    gpu LLM + int(18P / total_gpus). cpu as in the code (gpus_factor = 1 / num_nodes)."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            if zero_init:
                cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 18 * gpus_factor) * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            if zero_init:
                cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 16 * gpus_factor) * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
        else:
            cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory


def largest_module_params(model: ModelSpec) -> int:
    """What `estimate_zero3_model_states_mem_needs_all_live` measures as largest_layer_params: the most parameters any
    single module holds itself (`m.parameters(recurse=False)`): the embedding (or untied LM head), a Linear (with its
    bias), or transformers 5's fused MoE expert block (one module per layer holding every expert's weights)."""
    biggest_linear = max(i * o + o for i, o, _ in model.linear_shapes_per_layer())
    experts = model.num_experts * 3 * model.hidden * model.moe_intermediate if model.is_moe else 0
    return max(model.vocab * model.hidden, biggest_linear, experts)


# ---------------------------------------------------------------------------------------------------------------------
# Per run: the figure each tool gives for one measured configuration (one GPU)
# ---------------------------------------------------------------------------------------------------------------------
def accelerate_estimate(model: ModelSpec, precision: str, method: str) -> int | None:
    """accelerate estimate-memory "Training using Adam" for the run's model dtype (None: N/A)."""
    return accelerate_training_adam_bytes(model.params, accelerate_dtype_for(precision, method))


def deepspeed_estimate(model: ModelSpec, backend: str, zero_stage: int, offload: str, gpus_per_node: int = 1,
                       nodes: int = 1) -> int:
    """DeepSpeed's GPU figure for the run: the ZeRO-3 estimator for ZeRO-3 runs (optimizer / optimizer + params
    offload as configured; zero_init=True, which only changes the CPU figure), the ZeRO-2 estimator for ZeRO-1/2
    runs, and for runs without DeepSpeed the ZeRO-2 no-offload figure (2P + 18P / N): DeepSpeed has no estimator for
    plain data parallelism, and that call is the one users reach for (DeepSpeed docs memory.rst, HF "model memory
    anatomy" guides)."""
    if backend == "deepspeed" and zero_stage == 3:
        return deepspeed_zero3_model_states_mem_needs(
            model.params, largest_module_params(model), gpus_per_node, nodes, cpu_offload=offload != "none",
            cpu_offload_params=offload == "all")[1]
    offloaded = backend == "deepspeed" and offload != "none"
    return deepspeed_zero2_model_states_mem_needs(model.params, gpus_per_node, nodes, cpu_offload=offloaded)[1]
