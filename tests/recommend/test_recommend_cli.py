"""`trl-advisor recommend` on the command line: the table, --json, --all, exit codes and one-line usage errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from advisor import cli

SMALL = ["recommend", "--model", "0.5B", "--tokens", "100000000", "--gpu-types", "H100,A100-80GB,RTX-5090",
         "--max-gpus", "8"]


def _rows(out: str) -> list[str]:
    """The table's rows: the lines between its header and the Pareto footnote."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "tokens/s" in line) + 1
    end = next(i for i, line in enumerate(lines) if line.startswith("* on the time-cost Pareto front"))
    return lines[start:end]


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_table_marks_the_front_and_names_the_picks(capsys):
    code, out, _ = _run(capsys, *SMALL)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("qwen2.5-0.5b SFT full (most faithful that fits), 100,000,000 tokens")
    rows = _rows(out)
    assert rows and any(line.startswith("*") for line in rows)
    assert any(line.startswith("fastest ") for line in lines) and any(line.startswith("cheapest ") for line in lines)
    assert "no price known: RTX-5090" in out  # shown without a cost, not guessed
    assert any("RTX-5090" in row and " - " in row for row in rows)
    assert next(line for line in lines if line.startswith("next ")).split(None, 1)[1].startswith(
        "trl-advisor generate --model 0.5B")


def test_all_lists_every_feasible_option(capsys):
    _, out_json, _ = _run(capsys, *SMALL, "--json")
    doc = json.loads(out_json)
    _, out, _ = _run(capsys, *SMALL)
    _, out_all, _ = _run(capsys, *SMALL, "--all")
    assert len(_rows(out)) < len(_rows(out_all)) == len(doc["options"])
    assert "hidden" in out and "hidden" not in out_all


def test_json_is_the_contract_object(capsys):
    code, out, _ = _run(capsys, *SMALL, "--json", "--price", "H100=2.0")
    assert code == 0
    doc = json.loads(out)
    assert {"request", "options"} <= doc.keys()
    h100 = [o for o in doc["options"] if o["gpu"] == "H100-80GB"]
    assert h100 and all(o["price_source"] == "--price" and o["usd_per_gpu_hour"] == 2.0 for o in h100)
    assert doc["request"]["prices"] == {"H100-80GB": 2.0}


def test_a_budget_no_option_meets_exits_1_and_still_prints_the_table(capsys):
    code, out, _ = _run(capsys, *SMALL, "--budget-usd", "0.0001")
    assert code == 1
    assert "budget    none within $0.00 among the priced options" in out and "tokens/s" in out
    code, out, _ = _run(capsys, *SMALL, "--budget-usd", "1000000", "--deadline-hours", "1000")
    assert code == 0
    assert "budget    " in out and "deadline  " in out


def test_sort_by_cost_puts_the_cheapest_first(capsys):
    _, out, _ = _run(capsys, *SMALL, "--sort", "cost", "--json")
    costs = [o["cost_usd"] for o in json.loads(out)["options"]]
    priced = [c for c in costs if c is not None]
    assert priced == sorted(priced) and costs[:len(priced)] == priced  # unpriced last


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True)


@pytest.mark.parametrize("args", [
    ("recommend", "--model", "8B"),  # no job size
    ("recommend", "--model", "8B", "--tokens", "5", "--steps", "5"),
    ("recommend", "--model", "8B", "--tokens", "5", "--gpu", "H100"),
    ("recommend", "--model", "8B", "--tokens", "5", "--price", "H100"),
    ("recommend", "--model", "8B", "--tokens", "5", "--price", "H100=-1"),
    ("recommend", "--model", "8B", "--tokens", "5", "--gpu-types", "H10"),
    ("recommend", "--model", "8B", "--tokens", "5", "--sort", "price"),
    ("recommend", "--model", "8B", "--tokens", "5", "--max-gpus", "100000"),
    ("recommend", "--model", "8B", "--tokens", "1.5"),  # 1e9 is a whole number and accepted; 1.5 is not
])
def test_usage_errors_are_one_line_with_a_hint(args):
    proc = run(*args)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: ") and len(lines) == 2, proc.stderr
    assert proc.stdout == ""


def test_nothing_feasible_exits_1(capsys):
    code, out, err = _run(capsys, "recommend", "--model", "8B", "--seq-len", "65536", "--tokens", "5",
                          "--gpu-types", "T4", "--max-gpus", "1")
    assert code == 1 and out == "" and err.startswith("error: no plan for llama-3.1-8b")


def test_help_lists_recommend():
    assert "recommend" in run("--help").stdout


def test_a_job_size_may_be_written_in_scientific_notation():
    proc = run("estimate", "--model", "0.5B", "--gpu", "H100-80GB", "--tokens", "1e9", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["job"]["tokens"] == 1_000_000_000


def test_each_option_shows_its_global_batch_and_differences_are_named(capsys):
    """Without --global-batch each option rounds the default to what its GPUs split (GRPO: whole generation groups
    over the training processes), so the table shows each option's batch and says when they differ; with the pin
    every option trains exactly it."""
    argv = ["recommend", "--model", "0.5B", "--trainer", "grpo", "--steps", "100", "--all", "--gpu-types",
            "H100,A100-80GB", "--max-gpus", "8"]
    code, out, _ = _run(capsys, *argv)
    assert code == 0
    header = next(line for line in out.splitlines() if "tokens/s" in line).split()
    assert header[header.index("plan") + 1] == "batch"
    code, doc, _ = _run(capsys, *argv, "--json")
    plans = [o["plan"] for o in json.loads(doc)["options"]]
    batches = {p["micro_batch"] * p["grad_accum"] * (p["num_processes"] // max(p["sp_size"], p["cp_size"], 1))
               for p in plans}
    assert ("batch     the options train" in out) is (len(batches) > 1), batches
    code, out, _ = _run(capsys, *argv, "--global-batch", "48")
    assert code == 0 and "batch     the options train" not in out
    assert _rows(out) and all(" 48 " in row for row in _rows(out))
