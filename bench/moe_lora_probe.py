"""What PEFT's LoRA on a mixture of experts keeps in memory beyond the same model with only its attention adapted.

    python -m bench.moe_lora_probe --out bench/results/moe-lora-probe-cpu-DATE.json

transformers 5 stores a MoE layer's experts as 3-D parameters (one fused gate_up_proj, one down_proj per layer), and
PEFT 0.21's all-linear LoRA adapts them with lora.ParamWrapper (target_parameters). Its forward registers a
parametrization on the expert parameter (tuners/lora/layer.py ParamWrapper._activate_lora): for a 16-bit parameter the
whole delta `B @ A` is materialized (get_delta_weight) and `W + delta`, a full-size copy of the layer's expert stack,
is what the experts' grouped GEMMs see, and save for their backward. So LoRA on a MoE holds a second copy of each
layer's experts per layer it has not yet run the backward of (without checkpointing: all of them), and its backward
makes full-size gradients of that copy.

This probe measures those bytes on the CPU, where every tensor is visible: a TorchDispatchMode tracks each storage an
op creates until it is freed (the model's own parameters excluded), through one forward and backward of the model
at small widths (the bytes scale with the expert stack, which the report divides by), all-linear LoRA against LoRA
on the attention only; and the bytes every op reads and writes, the same way, for the merge's HBM traffic. Results are
data (one JSON file), not a test: advisor.model.activations.MOE_LORA_SAVED_STACKS and its neighbours, and
advisor.model.speed.MOE_MERGE_FORWARD_BYTES / MOE_MERGE_BACKWARD_BYTES come from them.
"""

from __future__ import annotations

import argparse
import platform
import sys
import weakref
from typing import Any

from bench.rows_file import new_output_problem, save_json

CASES = (("qwen3_moe", 16, 4), ("qwen3_moe", 64, 4), ("qwen3_moe", 64, 8), ("mixtral", 8, 4))
"""(model_type, experts, layers): Qwen3-MoE's many small experts and Mixtral's few large ones."""
HIDDEN, EXPERT_WIDTH, TOKENS = 512, 512, (2, 32)
"""Widths at which rank 8 adapters are a few percent of the experts, as rank 16 is on Qwen3-30B-A3B (2 %)."""


def _config(model_type: str, experts: int, layers: int):
    from transformers import MixtralConfig, Qwen3MoeConfig

    common = dict(vocab_size=512, hidden_size=HIDDEN, num_hidden_layers=layers, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, num_experts_per_tok=2)
    if model_type == "mixtral":
        return MixtralConfig(intermediate_size=EXPERT_WIDTH, num_local_experts=experts, **common)
    return Qwen3MoeConfig(intermediate_size=512, moe_intermediate_size=EXPERT_WIDTH, num_experts=experts, **common)


