"""The wizard's behaviours, each driven headless with Textual's Pilot: validation as typed, the planner in a
worker (debounced, stale answers dropped), pins, fixes, writing without overwriting, verify, help and palette."""

import asyncio

import pytest

pytest.importorskip("textual")

from wizard_harness import fixture_probe, screen_text, settle, until  # noqa: E402

from advisor.core.request import Request  # noqa: E402

H100 = Request(model="8B", gpu="H100-80GB", gpus=8)


def run(request, scenario, *, size=(100, 32), probe=None, **kw):
    from tui import make_app

    async def main():
        app = make_app(request, probe=probe or fixture_probe("no_gpu.json"), **kw)
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot)
            return await scenario(app, pilot)

    return asyncio.run(main())


def strip(app) -> str:
    from tui import PlanStrip

    return str(app.query_one(PlanStrip).render())


def test_a_field_is_checked_as_it_is_typed_with_the_cli_message():
    async def scenario(app, pilot):
        await app.action_show_tab("training")
        app.query_one("#f-seq_len").focus()
        before = app.outcome
        app.query_one("#f-seq_len").value = "12x"  # pasted at once
        await settle(app, pilot)
        row = str(app.query_one("#row-seq_len .problem").render())
        seen = (row, strip(app), app.outcome is before, app.request.seq_len)
        await pilot.press("backspace")
        await settle(app, pilot)
        return seen, app.outcome, app.query_one("#row-seq_len").has_class("-invalid")

    (row, strip_text, unchanged, seq), after, invalid = run(H100, scenario)
    assert "error: argument --seq-len: expected a whole number, got '12x'" in row
    assert "hint: see `trl-advisor generate --help`" in row
    assert "argument --seq-len" in strip_text and unchanged  # no plan ran for a value the core refuses
    assert seq is None
    assert not invalid and after.request.seq_len == 12 and after.ok and after.decision.chosen.plan.seq_len == 12


def test_typing_is_debounced_and_stale_answers_are_dropped(monkeypatch):
    import tui

    calls = []
    real = tui.compute_outcome

    def counting(req, **kw):
        calls.append(req.seq_len)
        return real(req, **kw)

    monkeypatch.setattr(tui, "compute_outcome", counting)

    async def scenario(app, pilot):
        calls.clear()
        field = app.query_one("#f-seq_len")
        for text in ("2", "20", "204", "2048"):  # four changes inside the debounce interval
            field.value = text
        await settle(app, pilot)
        shown = app.outcome
        # an answer for an older request arrives late: it is not shown
        old = real(Request(model="8B", gpu="H100-80GB", gpus=8, seq_len=512), probe=lambda: None)
        app.post_message(tui.PlanReady(app.generation - 1, old))
        await settle(app, pilot)
        return shown, app.outcome

    shown, after = run(H100, scenario)
    assert calls == [2048]
    assert after is shown and shown.request.seq_len == 2048


def test_the_trainer_decides_which_knobs_are_asked():
    async def scenario(app, pilot):
        await app.action_show_tab("training")
        shown = lambda: {n for n in ("num_generations", "vllm", "ref_model") if app.query_one(f"#row-{n}").display}  # noqa: E731
        seen = [shown()]
        app.query_one("#f-trainer").value = "grpo"
        await settle(app, pilot)
        seen.append(shown())
        app.query_one("#f-trainer").value = "dpo"
        await settle(app, pilot)
        seen.append(shown())
        return seen, app.outcome

    seen, outcome = run(H100, scenario)
    assert seen == [set(), {"num_generations", "vllm"}, {"ref_model"}]
    assert outcome.ok and outcome.decision.chosen.plan.trainer == "dpo"


def test_the_model_field_completes_from_the_catalogue_and_the_picker_searches_it():
    async def scenario(app, pilot):
        app.query_one("#f-model").focus()
        await pilot.press(*"qwen2.5-1")
        await settle(app, pilot)
        suggestion = app.query_one("#f-model")._suggestion
        typo = app.outcome
        await pilot.press("ctrl+o")
        await pilot.pause()
        await pilot.press(*"qwen3 30b", "enter")
        await settle(app, pilot)
        return suggestion, typo, app.request.model, app.outcome

    suggestion, typo, model, outcome = run(Request(model="", gpu="H200", gpus=8), scenario)
    assert suggestion.startswith("qwen2.5-1")
    assert typo.about == "model" and "did you mean" in (typo.hint or "")
    assert model == "qwen3-30b-a3b" and outcome.ok and outcome.decision.model.id == "qwen3-30b-a3b"


