"""Ranking the options: the time-vs-cost Pareto front, the picks (fastest, cheapest, the fastest within a budget,
the cheapest within a deadline) and the order of the table."""

from __future__ import annotations

import math
from dataclasses import replace

from advisor.recommend.option import Option

SORTS = ("time", "cost")


def pareto_flags(options: list[Option]) -> list[bool]:
    """For each option, whether it is on the front of (hours, cost): no other priced option is as fast and as cheap
    and better in one of them. Options without a price cannot be placed on a cost axis: never on the front."""
    priced = sorted((i for i, o in enumerate(options) if o.cost_usd is not None),
                    key=lambda i: (options[i].hours, options[i].cost_usd))
    flags = [False] * len(options)
    cheapest_so_far = math.inf
    for i in priced:  # by time: an option is on the front when it is cheaper than every faster one
        if options[i].cost_usd < cheapest_so_far:
            flags[i] = True
            cheapest_so_far = options[i].cost_usd
    return flags


def _fastest(options: list[Option]) -> Option | None:
    return min(options, key=lambda o: (o.hours, o.cost_usd if o.cost_usd is not None else math.inf), default=None)


def _cheapest(options: list[Option]) -> Option | None:
    priced = [o for o in options if o.cost_usd is not None]
    return min(priced, key=lambda o: (o.cost_usd, o.hours), default=None)


def picks(options: list[Option], budget_usd: float | None, deadline_hours: float | None) -> dict[str, Option]:
    """pick name -> option: the fastest of all; the cheapest priced; the fastest whose cost is within the budget;
    the cheapest that ends within the deadline (both need a price: an unpriced option's cost is unknown)."""
    out: dict[str, Option] = {}
    for name, option in (
            ("fastest", _fastest(options)),
            ("cheapest", _cheapest(options)),
            ("within_budget", _fastest([o for o in options if o.cost_usd is not None and o.cost_usd <= budget_usd])
             if budget_usd is not None else None),
            ("within_deadline", _cheapest([o for o in options if o.hours <= deadline_hours])
             if deadline_hours is not None else None)):
        if option is not None:
            out[name] = option
    return out


def order_key(sort: str):
    """Sort key of the table: by hours (then cost), or by cost (unpriced last, then hours)."""
    if sort == "cost":
        return lambda o: (o.cost_usd is None, o.cost_usd or 0.0, o.hours)
    return lambda o: (o.hours, o.cost_usd is None, o.cost_usd or 0.0)


def ranked(options: list[Option], *, sort: str, budget_usd: float | None,
           deadline_hours: float | None) -> list[Option]:
    """The options with their Pareto flag and picks set, in table order."""
    flags = pareto_flags(options)
    chosen = picks(options, budget_usd, deadline_hours)
    out = []
    for option, flag in zip(options, flags, strict=True):
        best_for = tuple(name for name, o in chosen.items() if o is option)
        out.append(replace(option, pareto=flag, best_for=best_for))
    return sorted(out, key=order_key(sort))
