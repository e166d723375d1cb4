"""Why the plan is what it is: one sentence per knob (the user's pin, the rule, or the estimate that decided it),
and the short report `generate` prints."""

from __future__ import annotations

from advisor.core.plan import Plan
from advisor.core.safeio import shell_path
from advisor.core.specs import GIB
from advisor.model.job import describe as describe_job
from advisor.resolve.attention import choose_attention
from advisor.search.candidates import DEFAULT_GLOBAL_BATCH, Candidate, Decision, family, smallest_micro_batch
from advisor.search.ranking import OFFLOAD_MARGIN, offload_buys_memory, offload_needs


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

    on_gpu, rival = decision.on_gpu, decision.offload_rival
    if not pin("method", "method"):
        if plan.offload != "none" and on_gpu is None:
            # every plan that fits offloads: the fastest wins, whatever its method (planner._choose)
            reasons["method"] = (f"{plan.method}: fastest of the plans that fit, all of which offload to host memory "
                                 "(full fine-tuning there keeps fp32 Adam states of every weight in host RAM)")
        elif plan.method != on_gpu.plan.method:
            # an offloading plan of a more faithful method beat the plan on the GPUs by the margin
            reasons["method"] = (f"{plan.method}: fits only by offloading, and is predicted faster than the best "
                                 f"{on_gpu.plan.method} plan on the GPUs (below, offload)")
        else:
            reasons["method"] = (f"{plan.method}: the most faithful method that fits" if plan.method != "full" else
                                 "full: every weight trained, and it fits")
    if not (pin("backend", "backend") or pin("zero", "backend")):
        # with a faster offloading plan left out (its margin, or an offload it does not need), this one is the
        # fastest on the GPUs alone
        where = " on the GPUs alone" if rival is not None else ""
        reasons["backend"] = f"fastest that fits{where}: {chosen.tokens_per_second:,.0f} tokens/s predicted"
    if not pin("offload", "offload"):
        margin = f"{OFFLOAD_MARGIN * 100:.0f}%"
        if plan.offload != "none" and on_gpu is None:
            reasons["offload"] = (f"{plan.offload}: no plan that keeps everything on the GPUs fits with headroom and "
                                  "passes the rules")
        elif plan.offload != "none":
            # what the offload buys: the same plan without it does not fit (planner._choose asked for its twin)
            reasons["offload"] = (f"{plan.offload}: {chosen.tokens_per_second:,.0f} tokens/s predicted against "
                                  f"{on_gpu.tokens_per_second:,.0f} for the best plan on the GPUs alone "
                                  f"({on_gpu.plan.short()}), more than the {margin} an offload must gain (its speed "
                                  "follows the host CPU and PCIe, which the estimate knows less well); without the "
                                  f"offload this plan {chosen.without_offload.rejected_because}")
        elif rival is not None and not offload_buys_memory(rival):
            reasons["offload"] = (f"none: offload not needed: the fastest offloading plan ({rival.plan.short()}) "
                                  f"{offload_not_needed(rival)}")
        elif rival is not None:
            reasons["offload"] = (f"none: the fastest offloading plan ({rival.plan.short()}) predicts "
                                  f"{rival.tokens_per_second:,.0f} tokens/s, not above the "
                                  f"{offload_needs(rival.plan, chosen, req):,.0f} it needs ({margin} over this plan, "
                                  "after the backends' margins: an offload's speed follows the host CPU and PCIe, "
                                  "which the estimate knows less well)")
    if not pin("micro_batch", "micro_batch"):
        reasons["micro_batch"] = _micro_reason(decision, plan)
    if not pin("grad_accum", "grad_accum"):
        target = req.global_batch or DEFAULT_GLOBAL_BATCH
        reasons["grad_accum"] = (f"{plan.micro_batch} x {plan.dp_size} data-parallel x {plan.grad_accum} = "
                                 f"{plan.global_batch} sequences per step (target {target})")
        if plan.num_generations:
            reasons["grad_accum"] += f"; divisible by num_generations {plan.num_generations} (GRPOConfig rule)"
        smallest = smallest_micro_batch(req)
        if plan.global_batch > target and plan.micro_batch == smallest and plan.grad_accum == 1:
            # the target is below what one step of the smallest micro-batch trains on these processes
            kto = " KTO allows (its KL term needs 2 per device)" if smallest > 1 else ""
            reasons["grad_accum"] += (f"; the smallest micro-batch{kto}, {smallest}, over {plan.dp_size} data-parallel "
                                      f"processes already trains {plan.global_batch}")
        elif plan.global_batch != target and target % plan.dp_size:
            # say why the target was missed: no micro-batch x accumulation over these processes gives it
            reasons["grad_accum"] += (f"; {target} is not a multiple of the {plan.dp_size} data-parallel processes: "
                                      "pass --global-batch to choose another")
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
    if plan.attn != "sdpa" and "attn" not in pinned:
        reasons["attn"] = choose_attention(req, decision.model, decision.target, plan.precision)[1]
    if plan.trainer in ("dpo", "kto") and plan.method == "full" and "ref_model" not in pinned:
        other = next((c for c in candidates if c.plan.ref_model != plan.ref_model and c.feasible
                      and c.plan.method == plan.method and c.plan.backend == plan.backend and c.plan.zero_stage == plan.zero_stage), None)
        if plan.ref_model == "precompute":
            reasons["ref_model"] = ("precompute: no reference copy in GPU memory; the whole dataset is scored once "
                                    "before training (--max-steps does not shorten that pass)"
                                    + (f"; {chosen.tokens_per_second:,.0f} vs {other.tokens_per_second:,.0f} "
                                       "tokens/s with a copy" if other else "; a copy does not fit"))
        else:
            reasons["ref_model"] = ("copy: a frozen second model; precomputing the reference log-probs would not be "
                                    "faster" + (f" ({other.tokens_per_second:,.0f} tokens/s)" if other else ""))
    return reasons


