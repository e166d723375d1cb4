"""The batch-shape figures the bundle generator quotes are the committed bundle runs' (bench/bundle_shapes.py), and
bench/sdpa_backend_run.py sets the attention backends each mode names."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from advisor.bundle import render
from bench import bundle_shapes as BS
from bench import sdpa_backend_run as SR

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "advisor" / "bundle" / "templates"


def _totals() -> dict[str, str]:
    return {case: f"{s['total_s']:.1f} s" for case, s in BS.summary().items()}


def test_the_padding_multiple_is_quoted_from_the_sft_runs():
    t = _totals()
    quoted = " ".join(inspect.getsource(render).split())
    for case in ("sft-on", "sft-off", "sftpad64-on"):
        assert t[case] in quoted, (case, t[case])
    # the padded run is the fastest of the three, or the multiple would not be the bundles' choice
    s = BS.summary()
    assert s["sftpad64-on"]["total_s"] < min(s["sft-on"]["total_s"], s["sft-off"]["total_s"])
    assert s["sftpad64-on"]["last10_median_s"] < s["sft-on"]["last10_median_s"]


def test_the_generating_trainers_multiple_is_quoted_from_the_as_generated_runs():
    s = BS.summary(BS.AS_GENERATED, first=55)  # sft-nopad stopped at 55 steps
    quoted = " ".join(inspect.getsource(render).split())
    for case in ("grpo-as-generated", "grpo-nopad"):
        assert f"{s[case]['total_s']:.1f} s" in quoted, case
        assert s[case]["steps"] == 12
    assert f"{s['grpo-as-generated']['peak_allocated_gib']:.2f} GiB" in quoted
    # padded prompts and completions beat the same bundle unpadded, which beats generate with cuDNN attention
    assert s["grpo-as-generated"]["total_s"] < s["grpo-nopad"]["total_s"] < s["grpo-cudnn"]["total_s"]
    # the SFT bundle as generated keeps its lead over the same bundle unpadded, over the steps both ran
    assert s["sft-as-generated"]["first_steps_s"] < 0.8 * s["sft-nopad"]["first_steps_s"]


def test_generation_without_cudnn_is_quoted_from_the_grpo_runs():
    t = _totals()
    for name in ("train.py.j2", "README.md.j2"):
        text = " ".join((TEMPLATES / name).read_text(encoding="utf-8").split())
        assert t["grpo-on"] in text and t["grpo-generate"] in text, name
    s = BS.summary()
    assert s["grpo-generate"]["total_s"] < s["grpo-on"]["total_s"]


def test_every_run_is_one_gpu_s_record_with_its_steps():
    for case, s in BS.summary().items():
        assert s["steps"] >= 12 and s["total_s"] > 0 and s["gpu"], case


def test_the_runner_sets_the_backend_each_mode_names():
    torch = pytest.importorskip("torch")
    try:
        SR.apply("off")
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        SR.apply("on")
        assert torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)


def test_the_driver_runs_the_generate_case_on_the_bundle_s_own_wrapper():
    """grpo-generate is the GRPO bundle as generated (train.py's generate_without_cudnn_attention), grpo-on the same
    bundle with that call removed: the script must not run a wrapper of its own."""
    script = (REPO / "bench" / "bundle_shapes.sh").read_text(encoding="utf-8")
    assert "run grpo-generate grpo on 12" in script and "run grpo-on grpo-cudnn on 12" in script
    # the as-generated GRPO bundle pads to 64; the cases it is compared with are edited back to no multiple
    assert "run grpo-pad64 grpo-pad64 on 12" in script and "'pad_to_multiple_of': None," in script
    assert "generate_without_cudnn_attention()$/    pass" in script and "CUDNN_MODE=generate" not in script


def test_an_unknown_mode_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setenv("CUDNN_MODE", "maybe")
    monkeypatch.setattr("sys.argv", ["sdpa_backend_run.py", "train.py"])
    assert SR.main() == 2 and "usage" in capsys.readouterr().err


def test_the_shape_probe_passes_back_the_choice_of_generate_without_cudnn():
    """The claim docs/accuracy.md makes from them: new widths cost cuDNN attention time, rounding the widths keeps
    most of it, and without cuDNN attention a new width costs about what a seen one does."""
    p = BS.width_passes()
    cudnn, without, rounded = (p[k] for k in BS.SHAPE_PASSES)
    assert cudnn["first_s"] > 1.3 * cudnn["again_s"]
    assert rounded["first_s"] > 1.3 * rounded["again_s"]
    assert without["first_s"] < 1.1 * without["again_s"]


def test_sdpa_costs_pair_every_probed_case_with_and_without_cudnn():
    from bench import sdpa_probe

    costs = BS.sdpa_costs()
    per_model = len(sdpa_probe.SEQS) * len(sdpa_probe.MASKS) + 1  # each forward + backward, and generate
    assert len(costs) == per_model * len(BS.SDPA_PROBES)
    assert len({(c["model"], c["case"], c["width"], c["mask"]) for c in costs}) == len(costs)
