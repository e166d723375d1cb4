"""bench/later_bundles.py: the GPU windows, Liger's decode host cost and the GRPO bundle's generate steps, read off
small files written here (each rule on its own) and off the committed 2026-12-06 H100 files."""

import json

import pytest

from bench import later_bundles as LB

HEADER = ("run,timestamp,power.draw [W],power.limit [W],clocks.current.sm [MHz],clocks.current.memory [MHz],"
          "temperature.gpu,utilization.gpu [%],clocks_event_reasons.active\n")


def _sample(run, t, watts, mhz, util, reasons):
    return f"{run},2026/12/06 {t}.250,{watts} W,700.00 W,{mhz} MHz,2619 MHz,40,{util} %,{reasons}\n"


def test_gpu_windows_count_busy_and_capped_samples_of_their_run_only(tmp_path):
    (tmp_path / "s.csv").write_text(HEADER + "".join([
        _sample("a", "01:00:00", 690, 1500, 97, "0x0000000000000004"),  # busy, capped
        _sample("a", "01:00:01", 650, 1900, 95, "0x0000000000000000"),  # busy, not capped
        _sample("a", "01:00:02", 80, 345, 10, "0x0000000000000004"),  # idle: not the case's training
        _sample("a", "01:00:09", 690, 1400, 99, "0x0000000000000004"),  # after the window
        _sample("b", "01:00:01", 690, 1200, 99, "0x0000000000000004"),  # another run at the same time
    ]))
    (tmp_path / "w.json").write_text(json.dumps({
        "gpu": {"max_sm_mhz": 1980},
        "windows": [{"run": "a", "case": "c", "start": "2026/12/06 01:00:00", "end": "2026/12/06 01:00:05"}]}))
    [w] = LB.gpu_windows("s.csv", "w.json", root=tmp_path)
    assert (w["busy"], w["capped"], w["sm_mhz_min"], w["sm_mhz_median"]) == (2, 1, 1500, 1700)
    assert w["watts_median"] == 670 and w["sm_mhz_max"] == 1980


def test_liger_decode_extra_is_the_layers_liger_less_eager_scaled_to_the_median_host(tmp_path):
    rows = [{"op": op, "impl": impl, "host_forward_nograd_s": us * 1e-6}
            for op, impl, us in (("rmsnorm", "eager", 60), ("rmsnorm", "liger", 61), ("rope", "eager", 80),
                                 ("rope", "liger", 80), ("swiglu", "eager", 10), ("swiglu", "liger", 40))]
    (tmp_path / "p.json").write_text(json.dumps({"rows": rows, "host_probe": {"nograd_op_us": 5.0}}))
    x = LB.liger_decode_extra("p.json", root=tmp_path)
    # two norms, RoPE, the gated product: (2*61 + 80 + 40) - (2*60 + 80 + 10) = 32 us at the probe's host; at the
    # median host as the model scales host time (its op 8.87 us, host_factor's exponent 0.75)
    from advisor.model import speed as S

    assert x["extra_s"] == pytest.approx(32e-6)
    assert x["extra_reference_s"] == pytest.approx(
        32e-6 / (5e-6 / S.REFERENCE_HOST_OP_SECONDS) ** S.HOST_FACTOR_EXPONENT)
    assert x["layer"]["eager"] == pytest.approx(210e-6)


def _phases(tmp_path, shapes):
    its = [{"step": i + 1, "step_s": 5.0 + i, "_get_per_token_logps_and_entropies_s": 0.2,
            "accelerator_backward_s": 0.1} for i in range(len(shapes))]
    gens = [{"seconds": 4.0, "batch": 8, "prompt_tokens": w, "new_tokens": 100, "padded_prompts": p} for w, p in shapes]
    (tmp_path / "ph.jsonl").write_text(json.dumps({"iterations": its, "generate_calls": gens}) + "\n")


def test_generate_steps_mark_the_first_step_and_each_shape_the_run_had_not_seen(tmp_path):
    _phases(tmp_path, [(512, True), (512, True), (511, False), (512, True), (511, False)])
    g = LB.generate_steps("ph.jsonl", root=tmp_path)
    assert [s["step"] for s in g["new_shape"]] == [3]
    assert [s["step"] for s in g["steady"]] == [2, 4, 5]
    assert g["steps"][0]["first"] and g["steps"][0]["ms_per_token"] == pytest.approx(40.0)


