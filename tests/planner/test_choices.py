"""The knobs the planner now chooses or refuses: the attention implementation, the DPO/KTO reference model, GKD's
teacher, BEMA, Liger's path, the headroom it keeps, plans too slow to be an answer, and pins that mean nothing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from advisor.bundle.generate import generate
from advisor.core.errors import AdvisorError
from advisor.core.request import Request
from advisor.model import calibration
from advisor.resolve import resolve_model, resolve_target
from advisor.resolve.attention import choose_attention
from advisor.search import decide
from rules.trainers import DEFAULT_SFT_DATASET

HARDWARE = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"


def _config(bundle: Path) -> dict:
    tree = ast.parse((bundle / "train.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CONFIG")
    return ast.literal_eval(node.value)


# ----------------------------------------------------------------------------------------------------- attention

def test_gemma2_plans_with_an_attention_it_accepts():
    """Gemma-2 rejects sdpa (transformers _supports_sdpa = False): FlashAttention 2 on Ampere+, eager before."""
    decision, result = decide(Request(model="gemma-2-2b", gpu="H100-80GB", gpus=1))
    assert decision.chosen.plan.attn == "flash_attention_2"
    assert "rejects sdpa" in decision.reasons["attn"]
    assert not [f for f in result["findings"] if f["id"] == "HW010" and f["status"] == "fail"]
    decision, _ = decide(Request(model="gemma-2-2b", gpu="T4", gpus=1))
    assert decision.chosen.plan.attn == "eager" and "compute capability 7.5" in decision.reasons["attn"]


def test_the_attention_choice_respects_what_a_probed_machine_has_installed():
    req = Request(model="gemma-2-2b", hardware=str(HARDWARE / "h200_x1.json"))
    model, target = resolve_model(req), resolve_target(req)
    software = {k.lower() for k, v in target.software.items() if v}
    attn, why = choose_attention(req, model, target, "bf16")
    if {"flash-attn", "flash_attn", "kernels"} & software:
        assert attn == "flash_attention_2"
    else:  # the H200 of the fixture has neither package: eager, and the reason says so
        assert attn == "eager" and "installed" in why


def test_models_that_accept_sdpa_keep_it_and_a_pin_wins():
    decision, _ = decide(Request(model="0.5B", gpu="H100-80GB", gpus=1))
    assert decision.chosen.plan.attn == "sdpa"
    decision, _ = decide(Request(model="0.5B", gpu="H100-80GB", gpus=1, attn="eager"))
    assert decision.chosen.plan.attn == "eager"


# ----------------------------------------------------------------------------------------------- reference models

def test_dpo_full_searches_the_reference_and_says_why():
    decision, _ = decide(Request(model="7B", trainer="dpo", gpu="A100-80GB", gpus=2))
    refs = {a.plan.ref_model for a in decision.alternatives} | {decision.chosen.plan.ref_model}
    assert refs == {"copy", "precompute"}
    assert decision.reasons["ref_model"].startswith(decision.chosen.plan.ref_model)
    if decision.chosen.plan.ref_model == "precompute":
        assert "--max-steps does not shorten" in decision.reasons["ref_model"]


def test_precompute_is_charged_its_pass_before_training():
    """Precomputed log-probs run the reference forward over the dataset before training: not in the step time, but
    in the run's tokens/s the planner ranks by."""
    decision, result = decide(Request(model="1.5B", trainer="dpo", gpu="H200", gpus=1, ref_model="precompute"))
    speed = result["speed"]
    assert speed["amortized_seconds_per_step"] > 0
    assert speed["effective_tokens_per_second"] < speed["tokens_per_second"]
    assert decision.chosen.tokens_per_second == pytest.approx(speed["effective_tokens_per_second"])


@pytest.mark.parametrize("trainer", ["dpo", "kto"])
def test_no_reference_with_full_fine_tuning_is_refused(trainer):
    with pytest.raises(AdvisorError, match="builds its own reference copy"):
        decide(Request(model="0.5B", trainer=trainer, method="full", ref_model="none", gpu="H200", gpus=1))


@pytest.mark.parametrize(("ref", "methods"), [("none", {"lora", "qlora"}), ("bema", {"full"})])
def test_a_pinned_reference_limits_the_methods_searched_and_estimated(ref, methods):
    """A reference pin with the method left open: the planner searches, and estimate takes, only the methods the
    reference exists for (never a full plan with `none`, which TRL would turn into a copy)."""
    from advisor.check import estimate_request

    req = Request(model="0.5B", trainer="dpo", ref_model=ref, gpu="H200", gpus=1)
    decision, _ = decide(req)
    assert decision.chosen.plan.method in methods and decision.chosen.plan.ref_model == ref
    assert {a.plan.method for a in decision.alternatives} <= methods
    assert estimate_request(req)["request"]["method"] in methods


