"""The benchmark matrix: size, names, splits, coverage of every dimension, order."""

from __future__ import annotations

import random

import pytest

from bench import matrix as M

CAPACITY_GIB = 139.0

# Published parameter counts (Hugging Face model pages), for the independent memory arithmetic below.
PARAMS = {"qwen2.5-0.5b": 494_032_768, "qwen2.5-1.5b": 1_543_714_304, "qwen2.5-3b": 3_085_938_688,
          "qwen2.5-7b": 7_615_616_512, "llama-3.1-8b": 8_030_261_248}


@pytest.fixture(scope="module")
def rows():
    return M.build_matrix()


def test_size_names_and_validity(rows):
    assert len(rows) >= 48
    names = [r["name"] for r in rows]
    assert len(set(names)) == len(names)
    assert M.validate(rows) == []


def test_names_are_derived_from_the_knobs(rows):
    for r in rows:
        assert M.make_name(r) == r["name"]
    r = dict(rows[0])
    r["liger"] = not r["liger"]
    assert M.make_name(r) != rows[0]["name"]


def test_holdout_fraction_and_spread(rows):
    holdout = [r for r in rows if r["split"] == "holdout"]
    assert 0.20 <= len(holdout) / len(rows) <= 0.30
    families: dict[str, list[str]] = {}
    for r in rows:
        families.setdefault(M.family(r), []).append(r["split"])
    for fam, splits in families.items():
        if len(splits) >= 3:
            assert "holdout" in splits and "fit" in splits, fam
    assert {"sft", "dpo", "grpo", "kto"} <= {r["trainer"] for r in holdout}


def test_split_is_deterministic_and_order_independent(rows):
    again = M.build_matrix()
    assert {r["name"]: r["split"] for r in again} == {r["name"]: r["split"] for r in rows}
    shuffled = [dict(r) for r in rows]
    random.Random(7).shuffle(shuffled)
    for r in shuffled:
        r.pop("split")
    M.assign_splits(shuffled)
    assert {r["name"]: r["split"] for r in shuffled} == {r["name"]: r["split"] for r in rows}


def test_every_dimension_is_covered(rows):
    def values(key):
        return {r[key] for r in rows}

    assert values("model") == set(M.MODELS) | set(M.FAMILY_MODELS)
    assert values("method") == {"full", "lora", "qlora"}
    assert values("trainer") == set(M.TRAINERS)
    assert values("precision") == {"bf16", "bf16-mixed"}
    assert values("grad_ckpt") == {True, False}
    assert values("liger") == {True, False}
    backends = {(r["backend"], r["zero"], r["offload"]) for r in rows}
    assert {("single", 0, "none"), ("deepspeed", 2, "none"), ("deepspeed", 3, "none"),
            ("deepspeed", 3, "optimizer")} <= backends
    seqs = values("seq_len")
    assert 512 in seqs and max(seqs) >= 8192 and 16384 in seqs
    mbs = values("micro_batch")
    assert 1 in mbs and max(mbs) >= 8
    assert any(r["grad_accum"] > 1 for r in rows)
    assert all(r["lora_r"] == 16 for r in rows if r["method"] in ("lora", "qlora"))


def test_trainer_specific_rows(rows):
    dpo = [r for r in rows if r["trainer"] == "dpo"]
    assert any(r["method"] == "full" and r["ref_model"] == "copy" for r in dpo)
    assert any(r["method"] == "lora" and r["ref_model"] == "none" for r in dpo)
    grpo = [r for r in rows if r["trainer"] in M.GENERATING]
    assert {r["beta"] for r in grpo} == {0.0, 0.04, 0.05}  # 0.05: RLOO's default KL coefficient (rloo_config.py)
    assert {4, 8, 16} <= {r["num_generations"] for r in grpo}
    assert all(r["method"] == "full" and r["backend"] == "single" for r in grpo)
    assert all(64 <= r["max_completion_len"] <= 512 for r in grpo)
    assert {64, 128, 512} <= {r["max_completion_len"] for r in grpo}
    for r in grpo:  # GRPOConfig rule: generation batch divisible by num_generations (one process)
        assert (r["micro_batch"] * r["grad_accum"]) % r["num_generations"] == 0
    kto = [r for r in rows if r["trainer"] == "kto"]
    assert {(r["micro_batch"], r["liger"]) for r in kto} == {(mb, lg) for mb in (8, 16, 32) for lg in (False, True)}
    assert all(r["ref_model"] == "copy" and r["method"] == "full" and r["seq_len"] == 1024 for r in kto)


