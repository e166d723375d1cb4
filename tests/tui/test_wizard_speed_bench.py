"""bench.wizard_speed reads the first screen and the first plan off the terminal, in that order (the figures the
README quotes come from it)."""

import pytest


def test_first_seen_times_each_marker_in_order():
    from bench.wizard_speed import first_seen

    now = [0.0]
    screens = iter(["", "", " 1 Target  2 Training", " 1 Target ... 95,283 tokens/s", "x"])

    def clock():
        return now[0]

    def sleep(seconds):
        now[0] += 0.01

    seen = first_seen(lambda: next(screens), ["1 Target", "tokens/s"], clock=clock, sleep=sleep, start=0.0)
    assert seen == pytest.approx([0.02, 0.03])


def test_a_plan_drawn_with_the_first_screen_counts_for_both():
    from bench.wizard_speed import first_seen

    seen = first_seen(lambda: "1 Target ... tokens/s", ["1 Target", "tokens/s"], clock=lambda: 0.5,
                      sleep=lambda s: None, start=0.0)
    assert seen == [0.5, 0.5]


def test_a_marker_that_never_appears_times_out():
    from bench.wizard_speed import first_seen

    now = [0.0]

    def sleep(seconds):
        now[0] += 1.0

    with pytest.raises(TimeoutError, match="tokens/s"):
        first_seen(lambda: "1 Target", ["1 Target", "tokens/s"], clock=lambda: now[0], sleep=sleep, start=0.0,
                   timeout=3.0)


def test_every_scenario_is_a_command_line_the_wizard_takes():
    from advisor.cli import build_parser
    from bench.wizard_speed import H100_FILE, SCENARIOS

    assert H100_FILE.exists()
    for args, markers in SCENARIOS.values():
        if args:
            parsed = build_parser().parse_args(args)
            assert parsed.command == "wizard" or getattr(parsed, "func", None) is not None
        assert markers and all(isinstance(m, str) and m for m in markers)
