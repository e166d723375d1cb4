"""Rows files are created, never replaced: bench.rows_file.write_new and the commands that write one."""

from __future__ import annotations

import json

from bench import plan_quality as PQ
from bench.rows_file import write_new


def test_write_new_creates_refuses_to_replace_and_says_why(tmp_path):
    path = tmp_path / "rows.json"
    assert write_new(path, [{"name": "a"}]) is None
    assert json.loads(path.read_text()) == [{"name": "a"}]
    # an existing file is kept as it was, whatever is asked
    assert "exists" in write_new(path, [{"name": "b"}])
    assert "exists" in write_new(path, [{"name": "b"}], same_ok=True)
    assert json.loads(path.read_text()) == [{"name": "a"}]
    # the same rows again are fine when resuming
    assert write_new(path, [{"name": "a"}], same_ok=True) is None
    missing = write_new(tmp_path / "no" / "dir" / "rows.json", [])
    assert missing.startswith("cannot write") and "\n" not in missing


def test_plan_quality_rows_refuses_an_existing_file_with_one_line(tmp_path, capsys):
    mine = tmp_path / "mine.json"
    mine.write_text("my own notes\n")
    assert PQ.main(["rows", "--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert mine.read_text() == "my own notes\n"
    assert PQ.main(["rows", "--out", str(tmp_path / "no" / "dir" / "rows.json")]) == 2
