"""From a Request to the things the engine reads: the model, the hardware target, and (for `estimate`) a plan
with every unpinned knob set to its documented default."""

from __future__ import annotations

from advisor import request as R
from advisor.errors import AdvisorError, UnknownNameError
from advisor.plan import Plan
from advisor.request import Request
from advisor.specs import ModelSpec
from advisor.target import Target, default_intra_bw, default_link

DEFAULT_GPU = "H100-80GB"
"""The built-in target when no GPU is found and neither --gpu nor --hardware is given (CONTRACT.md)."""

# Documented defaults for `estimate` (TRL 1.16 / transformers TrainingArguments defaults where they exist).
DEFAULT_SEQ_LEN = 1024  # SFTConfig/DPOConfig/KTOConfig max_length = 1024
DEFAULT_MICRO_BATCH = 8  # TrainingArguments per_device_train_batch_size = 8
DEFAULT_LORA_R = 16  # TRL ModelConfig lora_r = 16 (alpha 32)
DEFAULT_NUM_GENERATIONS = {"grpo": 8, "rloo": 2}  # GRPOConfig / RLOOConfig num_generations
DEFAULT_MAX_COMPLETION = 512  # GRPOConfig / RLOOConfig max_completion_length
DEFAULT_VLLM_MEM_FRACTION = 0.3  # GRPOConfig vllm_gpu_memory_utilization (colocate)


def resolve_model(req: Request) -> ModelSpec:
    from advisor.catalog import resolve_model as lookup

    return lookup(req.model)


def resolve_target(req: Request, *, probe=None) -> Target:
    """--hardware FILE, else --gpu NAME, else this machine's probe, else the built-in default (noted)."""
    from advisor import catalog

    nodes = req.nodes or 1
    if req.hardware:
        from advisor.hardware_file import load_report

        return target_from_report(load_report(req.hardware), req, origin="file")
    if req.gpu:
        gpu = catalog.resolve_gpu(req.gpu)
        link = default_link(gpu)
        return Target(gpu=gpu, gpus_per_node=req.gpus or 1, nodes=nodes, intra_node_link=link, origin="catalog")
    if probe is None:
        import hw_probe

        probe = hw_probe.probe
    report = probe()
    if report.gpus:
        return target_from_report(report, req, origin="probe")
    gpu = catalog.resolve_gpu(DEFAULT_GPU)
    note = f"no GPU found here: planning for the built-in default target, {req.gpus or 1} x {gpu.id} (use --gpu or --hardware)"
    return Target(gpu=gpu, gpus_per_node=req.gpus or 1, nodes=nodes, intra_node_link=default_link(gpu),
                  origin="default", notes=(note,))


def target_from_report(report, req: Request, *, origin: str) -> Target:
    """A probe report (this machine or a saved file) as a target; --gpus / --nodes may scale it out."""
    from advisor import catalog

    if not report.gpus:
        raise AdvisorError("the hardware report lists no GPU", hint="probe a machine with GPUs, or pass --gpu NAME")
    first = report.gpus[0]
    gpu = catalog.match_nvml_name(first.name, first.memory_total_bytes)
    if gpu is None:
        raise UnknownNameError(f"GPU '{first.name}' is not in the catalogue",
                               hint="pass --gpu with the closest catalogue GPU (list: trl-advisor gpus)")
    notes = list(report.notes)
    mig = [d for g in report.gpus for d in (g.mig_devices or []) if d.memory_total_bytes]
    if mig:
        # One training process uses one MIG slice, and NCCL does not run collectives across MIG slices: plan for
        # a single GPU of the largest slice's memory.
        mem, count = max(d.memory_total_bytes for d in mig), 1
        notes.append(f"MIG is on: planning for one slice of {mem / (1 << 30):.0f} GiB (no multi-GPU across slices)")
    else:
        mem, count = min(g.memory_total_bytes for g in report.gpus), len(report.gpus)
    other = max((g.other_process_bytes or 0) for g in report.gpus)
    link = _link_from_report(report, gpu)
    host = report.host
    cluster = report.cluster
    nodes = req.nodes or (cluster.slurm_nodes if cluster.slurm and cluster.slurm_nodes else 1)
    if req.gpus and req.gpus != count:
        notes.append(f"planning for --gpus {req.gpus} although the report shows {count}")
    return Target(
        gpu=gpu, gpus_per_node=req.gpus or count, nodes=nodes, gpu_memory_bytes=mem, other_process_bytes=other,
        intra_node_link=link, intra_node_bw_gbps=default_intra_bw(gpu, link),
        host_ram_bytes=host.ram_total_bytes, host_ram_available_bytes=host.ram_available_bytes,
        locked_memory_limit_bytes=host.locked_memory_limit_bytes, shm_bytes=host.shm_bytes, cpu_cores=host.cpu_cores,
        software=report.software.by_package(), origin=origin, notes=tuple(notes),
    )


