"""The vLLM engine's needs (advisor.model.vllm_memory) against vLLM's own start-up log, and the colocate share the
planner sets from them."""

from __future__ import annotations

import pytest
from model_fixtures import make_plan

from advisor.catalog import resolve_gpu, resolve_model
from advisor.core.plan import Plan
from advisor.core.specs import GIB
from advisor.core.target import Target
from advisor.model import vllm_memory as V

H100 = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=8, nodes=1)
RTX4090 = Target(gpu=resolve_gpu("RTX-4090"), gpus_per_node=1, nodes=1)


def grpo(**kw) -> Plan:
    base = dict(trainer="grpo", seq_len=1024, micro_batch=4, grad_accum=8, num_generations=8, max_completion_len=512,
                vllm_mode="colocate", vllm_mem_fraction=0.3)
    base.update(kw)
    return make_plan(**base)


def test_llama_3_8b_matches_vllm_s_own_profile_log():
    """vLLM pull request 10511, `vllm serve meta-llama/Meta-Llama-3-8B` on an H100 (v0 profiler: 8,192 batched tokens,
    256 sequences): model weights take 14.96 GiB, PyTorch activation peak memory 1.26 GiB."""
    need = V.engine_need(resolve_model("llama-3.1-8b"), grpo(), H100, batched_tokens=8192, max_seqs=256)
    assert need.weights / GIB == pytest.approx(14.96, rel=0.01)
    assert need.activations / GIB == pytest.approx(1.26, rel=0.06)


def test_tensor_parallelism_splits_weights_and_kv_and_adds_nccl():
    model = resolve_model("llama-3.1-8b")
    one = V.engine_need(model, grpo(), H100)
    two = V.engine_need(model, grpo(), H100, tensor_parallel=2)
    assert two.weights == pytest.approx(one.weights / 2, rel=1e-6)
    assert two.kv_per_token == one.kv_per_token // 2
    assert two.non_torch - one.non_torch == V.TP_NCCL_BYTES


def test_qlora_engine_holds_4_bit_weights():
    model = resolve_model("llama-3.1-8b")
    assert V.engine_need(model, grpo(method="qlora"), H100).weights < 0.45 * V.engine_need(model, grpo(), H100).weights


def test_one_request_s_kv_follows_max_model_len():
    model = resolve_model("llama-3.1-8b")
    short = V.engine_need(model, grpo(), H100, max_model_len=1024)
    long = V.engine_need(model, grpo(), H100, max_model_len=131072)
    # 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 128 KiB per token: 16 GiB for 128k tokens
    assert long.kv_one_request == 131072 * 128 * 1024
    assert long.floor - short.floor == long.kv_one_request - short.kv_one_request


def test_the_colocate_share_stays_at_the_default_where_it_holds_the_engine():
    assert V.colocate_fraction(resolve_model("qwen2.5-0.5b"), grpo(), H100, 0.3) == 0.3
    assert V.colocate_fraction(resolve_model("llama-3.1-8b"), grpo(), H100, 0.3) == 0.3


def test_the_colocate_share_is_raised_where_the_default_cannot_hold_the_weights():
    model = resolve_model("llama-3.1-8b")
    f = V.colocate_fraction(model, grpo(), RTX4090, 0.3)
    need = V.engine_need(model, grpo(), RTX4090)
    assert f * RTX4090.gpu_memory_bytes >= need.floor or f == V.MAX_COLOCATE_FRACTION
    assert f > 0.3 and round(f / V.FRACTION_STEP, 9) == int(round(f / V.FRACTION_STEP, 9))
