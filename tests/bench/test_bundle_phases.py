"""bench/bundle_phases.py: the windows it folds a bundle's calls into, its profile plan, and one real run of a
generated bundle's train.py on the CPU through it (the Trainer's and accelerate's methods it wraps still exist under
those names in the installed versions, or the run records no phase)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import bundle_phases as B

REPO = Path(__file__).resolve().parents[2]


def test_fold_sums_each_kind_of_call_that_started_in_the_window():
    events = [("compute_loss", 0.5, 1.0), ("accelerator_backward", 1.0, 1.75), ("compute_loss", 1.8, 2.0),
              ("get_batch_samples", 2.5, 2.75)]
    assert B.fold(events, 0.0, 2.5) == {"compute_loss_s": 0.7, "compute_loss_calls": 2,
                                        "accelerator_backward_s": 0.75, "accelerator_backward_calls": 1}
    # a call that starts at the window's end belongs to the next window
    assert B.fold(events, 2.5, 3.0) == {"get_batch_samples_s": 0.25, "get_batch_samples_calls": 1}


def test_profile_plan_reads_kind_and_step_and_refuses_the_rest():
    assert B.profile_plan("cprofile:5,torch:6") == {5: "cprofile", 6: "torch"}
    assert B.profile_plan("") == {} and B.profile_plan(None) == {}
    for bad in ("perf:3", "torch:x", "torch"):
        with pytest.raises(SystemExit):
            B.profile_plan(bad)


def test_timed_wrapper_records_the_call_even_when_it_raises():
    events: list = []

    def boom():
        raise ValueError("x")

    with pytest.raises(ValueError):
        B.timed(boom, "boom", events)()
    assert [e[0] for e in events] == ["boom"] and events[0][2] >= events[0][1]


def test_one_time_counts_read_the_triton_cache_and_count_deltas_subtract(tmp_path, monkeypatch):
    """A step's compiles are the kernel folders Triton's cache gained during it; files beside them are not kernels."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    (tmp_path / "a").mkdir()
    (tmp_path / "note.txt").write_text("x")
    monkeypatch.delitem(sys.modules, "torch._dynamo.utils", raising=False)  # nothing loaded torch.compile
    assert B.one_time_counts(None, cuda=False) == {"triton_kernels": 1}
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    after = B.one_time_counts(None, cuda=False)
    assert B.count_deltas({"triton_kernels": 1}, after) == {"triton_kernels_added": 2}
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "missing"))
    assert B.one_time_counts(None, cuda=False) == {"triton_kernels": 0}


def test_one_time_counts_read_torch_compiles_graphs_once_dynamo_is_loaded(monkeypatch, tmp_path):
    """A graph torch.compile traces (a recompile for a new shape is one more) is counted where torch._dynamo is
    loaded; the count imports nothing."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    import torch._dynamo.utils as dynamo_utils

    before = B.one_time_counts(torch, cuda=False)
    monkeypatch.setitem(dynamo_utils.counters["stats"], "unique_graphs",
                        dynamo_utils.counters["stats"]["unique_graphs"] + 2)
    assert B.count_deltas(before, B.one_time_counts(torch, cuda=False)) == {"triton_kernels_added": 0,
                                                                            "compiled_graphs_added": 2}


def run_bundle(tmp_path: Path, generate: list[str], tiny: dict, steps: int, profile: str = "") -> dict:
    """Generate a bundle, run its train.py on the CPU through bundle_phases with a tiny random model, and return
    the JSON document it wrote."""
    bundle = tmp_path / "bundle"
    gen = subprocess.run([sys.executable, "-m", "advisor", "generate", *generate, "--out", str(bundle)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert gen.returncode == 0, gen.stderr[-2000:]
    out = tmp_path / "phases.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               CUDA_VISIBLE_DEVICES="", HF_HOME=str(tmp_path / "hf"), BUNDLE_PHASES_OUT=str(out),
               BUNDLE_PHASES_PROFILE=profile,
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "bundle_phases.py"), "train.py", "--cpu",
                           "--max-steps", str(steps), "--no-save", "--random-init", "--synthetic-data",
                           "--config-overrides", json.dumps(tiny)],
                          cwd=bundle, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.train
@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs the [train] extra (trl, torch)")
def test_a_generated_bundle_runs_through_it_on_the_cpu(tmp_path):
    tiny = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 512}
    doc = run_bundle(tmp_path, ["--model", "0.5B", "--gpu", "H200-141GB", "--gpus", "1", "--micro-batch", "2",
                                "--grad-accum", "2", "--seq-len", "64"], tiny, steps=3, profile="cprofile:2,torch:3")
    its = doc["iterations"]
    assert [i["step"] for i in its] == [1, 2, 3]
    assert [i["profiled"] for i in its] == [None, "cprofile", "torch"]
    for it in its:
        # every iteration fetched its batches once, ran the forward and the backward of each of its two
        # micro-batches, inside its own window
        assert it["get_batch_samples_calls"] == 1
        assert it["compute_loss_calls"] == it["accelerator_backward_calls"] == 2
        assert 0 < it["compute_loss_s"] + it["accelerator_backward_s"] <= it["iter_s"]
    # the logging of a step falls in the next window (it runs after on_step_end)
    assert "_maybe_log_save_evaluate_calls" not in its[0] and its[1]["_maybe_log_save_evaluate_calls"] == 1
    # the one-time costs' counters are read on the CPU too (Triton's cache; no allocator counters there)
    assert all(it["triton_kernels_added"] >= 0 and "cuda_mallocs_added" not in it for it in its)
    kinds = {p["kind"]: p for p in doc["profiles"]}
    assert kinds["cprofile"]["top"] and kinds["torch"]["ops"]
    assert doc["versions"]["trl"] and doc["host_probe"]["before"]["python_call_us"] > 0


@pytest.mark.train
@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs the [train] extra (trl, torch)")
def test_a_grpo_bundle_records_its_generation_phase_and_each_generate_call(tmp_path):
    """GRPO's step is mostly transformers' generate: the run records each call (its seconds, batch, prompt width and
    the tokens it added) and folds TRL's generation-phase methods into the step's window, so a bundle's decode step
    can be set beside the model's."""
    tiny = {"num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 512}
    doc = run_bundle(tmp_path, ["--model", "llama-3.2-1b", "--gpu", "H100-80GB", "--gpus", "1", "--trainer", "grpo",
                                "--vllm", "none", "--seq-len", "96", "--max-completion-len", "16",
                                "--num-generations", "4", "--micro-batch", "8", "--grad-accum", "1"], tiny, steps=2)
    calls = doc["generate_calls"]
    assert len(calls) == 2  # one generation round per optimizer step (steps_per_generation = grad_accum)
    for c in calls:
        assert c["batch"] == 8 and 1 <= c["new_tokens"] <= 16 and c["prompt_tokens"] <= 96 - 16 and c["seconds"] > 0
    for it in doc["iterations"]:
        assert it["generate_calls"] == it["_generate_and_score_completions_calls"] == 1
        # the generate call runs inside TRL's generation phase, which runs inside the step
        assert it["generate_s"] <= it["_generate_s"] <= it["_generate_and_score_completions_s"] <= it["iter_s"]
