"""The parent/child machinery of bench.runner with fake children (no GPU, no training stack)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import bench_fake_children as fake
import pytest

from bench import runner as R

HERE = str(Path(__file__).parent)


def rows(*specs):
    out = []
    for i, spec in enumerate(specs):
        behaviour, *rest = spec if isinstance(spec, tuple) else (spec,)
        r = {"name": f"r{i}-{behaviour}", "split": "fit", "behaviour": behaviour, "est_seconds": 1.0}
        if rest:
            r["arg"] = rest[0]
        out.append(r)
    return out


def opts(tmp_path, **kw):
    base = dict(out_path=str(tmp_path / "out.jsonl"), log_path=str(tmp_path / "out.log"),
                workdir=str(tmp_path / "work"), poll_seconds=0.02, ctx={"device": "fake"})
    base.update(kw)
    return R.RunOptions(**base)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); /proc tells the two apart
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_ok_child_record_is_appended_with_parent_fields(tmp_path):
    o = opts(tmp_path, env={"versions": {"x": "1"}})
    s = R.run_rows(rows(("ok", 7)), fake.child, o)
    recs = R.read_records(o.out_path)
    assert [r["status"] for r in recs] == ["ok"]
    r = recs[0]
    assert r["payload"] == 7 and r["ctx_device"] == "fake"
    assert r["name"] == "r0-ok" and r["split"] == "fit" and r["runner"] == "fork"
    assert r["exit_code"] == 0 and r["wall_seconds"] > 0
    assert r["env"] == {"versions": {"x": "1"}}
    assert r["row"]["behaviour"] == "ok"
    assert "log_tail" not in r  # only failed rows keep their log
    assert s.results[0]["name"] == "r0-ok"
    assert not alive(r["pid"])


def test_oom_status_from_child_is_kept(tmp_path):
    o = opts(tmp_path)
    R.run_rows(rows("oom"), fake.child, o)
    r = R.read_records(o.out_path)[0]
    assert r["status"] == "oom" and r["memory"]["peak_allocated_bytes"] == 999


def test_timeout_kills_child_and_its_process_group(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    o = opts(tmp_path, timeout_seconds=2.0)
    t0 = time.monotonic()
    R.run_rows(rows(("grandchild_then_hang", str(pidfile))), fake.child, o)
    assert time.monotonic() - t0 < 30
    r = R.read_records(o.out_path)[0]
    assert r["status"] == "timeout"
    assert "killed after 2 s" in r["error"]
    assert not alive(r["pid"])
    grandchild = int(pidfile.read_text())
    for _ in range(50):  # the grandchild is re-parented and reaped by init after the kill
        if not alive(grandchild):
            break
        time.sleep(0.1)
    assert not alive(grandchild)


def test_timeout_keeps_partial_progress(tmp_path):
    o = opts(tmp_path, timeout_seconds=2.0)
    R.run_rows(rows("partial_then_hang"), fake.child, o)
    r = R.read_records(o.out_path)[0]
    assert r["status"] == "timeout" and r["partial"] is True
    assert r["steps_done"] == 2 and r["memory"]["peak_allocated_bytes"] == 456
    assert "phase train" in r["error"]


def test_child_crash_and_exception_are_errors_with_log(tmp_path):
    o = opts(tmp_path)
    R.run_rows(rows("exit3", "raise", "ok"), fake.child, o)
    recs = {r["name"]: r for r in R.read_records(o.out_path)}
    assert recs["r0-exit3"]["status"] == "error" and "exit code 3" in recs["r0-exit3"]["error"]
    assert recs["r1-raise"]["status"] == "error" and recs["r1-raise"]["exit_code"] == 70
    assert any("boom from the fake child" in line for line in recs["r1-raise"]["log_tail"])
    assert recs["r2-ok"]["status"] == "ok"  # a failed row does not stop the run
    log = Path(o.log_path).read_text()
    assert "===== r1-raise status=error" in log and "boom from the fake child" in log


def test_each_record_is_on_disk_before_the_next_row_starts(tmp_path):
    o = opts(tmp_path)
    R.run_rows(rows("ok", "ok", ("count_lines", o.out_path)), fake.child, o)
    assert R.read_records(o.out_path)[2]["lines_seen"] == 2


def test_budget_skips_rows_that_would_not_finish_and_records_them(tmp_path):
    rs = rows("ok", "ok", "ok", "ok")
    rs[2]["est_seconds"] = 500.0  # cannot fit in the budget; the cheaper row after it still runs
    o = opts(tmp_path, budget_seconds=60.0)
    s = R.run_rows(rs, fake.child, o)
    assert s.skipped == ["r2-ok"] and s.stopped_early
    recs = R.read_records(o.out_path)
    assert [(r["name"], r["status"]) for r in recs] == [
        ("r0-ok", "ok"), ("r1-ok", "ok"), ("r2-ok", "skipped"), ("r3-ok", "ok")]
    assert "time budget" in recs[2]["reason"]


def test_budget_caps_the_timeout_of_a_running_row(tmp_path):
    o = opts(tmp_path, budget_seconds=3.0, timeout_seconds=100.0)
    t0 = time.monotonic()
    R.run_rows(rows(("sleep", 60)), fake.child, o)
    assert time.monotonic() - t0 < 30
    r = R.read_records(o.out_path)[0]
    assert r["status"] == "timeout" and r["timeout_capped_by_budget"] is True
    assert r["timeout_seconds"] <= 3.0


def test_resume_skips_recorded_rows_and_retries_skipped_ones(tmp_path):
    o = opts(tmp_path)
    rs = rows("ok", "ok", "ok")
    R.append_record(o.out_path, {"name": "r0-ok", "status": "ok"})
    R.append_record(o.out_path, {"name": "r1-ok", "status": "skipped"})
    with open(o.out_path, "a") as f:
        f.write('{"name": "torn')  # a writer killed mid-line
    s = R.run_rows(rs, fake.child, o)
    assert s.resumed == ["r0-ok"]
    assert [r["name"] for r in s.results] == ["r1-ok", "r2-ok"]
    names = [r["name"] for r in R.read_records(o.out_path)]
    assert names.count("r0-ok") == 1 and names.count("r1-ok") == 2


def test_resume_from_other_file_and_redo_status(tmp_path):
    other = tmp_path / "earlier.jsonl"
    R.append_record(str(other), {"name": "r0-ok", "status": "ok"})
    R.append_record(str(other), {"name": "r1-ok", "status": "error"})
    o = opts(tmp_path, resume_from=(str(other),), redo_statuses=("error",))
    s = R.run_rows(rows("ok", "ok"), fake.child, o)
    assert s.resumed == ["r0-ok"] and [r["name"] for r in s.results] == ["r1-ok"]


def test_done_names_uses_each_names_latest_status(tmp_path):
    p = str(tmp_path / "x.jsonl")
    for name, status in [("a", "ok"), ("a", "skipped"), ("b", "skipped"), ("b", "timeout"), ("c", "error")]:
        R.append_record(p, {"name": name, "status": status})
    assert R.done_names([p]) == {"b", "c"}
    assert R.done_names([p], redo=["timeout"]) == {"c"}
    assert R.done_names([str(tmp_path / "missing.jsonl")]) == set()


def test_spawn_mode_runs_child_in_fresh_interpreter(tmp_path):
    o = opts(tmp_path, mode="spawn", spawn_sys_path=[HERE])
    R.run_rows(rows(("ok", 3), "raise"), "bench_fake_children:child", o)
    recs = R.read_records(o.out_path)
    assert recs[0]["status"] == "ok" and recs[0]["payload"] == 3 and recs[0]["runner"] == "spawn"
    assert recs[1]["status"] == "error" and any("boom" in line for line in recs[1]["log_tail"])


def test_spawn_mode_timeout(tmp_path):
    o = opts(tmp_path, mode="spawn", spawn_sys_path=[HERE], timeout_seconds=3.0)
    R.run_rows(rows(("sleep", 60)), "bench_fake_children:child", o)
    r = R.read_records(o.out_path)[0]
    assert r["status"] == "timeout" and not alive(r["pid"])


def test_mode_and_child_type_must_match(tmp_path):
    with pytest.raises(TypeError):
        R.run_rows(rows("ok"), "bench_fake_children:child", opts(tmp_path, mode="fork"))
    with pytest.raises(TypeError):
        R.run_rows(rows("ok"), fake.child, opts(tmp_path, mode="spawn"))


def test_hooks_are_called_in_order(tmp_path):
    calls = []
    o = opts(tmp_path, before_row=lambda r: calls.append(("before", r["name"])) or {"waited": 1},
             after_row=lambda r, rec: calls.append(("after", r["name"], rec["status"])),
             on_result=lambda rec: calls.append(("result", rec["name"])))
    R.run_rows(rows("ok", "oom"), fake.child, o)
    assert calls == [("before", "r0-ok"), ("result", "r0-ok"), ("after", "r0-ok", "ok"),
                     ("before", "r1-oom"), ("result", "r1-oom"), ("after", "r1-oom", "oom")]
    assert all(r["env"]["waited"] == 1 for r in R.read_records(o.out_path))


def test_background_job_and_kill(tmp_path):
    flag = tmp_path / "flag"
    bg = R.Background(lambda: flag.write_text("done"), str(tmp_path / "bg.log"))
    assert bg.wait(30) and bg.returncode == 0 and flag.read_text() == "done"
    slow = R.Background(lambda: time.sleep(600), str(tmp_path / "bg2.log"))
    assert not slow.wait(0.3)
    slow.kill()
    assert slow.done() and not alive(slow.child.pid)


def test_kill_live_ends_running_background(tmp_path):
    slow = R.Background(["sleep", "600"], str(tmp_path / "bg.log"))
    assert slow.child in R.LIVE
    R.kill_live()
    assert slow.done() and slow.child not in R.LIVE


def test_records_are_valid_json_lines(tmp_path):
    o = opts(tmp_path)
    R.run_rows(rows("ok", "oom"), fake.child, o)
    for line in Path(o.out_path).read_text().splitlines():
        json.loads(line)


def test_budget_is_checked_again_after_before_row_waits(tmp_path):
    o = opts(tmp_path, budget_seconds=2.0, before_row=lambda r: time.sleep(1.5))
    s = R.run_rows(rows("ok"), fake.child, o)
    assert s.skipped == ["r0-ok"] and R.read_records(o.out_path)[0]["status"] == "skipped"


def test_rows_not_ready_are_postponed_while_others_run(tmp_path):
    calls = {"n": 0}

    def ready(r):
        if r["name"] != "r0-ok":
            return True
        calls["n"] += 1
        return calls["n"] > 2  # not ready for the first two choices

    o = opts(tmp_path, ready=ready)
    s = R.run_rows(rows("ok", "ok", "ok"), fake.child, o)
    assert [r["name"] for r in s.results] == ["r1-ok", "r2-ok", "r0-ok"]


def test_a_row_nothing_can_overtake_runs_even_if_not_ready(tmp_path):
    o = opts(tmp_path, ready=lambda r: False)
    s = R.run_rows(rows("ok", "ok"), fake.child, o)
    assert [r["name"] for r in s.results] == ["r0-ok", "r1-ok"]


def test_a_row_waits_for_the_row_it_requires_and_is_skipped_without_it(tmp_path):
    # r0 (the "pick") is not ready at first, so r1, which requires it, must wait rather than run before it;
    # r3 requires r2, which the budget skips, so r3 is skipped too (a later run measures both)
    rs = rows("ok", "ok", ("ok", 1), ("ok", 2))
    rs[1]["requires"] = rs[0]["name"]
    rs[2]["est_seconds"] = 1000.0
    rs[3]["requires"] = rs[2]["name"]
    calls = {"n": 0}

    def ready(r):
        calls["n"] += 1
        return r["name"] != rs[0]["name"] or calls["n"] > 3

    o = opts(tmp_path, ready=ready, budget_seconds=100.0)
    s = R.run_rows(rs, fake.child, o)
    ran = [r["name"] for r in s.results]
    assert ran.index(rs[0]["name"]) < ran.index(rs[1]["name"])
    assert rs[2]["name"] in s.skipped and rs[3]["name"] in s.skipped
    recs = {r["name"]: r for r in R.read_records(o.out_path)}
    assert recs[rs[3]["name"]]["status"] == "skipped" and "requires" in recs[rs[3]["name"]]["reason"]
    # already recorded in an earlier run: the requirement is met
    o2 = opts(tmp_path, out_path=str(tmp_path / "again.jsonl"), resume_from=(o.out_path,))
    rs[2]["est_seconds"] = 1.0
    s2 = R.run_rows([rs[1], rs[2], rs[3]], fake.child, o2)
    assert [r["name"] for r in s2.results] == [rs[2]["name"], rs[3]["name"]] and rs[1]["name"] in s2.resumed
