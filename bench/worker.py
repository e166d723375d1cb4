"""One benchmark configuration, run in its own process: build the model, train a few steps, measure.

`run_config(row, ctx)` is the whole child. The parent (bench.runner) calls it in a forked process, so the training
stack is imported once and every configuration still starts with a fresh CUDA context and fresh peak counters;
`python -m bench.worker --job FILE` runs the same function in a fresh interpreter (the fallback when forking is
unsafe). Nothing here imports torch at module import time: the DeepSpeed config and the checkpoint keys are
plain-Python and tested on CPU.

What each configuration does, and why:
- Model: random weights from the catalogue architecture (`AutoConfig.for_model` on the fields the bundles write,
  advisor.bundle.render.model_config_fields; the skeleton is first built on the meta device and must give the
  catalogue's parameter count), built directly on the GPU (`from_config` under `torch.device`), in bf16 for precision
  "bf16" and in fp32 for "bf16-mixed" (TRL's bf16=True then autocasts), with the row's attention implementation
  (the advisor's choice on this machine, resolved by the parent: eager for Gemma-2 without flash-attn).
- Liger: as the bundles do, `liger_kernel.transformers.apply_liger_kernel_to_<model_type>(rope, rms_norm, swiglu or
  geglu; no cross-entropy kernels)` patches the modelling code before the model is built; TRL's deprecated
  `use_liger_kernel` stays off. The record says what was called and which Liger modules the model holds.
- QLoRA: quantisation happens only in `from_pretrained`, so a bf16 random model is saved once per architecture to
  a checkpoint folder (shared by later rows, removed by the parent) and loaded with a BitsAndBytesConfig.
- DeepSpeed: the model is built on the GPU before the TRL config exists, so no `zero.Init` runs; the Trainer's
  DeepSpeed integration converts (ZeRO-3: partitions) the ready model. With one process a partition is the whole
  tensor, so the steady state matches a `zero.Init` load; only the load-time peak could differ.
- DPO / KTO full: TRL would load the reference model by the policy's name, which a model built from a config lacks,
  so an explicit copy (`copy.deepcopy`) is passed as `ref_model`. LoRA passes none (adapters disabled = reference).
  KTO's data: prompt + completion = seq_len tokens, labels alternating desirable / undesirable.
- GRPO / RLOO with beta > 0: TRL always loads its reference model by name (`create_model_from_path`), so the policy is
  saved to a checkpoint folder first and its config points there. Generation on random weights is kept from
  crashing and from stopping early: `top_k=50`, `generation_kwargs={"min_new_tokens": C,
  "remove_invalid_values": True}` (every completion is exactly max_completion_len tokens; NaN/inf logits, if any,
  are replaced before sampling).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import random
import resource
import shutil
import socket
import statistics
import sys
import time
import traceback
from typing import Any

GIB = 1 << 30

LORA_ALPHA = 32
LORA_DROPOUT = 0.05
"""TRL's ModelConfig defaults (what `trl sft --use_peft` gives); dropout > 0 keeps extra activations per adapter."""

GRPO_TOP_K = 50
GRPO_MEASURED_STEPS = 2
"""GRPO/RLOO steps are dominated by token-by-token generation; two measured steps keep their rows affordable."""

GENERATING_TRAINERS = ("grpo", "rloo")
"""Trainers that sample completions inside each step (transformers' generate here: the machine has no vLLM)."""

LIGER_KWARGS = {"rope": True, "rms_norm": True, "swiglu": True, "geglu": True, "cross_entropy": False,
                "fused_linear_cross_entropy": False}
"""What the generated bundles pass to `liger_kernel.transformers.apply_liger_kernel_to_<model_type>` (train.py
apply_liger_kernels; each function takes the keys it knows: swiglu for the gated-SiLU models, geglu for Gemma).
Fused linear cross-entropy stays off: TRL's chunked LM head already keeps the logits out of memory, and TRL's
trainers refuse both at once."""

# Resolved TrainingArguments / TRL config values every record keeps (whatever exists on the config class).
RESOLVED_ARG_KEYS = (
    "per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing",
    "gradient_checkpointing_kwargs", "bf16", "fp16", "tf32", "use_liger_kernel", "liger_kernel_config", "optim",
    "learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm",
    "lr_scheduler_type", "warmup_steps", "max_steps", "seed", "dataloader_num_workers", "use_cpu",
    "torch_empty_cache_steps", "max_length", "packing", "padding_free", "pad_to_multiple_of", "loss_type",
    "completion_only_loss", "beta", "precompute_ref_log_probs", "num_generations", "max_completion_length",
    "generation_batch_size", "steps_per_generation", "num_iterations", "temperature", "top_k", "top_p",
    "generation_kwargs", "scale_rewards", "disable_dropout", "remove_unused_columns", "activation_offloading",
    "use_vllm", "ds3_gather_for_generation",
)


# ---------------------------------------------------------------------------------------------------------------
# Plain-Python pieces (no torch): tested on CPU.
# ---------------------------------------------------------------------------------------------------------------

def measured_steps(row: dict, steps: int) -> int:
    """Measured optimizer steps of a row: the run's --steps, or the row's own `steps` when it names fewer (a costly
    row), and at most GRPO_MEASURED_STEPS for the generating trainers unless the row names its own
    `generation_steps` (the plan-quality GRPO rows: their candidates differ by less than two steps' spread)."""
    if row.get("steps"):
        steps = min(steps, int(row["steps"]))
    if row["trainer"] not in GENERATING_TRAINERS:
        return steps
    return int(row["generation_steps"]) if row.get("generation_steps") else min(steps, GRPO_MEASURED_STEPS)


