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
    full = _format2("lora-8b-16k-full")
    full["verify"]["quick"] = {"quick": False, "grad_accum": 64, "plan_grad_accum": 64}
    path = root / "bench" / "results" / "verify-h200-2099-01-01.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (quick, full)))
    text = D.render(root)
    assert "| lora-8b-16k | 7 of 64 | 12.00 | 108.00 | 64 | 110.00 | -1.8 % | 100 | 100 |" in text
    assert "| lora-8b-16k-quick | SFT lora, 1 GPU | 1 | mb 1 x ga 64, seq 16384 | quick: ga 7 of 64 | passed | " \
           "100.0 | 110.0 (+10.0 %) |" in text
    assert "transformers 5.17.0 installed, the bundle pins 5.24.0" in text
    assert "verify-h200-2099-01-01.jsonl" in text


def test_the_speed_tolerance_covers_what_it_is_chosen_from():
    from advisor.verify.limits import SPEED_SPREAD_CAP_PCT, SPEED_TOLERANCE_PCT

    noise = D.step_noise(REPO)
    errors = D.model_step_errors()
    assert len(noise) >= 50 and len(errors) >= 70
    # the band is the model's 90th percentile step-time error, rounded up to 5 %, and the cap on the run's own
    # spread lies above the worst noise of a calibration run
    p90 = D._quantile(errors, 0.9)
    assert p90 <= SPEED_TOLERANCE_PCT < p90 + 5
    assert noise[-1] <= SPEED_SPREAD_CAP_PCT


@pytest.mark.parametrize("flag", ["--check"])
def test_check_flag_matches_the_file(flag):
    assert D.main([flag]) == 0
