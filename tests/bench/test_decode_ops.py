"""bench/decode_ops.py on a tiny model: the decode step's ops counted on the CPU, unpadded and padded."""

from __future__ import annotations

import pytest

from bench import decode_ops as DO

TINY = {"model_type": "llama", "layers": 2, "hidden": 32, "intermediate": 64, "heads": 2, "kv_heads": 1,
        "vocab": 128, "tied_embeddings": False}


def test_a_padded_batch_adds_repeat_kv_per_layer_and_a_mask_and_a_sync_per_step():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    r = DO.count_model(torch, "tiny", arch=TINY)
    un, pad = r["unpadded"], r["padded"]
    assert un["kernels_per_layer"] > 20 and un["kernels_per_step"] > 20
    # two KV heads fewer than query heads: repeat_kv copies K and V on every layer once SDPA gets a mask
    assert pad["kernels_per_layer"] > un["kernels_per_layer"]
    assert pad["kernels_per_step"] > un["kernels_per_step"]
    assert pad["syncs_per_step"] == un["syncs_per_step"] + 1  # sdpa_mask's host-side check
    assert r["padded_adds_per_step_at_one_layer"][DO.SYNC_OP] == 1


def test_the_cli_refuses_an_existing_file_and_an_unknown_model(tmp_path, capsys):
    out = tmp_path / "x.json"
    out.write_text("{}")
    with pytest.raises(SystemExit) as e:
        DO.main(["--out", str(out)])
    assert e.value.code == 2 and "exists" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        DO.main(["--out", str(tmp_path / "y.json"), "--models", "no-such-model"])
    assert e.value.code == 2 and "--models" in capsys.readouterr().err
