"""The plan search: pins stay pinned, the choice fits and is explained, impossible requests say what would work."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.bundle.consistency import check_bundle_files
from advisor.bundle.generate import generate
from advisor.bundle.render import render_bundle
from advisor.check import check_bundle
from advisor.core.errors import AdvisorError, NoFeasiblePlanError
from advisor.core.request import Request
from advisor.resolve import resolve_model, resolve_target
from advisor.search import MICRO_BATCHES, PinnedRuleError, decide, search


def _decide(**kw):
    return decide(Request(**kw))


def test_pins_stay_pinned():
    decision, result = _decide(model="7B", gpu="H100-80GB", gpus=8, method="lora", backend="deepspeed", zero=3,
                               micro_batch=2, grad_ckpt=True, liger=False, seq_len=2048)
    p = decision.chosen.plan
    assert (p.method, p.backend, p.zero_stage, p.micro_batch, p.grad_ckpt, p.liger, p.seq_len) == \
        ("lora", "deepspeed", 3, 2, True, False, 2048)
    assert result["plan"]["zero_stage"] == 3
    assert result["why"]["backend"].startswith("pinned")


def test_chosen_plan_fits_and_alternatives_say_why_they_lost():
    decision, result = _decide(model="8B", gpu="H100-80GB", gpus=8)
    assert result["memory"]["fits"] is True
    assert result["memory"]["per_gpu_reserved_bytes"] <= result["memory"]["gpu_capacity_bytes"]
    assert result["alternatives"], "a search over several backends must report what lost"
    for alt in result["alternatives"]:
        assert alt["rejected_because"], alt
        assert set(alt) >= {"plan", "tokens_per_second", "per_gpu_peak_bytes", "rejected_because"}
    for key in ("backend", "zero_stage", "offload", "method", "precision", "micro_batch", "grad_accum", "grad_ckpt",
                "liger", "sp_size", "cp_size", "vllm_mode", "num_processes", "nodes"):
        assert key in result["plan"]


def test_the_chosen_plan_is_the_fastest_feasible_of_its_tier():
    req = Request(model="1.5B", gpu="H200", gpus=1, method="full")
    model, target = resolve_model(req), resolve_target(req)
    decision = search(req, model, target)
    chosen = decision.chosen
    for alt in decision.alternatives:
        if alt.feasible and alt.plan.offload == "none" and alt.plan.backend == chosen.plan.backend:
            assert alt.tokens_per_second <= chosen.tokens_per_second


def test_full_training_wins_over_lora_when_it_fits_unless_method_is_pinned():
    decision, _ = _decide(model="1.5B", gpu="H200", gpus=1)
    assert decision.chosen.plan.method == "full"
    decision, _ = _decide(model="1.5B", gpu="H200", gpus=1, method="qlora")
    assert decision.chosen.plan.method == "qlora"


def test_a_model_too_big_for_full_training_falls_back_to_lora():
    decision, _ = _decide(model="70B", gpu="H100-80GB", gpus=8)
    assert decision.chosen.plan.method in ("lora", "qlora")
    assert decision.chosen.plan.offload == "none"


def test_grpo_generation_batch_is_divisible_by_num_generations():
    for gpus in (1, 3, 8):
        decision, _ = _decide(model="1.5B", trainer="grpo", gpu="H100-80GB", gpus=gpus, num_generations=6)
        p = decision.chosen.plan
        assert (p.micro_batch * p.num_processes * p.grad_accum) % 6 == 0, p


def test_vllm_server_gets_its_own_gpus():
    decision, _ = _decide(model="7B", trainer="grpo", gpu="H100-80GB", gpus=8, vllm="server")
    p = decision.chosen.plan
    assert p.vllm_mode == "server" and p.vllm_gpus >= 1
    assert p.num_processes == 8 - p.vllm_gpus


def test_long_sequences_get_sequence_parallelism_from_the_valid_sizes():
    decision, _ = _decide(model="8B", gpu="H100-80GB", gpus=8, seq_len=131072)
    p = decision.chosen.plan
    assert p.sp_size in (2, 4, 8)  # llama-3.1-8b: 32 heads, 8 KV heads
    assert p.dp_size * p.sp_size == p.num_processes


def test_a_pin_that_breaks_a_rule_reports_the_rule_and_its_fix():
    with pytest.raises(PinnedRuleError) as err:
        _decide(model="qwen2.5-7b", gpu="H100-80GB", gpus=8, sp_size=7, seq_len=32768)
    assert "SP001" in err.value.message
    assert "1, 2, 4" in err.value.hint


def test_no_feasible_plan_names_the_smallest_change():
    # 405B full fine-tuning on one node of 8 x H100 whose host RAM is known (the probe file): no offload fits it
    hw = str(Path(__file__).resolve().parents[1] / "fixtures" / "hardware" / "h100_sxm_x8_nvlink.json")
    with pytest.raises(NoFeasiblePlanError) as err:
        _decide(model="405B", hardware=hw, method="full")
    assert err.value.exit_code == 1
    assert "makes one" in err.value.hint and "--method lora" in err.value.hint


def test_a_plan_of_hours_per_step_is_no_answer():
    """405B LoRA on one T4 fits only with everything offloaded, at hours per optimizer step: exit 1 with a change."""
    with pytest.raises(NoFeasiblePlanError) as err:
        _decide(model="405B", gpu="T4", gpus=1)
    assert "no practical plan" in err.value.message and " h per optimizer step" in err.value.message
    assert "makes one" in err.value.hint


def test_impossible_even_with_changes_still_gives_a_hint():
    with pytest.raises(AdvisorError) as err:
        _decide(model="405B", gpu="T4", gpus=1, method="qlora", seq_len=131072, grad_ckpt=False, backend="single")
    assert err.value.hint


def test_generate_writes_a_consistent_bundle(tmp_path):
    out = tmp_path / "bundle"
    outcome = generate(Request(model="0.5B", gpu="H200", gpus=1), out=str(out))
    names = sorted(p.name for p in out.iterdir())
    assert {"plan.json", "train.py", "accelerate.yaml", "launch.sh", "requirements.txt", "README.md"} <= set(names)
    plan = json.loads((out / "plan.json").read_text())
    assert plan["out"] == str(out) and plan["plan"] == outcome.result["plan"]
    files = {p.name: p.read_text() for p in out.iterdir()}
    assert check_bundle_files(files) == []
    with pytest.raises(AdvisorError):  # never overwrite without --force
        generate(Request(model="0.5B", gpu="H200", gpus=1), out=str(out))


def test_generate_bundle_passes_the_rule_engine(tmp_path):

    out = tmp_path / "b"
    generate(Request(model="8B", trainer="dpo", method="lora", gpu="A100-80GB", gpus=2), out=str(out))
    report = check_bundle(str(out))
    assert report.ok, [f.to_dict() for f in report.errors]


MODELS = ("0.5B", "1.5B", "3B", "7B", "8B", "14B", "qwen3-8b", "mistral-7b-v0.3", "gemma-2-9b", "phi-3-mini",
          "llama-3.2-1b", "smollm2-1.7b", "70B", "qwen3-30b-a3b")
GPUS = ("H100-80GB", "H200", "A100-80GB", "A100-40GB", "L40S", "RTX-4090", "A10G", "L4")


def _random_request(rng: random.Random) -> Request:
    trainer = rng.choice(("sft", "sft", "dpo", "grpo", "rloo", "kto", "gkd"))
    kw = dict(model=rng.choice(MODELS), trainer=trainer, gpu=rng.choice(GPUS), gpus=rng.choice((1, 2, 4, 8)),
              seq_len=rng.choice((512, 1024, 2048, 4096)))
    if rng.random() < 0.3:
        kw["method"] = rng.choice(("full", "lora", "qlora"))
    if rng.random() < 0.2:
        kw["micro_batch"] = rng.choice(MICRO_BATCHES[:4])
    if rng.random() < 0.2:
        kw["grad_ckpt"] = rng.choice((True, False))
    if trainer in ("grpo", "rloo"):
        kw["max_completion_len"] = kw["seq_len"] // 2
        if rng.random() < 0.5:
            kw["vllm"] = rng.choice(("none", "colocate", "server"))
    if rng.random() < 0.15:
        kw["nodes"] = 2
    return Request(**kw)


def test_500_random_valid_requests_give_consistent_bundles():
    rng = random.Random(20261129)
    produced = 0
    infeasible = 0
    for _ in range(500):
        req = _random_request(rng)
        try:
            decision, result = decide(req)
        except AdvisorError as e:  # no feasible plan / a rule: must come with a hint
            assert e.hint, (req, e.message)
            infeasible += 1
            continue
        result["out"] = "generated/x"
        files = render_bundle(decision.chosen.plan, decision.model, decision.target, result, req)
        result["files"] = sorted(files)
        problems = check_bundle_files(files)
        assert problems == [], (req, problems)
        produced += 1
    assert produced >= 350, f"only {produced} of 500 random requests produced a plan ({infeasible} infeasible)"


def test_cli_generate_json_and_no_feasible_exit_code(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "advisor", "generate", "--model", "1.5B", "--gpu", "H100-80GB",
                           "--out", str(tmp_path / "b"), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {"plan", "alternatives", "out", "files", "memory", "speed", "findings"} <= set(data)
    proc = subprocess.run([sys.executable, "-m", "advisor", "generate", "--model", "405B", "--gpu", "T4",
                           "--method", "full", "--out", str(tmp_path / "c")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: ") and "hint: " in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "c").exists()


def test_random_generated_bundles_pass_the_rule_engine(tmp_path):
    """The generator and the rules must agree: `check --bundle` finds no error in what `generate` writes."""

    rng = random.Random(7)
    checked = 0
    for i in range(80):
        req = _random_request(rng)
        try:
            decision, result = decide(req)
        except AdvisorError:
            continue
        out = tmp_path / f"b{i}"
        result["out"] = str(out)
        files = render_bundle(decision.chosen.plan, decision.model, decision.target, result, req)
        from advisor.bundle.write import write_bundle

        write_bundle(files, str(out), force=False)
        report = check_bundle(str(out))
        assert report.ok, (req, [f.to_dict() for f in report.errors])
        checked += 1
    assert checked >= 50


def test_vllm_gpus_that_leave_nothing_to_train_on_is_a_usage_error():
    with pytest.raises(AdvisorError) as err:
        _decide(model="7B", trainer="grpo", gpu="H100-80GB", gpus=2, vllm="server", vllm_gpus=2)
    assert err.value.exit_code == 2 and "at most 1" in err.value.hint


def _decision_summary(decision) -> dict:
    def cand(c):
        return None if c is None else (c.plan, round(c.tokens_per_second, 6), c.rejected_because)

    return {"chosen": cand(decision.chosen), "alternatives": [cand(a) for a in decision.alternatives],
            "reasons": dict(decision.reasons)}


def test_stopping_after_a_method_gives_the_whole_search_result(monkeypatch):
    """The search skips LoRA/QLoRA once full fine-tuning is chosen with enough full families to fill the
    alternatives; the chosen plan, the alternatives and the reasons must equal those of the whole search."""
    from advisor.search import planner as search_module

    rng = random.Random(20261201)
    stopped = 0
    for _ in range(120):
        req = _random_request(rng)
        try:
            model, target = resolve_model(req), resolve_target(req)
        except AdvisorError:
            continue
        pruned = search(req, model, target)
        with monkeypatch.context() as m:
            m.setattr(search_module, "_later_methods_cannot_matter", lambda candidates, pick, explain=True: False)
            whole = search(req, model, target)
        assert _decision_summary(pruned) == _decision_summary(whole), req
        stopped += pruned.considered < whole.considered
    assert stopped >= 10  # the shortcut is taken, so the comparison means something


@pytest.mark.parametrize("gpu", ["T4", "V100-32GB", "A10G", "H200"])
@pytest.mark.parametrize("method", ["full", "lora"])
def test_one_gpu_offers_zero_only_with_an_offload_unless_deepspeed_is_asked_for(gpu, method):
    # one process shards nothing: ZeRO without offload only adds DeepSpeed's buffers (it measured no faster on one
    # H200, docs/plan-quality.md), so it is neither picked nor listed as an alternative on one GPU where a plain plan
    # of the method fits (candidates.zero_without_offload: searched only where none does)
    from advisor.search.candidates import structures

    req = Request(model="1B", gpu=gpu, gpus=1, method=method)
    model, target = resolve_model(req), resolve_target(req)
    plans = structures(req, model, target)
    assert plans and all(p.offload != "none" for p in plans if p.backend == "deepspeed")
    assert any(p.backend == "deepspeed" for p in plans)  # ZeRO-Offload stays: it can make a big model fit
    decision, _ = _decide(model="1B", gpu=gpu, gpus=1, method=method)
    chosen = decision.chosen.plan
    # the plain plan, or an offload: where nothing else fits (a full 1B fine-tune on a 16 GB T4), or where it is
    # predicted more than OFFLOAD_MARGIN faster than the best plan without it and the same plan does not fit without
    # it (advisor.search.planner._choose)
    assert chosen.backend == "single" or chosen.offload != "none"
    # searched where no plain plan of the method fits (the full 1B on a T4), and shown only as what does not fit
    assert not any(a.plan.backend == "deepspeed" and a.plan.offload == "none" and a.feasible
                   for a in decision.alternatives)
    if chosen.backend != "single" and decision.on_gpu is not None:
        from advisor.search.ranking import OFFLOAD_MARGIN, score

        assert score(decision.chosen, req) > (1 + OFFLOAD_MARGIN) * score(decision.on_gpu, req)
        assert not decision.chosen.without_offload.feasible
    if method == "lora":
        assert chosen.offload == "none"  # a 1B adapter fits on each of them: an offload would buy nothing
    # asked for, it is planned
    pinned = structures(req.with_(backend="deepspeed"), model, target)
    assert any(p.offload == "none" for p in pinned)
    decision, _ = _decide(model="1B", gpu=gpu, gpus=1, method=method, backend="deepspeed")
    assert decision.chosen.plan.backend == "deepspeed"
