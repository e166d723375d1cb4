"""What makes `recommend` fast without changing its answer: search(explain=False) skips a structure without gradient
checkpointing when its twin with it fits no micro-batch. That is sound only while checkpointing adds memory nowhere
in the memory model: checked here on random structures of every trainer."""

from __future__ import annotations

import pytest
from random_structures import sampled_structures

from advisor.catalog import resolve_gpu
from advisor.core.request import Request
from advisor.core.target import Target
from advisor.model.memory import estimate_memory
from advisor.resolve import resolve_model
from advisor.search.candidates import structures
from advisor.search.planner import search


def test_checkpointing_never_adds_memory():
    checked = 0
    for model, target, without in sampled_structures(7, 40, 8):
        need = estimate_memory(model, without, target).per_gpu_reserved_bytes
        lighter = without.with_(grad_ckpt=True)
        assert estimate_memory(model, lighter, target).per_gpu_reserved_bytes <= need, lighter.short()
        checked += 1
    assert checked == 320


@pytest.mark.parametrize(("fields", "gpu", "per_node", "nodes"), [
    (dict(model="llama-3.1-70b", trainer="grpo", method="full"), "L4", 1, 1),  # nothing fits
    (dict(model="llama-3.1-70b", trainer="grpo", method="full"), "H100-80GB", 4, 1),
    (dict(model="qwen3-30b-a3b", trainer="rloo", method="full"), "A100-40GB", 2, 1),
    (dict(model="llama-3.1-8b", trainer="sft", seq_len=32768, liger=False), "RTX-4090", 2, 1),
    (dict(model="gemma-2-9b", trainer="dpo", grad_ckpt=False), "A100-80GB", 8, 1),
])
def test_skipping_heavier_twins_keeps_the_choice(fields, gpu, per_node, nodes):
    req = Request(**fields)
    model = resolve_model(req)
    target = Target(gpu=resolve_gpu(gpu), gpus_per_node=per_node, nodes=nodes)
    full, alone = search(req, model, target), search(req, model, target, explain=False)
    def key(d):
        return None if d.chosen is None else (d.chosen.plan, d.chosen.tokens_per_second)

    assert key(alone) == key(full)


def test_a_search_that_fits_nothing_estimates_a_fraction():
    req = Request(model="llama-3.1-70b", trainer="grpo", method="full")
    model = resolve_model(req)
    target = Target(gpu=resolve_gpu("L4"), gpus_per_node=1, nodes=1)
    full, alone = search(req, model, target), search(req, model, target, explain=False)
    assert full.chosen is None and alone.chosen is None
    # the twins without checkpointing are not estimated: half the structures
    assert alone.considered <= 0.55 * full.considered


@pytest.mark.parametrize("trainer", ["dpo", "kto", "gkd"])
def test_paired_trainers_get_no_sequence_parallel_structures(trainer):
    # DPO/KTO/GKD batches cannot be split (rule SP017): their Ulysses structures were all estimated, then refused,
    # and listed as alternatives the user cannot pick; a 72B DPO at 32k spent most of `recommend` on them
    req = Request(model="qwen2.5-7b", trainer=trainer, seq_len=32768,
                  teacher="qwen2.5-7b" if trainer == "gkd" else None)
    model = resolve_model(req)
    target = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=8, nodes=1)
    assert {(s.sp_size, s.cp_size) for s in structures(req, model, target)} == {(1, 1)}
    decision = search(req, model, target)
    assert not any(a.rejected_because.startswith("SP017") for a in decision.alternatives)
    sft = Request(model="qwen2.5-7b", trainer="sft", seq_len=32768)
    assert any(s.sp_size > 1 for s in structures(sft, model, target))


def test_structures_the_rules_always_refuse_are_not_estimated():
    # QLoRA with a vLLM server (VLLM013) and the planner's own Ulysses degrees off DeepSpeed (SP002) fail whatever
    # the memory; a user's pin keeps them, so that the rule names what is wrong with the request
    target = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=8, nodes=1)
    grpo = Request(model="qwen2.5-7b", trainer="grpo")
    model = resolve_model(grpo)
    assert not [s for s in structures(grpo, model, target) if s.method == "qlora" and s.vllm_mode == "server"]
    pinned = grpo.with_(vllm="server", method="qlora")
    assert structures(pinned, model, target)
    sft = Request(model="qwen2.5-7b", seq_len=32768)
    assert {s.backend for s in structures(sft, model, target) if s.sp_size > 1} == {"deepspeed"}
    assert {s.backend for s in structures(sft.with_(sp_size=2), model, target)} > {"deepspeed"}
