"""The wizard asks and shows; the core computes. Driven headless with Textual's Pilot."""

import asyncio

import pytest

pytest.importorskip("textual")

from wizard_harness import fixture_probe, screen_text, settle  # noqa: E402


def _run(request):
    from tui import make_app

    async def scenario():
        app = make_app(request, probe=fixture_probe("no_gpu.json"))
        async with app.run_test(size=(140, 50)) as pilot:
            await settle(app, pilot)
            await app.action_show_tab("plan")
            await settle(app, pilot)
            return screen_text(app)

    return asyncio.run(scenario())


def test_wizard_shows_the_plan_generate_prints_and_the_command_that_reproduces_it():
    from advisor.core.request import Request
    from advisor.search import decide, render_decision

    req = Request(model="qwen2.5-7b", method="lora", gpu="H200", gpus=1)
    text = _run(req)
    decision, result = decide(req)
    for line in render_decision(result, decision, "x").splitlines()[:4]:
        assert line in text
    assert "$ trl-advisor generate --model qwen2.5-7b --trainer sft --method lora --gpus 1 --gpu H200" in text


def test_wizard_reports_bad_input_as_an_error_line():
    from advisor.core.request import Request

    text = _run(Request(model="qwen2.5-7", gpu="H200"))
    assert "✗ unknown model 'qwen2.5-7'" in text and "did you mean" in text
