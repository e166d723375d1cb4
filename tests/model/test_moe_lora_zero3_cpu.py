"""LoRA on a MoE's experts under DeepSpeed ZeRO-3, the plan the search may pick for a MoE that does not fit one GPU:
PEFT's lora.ParamWrapper reads the expert stack in its own forward, before the experts' module runs, which would see
ZeRO-3's empty partitioned parameter if DeepSpeed did not gather it on access. Run on the CPU (DeepSpeed's CPU
accelerator, gloo, one process) with the installed transformers, peft and deepspeed: the experts' adapters must get
gradients and move, so the bundle needs no z3 leaf module for it (some trainers register one; it gives the same
losses here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("deepspeed")
pytest.importorskip("peft")

SCRIPT = textwrap.dedent("""
    import json, os, torch
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["TEST_PORT"], RANK="0", LOCAL_RANK="0",
                      WORLD_SIZE="1")
    import deepspeed
    deepspeed.init_distributed(dist_backend="gloo")
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig
    cfg = Qwen3MoeConfig(vocab_size=512, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                         num_experts=8, num_experts_per_tok=2)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model = get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", lora_dropout=0.0,
                                             task_type="CAUSAL_LM"))
    experts = [n for n, p in model.named_parameters() if ".experts." in n and "lora_B" in n]
    ds = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
          "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "torch_adam": True}}}
    engine, _, _, _ = deepspeed.initialize(model=model, config=ds,
                                           model_parameters=[p for p in model.parameters() if p.requires_grad])
    ids = torch.randint(0, 512, (2, 16))
    losses = []
    for _ in range(2):
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        engine.step()
        losses.append(float(loss))
    params = dict(engine.module.named_parameters())
    moved = []
    for name in experts:
        with deepspeed.zero.GatheredParameters([params[name]]):
            moved.append(float(params[name].detach().float().abs().sum()))
    print(json.dumps({"losses": losses, "expert_adapters": len(experts), "moved": moved}))
""")


def test_moe_expert_adapters_train_under_zero3_on_cpu(tmp_path):
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "TEST_PORT": str(29500 + os.getpid() % 400),
           "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["expert_adapters"] >= 2  # each layer's fused experts carry adapters (lora_B starts at zero)
    assert all(m > 0 for m in result["moved"]), result
    assert all(x == x and x > 0 for x in result["losses"]), result
