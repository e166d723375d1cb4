"""Assessing a configuration without searching: `estimate` (one plan's memory and speed, with the rules'
findings), `check` (every rule against a request) and `check --bundle` (the files read back into the plan they
describe, then estimated and checked). Here the estimate and the rules are joined: the model knows nothing of the
rules, and the rules receive the estimate as data in their Context."""

from __future__ import annotations

from typing import Any

from advisor import catalog, resolve
from advisor.bundle import read as bundle
from advisor.core.errors import InputFileError
from advisor.core.request import Request
from advisor.core.target import Target, default_link
from advisor.model.estimate import BREAKDOWN_KEYS, estimate_plan, result_dict
from advisor.model.units import GIB
from rules import vercmp
from rules.engine import CheckReport, finding_dicts, run_rules
from rules.model import Context, default_versions, normalize_package


def estimate_request(req: Request, *, probe=None) -> dict[str, Any]:
    """`estimate`: resolve the request (model, hardware, documented defaults), estimate that one plan, and join the
    rules' findings (computed on the estimate, passed to them as data)."""
    resolve.check_request(req)
    model = resolve.resolve_model(req)
    target = resolve.resolve_target(req, probe=probe)
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
    plan = resolve.default_plan(req, model, target)
    memory, speed = _estimate(model, plan, target)
    ctx = Context(request=req, plan=plan, model=model, target=target, memory=memory, speed=speed)
    return CheckReport(findings=run_rules(ctx), plan=plan, model=model, target=target, notes=list(target.notes),
                       source="request")


def check_bundle(path: str, *, hardware: str | None = None) -> CheckReport:
    """Read a folder of training configuration files, rebuild the plan they describe, and run every rule (the
    CFG rules read the files themselves)."""
    ctx = bundle_context(path, hardware=hardware)
    # files of the folder that were not read (too large, a named pipe, a device) first: the findings did not see them
    return CheckReport(findings=run_rules(ctx), plan=ctx.plan, model=ctx.model, target=ctx.target,
                       assumptions=list(ctx.files.assumptions), notes=[*ctx.files.notes, *ctx.target.notes],
                       source=path)


def bundle_context(path: str, *, hardware: str | None = None) -> Context:
    files = bundle.read_folder(path)
    name = bundle.model_id(files)
    if not name:
        raise InputFileError(f"{path}: the files do not name a model",
                             hint="set model_name_or_path in the TRL config, or keep plan.json in the folder")
    model = catalog.resolve_model(name)
    target = bundle_target(files, name, hardware)
    plan = bundle.plan_from_files(files, model, target)
    memory, speed = _estimate(model, plan, target)
    versions, origin = _bundle_versions(files, target, plan)
    return Context(request=None, plan=plan, model=model, target=target, memory=memory, speed=speed,
                   versions=versions, files=files, version_origin=origin)


def bundle_target(files, model_name: str, hardware: str | None):
    hint = bundle.hardware_hint(files)
    if hardware:
        req = Request(model=model_name, nodes=hint.get("nodes") if hint.get("nodes", 1) > 1 else None)
        return resolve.target_from_report(resolve.load_report(hardware), req, origin="file")
    gpu_name = hint.get("gpu")
    if not gpu_name:
        gpu_name = resolve.DEFAULT_GPU
        files.assumptions.append(f"GPU = {gpu_name} (no --hardware and no plan.json: the built-in default target)")
    gpu = catalog.resolve_gpu(str(gpu_name))
    gpus = int(hint.get("gpus_per_node") or 1)
    if "gpus_per_node" not in hint:
        files.assumptions.append("1 GPU per node (no accelerate num_processes and no plan.json)")
    return Target(gpu=gpu, gpus_per_node=gpus, nodes=int(hint.get("nodes") or 1), intra_node_link=default_link(gpu),
                  origin="catalog")


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
        f"{m['id']} ({m['params'] / 1e9:.2f}B params, {m['trainable_params'] / 1e6:.1f}M trainable) - "
        f"{r['trainer']} {method}, {r['precision']}, {backend}",
        f"on {nodes}{hw['gpus_per_node']} x {hw['gpu']} ({_gib(hw['gpu_memory_bytes'])}); "
        f"seq {r['seq_len']} x micro-batch {r['micro_batch']} x accum {r['grad_accum']}"
        + (", grad-ckpt" if r["grad_ckpt"] else "") + (", liger" if r["liger"] else "") + f", attn {r['attn']}",
        "",
        f"memory per GPU (peak during {mem.get('peak_phase', 'train')}):",
    ]
    for key in BREAKDOWN_KEYS:
        lines.append(f"  {key:<12}{_gib(mem['breakdown_bytes'][key]):>12}")
    lines.append(f"  {'peak':<12}{_gib(mem['per_gpu_peak_bytes']):>12}   (torch max_memory_allocated)")
    lines.append(f"  {'reserved':<12}{_gib(mem['per_gpu_reserved_bytes']):>12}   "
                 f"of {_gib(mem['gpu_capacity_bytes'])} usable")
    verdict = "yes" if mem["fits"] else "NO"
    lines.append(f"  fits: {verdict}, headroom {_gib(mem['headroom_bytes'])}; host RAM {_gib(mem['host_bytes'])} "
                 "per node")
    lines += ["", f"speed: {spd['step_seconds']:.2f} s/step, {spd['tokens_per_second']:,.0f} tokens/s, "
                  f"MFU {100 * spd['mfu']:.0f}%"]
    parts = sorted(((v, k) for k, v in spd.get("breakdown_seconds", {}).items() if v > 0), reverse=True)[:4]
    if parts:
        lines.append("  " + ", ".join(f"{k} {v:.2f} s" for v, k in parts))
    findings = result.get("findings") or []
    if findings:
        lines += ["", "findings:"]
        for f in findings:
            lines.append(f"  [{f.get('severity', 'info')}] {f.get('id', '')}: {f.get('message', '')}")
            if f.get("fix"):
                lines.append(f"      fix: {f['fix']}")
    return "\n".join(lines)
