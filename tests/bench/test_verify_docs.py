"""docs/verify.md is what bench/results gives (python -m bench.verify_docs), the generator reads both record formats,
and the speed tolerance stays at least what the measurements it is chosen from say."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench import verify_docs as D

REPO = Path(__file__).resolve().parents[2]


def test_docs_verify_md_is_current():
    assert (REPO / D.DOC).read_text(encoding="utf-8") == D.render(), "python -m bench.verify_docs --write"


def test_the_old_results_file_is_read(tmp_path):
    rows = [D.row(f, r) for f, r in D.records(REPO) if f == "verify-h200-2026-11-29.jsonl"]
    assert len(rows) == 9
    seven = next(r for r in rows if r["case"] == "7B")
    assert seven["ran"] and seven["peak"] == 101307668480 and seven["predicted_as"] == "plan.json when it ran"
    assert next(r for r in rows if r["case"] == "8b-dpo-fsdp2-mb8")["oom"]


def _format2(case: str, **over) -> dict:
    rec = {"format": 2, "case": case, "status": "ok", "gpus": 1, "wall_seconds": 100.0,
           "versions": {"transformers": "5.17.0", "torch": "2.11.0", "peft": "0.21.0"},
           "verify": {"passed": True, "plan": {"trainer": "sft", "method": "lora", "backend": "single",
                                               "micro_batch": 1, "grad_accum": 64, "seq_len": 16384},
                      "steps": [{"name": "run", "status": "pass", "detail": "6 steps"},
                                {"name": "packages", "status": "pass", "detail": "6 requirements met",
                                 "warnings": ["transformers 5.17.0 installed, the bundle pins 5.24.0"]}],
                      "measured": {"per_gpu_peak_bytes": 100 << 30, "tokens_per_second": 9000.0,
                                   "step_seconds": 110.0, "step_seconds_spread_pct": 1.2},
                      "predicted": {"per_gpu_peak_bytes": 110 << 30, "tokens_per_second": 9700.0}}}
    rec.update(over)
    return rec


def test_new_records_give_the_quick_against_full_comparison(tmp_path):
    root = tmp_path
    (root / "bench" / "results").mkdir(parents=True)
    for name in ("verify-h200-2026-11-29.jsonl",):
        shutil.copy(REPO / "bench" / "results" / name, root / "bench" / "results" / name)
    for name in (REPO / "bench" / "results").glob("h200*.jsonl"):
        shutil.copy(name, root / "bench" / "results" / name.name)
    quick = _format2("lora-8b-16k-quick")
    quick["verify"]["quick"] = {"quick": True, "grad_accum": 7, "plan_grad_accum": 64, "scale": 9.0,
                                "measured_step_seconds": 12.0, "scaled_step_seconds": 108.0,
                                "predicted_step_seconds": 11.9, "predicted_plan_step_seconds": 107.7,
                                "per_micro_batch_seconds": 1.68, "per_step_seconds": 0.01}
    quick["verify"]["measured"]["step_times"] = {"timed_step_seconds": [12.0] * 4}
    full = _format2("lora-8b-16k-full")
    full["verify"]["quick"] = {"quick": False, "grad_accum": 64, "plan_grad_accum": 64}
    full["verify"]["measured"]["step_times"] = {"timed_step_seconds": [110.0]}
    path = root / "bench" / "results" / "verify-h200-2099-01-01.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (quick, full)))
    text = D.render(root)
    assert "| lora-8b-16k | 7 of 64 | 4 | 12.00 | 108.00 | 64 | 1 | 110.00 | -1.8 % | 100 | 100 |" in text
    assert "Scaled step within 15 % of --full-steps: yes; quick run under 3 minutes of wall time" in text
    # errors are measured / predicted - 1, the sign verify's own report uses
    assert "| lora-8b-16k-quick | SFT lora, 1 GPU | 1 | mb 1 x ga 64, seq 16384 | quick: ga 7 of 64 | passed | " \
           "100.0 | 110.0 (-9.1 %) | 9,000 | 9,700 (-7.2 %) |" in text
    assert "transformers 5.17.0 installed, the bundle pins 5.24.0" in text
    assert "verify-h200-2099-01-01.jsonl" in text


def test_the_speed_tolerance_covers_what_it_is_chosen_from():
    from advisor.verify.limits import HOST_BOUND_SPREAD_CAP_PCT, SPEED_SPREAD_CAP_PCT, SPEED_TOLERANCE_PCT

    gpu, host = D.step_noise(REPO, host_bound=False), D.step_noise(REPO, host_bound=True)
    errors = D.model_step_errors()
    assert len(gpu) >= 50 and len(host) >= 10 and len(errors) >= 70
    assert len(gpu) + len(host) == len(D.step_noise(REPO))
    # the band is the model's 90th percentile step-time error, rounded up to 5 %, and each cap on the run's own
    # spread lies above the worst noise of the calibration runs of its kind, rounded up to 5 %
    p90 = D._quantile(errors, 0.9)
    assert p90 <= SPEED_TOLERANCE_PCT < p90 + 5
    assert gpu[-1] <= SPEED_SPREAD_CAP_PCT < gpu[-1] + 5
    assert host[-1] <= HOST_BOUND_SPREAD_CAP_PCT < host[-1] + 5
    # host-bound runs are the noisy ones: a single cap would either pass a busy GPU or fail a correct generation plan
    assert host[-1] > 2 * gpu[-1]


@pytest.mark.parametrize("flag", ["--check"])
def test_check_flag_matches_the_file(flag):
    assert D.main([flag]) == 0


def _committed(case: str, file_prefix: str = "verify-h200-2026-12-01") -> dict:
    rows = [D.row(f, r) for f, r in D.records(REPO) if f.startswith(file_prefix)]
    return next(r for r in rows if r["case"] == case and r["status"] == "ok")


def test_a_run_out_of_memory_is_shown_as_one_with_the_demand_not_a_peak():
    """The 2026-12-01 records: the edited bundle and GKD ran out of memory; what their metrics logged before (2.9 GiB
    for the edited bundle, the weights loaded) is not a measured peak."""
    edit = _committed("oom-edit")
    assert edit["oom"] and edit["peak"] is None and D.verdict(edit) == "failed: out of memory"
    assert round(edit["oom_floor"] / D.GIB, 1) == 140.5 and D._peak_cell(edit) == "out of memory, needed >= 140.5"
    gkd = _committed("gkd-0.5b-teacher-1.5b")
    assert gkd["oom"] and D._peak_cell(gkd) == "out of memory, needed >= 143.8"
    text = (REPO / D.DOC).read_text(encoding="utf-8")
    assert "| gkd-0.5b-teacher-1.5b | GKD full, 1 GPU |" in text
    assert "the estimate is too low: it predicted 118.7 GiB for the files" in text
    assert "the files exceed the plan: micro_batch 48" in text and "- next plan (" in text


def test_a_failed_step_is_named_with_the_figure_verify_judged():
    grpo = _committed("grpo-0.5b")
    assert D.verdict(grpo) == "failed: speed +33.3 % outside +-23.9 %"
    assert D.verdict(_committed("8b-dpo-fsdp2", "verify-h200-2026-11-29")) == \
        "failed: memory +21.1 % outside +-16.5 GiB"


def test_budget_skips_of_cases_that_ran_later_are_not_rows():
    records = D.records(REPO)
    rows, dropped = D.table_rows(records)
    ran = {rec["case"] for _, rec in records if rec.get("status") == "ok"}
    # a budget skip stays a row only for a case no committed file ran (then the table says it was not run)
    assert all(r["status"] == "ok" or (r["status"] == "skipped" and r["case"] not in ran) for r in rows)
    assert not any(r["case"] in ran for r in rows if r["status"] == "skipped")
    assert {r["case"] for r in dropped} >= {"gkd-0.5b-teacher-1.5b", "sft-gemma2-2b"}
    fake = [("a.jsonl", {"format": 2, "case": "x", "status": "skipped", "reason": "predicted 40 s, 9 s left"})]
    rows, dropped = D.table_rows(fake)
    assert [r["case"] for r in rows] == ["x"] and not dropped  # never ran: it stays, as skipped


def test_at_least_eight_kinds_have_memory_and_speed_measured():
    rows, _ = D.table_rows(D.records(REPO))
    by = D.kinds([r for r in rows if r["status"] == "ok"])
    measured = [k for k, rs in by.items() if any(r["peak"] and r["tps"] for r in rs)]
    assert len(measured) >= 8
    assert {"SFT full, ZeRO-3", "SFT qlora, 1 GPU", "KTO full, 1 GPU", "DPO full, 1 GPU", "SFT lora, 1 GPU"} <= \
        set(measured)


def test_an_unsloth_run_better_than_its_upper_bound_is_said_to_pass_now():
    """The Unsloth run of 2026-12-01 failed verify's two-sided bands (less memory, more speed than estimated) before
    verify judged Unsloth estimates as upper bounds; the table says so, and only for such a run."""
    uns = _committed("unsloth-7b-qlora")
    assert uns["passed"] is False and D._within_upper_bound(uns)
    assert D.verdict(uns).endswith("(an Unsloth estimate is an upper bound: verify now passes this run, "
                                   "advisor.verify.steps)")
    slower = dict(uns, tps=uns["tps_pred"] * 0.5)
    assert not D._within_upper_bound(slower)  # slower than an upper-bound estimate is still a failure
    assert not D._within_upper_bound(_committed("grpo-0.5b"))  # not an Unsloth plan


def test_the_host_bound_grpo_bundle_run_on_the_gpu_got_the_host_bound_cap():
    # GRPO without vLLM, verify quick mode on one H200 (2026-12-01 17:33): its timed steps spread 15.9 %, more than
    # any GPU-bound calibration run then (the cap was 15 %; 25 % since the noisier ZeRO twins of 2026-12-02), which
    # the old single cap reported as a busy machine
    from advisor.model.calibration import HOST_BOUND_NOTE_SHARE
    from advisor.verify.limits import HOST_BOUND_SPREAD_CAP_PCT

    cap_then = 15.0

    rec = next(r for f, r in D.records(REPO) if f == "verify-h200-2026-12-01-1733.jsonl" and r["case"] == "grpo-0.5b")
    v = rec["verify"]
    assert v["predicted"]["host_bound_share"] >= HOST_BOUND_NOTE_SHARE
    assert v["measured"]["step_seconds_spread_pct"] > cap_then
    assert v["tolerance"]["tokens_per_second_spread_cap_pct"] == HOST_BOUND_SPREAD_CAP_PCT
    speed = next(s for s in v["steps"] if s["name"] == "speed")
    assert speed["status"] == "pass" and speed["warnings"] == []


def test_step_noise_samples_as_many_steps_as_verify_times(tmp_path):
    """A long calibration record counts its first QUICK_TIMED_STEPS timed steps, as many as verify's quick run: a
    slow 12th step does not widen the cap that a 4-step run is judged by."""
    import json

    from advisor.verify.limits import QUICK_TIMED_STEPS

    results = tmp_path / D.RESULTS
    results.mkdir(parents=True)
    steps = [5.0] + [0.1] * QUICK_TIMED_STEPS + [0.1] * 6 + [0.3]
    rec = {"status": "ok", "name": "x", "row": {"grad_accum": 1}, "timing": {"step_seconds": steps}}
    (results / "h200-test.jsonl").write_text(json.dumps(rec) + "\n")
    assert D.step_noise(tmp_path) == [0.0]
    rec["timing"]["step_seconds"] = [5.0, 0.1, 0.1, 0.15, 0.1] + [0.1] * 8
    (results / "h200-test.jsonl").write_text(json.dumps(rec) + "\n")
    assert D.step_noise(tmp_path) == [pytest.approx(50.0)]
