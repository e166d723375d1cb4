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
    assert f"keep {round(100 * FSDP2_UNEXPLAINED_MARGIN_FRACTION)} % of the GPU as an extra safety margin" in text
    # the host-bound spread it quotes is the one the note quotes (tests/model/test_accuracy.py ties it to the report)
    from advisor.model.calibration import HOST_MACHINE_SPREAD

    assert f"measured up to {round(100 * HOST_MACHINE_SPREAD)} % apart on two machines" in text


def _text() -> str:
    return " ".join(README.read_text(encoding="utf-8").split())


def test_the_catalogue_sizes_are_the_catalogue_s():
    from advisor.catalog import all_gpus, all_models

    assert f"the catalogues ({len(all_models())} models, {len(all_gpus())} GPUs," in _text()


def test_the_command_timings_are_the_recorded_ones(capsys):
    """The recommend and generate timings quote the bench record the README names, and the search count is what
    that recommend runs now."""
    import json

    from advisor.cli import main

    text = _text()
    name = re.search(r"bench/results/(cli-speed-[0-9-]+\.json)", text).group(1)
    record = json.loads((README.parent / "bench" / "results" / name).read_text(encoding="utf-8"))
    cmds = record["commands"]
    sft = next(v for k, v in cmds.items() if k.startswith("recommend 8B SFT"))
    grpo = next(v for k, v in cmds.items() if k.startswith("recommend Qwen3-8B GRPO"))
    assert main(["recommend", "--model", "8B", "--trainer", "sft", "--tokens", "1000000000", "--max-gpus", "16",
                 "--json"]) == 0
    searches = json.loads(capsys.readouterr().out)["search"]["searches"]
    assert (f"--max-gpus 16` runs {searches} planner searches and answers in {sft['wall_seconds']:.1f} s on a 2-core "
            f"machine (`python -m bench.cli_speed`, median of {record['runs']},") in text
    assert f"the GRPO example above takes {grpo['wall_seconds']:.1f} s" in text
    over = [v["over_bare_seconds"] for v in cmds.values() if "over_bare_seconds" in v]
    assert f"answers {round(min(over) * 100) * 10}-{round(max(over) * 100) * 10} ms after a bare" in text


def test_the_planner_timings_are_the_recorded_ones():
    """The plan search's timings quote the bench.planner_speed record the README names: its medians, its number of
    searches and its machine's cores; and the record holds the cases the bench runs now."""
    import json

    from bench.planner_speed import CASES

    text = _text()
    name = re.search(r"bench/results/(planner-speed-[0-9-]+\.json)", text).group(1)
    record = json.loads((README.parent / "bench" / "results" / name).read_text(encoding="utf-8"))
    cases = record["cases"]
    assert set(cases) == set(CASES)
    assert all(len(c["runs_ms"]) == record["repeats"] for c in cases.values())

    def ms(case: str) -> int:
        return round(cases[case]["median_ms"])

    assert (f"`python -m bench.planner_speed` on a {record['machine']['cpus']}-core machine (median of "
            f"{record['repeats']} searches each, bench/results/{name}): 405B on 16 x 8 H100 "
            f"{ms('405B, 16 nodes x 8 x H100')} ms, 70B on 8 x H100 {ms('70B, 8 x H100')} ms, a GRPO 7B search with "
            f"the vLLM split {ms('7B GRPO, 8 x H100 (vLLM split searched)')} ms;") in text


def test_the_plan_quality_claim_is_the_report_s():
    doc = (README.parent / "docs" / "plan-quality.md").read_text(encoding="utf-8")
    goal = int(re.search(r"at least (\d+) % of the best measured", doc).group(1))
    rows = [line for line in doc.splitlines() if re.match(r"\| [a-z0-9.-]+ \| .* \| (met|missed) \|", line)]
    words = {3: "three", 4: "four", 5: "five", 6: "six"}
    assert rows and all("| met |" in r for r in rows)
    assert (f"the planner's pick at least {goal} % of the best measured plan in each of {words[len(rows)]} "
            "workloads") in _text()


def test_the_search_s_figures_are_its_constants():
    from advisor.search.candidates import DEFAULT_GLOBAL_BATCH, smallest_micro_batch
    from advisor.search.planner import COMPLEXITY_MARGIN
    from advisor.verify.limits import SPEED_TOLERANCE_PCT

    text = _text()
    assert f"(default {DEFAULT_GLOBAL_BATCH} sequences;" in text
    from advisor.core.request import Request

    assert f"KTO's micro-batch starts at {smallest_micro_batch(Request(model='0.5B', trainer='kto'))}," in text
    assert (f"a DeepSpeed plan must beat a plain one by {round(100 * COMPLEXITY_MARGIN['deepspeed'])} % and an FSDP2 "
            f"plan by {round(100 * COMPLEXITY_MARGIN['fsdp2'])} %") in text
    assert f"where the {SPEED_TOLERANCE_PCT:.0f} % speed band comes from" in text


def test_the_estimate_defaults_paragraph_is_what_estimate_takes():
    """`check` says "knobs not given take estimate's documented defaults": the README's paragraph is that
    documentation, held to advisor.resolve.defaults.default_plan."""
    from advisor.core.request import Request
    from advisor.resolve import defaults as D
    from advisor.resolve import resolve_model, resolve_target

    def plan(**kw):
        req = Request(**{"model": "0.5B", "gpu": "H100-80GB", **kw})
        return D.default_plan(req, resolve_model(req), resolve_target(req))

    text = _text()
    start = text.index("Knobs not given: `generate` searches them;")
    para = text[start:text.index("### Example", start)]
    one, eight = plan(), plan(gpus=8)
    assert f"{one.method} fine-tuning" in para
    assert f"`--seq-len {one.seq_len}`, `--micro-batch {one.micro_batch}`, `--grad-accum {one.grad_accum}`" in para
    assert one.grad_ckpt and "gradient checkpointing on" in para
    assert not (one.liger or one.packing or one.unsloth) and "Liger, packing and Unsloth off" in para
    assert one.precision == "bf16" and plan(gpu="V100-32GB").precision == "fp16-mixed"
    assert "bf16 (fp16-mixed on a GPU without bf16)" in para
    assert f"LoRA rank {one.lora_r}" in para
    grpo, rloo = plan(trainer="grpo"), plan(trainer="rloo")
    assert (f"GRPO {grpo.num_generations} and RLOO {rloo.num_generations} generations of at most "
            f"{grpo.max_completion_len} tokens") in para
    assert plan(trainer="grpo", seq_len=600).max_completion_len == 300 and "half of `--seq-len` at most" in para
    assert grpo.vllm_mode == "none" and plan(trainer="grpo", gpus=2, vllm_gpus=1).vllm_mode == "server"
    assert plan(trainer="grpo", vllm="colocate").vllm_mem_fraction == 0.3 and "colocate reserves 0.3" in para
    assert (one.backend, eight.backend) == ("single", "ddp") and "one GPU alone, DDP on several" in para
    z1 = plan(gpus=8, zero=1)
    assert (z1.backend, z1.zero_stage) == ("deepspeed", 1) and "DeepSpeed with `--zero N` (stage N)" in para
    off = plan(gpus=8, offload="optimizer")
    assert (off.backend, off.zero_stage) == ("deepspeed", 2) and "with `--offload` (ZeRO-2)" in para
    sp = plan(gpus=8, sp_size=2)
    assert (sp.backend, sp.zero_stage) == ("deepspeed", 3) and "ZeRO-3 with `--sp-size`" in para
    assert plan(gpus=8, cp_size=2).backend == "fsdp2" and "FSDP2 with `--cp-size`" in para
