"""bench/decode_probe.py's pieces on the CPU: the host probe, one tiny generate case end to end, and its CLI."""

from __future__ import annotations

import pytest

from bench import decode_probe as DP

TINY = {"model_type": "llama", "layers": 2, "hidden": 32, "intermediate": 64, "heads": 2, "kv_heads": 1,
        "vocab": 128, "tied_embeddings": False}


def test_host_probe_times_each_kind_of_op():
    torch = pytest.importorskip("torch")
    host = DP.host_probe(torch)
    assert set(host) == {"nograd_op_us", "autograd_op_us", "python_call_us"}
    assert all(v > 0 for v in host.values())
    # an op that records autograd costs more than a pure-Python call
    assert host["autograd_op_us"] > host["python_call_us"]


@pytest.fixture
def short_cases(monkeypatch):
    """torch, with the probe's completion lengths cut to 2 and 6 tokens and one repeat (a case in seconds)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    monkeypatch.setattr(DP, "SHORT", 2)
    monkeypatch.setattr(DP, "LONG", 6)
    monkeypatch.setattr(DP, "REPEATS", 1)
    return torch


def test_one_case_records_the_decode_step_and_saves(short_cases):
    torch = short_cases
    rows, saves = [], []
    DP.probe_model(torch, "tiny", [8], [2], rows, lambda: saves.append(len(rows)), arch=TINY)
    assert len(rows) == 1 and saves == [1]
    r = rows[0]
    assert (r["batch"], r["prompt"], r["layers"]) == (2, 8, 2)
    assert r["seconds_long"] > 0 and r["seconds_short"] > 0
    # the decode step is the difference over the extra tokens; on the CPU the profiler sees no GPU kernels
    assert r["decode_step_ms"] == pytest.approx((r["seconds_long"] - r["seconds_short"]) / 4 * 1e3, abs=0.1)  # seconds kept to 0.1 ms
    assert set(r["host"]) == {"nograd_op_us", "autograd_op_us", "python_call_us"}
    assert r["padded"] is False


def test_a_padded_case_generates_with_a_mask_that_is_not_all_ones(short_cases, monkeypatch):
    torch = short_cases
    masks = []
    from transformers import GenerationMixin

    real = GenerationMixin.generate

    def spy(self, *args, **kwargs):
        masks.append(kwargs["attention_mask"].clone())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(GenerationMixin, "generate", spy)
    rows: list = []
    DP.probe_model(torch, "tiny", [8], [4], rows, lambda: None, arch=TINY, padded=True)
    assert rows[0]["padded"] is True
    # rows 0 and 2 start with one padding position, rows 1 and 3 are whole: generate sees a padded batch
    assert masks and all(m[:, 0].tolist() == [0, 1, 0, 1] and bool(m[:, 1:].all()) for m in masks)


def test_an_existing_out_file_is_refused(tmp_path):
    out = tmp_path / "probe.json"
    out.write_text("{}")
    with pytest.raises(SystemExit) as exc:
        DP.main(["--out", str(out)])
    assert exc.value.code == 2
    assert out.read_text() == "{}"  # never overwritten


@pytest.mark.parametrize("args", [["--models", "no-such-model"], ["--prompts", "a,b"], ["--batches", "0"]])
def test_bad_arguments_are_usage_errors_that_write_nothing(tmp_path, args):
    out = tmp_path / "probe.json"
    with pytest.raises(SystemExit) as exc:
        DP.main(["--out", str(out), *args])
    assert exc.value.code == 2 and not out.exists()


def test_a_lora_case_generates_through_unmerged_adapters_in_train_mode(short_cases):
    torch = short_cases
    pytest.importorskip("peft")
    rows: list = []
    DP.probe_model(torch, "tiny", [8], [2], rows, lambda: None, arch=TINY, lora=True)
    assert len(rows) == 1 and rows[0]["lora"] is True
    from bench.models import complete_arch, random_causal_lm
    from bench.worker import special_ids

    arch = complete_arch(TINY)
    model = DP.with_lora(random_causal_lm(torch, arch, special_ids(arch["vocab"]), "cpu"))
    adapted = [n for n, _ in model.named_modules() if n.endswith(".lora_A")]
    assert len(adapted) == arch["layers"] * len(DP.LORA_TARGETS)  # every target of every layer
    assert model.training  # as TRL generates: no eval() before generate


def test_an_fsdp2_case_generates_through_the_wrapped_model(short_cases):
    """The FSDP2 twin of a case: each decoder layer and the root wrapped (a one-process group), the count recorded."""
    torch = short_cases
    import torch.distributed as dist

    rows: list = []
    try:
        DP.probe_model(torch, "tiny", [8], [2], rows, lambda: None, arch=TINY, fsdp2=True)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert len(rows) == 1 and rows[0]["fsdp2_modules"] == TINY["layers"] + 1
    assert rows[0]["seconds_long"] > rows[0]["seconds_short"] > 0
