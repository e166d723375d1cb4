"""Figures the README states that the code can recompute: they must be what it computes now."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_rule_count_is_the_rulebook_s():
    from rules.rulebook import all_rules

    stated = {int(n) for n in re.findall(r"checks (\d+) rules", README.read_text(encoding="utf-8"))}
    assert stated == {len(all_rules())}


def test_the_command_examples_are_what_the_commands_print():
    """Each `$ trl-advisor ...` block shows what the command prints now (refresh: tests/cli/readme_examples.py)."""
    import readme_examples

    blocks = readme_examples.BLOCK.findall(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 4  # generate, check, two recommend examples
    for command, shown in blocks:
        assert readme_examples.expected_block(command, shown) == shown, command


def test_the_accuracy_figures_are_the_report_s():
    """The memory model's paragraph quotes docs/accuracy.md's figures as bench.accuracy computes them from the
    committed records (runs, median and worst errors, the verify runs), and the FSDP2 margin in use."""
    from advisor.model.calibration import FSDP2_UNEXPLAINED_MARGIN_FRACTION
    from bench import accuracy as A

    report = A.build()
    rows = report.rows
    all_, hold = A.split_stats(rows, "all"), A.split_stats(rows, "holdout")
    ver = A.split_stats(report.verify_rows, "verify")
    text = " ".join(README.read_text(encoding="utf-8").split())

    def pct(x: float) -> str:
        return f"{100 * x:.1f} %"

    assert f"{all_['n']} runs on H200s and {all_['n_oom']} that ran out of memory" in text
    assert (f"peak memory median error {pct(all_['mem_median'])} (holdout {pct(hold['mem_median'])}, worst "
            f"{pct(all_['mem_worst'])})") in text
    assert (f"step time median {pct(all_['time_median'])} (holdout {pct(hold['time_median'])}; worst "
            f"{pct(all_['time_worst'])}") in text
    assert (f"({ver['n']} runs that trained: peak within {pct(ver['mem_worst'])}, step time median "
            f"{pct(ver['time_median'])};") in text
    later = A.split_stats(report.later_verify_rows, "verify")
    slower = sum(e.err_step < 0 for e in report.later_verify_rows if e.err_step is not None)
    assert (f"{later['n']} more since, of workloads no benchmark row ran, on an H200 and an H100: peak within "
            f"{pct(later['mem_worst'])}, step time median {pct(later['time_median'])}, worst "
            f"{pct(later['time_worst'])}, {slower} of the {later['n']} slower than predicted at the median of their "
            "runs") in text
    draws = [d["err"] for d in A.host_bound_draws(report.later_verify_rows, A.later_verify_hosts())]
    assert f"their single runs {100 * min(draws):+.1f} % to {100 * max(draws):+.1f} %" in text
    quiet = [r for r in A.later_host_scaled() if r["spread_pct"] is not None and r["spread_pct"] <= A.QUIET_SPREAD_PCT]
    assert (f"on hosts that held still every one was within {100 * max(abs(r['err_own_host']) for r in quiet):.1f} % "
            "of the estimate for its host's measured speed") in text
    assert f"keep {round(100 * FSDP2_UNEXPLAINED_MARGIN_FRACTION)} % of the GPU as extra headroom" in text
    # the host-bound spread it quotes is the one the note quotes (tests/model/test_accuracy.py ties it to the report)
    from advisor.model.calibration import HOST_MACHINE_SPREAD

    assert f"measured up to {round(100 * HOST_MACHINE_SPREAD)} % apart on two machines" in text
