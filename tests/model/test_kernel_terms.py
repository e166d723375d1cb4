"""The speed model's GPU rates against the profiled micro-batches they were read off (bench/kernel_terms.py on
bench/results/kernel-probe-h200-2026-12-02.json), and the TRL behaviour the new terms rest on."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.model import speed as S
from bench import kernel_terms as K

REPO = Path(__file__).resolve().parents[2]
# how far a constant may sit from the value the probe gives it: the rounding of the written value
TOLERANCE = {"MFU_CEILING": 0.005, "HIDDEN_HALF": 0, "TOKENS_HALF": 0, "ATTENTION_EFFICIENCY": 0.005,
             "ATTENTION_SEQ_HALF": 0, "ATTENTION_HEAD_DIM_96": 0.005, "ATTENTION_HEAD_DIM_128": 0.005,
             "ATTENTION_HEAD_DIM_256": 0.005, "ELEMENTWISE_BW_EFFICIENCY": 0.01, "LORA_GEMM_BW_EFFICIENCY": 0.01}
GPU_TIME_BAND = (0.9, 1.1)
"""Measured / model GPU seconds of every profiled micro-batch, all kernels together."""


@pytest.fixture(scope="module")
def probe():
    return K.load()


@pytest.fixture(scope="module")
def cases(probe):
    return K.cases(probe)


def test_measured_constants_are_the_probes(probe):
    got = K.derived(probe, K.load(K.FAMILIES_PROBE))
    assert set(got) == set(TOLERANCE)
    for name, value in got.items():
        assert abs(getattr(S, name) - value) <= TOLERANCE[name], (name, getattr(S, name), value)


def test_the_report_lists_the_measured_constants():
    from bench import accuracy as A

    assert set(A.MEASURED) == set(TOLERANCE)
    fitted = {name for _, name, *_ in A.FITTED}
    assert not fitted & set(A.MEASURED), "a constant is either measured or fitted"


def test_every_profiled_micro_batch_within_the_band(cases):
    assert len(cases) >= 15, "the probe's cases were not all read"
    lo, hi = GPU_TIME_BAND
    off = [(c["case"], round(c["measured"]["total"] / c["model_s"]["total"], 3)) for c in cases
           if not lo <= c["measured"]["total"] / c["model_s"]["total"] <= hi]
    assert not off, off


def test_the_probe_covers_full_lora_and_liger(cases):
    assert any(c["lora"] for c in cases) and any(c["liger"] for c in cases)
    assert sum(1 for c in cases if c["gemm_efficiency"]) >= 8  # the GEMM curve has points across sizes
    assert len({c["hidden"] for c in cases if c["gemm_efficiency"]}) >= 5


ATTENTION_TIME_BAND = (0.8, 1.2)
"""Measured / model attention-kernel seconds of every profiled micro-batch with fused attention: one efficiency for
every head size left them at 0.72-1.28 (head_dim 128 faster, 256 slower than 64)."""


def test_every_profiled_attention_within_the_band(probe):
    rows = K.cases(probe) + K.cases(K.load(K.FAMILIES_PROBE))
    timed = [r for r in rows if r["measured"]["attention"] and r["model_s"]["attention"]]
    assert {r["head_dim"] for r in timed} >= {64, 96, 128, 256}
    lo, hi = ATTENTION_TIME_BAND
    off = [(r["case"], r["head_dim"], round(r["measured"]["attention"] / r["model_s"]["attention"], 3)) for r in timed
           if not lo <= r["measured"]["attention"] / r["model_s"]["attention"] <= hi]
    assert not off, off


def test_the_held_out_h100_probe_meets_the_attention_band():
    """The head-size factors, read off the H200 probes, against micro-batches they were not read from: one H100,
    models no probe had run (Gemma-3-4B, Qwen3-4B), each case modelled on the H100's own catalogue rates."""
    probe = K.load(K.HEAD_DIM_CHECK_PROBE)
    assert K.probe_gpu(probe).id == "H100-80GB"
    rows = K.cases(probe)
    assert {"gemma-3-4b", "qwen3-4b"} <= {r["model"] for r in rows} and {r["head_dim"] for r in rows} >= {64, 128, 256}
    lo, hi = ATTENTION_TIME_BAND
    ratios = {r["case"]: r["measured"]["attention"] / r["model_s"]["attention"] for r in rows}
    assert all(lo <= x <= hi for x in ratios.values()), ratios


