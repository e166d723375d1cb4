"""bench/shape_probe.py on the CPU: one tiny sequence of widths end to end (each call's generate and forward +
backward, its width seen or not, its counters), and its CLI's refusals."""

from __future__ import annotations

import pytest

from bench import sdpa_probe
from bench import shape_probe as SP

TINY = {"model_type": "llama", "layers": 2, "hidden": 32, "intermediate": 64, "heads": 2, "kv_heads": 1,
        "vocab": 128, "tied_embeddings": False}


def test_each_width_is_one_record_with_its_counters(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    rows, saves = [], []
    SP.probe(torch, "tiny", False, (8, 7, 8), lambda: saves.append(len(rows)), rows, arch=TINY, batch=4,
             new_tokens=3)
    assert [r["prompt_width"] for r in rows] == [8, 7, 8] and saves == [1, 2, 3]
    assert [r["width_seen_before"] for r in rows] == [False, False, True]
    assert not any("top_ops" in r for r in rows)
    for r in rows:
        assert r["liger"] is False and r["generate_s"] > 0 and r["forward_backward_s"] > 0
        # the eager model on the CPU compiles no Triton kernel and no graph, and a CPU has no allocator counters
        for counts in (r["generate"], r["forward_backward"]):
            assert counts["triton_kernels_added"] == counts.get("compiled_graphs_added", 0) == 0
            assert "cuda_mallocs_added" not in counts


def test_profile_new_adds_one_new_width_twice_under_the_profiler(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(SP, "PROFILED_WIDTH_OFFSET", 3)
    rows: list = []
    SP.probe(torch, "tiny", False, (8,), lambda: None, rows, arch=TINY, batch=2, new_tokens=2, profile_new=True)
    assert [(r["prompt_width"], r.get("profiled", False)) for r in rows] == [(8, False), (5, True), (5, True)]
    assert [r["width_seen_before"] for r in rows] == [False, False, True]
    assert all(r["top_ops"] and r["top_ops"][0]["self_host_s"] >= r["top_ops"][-1]["self_host_s"] for r in rows[1:])


@pytest.mark.parametrize("probe", [SP, sdpa_probe], ids=["shape_probe", "sdpa_probe"])
def test_an_existing_out_file_is_refused(tmp_path, probe):
    out = tmp_path / "probe.json"
    out.write_text("{}")
    with pytest.raises(SystemExit) as exc:
        probe.main(["--out", str(out)])
    assert exc.value.code == 2 and out.read_text() == "{}"


@pytest.mark.parametrize("args", [["--model", "no-such-model"], ["--widths", "a,b"], ["--widths", "512,1"], ["--widths", "12", "--profile-new"]])
def test_bad_arguments_are_usage_errors_that_write_nothing(tmp_path, args):
    out = tmp_path / "probe.json"
    with pytest.raises(SystemExit) as exc:
        SP.main(["--out", str(out), *args])
    assert exc.value.code == 2 and not out.exists()


def test_no_cudnn_turns_sdpa_s_cudnn_backend_off_and_default_leaves_it_on():
    torch = pytest.importorskip("torch")
    try:
        SP.set_attention(torch, "no-cudnn")
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        SP.set_attention(torch, "default")
        assert torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)


@pytest.mark.parametrize("args", [["--liger", "maybe"], ["--attention", "flash"]])
def test_unknown_choices_are_usage_errors_that_write_nothing(tmp_path, args):
    out = tmp_path / "probe.json"
    with pytest.raises(SystemExit) as exc:
        SP.main(["--out", str(out), *args])
    assert exc.value.code == 2 and not out.exists()
