"""The child's plain-Python pieces and its data/tokenizer/DeepSpeed-config builders, on CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import matrix as M
from bench import worker as W

ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="module")
def rows():
    return M.build_matrix()


def by(rows, **kw):
    return [r for r in rows if all(r[k] == v for k, v in kw.items())]


def test_deepspeed_config_shape(rows):
    z2 = W.deepspeed_config(by(rows, backend="deepspeed", zero=2)[0])
    z3off = W.deepspeed_config(by(rows, backend="deepspeed", zero=3, offload="optimizer")[0])
    assert W.deepspeed_config(by(rows, backend="single")[0]) is None
    assert z2["zero_optimization"]["stage"] == 2 and "offload_optimizer" not in z2["zero_optimization"]
    assert z3off["zero_optimization"]["stage"] == 3
    assert z3off["zero_optimization"]["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    # every value the Trainer also sets is "auto", so the two can never disagree (transformers raises if they do)
    for key in ("train_micro_batch_size_per_gpu", "train_batch_size", "gradient_accumulation_steps",
                "gradient_clipping"):
        assert z2[key] == "auto"
    assert z2["bf16"] == {"enabled": "auto"}
    assert set(z2["optimizer"]["params"].values()) == {"auto"}
    # a row that asks for the bundles' client optimizer gets their ds_config: no optimizer block
    client = W.deepspeed_config({**by(rows, backend="deepspeed", zero=2)[0], "ds_optimizer": "client"})
    assert "optimizer" not in client and client["zero_optimization"] == z2["zero_optimization"]


def test_zero_sections_pass_deepspeed_validation(rows):
    zcfg = pytest.importorskip("deepspeed.runtime.zero.config")
    for r in by(rows, backend="deepspeed"):
        z = W.deepspeed_config(r)["zero_optimization"]
        parsed = zcfg.DeepSpeedZeroConfig(**z)  # extra="forbid": a misspelt key fails here
        assert parsed.stage == r["zero"]
        assert (parsed.offload_optimizer is not None) == (r["offload"] == "optimizer")


_FILL_SCRIPT = r"""
import copy, json, os, sys
os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
import trl
row, mb = json.loads(sys.argv[1]), int(sys.argv[2])
from bench import worker as W
args = trl.SFTConfig(output_dir="/tmp/bench-test", deepspeed=copy.deepcopy(W.deepspeed_config(row)), use_cpu=True,
                     per_device_train_batch_size=mb, gradient_accumulation_steps=2, max_steps=4, report_to="none")
