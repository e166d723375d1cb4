"""The learning rate every bundle writes, and why: TRL's default for the trainer's config with full fine-tuning, ten
times it for an adapter (an adapter at the full fine-tune's rate barely trains). Shown in CONFIG and in the README's
table, passed to the config class."""

from __future__ import annotations

import importlib
import importlib.util
import re

import pytest
from plan_defaults import build_plan

from advisor.bundle.render import LORA_LEARNING_RATE_FACTOR, TRL_LEARNING_RATES, learning_rate
from advisor.cli import main

CONFIG_CLASSES = {"sft": ("trl", "SFTConfig"), "dpo": ("trl", "DPOConfig"), "kto": ("trl", "KTOConfig"),
                  "grpo": ("trl", "GRPOConfig"), "rloo": ("trl", "RLOOConfig"),
                  "gkd": ("trl.experimental.gkd", "GKDConfig")}


@pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs the [train] extra (trl)")
@pytest.mark.parametrize("trainer", sorted(CONFIG_CLASSES))
def test_full_fine_tuning_keeps_the_installed_trls_default(trainer):
    module, name = CONFIG_CLASSES[trainer]
    config = getattr(importlib.import_module(module), name)
    assert config.__dataclass_fields__["learning_rate"].default == TRL_LEARNING_RATES[trainer]
    assert learning_rate(build_plan(trainer=trainer))[0] == TRL_LEARNING_RATES[trainer]


@pytest.mark.parametrize("method", ["lora", "qlora"])
@pytest.mark.parametrize("trainer", sorted(CONFIG_CLASSES))
def test_an_adapter_trains_at_ten_times_the_rate(trainer, method):
    rate, why = learning_rate(build_plan(trainer=trainer, method=method))
    assert rate == pytest.approx(TRL_LEARNING_RATES[trainer] * LORA_LEARNING_RATE_FACTOR)
    assert "LoRA Without Regret" in why


@pytest.mark.parametrize(("argv", "rate"), [
    (["--model", "0.5B", "--method", "lora"], 2e-4),
    (["--model", "0.5B", "--trainer", "dpo"], 1e-6),
])
def test_the_bundle_passes_it_and_says_why(tmp_path, capsys, argv, rate):
    out = tmp_path / "b"
    assert main(["generate", *argv, "--gpu", "H100-80GB", "--out", str(out)]) == 0
    train = (out / "train.py").read_text()
    written = re.search(r"^    'learning_rate': ([0-9.e-]+),  # (.+)$", train, re.MULTILINE)
    assert written and float(written.group(1)) == pytest.approx(rate)
    assert 'learning_rate=CONFIG["learning_rate"]' in train
    row = next(line for line in (out / "README.md").read_text().splitlines() if line.startswith("| `learning_rate`"))
    assert f"`{rate!r}`" in row and "tune it" in row


@pytest.mark.parametrize("value", ["'fast'", "0", "-1e-5", "True", "None", "5"])
def test_a_hand_edited_rate_that_is_not_one_is_a_finding(tmp_path, capsys, value):
    out = tmp_path / "b"
    assert main(["generate", "--model", "0.5B", "--method", "lora", "--gpu", "H100-80GB", "--out", str(out)]) == 0
    train = out / "train.py"
    train.write_text(re.sub(r"^    'learning_rate': [^,]+,", f"    'learning_rate': {value},", train.read_text(),
                            count=1, flags=re.MULTILINE))
    capsys.readouterr()
    assert main(["check", "--bundle", str(out)]) == 1
    assert "learning_rate" in capsys.readouterr().out