def _link_from_report(report, gpu) -> str:
    links = list(report.links or [])
    if not links:
        return default_link(gpu)
    if all(link.kind == "nvlink" for link in links):
        return "nvlink"
    if any(link.p2p is False for link in links):
        return "pcie-nop2p"
    return "pcie"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_text(flag: str, value: str | None) -> None:
    """A text value that may reach a generated file: printable, valid UTF-8, one line (R.text_problem)."""
    if value is None:
        return
    problem = R.text_problem(value)
    if problem:
        raise AdvisorError(f"{flag} {problem}: it cannot be written safely into the bundle's scripts",
                           hint=f"pass {flag} without control characters or newlines")


def check_attn(attn: str | None) -> None:
    """--attn: an implementation transformers accepts by name, or a hub kernel id `org/name[@rev][:function]`."""
    if attn is None or attn in R.ATTN_BUILTIN or R.HUB_KERNEL_ID.match(attn):
        return
    shown = attn if R.text_problem(attn) is None and len(attn) <= 80 else "(that value)"
    raise AdvisorError(f"--attn {shown} is neither an attention implementation transformers knows nor a hub kernel id",
                       hint=f"use one of {', '.join(R.ATTN_BUILTIN)}, or a hub kernel such as "
                            "kernels-community/flash-attn2")


