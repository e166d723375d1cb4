"""Batch shapes the bundles bound: PyTorch's cuDNN attention builds a graph per new shape, so the padded trainers'
batches are rounded to a multiple that divides seq_len, and transformers' generate runs without cuDNN attention."""

from __future__ import annotations

import ast

import pytest
from gen_cases import MODELS, plan, result, target

from advisor.bundle import render
from advisor.bundle.consistency import check_bundle_files, train_constants
from advisor.bundle.render import SHAPE_MULTIPLE, SHAPE_PADDED_TRAINERS, pad_to_multiple_of, render_bundle
from advisor.model.generation import generates_with_hf


def _files(**kw):
    p = plan(**kw)
    return p, render_bundle(p, MODELS["qwen2.5-1.5b"], target("H100-80GB", p.gpus_per_node, p.nodes), result(p))


@pytest.mark.parametrize("trainer", ["sft", "dpo", "kto", "grpo", "rloo", "gkd"])
@pytest.mark.parametrize("seq_len", [512, 1000, 2048, 4100, 65536])
@pytest.mark.parametrize("split", [dict(), dict(sp_size=4), dict(sp_size=8), dict(cp_size=2), dict(cp_size=3)])
def test_the_padding_multiple_never_lengthens_a_row_and_keeps_what_parallelism_needs(trainer, seq_len, split):
    kw = dict(trainer=trainer, seq_len=seq_len, **split)
    p = plan(**kw, **({"teacher": "qwen2.5-7b"} if trainer == "gkd" else {}))
    need = p.sp_size if p.sp_size > 1 else 2 * p.cp_size if p.cp_size > 1 else 1
    pad = pad_to_multiple_of(p)
    if trainer not in SHAPE_PADDED_TRAINERS or (trainer in ("grpo", "rloo") and need > 1):
        # GKD's collator takes no multiple (nor do GRPO/RLOO split sequences: rule SP015): what parallelism needs
        assert pad == (need if need > 1 else None)
        return
    if trainer in ("grpo", "rloo"):
        # prompts and completions are padded apart: the multiple divides each budget, so neither grows past it
        prompt, completion = seq_len - p.max_completion_len, p.max_completion_len
        if pad is None:
            assert all(prompt % m or completion % m for m in range(2, SHAPE_MULTIPLE + 1) if SHAPE_MULTIPLE % m == 0)
            return
        assert prompt % pad == 0 and completion % pad == 0 and 1 < pad <= SHAPE_MULTIPLE
        if prompt % SHAPE_MULTIPLE == 0 and completion % SHAPE_MULTIPLE == 0:
            assert pad == SHAPE_MULTIPLE
        return
    assert pad is not None and pad % need == 0
    if seq_len % need == 0:
        assert seq_len % pad == 0, "padding to the multiple would make a full-length row longer than seq_len"
    assert pad <= need * SHAPE_MULTIPLE
    if need == 1 and seq_len % SHAPE_MULTIPLE == 0:
        assert pad == SHAPE_MULTIPLE


@pytest.mark.parametrize("trainer", ["grpo", "rloo"])
def test_unsloth_generating_bundles_ask_no_multiple(trainer):
    # Unsloth compiles its own GRPO/RLOO trainer: its batching with a multiple is unmeasured
    p, files = _files(trainer=trainer, seq_len=2048, max_completion_len=256, vllm_mode="none", unsloth=True,
                      method="lora")
    assert pad_to_multiple_of(p) is None
    assert train_constants(files["train.py"])["CONFIG"]["pad_to_multiple_of"] is None
    assert "Unsloth" in render.pad_reason(p, None)


@pytest.mark.parametrize("trainer", ["sft", "dpo", "kto", "grpo", "rloo"])
def test_padded_trainers_write_the_multiple_and_say_why(trainer):
    p, files = _files(trainer=trainer, seq_len=2048, **({"max_completion_len": 256, "vllm_mode": "none"}
                                                       if trainer in ("grpo", "rloo") else {}))
    assert train_constants(files["train.py"])["CONFIG"]["pad_to_multiple_of"] == SHAPE_MULTIPLE
    # the trainer's config receives it (a CONFIG value nothing reads pads nothing)
    config_call = next(n for n in ast.walk(ast.parse(files["train.py"])) if isinstance(n, ast.Call)
                       and getattr(n.func, "id", "").endswith("Config") and any(
                           k.arg == "pad_to_multiple_of" for k in n.keywords))
    assert ast.unparse(next(k.value for k in config_call.keywords if k.arg == "pad_to_multiple_of")) == \
        "CONFIG['pad_to_multiple_of']"
    row = next(line for line in files["README.md"].splitlines() if line.startswith("| `pad_to_multiple_of`"))
    assert "cuDNN attention" in row and f"`{SHAPE_MULTIPLE}`" in row
    assert check_bundle_files(files) == []


GENERATING = [
    dict(trainer="grpo", vllm_mode="none"), dict(trainer="rloo", vllm_mode="none"), dict(trainer="gkd",
                                                                                        teacher="qwen2.5-7b"),
    dict(trainer="grpo", vllm_mode="colocate", vllm_mem_fraction=0.3, backend="ddp", num_processes=2,
         gpus_per_node=2),
    dict(trainer="grpo", vllm_mode="none", attn="flash_attention_2"),
    dict(trainer="sft"), dict(trainer="dpo", ref_model="copy"),
]


@pytest.mark.parametrize("kw", GENERATING, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_transformers_generate_runs_without_cudnn_attention_where_the_plan_uses_it(kw):
    p, files = _files(**kw)
    src = files["train.py"]
    want = generates_with_hf(p) and p.attn == "sdpa"
    tree = ast.parse(src)
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    called = any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "generate_without_cudnn_attention"
                 for n in ast.walk(main))
    assert called is want
    assert ("def generate_without_cudnn_attention" in src) is want
    assert check_bundle_files(files) == []


def test_the_wrapped_generate_runs_without_cudnn_attention_and_restores_it(monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.generation.utils import GenerationMixin

    _, files = _files(trainer="grpo", vllm_mode="none")
    fn = next(n for n in ast.parse(files["train.py"]).body
              if isinstance(n, ast.FunctionDef) and n.name == "generate_without_cudnn_attention")
    namespace: dict = {}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "train.py", "exec"), namespace)  # noqa: S102
    seen = []

    def generate(self, *args, **kwargs):
        seen.append((torch.backends.cuda.cudnn_sdp_enabled(), args, kwargs))
        return "tokens"

    monkeypatch.setattr(GenerationMixin, "generate", generate)
    namespace["generate_without_cudnn_attention"]()
    namespace["generate_without_cudnn_attention"]()  # a second call does not wrap twice
    assert GenerationMixin.generate.__wrapped__ is generate
    assert torch.backends.cuda.cudnn_sdp_enabled()
    assert GenerationMixin.generate(object(), 1, max_new_tokens=2) == "tokens"
    assert seen == [(False, (1,), {"max_new_tokens": 2})]
    assert torch.backends.cuda.cudnn_sdp_enabled()  # training's attention keeps cuDNN
