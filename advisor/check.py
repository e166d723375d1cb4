"""Assessing a configuration without searching: `estimate` (one plan's memory and speed, with the rules'
findings), `check` (every rule against a request) and `check --bundle` (the files read back into the plan they
describe, then estimated and checked). Here the estimate and the rules are joined: the model knows nothing of the
rules, and the rules receive the estimate as data in their Context."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor import catalog, resolve
from advisor.bundle import read as bundle
from advisor.bundle.peak import absent_reason, peak_moment, safety_margin_bytes
from advisor.bundle.readback import (
    PLAN_JSON_WHERE,
    REQUEST_TO_PLAN,
    Difference,
    PlanReading,
    flag_name,
    read_plan,
    same_value,
)
from advisor.core.errors import AdvisorError, InputFileError
from advisor.core.request import Request
from advisor.core.target import Target, default_link
from advisor.model.estimate import BREAKDOWN_KEYS, estimate_plan, result_dict
from advisor.model.job import describe as describe_job
from advisor.model.units import GIB
from advisor.search.vllm_pins import check_vllm_gpus
from rules import vercmp
from rules.engine import CheckReport, finding_dicts, run_rules
from rules.model import FAIL, Context, Finding, default_versions, normalize_package


def estimate_request(req: Request, *, probe=None) -> dict[str, Any]:
    """`estimate`: resolve the request (model, hardware, documented defaults), estimate that one plan, and join the
    rules' findings (computed on the estimate, passed to them as data)."""
    resolve.check_request(req)
    model = resolve.resolve_model(req)
    target = resolve.resolve_target(req, probe=probe)
    resolve.check_against_target(req, target)
    check_vllm_gpus(req, model, target)
    plan = resolve.default_plan(req, model, target)
    mem, spd = estimate_plan(model, plan, target)
    findings = finding_dicts(Context(request=req, plan=plan, model=model, target=target, memory=mem, speed=spd))
    return result_dict(req, model, target, plan, mem, spd, findings)


def _estimate(model, plan, target) -> tuple[Any, Any]:
    """(memory, speed) of a plan read from files, or (None, None) where the model cannot estimate it (a value the
    files hold that no generated plan has): the rules still run, and the MEM rules then say not applicable."""
    try:
        return estimate_plan(model, plan, target)
    except Exception:  # noqa: BLE001 - any failure of the estimate leaves the rules to speak
        return None, None


def check_request(req, *, probe=None) -> CheckReport:
    """Resolve a Request (model, hardware, documented defaults for unpinned knobs) and run every rule."""
    resolve.check_request(req)
    model = resolve.resolve_model(req)
    target = resolve.resolve_target(req, probe=probe)
    resolve.check_against_target(req, target)
    check_vllm_gpus(req, model, target)
    plan = resolve.default_plan(req, model, target)
    memory, speed = _estimate(model, plan, target)
    ctx = Context(request=req, plan=plan, model=model, target=target, memory=memory, speed=speed)
    return CheckReport(findings=run_rules(ctx), plan=plan, model=model, target=target, notes=list(target.notes),
                       source="request")


DIFFERENCE_FINDINGS = {
    "vs_plan_json": ("PLAN001", "files-differ-from-plan-json"),
    "vs_config": ("PLAN002", "runtime-file-differs-from-config"),
    "vs_flags": ("PLAN003", "flag-overrides-the-files"),
}
"""Differences between the places a bundle states its plan, reported as warnings: an edit is the user's right; what it
does to memory and speed is judged by the rules on the plan the files describe (MEM001 when it no longer fits).
Their ids are not rules: check --bundle renders them in their own section, and `trl-advisor explain` reads them from
CHECK_FINDINGS_EXPLAINED."""


@dataclass
class BundleCheckReport(CheckReport):
    """`check --bundle`: the rules' findings on the plan the files describe, that plan's estimate, and where the
    files differ from plan.json, from train.py's CONFIG or from the flags."""

    reading: PlanReading | None = None
    memory: Any = None
    speed: Any = None

    @property
    def differences(self) -> list:
        return [f for f in self.findings if f.id.startswith("PLAN")]

    def to_json(self, *, include_all: bool = False) -> dict:
        out = super().to_json(include_all=include_all)
        if self.memory is not None and self.speed is not None and self.model is not None:
            out["estimate"] = {
                "per_gpu_peak_bytes": int(self.memory.per_gpu_peak_bytes),
                "per_gpu_reserved_bytes": int(self.memory.per_gpu_reserved_bytes),
                "gpu_capacity_bytes": int(self.memory.capacity_bytes), "fits": bool(self.memory.fits),
                "step_seconds": float(self.speed.step_seconds),
                "tokens_per_second": float(self.speed.tokens_per_second)}
        if self.reading is not None:
            r = self.reading
            out["differences"] = {key: [d.to_dict() for d in getattr(r, key)] for key in DIFFERENCE_FINDINGS}
            out["sources"] = dict(r.sources)
            out["planned"] = r.planned.to_dict() if r.planned is not None else None
        return out


