"""`generate`: enumerate candidate plans, filter them with the rules and the memory model, rank by predicted
tokens/s, explain the choice and the best rejected alternatives, and write the bundle.

Search strategy (why it is fast): knobs that change the *structure* of a run (backend, ZeRO stage, offload, method,
precision, checkpointing, Liger, SP/CP, vLLM split) are enumerated and each structure is checked by the rule engine
once; the micro-batch, on which memory grows monotonically, is then scanned in powers of two against the memory model
alone. 405B on 16 nodes x 8 GPUs is a few hundred structures and a few thousand memory estimates.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from advisor import request as R
from advisor.errors import AdvisorError, NoFeasiblePlanError
from advisor.plan import Plan
from advisor.request import Request
from advisor.resolve import (DEFAULT_LORA_R, DEFAULT_MAX_COMPLETION, DEFAULT_NUM_GENERATIONS, DEFAULT_SEQ_LEN,
                             DEFAULT_VLLM_MEM_FRACTION, check_request, resolve_model, resolve_target)
from advisor.specs import GIB, ModelSpec
from advisor.target import Target

DEFAULT_GLOBAL_BATCH = 64
"""Sequences (DPO: pairs; GRPO/RLOO: completions) per optimizer step when neither --global-batch nor --grad-accum
is given: TRL's example scripts train with 8 GPUs x per-device 8 x accumulation 1 = 64."""

MICRO_BATCHES = (1, 2, 4, 8, 16, 32, 64)
METHOD_ORDER = ("full", "lora", "qlora")
"""When --method is not pinned, the most faithful method that fits wins, then the fastest plan within it: LoRA is
always faster and smaller than full training, so ranking methods by tokens/s alone would never train all weights."""

LIGER_MODEL_TYPES = frozenset({
    "llama", "mistral", "mixtral", "gemma", "gemma2", "gemma3", "gemma3_text", "qwen2", "qwen3", "qwen3_moe", "phi3",
    "granite", "olmo2", "olmo3", "glm4", "smollm3", "deepseek_v2", "deepseek_v3", "gpt_oss"})
"""model_types liger-kernel 0.8.5 patches (MODEL_TYPE_TO_APPLY_LIGER_FN); others are silently skipped by Liger."""


@dataclass
class Candidate:
    plan: Plan
    memory: object = None
    speed: object = None
    rejected_because: str = ""
    findings: list = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return not self.rejected_because

    @property
    def tokens_per_second(self) -> float:
        return self.speed.tokens_per_second if self.speed is not None else 0.0


@dataclass
class Decision:
    request: Request
    model: ModelSpec
    target: Target
    chosen: Candidate | None
    alternatives: list[Candidate]
    reasons: dict[str, str]
    considered: int
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ enumeration


def _global_batch(req: Request) -> int | None:
    if req.global_batch:
        return req.global_batch
    if req.grad_accum:
        return None  # accumulation pinned: global batch follows from the micro-batch
    return DEFAULT_GLOBAL_BATCH


