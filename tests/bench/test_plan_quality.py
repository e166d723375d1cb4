"""bench.plan_quality: the pick and its neighbours as bench rows, and the report from measured records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import matrix as M
from bench import plan_quality as PQ

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rows():
    pytest.importorskip("advisor.catalog")
    return PQ.build_rows()


def test_every_workload_has_the_pick_and_five_neighbours(rows):
    assert M.validate(rows) == []
    by = {}
    for r in rows:
        by.setdefault(r["pq_workload"], []).append(r)
    assert set(by) == {w.key for w in PQ.WORKLOADS} and len(PQ.WORKLOADS) >= 4
    for key, group in by.items():
        assert PQ.MIN_CONFIGS <= len(group) <= PQ.MAX_CONFIGS, key
        assert [r["pq_role"] for r in group].count("pick") == 1, key
        assert group[0]["pq_role"] == "pick"  # the pick runs first: a budget cut never loses it
        assert all(r["requires"] == group[0]["name"] for r in group[1:]) and "requires" not in group[0]
        assert len({r["name"] for r in group}) == len(group)
        assert all(r["name"].startswith(f"pq-{key}-") and r["stratum"] == PQ.STRATUM for r in group)
    names = [r["name"] for r in rows]
    assert len(set(names)) == len(names)
    # a whole workload at a time
    order = [r["pq_workload"] for r in rows]
    assert order == sorted(order, key=order.index)


def test_the_pick_is_the_planners_and_the_neighbours_differ_as_named(rows):
    from advisor.search.planner import decide

    for w in PQ.WORKLOADS:
        group = [r for r in rows if r["pq_workload"] == w.key]
        pick = group[0]
        decision, _ = decide(PQ.request_for(w))
        assert pick["pq_plan"] == decision.chosen.plan.short(), w.key
        for r in group[1:]:
            role = r["pq_role"]
            if role == "micro-batch smaller":
                assert r["micro_batch"] < pick["micro_batch"] and r["grad_ckpt"] == pick["grad_ckpt"]
            elif role == "micro-batch larger":
                assert r["micro_batch"] > pick["micro_batch"]
            elif role == "checkpointing flipped":
                assert r["grad_ckpt"] != pick["grad_ckpt"] and r["liger"] == pick["liger"]
            elif role == "liger flipped":
                assert r["liger"] != pick["liger"] and r["grad_ckpt"] == pick["grad_ckpt"]
            elif role == "another backend":
                assert (r["backend"], r["zero"]) != (pick["backend"], pick["zero"])
            # every neighbour is a plan the planner could have chosen: predicted to fit its limit
            assert r["pq_predicted_reserved_bytes"] > 0 and r["pq_predicted_tokens_per_second"] > 0
        # the same global batch as the pick (the workload's), so tokens/s compare like for like
        gb = {r["micro_batch"] * r["grad_accum"] for r in group}
        assert gb == {w.request["global_batch"]}, (w.key, gb)
        assert len({(r["micro_batch"], r["grad_ckpt"], r["liger"], r["backend"], r["zero"]) for r in group}) == \
            len(group)


def test_rows_run_on_the_bench_machine(rows):
    for r in rows:
        assert r["backend"] in ("single", "deepspeed") and r["offload"] == "none"
        if r["trainer"] == "grpo":
            assert r["beta"] == 0.0 and (r["micro_batch"] * r["grad_accum"]) % r["num_generations"] == 0


def _rec(row, status="ok", tps=None):
    return {"name": row["name"], "status": status, "row": row, "timing": {"tokens_per_second": tps},
            "memory": {"peak_allocated_bytes": 10 << 30}}


def test_summary_ratio_and_goal(rows):
    w = PQ.WORKLOADS[0]
    group = [r for r in rows if r["pq_workload"] == w.key]
    recs = {r["name"]: _rec(r, tps=1000.0 + i) for i, r in enumerate(group)}  # the last neighbour is fastest
    s = PQ.summarize(recs)[0]
    assert s["workload"] is w and s["pick"]["role"] == "pick"
    assert s["ratio"] == pytest.approx(1000.0 / (1000.0 + len(group) - 1))
    assert s["met"] is (s["ratio"] >= PQ.GOAL)
    # a pick that ran out of memory scores 0
    recs[group[0]["name"]] = _rec(group[0], status="oom")
    s = PQ.summarize(recs)[0]
    assert s["ratio"] == 0.0 and s["met"] is False
    # workloads without records are reported as not measured
    assert all(x["ratio"] is None for x in PQ.summarize(recs)[1:])


def test_report_from_a_results_file(rows, tmp_path):
    w = PQ.WORKLOADS[0]
    group = [r for r in rows if r["pq_workload"] == w.key]
    path = tmp_path / "pq.jsonl"
    path.write_text("".join(json.dumps(_rec(r, tps=2000.0 if r["pq_role"] == "pick" else 1000.0)) + "\n"
                            for r in group))
    recs = PQ.load_records([str(path)])
    text = PQ.render(recs, [str(path)])
    assert f"| {w.key} |" in text and "100.0 %" in text and "| met |" in text and "same plan" in text
    assert "not measured" in text  # the other workloads


def test_docs_plan_quality_md_is_current():
    text = PQ.render(PQ.load_records(PQ.RESULTS), PQ.RESULTS)
    assert (REPO / PQ.DOC).read_text() == text + "\n", "run python -m bench.plan_quality report --write"


def test_run_writes_the_rows_and_calls_bench_run(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(PQ.subprocess, "call", lambda cmd, cwd=None: calls.append(cmd) or 0)
    out = tmp_path / "pq.jsonl"
    assert PQ.main(["run", "--out", str(out), "--budget-seconds", "200", "--", "--redo", "timeout"]) == 0
    rows_file = tmp_path / "pq.rows.json"
    assert json.loads(rows_file.read_text()) and len(calls) == 1
    cmd = calls[0]
    assert cmd[1:3] == ["-m", "bench.run"] and cmd[cmd.index("--rows-file") + 1] == str(rows_file)
    assert cmd[cmd.index("--budget-seconds") + 1] == "200.0" and cmd[-2:] == ["--redo", "timeout"]
    assert cmd[cmd.index("--steps") + 1] == str(PQ.STEPS)


def test_committed_results_measure_every_workload():
    # bench/results/plan-quality-h200-2026-12-01-*.jsonl: every workload measured, pick and neighbours (issue 14)
    summary = PQ.summarize(PQ.load_records(PQ.RESULTS))
    assert len(summary) == len(PQ.WORKLOADS) >= 4
    for s in summary:
        assert len([x for x in s["rows"] if x["measured"]]) >= PQ.MIN_CONFIGS, s["workload"].key
        assert s["pick"] is not None and s["pick"]["status"] == "ok"  # no chosen plan ran out of memory
    met = {s["workload"].key: s["met"] for s in summary}
    # grpo-0.5b met it once its rows measured eight steps each (part3): two steps spread 9-25 %
    assert met == {"sft-1b-4k": True, "dpo-7b-lora": True, "qlora-3b": True, "grpo-0.5b": True}


def test_the_planner_still_picks_the_measured_picks():
    # the planner in this commit picks what was measured as the pick (the report's "pick now" column): a model
    # change that moves a pick needs the workload measured again
    summary = PQ.summarize(PQ.load_records(PQ.RESULTS))
    for s in summary:
        assert PQ.pick_now(s["workload"]) == s["pick"]["plan"], s["workload"].key


def test_step_spread_and_resolution():
    s = {"pick": {"spread": 0.25}, "best": {"spread": 0.09}, "ratio": 1 / 1.32}
    assert PQ.resolved(s).startswith("yes: 32 %")
    s["ratio"] = 1 / 1.2
    assert PQ.resolved(s).startswith("no: 20 %")
    s["best"] = s["pick"]
    assert PQ.resolved(s) == "- (the pick is the best)"