def check_bundle(path: str, *, hardware: str | None = None, request: Request | None = None) -> BundleCheckReport:
    """Read a folder of training configuration files, rebuild the plan they describe (REQUEST flags in `request`
    fill what the files lack and override what they state), estimate it, and run every rule on it (the CFG rules
    read the files themselves). Differences between the files, plan.json, CONFIG and the flags are findings."""
    ctx, reading = read_bundle(path, hardware=hardware, request=request)
    findings = run_rules(ctx) + difference_findings(reading) + file_findings(path, ctx.files, ctx.model)
    return BundleCheckReport(findings=findings, plan=ctx.plan, model=ctx.model, target=ctx.target,
                             assumptions=list(ctx.files.assumptions), notes=[*ctx.files.notes, *ctx.target.notes],
                             source=path, reading=reading, memory=ctx.memory, speed=ctx.speed)


def bundle_context(path: str, *, hardware: str | None = None, request: Request | None = None) -> Context:
    return read_bundle(path, hardware=hardware, request=request)[0]


def read_bundle(path: str, *, hardware: str | None = None,
                request: Request | None = None) -> tuple[Context, PlanReading]:
    """The rules' Context for the plan a folder's files describe, and how that plan was read."""
    files = bundle.read_folder(path)
    flags = _request_overrides(request)
    name, model_where = files_model(files)
    if request is not None and request.model:
        if name and request.model != name:
            files.assumptions.append(f"model = {request.model!r} (--model; the files name {name!r} in "
                                     f"{model_where})")
        name = request.model
    if not name:
        raise InputFileError(f"{path}: the files do not name a model",
                             hint="pass --model MODEL (and --gpus N --gpu GPU), or set model_name_or_path in the "
                                  "TRL config YAML")
    model = catalog.resolve_model(name)
    target = bundle_target(files, name, hardware, request)
    noted = len(files.assumptions)
    reading = read_plan(files, target, flags)
    more = _derived_overrides(request, reading.plan, flags)
    if more:
        del files.assumptions[noted:]  # the second reading notes the same defaults again
        reading = read_plan(files, target, {**flags, **more})
    _model_difference(files, model, model_where, reading)
    if request is not None and request.teacher:
        teacher_flags = _teacher_overrides(request, model, reading.plan)
        if teacher_flags:
            del files.assumptions[noted:]
            reading = read_plan(files, target, {**flags, **more, **teacher_flags})
            more = {**more, **teacher_flags}
    _flags_applied(reading, {**flags, **more})
    _gpu_difference(files, target, hardware, request, reading)
    plan = reading.plan
    memory, speed = _estimate(model, plan, target)
    versions, origin = _bundle_versions(files, target, plan)
    ctx = Context(request=None, plan=plan, model=model, target=target, memory=memory, speed=speed,
                  versions=versions, files=files, version_origin=origin)
    return ctx, reading


