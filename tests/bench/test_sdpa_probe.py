"""bench/sdpa_probe.py on the CPU: every case timed with cuDNN attention on and off, and its CLI's refusals (an
existing output file: tests/bench/test_shape_probe.py)."""

from __future__ import annotations

import pytest

from bench import sdpa_probe as SP

TINY = {"model_type": "llama", "layers": 2, "hidden": 32, "intermediate": 64, "heads": 2, "kv_heads": 1,
        "vocab": 128, "tied_embeddings": False}


def test_each_case_is_timed_with_cudnn_on_and_off(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    rows, saves = [], []
    SP.probe(torch, "tiny", rows, lambda: saves.append(len(rows)), arch=TINY, seqs=(8,), batch=2, gen_batch=2,
             gen_prompt=6, gen_tokens=2, repeats=2)
    cases = [(r["case"], r["width"], r["mask"], r["cudnn_sdp"]) for r in rows]
    assert cases == [("forward_backward", 8, "causal", True), ("forward_backward", 8, "causal", False),
                     ("forward_backward", 8, "left-padded", True), ("forward_backward", 8, "left-padded", False),
                     ("generate", 6, "left-padded", True), ("generate", 6, "left-padded", False)]
    assert saves == list(range(1, 7))
    for r in rows:
        assert len(r["seconds"]) == 2 and min(r["seconds"]) <= r["median_s"] <= max(r["seconds"])
    # the probe leaves the process as it found it
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_an_unknown_model_is_a_usage_error_that_writes_nothing(tmp_path):
    out = tmp_path / "probe.json"
    with pytest.raises(SystemExit) as exc:
        SP.main(["--out", str(out), "--model", "no-such-model"])
    assert exc.value.code == 2 and not out.exists()