def offload_not_needed(c: Candidate) -> str:
    """Why an offloading plan whose twin without offload fits (Candidate.without_offload) was not chosen, whatever its
    speed (ranking.offload_buys_memory), after its name: said in the alternatives and the offload reason."""
    twin = c.without_offload
    fits = (f"({twin.memory.per_gpu_reserved_bytes / GIB:.1f} GiB reserved of {twin.memory.capacity_bytes / GIB:.1f} "
            "GiB usable per GPU)")
    gain = f"so the {c.tokens_per_second:,.0f} tokens/s predicted for it are not offload's gain"
    if twin.plan.backend == c.plan.backend:
        return f"fits on the GPUs without its offload {fits}; an offload only frees GPU memory, {gain}"
    # the one-GPU plain twin (planner._without_offload): one process shards nothing
    return (f"fits on the GPU as the plain plan at the same micro-batch {fits}; on one GPU ZeRO shards nothing and "
            f"its offload frees only what ZeRO adds, {gain}")


def _micro_reason(decision: Decision, plan: Plan) -> str:
    req = decision.request
    if req.global_batch and req.grad_accum:
        return (f"{plan.micro_batch}: what --global-batch {req.global_batch} and --grad-accum {req.grad_accum} leave "
                f"for each of the {plan.dp_size} data-parallel replicas")
    target = req.global_batch or DEFAULT_GLOBAL_BATCH
    if plan.micro_batch == smallest_micro_batch(req) and plan.micro_batch * plan.dp_size > target:
        return (f"{plan.micro_batch}: the smallest{' KTO allows' if plan.micro_batch > 1 else ''}, already over the "
                f"global batch of {target} on {plan.dp_size} data-parallel processes")
    note = decision.chosen.next_micro_note
    if note:
        return f"{plan.micro_batch}: the largest that fits with headroom ({note})"
    if plan.micro_batch * plan.dp_size * 2 > (decision.request.global_batch or DEFAULT_GLOBAL_BATCH):
        return f"{plan.micro_batch}: the largest that stays within the global batch"
    return f"{plan.micro_batch}: predicted fastest (larger ones fit but are not faster)"