def test_rows_near_the_limit_and_expected_ooms(rows):
    near = [r for r in rows if r["expect"] == "near"]
    assert len(near) >= 4
    for r in near:
        if r.get("stratum") in (None, "near-capacity-2"):  # the first calibration's, placed by the crude guess
            assert 0.70 * CAPACITY_GIB <= r["est_peak_gib"] < CAPACITY_GIB, r["name"]  # close, yet planned to fit
    fits = [r for r in rows if r["expect"] == "fit"]
    assert sum(r["est_peak_gib"] < 0.7 * CAPACITY_GIB for r in fits) >= 0.8 * len(fits)
    # expected OOMs, checked with independent arithmetic: model states alone (bytes per parameter of the
    # documented layouts times the published parameter count) already reach about the whole GPU
    ooms = [r for r in rows if r["expect"] == "oom"]
    assert ooms
    for r in ooms:
        if r["backend"] == "deepspeed":
            per_param = 2 + 2 + 4 + 4 + 8  # bf16 params and grads, fp32 master and grads, fp32 Adam moments
        else:
            assert r["precision"] == "bf16-mixed" and r["method"] == "full"
            per_param = 4 + 4 + 8 + 2  # fp32 weights, grads, Adam moments; autocast's bf16 weight copies
        assert PARAMS[r["model"]] * per_param / 2**30 > 0.95 * CAPACITY_GIB, r["name"]


def test_cheap_rows_first(rows):
    est = [r["est_seconds"] for r in rows]
    assert est == sorted(est)
    assert rows[0]["model"] in ("qwen2.5-0.5b", "llama-3.2-1b", "qwen3-0.6b")


MEASURED_OOM = {"sft-g2-2b-full-bf16-single-nockpt-s2048-b8"}
"""Near-capacity rows that ran out of memory on the H200 (bench/results/h200-2026-12-01-part1.jsonl): the model now
predicts them not to fit, as measured (Gemma 2's fp32 norm outputs and soft-capped scores, activations.py)."""
MEASURED_ABOVE_USABLE = {"sft-phi3mini-full-bf16-single-nockpt-s2048-b11"}
"""Near-capacity rows that ran but used more than the usable memory (capacity less the safety margin): Phi-3-mini
reserved 138.5 GiB (h200-2026-12-01-part3.jsonl) against 134.8 usable; with the o_proj copy its rotary causes counted
(dims.ROPE_CAT_TYPES) the model predicts 137.1 GiB, over the usable memory, so the planner would not choose it."""


def test_new_rows_are_planned_near_capacity_by_the_advisor():
    """The near-capacity rows added for issue 14 were placed by the advisor's prediction (85-95 % of the usable
    memory when written): still at least 80 % and predicted to fit, or they no longer test the margin; the one that
    ran out of memory must now be predicted over the limit (and by less than 15 %)."""
    from advisor.catalog import resolve_gpu
    from advisor.core.target import Target
    from advisor.model.bench_rows import plan_from_bench_row
    from advisor.model.estimate import estimate_plan
    from bench.models import machine_attention, row_spec

    new = [r for r in M.build_matrix() if r["expect"] == "near" and r.get("stratum", "").endswith("-3")]
    assert len(new) >= 4
    families = set()
    for r in new:
        spec = row_spec(r)
        families.add(spec.model_type)
        r = dict(r, attn=machine_attention(r, spec, installed={})[0])
        mem, _ = estimate_plan(spec, plan_from_bench_row(r), Target(gpu=resolve_gpu("H200"), gpus_per_node=1))
        usable = mem.per_gpu_reserved_bytes + mem.headroom_bytes
        share = mem.per_gpu_reserved_bytes / usable
        if r["name"] in MEASURED_OOM:
            assert not mem.fits and 1.0 < share <= 1.15, (r["name"], share)
        elif r["name"] in MEASURED_ABOVE_USABLE:
            assert not mem.fits and 1.0 < share <= 1.04, (r["name"], share)
        else:
            assert mem.fits and 0.80 <= share <= 1.0, (r["name"], share)
    assert len(families) >= 3


