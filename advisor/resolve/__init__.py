"""From a request to what the engine reads: the checked input, the model, the hardware target, and (for
`estimate` and `check`) a plan with every unpinned knob at its documented default."""

from advisor.resolve.attention import choose_attention
from advisor.resolve.checks import check_against_target, check_attn, check_request, check_text
from advisor.resolve.defaults import (
    DEFAULT_LORA_R,
    DEFAULT_MAX_COMPLETION,
    DEFAULT_MICRO_BATCH,
    DEFAULT_NUM_GENERATIONS,
    DEFAULT_SEQ_LEN,
    DEFAULT_VLLM_MEM_FRACTION,
    METHOD_ORDER,
    default_backend,
    default_plan,
    method_options,
    reference_options,
    resolve_model,
    resolve_teacher,
)
from advisor.resolve.hardware import DEFAULT_GPU, load_report, resolve_target, target_from_report

__all__ = ["choose_attention", "DEFAULT_GPU", "DEFAULT_LORA_R", "DEFAULT_MAX_COMPLETION", "DEFAULT_MICRO_BATCH", "DEFAULT_NUM_GENERATIONS",
           "DEFAULT_SEQ_LEN", "DEFAULT_VLLM_MEM_FRACTION", "check_against_target", "check_attn", "check_request",
           "check_text", "default_backend", "default_plan", "load_report", "METHOD_ORDER", "method_options",
           "reference_options", "resolve_model",
           "resolve_target", "resolve_teacher", "target_from_report"]
