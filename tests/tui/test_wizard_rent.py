"""The Rent tab ("what to rent"): `advisor.recommend.recommend` run in a worker with the form's request and
recommend's own flags, its table and report as `trl-advisor recommend` prints them, its errors the command line's,
and an option turned into the plan `generate` makes for it. Driven headless with Textual's Pilot."""

import asyncio
import re
import subprocess
import sys
import threading

import pytest

pytest.importorskip("textual")

from wizard_harness import REPO, fixture_probe, screen_text, settle, until  # noqa: E402

from advisor.core.request import Request  # noqa: E402

JOB = Request(model="8B", tokens=1_000_000_000)
ENV = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}


def run(request, scenario, *, size=(100, 32)):
    from tui import make_app

    async def main():
        app = make_app(request, probe=fixture_probe("no_gpu.json"))
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot)
            return await scenario(app, pilot)

    return asyncio.run(main())


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True, env=ENV,
                          cwd=REPO, timeout=300)


def typed(app, pilot, field: str, text: str):
    """Type into a field as a user does: focus it, clear it, type."""
    app.query_one(f"#f-{field}").focus()
    return pilot.press("ctrl+u", *text) if text else pilot.press("ctrl+u")


def test_the_table_and_report_are_what_recommend_prints(tmp_path):
    async def scenario(app, pilot):
        await pilot.press("6")
        await settle(app, pilot)
        await typed(app, pilot, "max_gpus", "16")
        await typed(app, pilot, "prices", "H100=2.49")
        await settle(app, pilot)
        r = app.rent
        headers, rows, under, first = r.table(False)
        shown = str(app.query_one("#rent-command").render()), screen_text(app)
        return r, headers, rows, under, first, shown, str(app.query_one("#rent-report").render())

    rent, headers, rows, under, first, (command, text), report = run(JOB, scenario)
    assert rent.ok and rent.ask.max_gpus == 16 and rent.ask.prices == ("H100=2.49",)
    assert command == ("$ trl-advisor recommend --model 8B --trainer sft --tokens 1000000000 --max-gpus 16 "
                       "--price H100=2.49")
    # the line on screen prints the same report, line for line
    proc = cli(*command.removeprefix("$ trl-advisor ").split())
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.splitlines()
    assert printed[0] == first and printed[-len(under):] == under
    assert report == "\n".join(under)
    table = printed[2:len(printed) - len(under)]
    assert re.split(r" {2,}", table[0].strip()) == headers
    assert len(table) - 1 == len(rows) >= 3
    for line, (option, pareto, cells) in zip(table[1:], rows, strict=True):
        assert line.startswith("*") == pareto == option.pareto
        printed_cells = re.split(r" {2,}", line[1:].strip())
        assert cells[:len(printed_cells)] == printed_cells and not any(cells[len(printed_cells):])
        assert cells[0] == option.label() and f"{option.tokens_per_second:,.0f}" in cells
    # on screen: the first options' GPUs and figures, the Pareto marks, the picks under the table
    for option, _, cells in rows[:3]:
        assert option.label() in text and cells[headers.index("tokens/s")] in text
    assert "fastest   " in report and "cheapest  " in report


def test_an_option_becomes_the_plan_generate_makes_for_it():
    from advisor.recommend import generate_request
    from advisor.search import decide

    async def scenario(app, pilot):
        await pilot.press("6")
        await typed(app, pilot, "max_gpus", "8")
        await settle(app, pilot)
        app.query_one("#options").focus()
        await pilot.press("down")
        await settle(app, pilot)
        detail = str(app.query_one("#option-detail").render())
        option, rec = app._highlighted_option(), app.rent.rec
        await pilot.press("o")
        await settle(app, pilot)
        return option, rec, detail, app.query_one("#tabs").active, app.request, app.outcome

    option, rec, detail, tab, request, outcome = run(JOB, scenario)
    assert detail.startswith(f"{option.label()}: {option.candidate.plan.short()}")
    assert tab == "plan"
    assert request == generate_request(rec, option)
    assert outcome.ok and outcome.decision.chosen.plan == option.candidate.plan
    assert outcome.result["speed"]["tokens_per_second"] == decide(request)[1]["speed"]["tokens_per_second"]


