"""README's "Memory figures" paragraph quotes the capacity chain (total, usable, limit) from the constants the
estimate uses: this holds the quoted numbers to them."""

from __future__ import annotations

from pathlib import Path

from advisor.catalog import resolve_gpu
from advisor.model import calibration as C

GIB = 1 << 30
README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_memory_figures_are_the_constants():
    text = " ".join(README.read_text(encoding="utf-8").split())
    total = resolve_gpu("H100-80GB").memory_bytes
    usable = total - C.CUDA_CONTEXT_BYTES - C.NCCL_BUFFER_BYTES
    limit = usable * (1 - C.SAFETY_MARGIN_FRACTION - C.PLANNER_HEADROOM_FRACTION)
    assert f"CUDA context ({C.CUDA_CONTEXT_BYTES / GIB:.2f} GiB, measured)" in text
    assert f"NCCL's buffers for a multi-process run ({C.NCCL_BUFFER_BYTES / GIB:.1f} GiB)" in text
    assert f"a {C.SAFETY_MARGIN_FRACTION * 100:.0f} % safety margin" in text
    assert f"an **error margin** of {C.PLANNER_HEADROOM_FRACTION * 100:.1f} % of it" in text
    assert (f"{total / GIB:.1f} GiB total, {usable / GIB:.1f} GiB usable, limit {limit / GIB:.1f} GiB") in text


def test_readme_says_headroom_for_one_thing_only():
    """"headroom" is what a plan leaves of the usable memory past its reserve and the safety margin (the JSON's
    headroom_bytes, recommend's column); the share the planner keeps back for prediction error is the "error margin"
    and FSDP2's extra share a "safety margin": no sentence calls those headroom."""
    import re

    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "A plan's **headroom** is what it leaves of the usable memory past its reserve and the safety margin" in text
    for sentence in re.split(r"(?<=[.;:])\s", text):
        if "headroom" not in sentence.lower():
            continue
        assert not re.search(r"(keeps?|extra|fits? with|of \d[\d.]* %)[^.;]{0,12}headroom", sentence, re.I), sentence
