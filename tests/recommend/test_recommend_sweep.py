"""recommend with the real planner: feasible options with consistent job arithmetic, each plan reproduced by
`estimate` with its knobs pinned and by `generate` on its hardware, one method compared, prices applied or absent,
and the search bounded."""

from __future__ import annotations

import json
import math
import shlex
from types import SimpleNamespace

import pytest

from advisor import cli
from advisor.core.errors import AdvisorError, NoFeasiblePlanError
from advisor.core.request import Request
from advisor.recommend import generate_request, recommend, recommendation_json
from advisor.recommend import hardware as hw_mod
from advisor.recommend import sweep as sweep_mod
from advisor.resolve import default_plan, resolve_model
from advisor.search import decide, plan_json
from advisor.search.candidates import Candidate

TOKENS = 1_000_000_000
CONTRACT_OPTION_KEYS = {"gpu", "gpus_per_node", "nodes", "plan", "tokens_per_second", "hours", "gpu_hours",
                        "cost_usd", "price_source", "pareto"}


@pytest.fixture(scope="module")
def sft_8b():
    """The issue's example: `recommend --model 8B --trainer sft --tokens 1000000000 --max-gpus 16`."""
    return recommend(Request(model="8B", trainer="sft"), tokens=TOKENS, max_gpus=16)


def test_the_8b_example_has_options_whose_hours_are_tokens_over_speed(sft_8b):
    assert len(sft_8b.options) >= 3
    for o in sft_8b.options:
        assert o.job.tokens == TOKENS
        assert o.hours == pytest.approx(TOKENS / o.tokens_per_second / 3600, rel=1e-12)
        assert o.gpu_hours == pytest.approx(o.hours * o.hardware.gpus, rel=1e-12)
        assert o.candidate.memory.fits
        if o.price is not None:
            assert o.cost_usd == pytest.approx(o.gpu_hours * o.price.usd_per_gpu_hour, rel=1e-12)
    assert sft_8b.fastest is min(sft_8b.options, key=lambda o: o.hours)
    assert any(o.pareto for o in sft_8b.options)


def test_the_search_is_bounded_by_the_count_list(sft_8b):
    """One planner search per (type, count) at most: the cost of the command grows with log2 of --max-gpus."""
    bound = sum(len(hw_mod.counts(g, 16, sweep_mod.DEFAULT_MAX_NODES)) for g in hw_mod.gpu_types(None))
    assert sft_8b.planned <= bound
    assert sft_8b.searches == sft_8b.planned  # full fits somewhere: no second method pass


def test_every_option_is_what_estimate_predicts_with_its_knobs_pinned(sft_8b, capsys):
    """The issue's check: each option's plan, given to `estimate` (the printed command) with the same GPU and
    knobs, predicts the same tokens/s and fits."""
    doc = recommendation_json(sft_8b)
    for option in doc["options"]:
        argv = shlex.split(option["estimate_command"])
        assert argv[:2] == ["trl-advisor", "estimate"]
        assert cli.main([*argv[1:], "--json"]) == 0
        est = json.loads(capsys.readouterr().out)
        assert est["speed"]["tokens_per_second"] == pytest.approx(option["step_tokens_per_second"], rel=1e-12)
        assert est["job"]["tokens_per_second"] == pytest.approx(option["tokens_per_second"], rel=1e-12), option
        assert est["memory"]["fits"] is True, option["estimate_command"]
        assert est["hardware"]["gpu"] == option["gpu"] and est["hardware"]["nodes"] == option["nodes"]
        assert est["job"]["hours"] == pytest.approx(option["hours"], rel=1e-12)


def test_generate_on_an_options_hardware_chooses_its_plan(sft_8b):
    for option in (sft_8b.fastest, sft_8b.cheapest):
        decision, _ = decide(generate_request(sft_8b, option))
        assert plan_json(decision.chosen.plan) == plan_json(option.candidate.plan)


def test_unpinned_method_is_the_most_faithful_for_every_option(sft_8b):
    assert sft_8b.method == "full" and sft_8b.request.method is None
    assert {o.candidate.plan.method for o in sft_8b.options} == {"full"}


def test_gpus_without_a_price_are_shown_without_a_cost(sft_8b):
    unpriced = [o for o in sft_8b.options if o.hardware.gpu.id == "RTX-5090"]
    assert unpriced and all(o.price is None and o.cost_usd is None and not o.pareto for o in unpriced)
    doc = {(o["gpu"], o["gpus_per_node"], o["nodes"]): o for o in recommendation_json(sft_8b)["options"]}
    assert doc[("RTX-5090", 8, 1)]["price_source"] is None and doc[("RTX-5090", 8, 1)]["cost_usd"] is None


def test_consumer_cards_get_no_multi_node_option(sft_8b):
    assert all(o.hardware.nodes == 1 for o in sft_8b.options if o.hardware.gpu.consumer)


def test_the_json_has_the_contract_keys(sft_8b):
    doc = recommendation_json(sft_8b)
    assert doc["request"]["tokens"] == TOKENS and doc["request"]["model"] == "8B"
    for option in doc["options"]:
        assert CONTRACT_OPTION_KEYS <= option.keys()
        assert isinstance(option["pareto"], bool) and isinstance(option["plan"], dict)
    json.dumps(doc)  # every value serialisable


