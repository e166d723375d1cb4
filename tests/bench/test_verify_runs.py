"""bench.verify_runs on a machine without a GPU: each case's bundle is generated, edited, checked and dry-run for its
cost; a case that does not fit the budget is recorded as skipped without running; a record is one JSON line."""

from __future__ import annotations

import importlib.util
import json

import pytest

from bench import verify_runs as V


def _case(name: str) -> dict:
    return next(c for c in V.CASES if c["name"] == name)


def test_the_edit_is_the_one_config_line(tmp_path):
    train = tmp_path / "train.py"
    train.write_text("CONFIG = {\n    'micro_batch': 16,  # why\n    'grad_accum': 4,\n}\n")
    V.edit_config(train, {"micro_batch": 48})
    assert train.read_text() == "CONFIG = {\n    'micro_batch': 48,  # why\n    'grad_accum': 4,\n}\n"
    with pytest.raises(SystemExit):
        V.edit_config(train, {"no_such_key": 1})


def test_oom_case_checks_the_edited_bundle_before_anything_runs(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "init").mkdir()
    r = V.run_case(_case("oom-edit"), gpu="H200", work=tmp_path, logs=tmp_path / "logs",
                   shared_init=tmp_path / "init", left=1.0)
    assert r["status"] == "skipped" and "left" in r["reason"]  # a budget of 1 s starts nothing
    assert not (tmp_path / "oom-edit" / "verify.log").exists()
    # check --bundle predicted the OOM from the edited files, before any run
    assert r["check"]["exit"] == 1 and "MEM001" in r["check"]["errors"]
    assert r["check"]["estimate"]["fits"] is False
    (diff,) = r["check"]["differences"]["vs_plan_json"]
    assert (diff["field"], diff["value"], diff["other"]) == ("micro_batch", 48, 16)
    assert r["planned"]["plan"]["micro_batch"] == 16 and r["edits"] == {"micro_batch": 48}
    assert r["predicted_cost_seconds"] > V.START_SECONDS
    assert (tmp_path / "oom-edit" / "random-init").resolve() == (tmp_path / "init").resolve()
    json.dumps(r)  # one JSON line


def test_predicted_cost_counts_start_up_checkpoint_and_steps():
    dry = {"quick": {"steps": 6, "predicted_step_seconds": 2.0}, "params": 1_000_000_000}
    cached = V.predicted_cost(dry, cached=True)
    assert cached == pytest.approx(V.START_SECONDS + 2e9 / V.LOAD_BYTES_PER_SECOND + 12.0)
    assert V.predicted_cost(dry, cached=False) == pytest.approx(cached + 2e9 / V.WRITE_BYTES_PER_SECOND)


def test_cases_cover_the_demonstrations_and_the_kinds():
    names = [c["name"] for c in V.CASES]
    assert names[:3] == ["oom-edit", "lora-8b-16k-full", "lora-8b-16k-quick"]  # the full run writes the checkpoint
    kinds = {(" ".join(c["generate"])) for c in V.CASES[3:]}
    assert len(kinds) >= 8 and len(names) == len(set(names))


def test_summary_line_of_a_run_out_of_memory_gives_the_demand_not_a_peak():
    r = {"case": "oom-edit", "status": "ok", "wall_seconds": 62.4, "check": {"exit": 1},
         "verify": {"passed": False, "quick": {"quick": True, "grad_accum": 3, "plan_grad_accum": 4},
                    "measured": {"out_of_memory": True, "per_gpu_peak_bytes": None,
                                 "per_gpu_peak_recorded_bytes": 3089396224,
                                 "per_gpu_peak_at_least_bytes": int(140.5 * V.GIB), "tokens_per_second": None},
                    "predicted": {"per_gpu_peak_bytes": int(213.1 * V.GIB), "tokens_per_second": 50461.0}}}
    line = V.summary_line(r)
    assert "peak out of memory, needed >= 140.5 vs 213.1 GiB" in line and "tokens/s - vs 50,461" in line
    assert "2.9" not in line


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_host_probe_here_measures_in_a_child_and_gives_none_when_it_cannot(monkeypatch):
    probe = V.host_probe_here()
    assert probe["python_call_us"] > 0 and probe["nograd_op_us"] > 0 and probe["usable_cpus"] >= 1
    monkeypatch.setattr(V, "HOST_PROBE_CODE", "raise SystemExit(3)")
    assert V.host_probe_here() is None