def test_generate_steps_refuse_a_record_whose_calls_do_not_match_its_steps(tmp_path):
    _phases(tmp_path, [(512, True)])
    rec = json.loads((tmp_path / "ph.jsonl").read_text())
    rec["generate_calls"] *= 2
    (tmp_path / "ph.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match="2 generate calls for 1 steps"):
        LB.generate_steps("ph.jsonl", root=tmp_path)


def test_the_committed_h100_files_read_as_the_report_says():
    wins = LB.gpu_windows()
    sft = [w for w in wins if w["case"].startswith("new-sft")]
    grpo = [w for w in wins if w["case"] == "new-grpo-l1b"]
    # the GPU-bound SFT bundles ran at the board's power limit, clocked down; the host-bound GRPO one mostly not
    assert sft and all(w["capped"] >= 0.9 * w["busy"] > 0 and w["sm_mhz_median"] < w["sm_mhz_max"] for w in sft)
    assert grpo and all(w["capped"] < 0.5 * w["busy"] for w in grpo)
    x = LB.liger_decode_extra()
    assert x["device"] == "NVIDIA H100 80GB HBM3" and x["versions"]["liger-kernel"] == "0.8.5"
    assert 0 < x["extra_s"] < x["layer"]["eager"]
    g = LB.generate_steps()
    assert len(g["steady"]) >= 3 and len(g["new_shape"]) == 1
    assert all(s["generate_s"] < g["new_shape"][0]["generate_s"] / 2 for s in g["steady"])
    recs = LB.verify_records()
    assert {r["case"] for r in recs} >= {"new-grpo-l1b", "new-rloo-q3-0.6b", "new-sft-l1b-4k"}
    assert all(r["verify"]["gpu"]["power_limit_watts"] == 700 for r in recs)


def test_the_models_liger_launch_equivalents_are_the_probes():
    """advisor.model.speed's Liger constants are read off the committed probe, rounded to whole launches."""
    from advisor.model import speed as S

    got = LB.liger_launch_equivalents()
    assert round(got["fwd"]) == S.LIGER_KERNELS_FWD_PER_LAYER
    assert round(got["bwd"]) == S.LIGER_KERNELS_BWD_PER_LAYER
    assert round(got["decode"]) == S.LIGER_DECODE_KERNELS_PER_LAYER
    # Liger's forward costs the host more than the eager ops it replaces, its backward less
    assert got["fwd"] > S.KERNELS_FWD_PER_LAYER and got["bwd"] < S.KERNELS_BWD_PER_LAYER


def test_a_liger_decode_layer_adds_its_launches_to_generation():
    """The decode term applies to plans with Liger only, and grows the generation time by the layers' launches."""
    import dataclasses

    from advisor.catalog import resolve_gpu, resolve_model
    from advisor.core.plan import Plan
    from advisor.core.target import Target
    from advisor.model import speed as S
    from advisor.model.estimate import estimate_plan

    rec = next(r for r in LB.verify_records() if r["case"] == "new-grpo-l1b")
    plan = Plan(**{k: rec["verify"]["plan"][k] for k in Plan.__dataclass_fields__ if k in rec["verify"]["plan"]})
    assert plan.liger
    model, target = resolve_model(rec["model"]), Target(gpu=resolve_gpu(rec["gpu"]), gpus_per_node=1, nodes=1)
    with_liger = estimate_plan(model, plan, target)[1].breakdown["generation"]
    without = estimate_plan(model, dataclasses.replace(plan, liger=False), target)[1].breakdown["generation"]
    # 16 layers x 256 decode steps x the Liger launches, on a host-bound decode step (the GPU's part is far smaller)
    extra = 16 * 256 * S.LIGER_DECODE_KERNELS_PER_LAYER * S.DECODE_LAUNCH_SECONDS
    assert with_liger - without == pytest.approx(extra, rel=0.02)


def _shape_row(call, width, seen, gen, fb, liger=False, kernels=0, profiled=False, top=None):
    row = {"liger": liger, "call": call, "prompt_width": width, "width_seen_before": seen, "generate_s": gen,
           "forward_backward_s": fb, "generate": {"triton_kernels_added": kernels, "cuda_mallocs_added": 0},
           "forward_backward": {"triton_kernels_added": 0, "cuda_mallocs_added": 1}}
    if profiled:
        row.update(profiled=True, top_ops=top)
    return row


def test_new_width_costs_are_each_new_width_over_the_seen_widths_median(tmp_path):
    rows = [_shape_row(1, 512, False, 9.0, 1.0),  # the process's own warm-up: neither seen nor scored
            _shape_row(2, 512, True, 1.5, 0.1), _shape_row(3, 511, False, 3.5, 0.9),
            _shape_row(4, 511, True, 1.7, 0.1), _shape_row(5, 500, False, 2.0, 0.3),
            _shape_row(6, 489, False, 3.0, 0.3, profiled=True,
                       top=[{"name": "attn", "self_host_s": 1.0}, {"name": "mm", "self_host_s": 0.2}]),
            _shape_row(7, 489, True, 2.0, 0.1, profiled=True,
                       top=[{"name": "mm", "self_host_s": 0.2}, {"name": "attn", "self_host_s": 0.05}])]
    (tmp_path / "p.json").write_text(json.dumps({"gpu": "G", "batch": 64, "new_tokens": 64, "train_batch": 8,
                                                 "rows": rows}))
    [c] = LB.new_width_costs(("p.json",), root=tmp_path)  # no Liger rows: one entry
    # seen, unprofiled: calls 2 and 4 (medians 1.6 s and 0.1 s); new after the first: calls 3 and 5
    assert c["seen_generate_s"] == pytest.approx(1.6) and c["seen_forward_backward_s"] == pytest.approx(0.1)
    assert [(n["width"], round(n["generate_extra_s"], 3), round(n["forward_backward_extra_s"], 3), n["cuda_mallocs"])
            for n in c["new"]] == [(511, 1.9, 0.8, 1), (500, 0.4, 0.2, 1)]
    assert c["seen_widths_again"] == [511] and c["seen_generate_range_s"] == (1.5, 1.7)
    # the profiled pair: the op whose host time grew most from the new width's call to the same width again
    assert c["grew"][0] == {"op": "attn", "new_s": 1.0, "seen_s": 0.05}


def test_the_committed_shape_probes_put_a_new_widths_cost_in_cudnn_attention_not_triton():
    costs = LB.new_width_costs()
    eager = [c for c in costs if not c["liger"]]
    assert {c["gpu"] for c in eager} == {"NVIDIA H200", "NVIDIA H100 80GB HBM3"}
    for c in eager:
        # the first new width (511) costs over a second more to generate, and the eager model compiles nothing
        assert c["new"][0]["width"] == 511 and c["new"][0]["generate_extra_s"] > 1.0
        assert all(n["triton_kernels"] == 0 for n in c["new"])
    [h100] = [c for c in eager if c["grew"]]
    top = h100["grew"][0]
    assert top["op"] == "aten::_cudnn_attention_forward" and top["new_s"] > 10 * top["seen_s"]
