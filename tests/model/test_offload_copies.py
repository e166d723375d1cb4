"""DeepSpeed optimizer offload: the gradients' copies to the host per optimizer step, the gradients a micro-batch
that does not step keeps on the GPU, and overlap_comm as the bundles write it, the benchmark ran it and the model
reads it."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from advisor.bundle.read import parse_texts, plan_from_files
from advisor.bundle.render import ds_config, render_bundle
from advisor.catalog import resolve_gpu, resolve_model
from advisor.core.target import Target
from advisor.model import speed as S
from advisor.model import states as MS
from advisor.model.bench_rows import plan_from_bench_row
from advisor.model.dims import Precision, dims
from advisor.model.memory import estimate_memory
from bench import accuracy as A
from bench.memory_peak import live_at_peak
from bench.worker import deepspeed_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "generate"))
from gen_cases import plan as build_plan  # noqa: E402
from gen_cases import result  # noqa: E402

H200 = Target(gpu=resolve_gpu("H200"), gpus_per_node=1, nodes=1, cpu_cores=16)


def _offload(stage: int, ga: int, **kw):
    return build_plan(backend="deepspeed", zero_stage=stage, offload="optimizer", grad_accum=ga, **kw)


@pytest.mark.parametrize(("stage", "ga", "expected"), [(1, 1, 4), (1, 4, 4), (2, 1, 4), (2, 2, 10), (2, 4, 18),
                                                        (3, 1, 8), (3, 4, 20)])
def test_gradient_bytes_follow_deepspeeds_copies(stage, ga, expected):
    """Bytes per parameter both ways per optimizer step, as stage_1_and_2.py / stage3.py copy them (the function's
    note): ZeRO-2 2 B out and (but the first) 2 B back per micro-batch plus 4 B fp32 at the boundary; ZeRO-3 2 + 2 B
    per micro-batch plus the fp32 4 B; ZeRO-1 reduces once."""
    assert S.offload_gradient_bytes(_offload(stage, ga)) == expected


def test_copies_add_to_the_step_per_micro_batch():
    """Each micro-batch more costs its compute and its copies: the ZeRO-2 offload step grows by more than the
    micro-batch's GPU time would alone."""
    model = resolve_model("llama-3.2-1b")
    one, four = (S.estimate_speed(model, _offload(2, ga, micro_batch=8, grad_ckpt=True), H200) for ga in (1, 4))
    plain_one, plain_four = (S.estimate_speed(model, build_plan(backend="deepspeed", zero_stage=2, grad_accum=ga,
                                                                micro_batch=8, grad_ckpt=True), H200)
                             for ga in (1, 4))
    extra = (four.breakdown["offload_transfer"] - one.breakdown["offload_transfer"]) / 3
    # 18 B per parameter at grad_accum 4 against 4 B at 1, at the H200's PCIe 5 rate (50 GB/s)
    pcie = (18 - 4) * MS.trainable_params(dims(model), _offload(2, 4)) / 50e9 / 3
    assert extra == pytest.approx(pcie, rel=0.01)
    assert (four.step_seconds - one.step_seconds) > (plain_four.step_seconds - plain_one.step_seconds)


@pytest.fixture(scope="module")
def report_rows():
    return A.build().rows


def test_zero2_micro_batch_cost_matches_the_series(report_rows):
    """On the GA series' machine the predicted cost of a ZeRO-2 offload micro-batch is within 10 % of the measured
    one (docs/accuracy.md, optimizer offload with gradient accumulation)."""
    series = [x for x in A.offload_ga_series(report_rows) if x["stage"] == 2]
    assert len(series) >= 3
    for x in series:
        measured, predicted = x["slope"]
        assert predicted == pytest.approx(measured, rel=0.10), x["base"]