def files_model(files) -> tuple[str | None, str]:
    """The model the files train and where they name it: the TRL config's model_name_or_path, train.py's MODEL_ID,
    a literal id train.py loads, then plan.json's record."""
    from advisor.bundle.consistency import name_constant_problem, train_constants
    from advisor.core.files import Unresolved

    value = files.trl_args.get("model_name_or_path")
    if isinstance(value, str) and not isinstance(value, Unresolved) and value:
        return value, "the TRL config model_name_or_path"
    if files.train_py:
        problem = name_constant_problem(files.train_py, "MODEL_ID")
        if problem:
            # `MODEL_ID = SOMEVAR` or `torch.float16`: train.py stops before it loads anything
            raise InputFileError(problem, hint="write the model's hub id or folder as a string in train.py's MODEL_ID")
        absent = object()
        try:
            constant = train_constants(files.train_py).get("MODEL_ID", absent)
        except (SyntaxError, RecursionError, MemoryError, ValueError):
            constant = absent
        if isinstance(constant, Unresolved):
            # `MODEL_ID = os.environ["M"]`: which model runs is decided when train.py runs; its text names none
            files.assumptions.append(f"MODEL_ID = {str(constant)[:60]} in train.py is not read: an expression the "
                                     "reader does not run (the model is taken from the files' other statements)")
        elif isinstance(constant, str) and constant.strip():
            return constant, "train.py MODEL_ID"
        elif constant is not absent:
            # MODEL_ID = 42, None or '': from_pretrained would fail on it; plan.json's record is not what runs
            raise InputFileError(f"train.py: MODEL_ID is {repr(constant)[:60]}, not a model id or path",
                                 hint="write the model's hub id or folder as a string in train.py's MODEL_ID")
    if files.model_ids:
        return files.model_ids[0], "train.py"
    name = bundle.model_id(files)
    return name, "plan.json"


def _model_difference(files, model, where: str, reading: PlanReading) -> None:
    """The files train another model than plan.json planned for: a difference like any other field's."""
    planned = (files.plan_json or {}).get("model")
    planned_id = planned.get("id") if isinstance(planned, dict) else None
    if not isinstance(planned_id, str) or where == "plan.json" or planned_id == model.id:
        return
    try:
        same = catalog.resolve_model(planned_id).id == model.id
    except AdvisorError as exc:  # the record itself is unsound (a path to a pipe, a name no catalogue knows)
        raise InputFileError(f"plan.json: model.id: {exc.message}",
                             hint="re-create the bundle with trl-advisor generate --force, or correct model.id") \
            from None
    if not same:
        reading.vs_plan_json.insert(0, Difference("model", model.id, where, planned_id, "plan.json"))


def _request_overrides(request: Request | None) -> dict[str, Any]:
    """Plan fields the REQUEST flags set (None: not given)."""
    if request is None:
        return {}
    resolve.check_request(request, applicable=False)
    out: dict[str, Any] = {}
    for name, value in request.to_dict().items():
        if value is None or name in _NOT_PLAN_FLAGS:
            continue
        if name == "trust_remote_code" and value is False:
            continue  # a store_true flag: False is "not given"
        out[REQUEST_TO_PLAN.get(name, name)] = value
    return out


_NOT_PLAN_FLAGS = frozenset({"model", "gpu", "hardware", "global_batch", "tokens", "steps", "teacher"})


def _teacher_overrides(request: Request, model, plan) -> dict[str, Any]:
    """--teacher with --bundle: the teacher train.py would load and its size, as generate resolves them (the
    student's vocabulary checked); a usage error on a bundle that trains without one."""
    if plan.trainer != "gkd":
        raise AdvisorError(f"--teacher applies to GKD only: this bundle trains {plan.trainer}",
                           hint="drop --teacher, or check a GKD bundle")
    teacher, params = resolve.resolve_teacher(request.with_(trainer="gkd"), model)
    return {"teacher": teacher, "teacher_params": params}


def _flags_applied(reading: PlanReading, flags: dict[str, Any]) -> None:
    """Every REQUEST flag given with --bundle is in the plan that is checked, or the check stops (exit 2): a flag
    the files' plan has no place for (--zero 3 on a bundle without DeepSpeed, --vllm server on an SFT bundle) would
    otherwise pass silently, and the report would be read as the answer for a plan nobody checked."""
    plan = reading.plan
    for name, value in flags.items():
        if not hasattr(plan, name) or same_value(getattr(plan, name), value):
            continue
        flag = flag_name(name)
        why = reading.sources.get(name, "the files")
        raise AdvisorError(f"{flag} {value} does not apply to this bundle: its plan has {name} "
                           f"{getattr(plan, name)!r} ({why})",
                           hint=f"drop {flag}, or give the flags that make it apply (e.g. --backend deepspeed for "
                                "--zero, --trainer grpo for --vllm), or generate a bundle with it")



