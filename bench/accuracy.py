"""The accuracy report: the memory and speed model against every measured run, next to accelerate's and DeepSpeed's
estimators.

    python -m bench.accuracy            # print the report (markdown) to stdout
    python -m bench.accuracy --write    # regenerate docs/accuracy.md and docs/accuracy.png
    python -m bench.accuracy --check    # exit 1 when docs/accuracy.md is not what the data and the model give now

Inputs: the benchmark records in RESULTS (bench/README.md: one JSON line per configuration; the last record of a name
counts; the plan-quality rows of bench.plan_quality among them), the spot measurements in SPOT
(tests/model/spot_measure.py), and the bundles `trl-advisor verify` ran (VERIFY, VERIFY_1201: reported apart, and
the 2026-12-01 ones counted in the near-capacity margin). Every "ok" row is compared on peak allocated
memory (torch.cuda.max_memory_allocated), peak reserved memory and median step time; "oom" rows are checked to be
predicted not to fit. Errors are predicted / measured - 1. Statistics are given per split: "fit" (the benchmark's fit
rows and the spot rows, the only rows the FITTED constants of advisor/model/calibration.py and advisor/model/speed.py were fitted on),
"holdout" (never used for fitting) and "all".

The output is deterministic (rows sorted, fixed float formats) so tests/model/test_accuracy.py can check that
docs/accuracy.md is current.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import statistics
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from advisor.catalog import match_nvml_name, resolve_gpu, resolve_model
from advisor.core.plan import Plan
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.model import calibration as MC
from advisor.model import dims as MD
from advisor.model import speed as S
from advisor.model import units as MU
from advisor.model.activations import fixed_length_batches
from advisor.model.bench_rows import plan_from_bench_row
from advisor.model.estimate import estimate_plan
from advisor.model.gkd import ON_POLICY_SHARE as GKD_ON_POLICY_SHARE
from advisor.model.speed import estimate_speed, host_bound_share
from bench import baselines as B


def measured_model(model_id: str) -> ModelSpec:
    """The model a benchmark row or a `verify --random-init` record ran: the catalogue's row as the random checkpoint
    builds it, the text decoder alone (ModelSpec.decoder_only: no image-text model's vision tower)."""
    return resolve_model(model_id).decoder_only()


REPO = Path(__file__).resolve().parents[1]
RESULTS = ("bench/results/h200-2026-11-29-part1.jsonl", "bench/results/h200x2-2026-11-29-part2.jsonl",
           "bench/results/h200-2026-12-01-part1.jsonl", "bench/results/h200-2026-12-01-part3.jsonl",
           "bench/results/plan-quality-h200-2026-12-01-part1.jsonl",
           "bench/results/plan-quality-h200-2026-12-01-part2.jsonl",
           "bench/results/h200-2026-12-01-part4.jsonl", "bench/results/plan-quality-h200-2026-12-01-part3.jsonl",
           "bench/results/h200-2026-12-01-grpo-rerun.jsonl", "bench/results/h200-2026-12-01-gen-a.jsonl",
           "bench/results/h200-2026-12-01-gen-b.jsonl", "bench/results/h200-2026-12-01-gen-validate.jsonl",
           "bench/results/h200-2026-12-01-gen-c.jsonl", "bench/results/h200-2026-12-01-host-bound-again.jsonl",
           "bench/results/h200-2026-12-01-remeasure-1.jsonl", "bench/results/h200-2026-12-01-remeasure-2.jsonl",
           "bench/results/h200-2026-12-01-z3off-again.jsonl", "bench/results/h200-2026-12-01-z3-decompose.jsonl",
           "bench/results/h200-2026-12-02-zero-hooks.jsonl", "bench/results/h200-2026-12-02-remeasure.jsonl",
           "bench/results/h200-2026-12-02-zero-hooks-2.jsonl", "bench/results/h200-2026-12-02-remeasure-2.jsonl",
           "bench/results/h200-2026-12-02-zero-lora.jsonl", "bench/results/h200-2026-12-02-zero-hooks-3.jsonl",
           "bench/results/h200-2026-12-02-zero-lora-memory.jsonl", "bench/results/h200-2026-12-02-zero-lora-2.jsonl",
           "bench/results/h200-2026-12-02-kernel-floor.jsonl", "bench/results/h200-2026-12-02-remeasure-3.jsonl",
           "bench/results/h200-2026-12-02-offload-16cpu.jsonl", "bench/results/h200-2026-12-02-offload-8cpu.jsonl",
           "bench/results/h200-2026-12-02-offload-stages.jsonl", "bench/results/h200-2026-12-02-offload-check.jsonl",
           "bench/results/phases-h200-2026-12-02.jsonl", "bench/results/h200-2026-12-02-family-check.jsonl",
           "bench/results/h200-2026-12-02-family-validate.jsonl", "bench/results/h200-2026-12-02-offload-again.jsonl",
           "bench/results/h200-2026-12-02-ckpt-validate.jsonl", "bench/results/h200-2026-12-02-profile-steps.jsonl",
           "bench/results/h200-2026-12-03-zero3-norms.jsonl", "bench/results/h200-2026-12-03-zero3-norms-2.jsonl",
           "bench/results/h200-2026-12-03-zero3-norms-3.jsonl", "bench/results/h200-2026-12-03-ckpt-overlap.jsonl",
           "bench/results/h200-2026-12-03-ckpt-overlap-2.jsonl", "bench/results/h200-2026-12-03-ckpt-overlap-3.jsonl",
           "bench/results/h200-2026-12-03-ckpt-overlap-4.jsonl", "bench/results/h200-2026-12-03-offload-ga.jsonl",
           "bench/results/h200-2026-12-03-offload-ga-2.jsonl", "bench/results/h200-2026-12-03-offload-ga-validate.jsonl",
           "bench/results/h200-2026-12-03-zero-step.jsonl")
"""Benchmark records (bench/README.md), in the order they were measured: the last record of a name counts for memory,
the median of its records for step time (step_of_records). The
plan-quality files (bench.plan_quality) are benchmark rows too: the planner's pick and its neighbours, each
measured like a calibration row; their names start with "pq-"."""
SPOT = "tests/model/data/h200_spot.jsonl"
VERIFY = "bench/results/verify-h200-2026-11-29.jsonl"
VERIFY_1201 = ("bench/results/verify-h200-2026-12-01-1157.jsonl", "bench/results/verify-h200-2026-12-01-1206.jsonl",
               "bench/results/verify-h200-2026-12-01-1214.jsonl", "bench/results/verify-h200-2026-12-01-1217.jsonl",
               "bench/results/verify-h200-2026-12-01-1442.jsonl", "bench/results/verify-h200-2026-12-01-1505-unsloth.jsonl",
               "bench/results/verify-h200-2026-12-01-1508-twin.jsonl", "bench/results/verify-h200-2026-12-01-1733.jsonl")
"""Bundles run by `trl-advisor verify` on one H200 on 2026-12-01 (bench/verify_runs.py records): planner-picked
plans, never used to fit or to derive a term; reported on their own and counted in the near-capacity margin."""
VERIFY_LATER = ("bench/results/verify-h200-2026-12-03-new-1.jsonl", "bench/results/verify-h200-2026-12-03-new-2.jsonl",
                "bench/results/verify-h200-2026-12-03-new-3.jsonl", "bench/results/verify-h200-2026-12-03-offload.jsonl",
                "bench/results/verify-h200-2026-12-03-zero.jsonl", "bench/results/verify-h100-2026-12-05-new.jsonl",
                "bench/results/verify-h100-2026-12-05-new-2.jsonl", "bench/results/verify-h100-2026-12-05-new-3.jsonl",
                "bench/results/verify-h100-2026-12-06.jsonl", "bench/results/verify-h100-2026-12-06-zero3.jsonl",
                "bench/results/verify-h100-2026-12-06-again.jsonl", "bench/results/verify-h200-2026-12-06.jsonl",
                "bench/results/verify-h100-2026-12-06-third.jsonl",
                "bench/results/verify-h100-2026-12-06-as-generated.jsonl",
                "bench/results/verify-h100-2026-12-06-catalogue-1.jsonl",
                "bench/results/verify-h100-2026-12-06-catalogue-2.jsonl",
                "bench/results/verify-h100-2026-12-07-gkd.jsonl",
                "bench/results/verify-h100-2026-12-07-new-1.jsonl",
                "bench/results/verify-h100-2026-12-07-new-2.jsonl",
                "bench/results/verify-h100-2026-12-07-new-3.jsonl",
                "bench/results/verify-h200-2026-12-07-new-4.jsonl",
                "bench/results/verify-h100-2026-12-07-new-5.jsonl",
                "bench/results/verify-h100-2026-12-07-new-6.jsonl")
"""Every bundle verify ran after 2026-12-01: planner-picked plans of workloads no calibration row ran (the new-*
cases), the planner's offload and ZeRO bundles, and the same new cases planned for and run on one H100. None was used
to fit a constant; the GRPO/RLOO padding term was found on new-grpo-l1b's memory (docs/verify.md). Scored in issue
14's goals beside the 2026-12-01 bundles, and not counted in the near-capacity margin."""
FIXED_LENGTH_VERIFY = {("bench/results/verify-h200-2026-12-03-new-2.jsonl", "new-rloo-q3-0.6b")}
"""Verify records of a bundle whose synthetic prompts then had one length, estimated as they ran (fixed_length_batches):
the RLOO bundle of 2026-12-03 fed unpadded batches, and the bundles written since pad as real prompts do (commit
"The GRPO/RLOO padding estimate checked on one H100"); its 44.39 GiB peak is the fixed-length estimate's 44.44."""
DOC = "docs/accuracy.md"
PNG = "docs/accuracy.png"
GPU_ID = "H200"
GIB = 1 << 30
MIB = 1 << 20

NEAR_CAPACITY = 0.90
"""A run "came within 10% of the GPU's capacity" when its peak reserved memory reached 90% of what torch reports as
the GPU's total (torch.cuda.get_device_properties().total_memory, recorded per row as memory.torch_total_bytes)."""

# Targets (memory: peak allocated; time: median step seconds). Relative errors, as fractions.
MEMORY_MEDIAN_TARGET = 0.05
MEMORY_WORST_TARGET = 0.12
NEAR_CAPACITY_UNDER_TARGET = 0.05
TIME_MEDIAN_TARGET = 0.15

GOALS = {"memory_median": 0.03, "memory_worst": 0.08, "near_capacity_under": 0.03, "time_median": 0.07,
         "time_worst": 0.20}
"""Issue 14's goals, on runs the calibration never saw: peak memory median / worst |error|, the most under-predicted
run near capacity (never below -3 %), tokens/s median / worst |error| (step time here: the same ratio inverted)."""

BEFORE_ISSUE_14 = {
    "all": {"mem_median": 0.0208, "mem_worst": 0.176, "mem_under": -0.140, "near_under": -0.117, "time_median": 0.059,
            "time_worst": 0.465},
    "holdout": {"mem_median": 0.0227, "mem_worst": 0.176, "time_median": 0.078, "time_worst": 0.288},
    "verify": {"mem_median": 0.052, "mem_worst": 0.073, "time_median": 0.108, "time_worst": 0.333},
    "lofo": {"mem_median": 0.0208, "mem_worst": 0.176, "time_median": 0.090, "time_worst": 0.768},
    "margin_u": 0.100,
}
"""The same statistics with the model of commit 23ab5c9 (before issue 14's terms) on the same data: computed by this
module's functions on that commit's advisor package (`git archive 23ab5c9`), kept here for the closing note."""

SPLITS = ("fit", "holdout", "all")
DECODE_PROBE = "bench/results/decode-probe-h200-2026-12-01.json"
"""bench/decode_probe.py on one H200 (Qwen2.5-0.5B; its fourth case was cut by the command's time limit)."""
GENERATION_CHECK = "bench/rows/generation-validate-2026-12-01.json"
GENERATION_CHECK_THEN = {
    "grpo-l1b-full-bf16-single-ckpt-s1536-b8-g4c128-beta0": 2.688,
    "grpo-q3-1.7b-full-bf16-single-ckpt-s768-b16-g8c192-beta0": 7.556,
    "rloo-q1.5b-full-bf16-single-ckpt-s1024-b8-g4c64-beta0.05": 2.44,
    "grpo-q0.5b-full-bf16-single-nockpt-s2560-b8-g4c96-beta0": 2.816,
}
"""Step seconds the model of commit 33c721e predicted for the GRPO/RLOO rows of GENERATION_CHECK, written down before
they ran (holdout rows chosen to test the generation model on a family, completion count, trainer and prompt length
it had not been measured at)."""
SPREAD_WIDE = 0.40
"""A configuration whose records lie more than 40 % apart: no single prediction is within 18 % of both."""

NEAR_PLAN_FRACTION = 0.15
"""A plan is "predicted near capacity" when its predicted peak reserved is within 15 % of the usable memory
(capacity less the safety margin: reserved >= 85 % of reserved + headroom), the band where the planner's margin has
to come from the measured under-prediction (issue 14)."""
UNDER_QUANTILE = 0.95
"""The quantile of measured / predicted - 1 (peak reserved) over the near-capacity rows that the margin is read
from, by nearest rank: with fewer than 20 rows it is the largest under-prediction measured."""
LOFO_STEPS = (0.7, 0.85, 0.93, 0.97, 1.03, 1.07, 1.15, 1.4)
LOFO_ROUNDS = 3
"""Coordinate descent of the leave-one-family-out refit: multiplicative steps per constant and rounds (the
objective and start are the calibration's: mean |log(predicted / measured)| of step time, from the values in use;
tests/model/calibrate.py --coordinate)."""

# The FITTED constants and the values they had before this calibration (the seeds written with the model), with
# what each was fitted against. Values are read from the modules at report time.
FITTED: tuple[tuple[Any, str, Any, str, str], ...] = (
    (MC, "ACTIVATION_FACTOR", 1.0, "", "peak allocated (the fit gives 0.98-0.99; kept at 1.0, see the constant's note)"),
    (MC, "RUNTIME_ALLOCATED_BYTES", 160 * MIB, "bytes",
     "memory_allocated() after the last step minus weights and optimizer states (fit rows)"),
    (MC, "FRAGMENTATION", 0.10, "", "peak reserved (mean \\|log error\\|), one fraction shared with STATIC_SLACK"),
    (MC, "STATIC_SLACK", 0.01, "", "peak reserved, equal to FRAGMENTATION (see its note)"),
    (MC, "CUDA_CONTEXT_BYTES", 2 * GIB, "bytes", "NVML used minus max_memory_reserved (largest over the fit rows)"),
    (S, "LAUNCH_SECONDS", 35e-6, "s", "step time, jointly with the speed constants below (mean \\|log error\\|; "
     "refitted 2026-12-02 with the GPU rates measured by kernel, MEASURED)"),
    (S, "OVERLAP_P", float("inf"), "", "step time (joint fit; new: dispatch and GPU time overlap imperfectly, a smooth "
     "maximum; infinity is the max() used before)"),
    (S, "CKPT_LAYER_SECONDS", 3e-3, "s", "step time (joint fit; bench/dispatch_probe.py measures 2.74e-3: "
     "'Checkpointing's host cost' says why it stays fitted)"),
    (S, "DECODE_LAUNCH_SECONDS", 35e-6, "s", "step time (joint fit; new: the decode step used LAUNCH_SECONDS; "
     "refitted with GENERATE_CALL_SECONDS on the medians of the re-measured GRPO/RLOO rows)"),
    (S, "BNB_MATMUL_SECONDS", 0.0, "s", "step time (joint fit; new: QLoRA's per-call CPU cost was not counted)"),
    (S, "GENERATE_CALL_SECONDS", 0.4, "s", "step time (joint fit; new: a GRPO/RLOO generation round's fixed cost, "
     "seeded from the 0.5B GRPO rows' intercept)"),
    (S, "DS_FETCH_SECONDS", 4.3e-4, "s", "step time (fitted with DS_GRAD_HOOK_SECONDS, the other constants held; new: "
     "per parameter-holding module and pass, was per tensor, seeded from gpu-notes.md)"),
    (S, "DS_GRAD_HOOK_SECONDS", 4.5e-4, "s", "step time (fitted with DS_FETCH_SECONDS; both are now host dispatch that "
     "a GPU-bound micro-batch hides, were added to the step; seeded from gpu-notes.md)"),
)
UNCHANGED = ("MEM_BW_EFFICIENCY", "LIGER_KERNELS_FWD_PER_LAYER", "LIGER_KERNELS_BWD_PER_LAYER", "STEP_FIXED_SECONDS")
"""Speed constants left at their seeds: adding them to the joint fit lowered its objective (mean |log error| of
step time over the fit rows) by about 3%, too little to be worth more fitted values."""
MEASURED = ("MFU_CEILING", "HIDDEN_HALF", "TOKENS_HALF", "ATTENTION_EFFICIENCY", "ATTENTION_SEQ_HALF",
            "ATTENTION_HEAD_DIM_96", "ATTENTION_HEAD_DIM_128", "ATTENTION_HEAD_DIM_256", "ELEMENTWISE_BW_EFFICIENCY",
            "LORA_GEMM_BW_EFFICIENCY")
"""The speed model's GPU rates, read off profiled micro-batches by bench/kernel_terms.py (not fitted to step times;
tests/model/test_kernel_terms.py holds them to the derivation)."""
DISPATCH_MEASURED = ("CKPT_FORWARD_SHARE",)
"""Host-side constants read off bench/dispatch_probe.py's tiny micro-batches by bench/dispatch_terms.py (not fitted to
step times; tests/model/test_dispatch_terms.py holds them to the derivation)."""


# ---------------------------------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------------------------------
@dataclass
class Run:
    """One measured configuration, in the advisor's Request vocabulary plus the measurements."""

    name: str
    source: str  # "bench" | "spot"
    split: str  # "fit" | "holdout"
    status: str  # "ok" | "oom"
    knobs: dict[str, Any]
    peak_allocated: int
    peak_reserved: int
    step_seconds: float | None
    torch_total: int | None = None
    failed_request: int | None = None
    """OOM rows: bytes of the allocation that failed (from the error text)."""
    lora_dropout: float | None = None
    nvml_overhead: int | None = None
    """NVML's used memory minus max_memory_reserved (bench rows): the CUDA context and what the driver holds."""
    step_records: tuple[float, ...] = ()
    """Every measured record's median step time of this configuration, in the order measured (step_seconds is
    their median, step_of_records)."""
    step_files: tuple[str, ...] = ()
    """The results file of each of step_records (a comparison within one machine's round picks its records by file)."""
    cpu_cores: int | None = None
    """The host CPUs the run's process could use (record_cpu_cores): DeepSpeed's CPU Adam runs on them, so the run is
    predicted on a target with this many cores (Target.cpu_cores), as `generate` predicts the host it probes."""
    transformers: str | None = None
    """The transformers release the run's last record ran (its env.versions): the speed model's MoE term depends on
    it (advisor.model.speed.moe_sentinel_masks), so the run is predicted on a target that names it."""
    gpu: str | None = None
    """The catalogue GPU the run's last record names, when it is not the H200 every file of RESULTS ran on
    (OTHER_GPU_RESULTS): the run is predicted on that GPU."""

    def step_in(self, rel: str) -> float | None:
        """The step time this configuration's record in results file `rel` measured (the last, if several)."""
        # verify and spot runs name no results file: nothing matches
        got = [t for t, f in zip(self.step_records, self.step_files, strict=False) if f == rel]
        return got[-1] if got else None

    @property
    def step_spread(self) -> float | None:
        """Largest / smallest record's step time - 1: how far measurements of this one configuration lie apart."""
        r = self.step_records
        return max(r) / min(r) - 1 if len(r) > 1 else None


MACHINE_CORES = {1: 16, 2: 32}
"""Host CPUs of the H200 machines the benchmark ran on, by their GPU count: what every record that carries its host
(bench.host_probe.host_cpus, from 2026-12-01 on) measured there (16 usable CPUs on the 1-GPU machines; 32 on the 2-GPU
one, bench/host_probe.py). The earlier records name none."""


def host_run_name(name: str, cores: int) -> str:
    """The run of a configuration's records from a host with another CPU count than the one of its first record."""
    return f"{name}@{cores}cpu"


def _by_host(results: tuple[str, ...], root: Path) -> list[dict]:
    """Every record of the results files, in order, each with its file (`_file`). A ZeRO optimizer-offload row's step
    depends on the host's CPUs (advisor.model.speed.offload_seconds), so its records from a host with another CPU
    count than its first measured record's are renamed to their own run (host_run_name): a run pools only records the
    model predicts alike, and a name keeps its host as records are added. Other rows pool every record, whatever the
    host."""
    recs = []
    for rel in results:
        for rec in _read_jsonl(root / rel):
            rec["_file"] = rel
            recs.append(rec)
    first_cores: dict[str, int | None] = {}
    for rec in recs:
        if (rec.get("row") or {}).get("offload", "none") != "none" and rec.get("status") in ("ok", "oom"):
            first_cores.setdefault(rec["name"], record_cpu_cores(rec))
    for rec in recs:
        want = first_cores.get(rec["name"])
        cores = record_cpu_cores(rec) if rec["name"] in first_cores else None
        if want and cores and cores != want:
            rec["name"] = host_run_name(rec["name"], cores)
    return recs


def run_software(run: Run) -> dict[str, str]:
    """The software a run's target names: the transformers release it ran, where its record says."""
    return {"transformers": run.transformers} if run.transformers else {}


def record_gpu(rec: dict) -> str | None:
    """The catalogue id of the GPU a benchmark record ran on, from the name and memory NVML gave it; None for an
    H200 (GPU_ID, what the tables predict on) or a record that names none."""
    gpu = rec.get("gpu") or {}
    spec = match_nvml_name(gpu["name"], gpu.get("total_bytes")) if gpu.get("name") else None
    return spec.id if spec is not None and spec.id != GPU_ID else None


def record_cpu_cores(rec: dict) -> int | None:
    """The CPUs a benchmark record's process could use: its own host_cpus, else the host CPU count its env recorded,
    else the cores of a machine with its GPU count (MACHINE_CORES)."""
    cpus = (rec.get("host_cpus") or {}).get("usable_cpus")
    if cpus:
        return int(cpus)
    env = rec.get("env") or {}
    logical = (env.get("host_cpu") or {}).get("logical_cpus")
    if logical:
        return int(logical)
    return MACHINE_CORES.get((env.get("gpu") or {}).get("gpu_count"))


def step_of_records(records: list[float]) -> float | None:
    """A configuration's step time: the median over its records. A host-bound step (transformers' generate, small
    micro-batches) measured on two machines of one GPU kind, or twice on one, differs by up to 77 % (the
    reproducibility table of docs/accuracy.md), so one record is one draw; memory is deterministic and comes from
    the last record."""
    return statistics.median(records) if records else None


@dataclass
class Evaluated:
    run: Run
    model: ModelSpec
    pred_allocated: int
    pred_reserved: int
    pred_step: float
    fits: bool
    capacity: int
    phase: str
    accelerate: int | None
    deepspeed: int
    headroom: int = 0
    """Predicted usable memory left (capacity - safety margin - predicted reserved)."""
    host_share: float = 0.0
    """The share of the predicted step the host CPU sets (advisor.model.speed.host_bound_share)."""

    @property
    def family(self) -> str:
        """The architecture family: the model's model_type."""
        return self.model.model_type

    @property
    def usable(self) -> int:
        return self.pred_reserved + self.headroom

    @property
    def near_plan(self) -> bool:
        """Predicted within NEAR_PLAN_FRACTION of the usable memory (or over it)."""
        return self.usable > 0 and self.pred_reserved >= (1 - NEAR_PLAN_FRACTION) * self.usable

    @property
    def err_allocated(self) -> float:
        return self.pred_allocated / self.run.peak_allocated - 1

    @property
    def err_reserved(self) -> float:
        return self.pred_reserved / self.run.peak_reserved - 1

    @property
    def err_step(self) -> float | None:
        return self.pred_step / self.run.step_seconds - 1 if self.run.step_seconds else None

    @property
    def err_accelerate(self) -> float | None:
        return self.accelerate / self.run.peak_allocated - 1 if self.accelerate is not None else None

    @property
    def err_deepspeed(self) -> float:
        return self.deepspeed / self.run.peak_allocated - 1

    @property
    def demand_lower_bound(self) -> int:
        """OOM rows: allocated at the failure plus the failed request (what the run needed at least); else the peak."""
        return self.run.peak_allocated + (self.run.failed_request or 0)


def _evaluated(run, model, plan, mem, spd) -> Evaluated:
    """One run next to the model's prediction for its plan and the two baseline estimators'."""
    return Evaluated(
        run=run, model=model, pred_allocated=mem.per_gpu_peak_bytes, pred_reserved=mem.per_gpu_reserved_bytes,
        pred_step=spd.step_seconds, fits=mem.fits, capacity=mem.capacity_bytes, phase=mem.phase,
        accelerate=B.accelerate_estimate(model, plan.precision, plan.method),
        deepspeed=B.deepspeed_estimate(model, plan.backend, plan.zero_stage, plan.offload, plan.gpus_per_node,
                                       plan.nodes),
        headroom=mem.headroom_bytes, host_share=host_bound_share(plan, spd))


@dataclass
class Report:
    rows: list[Evaluated]
    not_measured: list[tuple[str, str, str, str]]
    """(name, split, status, reason) of bench rows that measured nothing (error, skipped, timeout)."""
    versions: dict[str, dict[str, str]]
    """Per results file: the versions its measured records give."""
    gpu: dict[str, Any]
    command: str
    spot_command: str
    excluded_spot: list[str] = field(default_factory=list)
    verify_rows: list[Evaluated] = field(default_factory=list)
    """The 2026-12-01 bundles run by verify (VERIFY_1201), split "verify": outside fit / holdout / all."""
    later_verify_rows: list[Evaluated] = field(default_factory=list)
    """The bundles verify ran after 2026-12-01 (VERIFY_LATER), split "verify", each predicted on its own GPU."""
    other_gpu_rows: list[Evaluated] = field(default_factory=list)
    """Benchmark runs on GPUs other than the H200 (OTHER_GPU_RESULTS), each predicted on its own GPU."""


_SIZE = re.compile(r"Tried to allocate ([0-9.]+) (GiB|MiB|KiB|B)")
_BUDGET = re.compile(r"> ([0-9.]+) s")


def _parse_request(error: str | None) -> int | None:
    m = _SIZE.search(error or "")
    if not m:
        return None
    unit = {"GiB": GIB, "MiB": MIB, "KiB": 1 << 10, "B": 1}[m.group(2)]
    return int(float(m.group(1)) * unit)


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load(results: tuple[str, ...] = RESULTS, spot: str = SPOT, root: Path = REPO) -> tuple[list[Run], dict]:
    """The measured runs (ok and oom) and what the report needs about the rest (records, env, budget)."""
    runs: list[Run] = []
    last: dict[str, dict] = {}
    steps: dict[str, list[float]] = {}
    files: dict[str, list[str]] = {}
    for rec in _by_host(results, root):
        rel = rec["_file"]
        if rec.get("status") in ("ok", "oom") or last.get(rec["name"], {}).get("status") not in ("ok", "oom"):
            # bench/README.md: the last record of a name counts, and a measured one over one that measured
            # nothing (a row skipped for a later run's budget keeps its earlier measurement)
            last[rec["name"]] = rec
        t = rec.get("timing") or {}
        if rec.get("status") == "ok" and t.get("median_step_seconds"):
            steps.setdefault(rec["name"], []).append(float(t["median_step_seconds"]))
            files.setdefault(rec["name"], []).append(rel)
    meta: dict[str, Any] = {"not_measured": [], "versions": {}, "gpu": {}, "budget": None, "steps": None,
                            "warmup": None, "excluded_spot": []}
    for name in sorted(last):
        rec = last[name]
        status = rec.get("status")
        row = rec.get("row") or {}
        split = rec.get("split") or row.get("split") or "fit"
        if status not in ("ok", "oom"):
            reason = rec.get("error") or rec.get("reason") or ""
            meta["not_measured"].append((name, split, status, reason.splitlines()[0] if reason else ""))
            if rec.get("reason") and meta["budget"] is None:
                b = _BUDGET.search(rec["reason"])
                meta["budget"] = b.group(1) if b else None
            continue
        mem = rec["memory"]
        lora = (rec.get("resolved") or {}).get("lora") or {}
        runs.append(Run(
            name=name, source="bench", split=split, status=status, knobs=row,
            peak_allocated=int(mem["peak_allocated_bytes"]), peak_reserved=int(mem["peak_reserved_bytes"]),
            step_seconds=step_of_records(steps.get(name, [])) if status == "ok" else None,
            step_records=tuple(steps.get(name, ())) if status == "ok" else (),
            step_files=tuple(files.get(name, ())) if status == "ok" else (),
            torch_total=mem.get("torch_total_bytes"),
            failed_request=_parse_request(rec.get("error")) if status == "oom" else None,
            lora_dropout=lora.get("lora_dropout"), cpu_cores=record_cpu_cores(rec),
            transformers=((rec.get("env") or {}).get("versions") or {}).get("transformers"),
            gpu=record_gpu(rec),
            nvml_overhead=(mem["nvml_used_peak_bytes"] - mem["peak_reserved_bytes"])
            if status == "ok" and mem.get("nvml_used_peak_bytes") else None))
        env = rec.get("env") or {}
        meta["versions"].setdefault(rec.get("_file"), {}).update(env.get("versions") or {})
        gpu = rec.get("gpu") or {}
        seen = {"name": gpu.get("name"), "driver": gpu.get("driver"), "capability": gpu.get("capability"),
                "torch_total_bytes": gpu.get("total_bytes"), "nvml_total_bytes": mem.get("nvml_total_bytes"),
                "torch_cuda": env.get("torch_cuda"), "python": env.get("python")}
        for key, value in seen.items():
            if value is not None and meta["gpu"].get(key) is None:
                meta["gpu"][key] = value
        meta["steps"], meta["warmup"] = env.get("steps", meta["steps"]), env.get("warmup", meta["warmup"])
    spot_torch_total = meta["gpu"].get("torch_total_bytes")
    for rec in _read_jsonl(root / spot):
        if rec.get("status", "ok") != "ok":
            continue
        if rec.get("use_reentrant"):
            # reentrant checkpointing is not a plan knob (TRL forces it only for ZeRO-3 + PEFT)
            meta["excluded_spot"].append(rec["name"])
            continue
        runs.append(Run(
            name=rec["name"], source="spot", split="fit", status="ok", knobs=rec,
            peak_allocated=int(rec["peak_allocated_bytes"]), peak_reserved=int(rec["peak_reserved_bytes"]),
            step_seconds=rec.get("step_seconds_median"), torch_total=spot_torch_total,
            lora_dropout=rec.get("lora_dropout")))
    return runs, meta


# ---------------------------------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------------------------------
@contextmanager
def _as_benchmarked(value: float | None):
    """A benchmark record's own conditions: the LoRA dropout the run used (PEFT's lora_dropout; advisor.model.memory
    assumes the generated bundle's 0.05) and its fixed-length batches (advisor.model.activations.fixed_length_batches:
    synthetic rows of seq_len tokens, GRPO/RLOO completions held at full length by min_new_tokens)."""
    old = MU.LORA_DROPOUT
    if value is not None:
        MU.LORA_DROPOUT = float(value)
    try:
        with fixed_length_batches():
            yield
    finally:
        MU.LORA_DROPOUT = old


def evaluate(runs: list[Run]) -> list[Evaluated]:
    gpu = resolve_gpu(GPU_ID)
    models: dict[str, ModelSpec] = {}
    out = []
    for run in runs:
        k = run.knobs
        key = (k["model"], k.get("layers"))
        model = models.get(key)
        if model is None:
            model = measured_model(k["model"])
            if k.get("layers"):
                model = model.with_(layers=int(k["layers"]))  # a reduced-depth row: predicted at its own depth
            models[key] = model
        plan = plan_from_bench_row(k)
        target = Target(gpu=resolve_gpu(run.gpu) if run.gpu else gpu, gpus_per_node=plan.gpus_per_node,
                        nodes=plan.nodes, cpu_cores=run.cpu_cores, software=run_software(run))
        with _as_benchmarked(run.lora_dropout):
            mem, spd = estimate_plan(model, plan, target)
        out.append(_evaluated(run, model, plan, mem, spd))
    order = {"fit": 0, "holdout": 1}
    out.sort(key=lambda e: (order.get(e.run.split, 2), e.run.status != "ok", e.run.source != "bench", e.run.name))
    return out


def load_verify_1201(paths: tuple[str, ...] = VERIFY_1201, root: Path = REPO) -> list[Evaluated]:
    """The verify records that trained or ran out of memory, each as an Evaluated row of split "verify": the plan
    read back from the bundle's files (verify's `plan`), predicted by the model in this commit on its GPU. The last
    record of a case counts (a budget-skipped case was run again in a later file); its step time is the median over
    the case's records of that same plan (step_of_records: a host-bound plan run again on another machine is another
    draw). Unsloth plans are left out: their
    estimate is declared an upper bound, not the calibrated model (advisor.model.calibration.UNSLOTH_UNMEASURED
    quotes their run; docs/verify.md shows it)."""
    from advisor.core.plan import Plan

    last: dict[tuple[str, str], dict] = {}
    every: dict[tuple[str, str], list[dict]] = {}
    for rel in paths:
        for rec in _read_jsonl(root / rel):
            v = rec.get("verify") or {}
            if (v.get("plan") or {}).get("unsloth"):
                continue
            m = v.get("measured") or {}
            if m and not m.get("tokens_per_second") and m.get("out_of_memory") is False:
                # failed before training for another reason (verify says which): neither a speed nor a demand
                # (records before verify recorded out_of_memory say None, and those that did not train ran out)
                continue
            if rec.get("status") == "ok" and v.get("plan") and m:
                rec = {**rec, "_fixed_length": (rel, rec["case"]) in FIXED_LENGTH_VERIFY}
                # a case run on two GPU kinds is two runs: each kind's plan and prediction are its own
                key = (rec["case"], rec.get("gpu") or "")
                last[key] = rec
                every.setdefault(key, []).append(rec)

    def plan_of(v: dict) -> Plan:
        return Plan(**{k: v["plan"][k] for k in Plan.__dataclass_fields__ if k in v["plan"]})

    out = []
    kinds = {gpu for _, gpu in last}
    for key in sorted(last):
        case = key[0] if len(kinds) == 1 else f"{key[0]} ({key[1]})"
        rec = last[key]
        v = rec["verify"]
        m = v["measured"]
        plan = plan_of(v)
        model = measured_model(rec["model"])
        target = Target(gpu=resolve_gpu(rec["gpu"]), gpus_per_node=plan.gpus_per_node, nodes=plan.nodes)
        steps = [x for r in every[key] if plan_of(r["verify"]) == plan
                 and (x := record_step_seconds(r, plan, model, target)) is not None]
        with fixed_length_batches() if rec["_fixed_length"] else contextlib.nullcontext():
            mem, spd = estimate_plan(model, plan, target)
        trained = bool(m.get("tokens_per_second"))
        knobs = {**v["plan"], "model": rec["model"]}
        run = Run(name=case, source="verify", split="verify", status="ok" if trained else "oom", knobs=knobs,
                  peak_allocated=int(m["per_gpu_peak_bytes"]), peak_reserved=int(m["per_gpu_reserved_bytes"]),
                  # verify's quick mode times micro-batches, not whole steps: the step time its tokens/s implies
                  step_seconds=step_of_records(steps) if trained else None,
                  step_records=tuple(steps) if trained else (),
                  torch_total=(rec.get("memory") or {}).get("torch_total_bytes"))
        out.append(_evaluated(run, model, plan, mem, spd))
    return out


def build(results: tuple[str, ...] = RESULTS, spot: str = SPOT, root: Path = REPO) -> Report:
    runs, meta = load(results, spot, root)
    rows = evaluate(runs)
    steps, warmup = meta["steps"], meta["warmup"]
    extra = ""
    if steps not in (None, 3):
        extra += f" --steps {steps}"
    if warmup not in (None, 1):
        extra += f" --warmup {warmup}"
    budget = f" --budget-seconds {meta['budget']}" if meta["budget"] else ""
    command = f"PYTHONUNBUFFERED=1 python -m bench.run --out {RESULTS[0]}{budget}{extra}"
    spot_names = " ".join(sorted({e.run.name for e in rows if e.run.source == "spot"} | set(meta["excluded_spot"])))
    spot_command = f"python tests/model/spot_measure.py {SPOT} {spot_names}"
    return Report(rows=rows, not_measured=meta["not_measured"], versions=meta["versions"], gpu=meta["gpu"],
                  command=command, spot_command=spot_command, excluded_spot=meta["excluded_spot"],
                  verify_rows=load_verify_1201(root=root) if root == REPO else [],
                  later_verify_rows=load_verify_1201(VERIFY_LATER, root=root) if root == REPO else [],
                  other_gpu_rows=other_gpu_rows(root=root) if root == REPO else [])


def in_split(e: Evaluated, split: str) -> bool:
    return split == "all" or e.run.split == split


def near_capacity(e: Evaluated) -> bool:
    """The run reached 90% of the GPU's memory: an OOM row, or an ok row whose peak reserved did."""
    if e.run.status == "oom":
        return True
    return bool(e.run.torch_total) and e.run.peak_reserved >= NEAR_CAPACITY * e.run.torch_total


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def split_stats(rows: list[Evaluated], split: str) -> dict[str, Any]:
    """The report's statistics for one split (None where no row qualifies)."""
    ok = [e for e in rows if in_split(e, split) and e.run.status == "ok"]
    oom = [e for e in rows if in_split(e, split) and e.run.status == "oom"]
    mem = [abs(e.err_allocated) for e in ok]
    res = [abs(e.err_reserved) for e in ok]
    steps = [abs(e.err_step) for e in ok if e.err_step is not None]
    near = [e for e in ok if near_capacity(e)]
    # near capacity: ok rows against their peak; OOM rows against the least they needed (peak + failed request)
    near_err = [e.err_allocated for e in near] + [e.pred_allocated / e.demand_lower_bound - 1 for e in oom]
    acc_near = [e.err_accelerate for e in near if e.err_accelerate is not None] + \
        [e.accelerate / e.demand_lower_bound - 1 for e in oom if e.accelerate is not None]
    ds_near = [e.err_deepspeed for e in near] + [e.deepspeed / e.demand_lower_bound - 1 for e in oom]
    acc = [abs(e.err_accelerate) for e in ok if e.err_accelerate is not None]
    ds = [abs(e.err_deepspeed) for e in ok]
    worst = max(ok, key=lambda e: abs(e.err_allocated)) if ok else None
    worst_t = max((e for e in ok if e.err_step is not None), key=lambda e: abs(e.err_step), default=None)
    return {
        "n": len(ok), "n_oom": len(oom), "n_near_ok": len(near),
        "mem_median": _median(mem), "mem_worst": max(mem) if mem else None,
        "mem_worst_row": worst.run.name if worst else None,
        "mem_under": min((e.err_allocated for e in ok), default=None),
        "near_worst_under": min(near_err) if near_err else None,
        "res_median": _median(res), "res_worst": max(res) if res else None,
        "time_n": len(steps), "time_median": _median(steps), "time_worst": max(steps) if steps else None,
        "time_worst_row": worst_t.run.name if worst_t else None,
        "acc_n": len(acc), "acc_median": _median(acc), "acc_worst": max(acc) if acc else None,
        "acc_under": sum(1 for e in ok if e.err_accelerate is not None and e.err_accelerate < 0),
        "acc_near_under": min(acc_near) if acc_near else None, "ds_near_under": min(ds_near) if ds_near else None,
        "ds_n": len(ds), "ds_median": _median(ds), "ds_worst": max(ds) if ds else None,
        "ds_under": sum(1 for e in ok if e.err_deepspeed < 0),
        "fits_ok": sum(1 for e in ok if e.fits), "fits_oom": sum(1 for e in oom if not e.fits),
    }


def targets(stats: dict[str, Any]) -> dict[str, tuple[float | None, bool | None]]:
    """Each target: (the statistic, met?); (None, None) where no row qualifies."""
    near = stats["near_worst_under"]
    return {
        "memory_median": (stats["mem_median"], None if stats["mem_median"] is None
                          else stats["mem_median"] <= MEMORY_MEDIAN_TARGET),
        "memory_worst": (stats["mem_worst"], None if stats["mem_worst"] is None
                         else stats["mem_worst"] <= MEMORY_WORST_TARGET),
        "near_capacity_under": (near, None if near is None else near >= -NEAR_CAPACITY_UNDER_TARGET),
        "time_median": (stats["time_median"], None if stats["time_median"] is None
                        else stats["time_median"] <= TIME_MEDIAN_TARGET),
    }


def goals(rows: list[Evaluated]) -> dict[str, tuple[float | None, bool | None]]:
    """Issue 14's goals (GOALS) on a set of runs: each (the statistic, met?)."""
    ok = [e for e in rows if e.run.status == "ok"]
    oom = [e for e in rows if e.run.status == "oom" and e.run.source != "verify"]
    mem = [abs(e.err_allocated) for e in ok]
    step = [abs(e.err_step) for e in ok if e.err_step is not None]
    near = [e.err_allocated for e in ok if near_capacity(e) or e.near_plan] + \
        [e.pred_allocated / e.demand_lower_bound - 1 for e in oom]
    stat = {"memory_median": _median(mem), "memory_worst": max(mem) if mem else None,
            "near_capacity_under": min(near) if near else None, "time_median": _median(step),
            "time_worst": max(step) if step else None}
    out = {}
    for key, value in stat.items():
        if value is None:
            out[key] = (None, None)
        elif key == "near_capacity_under":
            out[key] = (value, value >= -GOALS[key])
        else:
            out[key] = (value, value <= GOALS[key])
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Leave one family out
# ---------------------------------------------------------------------------------------------------------------------
def _speed_constants() -> list[str]:
    return [name for mod, name, *_ in FITTED if mod is S]


def _prepared(rows: list[Evaluated]) -> list[tuple[Evaluated, Any, Any, Any]]:
    """(row, plan, target, memory estimate) of every ok run with a step time: the memory estimate does not depend on
    the speed constants, so a refit re-runs only estimate_speed."""
    gpu = resolve_gpu(GPU_ID)
    out = []
    for e in rows:
        if e.run.status != "ok" or not e.run.step_seconds:
            continue
        plan = plan_from_bench_row(e.run.knobs)
        target = Target(gpu=gpu, gpus_per_node=plan.gpus_per_node, nodes=plan.nodes, cpu_cores=e.run.cpu_cores,
                        software=run_software(e.run))
        with _as_benchmarked(e.run.lora_dropout):
            from advisor.model.memory import estimate_memory

            mem = estimate_memory(e.model, plan, target)
        out.append((e, plan, target, mem))
    return out


def _step_errors(prepared) -> list[float]:
    errs = []
    for e, plan, target, mem in prepared:
        with _as_benchmarked(e.run.lora_dropout):
            errs.append(estimate_speed(e.model, plan, target, mem).step_seconds / e.run.step_seconds - 1)
    return errs


def _mean_log(prepared) -> float:
    import math

    errs = _step_errors(prepared)
    return sum(abs(math.log1p(x)) for x in errs) / len(errs) if errs else float("inf")


def refit_speed(prepared) -> dict[str, float]:
    """The speed constants that minimise the mean |log error| of step time over `prepared`, by coordinate descent
    from their current values (LOFO_STEPS, LOFO_ROUNDS); the module is left as it was."""
    names = _speed_constants()
    start = {n: getattr(S, n) for n in names}
    try:
        best = _mean_log(prepared)
        for _ in range(LOFO_ROUNDS):
            moved = False
            for n in names:
                v0 = getattr(S, n)
                for f in LOFO_STEPS:
                    setattr(S, n, type(v0)(v0 * f))
                    score = _mean_log(prepared)
                    if score < best - 1e-12:
                        best, v0, moved = score, type(v0)(v0 * f), True
                setattr(S, n, v0)
            if not moved:
                break
        return {n: getattr(S, n) for n in names}
    finally:
        for n, v in start.items():
            setattr(S, n, v)


def leave_one_family_out(rows: list[Evaluated]) -> list[dict[str, Any]]:
    """Per model family F (model_type): the errors on F's runs, every split, with the speed constants refitted on the
    fit runs of the other families only, next to the errors with the constants as fitted. Peak allocated needs no
    refit: no fitted memory constant is a per-family term (ACTIVATION_FACTOR is held at 1.0, and
    RUNTIME_ALLOCATED_BYTES is the largest runtime residue over the fit runs, a few MiB against GiB peaks)."""
    prepared = _prepared(rows)
    out = []
    for fam in sorted({e.family for e in rows}):
        mine = [e for e in rows if e.family == fam and e.run.status == "ok"]
        test = [p for p in prepared if p[0].family == fam]
        train = [p for p in prepared if p[0].family != fam and p[0].run.split == "fit"]
        entry: dict[str, Any] = {
            "family": fam, "n": len(mine), "n_oom": sum(1 for e in rows if e.family == fam and e.run.status == "oom"),
            "models": sorted({e.model.id + (f" (L{e.model.layers})" if e.run.knobs.get("layers") else "")
                              for e in rows if e.family == fam}),
            "n_train": len(train),
            "mem": [e.err_allocated for e in mine],
            "step_as_fitted": _step_errors(test),
            "step_lofo": None, "constants": None,
        }
        if train and test:
            refit = refit_speed(train)
            old = {n: getattr(S, n) for n in refit}
            try:
                for n, v in refit.items():
                    setattr(S, n, v)
                entry["step_lofo"] = _step_errors(test)
            finally:
                for n, v in old.items():
                    setattr(S, n, v)
            entry["constants"] = refit
        out.append(entry)
    return out


# ---------------------------------------------------------------------------------------------------------------------
# Near capacity: the measured under-prediction the planner's margin comes from
# ---------------------------------------------------------------------------------------------------------------------
def nearest_rank(values: list[float], q: float) -> float | None:
    """The q-quantile by nearest rank (the smallest value with at least q of the values at or below it)."""
    if not values:
        return None
    import math

    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def near_plan_distribution(rows: list[Evaluated], verify: list[Evaluated] | None = None) -> dict[str, Any]:
    """Runs predicted within NEAR_PLAN_FRACTION of the usable memory: under-prediction u = measured / predicted - 1
    (positive: the run needed more than predicted) of peak reserved (what the planner compares with its limit) and
    peak allocated; the UNDER_QUANTILE of u on reserved, and the margin it implies: a plan predicted at R with
    R * (1 + u) <= usable needs R <= usable / (1 + u), i.e. u / (1 + u) of the usable memory kept free. OOM runs so
    predicted count with their demand lower bound (allocated at the failure plus the failed request) against the
    predicted allocated peak: u at least that. `verify`: the bundles verify ran (VERIFY_1201), counted like the
    benchmark rows."""
    rows = list(rows) + [e for e in verify or [] if e.run.status == "ok"]  # a verify OOM has no measured demand
    ok = [e for e in rows if e.run.status == "ok" and e.near_plan]
    oom = [e for e in rows if e.run.status == "oom" and (e.near_plan or e.fits)]
    u_res = [e.run.peak_reserved / e.pred_reserved - 1 for e in ok]
    u_alloc = [e.run.peak_allocated / e.pred_allocated - 1 for e in ok]
    u_oom = [e.demand_lower_bound / e.pred_allocated - 1 for e in oom]
    q = nearest_rank(u_res, UNDER_QUANTILE)
    margin = max(0.0, q / (1 + q)) if q is not None else None
    usable = statistics.median([e.usable for e in ok]) if ok else None
    return {"ok": sorted(ok, key=lambda e: e.run.name), "oom": sorted(oom, key=lambda e: e.run.name),
            "u_reserved": u_res, "u_allocated": u_alloc, "u_oom": u_oom, "quantile": q, "margin": margin,
            "usable": usable}


# ---------------------------------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------------------------------
def _pct(x: float | None, signed: bool = True) -> str:
    if x is None:
        return "n/a"
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def _gib(n: int | None) -> str:
    return "N/A" if n is None else f"{n / GIB:.2f}"


def _secs(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def config_summary(k: dict[str, Any]) -> str:
    """A short description of a run's knobs."""
    method = k.get("method", "full")
    if method in ("lora", "qlora"):
        method += f" r{k.get('lora_r') or 16}"
    backend = k.get("backend", "single")
    zero = k.get("zero_stage", k.get("zero"))
    if backend == "deepspeed":
        backend = f"ZeRO-{zero}" + (f"+{k['offload']} offload" if k.get("offload", "none") != "none" else "")
    model = k["model"] + (f" (L{k['layers']})" if k.get("layers") else "")
    parts = [k.get("trainer", "sft"), model, method, k.get("precision", "bf16"), backend,
             "ckpt" if k.get("grad_ckpt", True) else "no ckpt"]
    if k.get("attn") not in (None, "sdpa"):
        parts.append(str(k["attn"]))
    if k.get("liger"):
        parts.append("liger")
    shape = f"s{k['seq_len']}×b{k['micro_batch']}"
    if int(k.get("grad_accum") or 1) > 1:
        shape += f"×ga{k['grad_accum']}"
    parts.append(shape)
    if k.get("trainer") in ("grpo", "rloo"):
        parts.append(f"G{k.get('num_generations')} c{k.get('max_completion_len')} β{k.get('beta') or 0:g}")
    if k.get("trainer") in ("dpo", "kto"):
        parts.append(f"ref {k.get('ref_model') or 'none'}")
    if k.get("lora_dropout") == 0:
        parts.append("dropout 0")
    return " ".join(str(p) for p in parts)


def _fmt_value(value: Any, unit: str) -> str:
    if unit == "bytes":
        return f"{value / MIB:g} MiB"
    if unit == "s":
        return f"{value:.3g} s"
    return f"{value:g}"


def _target_cell(value: float | None, met: bool | None, *, signed: bool = False) -> str:
    if met is None:
        return "no qualifying row"
    return f"{'met' if met else '**NOT met**'} ({_pct(value, signed)})"


def verify_runs(path: str = VERIFY, root: Path = REPO) -> list[dict[str, Any]]:
    """The bundles `trl-advisor verify` ran on GPUs: each record with what the model predicts for its plan now."""
    from advisor.core.plan import Plan

    out = []
    for rec in _read_jsonl(root / path):
        plan = Plan(**{k: rec["plan"][k] for k in Plan.__dataclass_fields__ if k in rec["plan"]})
        target = Target(gpu=resolve_gpu(rec["gpu"]), gpus_per_node=plan.gpus_per_node, nodes=plan.nodes)
        mem, spd = estimate_plan(measured_model(rec["model"]), plan, target)
        out.append({**rec, "predicted_now": {"per_gpu_peak_bytes": mem.per_gpu_peak_bytes, "fits": mem.fits,
                                             "tokens_per_second": spd.tokens_per_second}})
    return out


def _plan_summary(p: dict[str, Any]) -> str:
    backend = {"single": "1 GPU", "ddp": "DDP", "fsdp2": "FSDP2"}.get(p["backend"], f"ZeRO-{p['zero_stage']}")
    parts = [backend, p["trainer"], p["method"], f"mb {p['micro_batch']} x ga {p['grad_accum']}",
             f"seq {p['seq_len']}"]
    parts += [x for x, on in (("grad-ckpt", p["grad_ckpt"]), ("liger", p["liger"])) if on]
    return ", ".join(parts)


def _verify_section(w) -> None:
    runs = verify_runs()
    w("## Bundles run by `trl-advisor verify`")
    w("")
    w(f"From `{VERIFY}`: bundles written by `trl-advisor generate` (the planner's pick unless the command pins a "
      "knob) and run unchanged by `trl-advisor verify BUNDLE --random-init --synthetic-data` on one or two H200s "
      "(transformers 5.24.0, the bundles' pin). Peak is the largest `max_memory_allocated` over the ranks; tokens/s "
      "over the steps after the first. \"Then\" is what the bundle predicted when it ran; \"now\" is the model in "
      "this commit for the same plan (the FSDP2 and ZeRO corrections these runs and the rows above led to).")
    w("")
    w("| case | GPUs | plan | verify | peak measured | predicted then (err) | predicted now (err) | tokens/s measured | "
      "predicted then (err) | predicted now (err) |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        m, then, now = r["measured"], r["predicted_then"], r["predicted_now"]
        run = r["steps"].get("run", {})
        run_ok = run.get("status") == "pass"
        oom = not run_ok and "OutOfMemoryError" in run.get("detail", "")
        peak = m.get("per_gpu_peak_bytes") if run_ok else None
        tps = m.get("tokens_per_second") if run_ok else None

        def cell(pred, meas, fmt):
            if pred is None:
                return "-"
            err = f" ({_pct(pred / meas - 1)})" if meas else ""
            return fmt(pred) + err

        status = "passed" if r["passed"] else ("failed: " + (r.get("note") or "see the record"))
        w(f"| {r['case']} | {r['gpus']} | {_plan_summary(r['plan'])} | {status} | "
          f"{_gib(peak) if peak else 'out of memory' if oom else '-'} | "
          f"{cell(then.get('per_gpu_peak_bytes'), peak, _gib)} | "
          f"{cell(now['per_gpu_peak_bytes'], peak, _gib)}{'' if now['fits'] else ' (does not fit)'} | "
          f"{f'{tps:,.0f}' if tps else '-'} | {cell(then.get('tokens_per_second'), tps, lambda x: f'{x:,.0f}')} | "
          f"{cell(now['tokens_per_second'], tps, lambda x: f'{x:,.0f}')} |")
    w("")
    w("What these runs found: accelerate 1.15 upcasts every trainable parameter to fp32 before FSDP2's "
      "`fully_shard` whenever mixed precision is on (`fsdp2_prepare_model`), so an FSDP2 plan holds fp32 weights, "
      "gradients and AdamW states (16 bytes per parameter, sharded), not 8: the planner's first pick for DPO 8B on "
      "two GPUs (FSDP2, micro-batch 8) ran out of memory. With that corrected the planner picks DDP, which "
      "measured within 1.1 %. The FSDP2 plan pinned at micro-batch 4 is still under-predicted by 17 % with the "
      "correction (133 GiB measured, 110 GiB predicted): after setup it held the predicted 24 GiB and its AdamW states the "
      "predicted 30 GiB, so the gap is in the forward and backward (79 GiB against 58 GiB predicted). Part of it is "
      "the reference: TRL shards it with prepare_fsdp, fully_shard on the root module alone, so each of its "
      "forwards gathers the whole model on every GPU (`fsdp2_frozen_gather_bytes`, counted since: the "
      "\"predicted now\" column). The rest is not explained yet: until a term explains it, FSDP2 plans keep "
      f"{100 * MC.FSDP2_UNEXPLAINED_MARGIN_FRACTION:.0f} % of the GPU as extra headroom "
      "(`FSDP2_UNEXPLAINED_MARGIN_FRACTION`, rule MEM006), so the planner would not pick that plan again at "
      "micro-batch 4.")
    w("")


def _issue14_section(w, report: Report) -> None:
    """The closing note: what issue 14 changed, and its figures before and after."""
    rows = report.rows
    st = split_stats(rows, "all")
    ho = split_stats(rows, "holdout")
    ver = goals(report.verify_rows)
    lofo = leave_one_family_out(rows)
    l_mem = [x for f in lofo for x in f["mem"]]
    l_step = [x for f in lofo for x in (f["step_lofo"] if f["step_lofo"] is not None else f["step_as_fitted"])]
    near = goals(rows)["near_capacity_under"][0]
    d = near_plan_distribution(rows, report.verify_rows)
    b = BEFORE_ISSUE_14
    w("## Issue 14: what changed")
    w("")
    w("Terms read from the libraries' code replaced what the constants could only fit; each was checked on the "
      "families' rows and the verify bundles (none of which it was derived from, except where its docstring says). "
      "Memory (advisor/model/activations.py, units.py, dims.py): PyTorch's flash and memory-efficient SDPA return "
      "[b, s, heads, d], so o_proj saves the tensor SDPA saves (no copy; eager still copies); the MLP's backward "
      "peak is the incoming grad and two [t, I] grads beside the saved set (one with Liger's in-place SwiGLU "
      "backward), not two residual grads and three; the final norm's saved tensors are freed before the first "
      "layer's backward; fp32 LoRA adapters with dropout hold two fp32 grads of the widest input; Qwen3/Gemma3's "
      "per-head q/k norms save an fp32 copy; Gemma's norms keep their fp32 normalized tensor and Gemma 2's "
      "soft-capping its tanh output; Phi-3's fused qkv output stays alive through the saved v view, and its "
      "rotary's torch.cat leaves q in [b, heads, s, d], so SDPA's output is copied back for o_proj (found with "
      "saved-tensor hooks on the CPU; the Phi-3-mini near-capacity row went from -3.1 % to -0.0 %); SDPA on "
      "sliding-window layers gets a mask torch turns into a bf16 bias per layer, with k and v expanded, and so does "
      "every layer of a GRPO/RLOO batch, whose completions end at different lengths (the benchmark holds them at "
      "full length, so its rows are estimated as fixed-length batches; found by verify on the planner's Llama-3.2-1B "
      "GRPO bundle, whose peak was above the estimate of its files by the masked layers' bytes, docs/verify.md; the "
      "two-GPU Qwen2.5-1.5B GRPO bundle of 2026-11-29 in the table below was under-predicted the same way); DPO "
      "and KTO "
      "score only the completion; LoRA on a MoE keeps the full-size expert copy PEFT's lora.ParamWrapper merges "
      "on every forward (W + B @ A: one per layer without checkpointing, the recomputed layer's with it; "
      "bench/moe_lora_probe.py, and the MoE LoRA rows below, 34 % under before). Speed (advisor/model/speed.py): the "
      "extra norms' and the MoE routing's kernels and "
      "HBM bytes, the experts' skinny grouped GEMMs, that merge's traffic and the experts' weight-gradient GEMMs "
      "under LoRA, the full score matrix and bias reads of masked SDPA, DPO/KTO's "
      "half-size LM head, a fixed cost per GRPO/RLOO generation round, and the imperfect overlap of the CPU's "
      "dispatch with the GPU's work (OVERLAP_P: a smooth maximum of the two), DeepSpeed's hooks as part of that "
      "dispatch, ZeRO-3's per parameter-holding module and pass (partitioned_param_coordinator.fetch_sub_module) "
      "rather than added per tensor to the step (tested on ZeRO twins written down before they ran, above), a module "
      "whose parameters all stay gathered (the norms, under stage3_param_persistence_threshold) at the fraction of "
      "a partitioned one's cost bench/zero3_hook_probe.py timed (ZERO3_PERSISTENT_HOOK_FRACTION; tested on "
      "norm-heavy ZeRO-3 twins written down with the model's and the alternative's predictions, below); the "
      "GPU's rates measured by kernel instead of one fitted ceiling (the GEMMs' efficiency curve, fused attention's "
      "efficiency by sequence length and head size, eager elementwise bandwidth, LoRA's memory-bound skinny GEMMs: "
      "GPU rates measured by kernel, above), TRL's fused LM head (its backward recomputes each logits tile), PEFT's adapter "
      "chain counted from its kernels (the backward repeats the forward's casts once, not twice), forward and "
      "backward overlapping their dispatch apart (TRL's compute_loss syncs on its metrics between them), and the "
      "Trainer's data path and LoRA's per-step cost measured on the H200 host; the optimizer step timed apart "
      "(clip_grad_norm_ and fused AdamW at the elementwise rate, twice the time counted before), Gemma-2's "
      "soft-capped eager scores, Phi-3's strided RoPE and SwiGLU, and transformers 5.17's MoE sentinel masks, each "
      "from a probe of those families (GPU rates measured by kernel, above) and checked on the family rows of "
      "2026-12-02, written down before they ran; checkpointing's recompute counted as torch.utils.checkpoint runs "
      "it (non-reentrant, transformers' default: it stops once every tensor the backward saved is rebuilt, so a "
      "Llama/Qwen/Mistral/Phi-3 layer's down_proj, whose output nothing saves, is not recomputed in full training; "
      "counted on the CPU with saved-tensor hooks, six of seven GEMMs recomputed per Qwen2/Llama layer, and checked "
      "on twelve checkpointed rows written down before they ran, above) and DPO/KTO LoRA's switching the adapters "
      "off for the reference forward (ADAPTER_TOGGLE_SECONDS, timed by bench/adapter_probe.py on the H200 host); DeepSpeed ZeRO's own optimizer "
      "step (fp32 FusedAdam, the per-tensor fp64 norms, the flat fp32 copy and the copy back: about 82 B per "
      "parameter, not 40, and ZeRO-1/2's per-tensor host loop, profiled on ZeRO twins written down before they ran: "
      "DeepSpeed ZeRO's optimizer step, profiled, above); the host-side speed constants refitted on the fit rows of "
      "every file. Measurement: every row whose step the "
      "host CPU sets was measured on two to four machines and a configuration's step time is the median of its "
      "records (step time measured more than once, above); the two generation constants were refitted on those "
      "medians, and verify widens the speed band of a host-bound plan by its own spread up to "
      "HOST_BOUND_SPREAD_CAP_PCT. Near capacity: the planner's "
      "headroom is now the measured under-prediction (above), not a 5 % policy. Considered and not "
      "added: a reserved-memory term for ZeRO's step buffers (the train phase's reserve plus the step's flat buffers "
      "matches five of the nine ZeRO rows but over-predicts the two near capacity by 5-8 %); a step-time term for "
      "the transformers version beyond the MoE masks (see the known gaps); the probe-measured kernel counts and "
      "checkpointing cost of bench/dispatch_terms.py in place of the fitted ones (refitted with them, the fit rows' "
      "objective is 3 % higher); the 2026-12-01 refit of BNB_MATMUL_SECONDS alone (see its "
      "note).")
    w("")
    w("| figure | before (23ab5c9) | now | goal |")
    w("|---|---|---|---|")
    w(f"| peak allocated, median \\|err\\|, all / holdout / verify | {_pct(b['all']['mem_median'], False)} / "
      f"{_pct(b['holdout']['mem_median'], False)} / {_pct(b['verify']['mem_median'], False)} | "
      f"{_pct(st['mem_median'], False)} / {_pct(ho['mem_median'], False)} / {_pct(ver['memory_median'][0], False)} "
      f"| <= {100 * GOALS['memory_median']:.0f}% |")
    w(f"| peak allocated, worst \\|err\\|, all / holdout / verify | {_pct(b['all']['mem_worst'], False)} / "
      f"{_pct(b['holdout']['mem_worst'], False)} / {_pct(b['verify']['mem_worst'], False)} | "
      f"{_pct(st['mem_worst'], False)} / {_pct(ho['mem_worst'], False)} / {_pct(ver['memory_worst'][0], False)} | "
      f"<= {100 * GOALS['memory_worst']:.0f}% |")
    w(f"| most under-predicted run near capacity (or OOM predicted to fit) | {_pct(b['all']['near_under'])} | "
      f"{_pct(near)} | >= -{100 * GOALS['near_capacity_under']:.0f}% |")
    w(f"| step time, median \\|err\\|, all / holdout / verify | {_pct(b['all']['time_median'], False)} / "
      f"{_pct(b['holdout']['time_median'], False)} / {_pct(b['verify']['time_median'], False)} | "
      f"{_pct(st['time_median'], False)} / {_pct(ho['time_median'], False)} / {_pct(ver['time_median'][0], False)} "
      f"| <= {100 * GOALS['time_median']:.0f}% |")
    w(f"| step time, worst \\|err\\|, all / holdout / verify | {_pct(b['all']['time_worst'], False)} / "
      f"{_pct(b['holdout']['time_worst'], False)} / {_pct(b['verify']['time_worst'], False)} | "
      f"{_pct(st['time_worst'], False)} / {_pct(ho['time_worst'], False)} / {_pct(ver['time_worst'][0], False)} | "
      f"<= {100 * GOALS['time_worst']:.0f}% |")
    w(f"| leave one family out: peak median / worst, step median / worst | {_pct(b['lofo']['mem_median'], False)} / "
      f"{_pct(b['lofo']['mem_worst'], False)}, {_pct(b['lofo']['time_median'], False)} / "
      f"{_pct(b['lofo']['time_worst'], False)} | {_pct(_median([abs(x) for x in l_mem]), False)} / "
      f"{_pct(max(map(abs, l_mem)), False)}, {_pct(_median([abs(x) for x in l_step]), False)} / "
      f"{_pct(max(map(abs, l_step)), False)} | |")
    w(f"| near-capacity under-prediction u at the {100 * UNDER_QUANTILE:.0f}th percentile (the planner's margin "
      f"u / (1 + u)) | {_pct(b['margin_u'])} | {_pct(d['quantile'])} ({_pct(d['margin'], False)}) | covered |")
    w("")


DATA_PROBE = "bench/results/data-probe-h200-2026-12-02.json"


def _ratio_table(w, cases: list[dict[str, Any]]) -> None:
    """Measured / model GPU seconds of profiled micro-batches (bench.kernel_terms.cases), by kind of kernel."""
    w("| micro-batch | GEMM | attention | other | all kernels |")
    w("|---|---|---|---|---|")
    for c in cases:
        cells = " | ".join(f"{c['measured'][k] / c['model_s'][k]:.2f}" if c["model_s"][k] else "-"
                           for k in ("gemm", "attention", "other", "total"))
        w(f"| {c['case']} | {cells} |")


def _kernel_section(w, rows: list[Evaluated]) -> None:
    """The GPU rates read off profiled micro-batches (bench/kernel_terms.py), the per-step costs outside them, and
    the data path's host time (bench/data_probe.py)."""
    from bench import kernel_terms as KT

    probe = KT.load()
    got = KT.derived(probe, KT.load(KT.FAMILIES_PROBE))
    cases = KT.cases(probe)
    gaps = KT.step_gaps(probe, rows)
    w("### GPU rates measured by kernel")
    w("")
    w(f"Not fitted to step times: `python -m bench.kernel_terms` reads them off `{KT.PROBE}` ({probe['gpu']}, torch "
      f"{probe['versions'].get('torch')}, transformers {probe['versions'].get('transformers')}): "
      f"{len(cases)} training micro-batches of the catalogue's families (`bench/kernel_probe.py`: random bf16 weights, "
      "SDPA, bf16 autocast, TRL's fused LM head, each in its own process) profiled by kernel, and LoRA's skinny "
      "GEMMs replayed from a CUDA graph. Each rate is the model's own work (FLOPs, bytes) for the case over the "
      "measured GPU time of its kind of kernel. Before, one fitted ceiling (0.727, with HIDDEN_HALF 512 and "
      "TOKENS_HALF 256) stood for all of them; against these kernels that model (commit 2427517) made the GEMMs "
      "1.2-1.6x too slow, attention 1.1-1.9x and the full fine-tunes' elementwise work 1.6-2.2x too fast.")
    w("")
    w("| constant | derived from the probe | in use |")
    w("|---|---|---|")
    for name, value in got.items():
        w(f"| `{name}` | {value:.4g} | {getattr(S, name):.4g} |")
    w("")
    w("Attention's rate depends on the head size as well as the sequence length: with one curve for every head "
      "size, the measured attention time of these cases and the families' below was 0.72-1.28 of the model's "
      "(head_dim 128 faster, 256 slower than 64). PyTorch's SDPA runs cuDNN's fused kernels here, built per head size "
      "with the same tile rows (kernel names ..._64x128x<head size> forward, ..._64x64x<head size> backward), so a "
      "wider head does more FLOPs per tile of keys and values loaded; Phi-3's 96 runs the kernel built for 128, and "
      "the 256 kernel sustains less than the 128 one. `ATTENTION_EFFICIENCY` is the curve's ceiling at head_dim 64 and `ATTENTION_HEAD_DIM_96`, "
      "`_128` and `_256` each size's factor over it, read off both probes' cases together (kernel_terms "
      "attention_curve; every catalogue model has one of these four sizes); with them the attention time is 0.86-1.15 "
      "of the model's, and `tests/model/test_kernel_terms.py` keeps it within 0.8-1.2.")
    w("")
    chk = KT.load(KT.HEAD_DIM_CHECK_PROBE)
    chk_cases = KT.cases(chk)
    w(f"Held out from that fit: `{KT.HEAD_DIM_CHECK_PROBE}` ({chk['gpu']}, transformers "
      f"{chk['versions'].get('transformers')}; `python -m bench.kernel_probe --skip-graphs --cases ...`), "
      f"{len(chk_cases)} micro-batches profiled the same way on another GPU once the factors were in, two of models "
      "no probe had run (Gemma-3-4B, head_dim 256; Qwen3-4B, 128), each modelled on that GPU's own catalogue rates. "
      "Attention time measured / model: " + ", ".join(
          f"{c['case']} {c['measured']['attention'] / c['model_s']['attention']:.2f}" for c in chk_cases) + ". "
      "On this GPU the rest of the micro-batch ran faster than the model gives it (all kernels "
      f"{min(c['measured']['total'] / c['model_s']['total'] for c in chk_cases):.2f}-"
      f"{max(c['measured']['total'] / c['model_s']['total'] for c in chk_cases):.2f} of the model's; the non-GEMM, "
      "non-attention kernels at "
      f"{KT.derived(chk)['ELEMENTWISE_BW_EFFICIENCY']:.2f} of its HBM bandwidth against the H200's "
      f"{S.ELEMENTWISE_BW_EFFICIENCY:.2f}): one probe of one machine, not yet a per-GPU term.")
    w("")
    w("Measured / model GPU seconds of each profiled micro-batch, by kind of kernel (GEMM, attention, the rest) and "
      "in all: `tests/model/test_kernel_terms.py` keeps every total within "
      "0.9-1.1.")
    w("")
    _ratio_table(w, cases)
    w("")
    fam = KT.load(KT.FAMILIES_PROBE)
    fam_cases = KT.cases(fam)
    w(f"The families the first probe had little of, profiled the same way on another H200 of the day "
      f"(`{KT.FAMILIES_PROBE}`, transformers {fam['versions'].get('transformers')}; MoE models cut to a few layers, "
      "`ID@L<n>`; Gemma-2 eager). Three terms come from it and from the library code behind the kernels it shows: "
      "Gemma-2's soft-capping streams the eager scores three more times (modeling_gemma2.py "
      "eager_attention_forward: divide, tanh, multiply); Phi-3's fused qkv and gate_up projections hand RoPE and the "
      "SwiGLU strided views, which PyTorch runs through its non-vectorized elementwise kernel "
      f"(`STRIDED_ELEMENTWISE_FACTOR` = {S.STRIDED_ELEMENTWISE_FACTOR:g}, derived "
      f"{KT.strided_factor((probe, fam)):.2f} from the two Phi-3 cases); and transformers "
      f"{fam['versions'].get('transformers')}'s MoE experts mask their sentinel rows with masked_fill on every call "
      "(six kernels per layer in the profile; 5.24 masks only under expert parallelism), counted for the release a "
      "run names (`moe_sentinel_masks`). `tests/model/test_family_terms.py` keeps these totals within 0.9-1.1 too.")
    w("")
    _ratio_table(w, fam_cases)
    w("")
    _optimizer_probe_table(w)
    w("TRL's step is more than its micro-batches: the benchmark rows that ran a profiled configuration, their step "
      "less the profiled micro-batch's wall time and less what the model adds outside it (STEP_FIXED_SECONDS, the "
      "data path, the optimizer step). LoRA's remainder per adapter tensor is `LORA_STEP_SECONDS_PER_TENSOR` "
      f"({S.LORA_STEP_SECONDS_PER_TENSOR:.2g} s; derived {KT.lora_step_seconds_per_tensor(gaps):.2g} s).")
    w("")
    w("| benchmark row | TRL step (s) | micro-batch alone (s) | modelled outside (s) | remainder (ms) | per adapter "
      "tensor (ms) |")
    w("|---|---|---|---|---|---|")
    for g in gaps:
        per = f"{g['gap_per_adapter_tensor_s'] * 1e3:.3f}" if g["gap_per_adapter_tensor_s"] else "-"
        w(f"| {g['row']} | {g['step_s']:.3f} | {g['micro_batch_wall_s']:.3f} | {g['outside_s']:.3f} | "
          f"{g['gap_s'] * 1e3:+.1f} | {per} |")
    w("")
    f = REPO / DATA_PROBE
    if f.exists():
        d = json.loads(f.read_text())
        per = sorted(c["ms_per_1024_tokens"] for c in d["cases"])
        w(f"The data path (`python -m bench.data_probe`, `{DATA_PROBE}`, TRL {d['versions'].get('trl')}'s own SFT "
          f"dataloader on the H200 host, {d['cpus'].get('usable_cpus')} CPUs): {per[0]:.2f}-{per[-1]:.2f} ms per "
          f"1,024 tokens at {min(c['seq_len'] for c in d['cases'])}-{max(c['seq_len'] for c in d['cases'])} tokens "
          f"per sequence, median {statistics.median(per):.2f}; `DATA_SECONDS_PER_TOKEN` = "
          f"{S.DATA_SECONDS_PER_TOKEN:.3g} s. The Trainer fetches a step's micro-batches in its own process after the "
          "previous step's syncs, so the GPU waits for it: "
          f"{S.DATA_SECONDS_PER_TOKEN * 64 * 1024 * 1e3:.0f} ms a step for 64 sequences of 1,024 tokens, as the "
          "planner's 0.5B bundles that verify ran.")
        w("")


OPTIMIZER_PROBE = "bench/results/optimizer-probe-h200-2026-12-02.json"


CKPT_BANDS = ((0.0, 0.25), (0.25, 0.75), (0.75, 1.01))
"""Host-bound shares (advisor.model.speed.host_bound_share) the checkpointed runs are grouped by."""


def checkpoint_band_errors(rows: list[Evaluated], per_layer: float) -> list[list[float]]:
    """Step-time errors of the checkpointed runs, by CKPT_BANDS (their share as predicted now), with
    CKPT_LAYER_SECONDS set to `per_layer`; the module is left as it was."""
    prepared = [p for p in _prepared(rows) if p[1].grad_ckpt]
    before = S.CKPT_LAYER_SECONDS
    try:
        S.CKPT_LAYER_SECONDS = per_layer
        errs = _step_errors(prepared)
    finally:
        S.CKPT_LAYER_SECONDS = before
    return [[x for x, p in zip(errs, prepared, strict=True) if lo <= p[0].host_share < hi] for lo, hi in CKPT_BANDS]


def _checkpoint_dispatch_section(w, rows: list[Evaluated]) -> None:
    """Checkpointing's host cost per layer: what bench/dispatch_probe.py measures against the fitted value the model
    uses, on the checkpointed runs by how much of their step the host sets."""
    from bench import dispatch_terms as DT

    cases = DT.load()
    ck = DT.checkpointing(cases, DT.launch_seconds(cases))
    per = [r["per_layer_s"] for r in ck]
    fwd = [r["forward_per_layer_s"] * 1e3 for r in ck]
    probe = statistics.median(per)
    w("### Checkpointing's host cost")
    w("")
    w("`python -m bench.dispatch_terms` reads it off " + " and ".join(f"`{p}`" for p in DT.PROBES) + ": a tiny "
      f"micro-batch (one sequence of 32 tokens) of each of {len(ck)} full fine-tunes with and without transformers' "
      "gradient checkpointing; the step's difference less the recomputed forward's launches, per layer: "
      f"{min(per) * 1e3:.2f}-{max(per) * 1e3:.2f} ms, median {probe * 1e3:.2f} ms; of it in the forward (the "
      f"saved-tensor hooks) {min(fwd):.2f}-{max(fwd):.2f} ms: `CKPT_FORWARD_SHARE` = {S.CKPT_FORWARD_SHARE:.3f} of "
      "the total, measured (the forward and the backward each overlap their own dispatch with their GPU work). The "
      f"total per layer stays fitted (`CKPT_LAYER_SECONDS` = {S.CKPT_LAYER_SECONDS * 1e3:.2f} ms): the checkpointed "
      "runs by the share of their predicted step the host sets, with the fitted value and with the probe's:")
    w("")
    w("| host-bound share | checkpointed runs | fitted: median \\|err\\| | worst | over 20 % | probe's value: median "
      "\\|err\\| | worst | over 20 % |")
    w("|---|---|---|---|---|---|---|---|")

    def cells(errs: list[float]) -> str:
        if not errs:
            return "- | - | -"
        return (f"{_median([abs(x) for x in errs]):.1%} | {max(errs, key=abs):+.1%} | "
                f"{sum(abs(x) > 0.2 for x in errs)}")

    fitted, measured = checkpoint_band_errors(rows, S.CKPT_LAYER_SECONDS), checkpoint_band_errors(rows, probe)
    for (lo, hi), f, m in zip(CKPT_BANDS, fitted, measured, strict=True):
        w(f"| {lo:.0%}-{min(hi, 1.0):.0%} | {len(f)} | {cells(f)} | {cells(m)} |")
    w("")
    w("The probe's value serves the runs the host sets almost alone, the fitted one those where host and GPU take "
      "about as long: the checkpointed backward pays more there than its dispatch and its GPU work overlapped, and "
      "what that is has not been measured apart (a lower overlap exponent for it alone leaves the middle band short).")
    w("")
    _checkpoint_profile_table(w)


LONG_RECORD_STEPS = 10
"""Records of at least this many measured steps (bench.run --steps) count as long: the median of 15 steps against the
usual 3 tells whether more steps make a host-bound configuration's record reproducible."""


def checkpoint_profiles(rows_file: str | None = None, root: Path = REPO) -> list[dict[str, Any]]:
    """Per configuration of the profiled checkpointing twins: the medians over its records in the results files of
    RESULTS of the step, the profiled step's GPU kernel time and the host's forward and backward phases per
    micro-batch, next to the model's step, GPU time and dispatch (forward, backward) for it."""
    from advisor.model.memory import estimate_memory

    names = [r["name"] for r in json.loads((root / (rows_file or CKPT_OVERLAP_CHECK)).read_text())]
    recs: dict[str, list[dict]] = {n: [] for n in names}
    for rel in RESULTS:
        for rec in _read_jsonl(root / rel):
            if rec.get("name") in recs and rec.get("status") == "ok" and rec.get("profile"):
                recs[rec["name"]].append({**rec, "_file": rel})
    gpu = resolve_gpu(GPU_ID)
    out = []
    for name in names:
        got = recs[name]
        if not got:
            continue
        last = got[-1]
        model = measured_model(last["row"]["model"])
        plan = plan_from_bench_row(last["row"])
        release = ((last.get("env") or {}).get("versions") or {}).get("transformers")
        target = Target(gpu=gpu, gpus_per_node=1, nodes=1, cpu_cores=record_cpu_cores(last),
                        software={"transformers": release} if release else {})
        micro = S.micro_batch_times(MD.dims(model), model, plan, target, MD.Precision.of(plan))
        spd = estimate_speed(model, plan, target, estimate_memory(model, plan, target))

        def med(key: str, got: list[dict] = got) -> float:
            # the measured steps' phases: the last measured_steps of them (the warm-up steps come first)
            return statistics.median(p[key] / p["micro_batches"] for r in got
                                     for p in r["timing"]["phases"][-int(r["timing"]["measured_steps"]):])

        out.append({
            "name": name, "records": len(got), "files": len({r["_file"] for r in got}), "grad_ckpt": plan.grad_ckpt,
            "long_records": [r["timing"]["median_step_seconds"] for r in got
                             if int(r["timing"]["measured_steps"]) >= LONG_RECORD_STEPS],
            "short_records": [r["timing"]["median_step_seconds"] for r in got
                              if int(r["timing"]["measured_steps"]) < LONG_RECORD_STEPS],
            "long_host_us": [v["nograd_op_us"] for r in got if int(r["timing"]["measured_steps"]) >= LONG_RECORD_STEPS
                             for v in (r.get("host_probe") or {}).values()
                             if isinstance(v, dict) and "nograd_op_us" in v],
            "step": statistics.median(r["timing"]["median_step_seconds"] for r in got),
            "kernel_s": statistics.median(r["profile"]["kernel_s"] for r in got),
            "forward_host": med("forward_host_s"), "backward_host": med("backward_host_s"),
            "host_records": [med("forward_host_s", [r]) + med("backward_host_s", [r]) for r in got],
            "pred_step": spd.step_seconds, "pred_gpu": micro["gpu"], "pred_dispatch_fwd": micro["dispatch_forward"],
            "pred_dispatch_bwd": micro["dispatch"] - micro["dispatch_forward"]})
    return out


def _checkpoint_profile_table(w) -> None:
    got = checkpoint_profiles()
    if not got:
        return
    rounds = max(r["files"] for r in got)
    w(f"Profiled steps (`{CKPT_OVERLAP_CHECK}`, {rounds} rounds): the step's median, the profiled step's GPU "
      "kernel time and the host's forward and backward phase per micro-batch (up to TRL's metric sync, and from "
      "there to the end of the backward; the host's own time where it sets the step), against the model's step, "
      "GPU time and dispatch for them.")
    w("")
    w("| row | records | step: measured / predicted | GPU kernels: measured / predicted | forward host: measured / "
      "dispatch predicted | backward host: measured / dispatch predicted |")
    w("|---|---|---|---|---|---|")
    for r in got:
        w(f"| {r['name']} | {r['records']} | {r['step']:.3f} / {r['pred_step']:.3f} s "
          f"({r['pred_step'] / r['step'] - 1:+.0%}) | {r['kernel_s']:.3f} / {r['pred_gpu']:.3f} s | "
          f"{r['forward_host']:.3f} / {r['pred_dispatch_fwd']:.3f} s | {r['backward_host']:.3f} / "
          f"{r['pred_dispatch_bwd']:.3f} s |")
    w("")
    def spreads(key: str) -> list[float]:
        return [max(r[key]) / min(r[key]) - 1 for r in got if len(r[key]) > 1]

    long, short = spreads("long_records"), spreads("short_records")
    host = [v for r in got for v in r["long_host_us"]]
    if long and short and host:
        w(f"Records of {LONG_RECORD_STEPS} or more measured steps (`bench.run --steps 15`), two or more of each "
          f"configuration: their medians lie {min(long):.0%}-{max(long):.0%} apart (median {_median(long):.0%}); the "
          f"3-step records of the same configurations {min(short):.0%}-{max(short):.0%} (median "
          f"{_median(short):.0%}). More steps do not make a host-bound record reproducible: the host's state over "
          f"minutes moves it (its 1-element CUDA op took {min(host):.1f}-{max(host):.1f} us under no_grad within "
          "those rounds, bench.host_probe).")
        w("")
    gap = max(abs(r["kernel_s"] - r["pred_gpu"]) for r in got)
    rounds_apart = [max(r["host_records"]) / min(r["host_records"]) - 1 for r in got if len(r["host_records"]) > 1]
    plain = [r for r in got if not r["grad_ckpt"]]
    ratios = [r["forward_host"] / r["pred_dispatch_fwd"] for r in plain] + [
        r["backward_host"] / r["pred_dispatch_bwd"] for r in plain]
    from bench import dispatch_terms as DT

    counts = [1 - DT.model_kernels(c) / c["no_ckpt"]["tiny"]["step"]["kernels"] for c in DT.load()
              if c["method"] == "full"]
    w(f"The GPU kernel time is the model's within {gap * 1e3:.0f} ms on every row; where a step is off, its host "
      f"phases are: a configuration's host time per micro-batch (forward and backward) differs by up to "
      f"{max(rounds_apart):.0%} between its records, and the plain twins' host phases are "
      f"{min(ratios):.2f}-{max(ratios):.2f} times the dispatch the model counts (its kernel count is "
      f"{min(counts):.0%}-{max(counts):.0%} below what bench/dispatch_probe.py counts on a tiny batch of the probe's "
      "full fine-tunes: `python -m bench.dispatch_terms`).")
    w("")


def _optimizer_probe_table(w) -> None:
    """The optimizer step timed apart (bench/optimizer_probe.py) next to optimizer_step_seconds."""
    from bench import kernel_terms as KT

    d = json.loads((REPO / OPTIMIZER_PROBE).read_text())
    w(f"The optimizer step outside the micro-batches, timed apart (`python -m bench.optimizer_probe`, "
      f"`{OPTIMIZER_PROBE}`): the Trainer's clip_grad_norm_ and fused AdamW on each model's bf16 weights and grads. "
      f"The model streams `OPTIMIZER_BYTES_PER_WEIGHT_BYTE` = {S.OPTIMIZER_BYTES_PER_WEIGHT_BYTE} bytes per byte of "
      "weight at the elementwise rate (the norm's read and the in-place scale, AdamW's four reads and three writes); "
      "before, 16 B per parameter at `MEM_BW_EFFICIENCY`, half the measured time.")
    w("")
    w("| model | parameters | clip_grad_norm_ (ms) | fused AdamW (ms) | predicted (ms) | error |")
    w("|---|---|---|---|---|---|")
    for c in d["cases"]:
        if "error" in c:
            continue
        model, plan, target = KT._case_plan(c, d.get("versions"))
        dm = MD.dims(model)
        pred = S.optimizer_step_seconds(dm, plan, target, MD.Precision.of(plan))
        meas = c["clip_grad_norm_s"] + c["adamw_fused_step_s"]
        w(f"| {c['model']} | {c['params'] / 1e9:.2f}B | {c['clip_grad_norm_s'] * 1e3:.1f} | "
          f"{c['adamw_fused_step_s'] * 1e3:.1f} | {pred * 1e3:.1f} | {_pct(pred / meas - 1)} |")
    w("")


def _offload_section(w, rows: list[Evaluated]) -> None:
    from bench import offload_terms as OT

    got = OT.offload_rows(_prepared(rows))
    if not got:
        return
    core = S.CPU_ADAM_CORE_NS
    w("### DeepSpeed's CPU optimizer step, from the offload rows")
    w("")
    w("The ZeRO optimizer-offload runs, each predicted on the host CPUs its records name (`record_cpu_cores`; a "
      "configuration's records from a host with another CPU count are their own run, named `@<CPUs>cpu`). The CPU "
      "step per fp32 parameter is `CPU_ADAM_SERIAL_NS + CPU_ADAM_CORE_NS / CPUs` "
      f"({S.CPU_ADAM_SERIAL_NS} + {core} / CPUs ns); the 16-bit weights' copy back to the GPU is its own term, timed "
      f"apart (`bench/copy_probe.py`: ZeRO-3's blocking copy {S.ZERO3_COPY_BACK_NS} ns per parameter, ZeRO-1/2's "
      f"pinned one {S.ZERO12_COPY_BACK_NS} ns). Implied: the CPU step per parameter that makes the predicted step "
      "equal the measured one, the rest predicted by the model's other terms (`python -m bench.offload_terms`).")
    w("")
    w("| run | split | ZeRO | host CPUs | measured step | predicted | error | CPU step, predicted | implied ns per "
      "parameter |")
    w("|---|---|---|---|---|---|---|---|---|")
    for r in got:
        ns = f"{r['ns']:.3f}" if r["ns"] else "- (the rest exceeds the step)"
        w(f"| {r['name']} | {r['split']} | {r['stage']} | {r['cores'] or '-'} | {_secs(r['measured'])} s | "
          f"{_secs(r['predicted'])} s | {_pct(r['predicted'] / r['measured'] - 1)} | {_secs(r['cpu'])} s | {ns} |")
    w("")
    pairs = OT.core_pairs(got)
    if pairs:
        w("`CPU_ADAM_CORE_NS`, from the same rows on one host with all its CPUs and then with fewer (taskset), the "
          "rest of the step the same on both: " + "; ".join(
              f"{p['base']} {p['step'][0]:.3f} s on {p['cores'][0]} CPUs, {p['step'][1]:.3f} s on {p['cores'][1]} "
              f"({p['core_ns']:.2f} ns x cores)" for p in pairs) + f"; median {core}.")
        w("")
    held = OT.leave_one_host_out(got, core)
    if held:
        by_file: dict[str, list[float]] = {}
        for x in held:
            by_file.setdefault(x["file"], []).append(x["error"])
        errs = [abs(x["error"]) for x in held]
        w("`CPU_ADAM_SERIAL_NS` is the median over the hosts (a results file is one machine in one session) of each "
          "host's median serial part; the CPU step follows the host, so the term is held out by host: each host's "
          "records predicted with the term derived from the other hosts. "
          + "; ".join(f"`{rel}`: {', '.join(_pct(e) for e in es)}" for rel, es in sorted(by_file.items()))
          + f". Over the {len(errs)} records: median \\|error\\| {_pct(_median(errs), False)}, worst "
          f"{_pct(max(errs), False)}.")
        w("")
    stages = stage_serial_by_host(got, core)
    if stages:
        w("The serial part each host's records imply, ZeRO-2's against ZeRO-3's (hosts that ran both; median per "
          "stage, ns per parameter): " + "; ".join(f"`{rel}` {z2:.3f} / {z3:.3f}" for rel, z2, z3 in stages)
          + f". Median difference ZeRO-3 - ZeRO-2: {_median([z3 - z2 for _, z2, z3 in stages]):+.3f} ns.")
        w("")


def stage_serial_by_host(got: list[dict[str, Any]], core: float) -> list[tuple[str, float, float]]:
    """Per results file (one host) with ZeRO-2 and ZeRO-3 offload records: each stage's median implied serial part
    (bench.offload_terms.record_points)."""
    from bench import offload_terms as OT

    per: dict[tuple[str, int], list[float]] = {}
    for p in OT.record_points(got, core):
        if p["serial"] is not None:
            per.setdefault((p["file"], p["run"]["stage"]), []).append(p["serial"])
    files = sorted({f for f, _ in per})
    return [(f, statistics.median(per[(f, 2)]), statistics.median(per[(f, 3)])) for f in files
            if (f, 2) in per and (f, 3) in per]


OFFLOAD_GA = ("bench/results/h200-2026-12-03-offload-ga.jsonl", "bench/results/h200-2026-12-03-offload-ga-2.jsonl")
"""The GA series of bench/rows/offload-ga-2026-12-03.json: one machine, two commands in one hour."""
OFFLOAD_GA_ROWS = "bench/rows/offload-ga-2026-12-03.json"
OFFLOAD_GA_THEN = "bench/rows/offload-ga-2026-12-03-predicted.json"
OFFLOAD_GA_VALIDATE = "bench/rows/offload-ga-validate-2026-12-03.json"
ZERO_STEP_ROWS = "bench/rows/zero-step-2026-12-03.json"
ZERO_STEP_RESULTS = "bench/results/h200-2026-12-03-zero-step.jsonl"
ZERO_STEP_THEN = "bench/rows/zero-step-2026-12-03-predicted.json"
VERIFY_ZERO = "bench/results/verify-h200-2026-12-03-zero.jsonl"
"""The planner's Qwen2.5-0.5B bundles without DeepSpeed, ZeRO-2 and ZeRO-3, run by verify after the ZeRO step's terms."""
ZERO_CLIENT = "bench/results/h200-2026-12-03-zero-client.jsonl"
"""A diagnostic, not calibration records: the same configurations with the bundles' client optimizer
(bench/rows/zero-client-2026-12-03.json, row ds_optimizer "client"), next to DeepSpeed's own, on one machine."""
ZERO_CLIENT_2 = "bench/results/h200-2026-12-03-zero-client-2.jsonl"
"""The same five rows again, on the machine whose bundles bench.bundle_phases timed first (BUNDLE_PHASES "m1")."""
ZERO3_INTERLEAVED = "bench/results/h200-2026-12-03-zero3-interleaved.jsonl"
"""Three records of the ZeRO-3 client-optimizer row, each run just before one of BUNDLE_PHASES' "m3" bundle runs."""
HOST_VERIFY = "bench/results/host-verify-h200-2026-12-03.jsonl"
"""Four 0.5B bundles run by a verify that judged them against the estimate for the host it measured (see its note)."""
BUNDLE_PHASES = "bench/results/bundle-phases-h200-2026-12-03.jsonl"
"""The 0.5B bundles' own launches timed by bench/bundle_phases.py, on three machines ("machine": m1, m2, m3)."""
OFFLOAD_GA_VALIDATE_THEN = "bench/rows/offload-ga-validate-2026-12-03-predicted.json"
MEMORY_HISTORY = "bench/results/memory-history-h200-2026-12-03.jsonl"
VERIFY_OFFLOAD = "bench/results/verify-h200-2026-12-03-offload.jsonl"


def offload_ga_series(rows: list[Evaluated], files: tuple[str, ...] = OFFLOAD_GA) -> list[dict[str, Any]]:
    """Each offload configuration measured at grad_accum 1 and more on the GA series' machine: the extra seconds per
    micro-batch measured (slope of that machine's records against grad_accum) and predicted now, and what is left at
    grad_accum 1 once the micro-batches are taken out (the optimizer step and the once-per-step copies)."""
    by_base: dict[str, dict[int, tuple[float, Evaluated]]] = {}
    for e in rows:
        if e.run.status != "ok" or e.run.knobs.get("offload", "none") == "none":
            continue
        step = next((e.run.step_in(f) for f in files if e.run.step_in(f)), None)
        if step is None:
            continue
        # the series' records are one machine's: a host-suffixed run (host_run_name) is the same configuration
        base = re.sub(r"-ga\d+$", "", e.run.name.split("@", 1)[0])
        by_base.setdefault(base, {})[int(e.run.knobs.get("grad_accum", 1))] = (step, e)
    out = []
    for base, got in sorted(by_base.items()):
        if 1 not in got or len(got) < 2:
            continue
        ga = max(got)
        (m1, e1), (mk, ek) = got[1], got[ga]
        slope_m, slope_p = (mk - m1) / (ga - 1), (ek.pred_step - e1.pred_step) / (ga - 1)
        out.append({"base": base, "stage": int(e1.run.knobs.get("zero", 0)), "ga": ga, "measured": (m1, mk),
                    "predicted": (e1.pred_step, ek.pred_step), "slope": (slope_m, slope_p),
                    "once": (m1 - slope_m, e1.pred_step - slope_p)})
    return out


def _offload_ga_section(w, rows: list[Evaluated]) -> None:
    series = offload_ga_series(rows)
    if not series:
        return
    w("### Optimizer offload with gradient accumulation")
    w("")
    w(f"`{OFFLOAD_GA_ROWS}`: ZeRO-2 and ZeRO-3 with the optimizer offloaded at grad_accum 1, 2 and 4, on one machine "
      "in one hour (" + ", ".join(f"`{f}`" for f in OFFLOAD_GA) + "). Each micro-batch more adds its compute and "
      "the gradients' copies to the host (advisor.model.speed.offload_gradient_bytes: ZeRO-2 4 x grad_accum + 2 B "
      "per parameter, ZeRO-3 4 x grad_accum + 4 B, counted in series with the backward); what is left at "
      "grad_accum 1 is the once-per-step part (the CPU step and the copy back). Predicted with the model as it is "
      "now; before these terms the gradients' copies were counted as 4 B per micro-batch mostly hidden behind the "
      "backward, and the CPU step's serial part, fitted to grad_accum-1 rows, carried the copies' cost.")
    w("")
    w("| configuration | ZeRO | grad_accum | step at 1 / at k, measured (s) | predicted (s) | per micro-batch, "
      "measured / predicted (s) | once per step, measured / predicted (s) |")
    w("|---|---|---|---|---|---|---|")
    for x in series:
        w(f"| {x['base']} | {x['stage']} | {x['ga']} | {x['measured'][0]:.3f} / {x['measured'][1]:.3f} | "
          f"{x['predicted'][0]:.3f} / {x['predicted'][1]:.3f} | {x['slope'][0]:.3f} / {x['slope'][1]:.3f} | "
          f"{x['once'][0]:.3f} / {x['once'][1]:.3f} |")
    w("")
    z2 = [x for x in series if x["stage"] == 2]
    z3 = [x for x in series if x["stage"] == 3]
    if z2 and z3:
        def per_mb(xs: list[dict[str, Any]]) -> str:
            return ", ".join(f"{x['slope'][0] / x['slope'][1] - 1:+.0%}" for x in xs)
        w(f"Per micro-batch, measured against predicted: ZeRO-2 {per_mb(z2)}, ZeRO-3 {per_mb(z3)}. ZeRO-3's "
          "micro-batches under offload differ between machines more than ZeRO-2's: "
          + _twin_spread(rows, "sft-q1.5b-full-bf16-z3off-ckpt-s2048-b4-ga4",
                         "sft-q1.5b-full-bf16-z3off-ckpt-s2048-b4@16cpu") + "; no term follows that.")
        w("")
    _memory_history_note(w, rows)
    offload_bundles = load_verify_1201((VERIFY_OFFLOAD,))
    if offload_bundles:
        w(f"The planner's own offload bundles (`{VERIFY_OFFLOAD}`: `trl-advisor generate --model 1.5B --backend "
          "deepspeed --zero 2|3 --offload optimizer` on one H200, run by `trl-advisor verify`; overlap_comm on, as "
          "the bundles write it, where the series above ran DeepSpeed's default): " + "; ".join(
              f"{e.run.name} ({e.run.knobs.get('micro_batch')} x {e.run.knobs.get('grad_accum')}) step "
              f"{_pct(e.err_step)}, peak allocated {_pct(e.err_allocated)}" for e in offload_bundles)
          + " (predicted now). Both passed verify; as predicted when they ran, before the copies were counted in "
          "series, their tokens/s were " + " and ".join(f"{x:+.1f} %" for x in _verify_tokens_errors(VERIFY_OFFLOAD))
          + " (docs/verify.md): the steps took longer than predicted, as counting the copies in series with "
          "overlap_comm on expects.")
        w("")


def _verify_tokens_errors(rel: str, root: Path = REPO) -> list[float]:
    """The tokens/s error each verify record of `rel` reported when it ran (measured against its estimate then)."""
    out = []
    for rec in _read_jsonl(root / rel):
        err = ((rec.get("verify") or {}).get("error_pct") or {}).get("tokens_per_second")
        if err is not None:
            out.append(float(err))
    return out


def _twin_spread(rows: list[Evaluated], name: str, twin: str) -> str:
    """`name`'s records per machine (results file) next to `twin`'s on the same machines, and how far apart each
    configuration's records lie."""
    by = {e.run.name: e.run for e in rows}
    a, b = by.get(name), by.get(twin)
    if a is None or b is None:
        return ""

    def machine(f: str) -> str:  # the GA series' two files are one machine's
        return OFFLOAD_GA[0] if f in OFFLOAD_GA else f

    twin_on = {machine(f): t for t, f in zip(b.step_records, b.step_files, strict=False)}
    pairs = [(f, t, twin_on[machine(f)]) for t, f in zip(a.step_records, a.step_files, strict=False)
             if machine(f) in twin_on]
    if len(pairs) < 2:
        return ""
    ones, twos = [p[2] for p in pairs], [p[1] for p in pairs]
    return (f"{name} took " + ", ".join(f"{t:.2f}" for t in twos) + f" s on {len(pairs)} machines "
            f"({max(twos) / min(twos) - 1:.0%} apart), its grad_accum-1 twin " + ", ".join(f"{t:.2f}" for t in ones)
            + f" s on the same machines ({max(ones) / min(ones) - 1:.0%} apart)")


def _memory_history_note(w, rows: list[Evaluated]) -> None:
    path = REPO / MEMORY_HISTORY
    if not path.exists():
        return
    recs = {r["name"]: r for r in _read_jsonl(path) if r.get("status") == "ok" and r.get("memory_peak")}
    pairs = [(n, n + "-ga2") for n in sorted(recs) if n + "-ga2" in recs]
    if not pairs:
        return
    by = {e.run.name: e for e in rows if e.run.status == "ok"}
    parts = []
    for one, two in pairs:
        a, b = recs[one]["memory"]["peak_allocated_bytes"], recs[two]["memory"]["peak_allocated_bytes"]
        now = by.get(two.replace("-ga2", "-ga4")) or by.get(two)
        parts.append(f"{one} {a / GIB:.2f} GiB at grad_accum 1, {b / GIB:.2f} at 2"
                     + (f" (predicted now at {now.run.knobs.get('grad_accum')}: {_pct(now.err_allocated)})"
                        if now else ""))
    w(f"Memory: ZeRO-2 offload with accumulation keeps the gradients larger than the reduce bucket on the GPU "
      f"through a micro-batch that does not step (advisor.model.states.offload_held_gradient_bytes), found with the "
      f"allocator's history (`{MEMORY_HISTORY}`, `python -m bench.run` on rows with `memory_history`, read by "
      "bench/memory_peak.py): " + "; ".join(parts) + ".")
    w("")


def _plan_quality_section(w) -> None:
    from bench import plan_quality as PQ

    summary = PQ.summarize(PQ.load_records(PQ.RESULTS))
    w("## Plan quality, measured")
    w("")
    w(f"From `{PQ.DOC}` (`python -m bench.plan_quality report`, the records in "
      + ", ".join(f"`{p}`" for p in PQ.RESULTS) + "): for each workload the planner's pick on one H200 and at least "
      f"five neighbours of its candidate space, each measured; goal: the pick at least {100 * PQ.GOAL:.0f} % of the "
      "best measured tokens/s. Those rows are also benchmark rows of the tables here (names starting with \"pq-\").")
    w("")
    for line in PQ.summary_table(summary):
        w(line)
    w("")


def _verify_1201_section(w, verify: list[Evaluated]) -> None:
    w("## Bundles run by `trl-advisor verify` on 2026-12-01")
    w("")
    w("From " + ", ".join(f"`{p}`" for p in VERIFY_1201) + ": bundles written by `trl-advisor generate` (the "
      "planner's pick unless the case pins a knob) and run by `trl-advisor verify --random-init --synthetic-data` "
      "on one H200 (transformers 5.17.0). None of them was used to fit a constant or to derive a term; they are "
      "counted in the near-capacity margin above. The plan is the one verify read back from the bundle's files; "
      "\"now\" is the model in this commit. Errors are predicted / measured - 1. A case skipped by the budget in "
      "one file and run in a later one counts once.")
    _verify_runs_table(w, verify)


def _verify_later_section(w, verify: list[Evaluated]) -> None:
    w("## Bundles run by `trl-advisor verify` since")
    w("")
    w("From " + ", ".join(f"`{p}`" for p in VERIFY_LATER) + ": the same kind of runs (planner-picked bundles, "
      "`verify --random-init --synthetic-data`, transformers 5.17.0), of workloads no calibration row ran, on one "
      "H200 and, planned for it, on one H100 (the GPU in brackets where a case ran on both); each is predicted on "
      "its own GPU's catalogue entry at the median host. Not counted in the near-capacity margin. A case's step "
      "time is the median over its records of the same plan on that GPU kind. A run that stopped before its first "
      "step for another reason than memory (verify's record says out_of_memory false) is left out: the H200 KTO "
      "case of 2026-12-03 (docs/verify.md), run again on the H100.")
    _verify_runs_table(w, verify)
    _later_host_scaled_paragraph(w)
    _gkd_draws_section(w)


def gkd_records(paths: tuple[str, ...] = VERIFY_1201 + VERIFY_LATER, root: Path = REPO) -> list[dict]:
    """Every GKD verify record that trained: its case, GPU, file, the accumulation it ran, the on-policy
    micro-batches of each timed step (gkd_drawn_counts), its timed steps as drawn and set back to the average share,
    and this commit's prediction for the plan (at the median host)."""
    from advisor.verify.onpolicy import as_average

    out = []
    for rel in paths:
        for rec in _read_jsonl(root / rel):
            v = rec.get("verify") or {}
            m = v.get("measured") or {}
            if rec.get("status") != "ok" or (v.get("plan") or {}).get("trainer") != "gkd" \
                    or not m.get("tokens_per_second"):
                continue
            plan = Plan(**{k: v["plan"][k] for k in Plan.__dataclass_fields__ if k in v["plan"]})
            model = measured_model(rec["model"])
            target = Target(gpu=resolve_gpu(rec["gpu"]), gpus_per_node=plan.gpus_per_node, nodes=plan.nodes)
            quick = v.get("quick") or {}
            ga = int(quick.get("grad_accum") or plan.grad_accum) if quick.get("quick") else plan.grad_accum
            counts = gkd_drawn_counts(rec, ga) or []
            drawn = (m.get("on_policy") or {}).get("step_seconds_as_drawn") or \
                (m.get("step_times") or {}).get("timed_step_seconds") or []
            ran = plan.with_(grad_accum=ga)
            got = as_average(list(drawn), counts, ga,
                             lambda share, ran=ran, model=model, target=target:
                             estimate_speed(model, ran, target, on_policy_share=share).step_seconds)
            if got is None:
                continue
            op = (v.get("host") or {}).get("op_seconds")
            own = estimate_speed(model, ran, target.with_(host_op_seconds=op)).step_seconds if op else None
            out.append({"case": rec["case"], "gpu": rec["gpu"], "file": rel, "grad_accum": ga,
                        "recorded": bool(m.get("on_policy")), "counts": counts, "drawn": list(drawn),
                        "average": got["adjusted_step_seconds"],
                        "predicted": estimate_speed(model, ran, target).step_seconds,
                        "op_us": op * 1e6 if op else None, "predicted_own_host": own})
    return out


def _gkd_draws_section(w) -> None:
    recs = gkd_records()
    if not recs:
        return
    w("")
    w("### GKD's on-policy draws")
    w("")
    w("GKDTrainer generates with the student for a micro-batch with probability lmbda (0.5), so a short run's steps "
      "hold as many generations as it drew (advisor/model/gkd.py). Each GKD record's timed steps, at the "
      "accumulation it ran, with the micro-batches of each that generated: recorded by train.py since it counts "
      "them, or for the records before, replayed from the draws of Python's random seeded 42 as the Trainer seeds "
      "it (tests/generate/test_train_cpu.py checks a bundle's counts are that sequence's). The median step as drawn "
      "and set back to the average share by this commit's model (what verify reports since it counts the draws), "
      "and the model's step for that accumulation at the median host, with its error against the latter, and at "
      "the record's own host where verify measured it (its 1-element op time):")
    w("")
    w("| case (GPU) | file | grad_accum run | generated per timed step | median step as drawn, s | at the average "
      "share, s | predicted, s (err) | this host: op, predicted (err) |")
    w("|---|---|---|---|---|---|---|---|")
    for r in recs:
        avg = statistics.median(r["average"])
        how = "" if r["recorded"] else " (replayed)"
        own = (f"{r['op_us']:.1f} us, {r['predicted_own_host']:.2f} ({_pct(r['predicted_own_host'] / avg - 1)})"
               if r["predicted_own_host"] else "-")
        w(f"| {r['case']} ({r['gpu']}) | `{r['file']}` | {r['grad_accum']} | {r['counts']}{how} | "
          f"{statistics.median(r['drawn']):.2f} | {avg:.2f} | {r['predicted']:.2f} ({_pct(r['predicted'] / avg - 1)}) "
          f"| {own} |")
    from advisor.model import gkd as MGKD
    from bench.gkd_probe import LOSS_PROBES, loss_bandwidth_efficiency

    eff, plain = loss_bandwidth_efficiency(), loss_bandwidth_efficiency(empty_cache=False)
    w("")
    w(f"The loss's rate is measured: `python -m bench.gkd_probe` timed TRL's generalized JSD loss, forward and "
      f"backward, over {eff['cases']} micro-batches of the catalogue's vocabularies ("
      + ", ".join(f"`{p}`" for p in LOSS_PROBES) + f"): {eff['low']:.2f}-{eff['high']:.2f} of the GPU's HBM "
      f"bandwidth as compute_loss runs it, median {eff['median']:.3f} (`LOSS_BW_EFFICIENCY`; it was 0.8, an "
      f"assumption), {plain['median']:.2f} without its empty_cache(), which adds {eff['empty_cache_share']:.0%} to the "
      "loss's time.")
    gen = [r for rel in LOSS_PROBES for r in json.loads((REPO / rel).read_text())["rows"] if r["part"] == "generation"]
    if gen:
        steps = [r["decode_step_ms"] for r in gen]
        fixed = [r["fixed_and_prefill_s"] for r in gen]
        ops = [r["host"]["nograd_op_us"] for r in gen]
        w("")
        w(f"The same probe timed GKD's generate ({len(gen)} cases: two models, 4-16 rows, with and without the KV "
          f"cache, with and without Liger): a decode step took {min(steps):.1f}-{max(steps):.1f} ms on hosts whose "
          f"1-element op took {min(ops):.1f}-{max(ops):.1f} us, set by the host's dispatch (the uncached steps were "
          f"no slower at these prompt lengths), and a call's fixed cost and prefill {min(fixed):+.3f} to "
          f"{max(fixed):+.3f} s (GENERATE_CALL_SECONDS {MGKD.GENERATE_CALL_SECONDS}).")


def later_host_scaled(paths: tuple[str, ...] = VERIFY_LATER, root: Path = REPO) -> list[dict]:
    """Every later verify record that measured its host, predicted twice by the model in this commit for the plan it
    ran: at the calibration's median host and at its own (Target.host_op_seconds = the op time verify measured), as
    verify reports both. Per record: case, GPU, file, op time (us), its timed steps' spread (%), and each error
    (predicted / measured step - 1)."""
    out = []
    for rel in paths:
        for rec in _read_jsonl(root / rel):
            v = rec.get("verify") or {}
            m, op = v.get("measured") or {}, (v.get("host") or {}).get("op_seconds")
            if rec.get("status") != "ok" or not m.get("tokens_per_second") or not v.get("plan") or not op \
                    or v["plan"].get("unsloth"):
                continue
            plan, median_host = record_speed(v["plan"], rec["model"], rec["gpu"], rel, rec["case"])
            _, own_host = record_speed(v["plan"], rec["model"], rec["gpu"], rel, rec["case"], host_op_seconds=op)
            target = Target(gpu=resolve_gpu(rec["gpu"]), gpus_per_node=plan.gpus_per_node, nodes=plan.nodes)
            step = record_step_seconds(rec, plan, measured_model(rec["model"]), target)
            out.append({"case": rec["case"], "gpu": rec["gpu"], "file": rel, "op_us": op * 1e6,
                        "spread_pct": m.get("step_seconds_spread_pct"),
                        "err_median_host": median_host.step_seconds / step - 1,
                        "err_own_host": own_host.step_seconds / step - 1})
    return out


def _err_stats(errs: list[float]) -> str:
    return f"{_pct(_median([abs(x) for x in errs]), False)} / {_pct(max(errs, key=abs))}"


def _later_host_scaled_paragraph(w) -> None:
    recs = later_host_scaled()
    if not recs:
        return
    quiet = [r for r in recs if r["spread_pct"] is not None and r["spread_pct"] <= QUIET_SPREAD_PCT]
    loud = [r for r in recs if r not in quiet]
    w("")
    trained = sum(1 for rel in VERIFY_LATER for r in _read_jsonl(REPO / rel) if r.get("status") == "ok"
                  and ((r.get("verify") or {}).get("measured") or {}).get("tokens_per_second")
                  and not ((r.get("verify") or {}).get("plan") or {}).get("unsloth"))
    w(f"Each of these records that measured its host ({len(recs)} of the {trained} that trained), predicted by this "
      "commit for the plan it ran twice, at the calibration's median host and at its "
      "own host's 1-element op time (what verify reports beside its prediction as \"this host\"), median |error| / "
      "worst, with its sign, predicted / measured step - 1:")
    w("")
    w("| records | runs | median host | this host |")
    w("|---|---|---|---|")
    for label, rs in (("all", recs), (f"timed steps within {QUIET_SPREAD_PCT:.0f} % (a host that held still)", quiet),
                      ("timed steps spread more", loud)):
        if rs:
            w(f"| {label} | {len(rs)} | {_err_stats([r['err_median_host'] for r in rs])} | "
              f"{_err_stats([r['err_own_host'] for r in rs])} |")
    w("")
    def worst(rs: list[dict], key: str) -> str:
        return _pct(max((abs(r[key]) for r in rs), default=None), False)

    w(f"On hosts that held still the estimate for the host's own op time came closer (worst "
      f"{worst(quiet, 'err_own_host')} against {worst(quiet, 'err_median_host')}); on the busy ones both missed by "
      f"more (worst {worst(loud, 'err_own_host')} against {worst(loud, 'err_median_host')}). verify judges a run on "
      "the median host's prediction and passes a host-bound plan's run inside the band around its host's too.")


PLAN_KEYS = ("trainer", "method", "backend", "zero_stage", "offload", "grad_ckpt", "liger", "seq_len", "micro_batch",
             "grad_accum", "num_generations", "max_completion_len", "ref_model")
"""The plan fields that make a verify run and a benchmark row the same configuration (with the model)."""


def configuration_key(e: Evaluated) -> tuple | None:
    """(model, the PLAN_KEYS) of a benchmark row or a verify run; None for a spot row (no plan of its own)."""
    if e.run.source == "verify":
        k = e.run.knobs
        return (k.get("model"), *(k.get(f) for f in PLAN_KEYS))
    if e.run.source != "bench":
        return None
    plan = asdict(plan_from_bench_row(e.run.knobs))
    return (e.run.knobs.get("model"), *(plan.get(f) for f in PLAN_KEYS))


def _pred_of(rows: list[Evaluated], name: str) -> float | None:
    return next((e.pred_step for e in rows if e.run.name == name), None)


def liger_twin_gaps(rows: list[Evaluated]) -> list[float]:
    """Benchmark rows measured with and without Liger, all else equal: each pair's step error with Liger less its
    error without (negative: the Liger row ran slower than the model's Liger credit says)."""
    ok = {e.run.name: e for e in rows if e.run.source == "bench" and e.run.status == "ok" and e.err_step is not None}
    return [e.err_step - ok[n.replace("-liger", "")].err_step for n, e in sorted(ok.items())
            if "-liger" in n and n.replace("-liger", "") in ok]


def between_step_gaps(results: tuple[str, ...] = RESULTS, root: Path = REPO) -> list[tuple[float, float]]:
    """Per benchmark record of measured steps: (median of its iterations' end-to-end seconds less their step
    seconds, that gap over the step), the first (warm-up) step left out. A step is timed from the Trainer's
    on_step_begin to on_step_end; its iteration from the previous step's end, so it adds the batch fetch before the
    step and the logging after the previous one, which `trl-advisor verify` (step end to step end) includes."""
    out = []
    for rel in results:
        for rec in _read_jsonl(root / rel):
            t = rec.get("timing") or {}
            steps, iters = (t.get("step_seconds") or [])[1:], (t.get("iter_seconds") or [])[1:]
            if rec.get("status") != "ok" or not steps or len(steps) != len(iters):
                continue
            gap = statistics.median(i - s for i, s in zip(iters, steps, strict=True))
            out.append((gap, gap / statistics.median(steps)))
    return out


LIGER_REFIT = {"LIGER_KERNELS_FWD_PER_LAYER": 76, "LIGER_KERNELS_BWD_PER_LAYER": 60}
"""Where `python tests/model/calibrate.py <RESULTS and SPOT> --split fit --coordinate
LIGER_KERNELS_FWD_PER_LAYER,LIGER_KERNELS_BWD_PER_LAYER --rounds 3` moved the Liger launch-equivalents (36, 64 then in
advisor.model.speed, 42, 65 since bench/liger_probe.py measured them; mean |log error| of the fit rows 0.0580 ->
0.0569): the counterfactual the report scores the
later bundles with, to tell whether Liger's host cost is what they miss."""


@contextmanager
def _constants(values: dict[str, float]):
    old = {k: getattr(S, k) for k in values}
    try:
        for k, v in values.items():
            setattr(S, k, v)
        yield
    finally:
        for k, v in old.items():
            setattr(S, k, v)


def later_verify_hosts(paths: tuple[str, ...] = VERIFY_LATER, root: Path = REPO) -> dict[tuple[str, str], dict]:
    """{(case, gpu): {"op_us": [...], "steps": [...], "records": [...]}}: the 1-element CUDA op time verify measured
    before each run (microseconds), every timed step of the case's records, and per record (file, op_us, its timed
    steps' median brought to the plan's accumulation, and their spread in %)."""
    out: dict[tuple[str, str], dict] = {}
    for rel in paths:
        for rec in _read_jsonl(root / rel):
            v = rec.get("verify") or {}
            if rec.get("status") != "ok" or not v.get("measured"):
                continue
            d = out.setdefault((rec["case"], rec.get("gpu") or ""), {"op_us": [], "steps": [], "records": []})
            op = (v.get("host") or {}).get("op_seconds")
            if op:
                d["op_us"].append(op * 1e6)
            times = v["measured"].get("step_times") or {}
            timed = times.get("timed_step_seconds") or []
            d["steps"] += timed
            # a quick-mode run accumulates fewer micro-batches per step than the plan: verify's scale brings its
            # step to the plan's (advisor/verify/quick.py), as the prediction it is set against is the plan's
            quick = v.get("quick") or {}
            scale = float(quick.get("scale") or 1.0) if quick.get("quick") else 1.0
            if timed and op:
                median = statistics.median(timed) * scale
                if (v.get("plan") or {}).get("trainer") == "gkd":  # at the average share of on-policy draws
                    plan = Plan(**{k: v["plan"][k] for k in Plan.__dataclass_fields__ if k in v["plan"]})
                    target = Target(gpu=resolve_gpu(rec["gpu"]), gpus_per_node=plan.gpus_per_node, nodes=plan.nodes)
                    median = record_step_seconds(rec, plan, measured_model(rec["model"]), target) or median
                d["records"].append({"file": rel, "op_us": op * 1e6, "median": median,
                                     "spread_pct": times.get("spread_pct"), "plan": v.get("plan"),
                                     "model": rec.get("model"), "gpu": rec.get("gpu"), "case": rec["case"]})
    return out


HOST_BOUND_SHARE = 0.5
"""A later bundle counts as host-bound where the model gives the host CPU at least this share of its step: the GRPO
/ RLOO bundles without vLLM (0.86-0.94); the GPU-bound ones read 0.01-0.24."""
QUIET_SPREAD_PCT = 5.0
"""A verify record whose timed steps spread at most this much (max / min - 1, %) ran on a host that held still;
the 2026-12-05 H100 records of the same bundles spread 17-27 %."""


def host_bound_draws(later: list[Evaluated], hosts: dict[tuple[str, str], dict]) -> list[dict]:
    """Each record of a host-bound later bundle on its own: its host's op time, its steps' spread and its error
    (predicted / the record's median timed step - 1), the prediction the model in this commit gives the plan that
    record ran (a case's plan changes where the planner's pick did) at the median host."""
    out = []
    for e in later:
        if e.host_share < HOST_BOUND_SHARE or e.err_step is None:
            continue
        # the row is named "case (gpu)" where the records hold more than one GPU kind, else "case"
        case, _, gpu = e.run.name.partition(" (")
        records = [r for (c, g), d in hosts.items() if c == case and (not gpu or g == gpu.rstrip(")"))
                   for r in d["records"]]
        for r in records:
            out.append({**{k: v for k, v in r.items() if k not in ("plan", "model", "gpu")}, "case": e.run.name,
                        # a record without its plan (none of the committed ones) is scored on the row's
                        "err": (_record_prediction(r) if r.get("plan") else e.pred_step) / r["median"] - 1})
    return out


GKD_SEED = 42
"""The bundles' --seed default: the Trainer seeds Python's random with it before GKDTrainer's per-micro-batch draws."""


def gkd_drawn_counts(rec: dict, grad_accum: int) -> list[int] | None:
    """Per timed step of a GKD verify record, the micro-batches that generated on-policy: as train.py recorded them
    (verify's measured.on_policy, bundles since count_on_policy), or for the records before it, GKDTrainer's draws
    replayed: `random.random() <= lmbda` per micro-batch from Python's random seeded GKD_SEED, steps in order from
    the first (tests/generate/test_train_cpu.py checks a bundle's counts are that sequence's)."""
    import random

    m = (rec.get("verify") or {}).get("measured") or {}
    drawn = m.get("on_policy") or {}
    if drawn.get("micro_batches_per_step"):
        return list(drawn["micro_batches_per_step"])
    times = m.get("step_times") or {}
    timed, warmup = times.get("timed_step_seconds") or [], times.get("warmup_steps")
    if not timed or not isinstance(warmup, int):
        return None
    rng = random.Random(GKD_SEED)
    steps = [sum(rng.random() <= GKD_ON_POLICY_SHARE for _ in range(grad_accum)) for _ in range(warmup + len(timed))]
    return steps[warmup:]


def record_step_seconds(rec: dict, plan: Plan, model: ModelSpec, target: Target) -> float | None:
    """A verify record's step time at the plan's accumulation, as verify brought it there (plan.tokens_per_step /
    its tokens/s). A GKD record's timed steps (as drawn) are first set back to the average share of on-policy
    micro-batches by this commit's model (advisor.verify.onpolicy.as_average, as verify does since it counts them),
    then scaled by the record's quick-mode scale."""
    v = rec.get("verify") or {}
    m = v.get("measured") or {}
    if not m.get("tokens_per_second"):
        return None
    if plan.trainer != "gkd":
        return plan.tokens_per_step / m["tokens_per_second"]
    from advisor.verify.onpolicy import as_average

    quick = v.get("quick") or {}
    ran_ga = int(quick.get("grad_accum") or plan.grad_accum) if quick.get("quick") else plan.grad_accum
    scale = float(quick.get("scale") or 1.0) if quick.get("quick") else 1.0
    seconds = (m.get("on_policy") or {}).get("step_seconds_as_drawn") or \
        (m.get("step_times") or {}).get("timed_step_seconds") or []
    counts = gkd_drawn_counts(rec, ran_ga)
    ran = plan.with_(grad_accum=ran_ga)
    got = as_average(list(seconds), counts or [], ran_ga,
                     lambda share: estimate_speed(model, ran, target, on_policy_share=share).step_seconds)
    if got is None:
        return plan.tokens_per_step / m["tokens_per_second"]
    return statistics.median(got["adjusted_step_seconds"]) * scale


def record_speed(plan_doc: dict, model_id: str, gpu: str, rel: str, case: str, host_op_seconds: float | None = None):
    """(plan, the model's speed estimate) for the plan a verify record ran (its `plan` document), on its GPU, at the
    calibration's median host or, with host_op_seconds, at that host; a record of FIXED_LENGTH_VERIFY estimated with
    the fixed-length batches it ran."""
    plan = Plan(**{k: plan_doc[k] for k in Plan.__dataclass_fields__ if k in plan_doc})
    target = Target(gpu=resolve_gpu(gpu), gpus_per_node=plan.gpus_per_node, nodes=plan.nodes,
                    host_op_seconds=host_op_seconds)
    with fixed_length_batches() if (rel, case) in FIXED_LENGTH_VERIFY else contextlib.nullcontext():
        _, spd = estimate_plan(measured_model(model_id), plan, target)
    return plan, spd


def _record_prediction(r: dict) -> float:
    """The model's step, at the median host, for the plan a verify record ran (later_verify_hosts' records)."""
    return record_speed(r["plan"], r["model"], r["gpu"], r["file"], r["case"])[1].step_seconds


def _verify_bias_section(w, rows: list[Evaluated], later: list[Evaluated]) -> None:
    timed = [e for e in later if e.err_step is not None]
    if not timed:
        return
    hosts = later_verify_hosts()
    ops = [op for d in hosts.values() for op in d["op_us"]]
    with _constants(LIGER_REFIT):
        refit = [e.err_step for e in load_verify_1201(VERIFY_LATER) if e.err_step is not None]
    from bench import kernel_terms as KT

    liger_gpu = [c["measured"]["total"] / c["model_s"]["total"] for c in KT.cases(KT.load()) if c["liger"]]
    slower = [e for e in timed if e.err_step < 0]
    bench = {}
    for e in rows:
        key = configuration_key(e)
        if key is not None and e.run.status == "ok" and e.err_step is not None:
            bench.setdefault(key, e)
    twins = [(v, bench[configuration_key(v)]) for v in timed if configuration_key(v) in bench]
    gaps = liger_twin_gaps(rows)
    steps = between_step_gaps()
    w("- Every bundle verify ran since 2026-12-01 can be set beside the benchmark. "
      f"{len(slower)} of the {len(timed)} that trained ran slower than predicted (step time "
      f"{_pct(_median([e.err_step for e in timed]))} at the median, predicted / measured - 1), where the "
      "calibration's errors centre on zero. "
      + ("Bundles of a configuration the benchmark also ran (same model and plan): "
         + "; ".join(f"{v.run.name} {_pct(v.err_step)}, the benchmark's {b.run.name} {_pct(b.err_step)}"
                     for v, b in twins) + ". " if twins else "")
      + "Run in turn on one machine, the 0.5B ZeRO-3 bundle and its benchmark row agreed (DeepSpeed ZeRO's optimizer step, profiled, "
      "above), so these pairs are runs of different days and machines. Checked and not the cause: the host's "
      f"dispatch speed (verify times it before each run: a 1-element CUDA op took {min(ops):.1f}-{max(ops):.1f} us "
      f"on these machines, against the calibration's median {S.REFERENCE_HOST_OP_SECONDS * 1e6:.2f} us); Liger's launches on the host "
      "(the benchmark's Liger rows against their twins without it: error with Liger less error without "
      f"{_pct(_median(gaps))} at the median over {len(gaps)} pairs, {_pct(min(gaps))} to {_pct(max(gaps))}; with "
      f"the Liger launch-equivalents refitted on the fit rows (LIGER_REFIT in bench/accuracy.py: "
      f"{LIGER_REFIT['LIGER_KERNELS_FWD_PER_LAYER']} and {LIGER_REFIT['LIGER_KERNELS_BWD_PER_LAYER']}) these "
      f"bundles' median would be {_pct(_median(refit))}, worst {_pct(max(refit, key=abs))}); "
      "the time between steps that the benchmark's step leaves out and verify's includes (the batch fetch, the "
      f"logging: {_pct(_median([g for _, g in steps]), False)} of the step at the median over {len(steps)} records, "
      f"{_pct(max(g for _, g in steps), False)} at most; the estimate adds the batch fetch as its data term); "
      f"Liger's kernels on the GPU (the {len(liger_gpu)} Liger micro-batches of {KT.PROBE}: measured kernel time "
      f"over the model's {min(liger_gpu):.2f}-{max(liger_gpu):.2f}).")
    _later_gpu_and_host(w, later, hosts)


def _later_gpu_and_host(w, later: list[Evaluated], hosts: dict[tuple[str, str], dict]) -> None:
    """The 2026-12-06 H100 measurements of the later bundles: the GPU's clocks under its power cap, Liger's host
    cost per decode layer, the GRPO bundle's step split, and the host-bound bundles' errors by host."""
    from bench import later_bundles as LB

    wins = LB.gpu_windows()
    gpu_bound = [x for x in wins if x["busy"] and x["capped"] >= LB.CAPPED_SHARE_GPU_BOUND * x["busy"]]
    host_bound = [x for x in wins if x not in gpu_bound]
    liger = LB.liger_decode_extra()
    gen = LB.generate_steps()
    steady = gen["steady"]
    new = gen["new_shape"]
    counted = {"phases": LB.generate_steps(LB.PHASES_COUNTERS),
               "prediction": verify_plan_prediction(LB.VERIFY_AGAIN, "new-grpo-l1b")}
    ran = verify_plan_prediction(LB.VERIFY, "new-grpo-l1b")
    draws = host_bound_draws(later, hosts)
    quiet = [d for d in draws if d["spread_pct"] is not None and d["spread_pct"] <= QUIET_SPREAD_PCT]
    loud = [d for d in draws if d not in quiet]
    board = json.loads((REPO / LB.WINDOWS).read_text())["gpu"]
    w(f"- Measured on one {board['name']} on 2026-12-06 (`{LB.SAMPLES}`, `{LB.LIGER_PROBE}`, "
      f"`{LB.PHASES}`, `{LB.VERIFY}`; bench/later_bundles.py reads them). The GPU's clocks: through the GPU-bound "
      "bundles (" + ", ".join(f"{x['case']}" for x in {x['case']: x for x in gpu_bound}.values()) + ") the board "
      f"held its {board['power_limit_watts']} W limit by its clocks "
      f"in {sum(x['capped'] for x in gpu_bound)} of {sum(x['busy'] for x in gpu_bound)} busy samples (nvidia-smi's "
      f"software power cap), the SM clock at {min(x['sm_mhz_median'] for x in gpu_bound):.0f}-"
      f"{max(x['sm_mhz_median'] for x in gpu_bound):.0f} MHz at the median (down to "
      f"{min(x['sm_mhz_min'] for x in gpu_bound):.0f}) of its {gpu_bound[0]['sm_mhz_max']} MHz, and those bundles "
      f"still read {_err_of(later, 'new-sft-l1b-4k (H100-80GB)')} and {_err_of(later, 'new-sft-g3-1b (H100-80GB)')}, "
      "so on this board the power cap does not open the gap (no calibration record has its clocks). The host-bound GRPO/RLOO bundles drew "
      f"{min(x['watts_median'] for x in host_bound):.0f}-{max(x['watts_median'] for x in host_bound):.0f} W at the "
      f"median, {sum(x['capped'] for x in host_bound)} of {sum(x['busy'] for x in host_bound)} busy samples capped, "
      f"the SM clock at {min(x['sm_mhz_median'] for x in host_bound):.0f} MHz at the "
      "median. Liger's per-call host cost in a decode step (its no_grad calls, as tiny as a decode step's input): "
      + ", ".join(f"{op} {1e6 * v['liger']:.1f} us against the eager ops' {1e6 * v['eager']:.1f} us"
                  for op, v in liger["ops"].items())
      + f"; per Llama layer (two norms, RoPE, the gated product) {1e6 * liger['layer']['liger']:.0f} us against "
      f"{1e6 * liger['layer']['eager']:.0f} us, {1e6 * liger['extra_s']:.1f} us more on a host whose op takes "
      f"{1e6 * liger['host_op_s']:.2f} us ({1e6 * liger['extra_reference_s']:.1f} us at the median host): for the "
      f"Llama-3.2-1B GRPO bundle as planned then, with Liger (16 layers, 256 decode steps), "
      f"{16 * 256 * liger['extra_reference_s']:.2f} s of its {ran['step']:.3f} s step, "
      f"{_pct(16 * 256 * liger['extra_reference_s'] / ran['step'], False)}. Both are terms now: "
      f"a Liger decode layer adds {S.LIGER_DECODE_KERNELS_PER_LAYER} decode launch-equivalents "
      "(LIGER_DECODE_KERNELS_PER_LAYER), and a Liger training layer counts "
      f"{S.LIGER_KERNELS_FWD_PER_LAYER} and {S.LIGER_KERNELS_BWD_PER_LAYER} launch-equivalents forward and backward "
      f"(36 and 64 before, an assumption that made Liger's launches cheaper than the eager ops'), all read off the "
      "probe (bench.later_bundles.liger_launch_equivalents). "
      f"That bundle's steady steps under bench/bundle_phases.py (host op {gen['host_probe']['before']['nograd_op_us']:.2f} us) took "
      f"{min(s['step_s'] for s in steady):.2f}-{max(s['step_s'] for s in steady):.2f} s, of which generate "
      f"{min(s['generate_s'] for s in steady):.2f}-{max(s['generate_s'] for s in steady):.2f} s "
      f"({min(s['ms_per_token'] for s in steady):.1f}-{max(s['ms_per_token'] for s in steady):.1f} ms per decode "
      f"step, batch {steady[0]['batch']}) and the rest "
      f"{min(s['step_s'] - s['generate_s'] for s in steady):.2f}-{max(s['step_s'] - s['generate_s'] for s in steady):.2f} s"
      f", where the model gives {ran['generation']:.2f} s and {ran['step'] - ran['generation']:.2f} s at the median host "
      "for that plan. " + "".join(
          f"The step whose batch had a shape the run had not generated before (prompts {s['prompt_tokens']} wide, "
          f"{'padded' if s['padded'] else 'unpadded'}: {s['prompt_tokens'] + s['new_tokens']} tokens, the others "
          f"{steady[0]['prompt_tokens'] + steady[0]['new_tokens']}) took {s['step_s']:.1f} s: generate "
          f"{s['generate_s']:.1f} s, the scoring forward {s['scoring_s']:.2f} s and the backward "
          f"{s['backward_s']:.2f} s against {statistics.median(t['scoring_s'] for t in steady):.2f} and "
          f"{statistics.median(t['backward_s'] for t in steady):.2f} s in the steady steps: every phase. " for s in new)
      + _new_width_sentence(LB, counted)
      + f"By host, the host-bound bundles' records (predicted / the record's median timed step - 1): on hosts that "
      f"held still (timed steps within {QUIET_SPREAD_PCT:.0f} %) "
      + ", ".join(f"{d['case']} {_pct(d['err'])} (op {d['op_us']:.1f} us)" for d in quiet)
      + "; on the others " + ", ".join(f"{d['case']} {_pct(d['err'])} (op {d['op_us']:.1f} us, steps spread "
                                       f"{d['spread_pct']:.0f} %)" for d in loud)
      + ". The host sets these steps, and the 1-element op time measures it only in part: under "
      "bench/bundle_phases.py on those quiet H100 hosts generate took "
      + ", ".join(f"{x['ratio']:.2f} of the model's median-host generation where the host's op took {x['op']:.2f} of "
                  f"the median host's (verify's host-scaled figure, the op time's ratio to the power "
                  f"{S.HOST_FACTOR_EXPONENT}: {x['op'] ** S.HOST_FACTOR_EXPONENT:.2f}; {x['what']})"
                  for x in _phases_against_model(gen, ran, counted))
      + "; verify judges a run on the median-host prediction, its speed band widened by its own steps' spread, and "
      "passes a host-bound plan's run inside that band around its host's estimate too (docs/verify.md).")


def _phases_against_model(gen: dict, ran: dict, counted: dict) -> list[dict]:
    """For each bundle_phases run of the GRPO bundle: its steady generate seconds over the model's median-host
    generation for the plan it ran, and its host's op time over the median host's."""
    out = []
    for run, pred, what in ((gen, ran, "with Liger"), (counted["phases"], counted["prediction"], "without, the plan now")):
        op = run["host_probe"]["before"]["nograd_op_us"] * 1e-6 / S.REFERENCE_HOST_OP_SECONDS
        out.append({"ratio": statistics.median(s["generate_s"] for s in run["steady"]) / pred["generation"], "op": op,
                    "what": what})
    return out


def _new_width_sentence(LB, counted: dict) -> str:
    """What a batch of a width the process has not run costs, measured (bench/shape_probe.py), and the GRPO bundle's
    run with the one-time costs' counters (bench/bundle_phases.py)."""
    every = LB.new_width_costs()
    # the eager half runs first in its process, so its new widths are new to every cache; the Liger half follows in
    # the same process and is read only for its Triton compiles and its profile
    costs = [c for c in every if not c["liger"]]
    liger = [c for c in every if c["liger"]]
    its = json.loads((REPO / LB.PHASES_COUNTERS).read_text().splitlines()[0])["iterations"]
    steady = counted["phases"]["steady"]
    pred = counted["prediction"]
    c0 = costs[0]
    text = ("Where that cost goes, measured by `python -m bench.shape_probe` (" + ", ".join(f"`{c['file']}`" for c in costs)
            + f"; Llama-3.2-1B, random weights, SDPA, a padded batch of {c0['batch']} prompts generating "
            f"{c0['new_tokens']} tokens, then a forward + backward of {c0['train_batch']} of the sequences, at prompt "
            "widths in turn): ")
    text += "; ".join(
        f"on the {c['gpu']} a call at a width the process had run before took {c['seen_generate_range_s'][0]:.2f}-"
        f"{c['seen_generate_range_s'][1]:.2f} s to generate (widths {', '.join(map(str, c['seen_widths_again']))} the "
        f"second time among them) and {c['seen_forward_backward_s']:.3f} s forward + backward at the median, and a new "
        "width more: " + ", ".join(f"{n['width']} wide {n['generate_extra_s']:+.2f} s and {n['forward_backward_extra_s']:+.2f} s"
                                   for n in c["new"])
        + f" ({sum(n['triton_kernels'] for n in c['new'])} Triton kernels compiled, "
        f"{sum(n['cuda_mallocs'] for n in c['new'])} cudaMalloc calls)" for c in costs) + ". "
    prof = [c for c in every if any(g["seen_s"] is not None for g in c["grew"])]
    if prof:
        text += ("Under torch.profiler, a new width's call then the same width again, the op whose host time grew was "
                 "cuDNN's attention: " + "; ".join(
                     f"{'with' if c['liger'] else 'without'} Liger on the {c['gpu']}, "
                     + ", ".join(f"{g['op']} {g['new_s']:.2f} s against {g['seen_s']:.2f} s" for g in c["grew"][:1])
                     for c in prof)
                 + ". PyTorch's cuDNN attention builds a cuDNN graph for each new key of sizes and strides of q, k, v "
                 "and the attention mask, and caches it (aten/src/ATen/native/cudnn/MHA.cpp, MHACacheKeyWrapper); in "
                 "generate the keys and values grow by a token each decode step, so a new prompt width can pay a "
                 "build at every step, and a width run before pays none. Triton's specialisation is the smaller part: "
                 "with Liger's kernels the first 511-wide call compiled "
                 + ", ".join(f"{sum(n['triton_kernels'] for n in c['new'] if n['width'] == 511)} Triton kernels on the "
                             f"{c['gpu']}" for c in liger) + ". ")
    text += (f"The same GRPO bundle run again on that H100 with the counters (`{LB.PHASES_COUNTERS}`, {len(its)} steps, "
             f"every batch {steady[0]['prompt_tokens']} wide and padded): {its[0]['triton_kernels_added']} Triton "
             f"kernels and {its[0]['cuda_mallocs_added']} cudaMalloc calls in the first step, then "
             f"{', '.join(str(i['cuda_mallocs_added']) for i in its[1:4])} cudaMalloc calls in the next three and "
             f"{sum(i['cuda_mallocs_added'] for i in its[4:])} after, "
             f"{sum(i.get('alloc_retries_added', 0) for i in its)} allocations retried, and the unprofiled steps after the first "
             f"{min(s['step_s'] for s in steady):.2f}-{max(s['step_s'] for s in steady):.2f} s, of which generate "
             f"{min(s['generate_s'] for s in steady):.2f}-{max(s['generate_s'] for s in steady):.2f} s, where the model "
             f"gives {pred['generation']:.2f} s and {pred['step'] - pred['generation']:.2f} s at the median host for "
             f"this plan ({'with' if pred['liger'] else 'without'} Liger, the planner's pick now; host op "
             f"{counted['phases']['host_probe']['before']['nograd_op_us']:.2f} us). A real dataset's prompts "
             "differ in width from batch to batch, so a short run on one pays such builds in many of its first steps; "
             "verify's synthetic prompts make every batch one padded width but for a batch of only the shorter prompts, "
             "as the step above. ")
    return text + _batch_shape_sentence()


def _batch_shape_sentence() -> str:
    """What the bundles do about new shapes, and the runs that chose it (bench/bundle_shapes.py)."""
    from bench import bundle_shapes as BS

    runs = BS.summary()
    costs = BS.sdpa_costs()
    gen = [c for c in costs if c["case"] == "generate"]
    masked = [c for c in costs if c["case"] == "forward_backward" and c["mask"] != "causal"]
    causal = [c for c in costs if c["case"] == "forward_backward" and c["mask"] == "causal"]

    def run(case: str) -> str:
        r = runs[case]
        return (f"{r['total_s']:.1f} s ({r['steps']} steps, the last ten {r['last10_median_s']:.3f} s at the median, "
                f"peak {r['peak_allocated_gib']:.2f} GiB)")

    def span(cs: list[dict]) -> str:
        lo, hi = min(c["change"] for c in cs), max(c["change"] for c in cs)
        return f"{lo:+.1%} to {hi:+.1%}"

    return ("The bundles bound both, as measured on rows of mixed lengths (`bash bench/bundle_shapes.sh`, "
            f"`{BS.RESULTS}`, {runs['sft-on']['gpu']}; `python -m bench.bundle_shapes`): a Qwen2.5-0.5B SFT bundle "
            f"(micro-batch 8, rows of 128-1023 tokens) took {run('sft-on')} with cuDNN attention as its batches' "
            f"widths came, {run('sft-off')} without cuDNN attention and {run('sftpad64-on')} with its batches padded "
            "to a multiple of 64 tokens, so SFT, DPO and KTO bundles now pad to a multiple of up to 64 tokens that "
            "divides seq_len (advisor/bundle/render.py pad_to_multiple_of: at most seq_len / 64 shapes, never a row "
            "longer than the estimate's); a Llama-3.2-1B GRPO bundle without vLLM (prompts of 256-512 tokens, 128 "
            f"completion tokens) took {run('grpo-on')} with cuDNN attention and {run('grpo-generate')} without it "
            "inside transformers' generate, so a bundle that generates with transformers runs generate without it "
            "(train.py generate_without_cudnn_attention); rounding the prompt widths instead leaves generate's decode "
            "steps new shapes (`python -m bench.shape_probe --liger off --widths ...`, 16 random widths of 300-512 "
            "twice, one call each of generate and forward + backward as above: "
            + "; ".join(f"{v}: {p['first_s']:.1f} s the first time, {p['again_s']:.1f} s again"
                        for v, p in BS.width_passes().items())
            + "). Training keeps it: where shapes repeat "
            f"(`python -m bench.sdpa_probe`, {', '.join(f'`{p}`' for p in BS.SDPA_PROBES)}) a forward + backward "
            f"without cuDNN attention changed by {span(masked)} with a padding mask and {span(causal)} without one, "
            f"and generate by {span(gen)}. " + _as_generated_sentence())


def _as_generated_sentence() -> str:
    """The bundles as generated against the same bundles edited back (bench/bundle_shapes.py AS_GENERATED)."""
    from bench import bundle_shapes as BS

    first = 55  # the unpadded SFT run stopped there (AS_GENERATED's note)
    runs = BS.summary(BS.AS_GENERATED, first=first)

    def run(case: str) -> str:
        r = runs[case]
        return f"{r['total_s']:.1f} s (steady {r['steady_median_s']:.3f} s at the median)"

    return (f"The bundles as generated then ran in one later call (`{BS.AS_GENERATED}`, "
            f"{runs['grpo-as-generated']['gpu']}): the SFT bundle took {runs['sft-as-generated']['first_steps_s']:.1f} s "
            f"for its first {first} steps against {runs['sft-nopad']['first_steps_s']:.1f} s with its multiple edited "
            f"away; the GRPO bundle, whose prompts and completions GRPO and RLOO bundles now also pad, each to a "
            f"multiple of up to 64 tokens that divides its budget, took {run('grpo-as-generated')} against "
            f"{run('grpo-nopad')} unpadded and {run('grpo-cudnn')} unpadded with cuDNN attention in generate, peak "
            f"allocated {runs['grpo-as-generated']['peak_allocated_gib']:.2f} GiB against "
            f"{runs['grpo-nopad']['peak_allocated_gib']:.2f}. ")


def verify_plan_prediction(rel: str, case: str, root: Path = REPO) -> dict[str, float]:
    """The model's step and generation seconds, at the median host, for the plan a verify record of `case` in `rel`
    ran (a bundle run beside it under bench/bundle_phases.py ran the same files)."""
    rec = next(r for r in _read_jsonl(root / rel) if r.get("case") == case)
    plan, spd = record_speed(rec["verify"]["plan"], rec["model"], rec["gpu"], rel, case)
    return {"step": spd.step_seconds, "generation": spd.breakdown["generation"], "liger": bool(plan.liger)}


def grpo_generation(e: Evaluated) -> float:
    """The model's generation seconds of a GRPO/RLOO row's step."""
    model = e.model
    plan = Plan(**{k: e.run.knobs[k] for k in Plan.__dataclass_fields__ if k in e.run.knobs})
    target = Target(gpu=resolve_gpu(e.run.knobs.get("gpu") or e.run.name.partition(" (")[2].rstrip(")")),
                    gpus_per_node=plan.gpus_per_node, nodes=plan.nodes)
    _, spd = estimate_plan(model, plan, target)
    return spd.breakdown["generation"]


def _verify_runs_table(w, verify: list[Evaluated]) -> None:
    w("")
    w("| case | plan | peak measured | predicted now (err) | reserved measured | predicted now | step s measured "
      "(tokens per step / tokens/s) | predicted now (err) |")
    w("|---|---|---|---|---|---|---|---|")
    for e in verify:
        if e.run.status != "ok":
            continue
        w(f"| {e.run.name} | {config_summary(e.run.knobs)} | {_gib(e.run.peak_allocated)} | {_gib(e.pred_allocated)} "
          f"({_pct(e.err_allocated)}) | {_gib(e.run.peak_reserved)} | {_gib(e.pred_reserved)} | "
          f"{_secs(e.run.step_seconds)} | {_secs(e.pred_step)} ({_pct(e.err_step)}) |")
    w("")
    oom = [e for e in verify if e.run.status != "ok"]
    if oom:
        w("Cases that did not train (out of memory; the peak verify recorded is before the failure, not the demand): "
          + "; ".join(f"{e.run.name} ({config_summary(e.run.knobs)}): predicted {_gib(e.pred_allocated)} GiB "
                      f"allocated, {'predicted to fit' if e.fits else 'predicted not to fit'}" for e in oom) + ".")
        w("")


def _stats_cells(errs: list[float] | None) -> str:
    if not errs:
        return "n/a | n/a | n/a"
    return (f"{_pct(_median([abs(x) for x in errs]), False)} | {_pct(max(errs, key=abs))} | "
            f"{_pct(min(errs))}")


def _splits_table(w, rows: list[Evaluated], lofo: list[dict[str, Any]], verify: list[Evaluated]) -> None:
    """Peak allocated and step time, side by side: the hash splits, every family left out of the speed fit in turn
    (each run predicted by the constants refitted without its family), and the bundles verify ran."""
    w("The same errors side by side with the leave-one-family-out figures (each run predicted with the speed "
      "constants refitted without its own family; below) and the bundles `trl-advisor verify` ran on 2026-12-01 "
      "(below): median and worst \\|predicted / measured - 1\\|, worst with its sign.")
    w("")
    w("| split | runs | peak allocated: median \\|err\\| | worst | step time: median \\|err\\| | worst |")
    w("|---|---|---|---|---|---|")

    def line(label: str, mem: list[float], step: list[float], n: int) -> None:
        w(f"| {label} | {n} | {_pct(_median([abs(x) for x in mem]), False)} | "
          f"{_pct(max(mem, key=abs) if mem else None)} | {_pct(_median([abs(x) for x in step]), False)} | "
          f"{_pct(max(step, key=abs) if step else None)} |")

    for split in SPLITS:
        ok = [e for e in rows if in_split(e, split) and e.run.status == "ok"]
        line(split, [e.err_allocated for e in ok], [e.err_step for e in ok if e.err_step is not None], len(ok))
    mem = [x for f in lofo for x in f["mem"]]
    step = [x for f in lofo for x in (f["step_lofo"] if f["step_lofo"] is not None else f["step_as_fitted"])]
    line("leave one family out", mem, step, len(mem))
    ok = [e for e in verify if e.run.status == "ok"]
    line("verify, 2026-12-01", [e.err_allocated for e in ok], [e.err_step for e in ok if e.err_step is not None],
         len(ok))
    w("")


def _lofo_section(w, rows: list[Evaluated], lofo: list[dict[str, Any]] | None = None) -> None:
    lofo = leave_one_family_out(rows) if lofo is None else lofo
    w("## Leave one family out")
    w("")
    w("Each model family (the model's `model_type`) in turn left out of the fit: the speed constants (`"
      + "`, `".join(_speed_constants()) + "`) refitted on the fit runs of the other families only, by the "
      f"calibration's objective (mean \\|log error\\| of step time, coordinate descent from the values in use, steps "
      f"{', '.join(f'{x:g}' for x in LOFO_STEPS)}, at most {LOFO_ROUNDS} rounds), then the left-out family's runs "
      "(every split) predicted with them. Peak allocated is the model's own error on the family: no fitted memory "
      "constant is a per-family term (`ACTIVATION_FACTOR` is held at 1.0; `RUNTIME_ALLOCATED_BYTES`, "
      f"{MC.RUNTIME_ALLOCATED_BYTES / MIB:.0f} MiB, is the largest runtime residue over the fit runs). Errors are "
      "predicted / measured - 1; worst is the largest in magnitude, with its sign.")
    w("")
    w("| family | models | runs (+ oom) | fit runs of other families | peak allocated: median \\|err\\| | worst | "
      "most negative | step time, left out: median \\|err\\| | worst | most negative | step time, as fitted: median "
      "\\|err\\| | worst | most negative |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for x in lofo:
        left_out = _stats_cells(x["step_lofo"]) if x["step_lofo"] is not None else "no other family | | "
        w(f"| {x['family']} | {', '.join(x['models'])} | {x['n']} (+ {x['n_oom']}) | {x['n_train']} | "
          f"{_stats_cells(x['mem'])} | {left_out} | {_stats_cells(x['step_as_fitted'])} |")
    w("")


def _near_plan_section(w, rows: list[Evaluated], verify: list[Evaluated] | None = None) -> None:
    d = near_plan_distribution(rows, verify)
    w("## Near capacity: the under-prediction the planner's margin comes from")
    w("")
    w(f"Runs predicted within {100 * NEAR_PLAN_FRACTION:.0f} % of the usable memory (predicted peak reserved at least "
      f"{100 * (1 - NEAR_PLAN_FRACTION):.0f} % of the GPU's capacity less the safety margin), every split: u = "
      "measured / predicted - 1, positive where the run needed more than predicted. Peak reserved is what the "
      "planner compares with its limit. A plan predicted at R survives if R (1 + u) stays within the usable memory, "
      "so covering under-predictions up to u means keeping u / (1 + u) of the usable memory free. Reported: the "
      f"{100 * UNDER_QUANTILE:.0f}th percentile of u on peak reserved, by nearest rank (with fewer than "
      f"{round(1 / (1 - UNDER_QUANTILE))} runs, the largest). The runs are the benchmark rows of every split and the "
      "bundles verify ran on 2026-12-01 (split \"verify\").")
    w("")
    u_r, u_a = d["u_reserved"], d["u_allocated"]
    if not u_r:
        w("No ok run was predicted that close to the limit.")
    else:
        margin = d["margin"]
        w(f"| quantity | runs | median u | {100 * UNDER_QUANTILE:.0f}th percentile | largest u |")
        w("|---|---|---|---|---|")
        w(f"| peak reserved | {len(u_r)} | {_pct(_median(u_r))} | {_pct(nearest_rank(u_r, UNDER_QUANTILE))} | "
          f"{_pct(max(u_r))} |")
        w(f"| peak allocated | {len(u_a)} | {_pct(_median(u_a))} | {_pct(nearest_rank(u_a, UNDER_QUANTILE))} | "
          f"{_pct(max(u_a))} |")
        w("")
        usable = d["usable"] or 0
        u_cal = MC.NEAR_CAPACITY_UNDER_PREDICTION
        w(f"Margin implied: {_pct(margin, False)} of the usable memory ({margin * usable / GIB:.1f} GiB of the "
          f"{usable / GIB:.1f} GiB usable on an H200) for plans predicted within {100 * NEAR_PLAN_FRACTION:.0f} % of "
          f"it. The planner takes it from here: `NEAR_CAPACITY_UNDER_PREDICTION` = {_pct(u_cal, False)} (this "
          f"{100 * UNDER_QUANTILE:.0f}th percentile, rounded up to 0.1 %) and `PLANNER_HEADROOM_FRACTION` = u / (1 + u) "
          f"= {_pct(MC.PLANNER_HEADROOM_FRACTION, False)} (advisor/model/calibration.py), which its limit "
          "(advisor.search.planner.planner_limit_bytes) keeps free of the whole capacity, a little more than u / "
          "(1 + u) of the usable memory. A candidate far from the limit never meets it: only plans predicted within "
          "that much of the usable memory are held back, all of them inside the 15 % band. "
          "`tests/model/test_accuracy.py` fails when the constant no longer covers this percentile.")
    w("")
    w("| run | split | configuration | predicted reserved (% of usable) | measured reserved | u reserved | "
      "u allocated |")
    w("|---|---|---|---|---|---|---|")
    for e in d["ok"]:
        w(f"| {e.run.name} | {e.run.split} | {config_summary(e.run.knobs)} | {_gib(e.pred_reserved)} "
          f"({100 * e.pred_reserved / e.usable:.0f} %) | {_gib(e.run.peak_reserved)} | "
          f"{_pct(e.run.peak_reserved / e.pred_reserved - 1)} | {_pct(e.run.peak_allocated / e.pred_allocated - 1)} |")
    for e in d["oom"]:
        w(f"| {e.run.name} (out of memory) | {e.run.split} | {config_summary(e.run.knobs)} | {_gib(e.pred_reserved)} "
          f"({100 * e.pred_reserved / e.usable:.0f} %) | - | - | at least "
          f"{_pct(e.demand_lower_bound / e.pred_allocated - 1)} |")
    w("")


HOST_BANDS = ((0.0, 0.25), (0.25, 0.75), (0.75, 1.01))


def host_band_stats(rows: list[Evaluated]) -> list[dict[str, Any]]:
    """Step-time errors of the ok rows by the share of the predicted step the host CPU sets (HOST_BANDS)."""
    out = []
    for lo, hi in HOST_BANDS:
        errs = [abs(e.err_step) for e in rows if lo <= e.host_share < hi]
        out.append({"band": (lo, hi), "n": len(errs), "median": _median(errs), "worst": max(errs) if errs else None,
                    "over_20": sum(1 for x in errs if x > 0.20)})
    return out


def _host_bound_section(w, rows: list[Evaluated]) -> None:
    stats = host_band_stats(rows)
    w("Step-time error by the share of the predicted step the host CPU sets (`host_bound_share`: kernel launches "
      "beyond the GPU's work, DeepSpeed's hooks, transformers' generate without vLLM), every split:")
    w("")
    w("| host-bound share | runs | median \\|err\\| | worst \\|err\\| | runs over 20 % |")
    w("|---|---|---|---|---|")
    for s in stats:
        lo, hi = s["band"]
        label = f"{100 * lo:.0f}-{min(100, 100 * hi):.0f} %"
        w(f"| {label} | {s['n']} | {_pct(s['median'], False) if s['n'] else '-'} | "
          f"{_pct(s['worst'], False) if s['n'] else '-'} | {s['over_20']} |")
    w("")
    again = [e.run.step_spread for e in rows if e.run.step_spread is not None and e.host_share >= MC.HOST_BOUND_NOTE_SHARE]
    w("Where the GPU sets the step, the model is within a few percent; where the host CPU does, the errors are "
      "several times larger in both directions: the same configuration measured up to "
      f"{_pct(max(again) if again else None, False)} apart on machines of one GPU kind (below), and the model knows "
      "the GPU, not the host CPU.")
    w("")


REMEASURE_RECORDS = 3
"""Records each configuration predicted at least HOST_BOUND_NOTE_SHARE host-bound should have before its step time is
read as a median: one record of such a configuration is one draw of the host (records 77 % apart, the
reproducibility table), and with three the median drops the farthest draw."""
RUN_FILLED_KEYS = ("attn_why", "est_peak_gib", "est_seconds")
"""Row fields bench.run fills in itself (attention's reason, its own estimates): left out of a rows file of rows to
measure again, so the run computes them afresh; the attention the row ran with stays pinned."""


def remeasure_rows(rows: list[Evaluated], records: int = REMEASURE_RECORDS,
                   share: float = MC.HOST_BOUND_NOTE_SHARE) -> list[dict[str, Any]]:
    """The benchmark rows to measure again, chosen by one rule whatever their error: every measured benchmark
    configuration predicted at least `share` host-bound with fewer than `records` step-time records, as it last
    ran (its record's row), one entry per record still missing, sorted by name. `python -m bench.run --rows-file`
    takes the list; run it once per round (a row's name appears once per file)."""
    out: list[dict[str, Any]] = []
    for e in sorted(rows, key=lambda e: e.run.name):
        r = e.run
        if r.source != "bench" or r.status != "ok" or not r.step_records or e.host_share < share:
            continue
        missing = records - len(r.step_records)
        if missing > 0:
            row = {k: v for k, v in r.knobs.items() if k not in RUN_FILLED_KEYS}
            out.append({**row, "name": r.name, "split": r.split, "records_missing": missing})
    return out


def remeasured(rows: list[Evaluated]) -> list[Evaluated]:
    """The ok rows measured more than once, widest spread first."""
    out = [e for e in rows if e.run.status == "ok" and e.run.step_spread is not None]
    return sorted(out, key=lambda e: (-e.run.step_spread, e.run.name))


LAST_ROUND = ("bench/results/h200-2026-12-01-remeasure-1.jsonl", "bench/results/h200-2026-12-01-remeasure-2.jsonl")
"""The re-measurement round `python -m bench.accuracy --remeasure` wrote (two commands on one machine)."""


def last_round_drift(rows: list[Evaluated], root: Path = REPO) -> dict[str, Any] | None:
    """The last round's records against the same configurations' earlier records (the median of those): how much
    slower or faster that machine was (one ratio per last-round record), and its host_probe range."""
    by_name = {e.run.name: e for e in rows if e.run.status == "ok"}
    mine: dict[str, list[float]] = {}
    ops: list[float] = []
    for path in LAST_ROUND:
        if not (root / path).exists():
            return None
        for rec in _read_jsonl(root / path):
            step = (rec.get("timing") or {}).get("median_step_seconds")
            if rec.get("name") in by_name and rec.get("status") == "ok" and step:
                mine.setdefault(rec["name"], []).append(float(step))
                ops += [p["nograd_op_us"] for p in (rec.get("host_probe") or {}).values()]
    ratios = []
    for name, steps in mine.items():
        earlier = list(by_name[name].run.step_records)
        for x in steps:
            earlier.remove(x)
        if earlier:
            ratios += [x / _median(earlier) - 1 for x in steps]
    if not ratios or not ops:
        return None
    return {"n": len(ratios), "median": _median(ratios), "low": min(ratios), "high": max(ratios),
            "op_low": min(ops), "op_high": max(ops)}


def spread_floor(spread: float) -> float:
    """The smallest worst |error| one prediction can have against two records `spread` apart (the geometric
    midpoint: sqrt(1 + s) - 1 each way)."""
    return (1 + spread) ** 0.5 - 1


def _reproducibility_section(w, rows: list[Evaluated]) -> None:
    again = remeasured(rows)
    if not again:
        return
    spreads = [e.run.step_spread for e in again]
    wide = [e for e in again if e.run.step_spread > SPREAD_WIDE]
    w("### Step time measured more than once")
    w("")
    short = remeasure_rows(rows)
    pending = (f"; still short of them: {', '.join(r['name'] for r in short)}, which the rule picks now"
               if short else "")
    w(f"{len(again)} configurations were measured on more than one machine or day (one H200 each; every GRPO/RLOO row "
      f"and every SFT row whose predicted step is at least {100 * MC.HOST_BOUND_NOTE_SHARE:.0f} % host-bound was "
      f"measured until it had {REMEASURE_RECORDS} records, the GRPO/RLOO rows with five measured steps: "
      "`python -m bench.accuracy --remeasure ROWS.json`, then `python -m bench.run --rows-file ROWS.json "
      f"--generation-steps 5`{pending}; the four ZeRO-3 + optimizer offload rows were measured a second time). "
      "Their step time in "
      "every table is the median of their records (bench/accuracy.py step_of_records); memory comes from the last "
      f"record. Spread is the largest record / the smallest - 1: median {_pct(_median(spreads), False)}, worst "
      f"{_pct(max(spreads), False)}; {len(wide)} configurations spread more than {100 * SPREAD_WIDE:.0f} %, and "
      f"against records {_pct(max(spreads), False)} apart no prediction is within "
      f"{_pct(spread_floor(max(spreads)), False)} of both.")
    w("")
    drift, probe = last_round_drift(rows), decode_probe_summary()
    if drift and probe:
        lo, hi = probe["host_us"]
        w(f"The last round ({', '.join(f'`{p}`' for p in LAST_ROUND)}: one machine, one evening) measured "
          f"{drift['n']} records of these configurations. Against the median of the same configuration's earlier "
          f"records they differed by {_pct(drift['median'])} at the median, {_pct(drift['low'])} to "
          f"{_pct(drift['high'])} (positive: slower), while that machine's 1-element CUDA op took "
          f"{drift['op_low']:.1f}-{drift['op_high']:.1f} us under no_grad (host_probe), against {lo:.1f}-{hi:.1f} us "
          "on the machine bench/decode_probe.py ran on: what makes a host slower for these steps is not its per-op "
          "dispatch alone.")
        w("")
    _host_probe_paragraph(w, rows)
    w("| run | split | host-bound share | records, s per step | spread | ours s | err vs the median | "
      "err vs each record |")
    w("|---|---|---|---|---|---|---|---|")
    for e in again:
        recs = ", ".join(f"{x:.3f}" for x in e.run.step_records)
        each = ", ".join(_pct(e.pred_step / x - 1) for x in e.run.step_records)
        w(f"| {e.run.name} | {e.run.split} | {100 * e.host_share:.0f} % | {recs} | {_pct(e.run.step_spread, False)} | "
          f"{_secs(e.pred_step)} | {_pct(e.err_step)} | {each} |")
    w("")


def decode_probe_summary(path: str = DECODE_PROBE, root: Path = REPO) -> dict[str, Any] | None:
    """Ranges over the probe's cases: kernels, GPU kernel ms and wall ms per decode step, and the host's us per
    1-element CUDA op under no_grad."""
    f = root / path
    if not f.exists():
        return None
    d = json.loads(f.read_text())
    rows = d["rows"]
    if not rows:
        return None
    host = [r["host"]["nograd_op_us"] for r in rows] + [d["host"]["nograd_op_us"]]

    def span(key: str) -> tuple[float, float]:
        return min(r[key] for r in rows), max(r[key] for r in rows)

    return {"cases": len(rows), "kernels": span("kernels_per_decode_step"), "gpu_ms": span("gpu_decode_step_ms"),
            "wall_ms": span("decode_step_ms"), "host_us": (min(host), max(host)),
            "prompts": sorted({r["prompt"] for r in rows}), "batches": sorted({r["batch"] for r in rows}),
            "models": sorted({r["model"] for r in rows}), "versions": d.get("versions", {})}


KERNEL_FLOOR_CHECK = "bench/rows/kernel-floor-2026-12-02.json"
"""GPU-bound rows of the families beyond Qwen2 (LoRA of Gemma 2 and 3, Phi-3, SmolLM2, Mistral; full Qwen3; DPO LoRA of
Qwen3), as run: holdout by design, measured before the GPU's rates were measured by kernel (bench/kernel_terms.py)."""
ZERO3_CHECK = "bench/rows/z3-decompose-2026-12-01.json"
"""The rows of ZERO3_DECOMPOSITION not measured before (one GPU without DeepSpeed, and ZeRO-3 without offload), as
run: holdout by design, chosen to take the ZeRO-3 + offload rows apart before their errors were known."""
ZERO3_DECOMPOSITION = (("smollm2-360m", "sft-sm360m-full-bf16-single-ckpt-s2048-b8", "sft-sm360m-full-bf16-z3-ckpt-s2048-b8",
                        "sft-sm360m-full-bf16-z3off-ckpt-s2048-b8"),
                       ("qwen2.5-1.5b", "sft-q1.5b-full-bf16-single-ckpt-s2048-b4", "sft-q1.5b-full-bf16-z3-ckpt-s2048-b4",
                        "sft-q1.5b-full-bf16-z3off-ckpt-s2048-b4@16cpu"))
"""One configuration on one GPU without DeepSpeed, with ZeRO-3, and with ZeRO-3 + optimizer offload: what each layer
of DeepSpeed adds to the step, from the records of one machine in one evening (ZERO3_ROUND). The Qwen2.5-1.5B offload
configuration was first measured on the 32-CPU machine, so its 16-CPU records are the run host_run_name names."""
OFFLOAD_CHECK = ("bench/rows/offload-cores-2026-12-02.json", "bench/rows/offload-stages-2026-12-02.json",
                 "bench/rows/offload-check-2026-12-02.json")
"""The ZeRO optimizer-offload rows of 2026-12-02, written down before they ran (holdout by design): the same rows with
all of one host's CPUs and with half (taskset), ZeRO-2 twins of the ZeRO-3 rows, and a last check of gradient
accumulation, a 0.5B ZeRO-2 row and the 3.8B Phi-3-mini, its predictions noted before it ran."""
FAMILY_CHECK = "bench/rows/family-check-2026-12-02.json"
"""Fifteen GPU-bound rows of the families the calibration had least of (Gemma-2 eager, Qwen3-30B-A3B and Mixtral at
reduced depth, Mistral, Phi-3, Gemma-3), written down before they ran, their split alternating fit / holdout in
the order written (so each family has both): the MoE, Phi-3 and optimizer terms were read off probes of the same
families (bench/kernel_terms.py, bench/optimizer_probe.py), not fitted to these rows."""
FAMILY_VALIDATE = "bench/rows/family-validate-2026-12-02.json"
"""Sixteen GPU-bound rows across the families (dense 1-8B, Phi-3, Gemma-2 and -3, both MoE at other depths), holdout
by design: written down, with the model's predictions (FAMILY_VALIDATE_THEN), once the family terms and the refit
were in, before they ran."""
FAMILY_VALIDATE_THEN = "bench/rows/family-validate-2026-12-02-predicted.json"


CKPT_VALIDATE = "bench/rows/ckpt-validate-2026-12-02.json"
"""Twelve checkpointed rows (full and LoRA, 0.5-8B, Llama, Qwen2/3, Mistral, Phi-3, Gemma-2/3, 1-8k tokens), holdout by
design: written down, with the model's predictions (CKPT_VALIDATE_THEN), once the recompute's early stop
(speed.recompute_skips_down_proj) was in, before they ran."""
CKPT_VALIDATE_THEN = "bench/rows/ckpt-validate-2026-12-02-predicted.json"


OTHER_GPU_RESULTS = ("bench/results/moe-lora-h100-2026-12-07.jsonl",
                     "bench/results/moe-lora-validate-h100-2026-12-07.jsonl")
"""Benchmark records of GPUs other than the H200 (each predicted on the GPU its record names: Run.gpu), kept out of
the H200 tables above and reported by the sections that name them."""
MOE_LORA_ROWS = "bench/rows/moe-lora-2026-12-07.json"
"""LoRA and QLoRA on the two MoE models at reduced depth (SFT and DPO, with and without checkpointing), written down
with the model's predictions (MOE_LORA_THEN) before they ran, when nothing counted what PEFT's lora.ParamWrapper
merges; holdout by design."""
MOE_LORA_THEN = "bench/rows/moe-lora-2026-12-07-predicted.json"
MOE_LORA_VALIDATE = "bench/rows/moe-lora-validate-2026-12-07.json"
"""New MoE LoRA/QLoRA configurations (other depths, sequence lengths, micro-batches, accumulation), written down with
the predictions of the model once the merged copies' terms were in (MOE_LORA_VALIDATE_THEN), before they ran."""
MOE_LORA_VALIDATE_THEN = "bench/rows/moe-lora-validate-2026-12-07-predicted.json"


def other_gpu_rows(paths: tuple[str, ...] = OTHER_GPU_RESULTS, root: Path = REPO) -> list[Evaluated]:
    """The benchmark runs of OTHER_GPU_RESULTS (files not there yet are skipped), each predicted on its own GPU."""
    present = tuple(p for p in paths if (root / p).exists())
    if not present:
        return []
    return evaluate([r for r in load(present, SPOT, root)[0] if r.source == "bench"])


def _moe_lora_sections(w, rows: list[Evaluated]) -> None:
    _per_gpu_predicted_section(w, rows, "LoRA on a MoE, predicted before they ran", MOE_LORA_ROWS, MOE_LORA_THEN,
                               "LoRA and QLoRA on Qwen3-30B-A3B and Mixtral-8x7B cut to 4-8 layers, SFT and DPO, "
                               "written down with the model's predictions (`{then}`) before anything counted the "
                               "expert copies PEFT merges (activations.MOE_LORA_SAVED_STACKS: found with "
                               "bench/moe_lora_probe.py on the CPU while these rows waited for a GPU; the merge's "
                               "bytes, speed.moe_lora_merge_seconds, counted by the same probe's op bytes after they "
                               "ran, which of them to count chosen with these rows in view: only the adapters' "
                               "gradient bmm in the backward gave a median of 7.5 % under)")
    _per_gpu_predicted_section(w, rows, "LoRA on a MoE, predicted by the new terms before they ran",
                               MOE_LORA_VALIDATE, MOE_LORA_VALIDATE_THEN,
                               "new MoE LoRA/QLoRA configurations (other depths, lengths, micro-batches, "
                               "accumulation, DPO with checkpointing), written down with the predictions of the model "
                               "once those terms were in (`{then}`)")


def _per_gpu_predicted_section(w, rows: list[Evaluated], title: str, rows_file: str, then_file: str,
                               what: str) -> None:
    """Rows predicted, before they ran, on each GPU kind they might run on; compared on the one they ran on."""
    then = json.loads((REPO / then_file).read_text())["predicted"]
    names = {r["name"] for r in json.loads((REPO / rows_file).read_text())}
    got = [(e, then[e.run.gpu or GPU_ID][e.run.name]) for e in rows
           if e.run.name in names and e.run.status == "ok" and e.run.step_seconds
           and e.run.name in then.get(e.run.gpu or GPU_ID, {})]
    if not got:
        return
    step_then = [p["step_seconds"] / e.run.step_seconds - 1 for e, p in got]
    mem_then = [p["peak_allocated_bytes"] / e.run.peak_allocated - 1 for e, p in got]
    gpus = " and ".join(sorted({e.run.gpu or GPU_ID for e, _ in got}))
    w(f"### {title}")
    w("")
    w(f"`{rows_file}` ({len(got)} rows, holdout): {what.format(then=then_file)}, then run on one {gpus}: as "
      f"predicted then, step time median \\|error\\| {_pct(_median([abs(x) for x in step_then]), False)}, worst "
      f"{_pct(max(step_then, key=abs))}; peak allocated median {_pct(_median([abs(x) for x in mem_then]), False)}, "
      f"worst {_pct(max(mem_then, key=abs))}. By the model now: step time median \\|error\\| "
      f"{_pct(_median([abs(e.err_step) for e, _ in got]), False)}, worst {_pct(max((e.err_step for e, _ in got), key=abs))}; "
      f"peak allocated median {_pct(_median([abs(e.err_allocated) for e, _ in got]), False)}, worst "
      f"{_pct(max((e.err_allocated for e, _ in got), key=abs))}.")
    w("")
    w("| row | GPU | step predicted then (s) | measured (s) | error then | error now | "
      "peak allocated then / now / measured (GiB) | peak error then | now |")
    w("|---|---|---|---|---|---|---|---|---|")
    for (e, p), err, merr in zip(got, step_then, mem_then, strict=True):
        w(f"| {e.run.name} | {e.run.gpu or GPU_ID} | {p['step_seconds']:.3f} | {e.run.step_seconds:.3f} | {_pct(err)} | "
          f"{_pct(e.err_step)} | {p['peak_allocated_bytes'] / GIB:.1f} / {e.pred_allocated / GIB:.1f} / "
          f"{e.run.peak_allocated / GIB:.1f} | {_pct(merr)} | {_pct(e.err_allocated)} |")
    w("")


def _family_validate_section(w, rows: list[Evaluated]) -> None:
    _predicted_then_section(w, rows, "Family rows predicted before they ran", FAMILY_VALIDATE, FAMILY_VALIDATE_THEN,
                            "GPU-bound runs of the families the terms above came from, written down with the model's "
                            "predictions (`{then}`) once those terms and the refit were in")
    _predicted_then_section(w, rows, "Checkpointed rows predicted before they ran", CKPT_VALIDATE, CKPT_VALIDATE_THEN,
                            "checkpointed runs over the families, full and LoRA, written down with the model's "
                            "predictions (`{then}`) once the recompute's early stop (recompute_skips_down_proj, "
                            "below) was in")
    _predicted_then_section(w, rows, "Offload rows with accumulation predicted before they ran", OFFLOAD_GA_ROWS,
                            OFFLOAD_GA_THEN, "ZeRO-2/3 optimizer-offload configurations at grad_accum 1, 2 and 4, "
                            "written down with the predictions of the model before the gradients' copies were "
                            "counted in series (`{then}`); the step compared is each configuration's median over "
                            "its records")
    _predicted_then_section(w, rows, "ZeRO optimizer steps predicted before they ran", ZERO_STEP_ROWS, ZERO_STEP_THEN,
                            "GPU-bound full fine-tunes of four models (Qwen2.5-0.5B, Llama-3.2-1B, Qwen3-1.7B, "
                            "Phi-3-mini), each without DeepSpeed and under ZeRO-2 (overlap_comm off and on) and ZeRO-3, "
                            "one step of each profiled, written down with the predictions of the model before the ZeRO "
                            "step's own terms (`{then}`: 40 B per parameter at MEM_BW_EFFICIENCY)")
    _predicted_then_section(w, rows, "Offload rows with accumulation predicted by the new terms before they ran",
                            OFFLOAD_GA_VALIDATE, OFFLOAD_GA_VALIDATE_THEN, "new configurations of four more models "
                            "(Gemma-3-1B, SmolLM2-1.7B, Qwen2.5-0.5B on ZeRO-2 offload, Llama-3.2-3B on ZeRO-3 "
                            "offload, grad_accum 2 and 4), written down with the predictions of the model once the "
                            "gradients' copies, the re-derived CPU step and the held-gradient phase were in (`{then}`)")


def _predicted_then_section(w, rows: list[Evaluated], title: str, rows_file: str, then_file: str, what: str) -> None:
    """Rows predicted before they ran: the prediction then, the measurement, the model's error now."""
    then = json.loads((REPO / then_file).read_text())["predicted"]
    by = {e.run.name: e for e in rows if e.run.status == "ok"}
    got = [(n, p, by[n]) for n, p in then.items() if n in by and by[n].run.step_seconds]
    if not got:
        return
    step_then = [p["step_seconds"] / e.run.step_seconds - 1 for _, p, e in got]
    mem_then = [p["peak_allocated_bytes"] / e.run.peak_allocated - 1 for _, p, e in got]
    w(f"### {title}")
    w("")
    w(f"`{rows_file}` ({len(got)} rows, holdout): {what.format(then=then_file)}, "
      f"then run on one H200: step time median \\|error\\| {_pct(_median([abs(x) for x in step_then]), False)}, "
      f"worst {_pct(max(step_then, key=abs))}; peak allocated median "
      f"{_pct(_median([abs(x) for x in mem_then]), False)}, worst {_pct(max(mem_then, key=abs))} (as predicted then).")
    w("")
    w("| row | step predicted then (s) | measured (s) | error then | error now | "
      "peak allocated then / measured (GiB) |")
    w("|---|---|---|---|---|---|")
    for (name, p, e), err in zip(got, step_then, strict=True):
        w(f"| {name} | {p['step_seconds']:.3f} | {e.run.step_seconds:.3f} | {_pct(err)} | {_pct(e.err_step)} | "
          f"{p['peak_allocated_bytes'] / GIB:.1f} / {e.run.peak_allocated / GIB:.1f} |")
    w("")


OFFLOAD_HOST_1202 = "bench/results/h200-2026-12-02-offload-16cpu.jsonl"
"""The first offload file of 2026-12-02 (bench/rows/offload-cores-2026-12-02.json, 16 CPUs, then 8)."""
ZERO3_ROUND = ("bench/results/h200-2026-12-01-z3-decompose.jsonl", "bench/results/h200-2026-12-01-z3off-again.jsonl")
"""The decomposition's records: the plain and ZeRO-3 rows' (first file) and the offload rows' (second), one machine,
one evening; the configurations' other records are other machines'."""


def _zero3_decomposition(rows: list[Evaluated]) -> str:
    by = {e.run.name: e for e in rows if e.run.status == "ok" and e.run.step_records}
    parts, tensors, modules, added = [], [], [], []
    for model, single, z3, off in ZERO3_DECOMPOSITION:
        if not all(n in by for n in (single, z3, off)):
            return ""
        a, b, c = by[single], by[z3], by[off]
        ms, mz, mo = a.run.step_in(ZERO3_ROUND[0]), b.run.step_in(ZERO3_ROUND[0]), c.run.step_in(ZERO3_ROUND[1])
        if ms is None or mz is None or mo is None:
            return ""
        tensors.append(MD.dims(b.model).tensors)
        modules.append(MD.dims(b.model).param_modules)
        added.append(mz - ms)
        parts.append(f"{model}: ZeRO-3 adds {mz - ms:.2f} s to the step measured without DeepSpeed "
                     f"({ms:.3f} -> {mz:.3f} s; predicted {b.pred_step - a.pred_step:.2f} s) and the optimizer "
                     f"offload {mo - mz:.2f} s more (predicted {c.pred_step - b.pred_step:.2f} s)")
    return (" Measured apart on one machine in one evening (bench/accuracy.py ZERO3_DECOMPOSITION): "
            + "; ".join(parts) + f". ZeRO-3's cost differs by {_pct(added[1] / added[0] - 1)} between the two "
            f"models while their parameter tensors differ by {_pct(tensors[1] / tensors[0] - 1)} ({tensors[0]} and "
            f"{tensors[1]}) and their parameter-holding modules by {_pct(modules[1] / modules[0] - 1)} ({modules[0]} "
            f"and {modules[1]}), the unit ZeRO-3's fetch hooks run per (DS_FETCH_SECONDS). The offload rows' CPU Adam "
            "follows the host's cores (16 on these 1-GPU machines, 32 on the 2-GPU one of 2026-11-29): each row is "
            "predicted on the CPUs its record says it could use (record_cpu_cores), and CPU Adam's rate per core "
            "comes from the offload rows (below).")


ZERO_HOOKS_CHECK = ("bench/rows/zero-hooks-2026-12-02.json", "bench/rows/zero-lora-2026-12-02.json",
                    "bench/rows/zero-lora-memory-2026-12-02.json", "bench/rows/zero3-norms-2026-12-03.json")
"""ZeRO-2 / ZeRO-3 on one GPU next to the same configuration without DeepSpeed, over six families, full and LoRA,
GPU-bound and host-bound micro-batches: written down before they ran to test DeepSpeed's hooks as host dispatch that a
GPU-bound micro-batch hides (advisor.model.speed.deepspeed_hook_seconds), so holdout by design (the one plain row
measured before, sft-q3b-full-bf16-single-ckpt-s4096-b4, keeps its split). The fourth file (2026-12-03) tests the
norms' share of ZeRO-3's hooks (speed.ZERO3_PERSISTENT_HOOK_FRACTION): ZeRO-3 twins of the norm-heavy families
(Gemma-2, Gemma-3, Qwen3) with a Llama pair measured before as the control, written down with the model's
predictions and the alternative's (ZERO3_NORMS_THEN) before they ran; its offload row is a third record of a
configuration measured before, not a twin."""
ZERO3_NORMS_THEN = "bench/rows/zero3-norms-2026-12-03-predicted.json"
CKPT_OVERLAP_CHECK = "bench/rows/ckpt-overlap-2026-12-03.json"
"""Four checkpointed full fine-tunes of 0.5-1.5B models next to their twins without checkpointing, the host-bound
Qwen2.5-0.5B at micro-batch 1 and a checkpointed DPO row, each step profiled (`profile_step`), to see where a
checkpointed micro-batch's time goes when host and GPU take about as long: their GPU kernel time is the model's GPU
time within milliseconds (docs/accuracy.md, 'Checkpointing's host cost', has the figure; a test holds 15 ms), the rest
is the host's. Five new configurations (holdout), the rest re-measured in their splits; measured to take the step
apart, not predicted before they ran."""
ZERO3_NORMS_ROUND = "bench/results/h200-2026-12-03-zero3-norms.jsonl"
"""The round those predictions were written for (the first; two more machines ran the ZeRO-3 pairs again)."""
ZERO_HOOKS_ROUNDS = ("bench/results/h200-2026-12-02-zero-hooks.jsonl", "bench/results/h200-2026-12-02-zero-hooks-2.jsonl",
                     "bench/results/h200-2026-12-02-zero-hooks-3.jsonl", "bench/results/h200-2026-12-02-zero-lora.jsonl",
                     "bench/results/h200-2026-12-02-zero-lora-memory.jsonl",
                     "bench/results/h200-2026-12-02-zero-lora-2.jsonl",
                     "bench/results/h200-2026-12-03-zero3-norms.jsonl",
                     "bench/results/h200-2026-12-03-zero3-norms-2.jsonl",
                     "bench/results/h200-2026-12-03-zero3-norms-3.jsonl")
"""The check's rounds, each on one machine (a fresh machine each; the third re-ran the host-bound pairs, the fourth
machine ran the LoRA pairs of the second rows file, the fifth those of the third: LoRA without checkpointing, whose
ZeRO-3 memory the fourth found under-predicted; the sixth ran the LoRA pairs of both again; the seventh the
norm-heavy twins of 2026-12-03, the eighth and ninth their ZeRO-3 pairs again
(bench/rows/zero3-norms-again-2026-12-03.json: the re-measure rule's two missing records of the Gemma-3 ZeRO-3 row,
with its twin and the other pairs, each round on a fresh machine))."""


def zero_hooks_pairs(rows: list[Evaluated], root: Path = REPO) -> list[dict[str, Any]]:
    """Each ZeRO row of ZERO_HOOKS_CHECK with its twin without DeepSpeed (same knobs but the backend): per round the
    step time ZeRO added, measured within the round's machine, against what the model predicts it adds."""
    # a row listed in two files (the control pair re-run) is one twin, as first written; an offload row is not a
    # hooks twin
    first: dict[str, dict] = {}
    for rel in ZERO_HOOKS_CHECK:
        for r in json.loads((root / rel).read_text()):
            if r.get("offload", "none") == "none":
                first.setdefault(r["name"], r)
    check = list(first.values())
    by = {e.run.name: e for e in rows if e.run.status == "ok" and e.run.step_records}

    def key(r: dict) -> tuple:
        return tuple(sorted((k, json.dumps(v)) for k, v in r.items()
                            if k not in ("backend", "zero", "name", "split", "stratum", "offload")))

    plain = {key(r): r["name"] for r in check if r["backend"] == "single"}
    out = []
    for r in check:
        if r["backend"] != "deepspeed" or r["name"] not in by or plain.get(key(r)) not in by:
            continue
        z, s = by[r["name"]], by[plain[key(r)]]
        added = [(z.run.step_in(f), s.run.step_in(f)) for f in ZERO_HOOKS_ROUNDS]
        out.append({"zero": z, "plain": s, "stage": r["zero"],
                    "added": [a - b for a, b in added if a is not None and b is not None],
                    "predicted_added": z.pred_step - s.pred_step})
    return out


def _zero_hooks_section(w, rows: list[Evaluated]) -> None:
    pairs = zero_hooks_pairs(rows)
    if not pairs:
        return
    w("### DeepSpeed's hooks, measured against the same step without DeepSpeed")
    w("")
    files = " and ".join(f"`{rel}`" for rel in ZERO_HOOKS_CHECK)
    w(f"ZeRO on one GPU next to its twin without DeepSpeed ({files}, holdout by design, {len(ZERO_HOOKS_ROUNDS)} "
      "rounds on as many machines): the step time ZeRO adds, measured within each round, against what the model "
      "predicts it adds. Where the plain step is GPU-bound the hooks hide behind the GPU's queue and ZeRO adds "
      "little; where the host sets the step they are paid in full, and the host makes them differ between machines. "
      "Peak allocated of both rows on the right (the LoRA rows: below).")
    w("")
    w("| ZeRO row | stage | plain step, host-bound share | ZeRO adds, measured (per round) | predicted | ZeRO row: "
      "step error | peak allocated error: plain / ZeRO |")
    w("|---|---|---|---|---|---|---|")
    for p in pairs:
        z, s = p["zero"], p["plain"]
        w(f"| {z.run.name} | {p['stage']} | {_secs(s.run.step_seconds)} s, {100 * s.host_share:.0f} % | "
          f"{', '.join(f'{a:+.3f}' for a in p['added'])} s | {p['predicted_added']:+.3f} s | {_pct(z.err_step)} | "
          f"{_pct(s.err_allocated)} / {_pct(z.err_allocated)} |")
    errs = [abs(p["zero"].err_step) for p in pairs if p["zero"].err_step is not None]
    w("")
    w(f"The {len(errs)} ZeRO rows: step time median \\|error\\| {_pct(_median(errs), False)}, worst "
      f"{_pct(max(errs), False)}.")

    def ratio(ps: list[dict[str, Any]]) -> str:
        got = [_median(p["added"]) / p["predicted_added"] for p in ps if p["added"] and p["predicted_added"] > 0]
        return f"{min(got):.2f}-{max(got):.2f}" if got else "-"

    lora = [p for p in pairs if p["zero"].run.knobs["method"] == "lora" and p["stage"] == 3]
    ck = [p for p in lora if p["zero"].run.knobs["grad_ckpt"]]
    no = [p for p in lora if not p["zero"].run.knobs["grad_ckpt"]]
    if ck and no:
        w(f"LoRA under ZeRO-3: with checkpointing ZeRO-3 added {ratio(ck)} times what the model predicts, without it "
          f"{ratio(no)} times: the adapters' lora_A / lora_B modules are counted as modules the hooks fetch in every "
          "pass, and without checkpointing that is too much; which part of their fetch the hooks skip is not "
          "measured apart.")
    w("")


def _zero_step_section(w) -> None:
    """DeepSpeed ZeRO's optimizer step as bench.zero_step_terms derives it from the profiled rows."""
    from bench import zero_step_terms as Z

    got = Z.pairs()
    if not got:
        return
    derived = Z.derive()
    w("### DeepSpeed ZeRO's optimizer step, profiled")
    w("")
    w(f"`python -m bench.zero_step_terms` reads `{ZERO_STEP_ROWS}`'s records (one H200, one step of each row under "
      "torch.profiler): each ZeRO row against the same step without DeepSpeed. Step GPU is the kernel time ZeRO adds "
      "plus the optimizer step the model counts for the plain row (the step ZeRO replaces); host gap is how much more "
      "of the step the GPU spent idle (the step less its kernel time). The ZeRO-2 rows give `DS_STEP_BYTES_PER_PARAM` "
      f"= {derived['DS_STEP_BYTES_PER_PARAM']:g} B at the elementwise rate and `DS_STEP_KERNEL_SECONDS_PER_TENSOR` = "
      f"{derived['DS_STEP_KERNEL_SECONDS_PER_TENSOR']:g} s (least squares) and `DS_STEP_HOST_SECONDS_PER_TENSOR` = "
      f"{derived['DS_STEP_HOST_SECONDS_PER_TENSOR']:g} s (median); the ZeRO-3 rows' host gap holds their fetch hooks "
      "too, so they take the GPU terms only.")
    w("")
    w("| ZeRO row | stage | trainable params (B) | tensors | step GPU (ms) | model now (ms) | host gap (ms) | "
      "step added, measured (ms) |")
    w("|---|---|---|---|---|---|---|---|")
    from advisor.model.bench_rows import plan_from_bench_row

    rows_by = {r["name"]: r for r in json.loads((REPO / ZERO_STEP_ROWS).read_text())}
    gpu = resolve_gpu(GPU_ID)
    for r in got:
        row = rows_by.get(r["name"])
        now = ""
        if row is not None:
            plan = plan_from_bench_row(row)
            d = MD.dims(measured_model(row["model"]))
            now = f"{S.zero_step_gpu_seconds(d, plan, Target(gpu=gpu, gpus_per_node=1, nodes=1)) * 1e3:.1f}"
        w(f"| {r['name']} | {r['stage']} | {r['params'] / 1e9:.2f} | {r['tensors']} | {r['step_gpu_s'] * 1e3:.1f} | "
          f"{now} | {r['host_gap_s'] * 1e3:.1f} | {r['added_step_s'] * 1e3:.1f} |")
    w("")
    _zero_bundle_gap(w)


def _median_steps(rel: str) -> dict[str, tuple[float, float]]:
    """(median step, median iteration) seconds of each record of `rel`, the warm-up step left out."""
    out = {}
    for rec in _read_jsonl(REPO / rel):
        t = rec.get("timing") or {}
        if rec.get("status") == "ok" and len(t.get("step_seconds", [])) > 1:
            out[rec["name"]] = (statistics.median(t["step_seconds"][1:]), statistics.median(t["iter_seconds"][1:]))
    return out


HOST_SHARE_BANDS = ((0.0, 0.3), (0.3, 0.7), (0.7, 1.01))


def probed_records(rows: list[Evaluated], root: Path = REPO) -> list[tuple[Evaluated, float, float, float, str]]:
    """(row, the record's median step after its first, the record's 1-element no_grad CUDA op in seconds (the mean
    of host_probe before and after), the model's step for that host: Target.host_op_seconds set to it, the results
    file) for every record of RESULTS that measured the host's dispatch speed."""
    by = {e.run.name: e for e in rows if e.run.status == "ok" and e.run.step_seconds}
    gpu = resolve_gpu(GPU_ID)
    out = []
    for rel in RESULTS:
        for rec in _read_jsonl(root / rel):
            probe, steps = rec.get("host_probe") or {}, (rec.get("timing") or {}).get("step_seconds") or []
            e = by.get(rec.get("name"))
            if rec.get("status") != "ok" or e is None or not probe.get("before") or len(steps) < 2:
                continue
            ops = [p["nograd_op_us"] for p in (probe["before"], probe.get("after") or probe["before"])]
            op = statistics.mean(ops) * 1e-6
            plan = plan_from_bench_row(e.run.knobs)
            target = Target(gpu=gpu, gpus_per_node=plan.gpus_per_node, nodes=plan.nodes, cpu_cores=e.run.cpu_cores,
                            software=run_software(e.run), host_op_seconds=op)
            with _as_benchmarked(e.run.lora_dropout):
                _, spd = estimate_plan(e.model, plan, target)
            out.append((e, statistics.median(steps[1:]), op, spd.step_seconds, rel))
    return out


def host_probe_fit(records: list[tuple[Evaluated, float, float, float, str]]) -> dict[str, Any]:
    """How a record's step follows its host's measured dispatch speed. Within each configuration with two or more
    probed records: the correlation (and least-squares slope) of the record's log step against its log op time, both
    less the configuration's mean, by predicted host-bound share. And each record's |error| against the model's step
    for the calibration's median host and for the record's own (advisor.model.speed.host_factor), over all records,
    over those at least half host-bound, and round by round (each results file with three or more of those: one
    machine's round of measurements)."""
    groups: dict[str, list[tuple[Evaluated, float, float, float, str]]] = {}
    for r in records:
        groups.setdefault(r[0].run.name, []).append(r)
    bands = []
    for lo, hi in HOST_SHARE_BANDS:
        xs, ys = [], []
        for recs in groups.values():
            if len(recs) < 2 or not lo <= recs[0][0].host_share < hi:
                continue
            lx, ly = [math.log(r[2]) for r in recs], [math.log(r[1]) for r in recs]
            xs += [x - statistics.mean(lx) for x in lx]
            ys += [y - statistics.mean(ly) for y in ly]
        if len(xs) >= 5 and statistics.pstdev(xs) > 0 and statistics.pstdev(ys) > 0:
            sxy = sum(x * y for x, y in zip(xs, ys, strict=True))
            bands.append({"band": (lo, hi), "records": len(xs), "slope": sxy / sum(x * x for x in xs),
                          "r": sxy / math.sqrt(sum(x * x for x in xs) * sum(y * y for y in ys))})
    errs: dict[str, list[float]] = {"as is": [], "scaled": [], "as is, host": [], "scaled, host": []}
    by_round: dict[str, tuple[list[float], list[float]]] = {}
    for e, step, _op, host_step, rel in records:
        plain, scaled = abs(e.pred_step / step - 1), abs(host_step / step - 1)
        errs["as is"].append(plain)
        errs["scaled"].append(scaled)
        if e.host_share >= 0.5:
            errs["as is, host"].append(plain)
            errs["scaled, host"].append(scaled)
            got = by_round.setdefault(rel, ([], []))
            got[0].append(plain)
            got[1].append(scaled)
    rounds = [(statistics.median(a), statistics.median(b)) for a, b in by_round.values() if len(a) >= 3]
    return {"bands": bands, "reference_op_s": statistics.median(r[2] for r in records), "records": len(records),
            "groups": len(groups), "rounds": len(rounds), "rounds_better": sum(1 for a, b in rounds if b < a),
            "rounds_worse_most": max((b - a for a, b in rounds), default=0.0),
            "errors": {k: {"n": len(v), "median": statistics.median(v), "p90": nearest_rank(v, 0.9), "worst": max(v)}
                       for k, v in errs.items() if v}}


def _host_probe_paragraph(w, rows: list[Evaluated]) -> None:
    records = probed_records(rows)
    if len(records) < 10:
        return
    fit = host_probe_fit(records)
    e = fit["errors"]
    if not fit["bands"] or "as is, host" not in e:
        return
    bands = "; ".join(f"{100 * b['band'][0]:.0f}-{min(100, 100 * b['band'][1]):.0f} %: r = {b['r']:+.2f}, slope "
                      f"{b['slope']:.2f} over {b['records']} records" for b in fit["bands"])
    w(f"Over every record that measured its host (bench/host_probe.py, {fit['records']} records of "
      f"{fit['groups']} configurations; the 1-element CUDA op under no_grad took {fit['reference_op_s'] * 1e6:.2f} us "
      "at the median), a configuration's records follow their host's op time, the more closely the more host-bound "
      f"the step (log step against log op time within each configuration, by predicted host-bound share: {bands}). "
      "With that op time as each record's Target.host_op_seconds (advisor.model.speed.host_factor: the step's host "
      f"terms scaled by (op / median) ** {S.HOST_FACTOR_EXPONENT}, the exponent the most host-bound band's slope) "
      "each record's |error| goes from "
      f"{_pct(e['as is']['median'], False)} to {_pct(e['scaled']['median'], False)} at the median "
      f"(90th percentile {_pct(e['as is']['p90'], False)} to {_pct(e['scaled']['p90'], False)}), and over the "
      f"{e['as is, host']['n']} records at least half host-bound from {_pct(e['as is, host']['median'], False)} to "
      f"{_pct(e['scaled, host']['median'], False)} (90th percentile {_pct(e['as is, host']['p90'], False)} to "
      f"{_pct(e['scaled, host']['p90'], False)}, worst {_pct(e['as is, host']['worst'], False)} to "
      f"{_pct(e['scaled, host']['worst'], False)}): the host's per-op speed explains part of the machines' spread, "
      "and a configuration's records still differ by more than it. Round by round it is no rule: of the "
      f"{fit['rounds']} results files with three or more such records, the median |error| falls in "
      f"{fit['rounds_better']} and rises in the others, by up to {100 * fit['rounds_worse_most']:.0f} points. So "
      "`trl-advisor verify` times the op on its machine before the run (advisor/verify/hostspeed.py) and reports "
      "the model's step for that host beside its prediction, and judges the run against the median host's, as "
      "every table here predicts every record and as generate does for a machine it has not measured; a plan "
      "predicted mostly host-bound also passes inside the band around its host's estimate (since 2026-12-06, "
      "the later bundles by host below)."
      + _host_verify_sentence())
    w("")


def _host_verify_sentence(root: Path = REPO) -> str:
    """The four bundles a host-judging verify ran: tokens/s error against the median host's and the host's estimate."""
    path = root / HOST_VERIFY
    if not path.exists():
        return ""
    cells, worse = [], 0
    for rec in _read_jsonl(path):
        v = rec.get("verify") or {}
        m, h = (v.get("measured") or {}).get("tokens_per_second"), v.get("host") or {}
        nominal, here = h.get("nominal_tokens_per_second"), (v.get("predicted") or {}).get("tokens_per_second")
        if not (m and nominal and here and h.get("op_seconds")):
            continue
        a, b = m / nominal - 1, m / here - 1
        worse += abs(b) > abs(a)
        cells.append(f"{rec['case']} {_pct(a)} / {_pct(b)} ({h['op_seconds'] * 1e6:.1f} us)")
    if not cells:
        return ""
    return (f" A verify that judged by the host's estimate instead ran the 0.5B bundles on one machine (`{HOST_VERIFY}`:"
            f" tokens/s against the median host's / this host's estimate, and the op time it measured): "
            f"{'; '.join(cells)}; the host's estimate was the further in {worse} of {len(cells)}.")


def _zero_bundle_gap(w) -> None:
    """The planner's bundles of the same configurations, run by verify, against the benchmark's records."""
    bundles = {rec["case"]: rec for rec in _read_jsonl(REPO / VERIFY_ZERO)} if (REPO / VERIFY_ZERO).exists() else {}
    if not bundles:
        return
    bench = _median_steps(ZERO_STEP_RESULTS)
    client = _median_steps(ZERO_CLIENT)
    base = "sft-q0.5b-full-bf16-{}-nockpt-liger-s1024-b64"
    # verify case -> (the benchmark's row as the bundle runs it, the client-optimizer file's row of it)
    cases = {"sft-0.5b-full": (base.format("single"), base.format("single")),
             "sft-0.5b-zero2": (base.format("z2") + "-oc", base.format("z2") + "-oc-client"),
             "sft-0.5b-zero3": (base.format("z3"), base.format("z3") + "-client")}
    w(f"The planner's own bundles of the Qwen2.5-0.5B configuration (`{VERIFY_ZERO}`: `trl-advisor generate --model "
      "0.5B [--backend deepspeed --zero 2|3]`, run by `trl-advisor verify` after these terms were in; a bundle times "
      "each optimizer step from the end of the one before, so its figure holds the data path and the logging the "
      "benchmark's step leaves out, which its iteration holds) against the benchmark's records of the same "
      f"configuration (`{ZERO_STEP_RESULTS}`) and the same rows with the bundles' client optimizer (`{ZERO_CLIENT}`, "
      "another machine; its row without DeepSpeed has no optimizer to hand over):")
    w("")
    w("| bundle | verify: step (s), tokens/s error | benchmark: step / iteration (s) | client-optimizer file: "
      "step / iteration (s) |")
    w("|---|---|---|---|")
    gaps = []
    for case, (bench_name, client_name) in cases.items():
        rec = bundles.get(case)
        if rec is None:
            continue
        v = rec["verify"]
        b, c = bench.get(bench_name), client.get(client_name)
        if b and case != "sft-0.5b-full":
            gaps.append(v["measured"]["step_seconds_median"] - b[1])
        w(f"| {case} | {v['measured']['step_seconds_median']:.3f}, {v['error_pct']['tokens_per_second']:+.1f} % | "
          + (f"{b[0]:.3f} / {b[1]:.3f}" if b else "-") + " | " + (f"{c[0]:.3f} / {c[1]:.3f}" if c else "-") + " |")
    w("")
    own, handed = client.get(base.format("z2") + "-oc"), client.get(base.format("z2") + "-oc-client")
    if gaps and own and handed:
        w(f"Handing the Trainer's optimizer to DeepSpeed costs ZeRO-2 {1e3 * (handed[0] - own[0]):.0f} ms a step (same "
          f"machine); the bundles' DeepSpeed steps took {min(gaps):.2f}-{max(gaps):.2f} s longer than the benchmark's "
          "iteration of the same configuration.")
        w("")
    _bundle_phases(w, gaps)


def _bundle_step(doc: dict, warmup: int = 2) -> tuple[float, float]:
    """(median step, median iteration) seconds of one bench.bundle_phases run: the first `warmup` steps (ZeRO-3's
    trace, advisor/verify/limits.py WARMUP_MICRO_BATCHES) and the profiled ones left out."""
    its = [i for i in doc["iterations"][warmup:] if not i.get("profiled")]
    return statistics.median(i["step_s"] for i in its), statistics.median(i["iter_s"] for i in its)


def _bench_z3_steps(rel: str, name: str, warmup: int = 2) -> list[float]:
    """The steps after ZeRO-3's two warm-up steps of each record of `name` in `rel`."""
    return [s for rec in _read_jsonl(REPO / rel) if rec.get("name") == name and rec.get("status") == "ok"
            for s in rec["timing"]["step_seconds"][warmup:]]


def _bundle_phases(w, gaps: list[float]) -> None:
    """Where the bundles' DeepSpeed difference went: bench.bundle_phases' timings of the bundles' own launches."""
    path = REPO / BUNDLE_PHASES
    if not path.exists():
        return
    docs = _read_jsonl(path)
    z3 = "sft-q0.5b-full-bf16-z3-nockpt-liger-s1024-b64"
    by_machine: dict[str, list[dict]] = {}
    for d in docs:
        if d["bundle"] == "sft-0.5b-zero3":
            by_machine.setdefault(d["machine"], []).append(d)
    plain = {m: [_bundle_step(d)[0] for d in ds if "zero3_init_flag" not in d["variant"]]
             for m, ds in by_machine.items()}
    no_init = [_bundle_step(d)[0] for d in by_machine.get("m2", []) if "zero3_init_flag" in d["variant"]]
    with_init = [_bundle_step(d)[0] for d in by_machine.get("m2", []) if "zero3_init_flag" not in d["variant"]]
    m1_bench = _bench_z3_steps(ZERO_CLIENT_2, z3) + _bench_z3_steps(ZERO_CLIENT_2, z3 + "-client")
    m3_bench = _bench_z3_steps(ZERO3_INTERLEAVED, z3 + "-client")
    m3_bundle = [s for d in by_machine.get("m3", []) for s in
                 (i["step_s"] for i in d["iterations"][2:] if not i.get("profiled"))]
    fetches, linears = {}, {}
    for d in by_machine.get("m2", []):
        for prof in d.get("profiles") or []:
            if prof["kind"] == "cprofile":
                top = {r["function"].rsplit(":", 1)[-1]: r["calls"] for r in prof["top"]}
                fetches[d["variant"]] = top.get("_fetch_sub_module_impl")
            else:
                linears[d["variant"]] = next((o["calls"] for o in prof["ops"]
                                              if o["name"] == "LinearFunctionForZeroStage3"), 0)
    if not (gaps and plain.get("m1") and plain.get("m2") and m3_bench and m3_bundle and no_init and with_init):
        return
    med = statistics.median
    apart = [med(v) for v in plain.values() if v]
    w(f"Where that went (`{BUNDLE_PHASES}`: `bench/bundle_phases.py` runs a bundle's train.py unchanged under its own "
      "`accelerate launch` and ds_config.json, timing the batch fetch, the forward, DeepSpeed's backward and step and "
      "the logging of each step, and can profile one): the 0.5B ZeRO-3 bundle's step, median after the two warm-up "
      f"steps, took {med(plain['m1']):.3f} s on one machine (m1, where the benchmark's rows of the configuration "
      f"had run minutes before at {min(m1_bench):.3f}-{max(m1_bench):.3f} s, `{ZERO_CLIENT_2}`), "
      f"{med(plain['m2']):.3f} s on a second machine and {med(m3_bundle):.3f} s on a third. On the third, bundle and "
      f"benchmark record ran in turn, three times each (`{ZERO3_INTERLEAVED}`): the benchmark's steps "
      f"{med(m3_bench):.3f} s median ({min(m3_bench):.3f}-{max(m3_bench):.3f}), the bundle's {med(m3_bundle):.3f} s "
      f"({min(m3_bundle):.3f}-{max(m3_bundle):.3f}), {100 * (med(m3_bundle) / med(m3_bench) - 1):+.1f} %. On the "
      f"second, the bundle with zero3_init_flag false took {med(no_init):.3f} s against {med(with_init):.3f} s with "
      "it, and a profiled step of each makes the same calls (ZeRO-3's fetch "
      f"{' / '.join(str(c) for c in fetches.values())} times, DeepSpeed's LinearFunctionForZeroStage3 "
      f"{' / '.join(str(c) for c in linears.values())} times: DeepSpeed 0.19.8 routes every linear through it "
      "whichever way the model was partitioned). Interleaved, bundle and benchmark agree; apart, the same bundle's "
      f"step ranged {min(apart):.3f}-{max(apart):.3f} s over three machines of one kind and day "
      f"({100 * (max(apart) / min(apart) - 1):.0f} %): the {min(gaps):.2f}-{max(gaps):.2f} s above is of that kind, the variance of a step "
      "the host sets, not a cost of the bundles' path, and verify's speed band carries the run's own spread for it "
      "(docs/verify.md).")
    w("")


def _zero3_norms_section(w, rows: list[Evaluated]) -> None:
    """The norm-heavy ZeRO-3 twins of 2026-12-03: the step predicted before they ran by the model then (norms counted
    as whole modules) and by the alternative they tested (norms at no fetch), the measurement, and the model now."""
    then = json.loads((REPO / ZERO3_NORMS_THEN).read_text())
    by = {e.run.name: e for e in rows if e.run.status == "ok"}
    round_file = ZERO3_NORMS_ROUND
    got = [(n, p, by[n]) for n, p in then["predicted"].items() if n in by and by[n].run.step_in(round_file)]
    if not got:
        return
    w("### ZeRO-3's hooks on norm-heavy families, predicted before they ran")
    w("")
    w(f"`{ZERO_HOOKS_CHECK[-1]}` (one machine): the step the model predicted then (every parameter-holding module "
      f"fetched at DS_FETCH_SECONDS) and the alternative written down with it (`{ZERO3_NORMS_THEN}`: the modules "
      "whose parameters all stay gathered, the norms, at no fetch), against this machine's record; 'now' is the "
      f"model with the norms at the fraction bench/zero3_hook_probe.py measured "
      f"(ZERO3_PERSISTENT_HOOK_FRACTION = {S.ZERO3_PERSISTENT_HOOK_FRACTION}), against the configuration's "
      "median record.")
    w("")
    w("| row | persistent / parameter-holding modules | measured that round (s) | then: model | then: alternative | "
      "now (against the median record) |")
    w("|---|---|---|---|---|---|")
    for name, p, e in got:
        m = e.run.step_in(round_file)
        alt = then["alternative"][name]["step_seconds"]
        d = MD.dims(e.model)
        w(f"| {name} | {d.persistent_modules} / {d.param_modules} | {m:.3f} | {p['step_seconds']:.3f} "
          f"({_pct(p['step_seconds'] / m - 1)}) | {alt:.3f} ({_pct(alt / m - 1)}) | {e.pred_step:.3f} "
          f"({_pct(e.err_step)}) |")
    w("")


def _zero3_lora_memory(rows: list[Evaluated]) -> str:
    """The ZeRO-3 LoRA rows' peak allocated, the one class of run whose memory is not modelled yet: with
    checkpointing (TRL forces reentrant checkpointing for PEFT + ZeRO-3, sft_trainer.py) and without."""
    found = [e for e in rows if e.run.status == "ok" and e.run.knobs.get("backend") == "deepspeed"
             and e.run.knobs.get("zero") == 3 and e.run.knobs.get("method") == "lora"
             and e.run.knobs.get("offload") == "none"]
    ck = sorted((e for e in found if e.run.knobs.get("grad_ckpt")), key=lambda e: e.err_allocated)
    no = sorted((e for e in found if not e.run.knobs.get("grad_ckpt")), key=lambda e: e.err_allocated)
    if not ck or not no:
        return ""

    def cells(es: list[Evaluated]) -> str:
        return ", ".join(f"{e.model.id} {_pct(e.err_allocated)}" for e in es)

    full_z3 = [abs(e.err_allocated) for e in rows if e.run.status == "ok" and e.run.knobs.get("backend") == "deepspeed"
               and e.run.knobs.get("zero") == 3 and e.run.knobs.get("method") == "full"]
    lora_single = [abs(e.err_allocated) for e in rows if e.run.status == "ok" and e.run.knobs.get("method") == "lora"
                   and e.run.knobs.get("backend") == "single"]

    return ("- ZeRO-3 with LoRA, peak allocated (twins of 2026-12-02): DeepSpeed's memory-efficient linear "
            "(LinearFunctionForZeroStage3, on under ZeRO-3) saves the frozen base Linears' inputs, which plain LoRA "
            "does not (advisor.model.activations.linear_inputs_saved_bytes), and while a decoder layer runs the "
            "module ZeRO-3 holds gathered is a layer's, not the frozen embedding (advisor.model.buffers."
            f"zero3_live_param_bytes, in_layers). Both counted: without checkpointing {cells(no)}; with the "
            f"reentrant checkpointing TRL forces for PEFT + ZeRO-3 {cells(ck)}; LoRA without DeepSpeed is within "
            f"{_pct(max(lora_single), False)} and ZeRO-3 full fine-tunes within {_pct(max(full_z3), False)} (worst "
            "\\|error\\| of each); "
            + ("none of these runs was near capacity." if not any(near_capacity(e) or e.near_plan for e in found)
               else "some of these runs were near capacity."))


def _err_of(rows: list[Evaluated], name: str) -> str:
    for e in rows:
        if e.run.name == name and e.err_step is not None:
            return _pct(e.err_step)
    return "n/a"


def _step_in_file(rows: list[Evaluated], name: str, rel: str) -> float | None:
    """The step time run `name`'s record from results file `rel` measured (None without one)."""
    for e in rows:
        if e.run.name == name:
            return e.run.step_in(rel)
    return None


def _err_alloc_of(rows: list[Evaluated], name: str) -> float | None:
    for e in rows:
        if e.run.name == name and e.run.status == "ok":
            return e.err_allocated
    return None


DECODE_OPS = "bench/results/decode-ops-cpu-2026-12-05.json"
DECODE_PROFILE_PADDED = ("bench/results/decode-probe-h100-2026-12-05.json",
                         "bench/results/decode-probe-h100-2026-12-05-qwen25.json")
"""`python -m bench.decode_probe --padded both` on one H100 (transformers 5.17), two sessions: profiled decode steps,
padded and not, of the same batches."""
"""bench/decode_ops.py: the kernels of one decode step of generate, unpadded and padded, counted on the CPU."""


def _padded_decode_text(root: Path = REPO) -> str:
    """The padded decode step's terms (speed.decode_padding_kernels, decode_kv_passes) with the counts they rest on."""
    data = json.loads((root / DECODE_OPS).read_text(encoding="utf-8"))
    rows = data["rows"]
    per_layer = sorted({r["padded"]["kernels_per_layer"] - r["unpadded"]["kernels_per_layer"] for r in rows})
    per_step = sorted({r["padded"]["kernels_per_step"] - r["unpadded"]["kernels_per_step"] for r in rows})
    share = [r["padded"]["kernels_at_full_depth"] / r["unpadded"]["kernels_at_full_depth"] - 1 for r in rows]
    return (f" The benchmark's completions run to full length on prompts of one length, so its batches carry no mask; "
            f"a real GRPO/RLOO batch is padded, and a padded decode step launches more: {DECODE_OPS} "
            f"(transformers {data['versions']['transformers']}, {len(rows)} models) counts "
            f"{'-'.join(f'{x:g}' for x in per_layer)} kernels more per layer and "
            f"{per_step[0]:g}-{per_step[-1]:g} more per step (the mask, and one more `.item()` sync), "
            f"{_pct(min(share), False)}-{_pct(max(share), False)} more in all; before transformers "
            f"{'.'.join(map(str, S.PACK_GQA_SINCE))} a GQA model's masked decode step also copies K and V to every "
            "query head (repeat_kv). Both are terms of the estimate for padded batches "
            "(advisor.model.speed.decode_padding_kernels, decode_kv_passes); the rows here are predicted as they ran, "
            "unpadded." + _padded_profile_text(root))


def _padded_profile_text(root: Path) -> str:
    """The padding term against the kernels a padded batch added to profiled decode steps on a GPU."""
    files = [json.loads((root / f).read_text(encoding="utf-8")) for f in DECODE_PROFILE_PADDED]
    parts = []
    for data in files:
        target = Target(gpu=resolve_gpu("H100-80GB"), gpus_per_node=1, nodes=1,
                        software={"transformers": data["versions"]["transformers"]})
        rows = {(r["model"], r["batch"], r["padded"]): r for r in data["rows"]}
        for (model, batch, padded), r in sorted(rows.items()):
            plain = rows.get((model, batch, False))
            if not padded or plain is None:
                continue
            plan = Plan(trainer="grpo", method="full", lora_r=16, backend="single", zero_stage=0, offload="none",
                        offload_device="cpu", precision="bf16", seq_len=r["prompt"] + 256, micro_batch=batch,
                        grad_accum=1, grad_ckpt=False, liger=False, attn="sdpa", packing=False, sp_size=1,
                        cp_size=1, num_processes=1, nodes=1, gpus_per_node=1, num_generations=8,
                        max_completion_len=256)
            counted = S.decode_padding_kernels(MD.dims(measured_model(model)), plan, target)
            parts.append(f"{model} x {batch}: {plain['kernels_per_decode_step']:g} -> "
                         f"{r['kernels_per_decode_step']:g} kernels "
                         f"(+{r['kernels_per_decode_step'] - plain['kernels_per_decode_step']:g}; term: +{counted}), "
                         f"step {plain['decode_step_ms']:.1f} -> {r['decode_step_ms']:.1f} ms")
    versions = sorted({d["versions"]["transformers"] for d in files})
    gpus = sorted({d["gpu"] for d in files})
    return (f" Profiled on {', '.join(gpus)} (transformers {', '.join(versions)}; "
            f"{', '.join(DECODE_PROFILE_PADDED)}), a padded batch changed a decode step: " + "; ".join(parts) + ".")


def _generation_terms_text(rows: list[Evaluated], verify: list[Evaluated]) -> str:
    """bench/generation_terms.py's candidates, as a sentence: each one's worst holdout error next to the model's."""
    from bench import generation_terms as GT

    cands = GT.compare(GT.generation_rows([e for e in rows + verify if e.run.status == "ok"]))
    base, others = cands[0], cands[1:]
    parts = [f"{c['candidate']} {_pct(c['worst']['holdout'], False)}" for c in others]
    return ("Each candidate term of `python -m bench.generation_terms`, fitted with the decode constants on the fit "
            "rows' generation time by least squares, against its form without one (holdout worst "
            f"{_pct(base['worst']['holdout'], False)}): " + ", ".join(parts) + " (holdout worst); none is added, "
            "as none does better on the rows it was not fitted on by more than one point.")


def _generation_gap(w, rows: list[Evaluated], verify: list[Evaluated]) -> None:
    gen = [e for e in rows if e.run.status == "ok" and e.err_step is not None
           and e.run.knobs.get("trainer") in ("grpo", "rloo")]
    errs = [e.err_step for e in gen]
    ho = [e.err_step for e in gen if e.run.split == "holdout"]
    probe = decode_probe_summary()
    by_name = {e.run.name: e for e in gen}
    check = []
    for name, then in GENERATION_CHECK_THEN.items():
        e = by_name.get(name)
        if e is not None:
            check.append(f"{_pct(then / e.run.step_seconds - 1)} then, {_pct(e.err_step)} now")
    text = ("- GRPO/RLOO generation without vLLM is bound by the host CPU. ")
    if probe:
        text += (f"bench/decode_probe.py timed transformers' generate as TRL calls it ({', '.join(probe['models'])}, "
                 f"prompts of {' and '.join(map(str, probe['prompts']))} tokens, "
                 f"{' and '.join(map(str, probe['batches']))} sequences, {DECODE_PROBE}): one decode step launched "
                 f"{probe['kernels'][0]:,.0f}-{probe['kernels'][1]:,.0f} kernels and kept the GPU busy "
                 f"{probe['gpu_ms'][0]:.1f}-{probe['gpu_ms'][1]:.1f} ms of its {probe['wall_ms'][0]:.0f}-"
                 f"{probe['wall_ms'][1]:.0f} ms, whatever the prompt length, and a 1-element CUDA op took "
                 f"{probe['host_us'][0]:.0f}-{probe['host_us'][1]:.0f} us on that host. ")
    text += (f"Measured again on 2026-12-01 machines (the table above), a GRPO/RLOO configuration's records spread up "
             f"to {_pct(max((e.run.step_spread or 0.0) for e in gen), False)}, and consecutive steps of one run spread "
             "too (docs/verify.md, speed tolerance): the host CPU, which the GPU's name does not tell, sets this step time. On the medians, the two "
             "generation constants refitted (DECODE_LAUNCH_SECONDS, GENERATE_CALL_SECONDS: the constants these records "
             "inform; the calibrate command of Fitted constants, run on every speed constant but BNB_MATMUL_SECONDS "
             f"(its note), finds the others at their optimum), the {len(gen)} GRPO/RLOO runs are within "
             f"{_pct(_median([abs(x) for x in errs]), False)} "
             f"median, {_pct(max(errs, key=abs))} worst ({len(ho)} holdout: worst {_pct(max(ho, key=abs) if ho else None)}). "
             + _generation_terms_text(rows, verify))
    text += _padded_decode_text()
    if check:
        text += (f" The four rows of {GENERATION_CHECK} (Llama-3.2-1B at 1.5k tokens, Qwen3-1.7B with 8 completions "
                 "of 192 tokens, RLOO on Qwen2.5-1.5B, Qwen2.5-0.5B at 2.5k tokens without checkpointing), predicted "
                 "before they ran: " + "; ".join(check) + ".")
    w(text)


def render_markdown(report: Report) -> str:
    rows = report.rows
    stats = {s: split_stats(rows, s) for s in SPLITS}
    out: list[str] = []
    w = out.append
    w("# Accuracy of the memory and speed model")
    w("")
    w("Generated by `python -m bench.accuracy --write` from "
      + ", ".join(f"`{r}`" for r in RESULTS) + f" and `{SPOT}`. Do not edit by hand: "
      "`tests/model/test_accuracy.py` fails when this file is not what the data and the model give.")
    w("")
    w("Each measured run is one H200 running one TRL 1.16 configuration (random-weight model, synthetic data). "
      "**Memory** is the peak of `torch.cuda.max_memory_allocated()` over model load, trainer setup and the measured "
      "steps; **step time** is the median of the measured optimizer steps (of a configuration measured more than "
      "once, the median of its records' medians: below, step time measured more than once). \"Ours\" is "
      "`advisor.model.estimate.estimate_plan(model, plan_from_bench_row(row), Target(H200))`: `per_gpu_peak_bytes`, "
      "`per_gpu_reserved_bytes`, `step_seconds`. Errors are predicted / measured - 1 (positive: over-prediction).")
    w("")
    w("Splits: **fit** = the benchmark rows whose hash put them in the fit split plus the spot measurements; the "
      "FITTED constants were fitted on these rows only. **holdout** = the benchmark's held-out rows (a quarter of each "
      "family, chosen by a hash of the name), never used for fitting. **all** = both.")
    w("")

    # --- targets
    w("## Targets")
    w("")
    w("| target | fit | holdout | all |")
    w("|---|---|---|---|")
    tg = {s: targets(stats[s]) for s in SPLITS}
    labels = (
        ("memory_median", f"peak allocated: median \\|error\\| <= {100 * MEMORY_MEDIAN_TARGET:.0f}%", False),
        ("memory_worst", f"peak allocated: worst \\|error\\| <= {100 * MEMORY_WORST_TARGET:.0f}%", False),
        ("near_capacity_under", f"near capacity (reserved >= {100 * NEAR_CAPACITY:.0f}% of the GPU, or OOM): no "
                                f"under-prediction worse than {100 * NEAR_CAPACITY_UNDER_TARGET:.0f}% "
                                "(worst signed error shown)", True),
        ("time_median", f"step time: median \\|error\\| <= {100 * TIME_MEDIAN_TARGET:.0f}%", False),
    )
    for key, label, signed in labels:
        w(f"| {label} | " + " | ".join(_target_cell(*tg[s][key], signed=signed) for s in SPLITS) + " |")
    w("")
    w("Issue 14's goals, on the same splits, on the bundles verify ran on 2026-12-01 (never used to fit or to "
      "derive a term) and on every bundle verify ran since (VERIFY_LATER in bench/accuracy.py: planner-picked plans "
      "of workloads no calibration row ran, on one H200 and, planned for it, on one H100; each predicted on its own "
      "GPU by the model in this commit). Near capacity here: runs that reached 90 % of the GPU or were predicted "
      "within 15 % of the usable memory, and the OOM runs (demand lower bound); the step-time ratio is the tokens/s "
      "ratio inverted.")
    w("")
    w("| goal | fit | holdout | all | verify, 2026-12-01 | verify, since |")
    w("|---|---|---|---|---|---|")
    groups = ([[e for e in rows if in_split(e, sp)] for sp in SPLITS] + [report.verify_rows]
              + [report.later_verify_rows])
    gl = [goals(g) for g in groups]
    goal_labels = (
        ("memory_median", f"peak allocated: median \\|error\\| <= {100 * GOALS['memory_median']:.0f}%", False),
        ("memory_worst", f"peak allocated: worst \\|error\\| <= {100 * GOALS['memory_worst']:.0f}%", False),
        ("near_capacity_under", f"near capacity: no under-prediction worse than "
                                f"{100 * GOALS['near_capacity_under']:.0f}% (worst signed error shown)", True),
        ("time_median", f"step time: median \\|error\\| <= {100 * GOALS['time_median']:.0f}%", False),
        ("time_worst", f"step time: worst \\|error\\| <= {100 * GOALS['time_worst']:.0f}%", False),
    )
    for key, label, signed in goal_labels:
        w(f"| {label} | " + " | ".join(_target_cell(*g[key], signed=signed) for g in gl) + " |")
    w("")
    n_near_ok = stats["all"]["n_near_ok"]
    w(f"Near capacity: {n_near_ok} ok run(s) reached {100 * NEAR_CAPACITY:.0f}% of the GPU "
      f"({NEAR_CAPACITY * (rows[0].run.torch_total or 0) / GIB:.1f} GiB reserved of "
      f"{(rows[0].run.torch_total or 0) / GIB:.1f} GiB); the criterion is evaluated on those and on the "
      f"{stats['all']['n_oom']} runs that ran out of memory, whose measured demand is a lower bound: the allocated "
      "bytes at the failure plus the failed request (the true peak was at least that).")
    w("")

    # --- summary
    w("## Summary")
    w("")
    w("| split | runs | ours: median \\|err\\| | ours: worst \\|err\\| (run) | ours: most negative err | "
      "near capacity, worst signed: ours / accelerate / DeepSpeed | reserved: median / worst | "
      "accelerate: median / worst (n) | DeepSpeed: median / worst (n) | step time: median / worst (run) |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for s in SPLITS:
        st = stats[s]
        w(f"| {s} | {st['n']} ok + {st['n_oom']} oom | {_pct(st['mem_median'], False)} | "
          f"{_pct(st['mem_worst'], False)} ({st['mem_worst_row']}) | {_pct(st['mem_under'])} | "
          f"{_pct(st['near_worst_under'])} / {_pct(st['acc_near_under'])} / {_pct(st['ds_near_under'])} | "
          f"{_pct(st['res_median'], False)} / {_pct(st['res_worst'], False)} | "
          f"{_pct(st['acc_median'], False)} / {_pct(st['acc_worst'], False)} ({st['acc_n']}) | "
          f"{_pct(st['ds_median'], False)} / {_pct(st['ds_worst'], False)} ({st['ds_n']}) | "
          f"{_pct(st['time_median'], False)} / {_pct(st['time_worst'], False)} ({st['time_worst_row']}) |")
    w("")
    lofo = leave_one_family_out(rows)
    _splits_table(w, rows, lofo, report.verify_rows)
    _lofo_section(w, rows, lofo)
    _near_plan_section(w, rows, report.verify_rows)
    _plan_quality_section(w)
    st = stats["all"]
    w(f"Fit / no-fit verdicts: {st['fits_ok']} of {st['n']} ok runs predicted to fit; {st['fits_oom']} of "
      f"{st['n_oom']} OOM runs predicted not to fit. accelerate under-predicts {st['acc_under']} of {st['acc_n']} "
      f"runs it gives a figure for, DeepSpeed {st['ds_under']} of {st['ds_n']}: neither counts activations, so "
      "they are low whenever activations dominate and high for LoRA (they count every parameter as trained).")
    w("")
    w("![predicted vs measured](accuracy.png)")
    w("")

    # --- rows
    w("## Every measured run")
    w("")
    w("Memory in GiB (2^30 bytes), time in seconds. accelerate: `accelerate estimate-memory` \"Training using "
      "Adam\" for the model's dtype (N/A: it prints N/A for int4, the QLoRA base). DeepSpeed: the GPU figure of its "
      "own estimator for the run's stage and offload, and for runs without DeepSpeed the ZeRO-2 no-offload figure "
      "(see Baselines).")
    w("")
    w("| run | split | configuration | measured | ours | err | peak phase | accelerate | err | DeepSpeed | err | "
      "measured s | ours s | err |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for e in rows:
        if e.run.status != "ok":
            continue
        k = dict(e.run.knobs)
        if e.run.source == "spot":
            k["lora_dropout"] = e.run.lora_dropout
        name = e.run.name + (" (spot)" if e.run.source == "spot" else "")
        w(f"| {name} | {e.run.split} | {config_summary(k)} | {_gib(e.run.peak_allocated)} | "
          f"{_gib(e.pred_allocated)} | {_pct(e.err_allocated)} | {e.phase} | {_gib(e.accelerate)} | "
          f"{_pct(e.err_accelerate)} | {_gib(e.deepspeed)} | {_pct(e.err_deepspeed)} | "
          f"{_secs(e.run.step_seconds)} | {_secs(e.pred_step)} | {_pct(e.err_step)} |")
    w("")

    # --- OOM
    w("## Runs that ran out of memory")
    w("")
    w("| run | split | configuration | allocated at failure | failed request | demand >= | ours: allocated | "
      "ours: reserved | usable (capacity - margin) | predicted to fit |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for e in rows:
        if e.run.status != "oom":
            continue
        margin = int(MC.SAFETY_MARGIN_FRACTION * resolve_gpu(GPU_ID).memory_bytes)
        w(f"| {e.run.name} | {e.run.split} | {config_summary(e.run.knobs)} | {_gib(e.run.peak_allocated)} | "
          f"{_gib(e.run.failed_request)} | {_gib(e.demand_lower_bound)} | {_gib(e.pred_allocated)} "
          f"({_pct(e.pred_allocated / e.demand_lower_bound - 1)}) | {_gib(e.pred_reserved)} | "
          f"{_gib(e.capacity - margin)} | {'yes (wrong)' if e.fits else 'no (right)'} |")
    w("")

    # --- constants
    w("## Fitted constants")
    w("")
    w("The few constants declared FITTED in `advisor/model/calibration.py` and `advisor/model/speed.py`, fitted on "
      "the fit split only (one value per constant for every run; no per-run terms). The memory constants were fitted "
      "on the first file; the later files' rows left them as they were (their corrections are terms read from the "
      "libraries' source, not fitted values). The speed constants were refitted jointly on the fit rows of every "
      "file (issue 14), except BNB_MATMUL_SECONDS (its note says why); after the 2026-12-01 re-measurements, the two "
      "generation constants alone (known gaps); on 2026-12-02, once the GPU's rates were measured by kernel (below), "
      "every host-side constant here, BNB_MATMUL_SECONDS included; not since the checkpointed recompute's early stop "
      "and the norms' share of ZeRO-3's hooks (2026-12-03): a joint refit then would move DS_FETCH_SECONDS to about "
      "1.0e-3, where bench/zero3_hook_probe.py times 7.3e-4 per partitioned module and pass on the H200 host, and "
      "make the holdout worse (DS_FETCH_SECONDS' note); nor since the forward's share of checkpointing's host cost "
      "is measured (`CKPT_FORWARD_SHARE`, below). Each constant's docstring has the evidence. To check the generation "
      "constants are at their optimum, and to see what the others would move to: `python tests/model/calibrate.py "
      + " ".join(RESULTS) + f" {SPOT} --split fit --coordinate DECODE_LAUNCH_SECONDS,GENERATE_CALL_SECONDS` (then "
      "`--coordinate " + ",".join(n for mod, n, *_ in FITTED if mod is S) + "`).")
    w("")
    w("| constant | module | value | before calibration | fitted against |")
    w("|---|---|---|---|---|")
    for mod, name, seed, unit, how in FITTED:
        w(f"| `{name}` | {mod.__name__} | {_fmt_value(getattr(mod, name), unit)} | {_fmt_value(seed, unit)} | "
          f"{how} |")
    w("")
    w("Left at their written values (adding them to the joint speed fit lowers its objective by about 3%, too "
      "little to be worth more fitted values): " + ", ".join(f"`{n}` = {getattr(S, n)!r}" for n in UNCHANGED)
      + ".")
    w("")
    _kernel_section(w, rows)
    _checkpoint_dispatch_section(w, rows)
    _family_validate_section(w, rows)
    _moe_lora_sections(w, report.other_gpu_rows)
    _offload_section(w, rows)
    _offload_ga_section(w, rows)
    ctx = [e.run.nvml_overhead for e in rows if e.run.nvml_overhead is not None and e.run.split == "fit"]
    if ctx:
        w(f"`CUDA_CONTEXT_BYTES` evidence: NVML used - max_memory_reserved over the {len(ctx)} fit benchmark rows: "
          f"{min(ctx) / MIB:.0f} to {max(ctx) / MIB:.0f} MiB (NVML's total, the catalogue's H200 memory, includes "
          "the memory the driver holds before any process).")
        w("")

    # --- largest errors
    w("## Largest remaining errors")
    w("")
    worst_mem = sorted((e for e in rows if e.run.status == "ok"), key=lambda e: -abs(e.err_allocated))[:5]
    worst_t = sorted((e for e in rows if e.run.status == "ok" and e.err_step is not None),
                     key=lambda e: -abs(e.err_step))[:5]
    w("| quantity | run | split | error |")
    w("|---|---|---|---|")
    for e in worst_mem:
        w(f"| peak allocated | {e.run.name} | {e.run.split} | {_pct(e.err_allocated)} |")
    for e in worst_t:
        w(f"| step time | {e.run.name} | {e.run.split} | {_pct(e.err_step)} |")
    w("")
    _host_bound_section(w, [e for e in rows if e.run.status == "ok" and e.err_step is not None])
    _zero_hooks_section(w, rows)
    _zero_step_section(w)
    _zero3_norms_section(w, rows)
    _reproducibility_section(w, rows)
    w("Known gaps, by family:")
    w("")
    fam_cells = []
    for fam in ("gemma2", "gemma3_text", "phi3", "mistral", "qwen3", "mixtral", "qwen3_moe"):
        errs = [e.err_step for e in rows if e.family == fam and e.run.status == "ok" and e.err_step is not None]
        if errs:
            fam_cells.append(f"{fam} {_pct(_median([abs(x) for x in errs]), False)} ({len(errs)})")
    w("- Speed of the families beyond Qwen2 and Llama, median \\|error\\| (runs): " + ", ".join(fam_cells) + ". "
      "With one fitted GPU ceiling they ran 12-24 % too fast: it stood for Qwen2's mix of GEMM and elementwise work; "
      "with the GPU's rates measured by kernel and the families probe's terms (above: Gemma-2's soft-capping, "
      "Phi-3's strided ops, the MoE masks), their profiled micro-batches are within 5 %. What is left: the MoE "
      "models' grouped GEMMs run faster and their routing's elementwise work slower than modelled (the two nearly "
      "cancel in the profiles), and Gemma-3-1B's optimizer step (340 tensors for 1B parameters) takes half again the "
      "bandwidth term's time.")
    w("- Checkpointed full fine-tunes under bf16-mixed (fp32 weights with autocast) still run faster than predicted "
      f"({_err_of(rows, 'sft-q1.5b-full-bf16m-single-ckpt-s4096-b4')} and "
      f"{_err_of(rows, 'sft-q3b-full-bf16m-single-ckpt-s8192-b2')}), where the bf16 ones are now within a few "
      "per cent (the checkpointed rows predicted before they ran, above): the recompute's early stop "
      "(recompute_skips_down_proj) is counted, the recomputed forward's autocast weight casts are counted as in the "
      "first forward, and which of them the recompute skips is not measured apart. Qwen2.5-0.5B with Liger runs slower than "
      f"predicted ({_err_of(rows, 'sft-q0.5b-full-bf16-single-nockpt-liger-s4096-b4')}; its profiled micro-batch "
      "is within 2 %): part of TRL's step outside the micro-batch that the probe does not separate.")
    w("- DeepSpeed's step time scatters in both directions (ZeRO-3 0.5B with checkpointing "
      f"{_err_of(rows, 'sft-q0.5b-full-bf16-z3-ckpt-s1024-b8')}, ZeRO-3 + offload 360M "
      f"{_err_of(rows, 'sft-sm360m-full-bf16-z3off-ckpt-s2048-b8')}, the verify bundle ZeRO-3 0.5B "
      f"{_err_of(report.verify_rows, 'sft-0.5b-zero3')}): its hooks are host CPU time (DS_FETCH_SECONDS, "
      "DS_GRAD_HOOK_SECONDS, dispatch that a GPU-bound micro-batch hides: the twins below), and the host differs "
      "between machines. The part2 file's DeepSpeed rows are also the only transformers 5.24 rows (the rest ran "
      "5.17), so the step data alone cannot show a term for the transformers version; the one term that depends on "
      "it, the MoE sentinel masks, was read from the two releases' code and the profile (above)."
      + _zero3_decomposition(rows))
    lora_z3 = _zero3_lora_memory(rows)
    if lora_z3:
        w(lora_z3)
    w("- Optimizer offload follows the host: the same ZeRO-3 offload row took "
      f"{_secs(_step_in_file(rows, 'sft-q1.5b-full-bf16-z3off-ckpt-s2048-b4@16cpu', ZERO3_ROUND[1]))} s on the "
      "16-CPU host of 2026-12-01 and "
      f"{_secs(_step_in_file(rows, 'sft-q1.5b-full-bf16-z3off-ckpt-s2048-b4@16cpu', OFFLOAD_HOST_1202))} s on "
      "that of 2026-12-02, and the model cannot see the difference (one CPU-step rate per host CPU count; its held-"
      "out-host errors are in the offload section above). ZeRO-2 offload's peak allocated is under-predicted on "
      f"Llama-3.2-1B ({_pct(_err_alloc_of(rows, 'sft-l1b-full-bf16-z2off-ckpt-s2048-b8'))}): its staging buffer "
      "explains the other models' gap, not this one's. Gemma-3-1B's ZeRO-3 offload step "
      f"({_err_of(rows, 'sft-g3-1b-full-bf16-z3off-ckpt-s2048-b4')} on 16 CPUs) is over-predicted by its ZeRO-3 "
      "hooks, not its CPU step: the model's other terms alone exceed the measured step. The largest offload row, "
      "Phi-3-mini (3.8B parameters, about 61 GB of pinned fp32 state on a host of 125 GB), ran slower than "
      f"predicted ({_err_of(rows, 'sft-phi3mini-full-bf16-z3off-nockpt-s1024-b4')}); whether the CPU step per "
      "parameter grows with the state's size, or that host was slow, one row cannot tell.")
    _generation_gap(w, rows, report.verify_rows)
    _verify_bias_section(w, rows, report.later_verify_rows)
    w("- Peak reserved of ZeRO runs is under-predicted by 10-25 % on small models: the step's flat fp32/16-bit "
      "buffers come from new allocator segments, not from the activations' freed blocks. The allocator frees its "
      "cache before it fails, and near capacity the ZeRO rows measured reserved within +1.1 %, so this is not an OOM "
      "risk; it is left unmodelled.")
    w("- Checkpointing's host cost per layer (`CKPT_LAYER_SECONDS`) is one measured constant, while the probe's "
      "cases spread 0.7-3.7 ms per layer between models and between its two hosts; the checkpointed runs the host "
      "sets follow that spread (the table under 'Checkpointing's host cost, measured').")
    lora = [e.err_step for e in rows if e.run.status == "ok" and e.err_step is not None
            and e.run.knobs.get("method") == "lora" and not e.run.knobs.get("grad_ckpt")
            and e.run.knobs.get("backend") == "single"]
    w("- LoRA without checkpointing on one GPU: PEFT's work around each adapter is counted from its kernels and the "
      "adapters' GEMMs as memory-bound (the probe's LoRA micro-batches within 5 %), and TRL's LoRA step costs "
      "LORA_STEP_SECONDS_PER_TENSOR more outside them, measured but not traced to its source; these runs' median "
      f"\\|error\\| is {_pct(_median([abs(x) for x in lora]), False)} ({len(lora)} runs), worst "
      f"{_pct(max(lora, key=abs))}.")
    w("- Peak reserved memory (allocator fragmentation) is the loosest part: reserved - allocated ranges from 0.1 to "
      "8 GiB between runs of similar size, and two constants can only follow its average.")
    w("- The DeepSpeed rows (second file) led to three corrections, each read from DeepSpeed 0.19.8's source and "
      "then checked against the rows: the ZeRO-1/2 step holds a flat 16-bit copy of the gradient partition next to "
      "its fp32 conversion (fit rows: ZeRO-2 0.5B and 3B, 0.9 and 5.8 GiB low before); ZeRO-3 keeps its gradient "
      "partition in the model's dtype, not fp32, and its step converts one optimizer sub-group (at most 1e9 "
      "elements) at a time (fit rows: ZeRO-3 0.5B and 1.5B peak in the step); the largest gathered module's "
      "gradient is not counted a second time when that module is the LM head / embedding, whose gradient the "
      "logits transient already holds. That last one was found while reading the two ZeRO-3 + optimizer offload "
      "rows, which are holdout rows: for that term they are not blind (12.2 % and 10.8 % before it, 4.4 % and "
      "5.8 % after).")
    w("- The benchmark rows use one GPU and no vLLM. Multi-GPU plans are checked by the bundles below.")
    w("")
    _issue14_section(w, report)

    # --- baselines
    w("## Baselines")
    w("")
    w("Implemented from their source as pure functions in `bench/baselines.py`:")
    w("")
    w("- **accelerate** 1.15 `accelerate estimate-memory` (src/accelerate/commands/estimate.py): "
      "`estimate_training_usage` on the model's fp32 size; the table's \"Training using Adam\" cell is the *max* of "
      "model, gradients, optimizer and step, not their sum: 8 bytes per parameter for float16 (used for the bf16 "
      "models: the CLI has no bfloat16 choice and treats them alike), 16 for float32 (the bf16-mixed runs load fp32 "
      "weights), N/A for int4. No activations, no batch size or sequence length, no LoRA.")
    w("- **DeepSpeed** 0.19.8 `estimate_zero2_model_states_mem_needs` (runtime/zero/stage_1_and_2.py) and "
      "`estimate_zero3_model_states_mem_needs` (runtime/zero/stage3.py), GPU figure, world size 1, with the run's "
      "offload setting. For runs without DeepSpeed, which it has no estimator for, its column is the ZeRO-2 "
      "no-offload formula 2P + 18P/N = 20 bytes per parameter: the estimator users reach for. Model states only; "
      "all parameters counted as trained.")
    w("")

    # --- data
    w("## Data")
    w("")
    g = report.gpu
    w(f"- GPU: {g.get('name')}, driver {g.get('driver')}, compute capability {g.get('capability')}; torch reports "
      f"{g.get('torch_total_bytes')} bytes ({(g.get('torch_total_bytes') or 0) / GIB:.1f} GiB), NVML "
      f"{g.get('nvml_total_bytes')} bytes; CUDA {g.get('torch_cuda')}, Python {g.get('python')}.")
    for path, vers in report.versions.items():
        w(f"- Versions in `{path}`: " + ", ".join(f"{k} {v}" for k, v in sorted(vers.items())) + ".")
    w(f"- Benchmark rows: `{report.command}` (bench/README.md; the time budget is the one the skipped rows record). "
      "The runs' exact TRL arguments are in each record's `resolved` field (LoRA r16, alpha 32, dropout 0.05, "
      "all-linear; AdamW states in the model's dtype). The second file's rows ran on a 2 x H200 machine, one row per "
      "GPU at a time in two lanes: `bash bench/gpu_checks.sh OUT_DIR`. The 2026-12-01 files (issue 14's rows: "
      "`bench/matrix.py` `_family_rows`, and the plan-quality rows of `python -m bench.plan_quality rows`) ran on "
      "one H200 with `bash bench/calibration_run.sh OUT_DIR SECONDS`, in parts whose budget skipped the rest; "
      "each later part measures what an earlier one skipped.")
    w(f"- Spot rows (SFT, qwen2.5-0.5b / 1.5b, same GPU and stack per tests/model/test_measured.py): "
      f"`{report.spot_command}`. Left out: " + (", ".join(report.excluded_spot) or "none")
      + " (reentrant checkpointing is not a plan knob).")
    w("")
    if report.not_measured:
        w("Rows that measured nothing:")
        w("")
        w("| run | split | status | reason |")
        w("|---|---|---|---|")
        for name, split, status, reason in report.not_measured:
            w(f"| {name} | {split} | {status} | {reason.replace('|', '/')} |")
        w("")
    else:
        w("Every row of the matrix measured something (the two 2026-12-01 rows earlier budgets skipped, the GRPO row "
          "with 16 completions and the checkpointed micro-batch 64, ran in the part4 file).")
        w("")
    w("In the first file the DeepSpeed rows failed before training: DeepSpeed 0.19.8's op builder could not parse "
      "TORCH_CUDA_ARCH_LIST=\"9.0a\" (set by the machine's image) while JIT-building FusedAdam "
      "(deepspeed/ops/op_builder/builder.py compute_capability_args; rule DS012). The second file measures them "
      "again with the suffix stripped; the last record of a name counts.")
    w("")
    _verify_section(w)
    _verify_1201_section(w, report.verify_rows)
    _verify_later_section(w, report.later_verify_rows)
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------------------
# Figure
# ---------------------------------------------------------------------------------------------------------------------
def render_png(report: Report, path: Path) -> None:
    """Predicted vs measured: peak allocated (ours, accelerate, DeepSpeed; y = x and a +-5% band) and step time
    (ours; a +-15% band), log-log, fit rows filled and holdout rows hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [e for e in report.rows if e.run.status == "ok"]
    oom = [e for e in report.rows if e.run.status == "oom"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 6))

    def band(ax, lo, hi, frac, label):
        xs = [lo, hi]
        ax.plot(xs, xs, color="black", lw=1, label="y = x")
        ax.fill_between(xs, [x * (1 - frac) for x in xs], [x * (1 + frac) for x in xs], color="0.85",
                        label=f"±{100 * frac:.0f}%")

    band(ax1, 1.0, 1000.0, 0.05, "")
    for split, fill in (("fit", True), ("holdout", False)):
        sel = [e for e in ok if e.run.split == split]
        x = [e.run.peak_allocated / GIB for e in sel]
        ax1.scatter(x, [e.pred_allocated / GIB for e in sel], marker="o", s=36,
                    facecolors="tab:blue" if fill else "none", edgecolors="tab:blue", label=f"ours ({split})")
        acc = [(e.run.peak_allocated / GIB, e.accelerate / GIB) for e in sel if e.accelerate is not None]
        ax1.scatter([a for a, _ in acc], [b for _, b in acc], marker="^", s=36,
                    facecolors="tab:orange" if fill else "none", edgecolors="tab:orange",
                    label=f"accelerate estimate-memory ({split})")
        ax1.scatter(x, [e.deepspeed / GIB for e in sel], marker="s", s=30,
                    facecolors="tab:green" if fill else "none", edgecolors="tab:green",
                    label=f"DeepSpeed estimator ({split})")
    if oom:
        ax1.scatter([e.demand_lower_bound / GIB for e in oom], [e.pred_allocated / GIB for e in oom], marker="x",
                    s=60, color="tab:red", label="ours, OOM runs (x = demand lower bound)")
    cap = (report.rows[0].run.torch_total or 0) / GIB
    if cap:
        ax1.axvline(cap, color="tab:red", lw=0.8, ls="--")
        ax1.axhline(cap, color="tab:red", lw=0.8, ls="--", label=f"GPU memory ({cap:.1f} GiB)")
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlim(1.5, 250)
    ax1.set_ylim(1.5, 250)
    ax1.set_xlabel("measured peak allocated (GiB)")
    ax1.set_ylabel("predicted (GiB)")
    ax1.set_title("Peak GPU memory, one H200")
    ax1.legend(fontsize=7, loc="upper left")
    ax1.grid(True, which="both", lw=0.3)

    t = [e for e in ok if e.run.step_seconds]
    lo = min(min(e.run.step_seconds, e.pred_step) for e in t) * 0.7
    hi = max(max(e.run.step_seconds, e.pred_step) for e in t) * 1.4
    band(ax2, lo, hi, TIME_MEDIAN_TARGET, "")
    for split, fill in (("fit", True), ("holdout", False)):
        sel = [e for e in t if e.run.split == split]
        ax2.scatter([e.run.step_seconds for e in sel], [e.pred_step for e in sel], marker="o", s=36,
                    facecolors="tab:blue" if fill else "none", edgecolors="tab:blue", label=f"ours ({split})")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlim(lo, hi)
    ax2.set_ylim(lo, hi)
    ax2.set_xlabel("measured median step time (s)")
    ax2.set_ylabel("predicted (s)")
    ax2.set_title("Step time (no baseline estimates it)")
    ax2.legend(fontsize=8, loc="upper left")
    ax2.grid(True, which="both", lw=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------------------
def _write_remeasure(report: Report, path: Path) -> int:
    """The --remeasure file: one round (a name once), created exclusively so no file is replaced."""
    from bench.rows_file import write_new

    rows = remeasure_rows(report.rows)
    problem = write_new(path, rows)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    rounds = max((r["records_missing"] for r in rows), default=0)
    print(f"wrote {path}: {len(rows)} rows ({sum(r['records_missing'] for r in rows)} records missing; "
          f"{rounds} round(s) of python -m bench.run --rows-file {path} --generation-steps 5)")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help=f"write {DOC} and {PNG}")
    g.add_argument("--check", action="store_true", help=f"exit 1 when {DOC} is out of date")
    g.add_argument("--remeasure", metavar="ROWS.json",
                   help=f"write the rows still short of {REMEASURE_RECORDS} step-time records (predicted at least "
                        f"{100 * MC.HOST_BOUND_NOTE_SHARE:.0f} %% host-bound) for python -m bench.run --rows-file; "
                        "never over an existing file")
    a = p.parse_args(argv)
    report = build()
    if a.remeasure:
        return _write_remeasure(report, Path(a.remeasure))
    text = render_markdown(report)
    if a.check:
        current = (REPO / DOC).read_text() if (REPO / DOC).exists() else ""
        if current != text:
            print(f"{DOC} is out of date: run python -m bench.accuracy --write", file=sys.stderr)
            return 1
        return 0
    if a.write:
        (REPO / DOC).write_text(text)
        render_png(report, REPO / PNG)
        print(f"wrote {DOC} and {PNG}")
        return 0
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
