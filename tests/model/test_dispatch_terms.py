"""The dispatch probe's records and what bench/dispatch_terms.py reads off them (bench/results/dispatch-probe-*.json).
The speed model takes the forward's share of checkpointing's host cost from them (CKPT_FORWARD_SHARE), held here to
the derivation; the per-layer total stays fitted (CKPT_LAYER_SECONDS' note, docs/accuracy.md). The kernel counts and
LAUNCH_SECONDS stay the model's own: with all of the probe's values its fit moved
OVERLAP_P and DeepSpeed's hook constants in a way that broke the ZeRO twins' ordering (tests/model/test_accuracy.py);
until that is explained they are data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import dispatch_terms as D

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cases():
    return D.load()


def test_derivation_reads_the_committed_probes(cases):
    assert len(cases) >= 15 and {c["method"] for c in cases} >= {"full", "lora", "full-liger"}
    got = D.derived(cases)
    assert got["KERNELS_FWD_PER_LAYER"] == 40  # transformers' Llama/Qwen2 layer: the count the model uses
    assert 15e-6 < got["LAUNCH_SECONDS"] < 40e-6
    assert 1e-3 < got["CKPT_LAYER_SECONDS"] < 5e-3 and 0 < got["CKPT_FORWARD_SHARE"] < 1


def test_checkpoint_constants_are_the_probes(cases):
    """The model's measured checkpointing constant is the probe's median (to the three digits written), and the report
    names it as measured, not fitted."""
    from advisor.model import speed as S
    from bench import accuracy as A

    got = D.derived(cases)
    for name in A.DISPATCH_MEASURED:
        assert getattr(S, name) == pytest.approx(got[name], rel=5e-3), (name, getattr(S, name), got[name])
    assert not {name for _, name, *_ in A.FITTED} & set(A.DISPATCH_MEASURED), "a constant is either measured or fitted"


def test_checkpoint_cost_splits_between_forward_and_backward():
    """A checkpointed micro-batch's forward pays CKPT_FORWARD_SHARE of the per-layer cost and the whole step pays all
    of it: the forward's and the backward's dispatch against the same plan without checkpointing."""
    from dataclasses import replace

    from advisor.catalog import resolve_gpu, resolve_model
    from advisor.core.target import Target
    from advisor.model import dims as MD
    from advisor.model import speed as S
    from advisor.model.bench_rows import plan_from_bench_row
    from bench.matrix import row

    model = resolve_model("qwen2.5-0.5b")
    d = MD.dims(model)
    target = Target(gpu=resolve_gpu("H200"), gpus_per_node=1, nodes=1)
    plain = plan_from_bench_row(row("qwen2.5-0.5b", method="full", ckpt=False, seq=512, mb=1, liger=False))
    ckpt = replace(plain, grad_ckpt=True)
    a = S.micro_batch_times(d, model, plain, target, MD.Precision.of(plain))
    b = S.micro_batch_times(d, model, ckpt, target, MD.Precision.of(ckpt))
    per_layer = d.L * S.CKPT_LAYER_SECONDS
    assert b["dispatch_forward"] - a["dispatch_forward"] == pytest.approx(per_layer * S.CKPT_FORWARD_SHARE)
    recompute = b["dispatch"] - a["dispatch"] - per_layer
    assert recompute > 0  # the recomputed forward's launches come on top
    assert b["dispatch"] - b["dispatch_forward"] > a["dispatch"] - a["dispatch_forward"] + per_layer * 0.5


def test_kernel_line_recovers_known_counts():
    hf, hb = D._head_kernels_at_one_tile()

    def case(layers, per=(40, 88), fixed=(95, 75)):
        f = fixed[0] + hf + per[0] * layers
        b = fixed[1] + hb + per[1] * layers
        tiny = {"forward": {"kernels": f}, "step": {"kernels": f + b}, "forward_s": 1.0, "step_s": 2.0}
        return {"model": "qwen2.5-x", "method": "full", "layers": layers, "no_ckpt": {"tiny": tiny}}

    got = D.kernel_counts([case(24), case(28), case(36)])
    assert (got["KERNELS_FWD_PER_LAYER"], got["KERNELS_BWD_PER_LAYER"], got["MICRO_BATCH_KERNELS"]) == (40, 88, (95, 75))


def test_terms_cli_takes_no_arguments():
    done = subprocess.run([sys.executable, "-m", "bench.dispatch_terms", "--bogus"], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_checkpoint_bands_compare_the_probe_value_and_restore_the_model():
    """The report's comparison of the fitted and the probe's per-layer cost predicts the same checkpointed runs with
    each, and leaves the model's constant as it was."""
    from advisor.model import speed as S
    from bench import accuracy as A

    rows = A.build().rows
    before = S.CKPT_LAYER_SECONDS
    fitted = A.checkpoint_band_errors(rows, before)
    probe = A.checkpoint_band_errors(rows, D.derived()["CKPT_LAYER_SECONDS"])
    assert S.CKPT_LAYER_SECONDS == before
    assert [len(b) for b in fitted] == [len(b) for b in probe] and sum(map(len, fitted)) >= 100
    # a lower per-layer cost never makes a checkpointed step slower
    assert all(p <= f + 1e-12 for fb, pb in zip(fitted, probe, strict=True) for f, p in zip(fb, pb, strict=True))


def test_profiled_checkpoint_steps_put_the_gap_on_the_host():
    """Every profiled twin's GPU kernel time is the model's GPU time within 15 ms: what the step time misses is the
    host's (the report's 'Profiled steps' table)."""
    from bench import accuracy as A

    got = A.checkpoint_profiles()
    assert len(got) == 10 and {r["grad_ckpt"] for r in got} == {True, False}
    off = [(r["name"], round(r["kernel_s"], 3), round(r["pred_gpu"], 3)) for r in got
           if abs(r["kernel_s"] - r["pred_gpu"]) > 0.015]
    assert not off, off
