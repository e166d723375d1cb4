"""The generated train.py really trains: two steps on the CPU with a tiny random model built from the bundle's
model_config.json (no download), a synthetic dataset and the local word-level tokenizer. Checks the metrics file
`verify` reads: one line per step and a finite loss."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import time

import pytest
from gen_cases import MODELS, plan, result, target

from advisor.bundle.render import render_bundle
from advisor.bundle.write import write_bundle

pytestmark = [
    pytest.mark.train,
    pytest.mark.skipif(importlib.util.find_spec("trl") is None, reason="needs the [train] extra (trl, torch)"),
]

TINY = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 512, "head_dim": 16}

CASES = {
    "sft": dict(trainer="sft", seq_len=64, micro_batch=2, grad_accum=1),
    "sft-lora-packing": dict(trainer="sft", method="lora", packing=True, seq_len=64, micro_batch=2, grad_accum=2),
    "dpo": dict(trainer="dpo", ref_model="copy", seq_len=64, micro_batch=2, grad_accum=1),
    "grpo": dict(trainer="grpo", seq_len=48, micro_batch=2, grad_accum=1, num_generations=2, max_completion_len=16),
    "kto": dict(trainer="kto", method="lora", seq_len=64, micro_batch=2, grad_accum=1),
    "rloo": dict(trainer="rloo", method="lora", seq_len=48, micro_batch=2, grad_accum=1, num_generations=2,
                 max_completion_len=16),
    # full fine-tuning with beta > 0: TRL builds the reference model itself, from the checkpoint's config.json
    "rloo-full-ref": dict(trainer="rloo", ref_model="copy", seq_len=48, micro_batch=2, grad_accum=1,
                          num_generations=2, max_completion_len=16),
    # the same under FSDP2: train.py hands TRL the path and the policy's load arguments (device_map None), since
    # TRL would load the reference with device_map "auto" on every process (rloo_trainer.py sets None for DDP and
    # DeepSpeed only)
    "rloo-full-ref-fsdp2": dict(trainer="rloo", ref_model="copy", backend="fsdp2", seq_len=48, micro_batch=2,
                                grad_accum=1, num_generations=2, max_completion_len=16),
    # GKD with its own teacher (a random model of the teacher's architecture, from teacher_config.json)
    "gkd": dict(trainer="gkd", ref_model="copy", teacher="Qwen/Qwen2.5-0.5B", teacher_params=494032768, seq_len=64,
                micro_batch=2, grad_accum=2, max_completion_len=16),
    # the same under FSDP2: the teacher is sharded with TRL's prepare_fsdp once the trainer exists (GKDTrainer leaves
    # it where it was loaded); a CPU run has no FSDP, and that step stays out of its way
    "gkd-fsdp2": dict(trainer="gkd", ref_model="copy", backend="fsdp2", teacher="Qwen/Qwen2.5-0.5B",
                      teacher_params=494032768, seq_len=64, micro_batch=2, grad_accum=2, max_completion_len=16),
    # DPO whose reference follows the policy by BEMA (the experimental DPOTrainer and BEMACallback)
    "dpo-bema": dict(trainer="dpo", ref_model="bema", seq_len=64, micro_batch=2, grad_accum=1),
    # DPO with reference log-probs scored before training (no reference copy)
    "dpo-precompute": dict(trainer="dpo", ref_model="precompute", seq_len=64, micro_batch=2, grad_accum=1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_train_two_steps_on_cpu(name, tmp_path):
    p = plan(**CASES[name])
    out = tmp_path / "bundle"
    write_bundle(render_bundle(p, MODELS["qwen2.5-1.5b"], target(), result(p)), str(out), force=False)
    if p.backend == "fsdp2" and p.trainer in ("grpo", "rloo") and p.method == "full":
        assert "config.model_init_kwargs = model_kwargs(args)" in (out / "train.py").read_text()
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               CUDA_VISIBLE_DEVICES="", HF_HOME=str(tmp_path / "hf"),
               PYTHONWARNINGS="always::DeprecationWarning,always::FutureWarning")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "train.py", "--cpu", "--max-steps", "2", "--random-init", "--synthetic-data",
         "--config-overrides", json.dumps(TINY)],
        cwd=out, env=env, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the generated code uses no deprecated name of the pinned stack (TRL's use_liger_kernel, transformers'
    # gradient_checkpointing, ...): no deprecation warning raised from those libraries' own modules
    deprecated = [line for line in proc.stderr.splitlines() if ("DeprecationWarning" in line or "FutureWarning" in line)
                  and any(f"site-packages/{lib}/" in line for lib in ("trl", "transformers", "peft", "accelerate"))]
    assert not deprecated, deprecated[:3]
    records = [json.loads(line) for line in (out / "metrics" / "rank0.jsonl").read_text().splitlines()]
    steps = [r for r in records if r["event"] == "step"]
    assert [r["step"] for r in steps] == [1, 2]
    assert all(r["step_seconds"] > 0 and r["host_peak_rss_bytes"] > 0 for r in steps)
    if p.trainer == "gkd":
        # each step says how many of its micro-batches generated on-policy (verify sets the step against them):
        # GKDTrainer draws random.random() <= lmbda (0.5) per micro-batch, after the Trainer seeds Python's random
        # with the bundle's seed (42: draws 0.64, 0.03, 0.28, 0.22)
        assert [r["on_policy_micro_batches"] for r in steps] == [1, 2]
    else:
        assert all("on_policy_micro_batches" not in r for r in steps)
    losses = [r["loss"] for r in records if r["event"] == "log" and "loss" in r]
    assert losses and all(math.isfinite(x) for x in losses)
    assert records[0]["event"] == "start" and records[-1]["event"] == "end"
    # a bounded run (--max-steps without --no-save) keeps what it trained, as a full run does
    saved = {f.name for f in (out / "output").iterdir()}
    assert saved & {"config.json", "adapter_config.json"}, saved
    # the random weights were written once, as an ordinary checkpoint with the overridden architecture
    checkpoints = [d for d in (out / "random-init").iterdir() if d.is_dir()]
    assert len(checkpoints) == (2 if p.trainer == "gkd" else 1)  # GKD: the student and its teacher
    for ckpt in checkpoints:
        config = json.loads((ckpt / "config.json").read_text())
        assert config["hidden_size"] == 64 and config["num_hidden_layers"] == 2
        assert config["architectures"] == ["Qwen2ForCausalLM"]
    print(f"{name}: {seconds:.1f} s")


SYNTHETIC_PROMPTS = """
import json, sys
sys.argv = ["train.py", "--cpu", "--random-init", "--synthetic-data", "--config-overrides", sys.argv[1]]
import train
args = train.parse_args(sys.argv[1:])
tok = train.build_tokenizer(args)
data = train.synthetic_dataset(args, tok, 8)
print(json.dumps(sorted({len(tok(p)["input_ids"]) for p in data["prompt"]})))
"""


@pytest.mark.parametrize("trainer", ["grpo", "rloo"])
def test_synthetic_prompts_differ_in_length_so_batches_are_padded_as_real_ones(trainer, tmp_path):
    # a real GRPO/RLOO batch is padded (prompts of different lengths, completions ending at their own EOS) and its
    # attention carries a mask the memory estimate counts (advisor.model.activations.padding_mask): the synthetic
    # prompts of `verify --synthetic-data` are padded too, at most the plan's prompt length
    p = plan(**{**CASES[trainer], "micro_batch": 4, "num_generations": 2})
    out = tmp_path / "bundle"
    write_bundle(render_bundle(p, MODELS["qwen2.5-1.5b"], target(), result(p)), str(out), force=False)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               CUDA_VISIBLE_DEVICES="", HF_HOME=str(tmp_path / "hf"))
    proc = subprocess.run([sys.executable, "-c", SYNTHETIC_PROMPTS, json.dumps(TINY)], cwd=out, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lengths = json.loads(proc.stdout.strip().splitlines()[-1])
    prompt = p.seq_len - p.max_completion_len
    assert len(lengths) == 2 and max(lengths) <= prompt and max(lengths) - min(lengths) == 1, lengths