def liger_function_name(model_type: str) -> str:
    """The Liger entry point the bundles import for a catalogue model_type (advisor/bundle/render.py liger_apply)."""
    return f"apply_liger_kernel_to_{model_type}"


def deepspeed_config(row: dict) -> dict | None:
    """The ds_config dict passed as TrainingArguments(deepspeed=...). "auto" values are filled by transformers'
    HfTrainerDeepSpeedConfig from the TrainingArguments, so they can never disagree with them.

    The optimizer block asks DeepSpeed for its own AdamW (FusedAdam on the GPU, DeepSpeedCPUAdam when the optimizer
    is offloaded): the usual Hugging Face DeepSpeed setup, and the only one ZeRO-Offload accepts by default
    (`zero_force_ds_cpu_optimizer`). No scheduler block: the Trainer's own scheduler is used.
    """
    if row["backend"] != "deepspeed":
        return None
    zero: dict[str, Any] = {
        "stage": row["zero"],
        "contiguous_gradients": True,
        # DeepSpeed's own default per stage (DeepSpeedZeroConfig) unless the row names one; the bundles write true
        # (advisor.bundle.render ds_config), and advisor.model.bench_rows reads the same choice back
        "overlap_comm": bool(row.get("overlap_comm", row["zero"] == 3)),
        "reduce_bucket_size": "auto",
    }
    if row["zero"] == 3:
        zero.update({
            "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto",
            "stage3_gather_16bit_weights_on_model_save": False,
        })
    if row["offload"] == "optimizer":
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    cfg = {
        "train_micro_batch_size_per_gpu": "auto",
        "train_batch_size": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "bf16": {"enabled": "auto"},
        "fp16": {"enabled": "auto"},
        "optimizer": {"type": "AdamW",
                      "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
        "zero_optimization": zero,
        "steps_per_print": 1_000_000,  # keep DeepSpeed's own progress lines out of the log
        "wall_clock_breakdown": False,
    }
    if row.get("ds_optimizer") == "client":
        # as the bundles' ds_config.json: no optimizer block, so the Trainer's own optimizer (optim's default,
        # adamw_torch_fused) is handed to DeepSpeed as the client optimizer
        del cfg["optimizer"]
    return cfg


def ds_ops_needed(row: dict) -> list[str]:
    """JIT-compiled DeepSpeed ops a row loads (the parent builds them ahead, in the background)."""
    if row["backend"] != "deepspeed":
        return []
    return ["cpu_adam"] if row["offload"] == "optimizer" else ["fused_adam"]


def _ckpt_model(row: dict) -> str:
    """The checkpoint folder's model part: a reduced-depth row (`layers`) is another model than the full one, and
    two depths of one model must not share a saved checkpoint."""
    return f"{row['model']}@L{row['layers']}" if row.get("layers") else row["model"]


def ckpt_keys(row: dict) -> list[str]:
    """Checkpoint folders a row reads (and writes when missing), so the parent can delete each after its last use."""
    keys = []
    if row["method"] == "qlora":
        keys.append(f"{_ckpt_model(row)}-bf16")
    if row["trainer"] in GENERATING_TRAINERS and row["method"] == "full" and (row.get("beta") or 0) > 0:
        keys.append(f"{_ckpt_model(row)}-{'fp32' if row['precision'] == 'bf16-mixed' else 'bf16'}")
    return keys


def nominal_tokens_per_step(row: dict) -> int:
    """Tokens one optimizer step trains on, as the advisor's Plan.tokens_per_step counts them: DPO runs chosen and
    rejected; GRPO/RLOO count completions (prompt included); KTO counts each sample once (its KL and reference
    forwards are extra work, not extra tokens)."""
    seqs = row["micro_batch"] * row["grad_accum"] * (2 if row["trainer"] == "dpo" else 1)
    return seqs * row["seq_len"]


def dataset_lengths(row: dict) -> dict[str, int]:
    """Token lengths of one synthetic sample. DPO: prompt + chosen = prompt + rejected = seq_len, EOS included
    (TRL appends it to each completion); KTO: prompt + completion = seq_len, the same way. GRPO/RLOO: prompt +
    max_completion_len = seq_len."""
    s = row["seq_len"]
    if row["trainer"] in ("dpo", "kto"):
        completion = s // 2
        return {"prompt": s - completion, "completion": completion}
    if row["trainer"] in GENERATING_TRAINERS:
        c = row["max_completion_len"]
        return {"prompt": s - c, "completion": c}
    return {"input_ids": s}


def n_samples(row: dict, total_steps: int) -> int:
    per_step = row["micro_batch"] * row["grad_accum"]
    if row["trainer"] in GENERATING_TRAINERS:
        # each prompt is repeated num_generations times by TRL's sampler
        return max(1, per_step // row["num_generations"]) * total_steps
    return per_step * total_steps


def special_ids(vocab: int) -> dict[str, int]:
    """Special tokens sit at the top of the model's vocabulary; data words use ids below them."""
    return {"unk": vocab - 4, "bos": vocab - 3, "pad": vocab - 2, "eos": vocab - 1}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple | set):
        return [_jsonable(v) for v in x]
    if isinstance(x, float):
        return x if math.isfinite(x) else repr(x)
    if x is None or isinstance(x, bool | int | str):
        return x
    if hasattr(x, "value") and isinstance(x.value, str | int):  # enums
        return x.value
    return str(x)


def error_fields(exc: BaseException) -> dict[str, Any]:
    """First line of the message, the last traceback frame, and the last few frames for context."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = None
    if frames:
        f = frames[-1]
        where = f"{f.filename}:{f.lineno} in {f.name}: {f.line}"
    text = str(exc).strip().splitlines()
    return {
        "error": f"{type(exc).__name__}: {text[0] if text else ''}",
        "error_where": where,
        "error_trace": [f"{f.filename}:{f.lineno} in {f.name}" for f in frames[-6:]],
    }


def is_oom(exc: BaseException) -> bool:
    name = type(exc).__name__
    return name == "OutOfMemoryError" or "out of memory" in str(exc).lower()


class Recorder:
    """The record under construction. Written to `partial_path` at each phase and step, so a configuration killed
    by the parent's timeout still reports what it measured."""

    def __init__(self, partial_path: str | None):
        self.partial_path = partial_path
        self.result: dict[str, Any] = {"status": "error", "phase": "start", "memory": {}, "timing": {},
                                       "model": {}, "resolved": {}, "data": {}, "loss": {}}

    def phase(self, name: str) -> None:
        self.result["phase"] = name
        self.result.setdefault("phase_started", {})[name] = round(time.monotonic() - self.t0, 3)
        self.flush()

    def start(self) -> None:
        self.t0 = time.monotonic()

    def flush(self) -> None:
        if not self.partial_path:
            return
        tmp = f"{self.partial_path}.tmp"
        with open(tmp, "w") as f:
            json.dump(_jsonable(self.result), f)
        os.replace(tmp, self.partial_path)


# ---------------------------------------------------------------------------------------------------------------
# The child (imports the training stack inside functions).
# ---------------------------------------------------------------------------------------------------------------

def visible_gpu_index(environ=None) -> int:
    """NVML index of the GPU a row runs on: the first entry of CUDA_VISIBLE_DEVICES when it is a plain index (a
    harness pinned to one GPU of a larger machine, with CUDA_DEVICE_ORDER=PCI_BUS_ID so both orders agree), else 0."""
    spec = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES", "")
    first = spec.split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def _nvml_handle():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(visible_gpu_index())
    except Exception:  # no NVML: the NVML fields stay null
        return None, None


def _nvml_used(nvml) -> int | None:
    mod, h = nvml
    if h is None:
        return None
    try:
        return int(mod.nvmlDeviceGetMemoryInfo(h).used)
    except Exception:
        return None


def build_tokenizer(vocab: int):
    """A word-level tokenizer over the whole model vocabulary: "t<i>" is token i, specials at the top. Words are
    split on whitespace only, and the specials are registered as special tokens, so "t5<eos>" is two tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    sid = special_ids(vocab)
    words = {f"t{i}": i for i in range(sid["unk"])}
    words.update({"<unk>": sid["unk"], "<bos>": sid["bos"], "<pad>": sid["pad"], "<eos>": sid["eos"]})
    tk = Tokenizer(models.WordLevel(vocab=words, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<pad>")


def build_dataset(row: dict, vocab: int, total_steps: int, seed: int = 0):
    """Synthetic data of exactly the row's token counts (see dataset_lengths)."""
    from datasets import Dataset

    rng = random.Random(seed)
    top = special_ids(vocab)["unk"]
    n = n_samples(row, total_steps)
    lens = dataset_lengths(row)

    def words(k: int) -> str:
        return " ".join(f"t{rng.randrange(top)}" for _ in range(k))

    if row["trainer"] == "sft":
        return Dataset.from_dict({"input_ids": [[rng.randrange(top) for _ in range(lens["input_ids"])]
                                                for _ in range(n)]})
    if row["trainer"] == "dpo":
        c = lens["completion"] - 1  # TRL appends "<eos>" to chosen and rejected
        # completions start with a space: TRL tokenizes prompt + completion as one string
        return Dataset.from_dict({"prompt": [words(lens["prompt"]) for _ in range(n)],
                                  "chosen": [" " + words(c) for _ in range(n)],
                                  "rejected": [" " + words(c) for _ in range(n)]})
    if row["trainer"] == "kto":
        c = lens["completion"] - 1  # KTOTrainer appends "<eos>" to each completion (kto_trainer.py add_eos)
        # labels alternate, so desirable and undesirable examples are balanced (no weight warning) and every
        # micro-batch holds both kinds
        return Dataset.from_dict({"prompt": [words(lens["prompt"]) for _ in range(n)],
                                  "completion": [" " + words(c) for _ in range(n)],
                                  "label": [i % 2 == 0 for i in range(n)]})
    return Dataset.from_dict({"prompt": [words(lens["prompt"]) for _ in range(n)]})


def distinct_words_reward(completions, **kwargs) -> list[float]:
    """A cheap reward that varies between completions (so advantages are not all zero)."""
    return [float(len(set(c.split())) % 7) for c in completions]


def _count_params(model) -> tuple[int, int]:
    """(total, trainable), counting ZeRO-3 partitioned params by ds_numel and 4-bit params by their real shape."""
    total = trainable = 0
    seen = set()
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        if hasattr(p, "ds_numel"):
            n = int(p.ds_numel)
        elif getattr(p, "quant_state", None) is not None:
            n = int(p.quant_state.shape.numel())
        else:
            n = p.numel()
        total += n
        if p.requires_grad:
            trainable += n
    return total, trainable


def _optimizer_info(trainer) -> dict[str, Any]:
    info: dict[str, Any] = {}
    opt = getattr(trainer, "optimizer", None)
    engine = getattr(trainer, "model_wrapped", None)
    basic = getattr(engine, "basic_optimizer", None)
    if basic is not None:
        info["deepspeed_wrapper"] = type(getattr(engine, "optimizer", None)).__name__
        inner = basic
    else:
        inner = getattr(opt, "optimizer", opt)
    info["class"] = type(inner).__name__ if inner is not None else None
    try:
        for st in inner.state.values():
            if "exp_avg" in st:
                info["exp_avg_dtype"] = str(st["exp_avg"].dtype)
                info["exp_avg_device"] = str(st["exp_avg"].device)
                break
    except Exception:
        pass
    return info


def liger_apply_call(model_type: str) -> dict[str, Any]:
    """Patch transformers' modelling code for `model_type` with Liger's kernels, as the bundles' train.py does
    before it builds the model: `apply_liger_kernel_to_<model_type>(**LIGER_KWARGS)`, keeping the keys the
    function accepts. Returns what was called. Patches module globals, so only a child process may call it."""
    import inspect

    import liger_kernel.transformers as liger

    name = liger_function_name(model_type)
    fn = getattr(liger, name)
    accepted = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in LIGER_KWARGS.items() if k in accepted}
    fn(**kwargs)
    return {"path": f"liger_kernel.transformers.{name}", "kwargs": kwargs}


