"""The memory breakdown as the bundle README and `estimate` show it: what the GPU holds at the moment of its peak,
that moment named, and a part at 0 said why (no gradients yet at the end of a forward pass), never a bare 0.00 that
reads like a bug."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from advisor.bundle import peak
from advisor.bundle.generate import generate
from advisor.check import estimate_request, render_estimate
from advisor.core.request import Request

FSDP2_FORWARD_PEAK = Request(model="8B", gpu="H100-80GB", gpus=8, backend="fsdp2", micro_batch=8, grad_accum=1,
                             grad_ckpt=False, liger=True)
"""Llama-3.1-8B SFT on 8 x H100 under FSDP2, one micro-batch per step: the peak is at the end of the forward pass,
where no gradient exists yet (the review's case)."""

REQUESTS = {
    "fsdp2-forward": FSDP2_FORWARD_PEAK,
    "accumulating": Request(model="8B", gpu="H100-80GB", gpus=8, backend="fsdp2", micro_batch=2, grad_accum=4),
    "zero2-optimizer-offload": Request(model="8B", gpu="H100-80GB", gpus=1, backend="deepspeed", zero=2,
                                       offload="optimizer", micro_batch=1),
    "zero3-offload-all": Request(model="70B", gpu="H100-80GB", gpus=8, backend="deepspeed", zero=3, offload="all",
                                 micro_batch=1),
    "grpo": Request(model="7B", trainer="grpo", gpu="H100-80GB", gpus=8),
    "dpo-reference-forward": Request(model="8B", trainer="dpo", gpu="H100-80GB", gpus=2, backend="fsdp2",
                                     ref_model="copy"),
    "lora-first-layer": Request(model="8B", gpu="H100-80GB", gpus=1, method="lora", micro_batch=1),
    "fsdp2-late-backward": Request(model="8B", gpu="H100-80GB", gpus=8, backend="fsdp2"),
}


def test_every_phase_the_memory_model_names_is_said_in_words():
    """advisor.model.memory's phases (the names it appends): a new one must be given words here."""
    src = (Path(__file__).resolve().parents[2] / "advisor" / "model" / "memory.py").read_text(encoding="utf-8")
    named = set(re.findall(r'phases\.append\(\(\s*"([a-z-]+)"', src))
    assert named and named <= set(peak.PHASES), named - set(peak.PHASES)


def test_the_fsdp2_bundle_says_its_peak_is_in_the_forward_pass(tmp_path):
    out = tmp_path / "b"
    mem = generate(FSDP2_FORWARD_PEAK, out=str(out)).result["memory"]
    assert mem["peak_phase"] == "train" and mem["breakdown_bytes"]["gradients"] == 0  # the case itself
    readme = (out / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Predicted memory per GPU"):readme.index("## Predicted speed")]
    assert "which falls at the end of the forward pass, where the backward starts" in section
    assert ("| gradients; none at the peak: not written yet at that moment, and the Trainer's "
            "`zero_grad(set_to_none=True)` freed the previous step's | 0.00 |") in section
    assert not re.search(r"^\| [a-z_]+ \| 0\.00 \|$", section, re.M), section  # no bare zero
    # the parts in the order the model adds them, then what the figures below them are
    parts = re.findall(r"^\| ([a-z_]+)[ ;]", section, re.M)
    assert parts[:7] == ["part", "weights", "gradients", "optimizer", "activations", "logits", "other"]
    margin = peak.safety_margin_bytes(mem)
    assert mem["gpu_capacity_bytes"] - mem["per_gpu_reserved_bytes"] - margin == mem["headroom_bytes"]
    assert f"| safety margin kept free of the usable memory (rules MEM001, MEM006) | {margin / 2**30:.2f} |" in section


@pytest.mark.parametrize("name", list(REQUESTS))
def test_a_part_at_zero_is_said_why_in_the_readme_rows_and_in_estimate(name):
    result = estimate_request(REQUESTS[name])
    mem, offload = result["memory"], result["request"]["offload"]
    assert peak.peak_moment(mem)  # every phase has its words
    rows = peak.breakdown_rows(mem, offload)
    assert [p for p, _, _ in rows] == list(peak.PARTS)
    for part, value, why in rows:
        assert (why is not None) is (value == 0), (part, value, why)
    text = render_estimate(result)
    assert f"memory per GPU at its peak, {peak.peak_moment(mem)}:" in text
    for part, _, why in rows:
        line = next(ln for ln in text.splitlines() if ln.startswith(f"  {part} "))
        assert (f"none at the peak: {why}" in line) if why else ("none at the peak" not in line), line