def test_a_knob_is_pinned_and_unpinned_from_the_plan():
    async def scenario(app, pilot):
        await app.action_show_tab("plan")
        table = app.query_one("#knobs")
        table.move_cursor(row=list(app.outcome.why).index("micro_batch"))
        value = app.outcome.decision.chosen.plan.micro_batch
        await pilot.press("p")
        await settle(app, pilot)
        pinned = (app.request.micro_batch, str(app.query_one("#f-micro_batch").value), app.outcome.request.pinned())
        marker = str(table.get_row("micro_batch")[0])
        await pilot.press("u")
        await settle(app, pilot)
        return value, pinned, marker, app.request.micro_batch, app.outcome.why["micro_batch"]

    value, (pin, text, pinned), marker, after, why = run(H100, scenario)
    assert pin == value and text == str(value) and pinned["micro_batch"] == value
    assert marker == "●"
    assert after is None and not why.startswith("pinned")


def test_enter_on_a_knob_opens_its_field():
    async def scenario(app, pilot):
        await app.action_show_tab("plan")
        app.query_one("#knobs").move_cursor(row=list(app.outcome.why).index("grad_ckpt"))
        await pilot.press("enter")
        await settle(app, pilot)
        return app.query_one("#tabs").active, app.focused.id

    assert run(H100, scenario) == ("training", "f-grad_ckpt")


def test_writing_asks_before_replacing_a_bundle_and_never_touches_other_folders(tmp_path, monkeypatch):
    from advisor.bundle.generate import generate

    monkeypatch.chdir(tmp_path)
    generate(H100, out="ours")
    (tmp_path / "ours" / "train.py").write_text("# edited by hand\n")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("mine")

    async def scenario(app, pilot):
        seen = {}
        await app.action_show_tab("bundle")
        for folder, answer in (("ours", "n"), ("ours", "y"), ("theirs", None)):
            app.query_one("#out").value = folder
            await settle(app, pilot)
            await pilot.press("w")
            await pilot.pause()
            seen[(folder, answer)] = type(app.screen).__name__
            if answer:
                await pilot.press(answer)
            await settle(app, pilot)
            seen[(folder, answer, "text")] = screen_text(app)
        return seen

    seen = run(H100, scenario)
    assert seen[("ours", "n")] == "ConfirmScreen" and seen[("ours", "y")] == "ConfirmScreen"
    assert seen[("theirs", None)] != "ConfirmScreen"
    assert "theirs already exists and is not empty" in seen[("theirs", None, "text")]  # the core's refusal
    assert (tmp_path / "theirs" / "notes.txt").read_text() == "mine"
    # after "y" the core still refuses to replace a file edited by hand (write.edited_files): the edit stays
    assert (tmp_path / "ours" / "train.py").read_text() == "# edited by hand\n"
    assert "not as trl-advisor wrote it" in seen[("ours", "y", "text")]


def test_a_no_answer_keeps_the_bundle(tmp_path, monkeypatch):
    from advisor.bundle.generate import generate

    monkeypatch.chdir(tmp_path)
    generate(H100, out="ours")
    (tmp_path / "ours" / "train.py").write_text("# edited by hand\n")

    async def scenario(app, pilot):
        await app.action_show_tab("bundle")
        app.query_one("#out").value = "ours"
        await settle(app, pilot)
        await pilot.press("w")
        await pilot.pause()
        await pilot.press("n")
        await settle(app, pilot)
        return app.written

    assert run(H100, scenario) is None
    assert (tmp_path / "ours" / "train.py").read_text() == "# edited by hand\n"


class FakeOutcome:
    passed = True

    def render(self) -> str:
        return "bundle: pass\nmemory: measured 50.1 GiB, predicted 54.0 GiB"


