"""`check --bundle DIR`: reading user files, errors on bad input, and the plan rebuilt from the files."""

from __future__ import annotations

import json
import textwrap

import pytest

from advisor.bundle import read as bundle
from advisor.check import check_bundle
from advisor.core.errors import InputFileError


def write(tmp_path, files: dict) -> str:
    for name, content in files.items():
        text = json.dumps(content) if isinstance(content, dict) else textwrap.dedent(content)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return str(tmp_path)


def test_missing_folder(tmp_path):
    with pytest.raises(InputFileError, match="no such folder"):
        check_bundle(str(tmp_path / "nope"))


def test_empty_or_unrelated_folder_names_the_files_it_reads(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "data.json").write_text('{"rows": [1, 2]}')
    with pytest.raises(InputFileError) as info:
        check_bundle(str(tmp_path))
    assert str(info.value) == f"no training configuration files in {tmp_path}"
    for name in ("ds_config.json", "accelerate YAML", "train.py", "plan.json"):
        assert name in info.value.hint
    assert "\n" not in str(info.value)


def test_malformed_json_is_one_line(tmp_path):
    (tmp_path / "ds_config.json").write_text('{"zero_optimization": {"stage": 3,}}')
    with pytest.raises(InputFileError) as info:
        check_bundle(str(tmp_path))
    assert "ds_config.json: invalid JSON at line 1" in str(info.value)
    assert "\n" not in str(info.value)


def test_malformed_yaml_and_python(tmp_path):
    (tmp_path / "accelerate.yaml").write_text("distributed_type: [DEEPSPEED\n")
    with pytest.raises(InputFileError, match="accelerate.yaml: invalid YAML"):
        check_bundle(str(tmp_path))
    (tmp_path / "accelerate.yaml").unlink()
    (tmp_path / "train.py").write_text("args = SFTConfig(output_dir='out'\n")
    with pytest.raises(InputFileError, match="train.py: Python syntax error at line"):
        check_bundle(str(tmp_path))


def test_a_refused_number_in_yaml_gets_a_hint_about_the_number(tmp_path):
    (tmp_path / "trl.yaml").write_text("max_length: .inf\n")
    with pytest.raises(InputFileError) as info:
        check_bundle(str(tmp_path))
    assert "not a finite number" in info.value.message and "finite number" in info.value.hint
    (tmp_path / "trl.yaml").write_text("max_length: [1\n")
    with pytest.raises(InputFileError) as info:
        check_bundle(str(tmp_path))
    assert "indentation" in info.value.hint


def test_a_nul_byte_in_train_py_names_its_line(tmp_path):
    (tmp_path / "train.py").write_text("x = 1\ny = 2\0\n")
    with pytest.raises(InputFileError, match="train.py: Python syntax error at line 2: .*null bytes"):
        check_bundle(str(tmp_path))


def test_files_without_a_model(tmp_path):
    write(tmp_path, {"ds_config.json": {"zero_optimization": {"stage": 2}}})
    with pytest.raises(InputFileError, match="do not name a model"):
        check_bundle(str(tmp_path))


def test_trl_zero1_config_with_grad_accum_4_is_caught(tmp_path):
    # TRL's shipped zero1.yaml (gradient_accumulation_steps: 1) + a TRL config with accumulation 4: transformers
    # raises a mismatch (transformers integrations/deepspeed.py trainer_config_finalize); TRL's configs also assume 8 processes.
    path = write(tmp_path, {
        "zero1.yaml": """\
            compute_environment: LOCAL_MACHINE
            debug: false
            deepspeed_config:
              deepspeed_multinode_launcher: standard
              gradient_accumulation_steps: 1
              zero3_init_flag: false
              zero_stage: 1
            distributed_type: DEEPSPEED
            downcast_bf16: 'no'
            machine_rank: 0
            main_training_function: main
            mixed_precision: bf16
            num_machines: 1
            num_processes: 8
            rdzv_backend: static
            same_network: true
            tpu_env: []
            tpu_use_cluster: false
            tpu_use_sudo: false
            use_cpu: false
            """,
        "sft.yaml": """\
            model_name_or_path: Qwen/Qwen2.5-0.5B
            dataset_name: trl-lib/Capybara
            per_device_train_batch_size: 4
            gradient_accumulation_steps: 4
            max_seq_length: 2048
            """,
    })
    report = check_bundle(path)
    failed = {f.id: f for f in report.failures}
    assert "CFG003" in failed and "gradient_accumulation_steps=1" in failed["CFG003"].message
    assert "CFG014" in failed and "max_seq_length" in failed["CFG014"].message
    assert not report.ok
    assert report.plan.backend == "deepspeed" and report.plan.zero_stage == 1
    assert report.plan.micro_batch == 4 and report.plan.grad_accum == 4
    assert report.model.id == "qwen2.5-0.5b"
    assert any("GPU = H100-80GB" in a for a in report.assumptions)
    assert report.target.gpus_per_node == 8
    data = report.to_json()
    assert data["ok"] is False and data["assumptions"]


