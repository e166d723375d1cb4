"""The checks verify makes before it launches anything: the bundle's files, their agreement, this machine's GPUs,
the installed packages, the rules on the plan the files describe, and why a run cannot happen here."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.verify.folder import _Bundle, _uses_deepspeed
from advisor.verify.limits import GPU_MEMORY_SLACK
from advisor.verify.outcome import FAIL, PASS, SKIP, StepResult, _gib


def step_bundle(b: _Bundle) -> StepResult:
    need = ["plan.json", "train.py", "launch.sh", "accelerate.yaml"]
    if _uses_deepspeed(b):
        need.append("ds_config.json")
    missing = [n for n in need if n not in b.files]
    if b.unreadable:
        why = next(iter(b.unreadable.values()))
        more = f" (and {len(b.unreadable) - 1} more)" if len(b.unreadable) > 1 else ""
        return StepResult("bundle", FAIL, f"{why}{more}",
                          "replace it with the file generate wrote: trl-advisor generate --force")
    if missing:
        return StepResult("bundle", FAIL, f"{b.path}: missing {', '.join(missing)}",
                          "re-create the bundle with trl-advisor generate --force")
    return StepResult("bundle", PASS, f"{b.path}: {', '.join(need)}")




def step_consistency(b: _Bundle) -> StepResult:
    from advisor.bundle.consistency import check_bundle_files, is_edit_after_planning, model_config_problems

    try:
        problems = check_bundle_files(b.files)
        if b.ctx is not None:  # --random-init builds what model_config.json says: it must be the model estimated
            problems += model_config_problems(b.files.get("model_config.json"), b.ctx.model)
    except Exception as exc:  # a malformed file must not stop the other steps
        return StepResult("consistency", FAIL, f"could not check the files: {type(exc).__name__}: {exc}")
    # edits after planning are warnings: the estimate verify compares with is the files'
    edits = [p for p in problems if is_edit_after_planning(p)]
    problems = [p for p in problems if p not in edits]
    warnings = [f"edited after planning: {p[len('plan.json: '):]} (verify compares with the estimate of the "
                "files)" for p in edits]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return StepResult("consistency", FAIL, f"{problems[0]}{more}",
                          "`trl-advisor check --bundle DIR` lists them all; re-generate or fix the edited file",
                          warnings=warnings)
    return StepResult("consistency", PASS, f"{len(b.files)} files agree with train.py's CONFIG", warnings=warnings)


POWER_CAP_NOTE_FRACTION = 0.9
"""The hardware step notes a GPU whose enforced power limit (NVML) is below this share of its part's board power
(the catalogue's tdp_watts, from the vendor's datasheet): the speed model's rates were measured at full power, and a
capped GPU lowers its clocks under load, so GPU-bound steps run slower than predicted."""


@dataclass
class Machine:
    gpus: int
    gpu_name: str | None
    gpu_id: str | None
    """Catalogue id of the probed GPU, None when the catalogue has no such part."""
    memory_bytes: int | None
    power_limit_watts: float | None = None
    """The lowest enforced power limit over the GPUs (NVML), watts; None when not read."""
    tdp_watts: int | None = None
    """The catalogue part's board power, watts; None when the part or its figure is unknown."""

    def to_json(self) -> dict:
        return {"gpus": self.gpus, "name": self.gpu_name, "id": self.gpu_id, "memory_bytes": self.memory_bytes,
                "power_limit_watts": self.power_limit_watts, "tdp_watts": self.tdp_watts}

    @property
    def power_capped(self) -> bool:
        return (self.power_limit_watts is not None and bool(self.tdp_watts)
                and self.power_limit_watts < POWER_CAP_NOTE_FRACTION * self.tdp_watts)


def machine(report) -> Machine:
    from advisor import catalog

    gpus = list(getattr(report, "gpus", ()) or ())
    if not gpus:
        return Machine(0, None, None, None)
    first = gpus[0]
    spec = catalog.match_nvml_name(first.name, first.memory_total_bytes or None)
    limits = [g.power_limit_watts for g in gpus if getattr(g, "power_limit_watts", None)]
    power = {"power_limit_watts": min(limits) if limits else None, "tdp_watts": spec.tdp_watts if spec else None}
    slices = [d.memory_total_bytes for g in gpus for d in (g.mig_devices or ()) if d.memory_total_bytes]
    if slices:  # MIG: one training process per slice, no collectives across slices (as the planner assumes)
        return Machine(1, first.name, spec.id if spec else None, max(slices), **power)
    return Machine(len(gpus), first.name, spec.id if spec else None,
                   min(g.memory_total_bytes for g in gpus) or None, **power)