def _live_bytes(model_type: str, experts: int, layers: int, targets, ckpt: bool) -> dict[str, int]:
    """Bytes of the storages ops created and still alive: at the forward's peak, after it, and at the step's peak."""
    import torch
    from peft import LoraConfig, get_peft_model
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_config(model_type, experts, layers), dtype=torch.bfloat16)
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    # lora_dropout 0: ParamWrapper refuses any other value, and the bundle sets 0 for a MoE
    model = get_peft_model(model, LoraConfig(r=8, target_modules=targets, lora_dropout=0.0, task_type="CAUSAL_LM"))
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    class Live(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.now = self.peak = 0
            self.alive: set[int] = set()

        def _freed(self, key: int, size: int) -> None:
            self.now -= size
            self.alive.discard(key)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    s = t.untyped_storage()
                    key, size = s.data_ptr(), s.nbytes()
                    if size and key not in params and key not in self.alive:
                        self.alive.add(key)
                        self.now += size
                        self.peak = max(self.peak, self.now)
                        weakref.finalize(s, self._freed, key, size)
            return out

    ids = torch.randint(0, 512, TOKENS)
    mode = Live()
    with mode:
        loss = model(input_ids=ids, labels=ids).loss
        forward_peak, after_forward = mode.peak, mode.now
        loss.backward()
    # the adapters' fp32 gradients, made during the backward and kept: the memory model counts them as gradients
    grads = sum(p.numel() * 4 for p in model.parameters() if p.requires_grad)
    return {"forward_peak": forward_peak, "after_forward": after_forward, "step_peak": mode.peak,
            "adapter_grad_bytes": grads}


VIEWS = {"view", "_unsafe_view", "t", "transpose", "permute", "expand", "detach", "alias", "as_strided", "slice",
         "select", "unsqueeze", "squeeze", "_reshape_alias", "reshape", "set_"}
"""Ops that move no data (views, and the parametrization's `set_`, which swaps a storage)."""


def _op_bytes(model_type: str, experts: int, layers: int, targets) -> dict[str, dict[str, int]]:
    """Bytes each op reads and writes (its tensor arguments and results), by phase and op name, through one forward
    and backward: the HBM traffic the same ops make on a GPU."""
    import collections

    import torch
    from peft import LoraConfig, get_peft_model
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_config(model_type, experts, layers), dtype=torch.bfloat16)
    model = get_peft_model(model, LoraConfig(r=8, target_modules=targets, lora_dropout=0.0, task_type="CAUSAL_LM"))
    model.train()
    counts: dict[str, collections.Counter] = {"forward": collections.Counter(), "backward": collections.Counter()}
    phase = ["forward"]

    class Bytes(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            if name not in VIEWS:
                tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
                counts[phase[0]][name] += sum(t.numel() * t.element_size() for t in tensors)
            return out

    ids = torch.randint(0, 512, TOKENS)
    with Bytes():
        loss = model(input_ids=ids, labels=ids).loss
        phase[0] = "backward"
        loss.backward()
    return {k: dict(v) for k, v in counts.items()}


def merge_bytes(model_type: str, experts: int, layers: int) -> dict[str, Any]:
    """HBM bytes per expert parameter that all-linear LoRA's ops move beyond attention-only LoRA's, per forward and
    per backward; the experts' grouped GEMMs' own bytes apart (in the backward, the extra one is the weight-gradient
    GEMM, whose FLOPs the speed model counts as a GEMM)."""
    every = _op_bytes(model_type, experts, layers, "all-linear")
    attention = _op_bytes(model_type, experts, layers, ["q_proj", "k_proj", "v_proj", "o_proj"])
    params = layers * experts * 3 * HIDDEN * EXPERT_WIDTH
    out: dict[str, Any] = {}
    for phase in ("forward", "backward"):
        ops = set(every[phase]) | set(attention[phase])
        extra = {op: (every[phase].get(op, 0) - attention[phase].get(op, 0)) / params for op in ops}
        out[phase] = {"bytes_per_param": round(sum(v for op, v in extra.items() if "grouped_mm" not in op), 3),
                      "grouped_mm_bytes_per_param": round(sum(v for op, v in extra.items() if "grouped_mm" in op), 3),
                      "by_op": {op: round(v, 3) for op, v in sorted(extra.items()) if abs(v) >= 0.01}}
    return out


def measure(model_type: str, experts: int, layers: int) -> dict[str, Any]:
    expert_bytes = experts * 3 * HIDDEN * EXPERT_WIDTH * 2  # one layer's bf16 expert stack
    out: dict[str, Any] = {"model_type": model_type, "experts": experts, "layers": layers,
                           "expert_stack_bytes_per_layer": expert_bytes}
    for ckpt in (False, True):
        every = _live_bytes(model_type, experts, layers, "all-linear", ckpt)
        attention = _live_bytes(model_type, experts, layers, ["q_proj", "k_proj", "v_proj", "o_proj"], ckpt)
        extra = {k: every[k] - attention[k] for k in every}
        beyond = extra["step_peak"] - extra["after_forward"] - extra["adapter_grad_bytes"]
        out["ckpt" if ckpt else "no_ckpt"] = {
            "all_linear": every, "attention_only": attention,
            # what all-linear keeps after the forward, per layer, in expert stacks
            "saved_stacks_per_layer": round(extra["after_forward"] / expert_bytes / layers, 3),
            # what the step's peak adds beyond that saved set and the adapters' gradients, in expert stacks
            "step_peak_beyond_saved_stacks": round(beyond / expert_bytes, 3),
            "forward_peak_beyond_saved_stacks": round((extra["forward_peak"] - extra["after_forward"])
                                                      / expert_bytes, 3)}
    out["merge_bytes"] = merge_bytes(model_type, experts, layers)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.moe_lora_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="a new JSON file for the results")
    a = ap.parse_args(argv)
    problem = new_output_problem(a.out)
    if problem:
        ap.error(problem)
    import peft
    import torch
    import transformers

    results = {"what": "bench.moe_lora_probe: live bytes of all-linear LoRA on a MoE against attention-only LoRA",
               "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                            "peft": peft.__version__, "python": platform.python_version()},
               "hidden": HIDDEN, "expert_width": EXPERT_WIDTH, "tokens": list(TOKENS), "cases": []}
    for case in CASES:
        results["cases"].append(measure(*case))
        save_json(a.out, results)
        r = results["cases"][-1]
        print(f"{case}: no ckpt saves {r['no_ckpt']['saved_stacks_per_layer']} stacks per layer, peak "
              f"+{r['no_ckpt']['step_peak_beyond_saved_stacks']}; ckpt peak "
              f"+{r['ckpt']['step_peak_beyond_saved_stacks']} stacks; merge "
              f"{r['merge_bytes']['forward']['bytes_per_param']} B/param forward, "
              f"{r['merge_bytes']['backward']['bytes_per_param']} + "
              f"{r['merge_bytes']['backward']['grouped_mm_bytes_per_param']} backward", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
