"""Ranking: the time-vs-cost Pareto front among priced options, the picks, and the table order."""

from __future__ import annotations

from advisor.catalog import resolve_gpu
from advisor.catalog.prices import price_override
from advisor.model.job import Job
from advisor.recommend.hardware import Hardware
from advisor.recommend.option import Option
from advisor.recommend.rank import pareto_flags, picks, ranked
from advisor.search import Candidate


def _option(gpu: str, gpus: int, hours: float, usd: float | None) -> Option:
    job = Job(given="tokens", tokens=10**9, steps=1, tokens_per_step=10**9, tokens_per_second=10**9 / hours / 3600,
              hours=hours, gpus=gpus, gpu_hours=hours * gpus)
    price = price_override(gpu, usd) if usd is not None else None
    return Option(hardware=Hardware(resolve_gpu(gpu), gpus, 1), candidate=Candidate(plan=None), job=job, price=price)


# cost = hours x gpus x price
FAST = _option("H100", 8, 1.0, 4.0)       # 1 h, $32
MIDDLE = _option("A100-80GB", 4, 3.0, 2.0)  # 3 h, $24
SLOW = _option("L40S", 1, 10.0, 1.0)       # 10 h, $10
DOMINATED = _option("A100-40GB", 8, 3.5, 2.0)  # 3.5 h, $56: slower and dearer than MIDDLE
UNPRICED = _option("RTX-5090", 8, 0.5, None)  # the fastest, cost unknown


def test_the_front_keeps_only_options_no_other_beats_on_both_time_and_cost():
    options = [DOMINATED, SLOW, FAST, MIDDLE]
    assert pareto_flags(options) == [False, True, True, True]


def test_an_option_without_a_price_is_never_on_the_front():
    assert pareto_flags([UNPRICED, FAST]) == [False, True]


def test_equal_time_the_cheaper_wins_and_equal_cost_the_faster():
    same_time_dearer = _option("H100", 8, 1.0, 5.0)
    same_cost_slower = _option("H200", 8, 2.0, 2.0)  # 2 h x 8 x $2 = $32, as FAST
    assert pareto_flags([same_time_dearer, FAST, same_cost_slower]) == [False, True, False]


def test_picks_fastest_of_all_cheapest_priced_and_the_constrained_ones():
    options = [FAST, MIDDLE, SLOW, DOMINATED, UNPRICED]
    chosen = picks(options, budget_usd=25.0, deadline_hours=3.0)
    assert chosen["fastest"] is UNPRICED  # time needs no price
    assert chosen["cheapest"] is SLOW
    assert chosen["within_budget"] is MIDDLE  # the fastest costing at most $25
    assert chosen["within_deadline"] is MIDDLE  # the cheapest done within 3 h
    assert picks(options, budget_usd=5.0, deadline_hours=0.1).keys() == {"fastest", "cheapest"}


def test_the_table_orders_by_time_or_by_cost_with_unpriced_last():
    options = [SLOW, UNPRICED, MIDDLE, FAST]
    by_time = ranked(options, sort="time", budget_usd=None, deadline_hours=None)
    assert [o.hours for o in by_time] == [0.5, 1.0, 3.0, 10.0]
    by_cost = ranked(options, sort="cost", budget_usd=None, deadline_hours=None)
    assert [o.cost_usd for o in by_cost] == [10.0, 24.0, 32.0, None]
    assert [o.best_for for o in by_cost] == [("cheapest",), (), (), ("fastest",)]
    assert [o.pareto for o in by_cost] == [True, True, True, False]