def check_request(req: Request) -> None:
    """Values that are wrong whatever the hardware: one-line errors with the valid range as the hint."""
    for name in ("model", "gpu", "hardware", "attn"):
        check_text(_flag(name), getattr(req, name))
    check_attn(req.attn)
    choices = {"trainer": R.TRAINERS, "method": R.METHODS, "backend": R.BACKENDS, "offload": R.OFFLOADS,
               "offload_device": R.OFFLOAD_DEVICES, "precision": R.PRECISIONS, "vllm": R.VLLM_MODES,
               "ref_model": R.REF_MODELS}
    for name, allowed in choices.items():
        value = getattr(req, name)
        if value is not None and value not in allowed:
            shown = repr(value) if R.text_problem(str(value)) is None and len(str(value)) <= 40 else "(that value)"
            raise AdvisorError(f"{_flag(name)} {shown} is not one of {', '.join(allowed)}",
                               hint=f"use one of: {', '.join(allowed)}")
    for name, (low, high, why) in R.LIMITS.items():
        value = getattr(req, name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise AdvisorError(f"{_flag(name)} must be a whole number, got {value!r}", hint=f"for example {_flag(name)} 1")
        if value < low:
            raise AdvisorError(f"{_flag(name)} must be at least {low}, got {value}", hint=f"for example {_flag(name)} "
                               f"{max(low, 1)}")
        if value > high:
            raise AdvisorError(f"{_flag(name)} {value} is above {high:,}: {why}", hint=f"use at most {high}")
    if req.vllm_mem_fraction is not None and not (isinstance(req.vllm_mem_fraction, (int, float))
                                                   and 0.0 < req.vllm_mem_fraction < 1.0):
        raise AdvisorError(f"--vllm-mem-fraction {req.vllm_mem_fraction} is outside (0, 1)", hint="for example 0.3")
    if req.max_completion_len and req.seq_len and req.max_completion_len >= req.seq_len:
        raise AdvisorError("--max-completion-len must be shorter than --seq-len (which counts prompt + completion)",
                           hint=f"for example --seq-len {req.max_completion_len * 2}")


def check_against_target(req: Request, target: Target) -> None:
    """Values that contradict the hardware whatever the plan: one-line errors with the fix."""
    if req.vllm_gpus and req.vllm_gpus > target.gpus_per_node:
        raise AdvisorError(f"--vllm-gpus {req.vllm_gpus} is more than the {target.gpus_per_node} GPUs per node",
                           hint=f"use at most --vllm-gpus {max(1, target.gpus_per_node - 1)}")
    if req.vllm_gpus and req.vllm in (None, "server") and req.vllm_gpus >= target.gpus_per_node:
        hint = (f"give vLLM fewer GPUs (at most {target.gpus_per_node - 1}), or add GPUs with --gpus"
                if target.gpus_per_node > 1 else "server mode needs 2 GPUs or more: add --gpus, or use --vllm colocate")
        raise AdvisorError(f"--vllm-gpus {req.vllm_gpus} leaves no GPU to train on ({target.gpus_per_node} per node)",
                           hint=hint)


def default_backend(req: Request, world: int) -> str:
    if req.backend:
        return req.backend
    if req.zero is not None or (req.offload not in (None, "none")):
        return "deepspeed"
    if (req.sp_size or 1) > 1:
        return "deepspeed"  # Ulysses SP is DeepSpeed's (accelerate sp_backend "deepspeed"; rule SP002)
    if (req.cp_size or 1) > 1:
        return "fsdp2"  # ring-attention CP needs FSDP2 (accelerate cp_backend "torch")
    return "single" if world == 1 else "ddp"


def default_plan(req: Request, model: ModelSpec, target: Target) -> Plan:
    """Every unpinned knob at its documented default (estimate never searches)."""
    trainer = req.trainer
    generating = trainer in R.GENERATING_TRAINERS
    vllm_mode = req.vllm or "none"
    vllm_gpus = req.vllm_gpus if req.vllm_gpus is not None else (1 if vllm_mode == "server" else 0)
    if vllm_mode != "server":
        vllm_gpus = 0
    world = target.world_size - vllm_gpus * target.nodes if vllm_mode == "server" else target.world_size
    if world < 1:
        raise AdvisorError(f"--vllm-gpus {vllm_gpus} leaves no GPU to train on ({target.gpus_per_node} per node)",
                           hint="give vLLM fewer GPUs, or add GPUs with --gpus")
    backend = default_backend(req, world)
    # ZeRO-3 for Ulysses as in accelerate's ALST example config; ZeRO-2 otherwise (shards grads and optimizer)
    zero = req.zero if req.zero is not None else ((3 if (req.sp_size or 1) > 1 else 2) if backend == "deepspeed"
                                                  else 0)
    method = req.method or "full"
    precision = req.precision or ("bf16" if target.gpu.has_bf16 else "fp16-mixed")
    seq_len = req.seq_len or DEFAULT_SEQ_LEN
    max_completion = (req.max_completion_len or min(DEFAULT_MAX_COMPLETION, seq_len // 2)) if generating else 0
    micro = req.micro_batch or DEFAULT_MICRO_BATCH
    sp = req.sp_size or 1
    cp = req.cp_size or 1
    dp = max(1, world // max(sp, cp))
    accum = req.grad_accum or (max(1, req.global_batch // (micro * dp)) if req.global_batch else 1)
    if req.ref_model:
        ref = req.ref_model
    elif trainer in R.PREFERENCE_TRAINERS or trainer == "rloo":
        # DPO/KTO always score against a frozen reference; RLOO's beta defaults to 0.05 (KL term on). With PEFT the
        # reference is the base model with the adapter disabled: no second copy.
        ref = "none" if method != "full" else "copy"
    elif trainer == "gkd":
        ref = "copy"  # the teacher: by default a second model of the same architecture
    else:
        ref = "none"  # GRPO: beta defaults to 0.0, so no reference model is loaded
    return Plan(
        trainer=trainer, method=method, lora_r=req.lora_r or DEFAULT_LORA_R, backend=backend, zero_stage=zero,
        offload=req.offload or "none", offload_device=req.offload_device or "cpu", precision=precision,
        seq_len=seq_len, micro_batch=micro, grad_accum=accum,
        grad_ckpt=True if req.grad_ckpt is None else req.grad_ckpt,  # TRL's _BaseConfig turns it on by default
        liger=bool(req.liger), attn=req.attn or "sdpa", packing=bool(req.packing), sp_size=sp, cp_size=cp,
        num_processes=world, nodes=target.nodes, gpus_per_node=target.gpus_per_node, unsloth=bool(req.unsloth),
        num_generations=(req.num_generations or DEFAULT_NUM_GENERATIONS[trainer]) if generating else 0,
        max_completion_len=max_completion, vllm_mode=vllm_mode, vllm_gpus=vllm_gpus,
        vllm_mem_fraction=(req.vllm_mem_fraction or DEFAULT_VLLM_MEM_FRACTION) if vllm_mode == "colocate" else 0.0,
        ref_model=ref, lora_alpha=2 * (req.lora_r or DEFAULT_LORA_R), trust_remote_code=req.trust_remote_code,
    )
