"""A dataset of rows of different lengths pads each batch and gives SDPA a mask: the bundle's README states that
peak beside the plan's (advisor.model.padded_data), and a packed plan takes FlashAttention 2, whose padding-free rows
need no mask (advisor.resolve.attention.choose_attention)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from advisor.catalog import resolve_gpu, resolve_model
from advisor.core.plan import Plan
from advisor.core.target import Target
from advisor.model import activations as MA
from advisor.model.padded_data import padded_data_memory


def _plan(**kw) -> Plan:
    base = dict(trainer="sft", method="full", lora_r=16, backend="single", zero_stage=0, offload="none",
                offload_device="cpu", precision="bf16", seq_len=4096, micro_batch=8, grad_accum=1, grad_ckpt=False,
                liger=False, attn="sdpa", packing=False, sp_size=1, cp_size=1, num_processes=1, nodes=1,
                gpus_per_node=1)
    base.update(kw)
    return Plan(**base)


def _generate(tmp_path, *args: str) -> tuple[dict, str]:
    out = tmp_path / "bundle"
    proc = subprocess.run([sys.executable, "-m", "advisor", "generate", *args, "--out", str(out), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), (out / "README.md").read_text(encoding="utf-8")


def test_padded_batches_mask_every_trainer_but_a_packed_one():
    sft = _plan(trainer="sft", seq_len=2048, micro_batch=4)
    assert not MA.padding_mask(sft)
    with MA.padded_batches():
        assert MA.padding_mask(sft)
        assert not MA.padding_mask(_plan(trainer="sft", seq_len=2048, micro_batch=4, packing=True))
    with MA.fixed_length_batches():
        assert not MA.padding_mask(_plan(trainer="grpo", seq_len=768, micro_batch=8, num_generations=8,
                                        max_completion_len=256))


def test_the_padded_estimate_is_larger_under_sdpa_and_absent_where_padding_changes_nothing():
    model = resolve_model("llama-3.2-1b")
    target = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=1, nodes=1)
    sft = _plan(trainer="sft", seq_len=4096, micro_batch=8, attn="sdpa")
    from advisor.model.memory import estimate_memory

    assert padded_data_memory(model, sft, target).per_gpu_peak_bytes > \
        estimate_memory(model, sft, target).per_gpu_peak_bytes
    for other in (_plan(trainer="sft", seq_len=4096, micro_batch=8, attn="flash_attention_2"),
                  _plan(trainer="sft", seq_len=4096, micro_batch=8, attn="sdpa", packing=True),
                  _plan(trainer="grpo", seq_len=768, micro_batch=8, num_generations=8, max_completion_len=256)):
        assert padded_data_memory(model, other, target) is None


def test_an_sft_bundle_states_the_padded_peak(tmp_path):
    result, readme = _generate(tmp_path, "--model", "llama-3.2-1b", "--gpu", "H100-80GB", "--seq-len", "4096")
    assert "Rows of different lengths" in readme
    line = readme.split("Rows of different lengths", 1)[1].split("\n\n", 1)[0]
    peak = float(line.split("estimated peak **", 1)[1].split(" GiB", 1)[0])
    assert peak > result["memory"]["per_gpu_peak_bytes"] / 2 ** 30


@pytest.mark.parametrize("trainer", ["grpo"])
def test_bundles_estimated_padded_already_carry_no_note(tmp_path, trainer):
    _, readme = _generate(tmp_path, "--model", "qwen2.5-0.5b", "--gpu", "H100-80GB", "--trainer", trainer,
                          "--vllm", "none")
    assert "Rows of different lengths" not in readme


def test_a_packed_plan_takes_flash_attention_where_the_gpu_allows_it(tmp_path):
    from advisor.core.request import Request
    from advisor.resolve.attention import choose_attention

    model = resolve_model("llama-3.2-1b")
    h100 = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=1, nodes=1)
    assert choose_attention(Request(model="llama-3.2-1b", packing=True), model, h100, "bf16")[0] == \
        "flash_attention_2"
    assert choose_attention(Request(model="llama-3.2-1b"), model, h100, "bf16")[0] == "sdpa"
    assert choose_attention(Request(model="llama-3.2-1b", packing=True, attn="sdpa"), model, h100, "bf16")[0] == "sdpa"
    t4 = Target(gpu=resolve_gpu("T4"), gpus_per_node=1, nodes=1)  # compute capability 7.5: no FlashAttention 2
    assert choose_attention(Request(model="llama-3.2-1b", packing=True), model, t4, "fp16-mixed")[0] == "sdpa"
    # the bundle then passes its own rules (TRN008: packed rows under SDPA attend to each other)
    _, readme = _generate(tmp_path, "--model", "llama-3.2-1b", "--gpu", "H100-80GB", "--seq-len", "4096", "--packing")
    proc = subprocess.run([sys.executable, "-m", "advisor", "check", "--bundle", str(tmp_path / "bundle"), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert "TRN008" not in proc.stdout
    assert "Rows of different lengths" not in readme
