"""The wizard asks and shows; the core computes. Driven headless with Textual's Pilot."""

import asyncio

import pytest

pytest.importorskip("textual")


def test_wizard_shows_the_estimate_for_the_request():
    from textual.widgets import Input, Static

    from tui import make_app

    async def scenario() -> str:
        app = make_app()
        async with app.run_test(size=(140, 50)) as pilot:
            app.query_one("#gpu", Input).value = "H200"
            await pilot.click("#go")
            await pilot.pause()
            return str(app.query_one("#report", Static).render())

    text = asyncio.run(scenario())
    assert "qwen2.5-7b" in text and "GiB" in text
    assert "trl-advisor estimate --model qwen2.5-7b --trainer sft --method lora --gpu H200 --gpus 1" in text


def test_wizard_reports_bad_input_as_an_error_line():
    from textual.widgets import Input, Static

    from tui import make_app

    async def scenario() -> str:
        app = make_app()
        async with app.run_test(size=(140, 50)) as pilot:
            app.query_one("#model", Input).value = "qwen2.5-7"
            app.query_one("#gpu", Input).value = "H200"
            await pilot.click("#go")
            await pilot.pause()
            return str(app.query_one("#report", Static).render())

    text = asyncio.run(scenario())
    assert text.startswith("error:") and "did you mean" in text
