"""The wizard's form and outcomes without a screen: every REQUEST flag has a field, a field's error is the one the
command line prints for the same text, and what the wizard shows is what the core computes."""

import pytest

pytest.importorskip("textual")

from advisor.core.request import Request  # noqa: E402


def _cli_error(capsys, *args) -> tuple[str, str]:
    """(error line, hint line) `trl-advisor generate ARGS` prints."""
    from advisor.cli import main

    assert main(["generate", *args]) == 2
    lines = capsys.readouterr().err.splitlines()
    return lines[0].removeprefix("error: "), lines[1].removeprefix("hint: ")


def test_every_request_flag_has_a_field():
    from dataclasses import fields

    import tui

    missing = [f.name for f in fields(Request) if f.name not in tui.SPECS]
    assert missing == [], f"the wizard has no field for {missing}: add a FieldSpec in tui.form_fields"


@pytest.mark.parametrize(("name", "text"), [("seq_len", "abc"), ("micro_batch", "two"), ("vllm_mem_fraction", "x")])
def test_a_field_that_does_not_parse_says_what_the_command_line_says(capsys, name, text):
    import tui

    spec = tui.SPECS[name]
    with pytest.raises(Exception) as caught:
        tui.parse_text(spec, text)
    assert (caught.value.message, caught.value.hint) == _cli_error(capsys, "--model", "8B", spec.flag, text)


@pytest.mark.parametrize(("name", "value"), [("seq_len", 0), ("zero", 4), ("gpus", 5000), ("attn", "fast attention"),
                                             ("vllm_mem_fraction", 1.5)])
def test_a_value_out_of_bounds_says_what_the_command_line_says(capsys, name, value):
    import tui

    spec = tui.SPECS[name]
    problem = tui.field_problem(spec, value)
    assert problem is not None
    assert (problem.message, problem.hint) == _cli_error(capsys, "--model", "8B", spec.flag, str(value))


def test_a_valid_value_has_no_problem():
    import tui

    assert tui.field_problem(tui.SPECS["seq_len"], 4096) is None
    assert tui.field_problem(tui.SPECS["attn"], "kernels-community/flash-attn2") is None


def test_the_form_round_trips_a_request_and_drops_fields_that_do_not_apply():
    import tui

    req = Request(model="qwen2.5-7b", trainer="grpo", gpus=8, hardware="hw.json", num_generations=4, vllm="server",
                  vllm_gpus=2, liger=False, zero=3, backend="deepspeed")
    values, passthrough = tui.values_from(req)
    assert values["target_mode"] == "file"
    assert tui.request_from(values, passthrough) == req
    # switch to SFT: the generation knobs no longer apply and leave the request (and the command line)
    values["trainer"] = "sft"
    sft = tui.request_from(values, passthrough)
    assert sft.num_generations is None and sft.vllm is None and sft.vllm_gpus is None
    assert "--num-generations" not in tui.command_line(sft)
    # ... and come back with the trainer
    values["trainer"] = "grpo"
    assert tui.request_from(values, passthrough) == req


def test_the_target_mode_is_gpu_or_hardware_or_neither():
    import tui

    values, passthrough = tui.values_from(Request(model="8B", gpu="H200", gpus=4))
    assert values["target_mode"] == "catalog"
    values["target_mode"] = "machine"
    req = tui.request_from(values, passthrough)
    assert req.gpu is None and req.hardware is None and req.gpus == 4


def test_the_command_line_is_the_one_the_bundle_records(tmp_path):
    import tui
    from advisor.bundle.generate import generate

    req = Request(model="qwen2.5-7b", trainer="dpo", gpu="H100-80GB", gpus=8, method="lora", grad_ckpt=False,
                  seq_len=2048)
    generate(req, out=str(tmp_path / "b"))
    assert tui.command_line(req) in (tmp_path / "b" / "README.md").read_text()


def test_an_auto_fix_becomes_the_flags_that_pin_it():
    import tui

    assert tui.fix_changes({"zero_stage": 3, "vllm_mode": "colocate", "sp_size": 4}) == {
        "zero": 3, "vllm": "colocate", "sp_size": 4}


def test_fields_for_flags_the_core_adds_appear_with_them():
    import tui

    assert ("teacher" in tui.SPECS) == ("teacher" in Request.__dataclass_fields__)
    ref = dict(tui.SPECS["ref_model"].choices)
    from advisor.core.request import REF_MODELS

    assert set(REF_MODELS) <= set(ref.values())


# ------------------------------------------------------------------------------------------------- outcomes

def test_a_plan_is_exactly_what_generate_decides():
    import tui
    from advisor.bundle.render import reasons
    from advisor.search import decide

    req = Request(model="8B", gpu="H100-80GB", gpus=8)
    view = tui.compute_outcome(req, probe=lambda: None)
    decision, result = decide(req)
    assert view.ok and view.result == result
    assert view.why == reasons(decision.chosen.plan, decision.model, decision.target, result, req)
    assert view.summary[1].startswith("plan     ") and view.summary[3].startswith("speed    ")