def _twin(candidates: list[Candidate], plan: Plan, **change) -> Candidate | None:
    want = family(plan.with_(**change)), change
    for c in candidates:
        if family(c.plan) == want[0] and all(getattr(c.plan, k) == v for k, v in change.items()):
            return c
    return None


def render_decision(result: dict, decision: Decision, out: str) -> str:
    """The short report `generate` prints: the plan, its numbers, why, what lost, and where the bundle is."""
    c = decision.chosen
    mem, speed = result["memory"], result["speed"]
    lines = [f"{decision.model.id} {c.plan.trainer.upper()} on {decision.target.describe()}",
             f"plan     {c.plan.short()}",
             f"memory   {mem['per_gpu_peak_bytes'] / GIB:.1f} GiB peak per GPU (reserved "
             f"{mem['per_gpu_reserved_bytes'] / GIB:.1f} of {mem['gpu_capacity_bytes'] / GIB:.1f} GiB usable)"
             # host_bytes is per node (offloaded states, each process's baseline and model loading): a node must
             # have it, and on a catalogue target, whose nodes' RAM is not known, no rule could check it (MEM003)
             + (f", host RAM {mem['host_bytes'] / GIB:.0f} GiB per node" if mem.get("host_bytes") else ""),
             f"speed    {speed['tokens_per_second']:,.0f} tokens/s, {speed['step_seconds']:.2f} s/step, "
             f"MFU {speed['mfu'] * 100:.0f}%  ({decision.considered} configurations estimated)"]
    if speed.get("amortized_seconds_per_step"):
        lines.append(f"         {speed['effective_tokens_per_second']:,.0f} tokens/s over the whole run: "
                     f"{speed['amortized_seconds_per_step']:.2f} s per step of work outside the steps "
                     f"({'the reference pass before training' if c.plan.ref_model == 'precompute' else 'BEMA updates'})")
    if result.get("job"):
        lines.append(f"job      {describe_job(result['job'])}")
    if decision.reasons:
        lines.append("why")
        width = max(len(k) for k in decision.reasons)
        lines += [f"  {k.ljust(width)}  {v}" for k, v in decision.reasons.items()]
    if decision.alternatives:
        lines.append("rejected")
        lines += [f"  {a.plan.short()}: {a.rejected_because}" for a in decision.alternatives[:5]]
    # every finding the JSON holds: failures, and checks that could not be made (status unknown: a catalogue target
    # does not say how much host RAM it has, say), which are shown as such rather than left out
    problems = result.get("findings", [])
    if problems:
        lines.append("findings")
        for f in problems:
            unknown = f.get("status") == "unknown"
            label = f"not checked ({f.get('rule_severity', f['severity'])} if it fails)" if unknown else f["severity"]
            lines.append(f"  {f['id']} {label}: {f['message']}")
    # the command is for pasting into a shell: the folder name is quoted as one word, whatever it holds
    files = len(result.get("files", []))
    nodes = decision.chosen.plan.nodes
    if nodes > 1:
        # launch.sh alone stops at once on a multi-node plan (it needs node 0's address and each node's rank)
        lines.append(f"wrote    {out}/ ({files} files): sbatch {shell_path(f'{out}/slurm.sbatch')} on SLURM, or on "
                     f"every node MACHINE_RANK=<0..{nodes - 1}> MAIN_PROCESS_IP=<node 0> "
                     f"bash {shell_path(f'{out}/launch.sh')}")
    else:
        lines.append(f"wrote    {out}/ ({files} files): bash {shell_path(f'{out}/launch.sh')}")
    return "\n".join(lines)