def test_train_py_literal_kwargs_constants_and_dicts(tmp_path):
    path = write(tmp_path, {
        "train.py": """\
            import torch
            from transformers import AutoModelForCausalLM
            from trl import GRPOConfig, GRPOTrainer

            MODEL = "Qwen/Qwen2.5-0.5B"
            CONFIG = {"micro_batch": 4, "grad_accum": 2}

            def main():
                common = dict(per_device_train_batch_size=CONFIG["micro_batch"],
                              gradient_accumulation_steps=CONFIG["grad_accum"])
                args = GRPOConfig(output_dir="out", num_generations=8, use_vllm=True, **common)
                model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.bfloat16,
                                                             attn_implementation="flash_attention_2")
                GRPOTrainer(model=model, args=args).train()
            """,
    })
    files = bundle.read_folder(path)
    assert files.trainer == "grpo"
    assert files.trl_args["per_device_train_batch_size"] == 4
    assert files.trl_args["gradient_accumulation_steps"] == 2
    assert files.model_init_kwargs["dtype"] == "bfloat16"
    assert bundle.model_id(files) == "Qwen/Qwen2.5-0.5B"
    report = check_bundle(path)
    assert report.plan.trainer == "grpo" and report.plan.vllm_mode == "colocate"
    assert report.plan.precision == "bf16" and report.plan.attn == "flash_attention_2"
    # one GPU (no accelerate YAML): 4 x 1 x 2 = 8 completions per generation batch, 8 generations: fine
    assert all(f.id != "TRN001" for f in report.failures)


def test_plan_json_fills_what_the_files_do_not_say(tmp_path):
    """A folder whose only runtime file is ds_config.json: the stage is the file's, the rest plan.json's record."""
    plan = {"backend": "deepspeed", "zero_stage": 2, "offload": "none", "method": "lora", "precision": "bf16",
            "micro_batch": 2, "grad_accum": 8, "grad_ckpt": True, "liger": False, "sp_size": 1, "cp_size": 1,
            "vllm_mode": "none", "num_processes": 4, "nodes": 1}
    path = write(tmp_path, {"plan.json": {"model": {"id": "llama-3.1-8b"}, "plan": plan,
                                          "request": {"trainer": "sft", "seq_len": 2048, "attn": "sdpa"},
                                          "hardware": {"gpu": "A100-80GB", "gpus_per_node": 4, "nodes": 1}},
                            "ds_config.json": {"zero_optimization": {"stage": 3}}})
    report = check_bundle(path)
    assert report.target.gpu.id == "A100-80GB" and report.target.gpus_per_node == 4
    assert report.plan.method == "lora" and report.plan.seq_len == 2048 and report.plan.micro_batch == 2
    assert report.plan.zero_stage == 3  # what DeepSpeed reads, not plan.json's 2
    assert report.reading.sources["zero_stage"] == "ds_config.json zero_optimization.stage"
    assert report.reading.sources["micro_batch"] == "plan.json"
    (diff,) = [d for d in report.reading.vs_plan_json if d.field == "zero_stage"]
    assert (diff.value, diff.other) == (3, 2)
    cfg006 = next(f for f in report.findings if f.id == "CFG006")
    assert cfg006.status == "fail"  # ZeRO-3 JSON without stage3_gather_16bit_weights_on_model_save


# ------------------------------------------------------------------------------------- edited generated bundles

def _generated(tmp_path, *flags: str):
    from advisor.cli import main as cli_main

    out = tmp_path / "b"
    assert cli_main(["generate", *flags, "--out", str(out)]) == 0
    return out