def test_a_pin_that_breaks_a_rule_is_the_rule_with_its_fix():
    import tui

    req = Request(model="qwen2.5-7b", gpu="H100-80GB", gpus=8, sp_size=7)
    problem = tui.compute_outcome(req, probe=lambda: None)
    assert problem.kind == "rule" and problem.message.startswith("SP001 ulysses-heads-divisible")
    assert problem.hint == "valid --sp-size values for qwen2.5-7b on 8 GPUs: 1, 2, 4"
    assert {"id": "SP001", "auto_fix": {"sp_size": 4}}.items() <= next(
        f for f in problem.findings if f["id"] == "SP001").items()


def test_nothing_fits_names_the_smallest_change():
    import tui
    from advisor.search import smallest_change

    req = Request(model="405B", gpu="RTX-4090", gpus=1, method="full")
    problem = tui.compute_outcome(req, probe=lambda: None)
    assert problem.kind == "nofit" and problem.message.startswith("no plan for llama-3.1-405b")
    from advisor.catalog import resolve_model
    from advisor.resolve import resolve_target

    assert problem.hint == smallest_change(req, resolve_model(req.model), resolve_target(req))


def test_an_unknown_model_is_the_cli_error_on_the_model_field(capsys):
    import tui

    problem = tui.compute_outcome(Request(model="qwen2.5-7", gpu="H200"), probe=lambda: None)
    assert problem.kind == "input" and problem.about == "model"
    assert (problem.message, problem.hint) == _cli_error(capsys, "--model", "qwen2.5-7", "--gpu", "H200")


def test_typing_a_hub_id_never_downloads(monkeypatch):
    import tui
    from advisor.catalog import lookup

    def no_network(repo_id):
        raise AssertionError(f"tried to download {repo_id}")

    monkeypatch.setattr(lookup, "_download_config", no_network)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    problem = tui.compute_outcome(Request(model="someorg/not-cached-model", gpu="H200"), probe=lambda: None)
    assert problem.about == "model" and "downloads are off" in problem.message


def test_enter_on_a_hub_id_may_download(monkeypatch):
    import tui
    from advisor.catalog import lookup

    asked = []

    def fake_download(repo_id):
        asked.append(repo_id)
        raise lookup.UnknownNameError("offline here", hint="")

    monkeypatch.setattr(lookup, "_download_config", fake_download)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    tui.compute_outcome(Request(model="someorg/not-cached-model", gpu="H200"), probe=lambda: None, allow_network=True)
    assert asked == ["someorg/not-cached-model"]


def test_a_bad_hardware_file_is_the_cli_error_on_its_field(tmp_path, capsys):
    import tui

    bad = tmp_path / "hw.json"
    bad.write_text("{not json")
    problem = tui.compute_outcome(Request(model="8B", hardware=str(bad)), probe=lambda: None)
    assert problem.about == "hardware"
    assert (problem.message, problem.hint) == _cli_error(capsys, "--model", "8B", "--hardware", str(bad))


def test_the_machine_target_uses_the_probe_it_is_given():
    from wizard_harness import fixture_probe

    import tui

    view = tui.compute_outcome(Request(model="8B"), probe=fixture_probe("h100_sxm_x8_nvlink.json"))
    assert view.decision.target.origin == "probe" and view.decision.target.gpus_per_node == 8
    assert view.report.gpu_count == 8


# ------------------------------------------------------------------------------------------- memory picture

def _memory():
    from advisor.search import decide

    return decide(Request(model="8B", gpu="H100-80GB", gpus=8))[1]["memory"]


def test_the_memory_parts_are_the_breakdown_then_reserve_headroom_and_margin():
    import tui

    m = _memory()
    parts = tui.memory_parts(m)
    by = {name: size for name, size, _ in parts}
    assert [by[k] for k in m["breakdown_bytes"]] == list(m["breakdown_bytes"].values())
    assert sum(by[k] for k in m["breakdown_bytes"]) == m["per_gpu_peak_bytes"]
    assert sum(by.values()) == m["gpu_capacity_bytes"]
    assert by["headroom"] == m["headroom_bytes"]


@pytest.mark.parametrize("width", [10, 37, 80])
def test_the_memory_bar_fills_its_width_in_proportion(width):
    import tui

    m = _memory()
    bar = tui.memory_bar(m, width)
    assert bar.cell_len == width
    activations = sum(len(s.text) for s in bar.render(__import__("rich").get_console()) if s.style and
                      str(s.style.color.triplet.hex) == "#4fb36b")
    share = m["breakdown_bytes"]["activations"] / m["gpu_capacity_bytes"]
    assert abs(activations - share * width) <= 1.0


def test_the_matrix_rows_concern_the_plan_and_both_features_come_first():
    import tui

    features = {"unsloth", "liger", "lora", "sft", "single-gpu"}
    rows = tui.matrix_rows(features)
    assert rows and all(r["a"] in features or r["b"] in features for _, r in rows)
    assert [(r["a"], r["b"]) for both, r in rows if both] == [("liger", "unsloth")]
    both = [b for b, _ in rows]
    assert both == sorted(both, reverse=True)
    assert not any(r["a"] == "ring-cp" for _, r in rows)  # nothing about features the plan does not have