def test_recommend_runs_in_a_worker_on_the_rent_tab_only_and_stale_answers_are_dropped(monkeypatch):
    import tui

    calls, gate = [], threading.Event()
    real = tui.compute_rent

    def gated(ask):
        calls.append(ask.max_gpus)
        gate.wait(30)
        return real(ask)

    monkeypatch.setattr(tui, "compute_rent", gated)

    async def scenario(app, pilot):
        seen = {}
        await typed(app, pilot, "seq_len", "1024")  # the Training tab: no recommend
        await settle(app, pilot)
        seen["off the tab"] = list(calls)
        await pilot.press("escape", "6")  # the tab asks at once: recommend runs, held at the gate
        await until(pilot, lambda: calls)
        # while it runs the app answers keys, and the tab says it is planning
        await typed(app, pilot, "max_gpus", "16")
        await until(pilot, lambda: "recommend is planning" in screen_text(app))  # fails by timeout if never
        seen["running"] = (list(calls), app.rent_settled, screen_text(app))
        gate.set()
        await settle(app, pilot)
        seen["after"] = (list(calls), app.rent.ask.max_gpus)
        # a late answer for an older ask is dropped
        answer = app.rent
        app.post_message(tui.RentReady(tui.RentAsk(Request(model="8B", tokens=5)), None))
        app.post_message(tui.RentReady(tui.rent_ask({**app.values, "max_gpus": 2}, app.passthrough),
                                       real(tui.rent_ask({**app.values, "max_gpus": 2}, app.passthrough))))
        await settle(app, pilot)
        seen["late"] = app.rent is answer or app.rent.ask == answer.ask
        return seen

    seen = run(JOB, scenario)
    assert seen["off the tab"] == []
    calls_running, settled, text = seen["running"]
    assert calls_running == [None] and not settled
    assert "recommend is planning every GPU type and count" in text
    assert seen["after"] == ([None, 16], 16)  # what was typed meanwhile ran once, when the first ended
    assert seen["late"]


@pytest.mark.parametrize(("field", "text", "flag"), [
    ("max_gpus", "0", "--max-gpus 0"), ("max_gpus", "x", "--max-gpus x"), ("max_nodes", "9999", "--max-nodes 9999"),
    ("budget_usd", "-1", "--budget-usd -1"), ("deadline_hours", "soon", "--deadline-hours soon"),
    ("gpu_types", "H1000", "--gpu-types H1000"), ("prices", "H100=abc", "--price H100=abc"),
    ("prices", "H100=1 h100-80gb=2", "--price H100=1 --price h100-80gb=2")])
def test_a_field_error_is_the_one_recommend_prints(field, text, flag):
    async def scenario(app, pilot):
        await pilot.press("6")
        await settle(app, pilot)
        await typed(app, pilot, field, text)
        await settle(app, pilot)
        return str(app.query_one(f"#row-{field} .problem").render()), str(app.query_one("#rent-head").render())

    row, head = run(JOB, scenario)
    proc = cli("recommend", "--model", "8B", "--tokens", "1000000000", *flag.split())
    assert proc.returncode == 2
    error, hint = proc.stderr.splitlines()[-2:]
    assert row == f"{error}\n{hint}"
    assert error.removeprefix("error: ") in head


def test_without_a_job_size_the_tab_says_what_recommend_needs_and_the_plan_is_untouched():
    async def scenario(app, pilot):
        await pilot.press("6")
        await settle(app, pilot)
        return screen_text(app), app.outcome

    text, outcome = run(Request(model="8B", gpu="H100-80GB", gpus=8), scenario)
    assert "recommend needs the job's size: --tokens N or --steps N" in text
    assert outcome.ok  # the plan for the Target tab's hardware is still on the strip
    assert "✓ llama-3.1-8b SFT on 8 x H100-80GB" in text


def test_recommend_leaves_the_target_out_and_the_rent_tab_usable_at_80_by_24():
    async def scenario(app, pilot):
        await pilot.press("6")
        await typed(app, pilot, "max_gpus", "8")
        await settle(app, pilot)
        app.query_one("#options").focus()
        await settle(app, pilot)
        return app.rent, screen_text(app).splitlines()

    rent, lines = run(Request(model="8B", gpu="H100-80GB", gpus=8, steps=500), scenario, size=(80, 24))
    assert rent.ok and rent.ask.request.gpu is None and rent.ask.request.gpus is None
    assert rent.rec.request.steps == 500
    assert len(lines) == 24 and max(len(line) for line in lines) <= 80
    assert "6 Rent" in lines[0] and "o Use option" in lines[-1]
    headers, rows, _, _ = rent.table(False)
    option, _, cells = rows[0]
    assert any(option.label() in line and cells[headers.index("hours")] in line for line in lines)  # in view


def test_quitting_does_not_wait_for_a_running_recommend(monkeypatch):
    import time

    import tui

    gate, real = threading.Event(), tui.compute_rent
    monkeypatch.setattr(tui, "compute_rent", lambda ask: (gate.wait(120), real(ask))[1])  # held until the end

    async def main():
        app = tui.make_app(JOB, probe=fixture_probe("no_gpu.json"))
        async with app.run_test(size=(100, 32)) as pilot:
            await settle(app, pilot)
            await pilot.press("6")
            await until(pilot, lambda: app._rent_running is not None)
            running = app._rent_running is not None
            start = time.monotonic()
            await app.action_quit()
        return running, time.monotonic() - start

    try:
        running, seconds = asyncio.run(main())  # asyncio.run waits for the worker threads it lent
    finally:
        gate.set()
    assert running and seconds < 10  # not the 120 s the held recommend would take
