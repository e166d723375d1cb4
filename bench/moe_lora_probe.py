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
on the attention only. Results are data (one JSON file), not a test; advisor.model.activations.moe_lora_merged_bytes
uses them.
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
              f"+{r['ckpt']['step_peak_beyond_saved_stacks']} stacks", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