def _gpu_difference(files, target: Target, hardware: str | None, request: Request | None,
                    reading: PlanReading) -> None:
    """--gpu or --hardware beside --bundle names another GPU than the one plan.json was planned for: a difference
    like a flag that overrides a plan field (PLAN003), since the plan's micro-batch, offload and predicted speed were
    chosen for the planned GPU, and the report is for the other one."""
    flag = "--hardware" if hardware else ("--gpu" if request is not None and request.gpu else None)
    planned = bundle.hardware_hint(files).get("gpu")
    if flag is None or not planned:
        return
    try:
        planned_id = catalog.resolve_gpu(str(planned)).id
    except AdvisorError:
        planned_id = str(planned)
    if planned_id != target.gpu.id:
        reading.vs_flags.append(Difference("gpu", target.gpu.id, flag, planned_id, PLAN_JSON_WHERE))


def _derived_overrides(request: Request | None, plan, flags: dict[str, Any]) -> dict[str, Any]:
    """Plan fields a flag changes through arithmetic: --gpus/--nodes set the training processes, --global-batch the
    gradient accumulation (it must divide exactly, as `generate` requires)."""
    if request is None:
        return {}
    out: dict[str, Any] = {}
    if ("gpus_per_node" in flags or "nodes" in flags) and "num_processes" not in flags:
        per_node = plan.gpus_per_node - (plan.vllm_gpus if plan.vllm_mode == "server" else 0)
        out["num_processes"] = max(1, per_node) * plan.nodes
    if request.global_batch is not None and "grad_accum" not in flags:
        dp = max(1, out.get("num_processes", plan.num_processes) // max(plan.sp_size, plan.cp_size, 1))
        per_step = plan.micro_batch * dp
        if request.global_batch % per_step:
            raise AdvisorError(f"--global-batch {request.global_batch} is not a multiple of micro_batch x "
                               f"data-parallel = {plan.micro_batch} x {dp}",
                               hint=f"use a multiple of {per_step}, or pass --grad-accum")
        out["grad_accum"] = request.global_batch // per_step
    return out


def difference_findings(reading: PlanReading) -> list[Finding]:
    """Each difference between two statements of the plan, as a warning with both values."""
    out = []
    for key, (rule_id, name) in DIFFERENCE_FINDINGS.items():
        for d in getattr(reading, key):
            d = Difference(d.field, _capped(d.value), d.where, _capped(d.other), d.other_where)
            if key == "vs_plan_json":
                message = (f"{d.field} is {d.value!r} in {d.where}, plan.json planned {d.other!r}: the estimate "
                           "and the rules here are for the files")
                fix = ("if the edit is meant, re-plan for it (trl-advisor generate with the new value pinned) so "
                       "that plan.json's predictions match; otherwise set it back")
            elif key == "vs_config":
                message = (f"{d.field} is {d.value!r} in {d.where} (what runs), train.py CONFIG says {d.other!r}")
                fix = f"make CONFIG[{d.field!r}] in train.py say what runs, or change {d.where}"
            elif d.field == "gpu":
                message = (f"{d.where} checks the files on {d.value}; plan.json planned them for {d.other}: the "
                           "micro-batch, offload and predicted speed were chosen for that GPU")
                fix = (f"to plan for {d.value}, run trl-advisor generate again with --gpu {d.value}; drop {d.where} "
                       "to check the files on the GPU they were planned for")
            else:
                message = f"{d.where} {d.value!r} overrides {d.other!r} from {d.other_where}"
                fix = f"edit {d.other_where} to match, or drop {d.where}"
            out.append(Finding(id=rule_id, name=name, severity="warning", status=FAIL, message=message, fix=fix,
                               auto_fix=None, sources=(), reads=d.to_dict()))
    return out


SHOWN_VALUE_CHARS = 80
"""A value from a file longer than this is shown cut, with its length (a 1 MB string is not echoed into the report)."""


def _capped(value: Any) -> Any:
    if isinstance(value, str) and len(value) > SHOWN_VALUE_CHARS:
        return f"{value[:SHOWN_VALUE_CHARS]}... ({len(value):,} characters)"
    return value


FILES_FINDING = ("FILES001", "bundle-files-agree")
"""A trl-advisor bundle whose files contradict train.py's CONFIG or each other (a value that cannot run, a file
missing): the checks `verify` makes before it runs anything (advisor.bundle.consistency), so that `check --bundle`
lists every one of them. Not a rule: rendered in its own section, as errors (CHECK_FINDINGS_EXPLAINED explains it)."""


CHECK_FINDINGS_EXPLAINED = {
    "PLAN001": ("files-differ-from-plan-json", "warning",
                "A file of the bundle (train.py, accelerate.yaml, ds_config.json) states a value other than the one "
                "plan.json was planned with.",
                "plan.json records what generate planned; the other files are what runs. An edit is the user's "
                "right, so this is a warning: check --bundle estimates and judges the plan the files describe, and "
                "MEM001 says whether it still fits.",
                "make the file say what plan.json says, or run `trl-advisor generate` again with the new value "
                "pinned so that plan.json, the README and the estimate follow it."),
    "PLAN002": ("runtime-file-differs-from-config", "warning",
                "A file that configures the run (accelerate.yaml, ds_config.json, the TrainingArguments train.py "
                "passes) states a value other than train.py's CONFIG.",
                "train.py's CONFIG is the bundle's one statement of its plan; when another file says something "
                "else, the value that runs is that file's, and the estimate follows what runs.",
                "make CONFIG in train.py say what runs, or change the other file back."),
    "PLAN003": ("flag-overrides-the-files", "warning",
                "A REQUEST flag given with --bundle overrides a value the bundle's files state.",
                "check --bundle judges the plan the files describe; a flag beside it asks what that plan would do "
                "with one value changed, and this finding says which one, so the report is not read as the files'.",
                "drop the flag to check the files as they are, or edit the file to match."),
    FILES_FINDING[0]: (FILES_FINDING[1], "error",
                       "The bundle's files contradict train.py's CONFIG or each other (a value that cannot run, a "
                       "file missing or unreadable).",
                       "These are the checks `trl-advisor verify` makes before it runs anything "
                       "(advisor.bundle.consistency), so check --bundle lists every one: a run of such a bundle "
                       "fails or trains something other than what was planned.",
                       "restore the file from a fresh `trl-advisor generate`, or edit it so that it agrees with "
                       "CONFIG in train.py."),
}
"""check --bundle's own findings (not rules of the rule book): id -> (name, severity, summary, why, fix), what
`trl-advisor explain` says of them."""


def explain_check_finding(finding_id: str) -> str | None:
    """`trl-advisor explain` for a check --bundle finding id (case-insensitive); None for any other id."""
    key = finding_id.strip().upper()
    if key not in CHECK_FINDINGS_EXPLAINED:
        return None
    name, severity, summary, why, fix = CHECK_FINDINGS_EXPLAINED[key]
    return (f"{key} {name} ({severity})\n{summary}\n\nWhy\n  {why}\n\nFix\n  {fix}\n\n"
            "Reported by: trl-advisor check --bundle DIR (a finding of the bundle's files, not a rule of the rule "
            "book: `trl-advisor rules` lists those)\n")


def file_findings(path: str, files, model=None) -> list[Finding]:
    """FILES001 findings for a folder trl-advisor wrote (it has plan.json); none for a user's own config files.
    With `model` (what the files train), model_config.json is held to its architecture too."""
    import os

    from advisor.bundle.consistency import check_bundle_files, is_edit_after_planning
    from advisor.bundle.write import BUNDLE_NAMES, MARKER_NAME
    from advisor.core import safeio

    if files is None or files.plan_json is None:
        return []
    texts: dict[str, str] = {}
    for name in sorted(BUNDLE_NAMES - {MARKER_NAME}):
        try:
            texts[name] = safeio.read_text(os.path.join(path, name), max_bytes=bundle.MAX_FILE_BYTES,
                                           what="bundle file")
        except safeio.UnsafeInputError:
            continue  # missing (consistency names the required ones) or unreadable (noted by the reader)
    try:
        problems = check_bundle_files(texts)
    except Exception as exc:  # noqa: BLE001 - a malformed file must not stop the report
        problems = [f"the files could not be checked against each other: {type(exc).__name__}: {exc}"[:300]]
    problems = [p for p in problems if not is_edit_after_planning(p)]  # each is a PLAN001 difference already
    if model is not None:
        from advisor.bundle.consistency import model_config_problems

        problems += model_config_problems(texts.get("model_config.json"), model)
    rule_id, name = FILES_FINDING
    return [Finding(id=rule_id, name=name, severity="error", status=FAIL, message=p,
                    fix="re-create the bundle (trl-advisor generate --force) or correct the edited file",
                    auto_fix=None, sources=(), reads={}) for p in problems]


def bundle_target(files, model_name: str, hardware: str | None, request: Request | None = None):
    """The hardware the bundle's plan is for: --hardware FILE, else --gpu/--gpus/--nodes over what plan.json (or
    the accelerate YAML, or train.py's CONFIG) records, else the built-in default target."""
    from advisor.bundle.readback import config_dict

    hint = bundle.hardware_hint(files)
    req_gpus = request.gpus if request is not None else None
    req_nodes = request.nodes if request is not None else None
    if hardware:
        nodes = req_nodes or (hint.get("nodes") if hint.get("nodes", 1) > 1 else None)
        req = Request(model=model_name, nodes=nodes, gpus=req_gpus)
        return resolve.target_from_report(resolve.load_report(hardware), req, origin="file")
    gpu_name = request.gpu if request is not None and request.gpu else hint.get("gpu")
    if not gpu_name:
        gpu_name = resolve.DEFAULT_GPU
        files.assumptions.append(f"GPU = {gpu_name} (no --gpu, --hardware or plan.json: the built-in default "
                                 "target)")
    gpu = catalog.resolve_gpu(str(gpu_name))
    config_gpus = config_dict(files.train_py).get("gpus_per_node")
    gpus = req_gpus or hint.get("gpus_per_node") or (config_gpus if isinstance(config_gpus, int) and
                                                     not isinstance(config_gpus, bool) and config_gpus > 0 else None)
    if not gpus:
        gpus = 1
        files.assumptions.append("1 GPU per node (no --gpus, no accelerate num_processes and no plan.json)")
    return Target(gpu=gpu, gpus_per_node=int(gpus), nodes=int(req_nodes or hint.get("nodes") or 1),
                  intra_node_link=default_link(gpu), origin="catalog")


def render_bundle_check(report: BundleCheckReport) -> str:
    """The `check --bundle` report: the rules' report on the plan the files describe, with that plan's estimate
    under its header, then the differences between the files, plan.json, CONFIG and the flags."""
    from dataclasses import replace

    from rules import render_check

    rules_only = replace(report, findings=[f for f in report.findings
                                           if not f.id.startswith("PLAN") and f.id != FILES_FINDING[0]])
    lines = render_check(rules_only).rstrip("\n").split("\n")
    if report.memory is not None and report.speed is not None and len(lines) >= 2 and lines[1].startswith("  plan:"):
        m, s = report.memory, report.speed
        verdict = "fits" if m.fits else "DOES NOT FIT"
        lines.insert(2, f"  estimate of the files: {_gib(m.per_gpu_peak_bytes)} peak per GPU (reserved "
                        f"{_gib(m.per_gpu_reserved_bytes)} of {_gib(m.capacity_bytes)} usable: {verdict}), "
                        f"{s.tokens_per_second:,.0f} tokens/s, {s.step_seconds:.2f} s/step")
        planned = report.reading.planned if report.reading is not None else None
        if planned is not None and planned != report.plan:
            lines.insert(3, f"  plan.json planned: {planned.trainer}, {planned.short()}")
    broken = [f for f in report.findings if f.id == FILES_FINDING[0]]
    if broken:
        lines += ["", f"{len(broken)} problem(s) in the bundle's files (errors; verify stops on them too):"]
        lines += [f"  {f.id} {f.message}" for f in broken]
        lines.append(f"      fix: {broken[0].fix}")
    diffs = report.differences
    if diffs:
        lines += ["", f"{len(diffs)} difference(s) between the files, plan.json and the flags (warnings):"]
        for f in diffs:
            lines.append(f"  {f.id} {f.message}")
            lines.append(f"      fix: {f.fix}")
    if broken or diffs:  # the rules' summary above counts rules only: the total is what the exit code and JSON say
        c = report.counts()
        lines += ["", f"in all: {c['error']} error(s), {c['warning']} warning(s) (the rules, the bundle's files and "
                      "the differences)"]
    return "\n".join(lines) + "\n"


def _bundle_versions(files, target, plan) -> tuple[dict, dict]:
    versions, origin = default_versions(target, plan)
    for name, value in (files.requirements or {}).items():
        key = normalize_package(name)
        if value is not None and not vercmp.is_version(value):
            files.assumptions.append(f"{name} version unknown (requirements.txt pins {vercmp.shown(value)}, which "
                                     "is not a version this reads)")
            value = None
        if value is None:  # a range in requirements.txt: no single version to assume
            versions.pop(key, None)
            origin.pop(key, None)
            continue
        versions[key] = value
        origin[key] = "bundle"
    return versions, origin


def _gib(n: int | float) -> str:
    return f"{n / GIB:.1f} GiB"



def _count_text(n: int) -> str:
    """A parameter count as people write it: 8.03B, 40.4M, 512K (an adapter's millions, a full model's billions)."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.{2 if unit == 'B' else 1}f}{unit}"
    return str(int(n))

def render_estimate(result: dict[str, Any]) -> str:
    """A short report: the configuration, the memory breakdown, fits / headroom, speed, findings."""
    r, m, hw, mem, spd = (result["request"], result["model"], result["hardware"], result["memory"],
                          result["speed"])
    method = r["method"] if r["method"] == "full" else f"{r['method']} r{r['lora_r']}"
    backend = r["backend"] if r["backend"] != "deepspeed" else f"deepspeed ZeRO-{r['zero']}"
    if r["offload"] != "none":
        backend += f" + {r['offload']} offload"
    nodes = f"{hw['nodes']} nodes x " if hw["nodes"] > 1 else ""
    lines = [
        f"{m['id']} ({m['params'] / 1e9:.2f}B params, {_count_text(m['trainable_params'])} trainable) - "
        f"{r['trainer']} {method}, {r['precision']}, {backend}",
        f"on {nodes}{hw['gpus_per_node']} x {hw['gpu']} ({_gib(hw['gpu_memory_bytes'])}); "
        f"seq {r['seq_len']} x micro-batch {r['micro_batch']} x accum {r['grad_accum']}"
        + (", grad-ckpt" if r["grad_ckpt"] else "") + (", liger" if r["liger"] else "") + f", attn {r['attn']}",
        "",
        # the parts are what the GPU holds at the moment of its peak: say which moment, and why a part is 0 then
        # (the gradients at the end of a forward pass, say), which would otherwise read like a bug
        f"memory per GPU at its peak{', ' + moment if (moment := peak_moment(mem)) else ''}:",
    ]
    for key in BREAKDOWN_KEYS:
        value = mem["breakdown_bytes"][key]
        why = f"   none at the peak: {absent_reason(key, mem, r['offload'])}" if value == 0 else ""
        lines.append(f"  {key:<12}{_gib(value):>12}{why}")
    lines.append(f"  {'peak':<12}{_gib(mem['per_gpu_peak_bytes']):>12}   (torch max_memory_allocated)")
    lines.append(f"  {'reserved':<12}{_gib(mem['per_gpu_reserved_bytes']):>12}   "
                 f"of {_gib(mem['gpu_capacity_bytes'])} usable")
    verdict = "yes" if mem["fits"] else "NO"
    # headroom: what is left of the usable memory past the reserve and the safety margin (a reader subtracting
    # reserved from usable would otherwise miss the margin)
    lines.append(f"  fits: {verdict}, headroom {_gib(mem['headroom_bytes'])} past the "
                 f"{_gib(safety_margin_bytes(mem))} safety margin; host RAM {_gib(mem['host_bytes'])} per node")
    lines += ["", f"speed: {spd['step_seconds']:.2f} s/step, {spd['tokens_per_second']:,.0f} tokens/s, "
                  f"MFU {100 * spd['mfu']:.0f}%"]
    parts = sorted(((v, k) for k, v in spd.get("breakdown_seconds", {}).items() if v > 0), reverse=True)[:4]
    if parts:
        lines.append("  " + ", ".join(f"{k} {v:.2f} s" for v, k in parts))
    from advisor.model.calibration import HOST_BOUND_NOTE_SHARE, UNSLOTH_UNMEASURED, host_bound_note

    if (spd.get("host_bound_share") or 0.0) >= HOST_BOUND_NOTE_SHARE:
        lines.append(f"  host-bound: {host_bound_note(spd['host_bound_share'])}")
    if r.get("unsloth"):
        lines.append(f"  Unsloth: {UNSLOTH_UNMEASURED}")
    if result.get("job"):
        lines.append(f"job: {describe_job(result['job'])}")
    findings = result.get("findings") or []
    if findings:
        lines += ["", "findings:"]
        for f in findings:
            tag = f.get("severity", "info")
            if f.get("status") == "unknown":  # as check's report says it (rules.render.render_check)
                tag = f"not checked: {f.get('rule_severity', tag)} if it fails"
            lines.append(f"  [{tag}] {f.get('id', '')}: {f.get('message', '')}")
            if f.get("fix"):
                lines.append(f"      fix: {f['fix']}")
    return "\n".join(lines)
