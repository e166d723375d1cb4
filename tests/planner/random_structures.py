"""Random search structures over the catalogue (every trainer, four GPU kinds, one to sixteen GPUs), each at a random
micro-batch without checkpointing: what the search's shortcuts are checked on (test_search_speed.py,
test_offload_choice.py)."""

from __future__ import annotations

import random
from collections.abc import Iterator

from advisor.catalog import resolve_gpu
from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.resolve import resolve_model
from advisor.search.candidates import MICRO_BATCHES, _accumulation, structures

MODELS = ("qwen2.5-0.5b", "qwen2.5-7b", "llama-3.1-8b", "gemma-2-9b", "gemma-3-12b", "phi-3-mini", "mixtral-8x7b",
          "qwen3-30b-a3b", "llama-3.1-70b")


def sampled_structures(seed: int, requests: int, per_request: int) -> Iterator[tuple[ModelSpec, Target, Plan]]:
    """`per_request` structures of each of `requests` random requests, seeded: (model, target, plan)."""
    rng = random.Random(seed)
    for _ in range(requests):
        model_id = rng.choice(MODELS)
        trainer = rng.choice(("sft", "dpo", "kto", "grpo", "rloo", "gkd"))
        req = Request(model=model_id, trainer=trainer, teacher=model_id if trainer == "gkd" else None,
                      seq_len=rng.choice((512, 4096, 32768)))
        model = resolve_model(req)
        target = Target(gpu=resolve_gpu(rng.choice(("H100-80GB", "A100-40GB", "L4", "T4"))),
                        gpus_per_node=rng.choice((1, 2, 8)), nodes=rng.choice((1, 2)))
        for s in rng.sample(structures(req, model, target), per_request):
            micro = rng.choice(MICRO_BATCHES)
            yield model, target, s.with_(micro_batch=micro, grad_accum=_accumulation(s, micro, 64, None),
                                         grad_ckpt=False)
