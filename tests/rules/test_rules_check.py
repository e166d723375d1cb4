"""`check REQUEST`: the report, its JSON shape (CONTRACT.md), and the sp-size fix that lists exactly 1, 2, 4."""

from __future__ import annotations

import json
from pathlib import Path

from advisor.check import check_request
from advisor.core.request import Request
from rules import CheckReport, Context, failures, render_check, run_rules

HARDWARE = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"


def test_qwen7b_on_8_h100_with_sp7_fails_listing_exactly_1_2_4():
    report = check_request(Request(model="qwen2.5-7b", gpu="H100-80GB", gpus=8, backend="deepspeed", zero=3,
                                   sp_size=7, attn="flash_attention_2"))
    assert not report.ok
    sp001 = next(f for f in report.findings if f.id == "SP001")
    assert sp001.status == "fail"
    assert sp001.fix.endswith(": 1, 2, 4")
    listed = [int(x) for x in sp001.fix.rsplit(":", 1)[1].split(",")]
    assert listed == [1, 2, 4]
    assert sp001.auto_fix == {"sp_size": 4}
    assert sp001.reads["model.heads"] == 28 and sp001.reads["model.kv_heads"] == 4


def test_check_json_keys_follow_the_contract():
    report = check_request(Request(model="qwen2.5-7b", gpu="H100-80GB", gpus=8, backend="deepspeed", zero=3,
                                   sp_size=7, attn="flash_attention_2"))
    data = json.loads(json.dumps(report.to_json()))
    assert set(data) >= {"ok", "findings"}
    assert data["ok"] is False
    assert data["findings"], "failures are listed"
    for f in data["findings"]:
        assert set(f) >= {"id", "name", "severity", "status", "message", "fix", "auto_fix", "source", "reads"}
        assert f["severity"] in ("error", "warning", "info")
        assert f["status"] in ("fail", "unknown"), "passes and not-applicable findings are left out"
        assert f["rule_severity"] in ("error", "warning", "info")
        # an error in the JSON is exactly what makes ok false (and check exit 1): a rule that failed
        assert (f["severity"] == "error") is (f["status"] == "fail" and f["rule_severity"] == "error")
        assert f["source"].startswith("https://")
    everything = report.to_json(include_all=True)["findings"]
    assert len(everything) > len(data["findings"])
    assert {"pass", "not-applicable"} <= {f["status"] for f in everything}


def test_clean_configuration_is_ok():
    report = check_request(Request(model="qwen2.5-7b", gpu="H100-80GB", gpus=8, backend="deepspeed", zero=3,
                                   sp_size=4, attn="flash_attention_2"))
    assert report.ok, [(f.id, f.message) for f in report.errors]
    assert not [f for f in report.failures if f.severity == "error"]
    assert "0 error(s)" in render_check(report)


def test_warnings_alone_keep_ok_true():
    # LoRA with optimizer offload on a 0.5B model: PEFT003 warns (the same plan fits without it), nothing is an error
    report = check_request(Request(model="qwen2.5-0.5b", gpu="H100-80GB", gpus=1, method="lora", backend="deepspeed",
                                   zero=3, offload="optimizer"))
    assert report.ok
    assert any(f.id == "PEFT003" and f.status == "fail" and f.severity == "warning" for f in report.findings)


def test_check_with_a_hardware_probe_file_reads_installed_versions():
    # the H100 fixture has vllm 0.11.0 installed, outside TRL 1.16's 0.22-0.31 window
    report = check_request(Request(model="qwen2.5-0.5b", hardware=str(HARDWARE / "h100_sxm_x8_nvlink.json"),
                                   trainer="grpo", vllm="colocate"))
    ver = next(f for f in report.findings if f.id == "VER001")
    assert ver.status == "fail" and "0.11.0" in ver.message
    assert not report.ok


def test_run_rules_returns_every_rule_and_failures_filters():
    from advisor import catalog, resolve

    req = Request(model="qwen2.5-0.5b", gpu="T4", precision="bf16")
    model = catalog.resolve_model("qwen2.5-0.5b")
    target = resolve.resolve_target(req)
    plan = resolve.default_plan(req, model, target)
    found = run_rules(Context(request=req, plan=plan, model=model, target=target), strict=True)
    from rules import ALL_RULES

    assert [f.id for f in found] == [r.id for r in ALL_RULES]
    failed = failures(found)
    assert "HW001" in [f.id for f in failed]
    assert all(f.status == "fail" for f in failed)
    report = CheckReport(findings=found)
    assert report.ok is False and report.counts()["error"] >= 1


def test_every_rule_evaluates_a_busy_configuration_without_crashing():
    # strict=True re-raises any exception a rule throws
    from advisor import catalog, resolve

    req = Request(model="llama-3.1-8b", gpu="H100-80GB", gpus=8, nodes=2, trainer="grpo", method="qlora",
                  backend="deepspeed", zero=3, offload="all", liger=True, vllm="colocate", unsloth=True)
    model = catalog.resolve_model(req.model)
    target = resolve.resolve_target(req)
    plan = resolve.default_plan(req, model, target)
    run_rules(Context(request=req, plan=plan, model=model, target=target), strict=True)