def _replace(path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.fixture
def b70(tmp_path, capsys):
    out = _generated(tmp_path, "--model", "70B", "--gpus", "8", "--gpu", "H100-80GB", "--backend", "deepspeed",
                     "--micro-batch", "1", "--grad-accum", "4")
    capsys.readouterr()
    return out


def test_an_unedited_bundle_reads_back_as_planned(b70):
    report = check_bundle(str(b70))
    assert report.ok and report.plan == report.reading.planned
    assert report.differences == [] and not report.reading.vs_config


def test_a_bigger_micro_batch_in_train_py_is_judged_as_it_runs(b70):
    planned = check_bundle(str(b70))
    _replace(b70 / "train.py", "'micro_batch': 1,", "'micro_batch': 8,")
    report = check_bundle(str(b70))
    assert report.plan.micro_batch == 8
    assert report.memory.per_gpu_peak_bytes > planned.memory.per_gpu_peak_bytes
    assert [f.id for f in report.errors] == ["MEM001"]  # it no longer fits
    (diff,) = report.differences
    assert diff.id == "PLAN001" and diff.severity == "warning"
    assert diff.reads["value"] == 8 and diff.reads["other"] == 1
    assert "micro_batch is 8 in train.py CONFIG['micro_batch']" in diff.message and "planned 1" in diff.message


def test_more_accumulation_is_a_difference_and_a_new_estimate(b70):
    planned = check_bundle(str(b70))
    _replace(b70 / "train.py", "'grad_accum': 4,", "'grad_accum': 5,")
    report = check_bundle(str(b70))
    assert report.ok and report.plan.grad_accum == 5
    assert report.speed.step_seconds > planned.speed.step_seconds
    assert [(f.id, f.reads["value"], f.reads["other"]) for f in report.differences] == [("PLAN001", 5, 4)]
    data = report.to_json()
    assert data["estimate"]["step_seconds"] == pytest.approx(report.speed.step_seconds)
    assert data["differences"]["vs_plan_json"][0]["field"] == "grad_accum"
    assert data["planned"]["grad_accum"] == 4 and data["plan"]["grad_accum"] == 5


def test_another_zero_stage_in_ds_config_is_what_runs(b70):
    _replace(b70 / "ds_config.json", '"stage": 3,', '"stage": 1,')
    report = check_bundle(str(b70))
    assert report.plan.zero_stage == 1 and not report.ok
    assert "MEM001" in {f.id for f in report.errors}
    ids = sorted((f.id, f.reads["field"]) for f in report.differences)
    assert ids == [("PLAN001", "zero_stage"), ("PLAN002", "zero_stage")]  # vs plan.json, and vs CONFIG


def test_check_bundle_text_report_shows_the_estimate_and_the_differences(b70, capsys):
    from advisor.cli import main as cli_main

    _replace(b70 / "train.py", "'micro_batch': 1,", "'micro_batch': 8,")
    assert cli_main(["check", "--bundle", str(b70)]) == 1
    out = capsys.readouterr().out
    assert "  estimate of the files: " in out and "DOES NOT FIT" in out
    assert "  plan.json planned: sft, ZeRO-3, lora r16, bf16, mb 1 x ga 4" in out
    assert "1 difference(s) between the files, plan.json and the flags (warnings):" in out
    assert "trl-advisor explain PLAN" not in out  # not rules: no explain line


# --------------------------------------------------------------------------------------------- REQUEST flags

USER_FILES = {
    "sft.yaml": "dataset_name: trl-lib/Capybara\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 4\n"
                "max_length: 2048\nbf16: true\n",
    "accelerate.yaml": "distributed_type: MULTI_GPU\nnum_processes: 8\nnum_machines: 1\nmixed_precision: bf16\n",
}


def test_flags_fill_what_user_files_lack(tmp_path, capsys):
    from advisor.cli import main as cli_main

    path = write(tmp_path, USER_FILES)
    assert cli_main(["check", "--bundle", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "do not name a model" in err and "hint: pass --model MODEL" in err
    rc = cli_main(["check", "--bundle", path, "--model", "0.5B", "--gpus", "8", "--gpu", "H100-80GB", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["model"] == "qwen2.5-0.5b" and data["hardware"]["gpu"] == "H100-80GB"
    assert data["plan"]["micro_batch"] == 4 and data["plan"]["backend"] == "ddp" and data["plan"]["seq_len"] == 2048


def test_a_flag_overrides_a_file_and_the_conflict_is_reported(tmp_path):
    from advisor.core.request import Request

    path = write(tmp_path, USER_FILES)
    report = check_bundle(path, request=Request(model="0.5B", gpus=8, gpu="H100-80GB", micro_batch=2,
                                                 global_batch=128))
    assert report.plan.micro_batch == 2 and report.plan.grad_accum == 128 // (2 * 8)
    found = {(f.id, f.reads["field"], f.reads["value"], f.reads["other"]) for f in report.differences}
    assert ("PLAN003", "micro_batch", 2, 4) in found and ("PLAN003", "grad_accum", 8, 4) in found


def test_a_global_batch_that_does_not_divide_is_a_usage_error(tmp_path):
    from advisor.core.errors import AdvisorError
    from advisor.core.request import Request

    path = write(tmp_path, USER_FILES)
    with pytest.raises(AdvisorError, match="not a multiple"):
        check_bundle(path, request=Request(model="0.5B", gpus=8, gpu="H100-80GB", global_batch=100))


def test_hardware_file_sets_target_and_versions(tmp_path):
    from pathlib import Path

    hw = Path(__file__).resolve().parents[1] / "fixtures" / "hardware" / "rtx4090_x4_pcie_nop2p.json"
    path = write(tmp_path, {"accelerate.yaml": {"distributed_type": "MULTI_GPU", "num_processes": 8},
                            "sft.yaml": {"model_name_or_path": "Qwen/Qwen2.5-0.5B"}})
    report = check_bundle(path, hardware=str(hw))
    assert report.target.gpu.id == "RTX-4090"
    failed = {f.id for f in report.failures}
    assert "CFG012" in failed  # 8 processes for 4 GPUs
    assert "HW006" in failed  # PCIe without P2P and no NCCL_P2P_DISABLE


def test_requirements_pins_become_versions(tmp_path):
    from advisor.check import bundle_context

    path = write(tmp_path, {"sft.yaml": {"model_name_or_path": "Qwen/Qwen2.5-0.5B"},
                            "requirements.txt": "torch>=2.6\ntrl==1.15.0\ndatasets>=3.4.1,<5\n"})
    ctx = bundle_context(path)
    assert ctx.versions["trl"] == "1.15.0" and ctx.version_origin["trl"] == "bundle"
    assert "datasets" not in ctx.versions and "torch" not in ctx.versions


def test_model_named_by_the_trainer_call(tmp_path):
    path = write(tmp_path, {"train.py": """\
        from trl import SFTConfig, SFTTrainer
        trainer = SFTTrainer(model="meta-llama/Llama-3.1-8B", args=SFTConfig(output_dir="out", max_seq_length=4096))
        """})
    report = check_bundle(path)
    assert report.model.id == "llama-3.1-8b"
    assert any(f.id == "CFG013" and "max_seq_length" in f.message for f in report.errors)


@pytest.mark.parametrize(("flags", "field", "value"), [
    (["--zero", "0"], "zero_stage", 0), (["--no-liger"], "liger", False), (["--no-grad-ckpt"], "grad_ckpt", False)])
def test_a_flag_set_to_zero_or_off_still_overrides_the_files(tmp_path, capsys, flags, field, value):
    """0 and False are values the user gave (`0 == False` in Python must not drop --zero 0)."""
    from advisor.cli import main as cli_main

    out = tmp_path / "b"
    assert cli_main(["generate", "--model", "0.5B", "--gpus", "2", "--gpu", "H100-80GB", "--backend", "deepspeed",
                     "--zero", "2", "--liger", "--grad-ckpt", "--out", str(out)]) == 0
    capsys.readouterr()
    cli_main(["check", "--bundle", str(out), *flags, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["plan"][field] == value
    flag = {"zero_stage": "--zero"}.get(field, "--" + field.replace("_", "-"))  # the flag's name, not the field's
    assert any(f["id"] == "PLAN003" and f["message"].startswith(f"{flag} {value} overrides") for f in data["findings"])


def _edited_bundle(tmp_path, edit):
    from advisor.cli import main as cli_main

    out = tmp_path / "b"
    assert cli_main(["generate", "--model", "0.5B", "--gpus", "2", "--gpu", "H100-80GB", "--backend", "deepspeed",
                     "--zero", "2", "--out", str(out)]) == 0
    edit(out)
    return out


def _set_line(path, prefix, line):
    text = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(line if t.startswith(prefix) else t for t in text) + "\n", encoding="utf-8")


@pytest.mark.parametrize(("label", "edit", "said"), [
    ("unknown distributed type", lambda b: _set_line(b / "accelerate.yaml", "distributed_type:",
                                                     "distributed_type: BOGUS"), "distributed_type"),
    ("processes as a word", lambda b: _set_line(b / "accelerate.yaml", "num_processes:", "num_processes: eight"),
     "num_processes"),
    ("empty accelerate.yaml", lambda b: (b / "accelerate.yaml").write_text("", encoding="utf-8"), "accelerate.yaml"),
    ("zero_optimization as a list", lambda b: (b / "ds_config.json").write_text(
        json.dumps({**json.loads((b / "ds_config.json").read_text()), "zero_optimization": [1, 2]})),
     "zero_optimization"),
    ("train.py missing", lambda b: (b / "train.py").unlink(), "train.py: missing"),
])
def test_check_lists_what_verify_would_stop_on(tmp_path, capsys, label, edit, said):
    """A bundle file edited into something that cannot run: `check --bundle` reports it as an error (exit 1), as
    verify's consistency step does, instead of passing on plan.json's values."""
    from advisor.cli import main as cli_main

    out = _edited_bundle(tmp_path, edit)
    capsys.readouterr()
    rc = cli_main(["check", "--bundle", str(out)])
    text = capsys.readouterr().out
    assert rc == 1, text
    assert "problem(s) in the bundle's files" in text and said in text


def test_a_config_value_written_as_an_expression_is_named(tmp_path, capsys):
    from advisor.cli import main as cli_main

    out = _edited_bundle(tmp_path, lambda b: None)
    text = (out / "train.py").read_text(encoding="utf-8")
    (out / "train.py").write_text(text.replace("    'micro_batch': ", "    'micro_batch': 10**30 or ", 1),
                                  encoding="utf-8")
    capsys.readouterr()
    assert cli_main(["check", "--bundle", str(out)]) == 2
    err = capsys.readouterr().err
    assert "CONFIG['micro_batch']" in err and "an expression" in err


def test_an_unedited_bundle_has_no_file_problem(tmp_path, capsys):
    from advisor.cli import main as cli_main

    out = _edited_bundle(tmp_path, lambda b: None)
    capsys.readouterr()
    assert cli_main(["check", "--bundle", str(out)]) == 0
    assert "problem(s) in the bundle's files" not in capsys.readouterr().out


def test_an_unchecked_error_rule_is_no_error_in_the_json(tmp_path, capsys):
    """A catalogue target does not say its host RAM, so MEM003 (severity error when it fails) cannot be checked on an
    optimizer-offload bundle: status unknown. check exits 0 (CONTRACT.md: 1 only if a finding is an error), and the
    JSON agrees: severity "info", the rule's own severity in rule_severity, as the text says "not checked: error if it
    fails". A script keyed on severity and one keyed on the exit code read the same verdict."""
    from advisor.cli import main as cli_main

    out = tmp_path / "o1"
    assert cli_main(["generate", "--model", "1.5B", "--backend", "deepspeed", "--zero", "3", "--offload", "optimizer",
                     "--gpus", "1", "--gpu", "H100-80GB", "--out", str(out)]) == 0
    capsys.readouterr()
    rc = cli_main(["check", "--bundle", str(out), "--json"])
    data = json.loads(capsys.readouterr().out)
    mem003 = next(f for f in data["findings"] if f["id"] == "MEM003")
    assert (mem003["status"], mem003["severity"], mem003["rule_severity"]) == ("unknown", "info", "error")
    assert rc == 0 and data["ok"] is True
    assert not any(f["severity"] == "error" for f in data["findings"])
    for f in data["findings"]:  # severity is the rule's exactly when it failed
        assert f["severity"] == (f["rule_severity"] if f["status"] == "fail" else "info")
    rc = cli_main(["check", "--bundle", str(out)])
    assert rc == 0 and "MEM003 [not checked: error if it fails]" in capsys.readouterr().out
    # plan.json keeps generate's findings in the same shape, and the README still says what the rule would be
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert next(f for f in plan["findings"] if f["id"] == "MEM003")["severity"] == "info"
    assert "**not checked (error if it fails)** `MEM003`" in (out / "README.md").read_text(encoding="utf-8")
