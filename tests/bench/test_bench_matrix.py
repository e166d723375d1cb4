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
    assert {r["trainer"] for r in holdout} == {"sft", "dpo", "grpo"}


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

    assert values("model") == set(M.MODELS)
    assert values("method") == {"full", "lora", "qlora"}
    assert values("trainer") == {"sft", "dpo", "grpo"}
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
    grpo = [r for r in rows if r["trainer"] == "grpo"]
    assert {r["beta"] for r in grpo} == {0.0, 0.04}
    assert {r["num_generations"] for r in grpo} == {4, 8}
    assert all(r["method"] == "full" and r["backend"] == "single" for r in grpo)
    assert all(128 <= r["max_completion_len"] <= 512 for r in grpo)
    assert {128, 512} <= {r["max_completion_len"] for r in grpo}
    for r in grpo:  # GRPOConfig rule: generation batch divisible by num_generations (one process)
        assert (r["micro_batch"] * r["grad_accum"]) % r["num_generations"] == 0


def test_rows_near_the_limit_and_expected_ooms(rows):
    near = [r for r in rows if r["expect"] == "near"]
    assert len(near) >= 4
    for r in near:
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
    assert rows[0]["model"] == "qwen2.5-0.5b"


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
    dup = dict(rows[0])
    problems = M.validate([bad_gen, qlora_ds, rows[0], dup])
    text = "\n".join(problems)
    assert "bad-gen: micro_batch * grad_accum must be divisible by num_generations" in text
    assert "qlora-ds: qlora is benchmarked on a single GPU only" in text
    assert f"duplicate name {rows[0]['name']}" in text


def test_select(rows):
    names = [rows[0]["name"], rows[5]["name"]]
    assert [r["name"] for r in M.select(rows, only=names)] == [rows[0]["name"], rows[5]["name"]]
    assert all(r["split"] == "holdout" for r in M.select(rows, split="holdout"))
    with pytest.raises(KeyError):
        M.select(rows, only=["no-such-row"])
