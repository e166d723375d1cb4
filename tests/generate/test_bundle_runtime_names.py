"""Names a bundle hands to the libraries at run time that a file check cannot see break only on the GPU: the
attention name DeepSpeed's Ulysses compares, the prompt length filter's tokenizer call, TRL's own model loads."""

from __future__ import annotations

import ast

import yaml

from advisor.cli import main
from advisor.resolve.attention import FLASH_ATTN_KERNEL


def _bundle(tmp_path, *args):
    out = tmp_path / "b"
    assert main(["generate", *args, "--out", str(out)]) == 0
    return out


def _config(bundle):
    tree = ast.parse((bundle / "train.py").read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CONFIG")
    return ast.literal_eval(node.value)


def test_ulysses_with_flash_attention_names_the_kernel_the_model_reports(tmp_path, capsys):
    """transformers loads flash_attention_2 as kernels-community/flash-attn2 without the flash-attn package (the
    bundle installs `kernels`, not flash-attn), and DeepSpeed's Ulysses refuses an sp_attn_implementation that
    differs from the model's: CONFIG (what load_model passes) and accelerate.yaml say the same name."""
    out = _bundle(tmp_path, "--model", "llama-3.1-8b", "--gpus", "8", "--gpu", "H100-80GB", "--backend",
                  "deepspeed", "--zero", "3", "--sp-size", "4", "--seq-len", "65536", "--attn", "flash_attention_2")
    acc = yaml.safe_load((out / "accelerate.yaml").read_text(encoding="utf-8"))
    assert _config(out)["attn"] == FLASH_ATTN_KERNEL
    assert acc["parallelism_config"]["parallelism_config_sp_attn_implementation"] == FLASH_ATTN_KERNEL
    assert "kernels" in (out / "requirements.txt").read_text(encoding="utf-8")
    assert "loaded as kernels-community/flash-attn2" in (out / "train.py").read_text(encoding="utf-8")


def test_the_prompt_filter_counts_tokens_not_dictionary_keys(tmp_path, capsys):
    """transformers 5's apply_chat_template(tokenize=True) returns a BatchEncoding unless return_dict=False: len()
    of it is 2, and every prompt passed the length filter."""
    out = _bundle(tmp_path, "--model", "0.5B", "--trainer", "grpo", "--gpus", "1", "--gpu", "H100-80GB")
    tree = ast.parse((out / "train.py").read_text(encoding="utf-8"))
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "prompts_that_fit")

    class Tokenizer:  # transformers 5's defaults: a dict unless return_dict=False
        def apply_chat_template(self, messages, add_generation_prompt, tokenize, return_dict=True):
            ids = list(range(sum(len(m["content"].split()) for m in messages)))
            return {"input_ids": ids, "attention_mask": ids} if return_dict else ids

        def __call__(self, text):
            return {"input_ids": text.split()}

    class Data(list):
        def filter(self, keep, desc=""):
            return Data(row for row in self if keep(row))

    namespace = {"PROMPT_TOKENS": 5, "Dataset": Data, "sys": __import__("sys")}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "train.py", "exec"), namespace)  # noqa: S102
    rows = Data([{"prompt": [{"role": "user", "content": "a b c"}]},
                 {"prompt": [{"role": "user", "content": " ".join("w" * 50)}]}])
    kept = namespace["prompts_that_fit"](rows, Tokenizer())
    assert len(kept) == 1 and kept[0]["prompt"][0]["content"] == "a b c"


def test_trust_remote_code_reaches_trls_own_model_loads(tmp_path, capsys):
    """RLOO/GRPO load their reference model and a colocated vLLM engine with args.trust_remote_code: the config
    must carry it when the user asked for remote code, and not mention it otherwise."""
    src = (_bundle(tmp_path, "--model", "0.5B", "--trainer", "rloo", "--gpus", "2", "--gpu", "H100-80GB",
                   "--vllm", "colocate", "--trust-remote-code") / "train.py").read_text(encoding="utf-8")
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "training_config")
    common = next(n.value for n in ast.walk(fn) if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") ==
                  "common")
    spread = [k.value for k in common.keywords if k.arg is None]
    # **({"trust_remote_code": TRUST_REMOTE_CODE} if TRUST_REMOTE_CODE else {}): evaluated with the bundle's constant
    values = [eval(compile(ast.Expression(v), "train.py", "eval"), {"TRUST_REMOTE_CODE": True}) for v in spread  # noqa: S307
              if "TRUST_REMOTE_CODE" in ast.unparse(v)]
    assert values == [{"trust_remote_code": True}]
    assert "TRUST_REMOTE_CODE = True" in src


def test_the_cpu_smoke_test_falls_back_to_an_attention_the_model_has(tmp_path, capsys):
    """`python train.py --cpu` replaces flash attention (a GPU kernel): by SDPA, or by eager for a model that has
    no SDPA path (Gemma 2 soft-caps its scores), which would raise at load."""
    gemma = (_bundle(tmp_path, "--model", "gemma-2-9b", "--gpus", "8", "--gpu", "H100-80GB") / "train.py").read_text(
        encoding="utf-8")
    assert 'attn = "eager"  # flash-attention kernels need a GPU, and gemma2 has no SDPA path' in gemma
    qwen = (_bundle(tmp_path / "q", "--model", "0.5B", "--gpus", "1", "--gpu", "H100-80GB", "--attn",
                    "flash_attention_2") / "train.py").read_text(encoding="utf-8")
    assert 'attn = "sdpa"  # flash-attention kernels need a GPU' in qwen
