"""What switching a PEFT model's adapters off and on again costs the host CPU.

    python -m bench.adapter_probe --out bench/results/adapter-probe-HOST-DATE.json [--models ID,ID,...]

DPOTrainer and KTOTrainer (TRL 1.16) score a LoRA run's reference with the adapters disabled: each micro-batch's
reference forward runs inside trl.trainer.utils.use_adapter(model, None), that is PEFT's disable_adapter(), which walks
every module of the model twice and flips each adapter's layers (tuners_utils enable_adapters, set_adapter). That is
host time inside the forward, however few tokens the micro-batch holds. This probe times the context manager's
enter + exit on the catalogue's architectures as the benchmark wraps them (PEFT LoRA, target_modules="all-linear"),
their module structure kept and their widths shrunk (64 hidden, 4 heads: the walk costs per module, not per weight),
on the CPU only. Results are data (one JSON file), not a test.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from typing import Any

from bench.rows_file import new_output_problem, save_json

MODELS = ("qwen3-1.7b", "qwen2.5-3b", "qwen2.5-7b", "llama-3.2-1b", "llama-3.1-8b", "gemma-2-2b", "phi-3-mini")
"""Dense models the benchmark trains with LoRA (MoE experts are not adapted): 16 to 42 layers, 4 to 7 Linears each."""
TOGGLES = 30
REPEATS = 5
SMALL = {"hidden": 64, "intermediate": 128, "heads": 4, "kv_heads": 2, "head_dim": 16, "vocab": 256}


def small_model(model_id: str):
    """The catalogue model's layers and modules at SMALL widths, wrapped in PEFT LoRA as the benchmark does."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from advisor.catalog import resolve_model
    from bench.kernel_probe import LORA_ALPHA, LORA_DROPOUT, LORA_R
    from bench.models import arch_dict, hf_config
    from bench.worker import special_ids

    arch = {**arch_dict(resolve_model(model_id)), **SMALL}
    arch.pop("params", None)
    model = AutoModelForCausalLM.from_config(hf_config(arch, special_ids=special_ids(arch["vocab"])))
    return get_peft_model(model, LoraConfig(r=LORA_R, lora_alpha=LORA_ALPHA, lora_dropout=LORA_DROPOUT,
                                            target_modules="all-linear", task_type="CAUSAL_LM"))


def measure(model_id: str, toggles: int = TOGGLES, repeats: int = REPEATS) -> dict[str, Any]:
    from trl.trainer.utils import use_adapter

    model = small_model(model_id)
    adapted = sum(1 for m in model.modules() if hasattr(m, "lora_A"))

    def toggle(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            with use_adapter(model, None):
                pass
        return (time.perf_counter() - t0) / n

    toggle(3)  # first-call work outside the timing
    runs = [toggle(toggles) for _ in range(repeats)]
    ms = statistics.median(runs) * 1e3
    return {"model": model_id, "layers": model.config.num_hidden_layers, "lora_modules": adapted,
            "modules": sum(1 for _ in model.modules()), "toggle_ms": round(ms, 3),
            "runs_ms": [round(r * 1e3, 3) for r in runs], "us_per_lora_module": round(ms * 1e3 / adapted, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.adapter_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write (must not exist)")
    ap.add_argument("--models", help="catalogue ids instead of MODELS, comma-separated")
    a = ap.parse_args(argv)
    from advisor.catalog import resolve_model

    models = tuple(m.strip() for m in a.models.split(",")) if a.models else MODELS
    for m in models:
        try:
            spec = resolve_model(m)
        except Exception:
            ap.error(f"--models: unknown model {m!r}")
        if spec.is_moe:
            ap.error(f"--models: {m} is a MoE model (its experts are not adapted)")

    problem = new_output_problem(a.out)
    if problem:
        ap.error(f"--out {problem}")
    import peft
    import torch
    import transformers
    import trl

    from bench.host_probe import host_cpus

    result: dict[str, Any] = {
        "command": "python -m bench.adapter_probe " + " ".join(argv if argv is not None else sys.argv[1:]),
        "python": platform.python_version(), "host_cpus": host_cpus(torch),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
                     "trl": trl.__version__}, "cases": []}
    for m in models:
        result["cases"].append(measure(m))
        print(result["cases"][-1], flush=True)
        save_json(a.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
