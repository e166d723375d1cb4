"""recommend skips the hardware choices a pinned knob rules out, without a planner search, and says which knob and
which values would do when it rules out every one; the choices it keeps give the same options as searching all."""

from __future__ import annotations

import dataclasses

import pytest

import rules
from advisor import cli
from advisor.core.errors import NoFeasiblePlanError
from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.recommend import hardware as hw_mod
from advisor.recommend import prune, recommend, recommendation_json
from advisor.recommend import sweep as sweep_mod
from advisor.recommend.commands import hardware_request
from advisor.resolve import resolve_model
from advisor.search import structures

TOKENS = 1_000_000_000


@pytest.fixture
def searches(monkeypatch):
    """Counts the planner searches recommend runs (the real planner still answers)."""
    calls: list[str] = []
    real = sweep_mod.search

    def counted(req, model, target):
        calls.append(target.describe())
        return real(req, model, target)

    monkeypatch.setattr(sweep_mod, "search", counted)
    return calls


def test_a_pin_that_breaks_a_rule_everywhere_runs_no_planner_search(searches):
    """`--sp-size 7` on Qwen2.5-7B (28 heads, 4 KV heads): every choice of every type and count, in each method
    pass, fails SP001 whatever the plan; none is searched (there were 393 searches before)."""
    with pytest.raises(NoFeasiblePlanError) as err:
        recommend(Request(model="7B", sp_size=7), tokens=TOKENS)
    assert searches == []
    assert err.value.exit_code == 1


def test_the_error_names_the_pinned_knob_and_the_values_the_rules_allow():
    model = resolve_model(Request(model="7B"))
    with pytest.raises(NoFeasiblePlanError) as err:
        recommend(Request(model="7B", sp_size=7), tokens=TOKENS)
    assert "--sp-size 7" in err.value.message and "SP001" in err.value.message
    largest = max(hw.gpus for gpu in hw_mod.gpu_types(None)
                  for hw in hw_mod.counts(gpu, sweep_mod.DEFAULT_MAX_GPUS, sweep_mod.DEFAULT_MAX_NODES))
    allowed = rules.valid_sp_sizes(model, largest)  # what SP001's own fix lists
    assert allowed == [1, 2, 4]
    assert f"valid --sp-size values for {model.id} on these GPU counts: 1, 2, 4" in err.value.hint
    assert "--max-gpus" not in err.value.hint  # more GPUs would not help


def test_a_pinned_sp_size_that_no_count_divides_names_the_counts_divisors():
    with pytest.raises(NoFeasiblePlanError) as err:
        recommend(Request(model="8B", sp_size=4), tokens=TOKENS, max_gpus=2)
    assert "SP006" in err.value.message
    assert "valid --sp-size values for llama-3.1-8b on these GPU counts: 1, 2 " in err.value.hint


def test_a_pinned_cp_size_that_rules_out_every_option_is_named_with_its_values():
    with pytest.raises(NoFeasiblePlanError) as err:
        recommend(Request(model="7B", cp_size=3), tokens=TOKENS, gpu_types=["H100", "A100-80GB"], max_gpus=16)
    assert "--cp-size 3 leaves no option" in err.value.message
    listed = err.value.hint.split("on these GPU counts: ")[1].split(" (")[0]
    assert listed == "1, 2, 4, 8, 16"  # each divides the counts and 1024 / 2 (SP016, SP012)


def test_two_pinned_knobs_are_both_named_with_what_each_could_be():
    with pytest.raises(NoFeasiblePlanError) as err:
        recommend(Request(model="7B", backend="ddp", sp_size=2), tokens=TOKENS, gpu_types=["H100"], max_gpus=8)
    assert "--backend ddp --sp-size 2" in err.value.message and "SP002" in err.value.message
    assert "valid --backend values for qwen2.5-7b: deepspeed" in err.value.hint
    assert "valid --sp-size values for qwen2.5-7b on these GPU counts: 1 " in err.value.hint


def test_a_pin_every_count_contradicts_says_so_rather_than_asking_for_more_gpus():
    with pytest.raises(NoFeasiblePlanError) as err:
        recommend(Request(model="0.5B", trainer="grpo", vllm="server", vllm_gpus=16), tokens=TOKENS,
                  gpu_types=["H100"])
    assert "--vllm-gpus 16 is more than the 8 GPUs per node" in err.value.message
    assert err.value.hint == "use at most --vllm-gpus 7"


def test_the_command_line_exits_1_with_the_knob_in_the_hint(capsys):
    assert cli.main(["recommend", "--model", "7B", "--tokens", "1e9", "--sp-size", "7"]) == 1
    err = capsys.readouterr().err
    assert "--sp-size 7 leaves no option" in err and "valid --sp-size values" in err