hf = args.hf_deepspeed_config
print("RESULT" + json.dumps({"config": hf.config, "zero3": hf.is_zero3(), "offload": hf.is_offload()}))
"""


def test_trainer_arguments_fill_the_auto_values(rows):
    """TRL config + our ds_config as TrainingArguments(deepspeed=dict) (in a subprocess: it sets up a process group)."""
    pytest.importorskip("trl")
    r = by(rows, backend="deepspeed", zero=3, offload="optimizer")[0]
    row_json = json.dumps({k: r[k] for k in ("backend", "zero", "offload")})
    out = subprocess.run([sys.executable, "-c", _FILL_SCRIPT, row_json, str(r["micro_batch"])], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")]
    assert line, out.stderr[-2000:]
    got = json.loads(line[0][len("RESULT"):])
    filled = got["config"]
    assert filled["train_micro_batch_size_per_gpu"] == r["micro_batch"]
    assert filled["gradient_accumulation_steps"] == 2
    assert filled["train_batch_size"] == r["micro_batch"] * 2
    assert filled["bf16"]["enabled"] is True  # TRL's bf16 default
    assert got["zero3"] and got["offload"]


def test_ops_and_checkpoint_keys(rows):
    assert W.ds_ops_needed(by(rows, backend="deepspeed", offload="optimizer")[0]) == ["cpu_adam"]
    assert W.ds_ops_needed(by(rows, backend="deepspeed", offload="none")[0]) == ["fused_adam"]
    assert W.ds_ops_needed(by(rows, backend="single")[0]) == []
    q = by(rows, method="qlora", model="llama-3.1-8b")[0]
    assert W.ckpt_keys(q) == ["llama-3.1-8b-bf16"]
    g_ref = [r for r in by(rows, trainer="grpo") if r["beta"] > 0][0]
    g_noref = [r for r in by(rows, trainer="grpo") if r["beta"] == 0][0]
    assert W.ckpt_keys(g_ref) == [f"{g_ref['model']}-bf16"] and W.ckpt_keys(g_noref) == []
    # a reduced-depth row saves a checkpoint of its own depth: two depths of one model never share one
    assert W.ckpt_keys({**q, "layers": 4}) == ["llama-3.1-8b@L4-bf16"]
    assert W.ckpt_keys({**g_ref, "layers": 4}) != W.ckpt_keys({**g_ref, "layers": 8})


def test_lengths_and_tokens(rows):
    sft = by(rows, trainer="sft", grad_accum=4)[0]
    assert W.nominal_tokens_per_step(sft) == sft["micro_batch"] * 4 * sft["seq_len"]
    dpo = by(rows, trainer="dpo")[0]
    lens = W.dataset_lengths(dpo)
    assert lens["prompt"] + lens["completion"] == dpo["seq_len"]
    assert W.nominal_tokens_per_step(dpo) == 2 * dpo["micro_batch"] * dpo["seq_len"]
    g = by(rows, trainer="grpo")[0]
    assert W.dataset_lengths(g) == {"prompt": g["seq_len"] - g["max_completion_len"],
                                    "completion": g["max_completion_len"]}
    assert W.n_samples(g, 3) == g["micro_batch"] // g["num_generations"] * 3
    assert W.measured_steps(g, 5) == W.GRPO_MEASURED_STEPS and W.measured_steps(sft, 5) == 5


def test_error_helpers():
    try:
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB\nmore detail")
    except RuntimeError as exc:
        f = W.error_fields(exc)
        assert W.is_oom(exc)
    assert f["error"] == "RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB"
    assert "test_bench_worker.py" in f["error_where"] and "test_error_helpers" in f["error_where"]
    assert not W.is_oom(ValueError("shape mismatch"))


def test_tokenizer_and_synthetic_data_lengths():
    pytest.importorskip("transformers")
    pytest.importorskip("datasets")
    vocab = 512
    tok = W.build_tokenizer(vocab)
    sid = W.special_ids(vocab)
    assert tok.eos_token_id == sid["eos"] and tok.pad_token_id == sid["pad"] and len(tok) == vocab
    # specials split off a glued word (TRL appends "<eos>" to completions without a space)
    assert tok("t5 t7<eos>", add_special_tokens=False)["input_ids"] == [5, 7, sid["eos"]]
    base = dict(trainer="dpo", seq_len=64, micro_batch=2, grad_accum=1, num_generations=None,
                max_completion_len=None)
    ds = W.build_dataset(base, vocab, total_steps=2)
    ex = ds[0]
    prompt = tok(ex["prompt"], add_special_tokens=False)["input_ids"]
    chosen = tok(ex["prompt"] + ex["chosen"] + "<eos>", add_special_tokens=False)["input_ids"]
    assert len(ds) == 4 and len(chosen) == 64 and chosen[: len(prompt)] == prompt
    assert sid["unk"] not in chosen
    sft = W.build_dataset(dict(base, trainer="sft"), vocab, total_steps=2)
    assert {len(x) for x in sft["input_ids"]} == {64} and max(max(x) for x in sft["input_ids"]) < sid["unk"]
    grpo = W.build_dataset(dict(base, trainer="grpo", micro_batch=4, num_generations=2, max_completion_len=16),
                           vocab, total_steps=3)
    assert len(grpo) == 6 and len(tok(grpo[0]["prompt"])["input_ids"]) == 48


def test_reward_varies():
    assert W.distinct_words_reward(["a b c", "a a a"]) == [3.0, 1.0]


def test_clear_build_locks_removes_only_the_named_ops_locks(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    for op in ("fused_adam", "cpu_adam"):
        (tmp_path / op).mkdir()
        (tmp_path / op / "lock").write_text("")
    removed = W.clear_build_locks(["fused_adam"])
    assert removed == [str(tmp_path / "fused_adam" / "lock")]
    assert not (tmp_path / "fused_adam" / "lock").exists() and (tmp_path / "cpu_adam" / "lock").exists()
    assert W.clear_build_locks(["fused_adam"]) == []


def test_kto_and_rloo_pieces(rows):
    kto = by(rows, trainer="kto")[0]
    lens = W.dataset_lengths(kto)
    assert lens["prompt"] + lens["completion"] == kto["seq_len"]
    # the advisor's Plan.tokens_per_step counts each KTO sample once (its KL and reference passes are extra work)
    assert W.nominal_tokens_per_step(kto) == kto["micro_batch"] * kto["seq_len"]
    assert W.n_samples(kto, 4) == kto["micro_batch"] * 4 and W.ckpt_keys(kto) == []
    rloo = by(rows, trainer="rloo")[0]
    assert rloo["beta"] > 0 and W.ckpt_keys(rloo) == [f"{rloo['model']}-bf16"]  # its KL reference, loaded by name
    assert W.measured_steps(rloo, 5) == W.GRPO_MEASURED_STEPS
    assert W.dataset_lengths(rloo)["completion"] == rloo["max_completion_len"]


def test_row_steps_cap_the_measured_steps(rows):
    capped = [r for r in rows if r.get("steps")]
    assert capped and all(W.measured_steps(r, 3) == min(3, r["steps"]) for r in capped)
    assert all(r["backend"] != "deepspeed" for r in capped)  # ZeRO-3's second step is still slow: never cut those


def test_kto_data_is_balanced_and_exact():
    pytest.importorskip("datasets")
    vocab = 512
    tok = W.build_tokenizer(vocab)
    row = dict(trainer="kto", seq_len=64, micro_batch=4, grad_accum=1, num_generations=None, max_completion_len=None)
    ds = W.build_dataset(row, vocab, total_steps=2)
    assert len(ds) == 8 and sum(ds["label"]) == 4
    ex = ds[0]
    full = tok(ex["prompt"] + ex["completion"] + "<eos>", add_special_tokens=False)["input_ids"]
    assert len(full) == 64 and len(tok(ex["prompt"], add_special_tokens=False)["input_ids"]) == 32


def test_liger_follows_the_bundles():
    """The keyword arguments are the generated train.py's (its apply_liger_kernels `wanted` dict)."""
    import ast
    import re

    template = (Path(ROOT) / "advisor" / "bundle" / "templates" / "train.py.j2").read_text()
    wanted = re.search(r"wanted = (\{[^}]*\})", template)
    assert wanted and ast.literal_eval(wanted.group(1)) == W.LIGER_KWARGS
    assert W.liger_function_name("qwen3") == "apply_liger_kernel_to_qwen3"
    assert "apply_liger_kernel_to_{model.model_type}" in (Path(ROOT) / "advisor" / "bundle" / "render.py").read_text()
    assert W.apply_liger({"liger": False}, {"model_type": "qwen3"}, cuda=True) == {"applied": False, "path": None}
    cpu = W.apply_liger({"liger": True}, {"model_type": "qwen3"}, cuda=False)
    assert cpu["applied"] is False and "cpu" in cpu["why"]


def test_a_grpo_row_may_name_more_measured_steps_than_the_cap():
    # the plan-quality GRPO rows measure eight steps (two spread 9-25 %); other GRPO rows keep the cap of two
    g = {"trainer": "grpo", "generation_steps": 8}
    assert W.measured_steps(g, 3) == 8
    assert W.measured_steps({"trainer": "grpo"}, 3) == W.GRPO_MEASURED_STEPS
    assert W.measured_steps({"trainer": "sft", "generation_steps": 8}, 3) == 3
    from bench import matrix as M
    from bench import plan_quality as PQ

    rows = [r for r in PQ.build_rows() if r["trainer"] == "grpo"]
    assert rows and all(r["generation_steps"] == PQ.GRPO_STEPS == 8 for r in rows)

    assert M.validate([dict(rows[0], split="fit")]) == []
    assert M.validate([dict(rows[0], split="fit", trainer="sft", name="x")])  # only on GRPO/RLOO rows