def test_a_price_override_replaces_the_reference_price():
    rec = recommend(Request(model="0.5B"), tokens=10**8, gpu_types=["H100", "RTX-5090"], max_gpus=2,
                    prices={"H100": 1.0, "RTX-5090": 0.5})
    for o in rec.options:
        usd = 1.0 if o.hardware.gpu.id == "H100-80GB" else 0.5
        assert o.price.from_user and o.cost_usd == pytest.approx(o.gpu_hours * usd, rel=1e-12)
    assert recommendation_json(rec)["request"]["prices"] == {"H100-80GB": 1.0, "RTX-5090": 0.5}


def test_a_pinned_method_is_kept():
    rec = recommend(Request(model="8B", method="lora"), tokens=10**8, gpu_types=["H100"], max_gpus=8)
    assert rec.method == "lora" and {o.candidate.plan.method for o in rec.options} == {"lora"}


def test_when_no_option_trains_every_weight_all_compare_the_next_method():
    rec = recommend(Request(model="405B"), tokens=10**6, gpu_types=["RTX-4090"], max_gpus=1)
    assert rec.method == "lora" and {o.candidate.plan.method for o in rec.options} == {"lora"}
    assert rec.searches > rec.planned  # the full fine-tuning pass ran first and found nothing
    assert any("method lora" in note for note in rec.notes)


def test_a_steps_job_counts_each_plans_completions():
    """GRPO: a step trains global batch (completions) x seq_len tokens, so 500 steps are 500 x that per option."""
    rec = recommend(Request(model="qwen2.5-0.5b", trainer="grpo"), steps=500, gpu_types=["H100"], max_gpus=8)
    for o in rec.options:
        plan = o.candidate.plan
        assert o.job.steps == 500 and o.job.tokens == 500 * plan.global_batch * plan.seq_len
        assert plan.global_batch % plan.num_generations == 0


def test_plan_only_gpus_are_planned_when_named_with_a_note():
    rec = recommend(Request(model="0.5B"), tokens=10**8, gpu_types=["MI300X"], max_gpus=1)
    assert [o.hardware.gpu.id for o in rec.options] == ["MI300X"]
    assert any("plan only" in note for note in rec.notes)


def test_nothing_feasible_is_exit_1_with_a_hint():
    with pytest.raises(NoFeasiblePlanError) as err:
        recommend(Request(model="8B", seq_len=65536), tokens=10**6, gpu_types=["T4"], max_gpus=1)
    assert err.value.exit_code == 1 and err.value.hint


def test_consumer_cards_alone_are_not_told_to_allow_more_gpus():
    # consumer cards are planned on one node: --max-gpus 4096 --max-nodes 64 gave the same refusal
    with pytest.raises(NoFeasiblePlanError) as err:
        recommend(Request(model="405B", method="full"), tokens=10**6, gpu_types=["RTX-4090"], max_gpus=64)
    assert "--max-gpus" not in err.value.hint and "--gpu-types" in err.value.hint
    with pytest.raises(NoFeasiblePlanError) as err:
        recommend(Request(model="405B", method="full"), tokens=10**6, gpu_types=["T4"], max_gpus=1)
    assert "--max-gpus" in err.value.hint  # a data-centre card: more of them can help


@pytest.mark.parametrize("req, kw, problem", [
    (Request(model="8B", gpu="H100"), {"tokens": 10}, "drop --gpu"),
    (Request(model="8B", gpus=8), {"tokens": 10}, "drop --gpus"),
    (Request(model="8B", hardware="hw.json"), {"tokens": 10}, "drop --hardware"),
    (Request(model="8B"), {}, "--tokens N or --steps N"),
    (Request(model="8B"), {"tokens": 10, "steps": 10}, "give one"),
    (Request(model="8B"), {"tokens": 10, "sort": "price"}, "--sort"),
    (Request(model="8B"), {"tokens": 10, "budget_usd": -1.0}, "--budget-usd"),
    (Request(model="8B"), {"tokens": 10, "deadline_hours": math.inf}, "--deadline-hours"),
    (Request(model="8B"), {"tokens": 10, "max_gpus": 0}, "--max-gpus"),
])
def test_bad_inputs_are_usage_errors(req, kw, problem):
    with pytest.raises(AdvisorError) as err:
        recommend(req, **kw)
    assert problem in err.value.message and err.value.exit_code == 2


def test_larger_counts_are_skipped_once_more_gpus_stop_paying(monkeypatch):
    """Speeds by GPU count (a fake planner): one node 10, 20, 15 -> stop before 8; several nodes 40, 35 -> stop
    before 64. One node and several nodes are judged apart."""
    speeds = {1: 10.0, 2: 20.0, 4: 15.0, 8: 30.0, 16: 40.0, 32: 35.0, 64: 50.0}
    req = Request(model="0.5B")
    model = resolve_model(req)
    searched = []

    def fake_search(r, model_, target, explain=True):
        searched.append(target.world_size)
        plan = default_plan(r, model_, target)
        chosen = Candidate(plan=plan, memory=SimpleNamespace(headroom_bytes=0),
                           speed=SimpleNamespace(tokens_per_second=speeds[target.world_size],
                                                 effective_tokens_per_second=speeds[target.world_size]))
        return SimpleNamespace(chosen=chosen)

    monkeypatch.setattr(sweep_mod, "search", fake_search)
    rec = recommend(req, tokens=10**6, gpu_types=["H100"], max_gpus=64, max_nodes=8)
    assert searched == [1, 2, 4, 16, 32]
    assert sorted(o.hardware.gpus for o in rec.options) == [1, 2, 4, 16, 32]
    assert len(rec.not_searched) == 2 and "no faster than 20" in rec.not_searched[0]
    assert model.id == rec.model.id
