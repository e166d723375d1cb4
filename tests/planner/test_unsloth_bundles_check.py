"""Every Unsloth plan the planner writes passes the tool's own file check: DeepSpeed (the stage rule CMP002 allows)
and vLLM are in the planner's Unsloth set, so the consistency check must not refuse them (it did, FILES001)."""

from __future__ import annotations

import pytest

from advisor.bundle.consistency import check_bundle_files
from advisor.bundle.generate import generate
from advisor.check import check_bundle
from advisor.core.request import Request


@pytest.mark.parametrize("kw", [
    dict(model="qwen2.5-7b", method="qlora", gpus=1),
    dict(model="qwen2.5-7b", method="qlora", gpus=2, backend="ddp"),
    dict(model="qwen2.5-7b", method="qlora", gpus=2, backend="deepspeed", zero=2),
    dict(model="qwen2.5-7b", method="lora", gpus=2, backend="deepspeed", zero=3),
    dict(model="qwen2.5-7b", trainer="grpo", method="lora", gpus=1, vllm="colocate"),
    dict(model="qwen2.5-1.5b", trainer="grpo", method="lora", gpus=2, vllm="server", vllm_gpus=1),
], ids=["single", "ddp", "zero2", "zero3-lora", "grpo-colocate", "grpo-server"])
def test_an_unsloth_bundle_passes_its_own_check(tmp_path, kw):
    out = tmp_path / "b"
    generate(Request(unsloth=True, gpu="H100-80GB", **kw), out=str(out))
    files = {p.name: p.read_text() for p in out.iterdir() if p.is_file()}
    assert check_bundle_files(files) == []
    report = check_bundle(str(out))
    assert not [f for f in report.findings if f.is_error], [f.id for f in report.findings if f.is_error]