def _vllm_options(req: Request, target: Target) -> list[tuple[str, int]]:
    if req.trainer not in R.GENERATING_TRAINERS:
        return [("none", 0)]
    modes = [req.vllm] if req.vllm else ["none", "colocate", "server"]
    out: list[tuple[str, int]] = []
    for mode in modes:
        if mode == "server":
            counts = [req.vllm_gpus] if req.vllm_gpus else sorted({1, max(1, target.gpus_per_node // 4),
                                                                  max(1, target.gpus_per_node // 2)})
            out += [("server", n) for n in counts if n < target.gpus_per_node or req.vllm_gpus]
        else:
            out.append((mode, 0))
    return out


def _backend_options(req: Request, world: int) -> list[tuple[str, int, str]]:
    """(backend, zero stage, offload) triples to try."""
    if req.backend or req.zero is not None or req.offload:
        backends = [req.backend] if req.backend else (["deepspeed"] if (req.zero is not None or req.offload not in
                                                                       (None, "none")) else list(R.BACKENDS))
    else:
        backends = ["single"] if world == 1 else ["ddp", "deepspeed", "fsdp2"]
        if world == 1:
            backends.append("deepspeed")  # ZeRO-Offload can make a single GPU fit a model it otherwise cannot
    out: list[tuple[str, int, str]] = []
    for backend in backends:
        if backend == "deepspeed":
            stages = [req.zero] if req.zero is not None else ([2, 3] if world == 1 else [1, 2, 3])
            for stage in stages:
                offloads = [req.offload] if req.offload else (["none", "optimizer", "all"] if stage == 3 else
                                                              ["none", "optimizer"])
                out += [("deepspeed", stage, off) for off in offloads if not (off == "all" and stage != 3)]
        elif backend == "fsdp2":
            out += [("fsdp2", 0, off) for off in ([req.offload] if req.offload else ["none", "all"])]
        else:
            out.append((backend, 0, "none"))
    return out


def _parallel_options(req: Request, model: ModelSpec, world: int) -> list[tuple[int, int]]:
    """(sp, cp) pairs. Unpinned: plain data parallel, plus the Ulysses degrees the heads allow for long sequences."""
    if req.sp_size or req.cp_size:
        return [(req.sp_size or 1, req.cp_size or 1)]
    if req.trainer in R.GENERATING_TRAINERS or world == 1:
        return [(1, 1)]  # GRPO/RLOO reject SP and CP (grpo_config.py __post_init__)
    seq = req.seq_len or DEFAULT_SEQ_LEN
    options = [(1, 1)]
    if seq >= 16384:
        from rules.parallelism import valid_sp_sizes

        options += [(sp, 1) for sp in valid_sp_sizes(model, world) if sp > 1]
    return options


def _methods(req: Request) -> list[str]:
    return [req.method] if req.method else list(METHOD_ORDER)


def structures(req: Request, model: ModelSpec, target: Target) -> list[Plan]:
    """Every structural plan worth estimating, micro-batch 1 and accumulation to be set later."""
    seq = req.seq_len or DEFAULT_SEQ_LEN
    generating = req.trainer in R.GENERATING_TRAINERS
    precision = req.precision or ("bf16" if target.gpu.has_bf16 else "fp16-mixed")
    ckpts = [req.grad_ckpt] if req.grad_ckpt is not None else [False, True]
    ligers = [req.liger] if req.liger is not None else ([False, True] if model.model_type in LIGER_MODEL_TYPES
                                                        else [False])
    lora_r = req.lora_r or DEFAULT_LORA_R
    out: list[Plan] = []
    for (vmode, vgpus), method in itertools.product(_vllm_options(req, target), _methods(req)):
        world = target.world_size - (vgpus * target.nodes if vmode == "server" else 0)
        if world < 1:
            continue
        for (backend, stage, offload), (sp, cp), ckpt, liger in itertools.product(
                _backend_options(req, world), _parallel_options(req, model, world), ckpts, ligers):
            if backend == "single" and world > 1:
                continue
            if req.unsloth and backend not in ("single", "ddp"):
                continue
            ref = req.ref_model or (("none" if method != "full" else "copy") if req.trainer in
                                    (*R.PREFERENCE_TRAINERS, "rloo") else ("copy" if req.trainer == "gkd" else "none"))
            out.append(Plan(
                trainer=req.trainer, method=method, lora_r=lora_r, lora_alpha=2 * lora_r, backend=backend,
                zero_stage=stage, offload=offload, offload_device=req.offload_device or "cpu", precision=precision,
                seq_len=seq, micro_batch=req.micro_batch or 1, grad_accum=req.grad_accum or 1, grad_ckpt=ckpt,
                liger=liger and not req.unsloth, attn=req.attn or "sdpa", packing=bool(req.packing), sp_size=sp,
                cp_size=cp, num_processes=world, nodes=target.nodes, gpus_per_node=target.gpus_per_node,
                unsloth=bool(req.unsloth),
                num_generations=(req.num_generations or DEFAULT_NUM_GENERATIONS[req.trainer]) if generating else 0,
                max_completion_len=(req.max_completion_len or min(DEFAULT_MAX_COMPLETION, seq // 2)) if generating
                else 0,
                vllm_mode=vmode, vllm_gpus=vgpus,
                vllm_mem_fraction=(req.vllm_mem_fraction or DEFAULT_VLLM_MEM_FRACTION) if vmode == "colocate" else 0.0,
                ref_model=ref, trust_remote_code=req.trust_remote_code))
    return out


def _accumulation(plan: Plan, micro: int, global_batch: int | None, pinned_accum: int | None) -> int:
    """Accumulation that reaches the global batch; GRPO/RLOO also need micro x processes x accum divisible by
    num_generations (GRPOConfig.__post_init__: generation_batch_size % num_generations)."""
    if pinned_accum:
        return pinned_accum
    accum = max(1, math.ceil(global_batch / (micro * plan.dp_size))) if global_batch else 1
    if plan.num_generations:
        while (micro * plan.num_processes * accum) % plan.num_generations:
            accum += 1
    return accum


# ------------------------------------------------------------------------------------------------ search


def _structural_errors(req: Request, model: ModelSpec, target: Target, plan: Plan) -> list:
    import rules

    findings = rules.run_rules(rules.Context(request=req, plan=plan, model=model, target=target))
    return [f for f in findings if f.is_error]


def _estimate(model, plan, target):
    from advisor.estimate import estimate_plan

    return estimate_plan(model, plan, target)


def _host_ok(mem, target: Target) -> bool:
    if target.host_ram_bytes is None or not mem.host_bytes:
        return True
    # Keep 10% of the node's RAM for the OS, the data loader and page cache.
    return mem.host_bytes <= 0.9 * target.host_ram_bytes


def search(req: Request, model: ModelSpec, target: Target) -> Decision:
    global_batch = _global_batch(req)
    candidates: list[Candidate] = []
    considered = 0
    for structure in structures(req, model, target):
        errors = _structural_errors(req, model, target, structure)
        if errors:
            e = errors[0]
            candidates.append(Candidate(structure, rejected_because=f"{e.id}: {e.message}", findings=errors))
            continue
        micros = [req.micro_batch] if req.micro_batch else list(MICRO_BATCHES)
        best: Candidate | None = None
        smallest_miss: Candidate | None = None
        for micro in micros:
            if global_batch and micro * structure.dp_size > global_batch and micro > 1 and not req.micro_batch:
                break  # a larger micro-batch would overshoot the requested global batch
            accum = _accumulation(structure, micro, global_batch, req.grad_accum)
            plan = structure.with_(micro_batch=micro, grad_accum=accum)
            mem, spd = _estimate(model, plan, target)
            considered += 1
            if not mem.fits:
                if smallest_miss is None:
                    smallest_miss = Candidate(plan, mem, spd, rejected_because=(
                        f"needs {mem.per_gpu_reserved_bytes / GIB:.1f} GiB per GPU, "
                        f"{mem.capacity_bytes / GIB:.1f} GiB usable"))
                break  # memory grows with the micro-batch: larger ones do not fit either
            if not _host_ok(mem, target):
                smallest_miss = smallest_miss or Candidate(plan, mem, spd, rejected_because=(
                    f"needs {mem.host_bytes / GIB:.0f} GiB host RAM, the node has "
                    f"{target.host_ram_bytes / GIB:.0f} GiB"))
                break
            cand = Candidate(plan, mem, spd)
            if best is None or cand.tokens_per_second > best.tokens_per_second:
                best = cand
        if best is not None:
            candidates.append(best)
        elif smallest_miss is not None:
            candidates.append(smallest_miss)
    feasible = [c for c in candidates if c.feasible]
    chosen = _pick(feasible, req)
    alternatives = _alternatives(candidates, chosen)
    decision = Decision(req, model, target, chosen, alternatives, {}, considered)
    if chosen is not None:
        decision.reasons = explain_choice(decision, candidates)
    return decision


def _rank_key(c: Candidate, req: Request):
    method_rank = METHOD_ORDER.index(c.plan.method) if not req.method else 0
    return (method_rank, -c.tokens_per_second)


def _pick(feasible: list[Candidate], req: Request) -> Candidate | None:
    return min(feasible, key=lambda c: _rank_key(c, req)) if feasible else None


def _family(plan: Plan) -> tuple:
    return (plan.backend, plan.zero_stage, plan.offload, plan.method, plan.sp_size, plan.cp_size, plan.vllm_mode,
            plan.vllm_gpus)


def _alternatives(candidates: list[Candidate], chosen: Candidate | None, limit: int = 8) -> list[Candidate]:
    """The best candidate of every other family (backend, stage, offload, method, parallelism, vLLM split), each
    with the reason it lost."""
    best_by_family: dict[tuple, Candidate] = {}
    for c in candidates:
        if chosen is not None and c.plan == chosen.plan:
            continue
        key = _family(c.plan)
        current = best_by_family.get(key)
        if current is None or (c.feasible, c.tokens_per_second) > (current.feasible, current.tokens_per_second):
            best_by_family[key] = c
    alts = [c for c in best_by_family.values() if chosen is None or _family(c.plan) != _family(chosen.plan)]
    for c in alts:
        if c.feasible and chosen is not None:
            if c.plan.method != chosen.plan.method and c.tokens_per_second >= chosen.tokens_per_second:
                c.rejected_because = (f"trains {c.plan.method} instead of {chosen.plan.method}: a {chosen.plan.method}"
                                      " plan fits, and --method was not pinned")
            else:
                ratio = chosen.tokens_per_second / max(c.tokens_per_second, 1e-9)
                c.rejected_because = f"slower: {c.tokens_per_second:,.0f} tokens/s ({ratio:.2f}x less)"
    alts.sort(key=lambda c: (not c.feasible, -c.tokens_per_second))
    return alts[:limit]


# ------------------------------------------------------------------------------------------------ explanation


def explain_choice(decision: Decision, candidates: list[Candidate]) -> dict[str, str]:
    """One sentence per knob: the user's pin, the rule, or the estimate that decided it."""
    req, plan, chosen = decision.request, decision.chosen.plan, decision.chosen
    pinned = req.pinned()
    reasons: dict[str, str] = {}

    def pin(flag: str, knob: str) -> bool:
        if flag in pinned:
            reasons[knob] = f"pinned by --{flag.replace('_', '-')}"
            return True
        return False

    if not pin("method", "method"):
        reasons["method"] = (f"{plan.method}: the most faithful method that fits" if plan.method != "full" else
                             "full: every weight trained, and it fits")
    if not (pin("backend", "backend") or pin("zero", "backend")):
        reasons["backend"] = f"fastest that fits: {chosen.tokens_per_second:,.0f} tokens/s predicted"
    if not pin("micro_batch", "micro_batch"):
        reasons["micro_batch"] = _micro_reason(decision, plan)
    if not pin("grad_accum", "grad_accum"):
        target = req.global_batch or DEFAULT_GLOBAL_BATCH
        reasons["grad_accum"] = (f"{plan.micro_batch} x {plan.dp_size} data-parallel x {plan.grad_accum} = "
                                 f"{plan.global_batch} sequences per step (target {target})")
        if plan.num_generations:
            reasons["grad_accum"] += f"; divisible by num_generations {plan.num_generations} (GRPOConfig rule)"
    if not pin("grad_ckpt", "grad_ckpt"):
        other = _twin(candidates, plan, grad_ckpt=not plan.grad_ckpt)
        if plan.grad_ckpt:
            reasons["grad_ckpt"] = "on: " + (f"without it the best plan is {other.rejected_because or 'slower'}"
                                             if other else "needed to fit")
        else:
            reasons["grad_ckpt"] = "off: fits without recomputation, which costs about a third more compute"
    if not pin("liger", "liger"):
        reasons["liger"] = "on: predicted faster or smaller" if plan.liger else "off: no predicted gain here"
    if plan.sp_size > 1 and "sp_size" not in pinned:
        reasons["sp_size"] = f"Ulysses over {plan.sp_size} GPUs splits the {plan.seq_len}-token sequence to fit"
    if plan.vllm_mode != "none" and "vllm" not in pinned:
        reasons["vllm_mode"] = f"{plan.vllm_mode}: fastest generation that fits"
    return reasons


def _micro_reason(decision: Decision, plan: Plan) -> str:
    bigger = plan.micro_batch * 2
    if plan.micro_batch * plan.dp_size * 2 > (decision.request.global_batch or DEFAULT_GLOBAL_BATCH):
        return f"{plan.micro_batch}: the largest that stays within the global batch"
    return f"{plan.micro_batch}: the fastest that fits with headroom ({bigger} does not fit or is slower)"


def _twin(candidates: list[Candidate], plan: Plan, **change) -> Candidate | None:
    want = _family(plan.with_(**change)), change
    for c in candidates:
        if _family(c.plan) == want[0] and all(getattr(c.plan, k) == v for k, v in change.items()):
            return c
    return None
