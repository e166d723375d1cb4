"""A whole run driven by keys, as a user would: choose a model, change the method and see the memory and speed
change, pin a knob that breaks a rule and see the rule, apply its fix, write the bundle into a folder, and find the
files byte for byte those `trl-advisor generate` writes with the command line the wizard shows."""

import asyncio
import shlex
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("textual")

from wizard_harness import REPO, fixture_probe, screen_text, settle  # noqa: E402


def _strip(app) -> str:
    from tui import PlanStrip

    return str(app.query_one(PlanStrip).render())


def _tree(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_whole_run_by_keys(tmp_path, monkeypatch):
    from advisor.core.request import Request
    from advisor.search import decide
    from tui import PlanView, command_line, make_app

    monkeypatch.chdir(tmp_path)
    out = "bundles/qwen"

    async def scenario():
        app = make_app(Request(model="", gpu="H100-80GB", gpus=8), probe=fixture_probe("no_gpu.json"))
        seen = {}
        async with app.run_test(size=(100, 32)) as pilot:
            await settle(app, pilot)
            assert app.query_one("#tabs").active == "training" and app.focused.id == "f-model"
            assert "choose a model" in _strip(app)
            # choose a model: type it, accept nothing else
            await pilot.press(*"qwen2.5-7b")
            await settle(app, pilot)
            assert isinstance(app.outcome, PlanView), _strip(app)
            seen["full"] = (app.outcome.result["memory"], app.outcome.result["speed"], _strip(app))
            # change the method: tab to the method select, open it, move to lora, pick it
            await pilot.press("tab", "tab")
            assert app.focused.id == "f-method"
            await pilot.press("enter", "down", "down", "enter")
            await settle(app, pilot)
            assert app.request.method == "lora"
            seen["lora"] = (app.outcome.result["memory"], app.outcome.result["speed"], _strip(app))
            # pin a knob that breaks a rule: a long sequence split over 7 GPUs (Ulysses) on 4 KV heads
            app.query_one("#f-seq_len").focus()
            await pilot.press(*"32768")
            app.query_one("#f-sp_size").focus()
            await pilot.press(*"7")
            await settle(app, pilot)
            seen["rule"] = (app.outcome, _strip(app))
            await pilot.press("escape", "4")
            await settle(app, pilot)
            seen["rules_screen"] = screen_text(app)
            await pilot.press("f")  # apply the highlighted rule's fix
            await settle(app, pilot)
            seen["fixed"] = (app.request, app.outcome, _strip(app))
            # write the bundle into a folder of our choosing
            await pilot.press("5")
            await settle(app, pilot)
            app.query_one("#out").focus()
            await pilot.press("ctrl+u", *out, "escape")  # ctrl+u: delete the default folder's text
            await pilot.press("w")
            await settle(app, pilot)
            seen["written"] = app.written
            seen["command"] = command_line(app.request)
            seen["bundle_screen"] = screen_text(app)
        return seen

    seen = asyncio.run(scenario())

    full_mem, full_speed, full_strip = seen["full"]
    lora_mem, lora_speed, lora_strip = seen["lora"]
    # the numbers on screen are the core's for the same request, and they moved with the method
    _, want = decide(Request(model="qwen2.5-7b", gpu="H100-80GB", gpus=8))
    assert full_mem == want["memory"] and full_speed == want["speed"]
    _, want = decide(Request(model="qwen2.5-7b", gpu="H100-80GB", gpus=8, method="lora"))
    assert lora_mem == want["memory"] and lora_speed == want["speed"]
    assert lora_mem["per_gpu_peak_bytes"] != full_mem["per_gpu_peak_bytes"]
    assert f"{full_speed['tokens_per_second']:,.0f} tokens/s" in full_strip
    assert f"{lora_speed['tokens_per_second']:,.0f} tokens/s" in lora_strip
    assert full_strip.splitlines()[1] != lora_strip.splitlines()[1]  # the memory bar and the figures

    outcome, strip = seen["rule"]
    assert outcome.kind == "rule" and outcome.message.startswith("SP001")
    assert "SP001" in strip and "fix:" in strip
    assert any(f["id"] == "SP001" and f["auto_fix"] == {"sp_size": 4} for f in outcome.findings)
    assert "SP001" in seen["rules_screen"] and "--sp-size 4" in seen["rules_screen"]

    request, outcome, strip = seen["fixed"]
    assert request.sp_size == 4 and outcome.ok and outcome.decision.chosen.plan.sp_size == 4
    assert strip.startswith("✓ qwen2.5-7b SFT")

    assert seen["written"] == out
    assert "trl-advisor verify bundles/qwen" in seen["bundle_screen"]
    assert "bash bundles/qwen/launch.sh" in seen["bundle_screen"]

    # the command line on screen writes the same files, byte for byte (the folder name is inside plan.json)
    shutil.move(tmp_path / out, tmp_path / "from-wizard")
    args = shlex.split(seen["command"])
    assert args[:2] == ["trl-advisor", "generate"]
    proc = subprocess.run([sys.executable, "-m", "advisor", *args[1:], "--out", out], cwd=tmp_path,
                          capture_output=True, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert _tree(tmp_path / "from-wizard") == _tree(tmp_path / out)
