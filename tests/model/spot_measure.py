"""Spot measurement of a few SFT configurations (random-weight model), one process per configuration.

python tests/model/spot_measure.py OUT.jsonl NAME...   (NAME from CONFIGS; runs each in a child process)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

CONFIGS = {
    "q05-full-ckpt": dict(model="qwen2.5-0.5b", method="full", ckpt=True, seq=1024, mb=8),
    "q05-full-nockpt": dict(model="qwen2.5-0.5b", method="full", ckpt=False, seq=1024, mb=8),
    "q05-lora-nockpt": dict(model="qwen2.5-0.5b", method="lora", ckpt=False, seq=1024, mb=8),
    "q05-lora-ckpt": dict(model="qwen2.5-0.5b", method="lora", ckpt=True, seq=1024, mb=8),
    "q15-full-nockpt": dict(model="qwen2.5-1.5b", method="full", ckpt=False, seq=2048, mb=2),
    "q15-lora-nockpt-nodrop": dict(model="qwen2.5-1.5b", method="lora", ckpt=False, seq=2048, mb=2, dropout=0.0),
    "q15-lora-nockpt": dict(model="qwen2.5-1.5b", method="lora", ckpt=False, seq=2048, mb=2),
    "q05-full-ckpt-mb2": dict(model="qwen2.5-0.5b", method="full", ckpt=True, seq=1024, mb=2),
    "q05-full-nockpt-mb2": dict(model="qwen2.5-0.5b", method="full", ckpt=False, seq=1024, mb=2),
    "q05-full-ckpt-mb32": dict(model="qwen2.5-0.5b", method="full", ckpt=True, seq=1024, mb=32),
    "q15-full-ckpt": dict(model="qwen2.5-1.5b", method="full", ckpt=True, seq=2048, mb=2),
    "q05-full-ckpt-liger": dict(model="qwen2.5-0.5b", method="full", ckpt=True, seq=1024, mb=8, liger=True),
    "q05-full-ckpt-noreent": dict(model="qwen2.5-0.5b", method="full", ckpt=True, seq=1024, mb=8, reentrant=False),
    "q05-full-ckpt-reent": dict(model="qwen2.5-0.5b", method="full", ckpt=True, seq=1024, mb=8, reentrant=True),
    "q05-full-z2": dict(model="qwen2.5-0.5b", method="full", ckpt=False, seq=1024, mb=8, zero=2),
    "q05-full-z3": dict(model="qwen2.5-0.5b", method="full", ckpt=False, seq=1024, mb=8, zero=3),
    "q05-dpo-full-ckpt": dict(model="qwen2.5-0.5b", method="full", ckpt=True, seq=1024, mb=4, trainer="dpo"),
    "q15-dpo-lora-nockpt": dict(model="qwen2.5-1.5b", method="lora", ckpt=False, seq=1024, mb=2, trainer="dpo"),
    "tiny-cpu": dict(model="tiny", method="lora", ckpt=True, seq=64, mb=2),
    "tiny-cpu-dpo": dict(model="tiny", method="full", ckpt=True, seq=64, mb=2, trainer="dpo"),
    "tiny-cpu-z2": dict(model="tiny", method="full", ckpt=False, seq=64, mb=2, zero=2),
}


def child(name: str, out: str) -> None:
    import torch
    from datasets import Dataset
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config, TrainerCallback
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

    c = CONFIGS[name]
    cuda = torch.cuda.is_available()
    if c["model"] == "tiny":
        arch = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=512, tie_word_embeddings=True)
    else:
        from bench.models import FALLBACK
        f = FALLBACK[c["model"]]
        arch = dict(hidden_size=f["hidden"], intermediate_size=f["intermediate"], num_hidden_layers=f["layers"],
                    num_attention_heads=f["heads"], num_key_value_heads=f["kv_heads"], vocab_size=f["vocab"],
                    tie_word_embeddings=f["tied_embeddings"], max_position_embeddings=f["max_positions"])
    cfg = Qwen2Config(**arch, rms_norm_eps=1e-6, attn_implementation="sdpa", use_cache=False)
    vocab = arch["vocab_size"]
    tok = Tokenizer(models.WordLevel(vocab={f"t{i}": i for i in range(vocab)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="t1", eos_token="t2")
    g = torch.Generator().manual_seed(0)
    n = c["mb"] * 8
    ids = torch.randint(3, vocab, (n, c["seq"]), generator=g).tolist()
    ds = Dataset.from_dict({"input_ids": ids})
    trainer_kind = c.get("trainer", "sft")
    if trainer_kind == "dpo":
        half = c["seq"] // 2
        words = [" ".join(f"t{i}" for i in row) for row in ids]
        ds = Dataset.from_dict({"prompt": [" ".join(w.split(" ")[:half]) for w in words],
                                "chosen": [" ".join(w.split(" ")[half:]) for w in words],
                                "rejected": [" ".join(w.split(" ")[half:][::-1]) for w in words]})
    dev = "cuda" if cuda else "cpu"
    with torch.device(dev):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16 if cuda else torch.float32)
    peft_config = None
    if c["method"] == "lora":
        from peft import LoraConfig
        peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=c.get("dropout", 0.05),
                                 target_modules="all-linear", task_type="CAUSAL_LM")
    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if cuda:
                torch.cuda.synchronize()
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.t)

    extra = {}
    if c.get("zero"):
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29531")
        extra["deepspeed"] = {"zero_optimization": {"stage": c["zero"]}, "bf16": {"enabled": "auto"},
                              "train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
                              "gradient_accumulation_steps": "auto", "gradient_clipping": "auto"}
    if "reentrant" in c:
        extra["gradient_checkpointing_kwargs"] = {"use_reentrant": c["reentrant"]}
    if c.get("liger"):
        extra["use_liger_kernel"] = True
    config_cls = DPOConfig if trainer_kind == "dpo" else SFTConfig
    args = config_cls(output_dir="/tmp/spot", per_device_train_batch_size=c["mb"], gradient_accumulation_steps=1,
                     max_steps=6, **extra, max_length=c["seq"], gradient_checkpointing=c["ckpt"], bf16=cuda, use_cpu=not cuda,
                     report_to="none", logging_steps=100, save_strategy="no", dataloader_num_workers=0)
    if trainer_kind == "dpo":
        ref = None
        if c["method"] == "full":
            with torch.device(dev):
                ref = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16 if cuda else torch.float32)
        trainer = DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=ds, processing_class=tokenizer,
                             peft_config=peft_config, callbacks=[Timer()])
    else:
        trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tokenizer,
                             peft_config=peft_config, callbacks=[Timer()])
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    rec = {"name": name, **c,
           "peak_allocated_bytes": torch.cuda.max_memory_allocated() if cuda else None,
           "peak_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
           "step_seconds": sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else None,
           "step_times": times, "ckpt_kwargs": getattr(trainer.args, "gradient_checkpointing_kwargs", None)}
    with open(out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    print(json.dumps(rec), flush=True)


def main() -> None:
    out, names = sys.argv[1], sys.argv[2:]
    if os.environ.get("SPOT_CHILD"):
        child(names[0], out)
        return
    for name in names:
        env = dict(os.environ, SPOT_CHILD="1")
        r = subprocess.run([sys.executable, __file__, out, name], env=env, capture_output=True, text=True)
        if r.returncode:
            print(name, "FAILED", r.returncode, r.stderr[-3000:], flush=True)
        else:
            print(r.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
