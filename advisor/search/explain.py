"""Why the plan is what it is: one sentence per knob (the user's pin, the rule, or the estimate that decided it),
and the short report `generate` prints."""

from __future__ import annotations

from advisor.core.plan import Plan
from advisor.core.safeio import shell_path
from advisor.core.specs import GIB
from advisor.model.job import describe as describe_job
from advisor.resolve.attention import choose_attention
from advisor.search.candidates import DEFAULT_GLOBAL_BATCH, Candidate, Decision, family, smallest_micro_batch


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
        if plan.offload != "none":
            # every plan that fits offloads: the fastest wins, whatever its method (planner._rank_key)
            reasons["method"] = (f"{plan.method}: fastest of the plans that fit, all of which offload to host memory "
                                 "(full fine-tuning there keeps fp32 Adam states of every weight in host RAM)")
        else:
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
             + (f", host {mem['host_bytes'] / GIB:.0f} GiB" if mem.get("host_bytes") else ""),
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
