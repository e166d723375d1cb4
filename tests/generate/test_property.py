"""500 random consistent plans (seeded): every bundle renders, passes the checks, and renders the same bytes twice."""

from __future__ import annotations

import random

import yaml
from gen_cases import MODELS, random_plan, result, target

from advisor.bundle.consistency import check_bundle_files, plan_invariants
from advisor.bundle.render import render_bundle

N_PLANS = 500


def _valid_plans(seed: int, n: int):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        p, model, gpu = random_plan(rng)
        if not plan_invariants(p, MODELS[model]):
            out.append((p, model, gpu))
    return out


def test_random_plans_render_consistent_bundles():
    plans = _valid_plans(20261129, N_PLANS)
    seen = {(p.trainer, p.backend, p.method, p.vllm_mode) for p, _, _ in plans}
    assert len(seen) > 40  # the sample covers the matrix, not one corner of it
    failures = []
    for i, (p, model, gpu) in enumerate(plans):
        t = target(gpu, p.gpus_per_node, p.nodes)
        files = render_bundle(p, MODELS[model], t, result(p))
        problems = check_bundle_files(files)
        if problems:
            failures.append((p, problems[:3]))
        if i % 25 == 0:
            assert render_bundle(p, MODELS[model], t, result(p)) == files
            assert yaml.safe_load(files["accelerate.yaml"])["num_processes"] == p.num_processes
    assert not failures, f"{len(failures)} of {N_PLANS} plans; first: {failures[0]}"
