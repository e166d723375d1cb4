"""CPU Adam's rate per core (bench/offload_terms.py) and the host CPUs each benchmark row is predicted on."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.model import speed as S
from bench import accuracy as A
from bench import offload_terms as OT


@pytest.fixture(scope="module")
def offload_rows():
    return OT.offload_rows(A._prepared(A.build().rows))


def test_constants_are_their_derivation(offload_rows):
    core = OT.core_term(offload_rows)
    assert core is not None and S.CPU_ADAM_CORE_NS == pytest.approx(core, rel=0.01), (
        f"CPU_ADAM_CORE_NS {S.CPU_ADAM_CORE_NS} is no longer the core pairs' median {core}: "
        "set it from `python -m bench.offload_terms`")
    serial = OT.serial_term(offload_rows, core)
    assert serial is not None and S.CPU_ADAM_SERIAL_NS == pytest.approx(serial, rel=0.01), (
        f"CPU_ADAM_SERIAL_NS {S.CPU_ADAM_SERIAL_NS} is no longer the hosts' median {serial}")


def test_every_offload_row_names_its_host(offload_rows):
    assert offload_rows and all(r["cores"] for r in offload_rows)


def test_leave_one_host_out_matches_the_speed_note(offload_rows):
    """CPU_ADAM_SERIAL_NS's note quotes the held-out-host errors; they must stay what the data give."""
    import statistics

    got = OT.leave_one_host_out(offload_rows, S.CPU_ADAM_CORE_NS)
    errs = [abs(x["error"]) for x in got]
    assert len({x["file"] for x in got}) >= 3
    assert round(100 * statistics.median(errs)) == 8 and round(100 * max(errs)) == 39, (
        statistics.median(errs), max(errs))


def test_records_on_other_hosts_are_their_own_runs(offload_rows):
    """An offload configuration measured with 16 and with 8 CPUs is two runs, each predicted on its own CPUs."""
    names = {r["name"]: r for r in offload_rows}
    eight = names["sft-q3-1.7b-full-bf16-z3off-nockpt-s2048-b8@8cpu"]
    assert eight["cores"] == 8 and names["sft-q3-1.7b-full-bf16-z3off-nockpt-s2048-b8"]["cores"] == 16
    assert eight["cpu"] > names["sft-q3-1.7b-full-bf16-z3off-nockpt-s2048-b8"]["cpu"]
    # every record of a run is from hosts with the run's CPU count (record_cpu_cores of each record)
    import json

    cores_of = {}
    for rel in A.RESULTS:
        for line in (A.REPO / rel).read_text().splitlines():
            rec = json.loads(line)
            if rec.get("status") == "ok" and (rec.get("row") or {}).get("offload", "none") != "none":
                cores_of.setdefault(rel, {})[rec["name"]] = A.record_cpu_cores(rec)
    for r in offload_rows:
        for rel in r["records"]:
            assert cores_of[rel][r["base"]] == r["cores"], (r["name"], rel)


def test_implied_ns_recovers_a_known_rate():
    """A step predicted with CPU part c, measured as if the CPU step per parameter were twice the model's: the rest
    unchanged, the derivation reads off twice the model's ns per parameter."""
    rest, cpu, cores = 0.8, 1.2, 16
    in_use = S.cpu_optimizer_seconds_per_param(cores) * 1e9
    assert OT.implied_ns(rest + 2 * cpu, rest + cpu, cpu, cores) == pytest.approx(2 * in_use)
    assert OT.implied_ns(rest, rest + cpu, cpu, cores) is None  # nothing left for the CPU step to explain
    assert OT.implied_ns(1.0, 1.0, 0.0, cores) is None


def test_core_pair_recovers_a_known_split():
    """Two records of one configuration on 16 and 8 CPUs whose CPU step is exactly a + b / cores give back b."""
    a, b, params = 0.3, 4.0, 1e9
    rest = 0.5
    rows = []
    for cores, rel in ((16, "many"), (8, "few")):
        cpu_model = S.cpu_optimizer_seconds_per_param(cores) * params
        measured = rest + (a + b / cores) * 1e-9 * params
        rows.append({"name": f"x@{cores}cpu" if cores == 8 else "x", "base": "x", "split": "holdout",
                     "cores": cores, "stage": 3, "measured": measured, "predicted": rest + cpu_model,
                     "cpu": cpu_model, "rest": rest, "ns": None, "records": {rel: measured}})
    (pair,) = OT.core_pairs(rows, pairs=(("many", "few"),))
    assert pair["core_ns"] == pytest.approx(b)


def test_cpu_adam_follows_the_cores():
    """Half the cores, the cores' share of the CPU step twice: the target's cores reach the model."""
    from advisor.catalog import resolve_gpu, resolve_model
    from advisor.core.target import Target
    from advisor.model.bench_rows import plan_from_bench_row

    plan = plan_from_bench_row({"model": "qwen2.5-1.5b", "trainer": "sft", "method": "full", "seq_len": 2048,
                                "micro_batch": 4, "grad_accum": 1, "backend": "deepspeed", "zero": 3,
                                "offload": "optimizer", "grad_ckpt": True, "liger": False, "attn": "sdpa",
                                "precision": "bf16"})
    t16 = Target(gpu=resolve_gpu("H200"), gpus_per_node=1, nodes=1, cpu_cores=16)
    model = resolve_model("qwen2.5-1.5b")
    a = S.estimate_speed(model, plan, t16).breakdown["cpu_adam"]
    b = S.estimate_speed(model, plan, dataclasses.replace(t16, cpu_cores=32)).breakdown["cpu_adam"]
    params = 1_543_714_304  # Qwen2.5-1.5B, one GPU: the whole model is the partition
    assert a - b == pytest.approx(params * S.CPU_ADAM_CORE_NS * (1 / 16 - 1 / 32) * 1e-9, rel=0.02)


@pytest.mark.parametrize(("rec", "cores"), [
    ({"host_cpus": {"usable_cpus": 12}, "env": {"host_cpu": {"logical_cpus": 16}, "gpu": {"gpu_count": 1}}}, 12),
    ({"env": {"host_cpu": {"logical_cpus": 16}, "gpu": {"gpu_count": 2}}}, 16),
    ({"env": {"gpu": {"gpu_count": 2}}}, 32),
    ({"env": {"gpu": {"gpu_count": 1}}}, 16),
    ({"env": {"gpu": {"gpu_count": 8}}}, None),
    ({}, None),
])
def test_record_cpu_cores(rec, cores):
    assert A.record_cpu_cores(rec) == cores


def test_decomposition_finds_its_runs():
    """The ZeRO-3 decomposition names runs by name: a renamed run (another host's records) must not drop it."""
    rows = A.build().rows
    assert A._zero3_decomposition(rows).startswith(" Measured apart on one machine")
    assert A._step_in_file(rows, "sft-q1.5b-full-bf16-z3off-ckpt-s2048-b4@16cpu", A.OFFLOAD_HOST_1202)