def test_bema_counts_its_host_buffers_and_writes_its_callback(tmp_path):
    copy, copy_result = decide(Request(model="1.5B", trainer="dpo", method="full", ref_model="copy", gpu="H200",
                                       gpus=1, micro_batch=4))
    bema, bema_result = decide(Request(model="1.5B", trainer="dpo", method="full", ref_model="bema", gpu="H200",
                                       gpus=1, micro_batch=4))
    params = copy.model.params
    # an fp32 running copy plus θ0 and the EMA of every trained weight (bf16): at least 8 bytes per parameter more
    assert bema_result["memory"]["host_bytes"] - copy_result["memory"]["host_bytes"] >= 8 * params
    assert bema_result["memory"]["per_gpu_peak_bytes"] == copy_result["memory"]["per_gpu_peak_bytes"]  # a copy
    out = tmp_path / "b"
    generate(Request(model="1.5B", trainer="dpo", method="full", ref_model="bema", gpu="H200", gpus=1), out=str(out))
    src = (out / "train.py").read_text(encoding="utf-8")
    assert "from trl.experimental.bema_for_ref_model import BEMACallback, DPOTrainer" in src
    assert "callbacks.append(BEMACallback(update_ref_model=True))" in src
    assert "--bema-ref-model" not in src and _config(out)["ref_model"] == "bema"


def test_bema_is_refused_where_the_weights_are_sharded():
    with pytest.raises(AdvisorError, match="TRN015"):
        decide(Request(model="1.5B", trainer="dpo", method="full", ref_model="bema", gpu="H200", gpus=2,
                       backend="deepspeed", zero=3))


# ------------------------------------------------------------------------------------------------------- teacher

def test_gkd_needs_a_teacher_of_the_same_vocabulary():
    with pytest.raises(AdvisorError, match="needs --teacher"):
        decide(Request(model="0.5B", trainer="gkd", gpu="H200", gpus=1))
    with pytest.raises(AdvisorError, match="vocabulary"):
        decide(Request(model="0.5B", trainer="gkd", teacher="7B", gpu="H200", gpus=1))


def test_the_teacher_is_counted_and_written(tmp_path):
    small, r_small = decide(Request(model="0.5B", trainer="gkd", teacher="0.5B", gpu="H200", gpus=1, micro_batch=2))
    big, r_big = decide(Request(model="0.5B", trainer="gkd", teacher="1.5B", gpu="H200", gpus=1, micro_batch=2))
    teacher = resolve_model(Request(model="1.5B"))
    assert big.chosen.plan.teacher_params == teacher.params
    grown = r_big["memory"]["detail_bytes"]["reference_model"] - r_small["memory"]["detail_bytes"]["reference_model"]
    assert grown == (teacher.params - small.model.params) * 2  # bf16 weights of the larger teacher
    assert r_big["speed"]["breakdown_seconds"]["reference"] > r_small["speed"]["breakdown_seconds"]["reference"]
    out = tmp_path / "b"
    generate(Request(model="0.5B", trainer="gkd", teacher="1.5B", gpu="H200", gpus=1), out=str(out))
    assert _config(out)["teacher"] == teacher.hf_id
    assert (out / "teacher_config.json").is_file()
    assert '"teacher_config.json"' in (out / "train.py").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------------------------- Liger, headroom

def test_liger_goes_through_its_own_api_not_the_deprecated_flag(tmp_path):
    out = tmp_path / "b"
    generate(Request(model="0.5B", gpu="H100-80GB", gpus=1, liger=True), out=str(out))
    src = (out / "train.py").read_text(encoding="utf-8")
    assert "use_liger_kernel=" not in src and "apply_liger_kernels()" in src
    assert "from liger_kernel.transformers import apply_liger_kernel_to_qwen2 as apply" in src


def test_the_apply_functions_named_exist_in_liger():
    liger = pytest.importorskip("liger_kernel.transformers")
    from advisor.search.candidates import LIGER_MODEL_TYPES

    for model_type in LIGER_MODEL_TYPES:
        assert callable(getattr(liger, f"apply_liger_kernel_to_{model_type}", None)), model_type


def test_the_planner_keeps_the_headroom_its_own_rule_asks_for():
    """MEM002 warns below PLANNER_HEADROOM_FRACTION of the usable memory; no plan the planner picks may trigger it."""
    for req in (Request(model="7B", trainer="dpo", gpu="A100-80GB", gpus=2),
                Request(model="7B", gpu="RTX-4090", gpus=1, method="qlora"),
                Request(model="8B", gpu="H100-80GB", gpus=1), Request(model="1.5B", gpu="H200", gpus=1)):
        decision, result = decide(req)
        mem = result["memory"]
        assert mem["headroom_bytes"] >= calibration.PLANNER_HEADROOM_FRACTION * mem["gpu_capacity_bytes"], req
        assert not [f for f in result["findings"] if f["id"] == "MEM002"], req


# --------------------------------------------------------------------------------------------- pins that apply

@pytest.mark.parametrize("pins", [
    {"trainer": "sft", "vllm": "server"}, {"trainer": "dpo", "num_generations": 4},
    {"trainer": "sft", "ref_model": "copy"}, {"trainer": "dpo", "teacher": "1.5B"}, {"trainer": "dpo", "packing": True},
    {"trainer": "grpo", "ref_model": "precompute"}, {"trainer": "kto", "ref_model": "bema"},
    {"trainer": "sft", "method": "full", "lora_r": 8}, {"trainer": "sft", "backend": "ddp", "zero": 2},
    {"trainer": "grpo", "vllm": "colocate", "vllm_gpus": 2},
])
def test_a_pin_that_does_not_apply_is_a_usage_error(pins):
    with pytest.raises(AdvisorError) as err:
        decide(Request(model="0.5B", gpu="H200", gpus=4, **pins))
    assert err.value.exit_code == 2 and err.value.hint


def test_the_default_sft_dataset_is_the_one_the_rules_know():
    from advisor.bundle.render import DEFAULT_DATASETS

    assert DEFAULT_DATASETS["sft"][0] == DEFAULT_SFT_DATASET