def test_verify_runs_from_the_app_with_its_progress_where_there_are_gpus(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = []

    def fake_verify(folder, *, random_init, synthetic_data, progress):
        calls.append((folder, random_init, synthetic_data))
        progress.write("step 1/10 loss 2.31\n")
        progress.write("step 10/10 loss 1.97\n")
        return FakeOutcome()

    async def scenario(app, pilot):
        await app.action_show_tab("bundle")
        app.query_one("#out").value = "b"
        await settle(app, pilot)
        await pilot.press("w")
        await settle(app, pilot)
        shown = app.query_one("#verify-options").display
        await pilot.press("v")
        await settle(app, pilot)
        app.query_one("#random-init").focus()
        await pilot.press("space", "tab", "space")  # both offline options on
        app.query_one("#files").focus()
        await pilot.press("v")
        await settle(app, pilot)
        return shown, app.query_one("#verify-log").lines, screen_text(app)

    shown, lines, text = run(Request(model="8B"), scenario, probe=fixture_probe("h100_sxm_x8_nvlink.json"),
                             verify=fake_verify)
    assert shown
    assert calls == [("b", False, False), ("b", True, True)]
    assert [line for line in lines if line] == ["step 1/10 loss 2.31", "step 10/10 loss 1.97"]
    assert "verify passed" in text and "measured 50.1 GiB" in text


def test_without_gpus_here_verify_is_not_offered(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = []

    async def scenario(app, pilot):
        await app.action_show_tab("bundle")
        app.query_one("#out").value = "b"
        await settle(app, pilot)
        await pilot.press("w")
        await settle(app, pilot)
        await pilot.press("v")
        await settle(app, pilot)
        return screen_text(app)

    text = run(H100, scenario, verify=lambda *a, **k: calls.append(a))
    assert calls == []
    assert "random init" not in text  # the verify options are not offered either
    assert "v Verify" not in text and "trl-advisor verify b" in text


def test_every_action_is_in_the_help_and_the_palette_and_the_theme_switches():
    import tui

    async def scenario(app, pilot):
        titles = {c.title for c in app.get_system_commands(app.screen)}
        dark = app.current_theme.dark
        await pilot.press("t")
        light = app.current_theme.dark
        await pilot.press("f1")
        await pilot.pause()
        help_text = screen_text(app)
        screen = type(app.screen).__name__
        await pilot.press("escape")
        return titles, dark, light, help_text, screen

    titles, dark, light, help_text, screen = run(H100, scenario, size=(100, 60))
    assert {title for _, _, title, _ in tui.KEYS} <= titles
    assert dark and not light
    assert screen == "HelpScreen"
    for _, _, _, what in tui.KEYS:
        assert what.split()[0] in help_text


def test_the_palette_runs_an_action():
    async def scenario(app, pilot):
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Rules tab")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(app, pilot)
        return app.query_one("#tabs").active

    assert run(H100, scenario) == "rules"


def test_the_target_tab_shows_the_probe_and_the_file():
    async def machine(app, pilot):
        await app.action_show_tab("target")
        await settle(app, pilot)
        top = screen_text(app)
        app.query_one("#hardware").scroll_end(animate=False)  # the topology is under the GPUs
        await settle(app, pilot)
        return top + screen_text(app), app.outcome

    text, outcome = run(Request(model="8B"), machine)
    assert "GPUs: none found" in text and "built-in default target" in text
    assert outcome.decision.target.origin == "default"

    text, outcome = run(Request(model="8B", hardware="tests/fixtures/hardware/h100_sxm_x8_nvlink.json"), machine)
    assert "GPUs: 8 x NVIDIA H100 80GB HBM3" in text and "NV18" in text and "P2P: supported" in text
    assert outcome.decision.target.origin == "file"


def test_the_plan_waits_for_the_probe_of_this_machine():
    import threading

    gate = threading.Event()
    report = fixture_probe("h100_sxm_x8_nvlink.json")

    def slow_probe():
        gate.wait(10)
        return report()

    async def scenario(app, pilot):
        await until(pilot, lambda: strip(app) != "starting…")  # the probe is held: what shows is the wait
        waiting = (strip(app), app.outcome)
        gate.set()
        await settle(app, pilot)
        return waiting, app.outcome

    from tui import make_app

    async def main():
        app = make_app(Request(model="8B"), probe=slow_probe)
        async with app.run_test(size=(100, 32)) as pilot:
            return await scenario(app, pilot)

    (text, before), after = asyncio.run(main())
    assert "probing this machine" in text and before is None
    assert after.decision.target.origin == "probe" and after.decision.target.gpus_per_node == 8


def test_a_crash_reaches_the_command_line_as_the_exception_with_no_traceback_on_screen(capsys):
    import tui

    def broken_probe():
        raise RuntimeError("the probe broke")

    app = tui.make_app(H100, probe=broken_probe)
    with pytest.raises(RuntimeError, match="the probe broke"):
        tui.run_app(app, headless=True)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err


def test_usable_at_80_by_24():
    async def scenario(app, pilot):
        texts = {}
        for tab in ("target", "training", "plan", "rules", "bundle", "rent"):
            await app.action_show_tab(tab)
            await settle(app, pilot)
            texts[tab] = screen_text(app).splitlines()
        return texts

    texts = run(H100, scenario, size=(80, 24))
    for tab, lines in texts.items():
        assert len(lines) == 24 and max(len(line) for line in lines) <= 80
        assert "1 Target" in lines[0] and "6 Rent" in lines[0], tab
        assert lines[-4].startswith(" ✓ llama-3.1-8b SFT"), tab  # the plan strip, under every tab
        assert "f1 Help" in lines[-1], tab


def test_alt_digits_switch_tabs_from_inside_a_text_field():
    # Textual reads alt+1 (and tmux's Esc followed quickly by 1) as "¡": it must switch the tab, not be typed
    async def scenario(app, pilot):
        assert app.focused.id == "f-model"
        await pilot.press("inverted_exclamation_mark")
        await settle(app, pilot)
        seen = [app.query_one("#tabs").active]
        app.query_one("#f-model").focus()
        await pilot.press("pound_sign")
        await settle(app, pilot)
        return seen + [app.query_one("#tabs").active], app.query_one("#f-model").value

    tabs, typed = run(Request(model=""), scenario)
    assert tabs == ["target", "plan"] and typed == ""


def test_alt_6_is_the_rent_tab():
    async def scenario(app, pilot):
        await pilot.press("section_sign")  # alt+6 (tmux: Esc 6)
        await settle(app, pilot)
        return app.query_one("#tabs").active, app.focused.id

    assert run(Request(model=""), scenario) == ("rent", "f-tokens")


def test_the_first_screen_takes_keys_at_once_and_the_rest_of_its_form_follows():
    # bare `trl-advisor`: only the model's section is built before the first screen (bench.wizard_speed), yet a
    # model typed at once lands in the field, and every section of every form is built soon after
    from tui import FIELDS, make_app

    async def main():
        app = make_app(Request(model=""), probe=fixture_probe("no_gpu.json"))
        async with app.run_test(size=(100, 32)) as pilot:
            early = (app.focused.id, set(app.rows))
            await pilot.press(*"8B")
            await settle(app, pilot)
            return early, set(app.rows), app.query_one("#f-model").value, app.outcome

    (focused, early_rows), rows, typed, outcome = asyncio.run(main())
    assert focused == "f-model" and "model" in early_rows
    assert rows == {s.name for s in FIELDS}
    assert typed == "8B" and outcome.ok and outcome.request.model == "8B"


def test_without_a_plan_the_rules_and_plan_tabs_say_so_instead_of_empty_table_headers():
    """Before the first plan (the probe of this machine is held here) the Rules tab says there is no plan yet in
    one line where its tables would be; when no plan can be made, the tables without rows (the compatibility
    matrix, the Plan tab's knobs and alternatives) give way to one line each. No header of an empty table shows."""
    import threading

    from tui import NO_FINDINGS_YET, NO_MATRIX_YET, make_app

    gate = threading.Event()
    report = fixture_probe("h100_sxm_x8_nvlink.json")

    def slow_probe():
        gate.wait(10)
        return report()

    async def before_the_first_plan():
        app = make_app(Request(model="8B"), probe=slow_probe)
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: strip(app) != "starting…")
            await app.action_show_tab("rules")
            await pilot.pause(0.1)
            shown = (screen_text(app), app.outcome)
            gate.set()
            await settle(app, pilot)
            return shown

    text, outcome = asyncio.run(before_the_first_plan())
    assert outcome is None
    assert NO_FINDINGS_YET in text and NO_MATRIX_YET in text
    assert "severity" not in text and "verdict" not in text  # no header of an empty table

    async def no_plan(app, pilot):
        await app.action_show_tab("rules")
        await settle(app, pilot)
        rules = screen_text(app)
        await app.action_show_tab("plan")
        await settle(app, pilot)
        shown = {name: bool(app.query_one(f"#{name}").columns) for name in ("findings", "matrix", "knobs", "alts")}
        return app.outcome, rules, screen_text(app), shown

    outcome, rules, plan, shown = run(Request(model="8B", gpu="RTX-4090", gpus=1, method="full", backend="single"),
                                      no_plan)
    assert type(outcome).__name__ == "PlanProblem"
    assert shown == {"findings": True, "matrix": False, "knobs": False, "alts": False}
    assert "MEM001" in rules and "severity" in rules  # the findings of check, a table with rows
    assert "No plan: no features to match (the problem above says why)." in rules and "verdict" not in rules
    assert "No plan: no knob has a value" in plan and "No plan: no alternative either." in plan
    assert "peak GiB" not in plan and "why not" not in plan  # the alternatives' header
    assert not [ln for ln in plan.splitlines() if ln.split()[:3] == ["knob", "value", "why"]]  # the knobs' header
