"""A decode step of transformers' generate through unmerged LoRA adapters (GRPO/RLOO/GKD bundles without vLLM),
against the profiled steps of `python -m bench.decode_probe --lora both` (one H100, transformers 5.17, PEFT 0.21)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from plan_defaults import build_plan

from advisor.catalog import resolve_gpu, resolve_model
from advisor.core.plan import Plan
from advisor.core.target import Target
from advisor.model import speed as S
from advisor.model.dims import Precision, dims

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "bench" / "results" / "decode-probe-h100-2026-12-07-lora.json"


def _plan(method: str, batch: int) -> Plan:
    return build_plan(trainer="grpo", method=method, seq_len=512, micro_batch=batch, grad_ckpt=False,
                      num_generations=2, max_completion_len=128)


def _pairs() -> list[tuple[str, int, dict, dict]]:
    data = json.loads(PROBE.read_text(encoding="utf-8"))
    rows = {(r["model"], r["batch"], r["lora"]): r for r in data["rows"] if not r["padded"]}
    return [(m, b, rows[(m, b, False)], r) for (m, b, lora), r in sorted(rows.items())
            if lora and (m, b, False) in rows]


def test_the_probe_has_lora_and_plain_steps_of_two_models():
    pairs = _pairs()
    assert {m for m, *_ in pairs} == {"llama-3.2-1b", "qwen3-0.6b"}
    assert len(pairs) == 4


@pytest.mark.parametrize("model,batch,plain,lora", _pairs(), ids=lambda v: str(v) if not isinstance(v, dict) else "")
def test_lora_kernels_per_adapted_linear_are_the_profiled_ones(model, batch, plain, lora):
    d = dims(resolve_model(model))
    added = lora["kernels_per_decode_step"] - plain["kernels_per_decode_step"]
    assert added / (d.L * d.linears_per_layer) == pytest.approx(S.LORA_DECODE_KERNELS_PER_LINEAR, rel=0.05)
    target = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=1, nodes=1)
    counted = (S.decode_step_kernels(d, _plan("lora", batch), target)
               - S.decode_step_kernels(d, _plan("full", batch), target))
    assert counted == pytest.approx(added, rel=0.05)


def test_lora_slows_a_host_bound_generation_as_the_probe_did():
    """The probe's LoRA decode steps took 1.9-2.6x the plain ones at 16-64 sequences; the model's generation of a
    host-bound plan (a 1B model, 16 sequences) grows by at least 1.5x, not the 1.2x of the training forward's count."""
    measured = [lora["decode_step_ms"] / plain["decode_step_ms"] for *_, plain, lora in _pairs()]
    assert min(measured) > 1.5
    model = resolve_model("llama-3.2-1b")
    d = dims(model)
    target = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=1, nodes=1)
    times = {}
    for method in ("full", "lora"):
        plan = _plan(method, 16)
        times[method], _ = S.generation_seconds(d, model, plan, target, Precision.of(plan))
    assert times["lora"] / times["full"] > 1.5