def apply_liger(row: dict, arch: dict, cuda: bool) -> dict[str, Any]:
    """Liger for a row, before its model exists; what ran is recorded. The catalogue's model_type names the
    function, as in the bundles (advisor/bundle/render.py liger_apply). On the CPU nothing is patched: Liger's
    Triton kernels need a GPU (the bundles' --cpu skips them too)."""
    if not row.get("liger"):
        return {"applied": False, "path": None}
    if not cuda:
        return {"applied": False, "path": None, "why": "cpu: Liger's Triton kernels need a GPU"}
    return {"applied": True, **liger_apply_call(arch["model_type"])}


def _liger_modules(model) -> dict[str, int]:
    """Modules of the built model whose class is Liger's (LigerRMSNorm, LigerSwiGLUMLP, ...): proof that the
    patch reached the model."""
    counts: dict[str, int] = {}
    for m in model.modules():
        name = type(m).__name__
        if name.startswith("Liger"):
            counts[name] = counts.get(name, 0) + 1
    return counts


def _ensure_checkpoint(root: str, key: str, save) -> tuple[str, bool]:
    """A saved random-weight model under root/key, written once (atomically) and reused by later rows."""
    path = os.path.join(root, key)
    if os.path.exists(os.path.join(path, ".complete")):
        return path, False
    tmp = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    save(tmp)
    open(os.path.join(tmp, ".complete"), "w").close()
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)
    return path, True


