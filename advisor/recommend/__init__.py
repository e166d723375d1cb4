"""`trl-advisor recommend`: which GPUs to rent for a job, how long it takes and what it costs. The planner runs on
every catalogue GPU type and count; the feasible plans are priced and ranked (time, cost, the Pareto front).

The wizard's "what to rent" view calls `recommend(...)`, reads the Recommendation's options and picks, and hands
`generate_request(rec, option)` to generate for the option chosen."""

from advisor.recommend.commands import generate_request
from advisor.recommend.option import PICKS, Option, Recommendation
from advisor.recommend.render import recommendation_json, render_recommendation
from advisor.recommend.sweep import DEFAULT_MAX_GPUS, DEFAULT_MAX_NODES, recommend

__all__ = ["DEFAULT_MAX_GPUS", "DEFAULT_MAX_NODES", "PICKS", "Option", "Recommendation", "generate_request", "recommend",
           "recommendation_json", "render_recommendation"]
