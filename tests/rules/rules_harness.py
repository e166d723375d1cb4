"""Build a rules.Context from a case (tests/rules/cases/<ID>.yaml): a request or a files mapping, a model and a GPU or
hardware fixture, plus optional plan/target/model overrides, versions and a fake memory estimate."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import yaml

from advisor import catalog, resolve
from advisor.bundle import read as bundle
from advisor.core.request import Request
from rules import Context

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "cases"
HARDWARE = ROOT / "tests" / "fixtures" / "hardware"
CASE_KEYS = {"name", "model", "model_override", "gpu", "gpus", "nodes", "hardware", "request", "plan", "target",
             "files", "versions", "memory", "expect", "why"}
EXPECT_KEYS = {"status", "message", "fix", "auto_fix", "no_auto_fix"}


def load_cases(path: Path) -> tuple[str, list[dict]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data["rule"], data["cases"]


def all_cases() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(CASES.glob("*.yaml")):
        rule_id, cases = load_cases(path)
        out += [(rule_id, case) for case in cases]
    return out


def fake_memory(values: dict) -> SimpleNamespace:
    """A MemoryEstimate stand-in: GiB numbers in the case (`peak_gib: 70`) become integer bytes."""
    gib = 1 << 30
    defaults = {"weights": 0, "gradients": 0, "optimizer": 0, "activations": 0, "logits": 0, "other": 0,
                "host_bytes": 0, "pinned_bytes": 0, "detail": {}}
    out = dict(defaults)
    for key, value in values.items():
        if key.endswith("_gib"):
            out[_bytes_name(key)] = int(value * gib)
        else:
            out[key] = value
    out.setdefault("per_gpu_reserved_bytes", out.get("per_gpu_peak_bytes", 0))
    return SimpleNamespace(**out)


def _bytes_name(key: str) -> str:
    return {"peak_gib": "per_gpu_peak_bytes", "per_gpu_peak_gib": "per_gpu_peak_bytes",
            "per_gpu_reserved_gib": "per_gpu_reserved_bytes", "capacity_gib": "capacity_bytes",
            "headroom_gib": "headroom_bytes", "host_gib": "host_bytes", "pinned_gib": "pinned_bytes"}.get(
        key, key[:-4] + "_bytes")


def build_context(case: dict) -> Context:
    unknown_keys = set(case) - CASE_KEYS
    assert not unknown_keys, f"case {case.get('name')}: unknown keys {sorted(unknown_keys)}"
    model = catalog.resolve_model(case.get("model", "qwen2.5-0.5b"))
    if case.get("model_override"):
        model = model.with_(**case["model_override"])
    req_fields = dict(case.get("request") or {})
    if case.get("hardware"):
        req_fields["hardware"] = str(HARDWARE / f"{case['hardware']}.json")
    else:
        req_fields.setdefault("gpu", case.get("gpu", "H100-80GB"))
    if case.get("gpus"):
        req_fields["gpus"] = case["gpus"]
    if case.get("nodes"):
        req_fields["nodes"] = case["nodes"]
    req = Request(model=model.id, **req_fields)
    resolve.check_request(req, applicable=False)
    target = resolve.resolve_target(req)
    if case.get("target"):
        overrides = dict(case["target"])
        if "notes" in overrides:
            overrides["notes"] = tuple(overrides["notes"])
        target = target.with_(**overrides)
    files = bundle.parse_texts(case["files"]) if case.get("files") else None
    if files is not None and not case.get("request"):
        plan = bundle.plan_from_files(files, model, target)
    else:
        plan = resolve.default_plan(req, model, target)
    if case.get("plan"):
        plan = plan.with_(**case["plan"])
    versions = None
    if case.get("versions") is not None:
        from rules.model import default_versions

        versions, _ = default_versions(target, plan)
        for key, value in case["versions"].items():
            if value is None:
                versions.pop(key, None)
            else:
                versions[key] = str(value)
    memory = case.get("memory")
    if memory == "estimate":
        from advisor.model.estimate import estimate_plan

        memory, _ = estimate_plan(model, plan, target)
    elif isinstance(memory, dict):
        memory = fake_memory(memory)
    return Context(request=None if files is not None and not case.get("request") else req, plan=plan, model=model,
                   target=target, memory=memory, versions=versions, files=files)