def run_config(row: dict, ctx: dict) -> dict:
    """Run one configuration; always returns a record (status ok / oom / error), never raises."""
    rec = Recorder(ctx.get("partial_path"))
    rec.start()
    res = rec.result
    res["device"] = ctx.get("device", "cuda")
    try:
        _run(row, ctx, rec)
        res["status"] = "ok"
    except BaseException as exc:  # a record must come back whatever happened
        res.update(error_fields(exc))
        res["status"] = "oom" if is_oom(exc) else "error"
        res["failed_phase"] = res.get("phase")
        torch = sys.modules.get("torch")
        if torch is not None and res["device"] == "cuda" and torch.cuda.is_initialized():
            # the peak since the last reset: how far this phase got before it failed
            mem = res["memory"]
            with contextlib.suppress(Exception):
                mem["failed_phase_peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
                mem["failed_phase_peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
                mem["peak_allocated_bytes"] = max(mem.get("peak_allocated_bytes") or 0,
                                                  mem["failed_phase_peak_allocated_bytes"])
                mem["peak_reserved_bytes"] = max(mem.get("peak_reserved_bytes") or 0,
                                                 mem["failed_phase_peak_reserved_bytes"])
    finally:
        res["child_seconds"] = round(time.monotonic() - rec.t0, 3)
        res["host_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        rec.flush()
    return _jsonable(res)


def _run(row: dict, ctx: dict, rec: Recorder) -> None:
    res = rec.result
    device = ctx.get("device", "cuda")
    cuda = device == "cuda"
    steps, warmup = int(ctx.get("steps", 3)), int(ctx.get("warmup", 1))
    steps = measured_steps(row, steps)
    # a profiled step (row "profile_step") runs after the measured ones and stays out of their timing
    profiled = bool(row.get("profile_step"))
    total_steps = warmup + steps + (1 if profiled else 0)
    arch = row["arch"]

    rec.phase("import")
    import torch
    import transformers
    import trl
    from transformers import AutoModelForCausalLM, TrainerCallback

    from bench.models import hf_config, hf_config_kwargs

    transformers.logging.set_verbosity_warning()

    ds_cfg = deepspeed_config(row)
    if ds_cfg is not None:
        # one process, rank 0: what a launcher would set; the port is free so that back-to-back rows never clash
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))

    rec.phase("cuda_init")
    nvml = (None, None)
    mem = res["memory"]
    if cuda:
        torch.cuda.set_device(0)
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # creates the context now, not inside a measured phase
        torch.cuda.synchronize()
        nvml = _nvml_handle()
        mem["nvml_used_after_context_bytes"] = _nvml_used(nvml)
        props = torch.cuda.get_device_properties(0)
        res["gpu"] = {"name": props.name, "total_bytes": int(props.total_memory),
                      "capability": f"{props.major}.{props.minor}"}
        with contextlib.suppress(Exception):
            res["gpu"]["driver"] = nvml[0].nvmlSystemGetDriverVersion() if nvml[0] else None

    rec.phase("data")
    torch.manual_seed(0)
    vocab = arch["vocab"]
    tok = build_tokenizer(vocab)
    dataset = build_dataset(row, vocab, total_steps)
    res["data"]["samples"] = len(dataset)
    res["data"]["nominal"] = dataset_lengths(row)

    rec.phase("build")
    t_build = time.monotonic()
    dtype = torch.float32 if row["precision"] == "bf16-mixed" else torch.bfloat16
    model_type, cfg_fields = hf_config_kwargs(arch, special_ids=special_ids(vocab))
    cfg = hf_config(arch, special_ids=special_ids(vocab))
    res["model"]["config_fields"] = {"model_type": model_type, **cfg_fields}
    # The transformers on the GPU machine may differ from the one model_config_fields was written against: build
    # the skeleton on the meta device (no memory, milliseconds) and refuse a config that does not give the
    # catalogue's parameter count, before anything is measured.
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(cfg)
    res["model"]["params_meta"] = sum(p.numel() for p in skeleton.parameters())
    del skeleton
    if arch.get("params") and res["model"]["params_meta"] != arch["params"]:
        raise ValueError(f"{model_type} config gives {res['model']['params_meta']} parameters, the catalogue "
                         f"{arch['params']}: the config fields do not express this architecture")
    attn = row.get("attn") or "sdpa"
    res["model"]["liger"] = apply_liger(row, arch, cuda)
    cfg_ckpt_root = ctx.get("ckpt_dir") or os.path.join(ctx.get("workdir", "/tmp"), "ckpt")
    os.makedirs(cfg_ckpt_root, exist_ok=True)
    build_how = f"from_config on {device}, dtype {str(dtype).removeprefix('torch.')}, random weights"
    ref_model = None
    peft_config = None

    def save_random(path: str, save_dtype) -> None:
        torch.manual_seed(0)
        with torch.device(device):
            m = AutoModelForCausalLM.from_config(cfg, dtype=save_dtype, attn_implementation=attn)
        m.save_pretrained(path)
        del m
        if cuda:
            torch.cuda.empty_cache()

    if row["method"] == "qlora":
        from transformers import BitsAndBytesConfig

        t0 = time.monotonic()
        path, wrote = _ensure_checkpoint(cfg_ckpt_root, f"{_ckpt_model(row)}-bf16",
                                         lambda p: save_random(p, torch.bfloat16))
        res["model"]["checkpoint_saved_seconds"] = round(time.monotonic() - t0, 3) if wrote else None
        if cuda:
            torch.cuda.reset_peak_memory_stats()  # the bf16 model built only to be saved is not part of the load
        bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                 bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_quant_storage=torch.bfloat16)
        t0 = time.monotonic()
        model = AutoModelForCausalLM.from_pretrained(path, quantization_config=bnb, dtype=torch.bfloat16,
                                                     device_map={"": 0} if cuda else None,
                                                     attn_implementation=attn)
        res["model"]["load_seconds"] = round(time.monotonic() - t0, 3)
        build_how = "from_pretrained(saved random bf16 checkpoint, BitsAndBytesConfig nf4 + double quant)"
        res["resolved"]["quantization"] = {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                                           "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16",
                                           "bnb_4bit_quant_storage": "bfloat16",
                                           "prepare_model_for_kbit_training": False}
    else:
        torch.manual_seed(0)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=attn)
    if row["method"] in ("lora", "qlora"):
        from peft import LoraConfig

        # a MoE's experts are adapted by lora.ParamWrapper, which refuses any dropout (peft 0.21
        # tuners/lora/layer.py); the generated bundle sets 0 for a MoE the same way
        dropout = 0.0 if arch.get("num_experts") else LORA_DROPOUT
        peft_config = LoraConfig(r=row["lora_r"], lora_alpha=LORA_ALPHA, lora_dropout=dropout,
                                 target_modules="all-linear", task_type="CAUSAL_LM")
        res["resolved"]["lora"] = {"r": row["lora_r"], "lora_alpha": LORA_ALPHA, "lora_dropout": dropout,
                                   "target_modules": "all-linear"}
    if row["trainer"] in ("dpo", "kto") and row.get("ref_model") == "copy":
        ref_model = copy.deepcopy(model)
        res["resolved"]["ref_model"] = "explicit deepcopy of the policy (same dtype, same device)"
    elif row["trainer"] in ("dpo", "kto"):
        res["resolved"]["ref_model"] = "none (PEFT: adapters disabled)"
    if row["trainer"] in GENERATING_TRAINERS and (row.get("beta") or 0) > 0 and row["method"] == "full":
        key = f"{_ckpt_model(row)}-{'fp32' if dtype == torch.float32 else 'bf16'}"
        t0 = time.monotonic()
        path, wrote = _ensure_checkpoint(cfg_ckpt_root, key, model.save_pretrained)
        res["model"]["checkpoint_saved_seconds"] = round(time.monotonic() - t0, 3) if wrote else None
        model.config._name_or_path = path  # TRL loads the reference model from here (create_model_from_path)
        res["resolved"]["ref_model"] = (f"loaded by {row['trainer'].upper()}Trainer from a saved checkpoint "
                                        "(device_map auto)")
    if cuda:
        torch.cuda.synchronize()
        mem["after_build_allocated_bytes"] = torch.cuda.memory_allocated()
        mem["load_peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        mem["load_peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        mem["peak_allocated_bytes"] = mem["load_peak_allocated_bytes"]
        mem["peak_reserved_bytes"] = mem["load_peak_reserved_bytes"]
        torch.cuda.reset_peak_memory_stats()
    res["model"].update(build=build_how, dtype=str(next(model.parameters()).dtype).removeprefix("torch."),
                        attn_implementation=getattr(model.config, "_attn_implementation", None),
                        attn_requested=attn, attn_why=row.get("attn_why"),
                        experts_implementation=getattr(model.config, "_experts_implementation", None),
                        liger_modules=_liger_modules(model),
                        model_type=model.config.model_type, config_class=type(cfg).__name__,
                        build_seconds=round(time.monotonic() - t_build, 3),
                        zero3_init="none: the model is built before the DeepSpeed config exists; the Trainer's "
                                   "DeepSpeed integration partitions it" if ds_cfg and row["zero"] == 3 else None)

    rec.phase("trainer_init")
    t_init = time.monotonic()
    common: dict[str, Any] = dict(
        output_dir=os.path.join(ctx.get("workdir", "/tmp"), "out-" + row["name"]),
        max_steps=total_steps,
        per_device_train_batch_size=row["micro_batch"],
        gradient_accumulation_steps=row["grad_accum"],
        gradient_checkpointing=row["grad_ckpt"],
        bf16=True,
        # Liger, when the row asks for it, was applied to the modelling code before the build (apply_liger), as
        # the bundles do; TRL's own use_liger_kernel is deprecated in 1.16 and stays off
        use_liger_kernel=False,
        report_to="none",
        save_strategy="no",
        # every step goes to trainer.state.log_history (no reporter): it is where the loss values come from
        logging_strategy="steps",
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        use_cpu=not cuda,
    )
    if ds_cfg is not None:
        common["deepspeed"] = copy.deepcopy(ds_cfg)
    timing = res["timing"]
    callback = _make_callback(TrainerCallback, torch, cuda, nvml, rec, warmup,
                              profile_at=total_steps - 1 if profiled else None)
    trainer_kwargs: dict[str, Any] = dict(model=model, train_dataset=dataset, processing_class=tok,
                                          callbacks=[callback])
    if peft_config is not None:
        trainer_kwargs["peft_config"] = peft_config
    if row["trainer"] == "sft":
        args = trl.SFTConfig(**common, max_length=row["seq_len"], packing=False)
        trainer = trl.SFTTrainer(args=args, **trainer_kwargs)
    elif row["trainer"] == "dpo":
        args = trl.DPOConfig(**common, max_length=row["seq_len"])
        trainer = trl.DPOTrainer(ref_model=ref_model, args=args, **trainer_kwargs)
    elif row["trainer"] == "kto":
        args = trl.KTOConfig(**common, max_length=row["seq_len"])
        trainer = trl.KTOTrainer(ref_model=ref_model, args=args, **trainer_kwargs)
    elif row["trainer"] in GENERATING_TRAINERS:
        c = row["max_completion_len"]
        config_cls, trainer_cls = ((trl.GRPOConfig, trl.GRPOTrainer) if row["trainer"] == "grpo" else
                                   (trl.RLOOConfig, trl.RLOOTrainer))
        args = config_cls(**common, max_completion_length=c, num_generations=row["num_generations"],
                          beta=float(row["beta"] or 0.0), top_k=GRPO_TOP_K,
                          generation_kwargs={"min_new_tokens": c, "remove_invalid_values": True})
        trainer = trainer_cls(reward_funcs=distinct_words_reward, args=args, **trainer_kwargs)
    else:
        raise ValueError(f"unknown trainer {row['trainer']!r}")
    del model, ref_model
    _time_phases(trainer, callback)
    timing["trainer_init_seconds"] = round(time.monotonic() - t_init, 3)
    res["resolved"]["trainer_class"] = type(trainer).__name__
    res["resolved"]["config_class"] = type(args).__name__
    res["resolved"]["args"] = {k: getattr(args, k) for k in RESOLVED_ARG_KEYS if hasattr(args, k)}
    _record_data(row, trainer, tok, res)

    # the host's dispatch speed before and after the steps (it drifts on a shared host): launch-bound rows follow it
    from bench.host_probe import host_cpus, host_probe
    res["host_cpus"] = host_cpus(torch)
    res["host_probe"] = {"before": host_probe(torch)}
    rec.phase("train_setup")
    history = cuda and bool(row.get("memory_history"))
    if history:  # bench.memory_peak: what is alive at the peak (slows allocations: never a timed row)
        from bench.memory_peak import HISTORY_ENTRIES
        torch.cuda.memory._record_memory_history(max_entries=HISTORY_ENTRIES)
    t_train = time.monotonic()
    trainer.train()
    timing["train_seconds"] = round(time.monotonic() - t_train, 3)
    if cuda:
        torch.cuda.synchronize()
    if history:
        from bench.memory_peak import live_at_peak
        res["memory_peak"] = live_at_peak(torch.cuda.memory._snapshot())
        torch.cuda.memory._record_memory_history(enabled=None)
    res["host_probe"]["after"] = host_probe(torch)

    rec.phase("collect")
    total, trainable = _count_params(trainer.model)
    res["model"]["params"] = total
    res["model"]["trainable_params"] = trainable
    res["model"]["params_expected"] = arch.get("params")
    res["resolved"]["optimizer"] = _optimizer_info(trainer)
    res["resolved"]["args"]["gradient_checkpointing_kwargs"] = trainer.args.gradient_checkpointing_kwargs
    if ds_cfg is not None:
        hf_ds = getattr(trainer.args, "hf_deepspeed_config", None)
        res["resolved"]["deepspeed"] = copy.deepcopy(getattr(hf_ds, "config", None))
    if row["trainer"] in GENERATING_TRAINERS:
        res["resolved"]["generation_kwargs_used"] = getattr(trainer, "generation_kwargs", None)
        res["resolved"]["ref_model_loaded"] = getattr(trainer, "ref_model", None) is not None
    history = [h for h in trainer.state.log_history if isinstance(h, dict)]
    losses = [h["loss"] for h in history if "loss" in h]
    res["loss"] = {"values": losses, "finite": bool(losses) and all(math.isfinite(v) for v in losses)}
    res["log_history"] = history
    step_s = timing.get("step_seconds", [])[warmup:]
    timing["measured_steps"] = len(step_s)
    timing["median_step_seconds"] = statistics.median(step_s) if step_s else None
    tokens = nominal_tokens_per_step(row)
    timing["tokens_per_step"] = tokens
    if timing["median_step_seconds"]:
        timing["tokens_per_second"] = tokens / timing["median_step_seconds"]
    if cuda:
        mem["end_allocated_bytes"] = torch.cuda.memory_allocated()
        mem["torch_total_bytes"] = int(torch.cuda.get_device_properties(0).total_memory)
        with contextlib.suppress(Exception):
            mem["nvml_total_bytes"] = int(nvml[0].nvmlDeviceGetMemoryInfo(nvml[1]).total) if nvml[1] else None


def _record_data(row: dict, trainer, tok, res: dict) -> None:
    """Token counts as TRL prepared them (not as intended): proves each sample is exactly seq_len tokens."""
    data = res["data"]
    try:
        first = trainer.train_dataset[0]
        if row["trainer"] == "sft":
            data["sample_tokens"] = len(first["input_ids"])
        elif row["trainer"] == "dpo":
            p = len(first["prompt_ids"])
            data["prompt_tokens"] = p
            data["chosen_tokens"] = p + len(first["chosen_ids"])
            data["rejected_tokens"] = p + len(first["rejected_ids"])
            data["sample_tokens"] = max(data["chosen_tokens"], data["rejected_tokens"])
        elif row["trainer"] == "kto":
            p = len(first["prompt_ids"])
            data["prompt_tokens"] = p
            data["sample_tokens"] = p + len(first["completion_ids"])
            if "KL_completion_ids" in first:
                data["kl_tokens"] = p + len(first["KL_completion_ids"])
        else:
            data["prompt_tokens"] = len(tok(first["prompt"], add_special_tokens=False)["input_ids"])
            data["sample_tokens"] = data["prompt_tokens"] + row["max_completion_len"]
    except Exception as exc:  # recording must not fail the run
        data["error"] = f"{type(exc).__name__}: {exc}"


def _time_phases(trainer, callback) -> None:
    """Host time of each micro-batch's compute_loss (the forward, up to and including TRL's metric .item() syncs) and
    accelerator.backward call (the backward's dispatch: it returns once the host has queued the kernels), by perf_counter
    around the calls, no synchronisation added: the step's timing is what it was. The callback folds them into
    timing["phases"] per step (_fold_phases). A step the host sets shows backward host time close to the step less the
    forward; one the GPU sets shows the step's end waiting on the GPU (wait_after_backward)."""
    events = callback.phase_events

    def timed(fn, kind):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                events.append((kind, t0, time.perf_counter()))
        return wrapper

    trainer.compute_loss = timed(trainer.compute_loss, "forward")
    trainer.accelerator.backward = timed(trainer.accelerator.backward, "backward")


def _fold_phases(events: list[tuple[str, float, float]], t_begin: float, t_end: float) -> dict[str, float]:
    """One step's phases from its (kind, start, end) events: summed host seconds of the forwards and of the backward
    calls, the micro-batches counted, and the time from the last backward's return to the synchronised step end (the
    optimizer step, clipping and the GPU's queue draining)."""
    fwd = sum(b - a for k, a, b in events if k == "forward")
    bwd = sum(b - a for k, a, b in events if k == "backward")
    last = max((b for k, _, b in events if k == "backward"), default=t_begin)
    return {"forward_host_s": round(fwd, 6), "backward_host_s": round(bwd, 6),
            "micro_batches": sum(1 for k, _, _ in events if k == "backward"),
            "wait_after_backward_s": round(t_end - last, 6), "step_s": round(t_end - t_begin, 6)}


def _make_callback(base, torch, cuda: bool, nvml, rec: Recorder, warmup: int, profile_at: int | None = None):
    """Per-step wall time (synchronised at both ends) and peak memory per phase and per optimizer step.

    Peak counters are reset after the model is built, at train begin (after the DeepSpeed engine and optimizer
    exist) and at each step begin, so the record separates load, setup and step peaks; their maximum is what one
    unreset torch.cuda.max_memory_allocated() would have shown.

    `profile_at`: the optimizer step (0-based) run under torch.profiler (CUDA kernels only): its kernels by kind and
    name go to the record's "profile" (bench.kernel_probe's summary), its wall time there too and not into the step
    times, which the profiler's own host work would slow.
    """
    res = rec.result
    mem, timing = res["memory"], res["timing"]
    timing.setdefault("step_seconds", [])
    timing.setdefault("iter_seconds", [])

    class BenchCallback(base):
        def __init__(self):
            super().__init__()
            self.phase_events: list[tuple[str, float, float]] = []  # filled by _time_phases' wrappers

        def on_train_begin(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
                mem["setup_peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
                mem["setup_peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
                mem["after_setup_allocated_bytes"] = torch.cuda.memory_allocated()
                mem["peak_allocated_bytes"] = max(mem.get("peak_allocated_bytes", 0), mem["setup_peak_allocated_bytes"])
                mem["peak_reserved_bytes"] = max(mem.get("peak_reserved_bytes", 0), mem["setup_peak_reserved_bytes"])
                torch.cuda.reset_peak_memory_stats()
            rec.phase("train")
            self.t_last = time.perf_counter()

        def on_step_begin(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            self.phase_events.clear()
            self.prof = None
            if profile_at is not None and state.global_step == profile_at:
                from torch.profiler import ProfilerActivity, profile

                self.prof = profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU])
                self.prof.start()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            if self.prof is not None:
                from bench.kernel_probe import _kernel_stats

                self.prof.stop()
                res["profile"] = {"step": profile_at, "wall_s": round(t1 - self.t0, 4), **_kernel_stats(self.prof)}
                self.prof = None
                self.t_last = time.perf_counter()
                return
            timing["step_seconds"].append(t1 - self.t0)
            timing.setdefault("phases", []).append(_fold_phases(self.phase_events, self.t0, t1))
            timing["iter_seconds"].append(t1 - self.t_last)  # includes data fetch and logging of the last step
            self.t_last = t1
            if cuda:
                a, r = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
                mem.setdefault("step_peak_allocated_bytes", []).append(a)
                mem.setdefault("step_peak_reserved_bytes", []).append(r)
                mem["train_peak_allocated_bytes"] = max(mem.get("train_peak_allocated_bytes", 0), a)
                mem["train_peak_reserved_bytes"] = max(mem.get("train_peak_reserved_bytes", 0), r)
                mem["peak_allocated_bytes"] = max(mem.get("peak_allocated_bytes", 0), a)
                mem["peak_reserved_bytes"] = max(mem.get("peak_reserved_bytes", 0), r)
                used = _nvml_used(nvml)
                if used is not None:
                    mem["nvml_used_peak_bytes"] = max(mem.get("nvml_used_peak_bytes", 0), used)
            res["steps_done"] = len(timing["step_seconds"])
            rec.flush()

    return BenchCallback()


def prebuild_ops(names: list[str]) -> dict[str, float]:
    """JIT-build DeepSpeed ops (nvcc + ninja) ahead of the rows that load them; CPU work only, no CUDA context."""
    from deepspeed.ops.op_builder import CPUAdamBuilder, FusedAdamBuilder

    builders = {"fused_adam": FusedAdamBuilder, "cpu_adam": CPUAdamBuilder}
    out = {}
    for n in names:
        t0 = time.monotonic()
        builders[n]().load(verbose=False)
        out[n] = round(time.monotonic() - t0, 1)
        print(f"built {n} in {out[n]} s", flush=True)
    return out


def clear_build_locks(ops: list[str]) -> list[str]:
    """Remove the lock files of torch's JIT extension builds for these ops. A build killed midway (a row's timeout,
    the end of the budget) leaves its lock behind, and every later load of that op would wait on it for ever.
    Only call this while nothing is building them."""
    from torch.utils import cpp_extension

    removed = []
    for op in ops:
        try:
            lock = os.path.join(cpp_extension._get_build_directory(op, False), "lock")
        except Exception:  # private helper: if it moved, leave the locks alone
            continue
        if os.path.exists(lock):
            os.unlink(lock)
            removed.append(lock)
    return removed


# ---------------------------------------------------------------------------------------------------------------
# Fresh-interpreter entry point (the parent's fallback when forking after the imports is not safe).
# ---------------------------------------------------------------------------------------------------------------

def resolve_callable(spec: str):
    module, _, attr = spec.partition(":")
    import importlib

    return getattr(importlib.import_module(module), attr)


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m bench.worker", description="run one benchmark job file")
    p.add_argument("--job", required=True, help="JSON: {row, ctx, result_path, child, sys_path}")
    a = p.parse_args(argv)
    with open(a.job) as f:
        job = json.load(f)
    for d in reversed(job.get("sys_path") or []):
        sys.path.insert(0, d)
    fn = resolve_callable(job.get("child") or "bench.worker:run_config")
    result = fn(job["row"], job["ctx"])
    tmp = job["result_path"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, job["result_path"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