def test_stages_imply_the_same_serial_part(report_rows):
    """With the copies counted, ZeRO-2's and ZeRO-3's records of one host imply about the same serial CPU step
    (before, ZeRO-3's were 0.06-0.29 ns per parameter higher on every host that ran both)."""
    from bench import offload_terms as OT

    got = OT.offload_rows(A._prepared(report_rows))
    stages = A.stage_serial_by_host(got, S.CPU_ADAM_CORE_NS)
    assert len(stages) >= 5
    diffs = sorted(z3 - z2 for _, z2, z3 in stages)
    assert abs(diffs[len(diffs) // 2]) < 0.05


# ----------------------------------------------------------------------------------------------- held gradients

def test_held_gradients_only_with_accumulation_and_offload():
    d, model = dims(resolve_model("qwen2.5-1.5b")), resolve_model("qwen2.5-1.5b")
    pr = Precision.of(_offload(2, 2))
    assert MS.offload_held_gradient_bytes(d, _offload(2, 1), pr) == 0
    assert MS.offload_held_gradient_bytes(d, build_plan(backend="deepspeed", zero_stage=2, grad_accum=2), pr) == 0
    assert MS.offload_held_gradient_bytes(d, _offload(3, 2), pr) == 0
    held = MS.offload_held_gradient_bytes(d, _offload(2, 2), pr)
    # the MLP's three Linears per layer and the tied embedding, 16-bit; the attention's are within a bucket
    mlp = 3 * model.hidden * model.intermediate * model.layers
    assert held == (mlp + model.vocab * model.hidden) * 2
    assert estimate_memory(model, _offload(2, 2, micro_batch=4, grad_ckpt=True), H200).phase == "late-backward"


def test_memory_history_rows_are_predicted(report_rows):
    """The accumulating ZeRO-2 offload rows whose peak the allocator's history explained are within 3 %."""
    by = {e.run.name: e for e in report_rows if e.run.status == "ok"}
    names = ["sft-l1b-full-bf16-z2off-ckpt-s2048-b8-ga4", "sft-q1.5b-full-bf16-z2off-ckpt-s2048-b4-ga4"]
    for n in names:
        assert abs(by[n].err_allocated) < 0.03, (n, by[n].err_allocated)


def test_live_at_peak_replays_alloc_and_free():
    trace = [{"action": "alloc", "addr": 1, "size": 100, "frames": [{"filename": "x/deepspeed/a.py", "line": 3,
                                                                    "name": "f"}]},
             {"action": "alloc", "addr": 2, "size": 50, "frames": []},
             {"action": "free_completed", "addr": 1, "size": 100},
             {"action": "alloc", "addr": 3, "size": 120, "frames": []},
             {"action": "free_completed", "addr": 2, "size": 50}]
    got = live_at_peak({"device_traces": [trace]})
    assert got["peak_bytes_above_start"] == 170
    assert [x["bytes"] for x in got["largest"]] == [120, 50]
    first = live_at_peak({"device_traces": [trace[:2]]})
    assert first["largest"][0]["frames"] == ["x/deepspeed/a.py:3 f"]  # library frames only, site-packages dropped


# ----------------------------------------------------------------------------------------------- overlap_comm

def test_bundle_writes_the_plans_overlap_comm():
    for overlap in (True, False):
        p = dataclasses.replace(_offload(2, 2), overlap_comm=overlap)
        assert ds_config(p)["zero_optimization"]["overlap_comm"] is overlap


def test_benchmark_rows_read_back_as_the_worker_ran_them():
    """The model predicts a benchmark row with the overlap_comm bench.worker wrote into its DeepSpeed config."""
    for zero in (1, 2, 3):
        row = {"backend": "deepspeed", "zero": zero, "offload": "optimizer", "seq_len": 1024, "micro_batch": 2,
               "trainer": "sft", "method": "full", "precision": "bf16"}
        assert plan_from_bench_row(row).overlap_comm is deepspeed_config(row)["zero_optimization"]["overlap_comm"]
        pinned = {**row, "overlap_comm": zero != 3}
        assert plan_from_bench_row(pinned).overlap_comm is deepspeed_config(pinned)["zero_optimization"][
            "overlap_comm"]


def _read_back(p, edit):
    model = resolve_model("qwen2.5-7b")
    target = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=p.gpus_per_node, nodes=p.nodes)
    files = render_bundle(p, model, target, result(p))
    ds = json.loads(files["ds_config.json"])
    edit(ds["zero_optimization"])
    files["ds_config.json"] = json.dumps(ds)
    return plan_from_files(parse_texts(files), model, target)


@pytest.mark.parametrize(("stage", "edit", "expected"), [
    (2, lambda z: None, True),  # as generated
    (2, lambda z: z.update(overlap_comm=False), False),
    (2, lambda z: z.pop("overlap_comm"), False),  # DeepSpeed's default below stage 3
    (3, lambda z: z.pop("overlap_comm"), True),
])
def test_check_reads_overlap_comm_from_the_files(stage, edit, expected):
    p = build_plan(backend="deepspeed", zero_stage=stage, num_processes=8, gpus_per_node=8, method="lora")
    assert _read_back(p, edit).overlap_comm is expected


def test_zero2_reduce_in_series_without_overlap_comm():
    model = resolve_model("qwen2.5-7b")
    t = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=8, nodes=1)
    on = build_plan(backend="deepspeed", zero_stage=2, num_processes=8, gpus_per_node=8, grad_accum=1)
    off = dataclasses.replace(on, overlap_comm=False)
    assert S.estimate_speed(model, off, t).breakdown["communication"] > S.estimate_speed(model, on, t).breakdown[
        "communication"]


def test_held_gradients_of_a_moe_count_its_fused_experts():
    """A MoE layer's experts are two 3-D parameters (gate_up, down), each larger than a reduce bucket."""
    model = resolve_model("qwen3-30b-a3b")
    d = dims(model)
    p = _offload(2, 2)
    held = MS.offload_held_gradient_bytes(d, p, Precision.of(p))
    experts = 3 * model.hidden * model.moe_intermediate * model.num_experts * model.layers * 2
    # plus its untied embedding and LM head, and q_proj / o_proj (2048 x 4096, larger than a 2048^2 bucket)
    others = 2 * d.embed * 2 + model.layers * 2 * model.hidden * model.heads * model.head_dim * 2
    assert held == experts + others
    assert MS.offload_held_gradient_bytes(d, _offload(1, 2), Precision.of(p)) == 0  # ZeRO-1 keeps them anyway
