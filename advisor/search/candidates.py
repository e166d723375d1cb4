"""The candidate space: every structure worth estimating (backend, ZeRO stage, offload, method, precision,
checkpointing, Liger, SP/CP degree, vLLM mode and GPU split), and the types the search fills in."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from advisor.core import request as R
from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.model.vllm_memory import colocate_fraction, usable_server_gpus
from advisor.resolve import (
    DEFAULT_LORA_R,
    DEFAULT_MAX_COMPLETION,
    DEFAULT_NUM_GENERATIONS,
    DEFAULT_SEQ_LEN,
    DEFAULT_VLLM_MEM_FRACTION,
    method_options,
    reference_options,
    resolve_teacher,
)
from advisor.resolve.attention import choose_attention, sp_attention

DEFAULT_GLOBAL_BATCH = 64
"""Sequences (DPO: pairs; GRPO/RLOO: completions) per optimizer step when neither --global-batch nor --grad-accum
is given: TRL's example scripts train with 8 GPUs x per-device 8 x accumulation 1 = 64."""

MICRO_BATCHES = (1, 2, 4, 8, 16, 32, 64)
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
    without_offload: Candidate | None = None
    """An offloading candidate's twin without offload (the same plan with offload "none"), with its memory estimate
    and why it cannot run (rejected_because, '' when it fits): set by the search when the twin decides whether the
    offload may be chosen (advisor.search.planner._without_offload); None until then."""

    @property
    def feasible(self) -> bool:
        return not self.rejected_because

    @property
    def tokens_per_second(self) -> float:
        """The run's tokens per second, one-off work outside the steps included (precomputed reference log-probs,
        BEMA's averaging; SpeedEstimate.effective_tokens_per_second): what candidates are ranked and shown by."""
        return self.speed.effective_tokens_per_second if self.speed is not None else 0.0


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
    on_gpu: Candidate | None = None
    """The best plan that keeps everything on the GPUs (the chosen one, unless an offloading plan beat it by the
    margin, advisor.search.ranking.OFFLOAD_MARGIN); None when none fits."""
    offload_rival: Candidate | None = None
    """When the chosen plan keeps everything on the GPUs: the fastest offloading plan predicted faster than it, left
    out for the margin or for an offload it does not need (ranking.offload_buys_memory), for the explanation; else
    None."""


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
            if req.vllm_gpus:
                counts = [req.vllm_gpus]  # a count the server cannot use in full is refused before (vllm_pins.check_vllm_gpus)
            else:
                # One server, and a dense model's is one tensor-parallel group (rule VLLM007): only counts it runs on
                # in full (usable_server_gpus), each wanted one taken down to the nearest such count, so that no
                # plan reserves GPUs the server leaves idle (Qwen2.5-7B on 6 GPUs: 3 becomes 2; 28 heads, 4 KV heads).
                usable = usable_server_gpus(model, target.gpus_per_node - 1)
                wanted = (1, target.gpus_per_node // 4, target.gpus_per_node // 2)
                counts = sorted({max(n for n in usable if n <= max(1, w)) for w in wanted} if usable else set())
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
            if req.offload_device == "nvme":
                stages = [s for s in stages if s == 3]  # NVMe offload is ZeRO-3's (ZeRO-1/2 treat it as CPU)
            for stage in stages:
                offloads = [req.offload] if req.offload else (["none", "optimizer", "all"] if stage == 3 else
                                                              ["none", "optimizer"])
                if world == 1 and not (req.backend or req.zero is not None or req.offload):
                    # One process shards nothing: ZeRO without offload holds the whole model plus DeepSpeed's flat
                    # buffers and fp32 master copy, and on one H200 it measured no faster than the plain plan
                    # (docs/plan-quality.md: 60,666 vs 62,786, 9,810 vs 9,848, 1,188 vs 1,496 tokens/s), while the
                    # speed model is not that exact; it is offered only with an offload, unless asked for, or where
                    # no plan of the method fits without it (zero_without_offload).
                    offloads = [off for off in offloads if off != "none"]
                out += [("deepspeed", stage, off) for off in offloads if not (off == "all" and stage != 3)]
        elif backend == "fsdp2":
            # no NVMe offload in FSDP2 (CPUOffloadPolicy is host RAM): --offload-device nvme leaves it DeepSpeed's
            offloads = [req.offload] if req.offload else ["none", "all"]
            out += [("fsdp2", 0, off) for off in offloads if off == "none" or req.offload_device != "nvme"]
        else:
            out.append((backend, 0, "none"))
    return out


def zero_without_offload(req: Request, structures_of_method: list[Plan]) -> list[Plan]:
    """The one-GPU ZeRO structures without offload that _backend_options leaves out (nothing of DeepSpeed, a stage or an
    offload pinned): the method's offloading DeepSpeed structures of one process, with offload "none", in order, once
    each. The planner searches them for a method none of whose other plans fits without offload (planner.search):
    there the plain plan measured faster is not on offer, and ZeRO can hold what it cannot. In fp16-mixed (a GPU
    without bf16) the plain plan keeps the weights in fp32 where DeepSpeed keeps them in 16 bits with fp32 masters of
    the trained parameters only: a Llama-3.1-8B LoRA on one V100-32GB needs 30.1 GiB of weights plain, 15.0 GiB under
    ZeRO-2 (advisor.model.memory). Without them the only plans left were offloading twins of these, whose offload
    buys no memory (advisor.search.ranking.offload_buys_memory) and which rule PEFT003 warns about."""
    if req.backend or req.zero is not None or req.offload:
        return []
    out: list[Plan] = []
    for s in structures_of_method:
        if s.backend == "deepspeed" and s.num_processes == 1 and s.offload != "none":
            twin = s.with_(offload="none")
            if twin not in out:
                out.append(twin)
    return out


def _parallel_options(req: Request, model: ModelSpec, world: int) -> list[tuple[int, int]]:
    """(sp, cp) pairs. Unpinned: plain data parallel, plus the Ulysses degrees the heads allow for long sequences."""
    if req.sp_size or req.cp_size:
        return [(req.sp_size or 1, req.cp_size or 1)]
    from rules.parallelism import PAIRED_TRAINERS, valid_sp_sizes

    if req.trainer in R.GENERATING_TRAINERS or world == 1:
        return [(1, 1)]  # GRPO/RLOO reject SP and CP (grpo_config.py __post_init__)
    if req.trainer in PAIRED_TRAINERS:
        # DPO/KTO/GKD batches cannot be split (rule SP017): every such structure was estimated and then refused,
        # a third of a 32k DPO search, and listed as a rejected alternative the user cannot pick
        return [(1, 1)]
    seq = req.seq_len or DEFAULT_SEQ_LEN
    options = [(1, 1)]
    if seq >= 16384:
        options += [(sp, 1) for sp in valid_sp_sizes(model, world) if sp > 1]
    return options


def _methods(req: Request) -> list[str]:
    return method_options(req)


def structures(req: Request, model: ModelSpec, target: Target) -> list[Plan]:
    """Every structural plan worth estimating, micro-batch 1 and accumulation to be set later."""
    seq = req.seq_len or DEFAULT_SEQ_LEN
    generating = req.trainer in R.GENERATING_TRAINERS
    precision = req.precision or ("bf16" if target.gpu.has_bf16 else "fp16-mixed")
    ckpts = [req.grad_ckpt] if req.grad_ckpt is not None else [False, True]
    ligers = [req.liger] if req.liger is not None else ([False, True] if model.model_type in LIGER_MODEL_TYPES
                                                        else [False])
    lora_r = req.lora_r or DEFAULT_LORA_R
    teacher, teacher_params = resolve_teacher(req, model)
    attn = choose_attention(req, model, target, precision)[0]
    out: list[Plan] = []
    for (vmode, vgpus), method in itertools.product(_vllm_options(req, model, target), _methods(req)):
        world = target.world_size - (vgpus * target.nodes if vmode == "server" else 0)
        if world < 1:
            continue
        if vmode == "server" and method == "qlora" and req.vllm != "server":
            # QLoRA's merged 4-bit weights reach a bf16 server packed and the first sync fails (rule VLLM013): every
            # such structure was estimated and then refused; a server the user pins is left for the rule to name
            continue
        for (backend, stage, offload), (sp, cp), ckpt, liger in itertools.product(
                _backend_options(req, world), _parallel_options(req, model, world), ckpts, ligers):
            if backend == "single" and world > 1:
                continue
            if sp > 1 and backend != "deepspeed" and not (req.backend or req.sp_size):
                # the planner's own Ulysses degrees run on DeepSpeed only (rule SP002: refused whatever the memory);
                # with --sp-size pinned the other backends stay, shown refused by the rule
                continue
            if req.unsloth and backend == "fsdp2":
                continue  # Unsloth's FSDP2 needs its own wrap (UNSLOTH_FSDP2=1, rule CMP003): DeepSpeed or DDP here
            for ref in reference_options(req, method):
                out.append(_colocate_share(req, model, target, Plan(
                    trainer=req.trainer, method=method, lora_r=lora_r, lora_alpha=2 * lora_r, backend=backend,
                    zero_stage=stage, offload=offload, offload_device=req.offload_device or "cpu", precision=precision,
                    seq_len=seq, micro_batch=req.micro_batch or 1, grad_accum=req.grad_accum or 1, grad_ckpt=ckpt,
                    liger=liger and not req.unsloth, attn=sp_attention(attn, sp), packing=bool(req.packing), sp_size=sp,
                    cp_size=cp, num_processes=world, nodes=target.nodes, gpus_per_node=target.gpus_per_node,
                    unsloth=bool(req.unsloth),
                    num_generations=(req.num_generations or DEFAULT_NUM_GENERATIONS[req.trainer]) if generating else 0,
                    max_completion_len=(req.max_completion_len or min(DEFAULT_MAX_COMPLETION, seq // 2)) if generating
                    else 0,
                    vllm_mode=vmode, vllm_gpus=vgpus,
                    vllm_mem_fraction=(req.vllm_mem_fraction or DEFAULT_VLLM_MEM_FRACTION) if vmode == "colocate" else 0.0,
                    ref_model=ref, teacher=teacher, teacher_params=teacher_params,
                    trust_remote_code=req.trust_remote_code)))
    return out


def _colocate_share(req: Request, model: ModelSpec, target: Target, plan: Plan) -> Plan:
    """A colocated engine's share of the GPU: the one pinned, else GRPOConfig's default raised where it cannot hold
    the engine (advisor.model.vllm_memory.colocate_fraction; below its floor vLLM does not start, rule VLLM011)."""
    if plan.vllm_mode != "colocate" or req.vllm_mem_fraction:
        return plan
    share = colocate_fraction(model, plan, target, DEFAULT_VLLM_MEM_FRACTION)
    return plan if share == plan.vllm_mem_fraction else plan.with_(vllm_mem_fraction=share)


def micro_batches(req: Request, dp_size: int) -> list[int]:
    """The micro-batches to scan on `dp_size` data-parallel replicas: the pinned one; the one a pinned --global-batch
    and --grad-accum leave, whatever it is (48 over 8 replicas x 2 accumulation is 3, which TRL takes as
    per_device_train_batch_size like any other; refusing it for not being a power of two refused a batch that
    splits exactly); else the powers of two of MICRO_BATCHES."""
    if req.micro_batch:
        return [req.micro_batch]
    if req.global_batch and req.grad_accum:
        micro, rest = divmod(req.global_batch, dp_size * req.grad_accum)
        if micro >= 1 and not rest:
            return [micro]
    return [m for m in MICRO_BATCHES if m >= smallest_micro_batch(req)]


def smallest_micro_batch(req: Request) -> int:
    """KTO's KL term needs two examples per device (KTOTrainer: "Actual (not effective) batch size must be > 1",
    rule TRN005); one for the other trainers."""
    return 2 if req.trainer == "kto" else 1


def _accumulation(plan: Plan, micro: int, global_batch: int | None, pinned_accum: int | None) -> int:
    """Accumulation that reaches the global batch; GRPO/RLOO also need micro x processes x accum divisible by
    num_generations (GRPOConfig.__post_init__: generation_batch_size % num_generations)."""
    if pinned_accum:
        return pinned_accum
    accum = max(1, math.ceil(global_batch / (micro * plan.dp_size))) if global_batch else 1
    unit = accumulation_step(micro, plan.num_processes, plan.num_generations)
    return -(-accum // unit) * unit  # rounded up to it (closed form, not a search)


def accumulation_step(micro: int, processes: int, generations: int) -> int:
    """The accumulation must be a multiple of this: GRPO/RLOO's generation batch, micro x processes x accumulation,
    holds whole groups of num_generations (GRPOConfig.__post_init__), i.e. ng / gcd(micro x processes, ng); 1 for
    the other trainers."""
    return generations // math.gcd(micro * processes, generations) if generations else 1


def family(plan: Plan) -> tuple:
    """What makes two candidates different plans rather than two tunings of one (micro-batch, checkpointing and
    Liger are tunings): the alternatives list shows the best of each other family."""
    return (plan.backend, plan.zero_stage, plan.offload, plan.method, plan.sp_size, plan.cp_size, plan.vllm_mode,
            plan.vllm_gpus, plan.ref_model)