def step_hardware(b: _Bundle, m: Machine) -> StepResult:
    hw = b.doc.get("hardware") or {}
    plan_gpu = b.ctx.target.gpu.id if b.ctx is not None else hw.get("gpu")
    per_node = b.plan.gpus_per_node if b.plan else hw.get("gpus_per_node")
    nodes = b.plan.nodes if b.plan else hw.get("nodes", 1)
    plan_mem = b.ctx.target.gpu_memory_bytes if b.ctx is not None else hw.get("gpu_memory_bytes")
    wanted = f"{per_node} x {plan_gpu}" + (f" on each of {nodes} nodes" if nodes and nodes > 1 else "")
    if m.gpus == 0:
        return StepResult("hardware", FAIL, f"no GPU found on this machine; the plan is for {wanted}",
                          "run verify on the machine the bundle was generated for")
    problems, notes = [], []
    here = f"{m.gpus} x {m.gpu_id or m.gpu_name} ({_gib(m.memory_bytes)})"
    if plan_gpu and m.gpu_id != plan_gpu:
        problems.append(f"GPU {m.gpu_id or repr(m.gpu_name)} is not the plan's {plan_gpu}")
    if isinstance(plan_mem, int) and m.memory_bytes is not None and m.memory_bytes < plan_mem * (1 - GPU_MEMORY_SLACK):
        problems.append(f"{_gib(m.memory_bytes)} per GPU < the plan's {_gib(plan_mem)}")
    elif isinstance(plan_mem, int) and m.memory_bytes is not None and m.memory_bytes > plan_mem * (1 + GPU_MEMORY_SLACK):
        notes.append(f"more memory per GPU than planned ({_gib(plan_mem)})")
    if isinstance(per_node, int) and m.gpus < per_node:
        problems.append(f"{m.gpus} GPU(s) < the plan's {per_node} per node")
    elif isinstance(per_node, int) and m.gpus > per_node:
        notes.append(f"the run uses {per_node} of {m.gpus} GPUs")
    if nodes and nodes > 1:
        notes.append(f"this machine is one node of the plan's {nodes}")
    if m.power_capped:
        notes.append(f"power limit {m.power_limit_watts:.0f} W of the part's {m.tdp_watts} W: a GPU-bound step may "
                     "run slower than the estimate, made for full power")
    if problems:
        return StepResult("hardware", FAIL, f"{here}: {'; '.join(problems)}",
                          "predictions hold for the plan's hardware: re-generate for this machine "
                          "(trl-advisor generate ... without --gpu) or verify where the plan was made for")
    return StepResult("hardware", PASS, f"{here} matches {wanted}" + (f" ({'; '.join(notes)})" if notes else ""))


def step_packages(b: _Bundle, report, *, cpu: bool, trl_requires=None) -> StepResult:
    from advisor.verify import packages

    text = b.files.get("requirements.txt")
    if text is None:
        return StepResult("packages", SKIP, "no requirements.txt in the bundle")
    rule_check = packages.rule_check_for(b.ctx) if b.ctx is not None else None
    requires = packages.trl_requirements() if trl_requires is None else trl_requires
    return packages.judge(text, packages.installed_lookup(report), cpu=cpu, trl_requires=requires,
                          rule_check=rule_check)


def step_rules(b: _Bundle) -> StepResult:
    if b.read_error is not None or b.ctx is None:
        exc = b.read_error
        message = getattr(exc, "message", None) or (f"{type(exc).__name__}: {exc}" if exc else "nothing read")
        return StepResult("rules", FAIL, f"the rules could not read the bundle: {message}",
                          getattr(exc, "hint", None))
    from advisor.check import difference_findings
    from rules.engine import failures, run_rules

    found = failures(run_rules(b.ctx) + difference_findings(b.reading))
    errors = [f for f in found if f.severity == "error"]
    warnings = [f for f in found if f.severity == "warning"]
    warn = f"; {len(warnings)} warning(s): {', '.join(dict.fromkeys(f.id for f in warnings))}" if warnings else ""
    if errors:
        first = errors[0]
        more = f" (+{len(errors) - 1} more error(s))" if len(errors) > 1 else ""
        return StepResult("rules", FAIL, f"{first.id}: {first.message}{more}{warn}",
                          first.fix or "trl-advisor check --bundle DIR lists every finding")
    return StepResult("rules", PASS, f"no errors on the plan the files describe{warn}")


def run_blocker(b: _Bundle, m: Machine, bundle_step: StepResult, *, cpu: bool) -> str | None:
    """Why the run cannot happen here, or None."""
    if bundle_step.status == FAIL and ("train.py" not in b.files or "launch.sh" not in b.files):
        return "the bundle has no train.py or launch.sh"
    nodes = b.plan.nodes if b.plan else (b.doc.get("hardware") or {}).get("nodes", 1)
    if nodes and nodes > 1:
        # launch.sh joins an N-node accelerate job (MAIN_PROCESS_IP, --num_machines N): started on one node alone it
        # waits for the others, so a one-node share of the run is not something the launcher can do.
        return (f"multi-node bundle ({nodes} nodes): launch.sh joins a {nodes}-node job and would wait for the "
                "others; run it with sbatch slurm.sbatch")
    if cpu:
        return None
    if m.gpus == 0:
        return "no GPU on this machine"
    per_node = b.plan.gpus_per_node if b.plan else (b.doc.get("hardware") or {}).get("gpus_per_node")
    if isinstance(per_node, int) and m.gpus < per_node:
        return f"the plan needs {per_node} GPUs per node, this machine has {m.gpus}"
    return None