@pytest.mark.parametrize("req, kw", [
    (Request(model="7B", sp_size=2, seq_len=32768), {"gpu_types": ["H100", "A100-80GB"], "max_gpus": 16}),
    (Request(model="8B", cp_size=2, seq_len=32768, packing=False), {"gpu_types": ["H100"], "max_gpus": 16}),
    (Request(model="8B", backend="deepspeed", zero=3), {"gpu_types": ["H100", "L40S"], "max_gpus": 16}),
    (Request(model="0.5B", trainer="grpo", vllm="server", vllm_gpus=2), {"gpu_types": ["H100"], "max_gpus": 16}),
    (Request(model="1.5B", trainer="dpo", method="lora"), {"gpu_types": ["A100-80GB"], "max_gpus": 8}),
])
def test_the_choices_kept_give_the_options_a_search_of_every_choice_gives(monkeypatch, req, kw):
    """The same options, order, plans and figures with the pruning as with a planner search of every choice."""
    pruned = recommendation_json(recommend(req, tokens=TOKENS, **kw))
    monkeypatch.setattr(sweep_mod, "ruling_error", lambda *args: None)
    searched = recommendation_json(recommend(req, tokens=TOKENS, **kw))
    assert pruned["options"] == searched["options"] and pruned["options"]
    for key in ("infeasible", "not_searched", "hardware_choices_planned"):
        assert pruned["search"][key] == searched["search"][key]
    assert pruned["notes"] == searched["notes"]
    assert pruned["search"]["searches"] == searched["search"]["searches"] - len(pruned["search"]["ruled_out"])


def test_the_ruled_out_choices_are_reported_with_their_rule():
    rec = recommend(Request(model="7B", sp_size=2, seq_len=32768), tokens=TOKENS, gpu_types=["H100"], max_gpus=8)
    assert rec.ruled_out == ("1 x H100-80GB: SP006 sp 2 does not divide the 1 training processes",)
    assert "1 x H100-80GB" in rec.infeasible and 1 not in {o.hardware.gpus for o in rec.options}


def _trusted(rule: rules.Rule) -> bool:
    """The rules whose verdict the pruning may take from one structure: errors that read only plan fields (no
    derived property), nothing else that follows the plan, and are not gated by versions."""
    plan_fields = {f.name for f in dataclasses.fields(Plan)}
    return rule.severity == "error" and not rule.applies_to and all(
        path.partition(".")[0] not in prune._PLAN_DEPENDENT
        and (not path.startswith("plan.") or path.removeprefix("plan.") in plan_fields) for path in rule.reads)


@pytest.mark.parametrize("req, gpu, gpus, nodes", [
    (Request(model="7B", sp_size=2, seq_len=32768), "H100", 8, 1),
    (Request(model="7B", cp_size=2, seq_len=32768, packing=False), "H100", 8, 2),
    (Request(model="7B", trainer="grpo"), "H100", 8, 1),
    (Request(model="7B", trainer="dpo", method="lora"), "A100-80GB", 2, 1),
    (Request(model="0.5B", trainer="kto", micro_batch=1), "T4", 1, 1),
])
def test_a_rules_verdict_follows_from_the_plan_fields_it_declares(req, gpu, gpus, nodes):
    """The pruning judges a choice on one structure when the failing rule reads only fields every structure
    shares: that holds when a rule's verdict follows from the plan fields it declares in `reads`. Each structure's
    declared fields are put into another structure: the verdict must not change."""
    from advisor.catalog import resolve_gpu

    model = resolve_model(req)
    hw = hw_mod.Hardware(resolve_gpu(gpu), gpus, nodes)
    r, target = hardware_request(req, hw), hw.target()
    plans = structures(r, model, target)
    others = (plans[0], plans[len(plans) // 2], plans[-1])
    plans = plans[::max(1, len(plans) // 40)]  # GRPO has hundreds: a spread of them

    def status(rule, plan):
        return rule.check(rules.Context(request=r, plan=plan, model=model, target=target)).status

    changed = set()
    for rule in filter(_trusted, rules.all_rules()):
        declared = [path.removeprefix("plan.") for path in rule.reads if path.startswith("plan.")]
        for plan in plans:
            for other in others:
                mixed = dataclasses.replace(other, **{name: getattr(plan, name) for name in declared})
                if status(rule, mixed) != status(rule, plan):
                    changed.add(rule.id)
    assert changed == set()


def test_every_plan_field_a_pin_names_is_a_plan_field():
    names = {f.name for f in dataclasses.fields(Plan)}
    knobs = prune.pinned_knobs(Request(model="7B", sp_size=2, cp_size=2, zero=3, vllm="server", liger=False,
                                       backend="deepspeed", tokens=5))
    assert {path.removeprefix("plan.") for path in knobs} <= names
    assert knobs == {"plan.backend": "backend", "plan.zero_stage": "zero", "plan.liger": "liger",
                     "plan.sp_size": "sp_size", "plan.cp_size": "cp_size", "plan.vllm_mode": "vllm"}