def test_kernel_terms_reads_a_probe_without_replayed_graphs():
    """A probe run with --skip-graphs has no LoRA GEMMs, and one of another GPU no benchmark steps: the report
    prints what it can, without a traceback."""
    out = subprocess.run([sys.executable, "-m", "bench.kernel_terms", "--probe", K.HEAD_DIM_CHECK_PROBE], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "LORA_GEMM_BW_EFFICIENCY" not in out.stdout and "ATTENTION_HEAD_DIM_256" in out.stdout


def test_attention_head_dim_factor_interpolates_between_measured_sizes():
    f = S.attention_head_dim_factor
    assert f(64) == f(32) == 1.0
    assert f(96) == S.ATTENTION_HEAD_DIM_96 and f(128) == S.ATTENTION_HEAD_DIM_128
    assert f(256) == f(512) == S.ATTENTION_HEAD_DIM_256
    assert min(f(96), f(128)) < f(112) < max(f(96), f(128))
    assert S.attention_efficiency(2048, 128) / S.attention_efficiency(2048, 64) == pytest.approx(S.ATTENTION_HEAD_DIM_128)


def test_catalogue_head_sizes_lie_in_the_measured_range():
    import tomllib

    from advisor.catalog.lookup import resolve_model

    ids = tomllib.loads((REPO / "advisor/catalog/data/models.toml").read_text())
    sizes = {resolve_model(i).head_dim for i in ids}
    assert sizes and all(64 <= s <= 256 for s in sizes), sorted(sizes)


def test_attention_time_follows_the_models_head_size(monkeypatch):
    """The fused attention's seconds of a plan scale by its model's head-size factor alone: halving the factor at
    256 doubles Gemma-3's (head_dim 256) fused-kernel time and leaves Qwen3's (128) as it was."""
    from advisor.model import dims as MD

    def attention(name: str) -> float:
        model, plan, target = K._case_plan({"model": name, "method": "full", "seq_len": 2048, "micro_batch": 4})
        d = MD.dims(model)
        return S.micro_batch_times(d, model, plan, target, MD.Precision.of(plan))["attention"]

    base = {n: attention(n) for n in ("gemma-3-1b", "qwen3-1.7b")}
    monkeypatch.setattr(S, "ATTENTION_HEAD_DIM_256", S.ATTENTION_HEAD_DIM_256 / 2)
    assert attention("qwen3-1.7b") == base["qwen3-1.7b"]
    assert attention("gemma-3-1b") > 1.3 * base["gemma-3-1b"]  # the masked layers' bias reads do not scale


def test_gemm_curve_recovers_known_parameters():
    rows = [{"hidden": h, "tokens": t, "gemm_efficiency": 0.8 * h / (h + 128) * t / (t + 512)}
            for h in (896, 1536, 2048, 4096) for t in (4096, 16384)]
    got = K.gemm_curve(rows)
    assert (got["MFU_CEILING"], got["HIDDEN_HALF"], got["TOKENS_HALF"]) == (0.8, 128, 512)


def _trl_file(rel: str) -> str:
    spec = importlib.util.find_spec("trl")
    if spec is None or not spec.origin:
        pytest.skip("trl not installed")
    return (Path(spec.origin).parent / rel).read_text()


@pytest.mark.parametrize("trainer", S.FUSED_HEAD_TRAINERS)
def test_fused_head_trainers_use_trls_fused_head(trainer):
    assert "add_fused_lm_head(" in _trl_file(f"trainer/{trainer}_trainer.py")


def test_trls_fused_head_recomputes_its_tiles_in_the_backward():
    src = _trl_file("kernels/chunked_logprob.py")
    backward = src[src.index("def backward(ctx"):]
    assert re.search(r"torch\.mm\(hidden_chunk, w_chunk\.t\(\), out=tile\)", backward), \
        "the head recompute (one more head GEMM per micro-batch) is no longer in TRL's backward"


def test_sft_compute_loss_syncs_between_forward_and_backward():
    src = _trl_file("trainer/sft_trainer.py")
    loss = src[src.index("def compute_loss("):]
    loss = loss[:loss.index("\n    def ", 10)]
    assert "fused_lm_head=True" in loss and ".item()" in loss[loss.index("fused_lm_head=True"):]


def test_phase_overlap_is_never_faster_than_one_overlap():
    """Overlapping forward and backward apart can only add time against overlapping the whole micro-batch: the
    smooth maximum is subadditive."""
    for gpu_f, disp_f, gpu_b, disp_b in ((0.1, 0.05, 0.2, 0.05), (0.02, 0.08, 0.2, 0.04), (0.3, 0.3, 0.3, 0.3)):
        apart = S.overlap_seconds(gpu_f, disp_f) + S.overlap_seconds(gpu_b, disp_b)
        assert apart >= S.overlap_seconds(gpu_f + gpu_b, disp_f + disp_b) - 1e-12


def test_data_probe_refuses_an_existing_output(tmp_path):
    out = tmp_path / "d.json"
    out.write_text("keep")
    done = subprocess.run([sys.executable, "-m", "bench.data_probe", "--out", str(out)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and "exists" in done.stderr and "Traceback" not in done.stderr
    assert out.read_text() == "keep"


@pytest.mark.parametrize("args", [["--bogus"], ["--probe", "no/such.json"]])
def test_kernel_terms_usage_errors(args):
    done = subprocess.run([sys.executable, "-m", "bench.kernel_terms", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_data_path_constant_is_the_probes():
    import json
    import statistics

    from bench.accuracy import DATA_PROBE

    d = json.loads((REPO / DATA_PROBE).read_text())
    median_s = statistics.median(c["ms_per_1024_tokens"] for c in d["cases"]) / 1e3 / 1024
    assert abs(S.DATA_SECONDS_PER_TOKEN / median_s - 1) < 0.03, (S.DATA_SECONDS_PER_TOKEN, median_s)


def test_lora_step_constant_is_the_pairs(probe):
    got = K.lora_step_seconds_per_tensor(K.step_gaps(probe))
    assert abs(S.LORA_STEP_SECONDS_PER_TENSOR / got - 1) < 0.02, got
