"""End to end on CPU, for what issue 14 added: KTO (full with a reference copy, LoRA without), RLOO with its KL
reference, the model types beyond Qwen2/Llama (Gemma-2 with the attention the advisor chooses here, an MoE at a
reduced depth), and a Liger row, through `python -m bench.run --device cpu` (same parent, fork and child code as on
the GPU). Tiny versions of catalogue architectures; memory fields stay empty on CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.train

ROOT = Path(__file__).resolve().parents[2]


def tiny_arch(model_id: str, **changes) -> dict:
    from bench.models import arch_dict, resolve

    spec = resolve(model_id)
    base = dict(layers=2, hidden=64, intermediate=128 if spec.intermediate else 0, heads=4,
                kv_heads=4 if spec.heads == spec.kv_heads else 2, head_dim=16, vocab=512, max_positions=4096)
    if spec.is_moe:
        base.update(num_experts=4, experts_per_token=2, moe_intermediate=32)
    if spec.sliding_window:
        base.update(sliding_window=32)
    base.update(changes)
    arch = arch_dict(spec.with_(**base))
    arch["id"] = "tiny-" + model_id
    return arch


def tiny_row(name, arch, **kw):
    r = {"name": name, "model": arch["id"], "trainer": "sft", "method": "full", "lora_r": None, "seq_len": 64,
         "micro_batch": 2, "grad_accum": 1, "backend": "single", "zero": 0, "offload": "none", "grad_ckpt": True,
         "liger": False, "attn": None, "precision": "bf16", "num_generations": None, "max_completion_len": None,
         "ref_model": None, "beta": None, "arch": arch}
    r.update(kw)
    return r


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    pytest.importorskip("trl")
    q3 = tiny_arch("qwen3-1.7b")
    rows = [
        tiny_row("tiny-kto-full-ref-copy", q3, trainer="kto", ref_model="copy", micro_batch=4),
        tiny_row("tiny-kto-lora-no-ref", q3, trainer="kto", method="lora", lora_r=8, ref_model="none", micro_batch=4),
        tiny_row("tiny-rloo-beta005", q3, trainer="rloo", micro_batch=4, num_generations=2, max_completion_len=16,
                 beta=0.05),
        tiny_row("tiny-gemma2-auto-attn", tiny_arch("gemma-2-2b")),
        tiny_row("tiny-moe-reduced", tiny_arch("qwen3-30b-a3b", layers=3), layers=2),
        tiny_row("tiny-liger-on-cpu", q3, liger=True),
    ]
    tmp = tmp_path_factory.mktemp("bench-cpu-families")
    rows_file = tmp / "rows.json"
    rows_file.write_text(json.dumps(rows))
    out = tmp / "out.jsonl"
    cmd = [sys.executable, "-m", "bench.run", "--device", "cpu", "--rows-file", str(rows_file), "--out", str(out),
           "--steps", "2", "--warmup", "1"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = {r["name"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(recs) == {r["name"] for r in rows}
    return recs


def test_every_row_trains(records):
    for name, r in records.items():
        assert r["status"] == "ok", (name, r.get("error"), r.get("log_tail"))
        assert r["loss"]["finite"] and r["loss"]["values"], name
        assert r["data"]["sample_tokens"] == 64, (name, r["data"])
        # the config the child built has the catalogue's parameter count, checked on the meta device first
        assert r["model"]["params_meta"] == r["model"]["params_expected"], name
        assert r["model"]["config_fields"]["model_type"] == r["row"]["arch"]["model_type"]


def test_kto_reference_models_and_data(records):
    full, lora = records["tiny-kto-full-ref-copy"], records["tiny-kto-lora-no-ref"]
    assert full["resolved"]["trainer_class"] == "KTOTrainer" and full["resolved"]["config_class"] == "KTOConfig"
    assert full["resolved"]["ref_model"].startswith("explicit deepcopy")
    assert lora["resolved"]["ref_model"].startswith("none")
    for r in (full, lora):
        assert r["data"]["prompt_tokens"] == 32 and r["data"]["kl_tokens"] == 64  # KL pairs of the same length
        assert r["timing"]["tokens_per_step"] == 4 * 64
        assert r["resolved"]["args"]["max_length"] == 64


def test_rloo_loads_its_reference_from_the_saved_copy(records):
    r = records["tiny-rloo-beta005"]
    assert r["resolved"]["trainer_class"] == "RLOOTrainer" and r["resolved"]["ref_model_loaded"] is True
    assert r["resolved"]["args"]["beta"] == 0.05 and r["resolved"]["args"]["num_generations"] == 2
    lengths = [h["completions/mean_length"] for h in r["log_history"] if "completions/mean_length" in h]
    assert lengths and all(x == 16 for x in lengths)


def test_attention_is_the_advisors_choice_and_recorded(records):
    from bench import models as BM

    g = records["tiny-gemma2-auto-attn"]
    # these rows run on the CPU: FlashAttention is out whatever is installed (transformers >= 5.25 installs kernels)
    expected = BM.machine_attention({"attn": None, "precision": "bf16"}, BM.resolve("gemma-2-2b"), device="cpu")[0]
    assert expected == "eager"
    assert g["row"]["attn"] == expected and g["row"]["attn_why"].startswith(expected)
    assert g["model"]["attn_implementation"] == expected and g["model"]["attn_requested"] == expected
    q = records["tiny-kto-full-ref-copy"]
    assert q["row"]["attn"] == "sdpa" and q["model"]["attn_implementation"] == "sdpa"


def test_reduced_depth_is_built_and_recorded(records):
    r = records["tiny-moe-reduced"]
    assert r["row"]["layers"] == 2 and r["row"]["arch"]["layers"] == 2
    assert r["model"]["config_fields"]["num_hidden_layers"] == 2
    assert r["model"]["params"] == r["row"]["arch"]["params"]  # the reduced model, as the advisor will predict it


def test_liger_path_is_recorded(records):
    r = records["tiny-liger-on-cpu"]
    assert r["resolved"]["args"]["use_liger_kernel"] is False  # TRL's deprecated path stays off
    assert r["model"]["liger"]["applied"] is False and "cpu" in r["model"]["liger"]["why"]
