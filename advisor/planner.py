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
from advisor.resolve import (
    DEFAULT_LORA_R,
    DEFAULT_MAX_COMPLETION,
    DEFAULT_NUM_GENERATIONS,
    DEFAULT_SEQ_LEN,
    DEFAULT_VLLM_MEM_FRACTION,
    check_against_target,
    check_request,
    resolve_model,
    resolve_target,
)
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
    next_micro_note: str = ""
    """Why the next larger micro-batch was not taken (for the explanation)."""

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


def _vllm_options(req: Request, model: ModelSpec, target: Target) -> list[tuple[str, int]]:
    if req.trainer not in R.GENERATING_TRAINERS:
        return [("none", 0)]
    modes = [req.vllm] if req.vllm else ["none", "colocate", "server"]
    out: list[tuple[str, int]] = []
    for mode in modes:
        if mode == "server":
            counts = [req.vllm_gpus] if req.vllm_gpus else sorted({1, max(1, target.gpus_per_node // 4),
                                                                  max(1, target.gpus_per_node // 2)})
            # A dense model's server is one tensor-parallel group (rule VLLM007), which must divide the heads.
            counts = [n for n in counts if req.vllm_gpus or model.is_moe or model.heads % n == 0]
            out += [("server", n) for n in counts if n < target.gpus_per_node or req.vllm_gpus]
        else:
            out.append((mode, 0))
    return out


def _backend_options(req: Request, world: int) -> list[tuple[str, int, str]]:
    """(backend, zero stage, offload) triples to try."""
    if req.backend or req.zero is not None or req.offload:
        backends = [req.backend] if req.backend else (["deepspeed"] if (req.zero is not None or req.offload not in
                                                                       (None, "none")) else list(R.BACKENDS))
    elif (req.cp_size or 1) > 1:
        backends = ["fsdp2"]  # ring-attention CP runs on FSDP2 only (accelerate cp_backend "torch"; rule SP010)
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
    for (vmode, vgpus), method in itertools.product(_vllm_options(req, model, target), _methods(req)):
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
        # accum must be a multiple of ng / gcd(micro x processes, ng): round up to it (closed form, not a search)
        unit = plan.num_generations // math.gcd(micro * plan.num_processes, plan.num_generations)
        accum = -(-accum // unit) * unit
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


def _best_micro_batch(req: Request, model: ModelSpec, target: Target, structure: Plan,
                      global_batch: int | None) -> tuple[Candidate, int]:
    """The fastest micro-batch of one structure that fits, or the smallest miss; and how many were estimated."""
    micros = [req.micro_batch] if req.micro_batch else list(MICRO_BATCHES)
    best: Candidate | None = None
    miss: Candidate | None = None
    estimated = 0
    for micro in micros:
        if global_batch and micro > 1 and micro * structure.dp_size > global_batch and not req.micro_batch:
            break  # a larger micro-batch would overshoot the requested global batch
        plan = structure.with_(micro_batch=micro, grad_accum=_accumulation(structure, micro, global_batch,
                                                                            req.grad_accum))
        mem, spd = _estimate(model, plan, target)
        estimated += 1
        if not mem.fits:
            if best is not None:
                best.next_micro_note = (f"{micro} needs {mem.per_gpu_reserved_bytes / GIB:.1f} GiB, over the "
                                        f"{(mem.per_gpu_reserved_bytes + mem.headroom_bytes) / GIB:.1f} GiB limit")
            miss = miss or Candidate(plan, mem, spd, rejected_because=(
                f"does not fit: needs {mem.per_gpu_reserved_bytes / GIB:.1f} GiB per GPU, limit "
                f"{(mem.per_gpu_reserved_bytes + mem.headroom_bytes) / GIB:.1f} GiB"))
            break  # memory grows with the micro-batch: larger ones do not fit either
        if not _host_ok(mem, target):
            miss = miss or Candidate(plan, mem, spd, rejected_because=(
                f"needs {mem.host_bytes / GIB:.0f} GiB host RAM per node, the node has "
                f"{target.host_ram_bytes / GIB:.0f} GiB"))
            break
        cand = Candidate(plan, mem, spd)
        if best is None or cand.tokens_per_second > best.tokens_per_second:
            best = cand
    return (best or miss), estimated


def search(req: Request, model: ModelSpec, target: Target) -> Decision:
    """Memory first (cheap, and most structures of a large model fail it), then the rules, lazily: only on the
    candidates that could be chosen or shown as alternatives, in rank order."""
    global_batch = _global_batch(req)
    candidates: list[Candidate] = []
    considered = 0
    for structure in structures(req, model, target):
        cand, n = _best_micro_batch(req, model, target, structure, global_batch)
        considered += n
        if cand is not None:
            candidates.append(cand)
    checked: set[int] = set()

    def passes_rules(c: Candidate) -> bool:
        if id(c) not in checked:
            checked.add(id(c))
            if c.feasible:
                errors = _structural_errors(req, model, target, c.plan)
                if errors:
                    c.rejected_because, c.findings = f"{errors[0].id}: {errors[0].message}", errors
        return c.feasible

    chosen = next((c for c in sorted((c for c in candidates if c.feasible), key=lambda c: _rank_key(c, req))
                   if passes_rules(c)), None)
    alternatives = _alternatives(candidates, chosen, passes_rules)
    decision = Decision(req, model, target, chosen, alternatives, {}, considered)
    if chosen is not None:
        decision.reasons = explain_choice(decision, candidates)
    return decision


COMPLEXITY_MARGIN = {"single": 0.0, "ddp": 0.0, "fsdp2": 0.03, "deepspeed": 0.05}
"""A sharded backend must predict this much more tokens/s than a plain one to be chosen: it adds a dependency and
JIT-built ops (DeepSpeed's FusedAdam/CPUAdam), and the speed model's own error (docs/accuracy.md) is of this order."""


LIGER_MARGIN = 0.03
"""Liger must predict 3% more tokens/s to be chosen unpinned: `use_liger_kernel` is deprecated in TRL 1.16 (rule
CMP006) and adds a dependency."""


def _rank_key(c: Candidate, req: Request):
    """Offloading is a last resort (host RAM, PCIe traffic, CPU Adam: several times slower); then the most
    faithful method (unless pinned); then predicted tokens/s, discounted by the backend's complexity margin."""
    method_rank = METHOD_ORDER.index(c.plan.method) if not req.method else 0
    score = c.tokens_per_second * (1.0 - COMPLEXITY_MARGIN.get(c.plan.backend, 0.0))
    if c.plan.liger and req.liger is None:
        score *= 1.0 - LIGER_MARGIN
    return (c.plan.offload != "none", method_rank, -score)


def _pick(feasible: list[Candidate], req: Request) -> Candidate | None:
    return min(feasible, key=lambda c: _rank_key(c, req)) if feasible else None


def _family(plan: Plan) -> tuple:
    return (plan.backend, plan.zero_stage, plan.offload, plan.method, plan.sp_size, plan.cp_size, plan.vllm_mode,
            plan.vllm_gpus)


def _alternatives(candidates: list[Candidate], chosen: Candidate | None, passes_rules,
                  limit: int = 8) -> list[Candidate]:
    """The best candidate of every other family (backend, stage, offload, method, parallelism, vLLM split), each
    with the reason it lost; rules are checked only on the candidates shown."""
    families: dict[tuple, list[Candidate]] = {}
    for c in candidates:
        if chosen is not None and _family(c.plan) == _family(chosen.plan):
            continue
        families.setdefault(_family(c.plan), []).append(c)
    same = chosen.plan.method if chosen is not None else None

    def order(group: list[Candidate]):
        best = max(group, key=lambda c: (c.feasible, c.tokens_per_second))
        return (not best.feasible, best.plan.method != same, -best.tokens_per_second)

    alts: list[Candidate] = []
    for group in sorted(families.values(), key=order):
        group.sort(key=lambda c: (not c.feasible, -c.tokens_per_second))
        pick = next((c for c in group if passes_rules(c)), group[0])
        alts.append(pick)
        if len(alts) >= limit:
            break
    for c in alts:
        if c.feasible and chosen is not None:
            if c.plan.method != chosen.plan.method and c.tokens_per_second >= chosen.tokens_per_second:
                c.rejected_because = (f"trains {c.plan.method} instead of {chosen.plan.method}: a {chosen.plan.method}"
                                      " plan fits, and --method was not pinned")
            elif c.plan.offload != "none" and chosen.plan.offload == "none":
                c.rejected_because = (f"offloads to host memory ({c.tokens_per_second:,.0f} tokens/s): used only when "
                                      "nothing fits on the GPUs")
            elif c.tokens_per_second >= chosen.tokens_per_second:
                c.rejected_because = (f"{c.tokens_per_second:,.0f} tokens/s is within the "
                                      f"{COMPLEXITY_MARGIN.get(c.plan.backend, 0) * 100:.0f}% margin a "
                                      f"{c.plan.backend} plan must win by over a simpler one")
            else:
                ratio = chosen.tokens_per_second / max(c.tokens_per_second, 1e-9)
                c.rejected_because = f"slower: {c.tokens_per_second:,.0f} tokens/s ({ratio:.2f}x less)"
    return alts


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
            if other is None:
                reasons["grad_ckpt"] = "on: needed to fit"
            elif other.rejected_because:
                reasons["grad_ckpt"] = f"on: without it the plan {other.rejected_because}"
            else:
                reasons["grad_ckpt"] = (f"on: allows a larger micro-batch, {chosen.tokens_per_second:,.0f} vs "
                                        f"{other.tokens_per_second:,.0f} tokens/s without it")
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
    note = decision.chosen.next_micro_note
    if note:
        return f"{plan.micro_batch}: the largest that fits with headroom ({note})"
    if plan.micro_batch * plan.dp_size * 2 > (decision.request.global_batch or DEFAULT_GLOBAL_BATCH):
        return f"{plan.micro_batch}: the largest that stays within the global batch"
    return f"{plan.micro_batch}: predicted fastest (larger ones fit but are not faster)"


def _twin(candidates: list[Candidate], plan: Plan, **change) -> Candidate | None:
    want = _family(plan.with_(**change)), change
    for c in candidates:
        if _family(c.plan) == want[0] and all(getattr(c.plan, k) == v for k, v in change.items()):
            return c
    return None


# ------------------------------------------------------------------------------------------------ no feasible plan


def smallest_change(req: Request, model: ModelSpec, target: Target) -> str:
    """Try the changes a user can make, least disruptive first, and name the first that yields a plan."""
    seq = req.seq_len or DEFAULT_SEQ_LEN
    tries: list[tuple[str, Request, Target]] = []
    if req.micro_batch and req.micro_batch > 1:
        tries.append(("--micro-batch 1", req.with_(micro_batch=1), target))
    if req.grad_ckpt is False:
        tries.append(("--grad-ckpt", req.with_(grad_ckpt=True), target))
    if req.method in ("full", "lora"):
        nxt = "lora" if req.method == "full" else "qlora"
        tries.append((f"--method {nxt}", req.with_(method=nxt), target))
    if req.offload in (None, "none") and req.backend in (None, "deepspeed"):
        tries.append(("--backend deepspeed --zero 3 --offload all", req.with_(backend="deepspeed", zero=3,
                                                                             offload="all"), target))
    shorter = seq // 2
    while shorter >= 512:
        tries.append((f"--seq-len {shorter} (fewer tokens per step)", req.with_(seq_len=shorter), target))
        shorter //= 2
    for gpus in (2, 4, 8):
        if gpus > target.gpus_per_node:
            tries.append((f"--gpus {gpus} ({gpus - target.gpus_per_node} more GPUs per node)",
                          req.with_(gpus=gpus), target.with_(gpus_per_node=gpus)))
    for nodes in (2, 4, 8, 16):
        if nodes > target.nodes and target.gpus_per_node >= 8:
            tries.append((f"--nodes {nodes}", req.with_(nodes=nodes), target.with_(nodes=nodes)))
    for label, r, t in tries:
        decision = search(r, model, t)
        if decision.chosen is not None:
            c = decision.chosen
            host = ""
            if c.plan.offload != "none" and c.memory.host_bytes:
                host = f", with {c.memory.host_bytes / GIB:.0f} GiB host RAM per node"
            return f"{label} makes one: {c.plan.short()}{host} ({c.tokens_per_second:,.0f} tokens/s)"
    return "no single change found: try a smaller model, LoRA/QLoRA, or more GPUs"


def _raise_if_a_pin_breaks_a_rule(req: Request, model: ModelSpec, target: Target) -> None:
    """When every structure fails a rule whatever the memory (a pinned --sp-size 7 on 28 heads, say), the user's
    pin is the problem: report that rule and its fix, not a memory suggestion."""
    import rules

    first_errors = None
    for structure in structures(req, model, target):
        errors = _structural_errors(req, model, target, structure)
        if not errors:
            return
        first_errors = first_errors or errors
    if first_errors:
        e = first_errors[0]
        raise PinnedRuleError(f"{e.id} {e.name}: {e.message}", hint=e.fix or rules.get_rule(e.id).name)


class PinnedRuleError(AdvisorError):
    """A pinned knob breaks a rule in every candidate plan: exit 1 like `check`, with the rule's fix."""

    exit_code = NoFeasiblePlanError.exit_code


# ------------------------------------------------------------------------------------------------ generate


@dataclass
class GenerateOutcome:
    result: dict
    decision: Decision
    out: str
    files: list[str]
    notes: list[str]

    def render(self) -> str:
        return render_decision(self.result, self.decision, self.out)


def plan_json(plan: Plan) -> dict:
    """The generate JSON's `plan` object: the contract keys first, then every other Plan field."""
    d = plan.to_dict()
    keys = ("backend", "zero_stage", "offload", "method", "precision", "micro_batch", "grad_accum", "grad_ckpt",
            "liger", "sp_size", "cp_size", "vllm_mode", "num_processes", "nodes")
    return {**{k: d[k] for k in keys}, **{k: v for k, v in d.items() if k not in keys}}


def alternative_json(c: Candidate) -> dict:
    return {"plan": plan_json(c.plan), "tokens_per_second": round(c.tokens_per_second, 1),
            "per_gpu_peak_bytes": c.memory.per_gpu_peak_bytes if c.memory is not None else None,
            "rejected_because": c.rejected_because}


def decide(req: Request, *, probe=None) -> tuple[Decision, dict]:
    """Search and build the generate JSON (without writing anything)."""
    from advisor.estimate import result_dict, run_findings

    check_request(req)
    model = resolve_model(req)
    target = resolve_target(req, probe=probe)
    check_against_target(req, target)
    decision = search(req, model, target)
    decision.notes = list(target.notes)
    if decision.chosen is None:
        _raise_if_a_pin_breaks_a_rule(req, model, target)
        raise NoFeasiblePlanError(
            f"no plan for {model.id} ({req.trainer}) fits {target.describe()}: searched {decision.considered} "
            "configurations", hint=smallest_change(req, model, target))
    c = decision.chosen
    findings = run_findings(req, c.plan, model, target, c.memory, c.speed)
    result = result_dict(req, model, target, c.plan, c.memory, c.speed, findings)
    result["plan"] = plan_json(c.plan)
    result["why"] = dict(decision.reasons)
    result["alternatives"] = [alternative_json(a) for a in decision.alternatives]
    result["search"] = {"configurations_estimated": decision.considered}
    return decision, result


def generate(req: Request, *, out: str | None = None, force: bool = False, probe=None) -> GenerateOutcome:
    from advisor.generate import default_out_dir, render_bundle, write_bundle

    decision, result = decide(req, probe=probe)
    plan = decision.chosen.plan
    out_dir = out or default_out_dir(plan, decision.model)
    result["out"] = out_dir
    files = render_bundle(plan, decision.model, decision.target, result, req)
    written = write_bundle(files, out_dir, force=force)
    result["files"] = sorted(files)
    return GenerateOutcome(result=result, decision=decision, out=out_dir, files=written, notes=decision.notes)


def render_decision(result: dict, decision: Decision, out: str) -> str:
    """The short report `generate` prints: the plan, its numbers, why, what lost, and where the bundle is."""
    c = decision.chosen
    mem, speed = result["memory"], result["speed"]
    lines = [f"{decision.model.id} {c.plan.trainer.upper()} on {decision.target.describe()}",
             f"plan     {c.plan.short()}",
             f"memory   {mem['per_gpu_peak_bytes'] / GIB:.1f} GiB peak per GPU (reserved "
             f"{mem['per_gpu_reserved_bytes'] / GIB:.1f} of {mem['gpu_capacity_bytes'] / GIB:.1f} GiB usable)"
             + (f", host {mem['host_bytes'] / GIB:.0f} GiB" if mem.get("host_bytes") else ""),
             f"speed    {speed['tokens_per_second']:,.0f} tokens/s, {speed['step_seconds']:.2f} s/step, "
             f"MFU {speed['mfu'] * 100:.0f}%  ({decision.considered} configurations estimated)"]
    if decision.reasons:
        lines.append("why")
        width = max(len(k) for k in decision.reasons)
        lines += [f"  {k.ljust(width)}  {v}" for k, v in decision.reasons.items()]
    if decision.alternatives:
        lines.append("rejected")
        lines += [f"  {a.plan.short()}: {a.rejected_because}" for a in decision.alternatives[:5]]
    problems = [f for f in result.get("findings", []) if f.get("status", "fail") == "fail"]
    if problems:
        lines.append("findings")
        lines += [f"  {f['id']} {f['severity']}: {f['message']}" for f in problems]
    lines.append(f"wrote    {out}/ ({len(result.get('files', []))} files): bash {out}/launch.sh")
    return "\n".join(lines)