def test_no_measured_row_changes_split():
    """Rows added after a calibration name their own stratum: every row of the committed results keeps the split
    it was measured under."""
    import json
    from pathlib import Path

    splits = {r["name"]: r["split"] for r in M.build_matrix()}
    results = Path(__file__).resolve().parents[2] / "bench" / "results"
    checked = 0
    for path in sorted(results.glob("h200*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("status") in ("ok", "oom") and rec["name"] in splits:
                assert rec["split"] == splits[rec["name"]], rec["name"]
                checked += 1
    assert checked >= 61
    assert all(r.get("stratum") for r in M._family_rows())


def test_every_catalogue_family_has_rows(rows):
    from advisor.catalog.lookup import all_models
    from bench.models import row_spec

    have = {row_spec(r).model_type for r in rows}
    assert {m.model_type for m in all_models()} - {"gemma3"} <= have  # gemma3 builds as its text decoder
    moe = [r for r in rows if row_spec(r).is_moe]
    assert moe and all(r.get("layers") and f"-L{r['layers']}-" in r["name"] for r in moe)


def test_planning_guess_matches_the_measured_wall_times():
    """The time guesses that plan the budget, against the wall_seconds of the 2026-11-29 H200 records: the median
    of measured / guessed within 0.8-1.1 and 80 % of the rows within a factor 1.4 (rows that saved no checkpoint
    of their own are guessed without the save)."""
    import json
    import statistics
    from pathlib import Path

    by_name = {r["name"]: r for r in M.build_matrix()}
    recs = {}
    for path in sorted((Path(__file__).resolve().parents[2] / "bench" / "results").glob("h200*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            recs[rec["name"]] = rec
    ratios = []
    for name, rec in recs.items():
        if rec.get("status") != "ok" or name not in by_name:
            continue
        row = by_name[name]
        est = M.estimate_seconds(row)
        if not (rec.get("model") or {}).get("checkpoint_saved_seconds"):
            est -= M.checkpoint_save_seconds(row)
        ratios.append(rec["wall_seconds"] / est)
    assert len(ratios) >= 50
    assert 0.8 <= statistics.median(ratios) <= 1.1
    assert sum(1 / 1.4 <= x <= 1.4 for x in ratios) >= 0.8 * len(ratios)


def test_coverage_order_touches_every_family_and_stratum_first(rows):
    new = [r for r in rows if r.get("stratum", "").endswith("-3")]
    ordered = M.order_rows(new, "coverage")
    assert ordered[0]["trainer"] == "kto" and all(r["trainer"] == "kto" for r in ordered[:6])  # priority 0
    rest = ordered[6:]
    from bench.models import row_spec

    families = {row_spec(r).model_type for r in rest}
    strata = {M.family(r) for r in rest}
    seen_f, seen_s, k = set(), set(), 0
    for r in rest:
        seen_f.add(row_spec(r).model_type)
        seen_s.add(M.family(r))
        k += 1
        if seen_f == families and seen_s == strata:
            break
    # every family and stratum within the first rounds, well before the whole list
    assert k <= len(rest) - 5, (k, len(rest))
    assert sorted(ordered, key=lambda r: r["name"]) == sorted(new, key=lambda r: r["name"])


def test_shared_checkpoints_are_paid_once():
    q = [M.row("llama-3.2-3b", method="qlora", seq=1024, mb=mb) for mb in (4, 8)]
    for r in q:
        r["est_seconds"] = M.estimate_seconds(r)
    first, second = q[0]["est_seconds"], q[1]["est_seconds"]
    M.discount_shared_checkpoints(q)
    assert q[0]["est_seconds"] == first
    assert q[1]["est_seconds"] == pytest.approx(second - M.checkpoint_save_seconds(q[1]), abs=0.1)


def test_request_kwargs_build_an_advisor_request(rows):
    from advisor.core.request import Request

    for r in rows:
        req = Request(**M.request_kwargs(r))
        assert req.model == r["model"] and req.seq_len == r["seq_len"] and req.gpus == 1
        if r["backend"] == "deepspeed":
            assert req.zero == r["zero"] and req.offload == r["offload"]


def test_validate_reports_bad_rows(rows):
    base = next(r for r in rows if r["trainer"] == "grpo")
    bad_gen = dict(base, micro_batch=6, num_generations=4)
    bad_gen["name"] = "bad-gen"
    qlora_ds = dict(next(r for r in rows if r["method"] == "qlora"), backend="deepspeed", zero=3)
    qlora_ds["name"] = "qlora-ds"
    kto_mb1 = dict(next(r for r in rows if r["trainer"] == "kto"), micro_batch=1, name="kto-mb1")
    bad_layers = dict(rows[0], layers=0, name="bad-layers")
    dup = dict(rows[0])
    problems = M.validate([bad_gen, qlora_ds, rows[0], dup, kto_mb1, bad_layers])
    text = "\n".join(problems)
    assert "kto-mb1: kto needs micro_batch >= 2" in text
    assert "bad-layers: layers must be a positive integer" in text
    assert "bad-gen: micro_batch * grad_accum must be divisible by num_generations" in text
    assert "qlora-ds: qlora is benchmarked on a single GPU only" in text
    assert f"duplicate name {rows[0]['name']}" in text


def test_select(rows):
    names = [rows[0]["name"], rows[5]["name"]]
    assert [r["name"] for r in M.select(rows, only=names)] == [rows[0]["name"], rows[5]["name"]]
    assert all(r["split"] == "holdout" for r in M.select(rows, split="holdout"))
    with pytest.raises(KeyError):
        M.select(rows, only=["no-such-row"])
