"""valid_sp_sizes against hand-computed answers.

The rule (DeepSpeed ulysses_sp.py UlyssesSPAttentionHF): sp must divide the world size, heads % sp == 0, and
kv_heads % sp == 0 or sp % kv_heads == 0. Head counts are the models' config.json values (num_attention_heads,
num_key_value_heads), asserted first so that a catalogue change cannot silently change the expected answers.
"""

from __future__ import annotations

import pytest

from advisor import catalog
from rules import valid_sp_sizes

# (catalogue id, heads, kv heads, world size, expected valid sp sizes worked out by hand)
CASES = [
    # 28/4 on 8: divisors 1 2 4 8; 28 % 8 = 4 -> 8 out; 1 2 4 divide 4 -> [1, 2, 4]
    ("qwen2.5-7b", 28, 4, 8, [1, 2, 4]),
    # 28/4 on 28: divisors 1 2 4 7 14 28; 7: 4%7, 7%4 != 0 -> out; 14: 4%14, 14%4=2 -> out; 28: 28%4=0 -> in
    ("qwen2.5-7b", 28, 4, 28, [1, 2, 4, 28]),
    # 32/8 on 8: every divisor of 8 divides 32 and 8 -> [1, 2, 4, 8]
    ("llama-3.1-8b", 32, 8, 8, [1, 2, 4, 8]),
    # 32/8 on 6: divisors 1 2 3 6; 32 % 3 != 0, 32 % 6 != 0 -> [1, 2]
    ("llama-3.1-8b", 32, 8, 6, [1, 2]),
    # 14/2 on 8: 14 % 4 = 2, 14 % 8 = 6 -> [1, 2]
    ("qwen2.5-0.5b", 14, 2, 8, [1, 2]),
    # 14/2 on 14: divisors 1 2 7 14; 7: 2%7 and 7%2 != 0 -> out; 14: 14%2 = 0 -> in
    ("qwen2.5-0.5b", 14, 2, 14, [1, 2, 14]),
    # 64/8 on 16 (2 nodes x 8): 16 divides 64 and 16 % 8 = 0 -> [1, 2, 4, 8, 16]
    ("qwen2.5-72b", 64, 8, 16, [1, 2, 4, 8, 16]),
    ("llama-3.1-70b", 64, 8, 8, [1, 2, 4, 8]),
    ("mistral-7b-v0.3", 32, 8, 8, [1, 2, 4, 8]),
    # 32/8 on 12: divisors 1 2 3 4 6 12; 3, 6, 12 do not divide 32 -> [1, 2, 4]
    ("qwen3-8b", 32, 8, 12, [1, 2, 4]),
    # 16/8 on 32: 32 does not divide 16 -> [1, 2, 4, 8, 16]
    ("gemma-2-9b", 16, 8, 32, [1, 2, 4, 8, 16]),
    # 40/10 on 8: 40 % 8 = 0 but 10 % 8 != 0 and 8 % 10 != 0 -> out; 4: 10 % 4 = 2 and 4 % 10 != 0 -> out
    ("phi-4", 40, 10, 8, [1, 2]),
    # 4/1 on 8: 8 does not divide 4; kv 1 divides every sp -> [1, 2, 4]
    ("gemma-3-1b", 4, 1, 8, [1, 2, 4]),
]


@pytest.mark.parametrize(("model_id", "heads", "kv", "world", "expected"), CASES,
                         ids=[f"{c[0]}-w{c[3]}" for c in CASES])
def test_valid_sp_sizes(model_id, heads, kv, world, expected):
    model = catalog.resolve_model(model_id)
    assert (model.heads, model.kv_heads) == (heads, kv), "catalogue head counts changed: recompute the answer"
    assert valid_sp_sizes(model, world) == expected


def test_one_gpu_allows_only_sp_1():
    assert valid_sp_sizes(catalog.resolve_model("qwen2.5-7b"), 1) == [1]
