"""Render a plan into a bundle: train.py, accelerate.yaml, ds_config.json, launch.sh, slurm.sbatch,
requirements.txt, README.md, plan.json and model_config.json, as file name -> text.

`render_bundle` is pure: the same plan, model, target and result give the same bytes (no timestamps, sorted keys),
so reference bundles compare byte for byte. Every value is encoded for its file's language, and the rendered files
are parsed back (advisor.bundle.selfcheck) before anyone may write them (advisor.bundle.write).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shlex
import sys
import types
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import jinja2

from advisor import __version__
from advisor.bundle import peak
from advisor.core.errors import AdvisorError
from advisor.core.plan import Plan
from advisor.core.request import GENERATING_TRAINERS, Request, text_problem
from advisor.core.safeio import shell_path
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.model import calibration
from advisor.model.generation import generates_with_hf
from advisor.model.padded_data import padded_data_memory
from advisor.model.vllm_memory import SERVER_MEM_FRACTION, engine_need, server_parallelism
from advisor.resolve import DEFAULT_VLLM_MEM_FRACTION
from advisor.resolve.attention import SDPA_UNSUPPORTED, choose_attention, flash_obstacles
from advisor.search.candidates import LIGER_MODEL_TYPES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

GIB = 1 << 30

_RELEASE = re.compile(r"[0-9]+(\.[0-9]+){1,3}")
"""An exact release as pins.toml writes one (1.16.0): what the templates may print as the bundle's TRL."""


def trl_release(environment: dict) -> tuple[str, str]:
    """(release, series) of the TRL the bundle pins ("1.15.0", "1.15" for Unsloth's environment, "1.16.0", "1.16"
    otherwise): train.py's header, README.md and requirements.txt name the TRL of the bundle's own requirements.txt,
    never a constant beside it. Validated before it is written (pins.toml is data)."""
    version = environment.get("trl")
    if not isinstance(version, str) or not _RELEASE.fullmatch(version):
        raise ValueError(f"render_bundle: the pinned trl {version!r} is not an exact release (rules/data/pins.toml)")
    return version, ".".join(version.split(".")[:2])

# Default training data per trainer: TRL's own example datasets on the Hub (trl-lib), each in the format that
# trainer reads, so `bash launch.sh` works before the user brings data. Value: (hub id, why).
DEFAULT_DATASETS: dict[str, tuple[str, str]] = {
    "sft": ("trl-lib/Capybara", "TRL's SFT example: multi-turn conversations in a `messages` column"),
    "dpo": ("trl-lib/ultrafeedback_binarized", "TRL's DPO example: chosen/rejected conversation pairs"),
    "kto": ("trl-lib/kto-mix-14k", "TRL's KTO example: prompt, completion and a desirable/undesirable label"),
    "grpo": ("trl-lib/DeepMath-103K", "TRL's GRPO example: math prompts in chat format (103k; `solution` column)"),
    "rloo": ("trl-lib/DeepMath-103K", "the GRPO example's prompt set: RLOO reads the same prompt-only format"),
    "gkd": ("trl-lib/chatbot_arena_completions", "TRL's GKD example: chat `messages` the student and teacher score"),
}

# config.json values the catalogue does not record, per model_type, from the reference model's config.json. Used for
# --random-init only (the real run reads the hub config); per-model variants (Llama 3.2 RoPE scaling, Phi-4's
# rope_theta 250000, SmolLM2's) do not change memory or speed, which is what random-init runs measure.
MODEL_TYPE_DEFAULTS: dict[str, dict] = {
    "llama": {"rope_theta": 500000.0, "rms_norm_eps": 1e-05,
              "source": "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"},
    "qwen2": {"rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
              "source": "https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json"},
    "qwen3": {"rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
              "source": "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json"},
    "qwen3_moe": {"rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
                  "source": "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json"},
    "mistral": {"rope_theta": 1000000.0, "rms_norm_eps": 1e-05,
                "source": "https://huggingface.co/mistralai/Mistral-7B-v0.3/blob/main/config.json"},
    "mixtral": {"rope_theta": 1000000.0, "rms_norm_eps": 1e-05,
                "source": "https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json"},
    "gemma2": {"rope_theta": 10000.0, "rms_norm_eps": 1e-06,
               "source": "https://huggingface.co/google/gemma-2-9b/blob/main/config.json"},
    "gemma3_text": {"rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
                    "source": "https://huggingface.co/google/gemma-3-1b-pt/blob/main/config.json"},
    "phi3": {"rope_theta": 10000.0, "rms_norm_eps": 1e-05,
             "source": "https://huggingface.co/microsoft/Phi-3-mini-4k-instruct/blob/main/config.json"},
}
RANDOM_INIT_MODEL_TYPE = {"gemma3": "gemma3_text"}
"""Multimodal model_types whose catalogue rows describe the text decoder: random-init builds that decoder alone."""

VLLM_HOST = "127.0.0.1"
"""Only the main training process talks to the server (trl/generation/vllm_client.py), and it runs on node 0."""
VLLM_PORT = 8000  # GRPOConfig.vllm_server_port default, and vLLM's
VLLM_STARTUP_TIMEOUT_S = 900  # first start downloads and compiles (CUDA graphs): minutes for 70B-class models
RENDEZVOUS_MARGIN_S = 300  # a multi-node vLLM-server plan's other nodes wait at the rendezvous for the server's
# start plus this: node 0's own accelerate/torchrun start and model load before it joins (a 70B checkpoint's shards)
VLLM_HEALTH_POLL_S = 2  # seconds between /health probes: VLLMClient.check_server's own retry_interval (2.0)
VLLM_SCALE_OUT_SINCE = "0.30.0"  # trl/scripts/vllm_serve.py adds --enable-scale-out from this vLLM release
# Seconds launch.sh gives the vLLM server and the training to exit after SIGTERM before it sends SIGKILL. torchrun's
# agent gives its workers 30 s after SIGTERM (torch.distributed.elastic PContext.close(timeout=30)) and starts them in
# sessions of their own (start_new_session), so it must outlive that wait or the workers are left behind; vLLM gives
# each of its workers 5 s (VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS).
STOP_TIMEOUT_S = 45
MAIN_PROCESS_PORT = 29500  # accelerate launch --main_process_port default
NVME_PATH = "/local_nvme"  # DeepSpeed's documented example path; README tells the user to point it at their NVMe
CPUS_PER_GPU = 8  # SLURM --cpus-per-task per GPU: dataloader workers + tokenizer threads (DGX H100: 112 cores / 8)

BUNDLE_ORDER = ("README.md", "plan.json", "train.py", "accelerate.yaml", "ds_config.json", "launch.sh",
                "slurm.sbatch", "requirements.txt", "model_config.json", "teacher_config.json")


# --------------------------------------------------------------------------------------------------- Jinja setup

class UnsafeValueError(AdvisorError):
    """A value cannot be written safely into a generated file (exit 2, CONTRACT.md)."""


class Block(str):
    """Text the generator itself assembled over several lines (train.py's CONFIG rows), each part of which was
    checked or encoded where it was made: the one kind of interpolated value allowed to hold newlines."""


def _finalize(value):
    """Every `{{ ... }}` of every template passes here: a value with a newline or another control character would
    end a comment line (`# For: ...`) and start a command, a statement or a YAML key, so it is refused unless it is
    a Block. Encoding for the position (shquote, pyrepr, json, pydoc, slug) is the template's job on top of this."""
    if value is None or isinstance(value, (bool, int, float, Block)):
        return value
    text = str(value)
    problem = text_problem(text)
    if problem:
        shown = text[:60].encode("unicode_escape").decode("ascii")
        raise UnsafeValueError(f"the value {shown!r} {problem}: it cannot be written safely into the bundle",
                               hint="remove control characters and newlines from the flags and folder names")
    return text


def _shquote(value) -> str:
    """One shell word, whatever the value (shlex.quote; booleans as 0/1 are never needed, so refuse them)."""
    if isinstance(value, bool):
        raise TypeError("shquote: pass a string or number, not a bool")
    return shlex.quote(str(value))


def _pyrepr(value) -> str:
    """A Python literal (repr); floats keep repr's shortest round-trip form."""
    return repr(value)


def _pydoc(value) -> str:
    """Text inside a Python \"\"\" docstring: backslashes and quotes escaped, so that no value can close the
    docstring (`\"\"\"`) or start an escape sequence; the docstring reads the same."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"')


def _slug(value) -> str:
    """A single word of letters, digits, `.`, `_` and `-` (SLURM job names: sbatch splits `#SBATCH` lines on
    whitespace, so a space in a value would add an option)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(value)).strip("-") or "x"


# What starts Markdown (CommonMark + GFM) inline syntax in the middle of a line: raw HTML, autolinks (<) and
# entities (&), links and images ([ ]), code spans (`), emphasis (*), table cells (|), strikethrough (~), math ($),
# escapes (\). Values never begin a line of the README, so the line-start constructs (lists, headings, quotes) need
# nothing, and `>` starts nothing without a `<` (a finding's `9.0a -> 9.0` stays as written).
_MD_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", **{c: "\\" + c for c in "\\`*[]|~$#!"}})
# `_` emphasises only where it is not between two letters or digits (CommonMark's flanking rules): `max_length`
# and `flash_attention_2` read as they are, `_x_` is escaped.
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _md(value) -> str:
    """Text in README prose, a heading or a table cell: every character that could start a tag, a link, a code
    span or emphasis is escaped, so a model folder named `<img ...>` or `[x](javascript:...)` reads as its name.
    Ordinary ids (`Qwen/Qwen2.5-7B`, `H100-80GB`) hold none of them and read the same."""
    return _MD_UNDERSCORE.sub(r"\\_", str(value).translate(_MD_ESCAPES))


def _mdcode(value) -> str:
    """A value as one Markdown code span (CommonMark 6.1): a fence of more backticks than the longest run inside,
    padded with a space where the value starts or ends with a backtick (else it would join the fence) or with a
    space on both sides (else the parser strips one from the value)."""
    text = str(value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[:1] == "`" or text[-1:] == "`" or (text[:1] == " " and text[-1:] == " ") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _mdcell(value) -> str:
    """A code span in a GFM table cell: the table splits cells at `|` before any code span is read, even inside one,
    so each `|` is written `\\|` (GFM 4.10). A value holding `\\|` itself cannot be written so (the cell scanner
    reads `\\\\` as an escape and splits at the pipe): it is escaped as text instead."""
    text = str(value)
    if not text:
        return "(none)"  # an empty code span is two backticks a reader cannot tell from a typo
    if "\\|" in text:
        return _md(text)
    return _mdcode(text).replace("|", "\\|")


# A code span as the generator's sentences write one: non-empty (an empty pair's fence would join its neighbour's
# into a longer run, and leave that neighbour's content outside any span), with no backtick inside.
_MD_AUTHORED_CODE = re.compile(r"`([^`]+)`")


def _mdprose(value, cell: bool = False) -> str:
    """The generator's own sentences with values inside (a finding, a reason): the `code` spans they were written
    with stay code spans, rebuilt by _mdcode (their content literal), and the rest is escaped (_md). A backtick in
    a value may pair differently, but every piece is still escaped text or a one-backtick code span (two side by
    side read as one span, still literal). `cell`: in a table row."""
    text, out, start = str(value), [], 0
    for span in _MD_AUTHORED_CODE.finditer(text):
        out.append(_md(text[start:span.start()]))
        out.append(_mdcell(span.group(1)) if cell else _mdcode(span.group(1)))
        start = span.end()
    out.append(_md(text[start:]))
    return "".join(out)


class _TemplateCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept between runs (compiling the six takes about 45 ms, loading them 1 ms): jinja2's own
    cache, keyed by template name and source checksum, in a folder of the user's. Each file starts with the SHA-256
    of the rest, so a file that bit rot, a full disk or another program changed is not run: its code would write the
    bundle (a changed string constant in a cached template is a changed line in launch.sh). A cache that cannot be
    read, does not match its digest or does not hold a code object is no cache: the templates are compiled again."""

    def load_bytecode(self, bucket) -> None:
        try:
            with open(self._get_cache_filename(bucket), "rb") as f:
                blob = f.read()
            digest, payload = blob[:TEMPLATE_DIGEST_BYTES], blob[TEMPLATE_DIGEST_BYTES:]
            if len(blob) <= TEMPLATE_DIGEST_BYTES or hashlib.sha256(payload).digest() != digest:
                bucket.reset()
                return
            bucket.bytecode_from_string(payload)
            if not isinstance(bucket.code, types.CodeType):
                bucket.reset()
        except Exception:  # noqa: BLE001 - whatever a damaged file raises (pickle, marshal): compile instead
            bucket.reset()

    def dump_bytecode(self, bucket) -> None:
        tmp = None
        try:
            payload = bucket.bytecode_to_string()
            name = self._get_cache_filename(bucket)
            tmp = f"{name}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, name)  # never a half-written file under the cache's name
        except (OSError, TypeError, ValueError):
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


TEMPLATE_DIGEST_BYTES = 32
"""SHA-256 digest length at the head of each cached template file (_TemplateCache)."""


def _template_cache() -> jinja2.BytecodeCache | None:
    """$XDG_CACHE_HOME/trl-advisor/templates (else ~/.cache/...), used only when it is the user's own folder and
    nobody else can write to it: the cache holds code that jinja2 runs. TRL_ADVISOR_NO_CACHE=1 turns it off."""
    if os.environ.get("TRL_ADVISOR_NO_CACHE", "") not in ("", "0"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):  # the XDG spec: a relative value is invalid and ignored (never the working folder)
        base = os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "trl-advisor", "templates")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.stat(folder)
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    return _TemplateCache(folder, pattern=f"trl-advisor-{__version__}-%s.cache")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    # StrictUndefined: a missing variable is a bug, not a blank line in someone's launch script.
    # keep_trailing_newline: files end with a newline, as editors and `git diff` expect (copier issue #464).
    env = jinja2.Environment(
        bytecode_cache=_template_cache(),
        loader=jinja2.PackageLoader("advisor.bundle", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        finalize=_finalize,
    )
    env.filters["shquote"] = _shquote
    env.filters["shpath"] = shell_path
    env.filters["pyrepr"] = _pyrepr
    env.filters["pydoc"] = _pydoc
    env.filters["slug"] = _slug
    env.filters["md"] = _md
    env.filters["mdcode"] = _mdcode
    env.filters["mdcell"] = _mdcell
    env.filters["mdprose"] = _mdprose
    env.filters["json"] = lambda v: json.dumps(v)
    env.filters["gib"] = lambda n: f"{n / GIB:.2f}"
    return env


# ------------------------------------------------------------------------------------------------------- pins

@lru_cache(maxsize=1)
def pins() -> dict:
    text = resources.files("rules.data").joinpath("pins.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def bundle_environment(plan: Plan) -> dict:
    """The bundle's environment as requirements.txt and README describe it (rules.environments.environment_summary):
    the transformers the training runs, the trl release, and vLLM's requirements of the shared environment."""
    from rules.environments import environment_summary

    return environment_summary(plan)


def _requirement(name: str, value: str) -> str:
    return f"{name}=={value}" if value[:1].isdigit() else f"{name}{value}"


def requirements(plan: Plan) -> list[str]:
    """requirements.txt lines, pins from rules/data/pins.toml: only what this plan imports (rules.environments,
    which also says which transformers the training runs: training_transformers_version)."""
    from rules.environments import bundle_pins

    return [_requirement(name, value) for name, value in bundle_pins(plan).items()]


# ------------------------------------------------------------------------------------------ derived settings

def model_config_fields(model: ModelSpec) -> dict:
    """The config.json fields of the architecture: enough for `AutoConfig.for_model(model_type, **fields)`."""
    model_type = RANDOM_INIT_MODEL_TYPE.get(model.model_type, model.model_type)
    fields: dict = {
        "model_type": model_type,
        "hidden_size": model.hidden,
        "num_hidden_layers": model.layers,
        "num_attention_heads": model.heads,
        "num_key_value_heads": model.kv_heads,
        "head_dim": model.head_dim,
        "vocab_size": model.vocab,
        "max_position_embeddings": model.max_positions,
        "tie_word_embeddings": model.tied_embeddings,
    }
    if model.intermediate:
        fields["intermediate_size"] = model.intermediate
    if model_type in ("llama", "qwen3", "qwen3_moe", "gemma2", "gemma3_text"):
        fields["attention_bias"] = model.qkv_bias  # Qwen2 hard-wires its q/k/v bias; Llama/Qwen3 take the flag
    if model.is_moe:
        if model_type == "mixtral":
            fields["num_local_experts"] = model.num_experts
            fields["intermediate_size"] = model.moe_intermediate  # Mixtral's intermediate_size is the expert width
        else:
            fields["num_experts"] = model.num_experts
            fields["moe_intermediate_size"] = model.moe_intermediate
        fields["num_experts_per_tok"] = model.experts_per_token
        if model.shared_expert_intermediate:
            fields["shared_expert_intermediate_size"] = model.shared_expert_intermediate
    # Some configs default to a sliding window (Mistral 4096); the catalogue row is the truth, None included.
    if model_type in ("mistral", "mixtral", "gemma2", "gemma3_text", "qwen2", "qwen3", "qwen3_moe", "phi3"):
        fields["sliding_window"] = model.sliding_window
    defaults = MODEL_TYPE_DEFAULTS.get(model_type)
    if defaults:
        fields["rope_theta"] = defaults["rope_theta"]
        fields["rms_norm_eps"] = defaults["rms_norm_eps"]
    return fields


def teacher_spec(plan: Plan) -> ModelSpec:
    """GKD's teacher as the catalogue (or its config.json) describes it: --random-init builds it from
    teacher_config.json, as the student from model_config.json."""
    from advisor.catalog import resolve_model

    return resolve_model(plan.teacher)


def dtype_settings(plan: Plan) -> dict:
    """Model dtype and TrainingArguments precision flags for the plan's precision (CONTRACT.md definitions), and
    what that means for the states on this backend."""
    settings = {
        "bf16": {"dtype": "torch.bfloat16", "bf16": True, "fp16": False, "mixed": "bf16",
                 "why": "bf16: weights and Adam states held in bf16 (model loaded with dtype=bfloat16)"},
        "bf16-mixed": {"dtype": "torch.float32", "bf16": True, "fp16": False, "mixed": "bf16",
                       "why": "bf16-mixed: fp32 master weights, bf16 autocast (bf16=True)"},
        "fp16-mixed": {"dtype": "torch.float32", "bf16": False, "fp16": True, "mixed": "fp16",
                       "why": "fp16-mixed: fp32 master weights, fp16 autocast with loss scaling (no bf16 on this GPU)"},
        "fp32": {"dtype": "torch.float32", "bf16": False, "fp16": False, "mixed": "no",
                 "why": "fp32: no autocast"},
    }[plan.precision]
    if plan.precision != "fp32" and plan.backend == "deepspeed":
        # DeepSpeed's optimizer keeps fp32 master weights and fp32 Adam states whatever the model's dtype
        # (runtime/zero/stage_1_and_2.py single_partition_of_fp32_groups, stage3.py fp32_partitioned_groups_flat)
        settings = {**settings, "why": f"{plan.precision}: the model computes in 16-bit; DeepSpeed keeps fp32 master "
                                       "weights and fp32 Adam states (partitioned by ZeRO)"}
    elif plan.precision != "fp32" and plan.backend == "fsdp2" and plan.method == "full":
        # accelerate 1.15 fsdp2_prepare_model upcasts trainable parameters to fp32 under mixed precision (rule MEM006)
        settings = {**settings, "why": f"{plan.precision}: FSDP2 computes in 16-bit (MixedPrecisionPolicy); accelerate "
                                       "upcasts the trained weights to fp32, so master weights, gradients and Adam "
                                       "states are fp32, sharded"}
    elif plan.precision != "fp32" and plan.backend == "fsdp2":
        # fsdp2_prepare_model upcasts what requires grad: the adapters; the frozen base keeps the load dtype
        settings = {**settings, "why": f"{plan.precision}: base weights in 16-bit; accelerate upcasts the trainable "
                                       "adapters to fp32 (with their gradients and Adam states), sharded by FSDP2"}
    elif plan.precision == "bf16" and plan.method in ("lora", "qlora"):
        # peft casts adapter weights to fp32 when the base is 16-bit (peft/tuners/tuners_utils.py autocast_adapter_dtype)
        base = "base weights 4-bit NF4 (bitsandbytes), compute in bf16" if plan.method == "qlora" else "base weights bf16"
        settings = {**settings, "why": f"bf16: {base}; peft keeps the adapters and their Adam states in fp32"}
    if plan.method == "qlora" and plan.backend in ("deepspeed", "fsdp2"):
        settings = {**settings, **qlora_sharded_dtype(plan)}
    return settings


def qlora_sharded_dtype(plan: Plan) -> dict:
    """QLoRA under DeepSpeed or FSDP2: the model loads in the 16-bit compute dtype and bitsandbytes stores the packed
    4-bit weights in that same dtype (`bnb_4bit_quant_storage`). ZeRO-3 and FSDP2 flatten every parameter into buffers
    of one dtype (rules PEFT001, PEFT002: storage = model dtype), and both cast float parameters to the compute dtype
    (DeepSpeed 0.19.8 engine._cast_module_mixed_precision, zero.Init; FSDP2's MixedPrecisionPolicy at each gather):
    packed weights stored in any other float dtype would be converted, i.e. destroyed. So under fp16-mixed both are
    float16 (fp16 GPUs) and otherwise bfloat16; the trainable adapters keep fp32 master weights and Adam states
    (DeepSpeed's optimizer, accelerate's upcast of what requires grad)."""
    half = "float16" if plan.precision == "fp16-mixed" else "bfloat16"
    base = "ZeRO-3" if plan.backend == "deepspeed" and plan.zero_stage == 3 else (
        "FSDP2" if plan.backend == "fsdp2" else f"ZeRO-{plan.zero_stage}")
    return {"dtype": f"torch.{half}", "storage": f"torch.{half}",
            "why": f"{plan.precision}: QLoRA under {base} loads the model in {half}, the dtype its 4-bit weights are "
                   f"stored in (sharding needs one float dtype, and a cast to {half} would destroy packed weights "
                   "stored otherwise); the adapters keep fp32 master weights and Adam states"}


SHAPE_MULTIPLE = 64
"""Tokens a padded batch's width is rounded up to, for the trainers whose collators pad a batch to its longest row
and take a multiple (SHAPE_PADDED_TRAINERS). PyTorch's cuDNN attention (the SDPA kernel the profiler showed on an
H100, torch 2.11) builds and caches an execution graph for every new shape of q, k, v and mask
(aten/src/ATen/native/cudnn/MHA.cpp), so data whose rows differ in length pays a build at every batch width the run
has not had before. Measured on one H100 (Qwen2.5-0.5B SFT
bundle, micro-batch 8, rows of 128-1023 tokens, 60 steps; bench/results/bundle-shapes-h100-2026-12-06.jsonl): 98.3 s
as widths came, 49.5 s padded to a multiple of 64, 59.1 s with cuDNN attention off (its flash and memory-efficient
fallbacks are slower at a mask: bench/results/sdpa-probe-h100-2026-12-06-*.json). At most seq_len / 64 shapes; the
padding adds under 64 tokens per row. The GRPO bundle without vLLM (Llama-3.2-1B, prompts of 256-512 tokens, 12
steps, generate without cuDNN attention; bench/results/bundle-shapes-h100-2026-12-06-as-generated.jsonl): 41.2 s with
prompts and completions padded to 64, 46.8 s without; peak allocated 59.84 GiB against 59.70."""
SHAPE_PADDED_TRAINERS = ("sft", "dpo", "kto", "grpo", "rloo")
"""Trainers that take pad_to_multiple_of: SFT, DPO and KTO in their collators (trl 1.16:
DataCollatorForLanguageModeling, DataCollatorForPreference, DataCollatorForUnpairedPreference), GRPO and RLOO on the
prompts (left) and the completions (right) apart (grpo_trainer.py / rloo_trainer.py, _generate_and_score_completions),
so their multiple divides both the prompt budget (seq_len - max_completion_len) and max_completion_len. GKD's
DataCollatorForChatML pads to the longest row and ignores it (trl/experimental/utils.py)."""


def sequence_split(plan: Plan) -> int:
    """The multiple sequence parallelism needs: Ulysses SP splits every sequence into sp_size pieces, ring attention
    into 2 x cp_size chunks (load balancing); 1 without either."""
    if plan.sp_size > 1:
        return plan.sp_size
    if plan.cp_size > 1:
        return 2 * plan.cp_size
    return 1


def pad_to_multiple_of(plan: Plan) -> int | None:
    """The trainer's pad_to_multiple_of: the sequence split's multiple, and for SHAPE_PADDED_TRAINERS also a multiple
    of up to SHAPE_MULTIPLE tokens that divides seq_len (so that padding never makes a row longer than the plan's
    seq_len, which the memory estimate is for). Generation's shapes are train.py's generate_without_cudnn_attention."""
    split = sequence_split(plan)
    if plan.trainer not in SHAPE_PADDED_TRAINERS:
        return split if split > 1 else None
    if plan.trainer in GENERATING_TRAINERS:
        if split > 1:  # rule SP015 rejects a split for them; a plan built by hand keeps what the split needs
            return split
        if plan.unsloth:
            # Unsloth compiles its own GRPO/RLOO trainer (unsloth/models/rl_replacements.py rewrites
            # _generate_and_score_completions and the loss): padded widths there are unmeasured, so none is asked
            return None
        # prompt and completion widths round up apart, each within its budget
        multiple = math.gcd(plan.seq_len - plan.max_completion_len, plan.max_completion_len, SHAPE_MULTIPLE)
        return multiple if multiple > 1 else None
    # the largest multiple of `split` up to SHAPE_MULTIPLE x split / gcd that divides seq_len
    multiple = split * math.gcd(plan.seq_len // split, max(1, SHAPE_MULTIPLE // math.gcd(split, SHAPE_MULTIPLE)))
    return multiple if multiple > 1 else None


def pad_reason(plan: Plan, pad: int | None) -> str:
    """Why the bundle's pad_to_multiple_of is what it is (CONFIG's comment and the README's table)."""
    split = sequence_split(plan)
    parts = []
    if plan.sp_size > 1:
        parts.append(f"Ulysses splits each sequence into sp_size={plan.sp_size} pieces")
    elif plan.cp_size > 1:
        parts.append(f"ring attention needs lengths divisible by 2 x cp_size={plan.cp_size}")
    generating = plan.trainer in GENERATING_TRAINERS
    prompt = plan.seq_len - plan.max_completion_len
    if pad is not None and pad > split and generating:
        parts.append(f"prompts and completions each padded to a multiple of {pad} tokens (divides the prompt budget "
                     f"{prompt} and max_completion_len {plan.max_completion_len}): cuDNN attention builds a graph per "
                     "new batch width; at most (prompt budget / pad) x (max_completion_len / pad) widths (GRPO bundle "
                     "on prompts of 256-512 tokens, H100: 41.2 s for 12 steps against 46.8 s unpadded)")
    elif pad is not None and pad > split:
        parts.append(f"rows padded to a multiple of {pad} tokens (divides seq_len {plan.seq_len}): cuDNN attention "
                     "builds a graph per new batch width; at most seq_len / pad widths (bundle on rows of mixed "
                     "lengths, H100: 49.5 s for 60 steps against 98.3 s unpadded)")
    if parts:
        return "; ".join(parts)
    if plan.trainer not in SHAPE_PADDED_TRAINERS:
        return f"no sequence/context parallelism: no padding multiple needed ({plan.trainer.upper()}'s collator " \
               "pads to the longest row and takes none)"
    if generating and plan.unsloth:
        return "no padding multiple: Unsloth compiles its own trainer, whose batching with one is unmeasured"
    if generating:
        return f"no multiple of 2-{SHAPE_MULTIPLE} tokens divides both the prompt budget {prompt} and " \
               f"max_completion_len {plan.max_completion_len}: batch widths are the longest prompt's and completion's"
    return f"no multiple of 2-{SHAPE_MULTIPLE} tokens divides seq_len {plan.seq_len}: batch widths are the " \
           "longest row's"


def ds_config(plan: Plan, nvme_path: str = NVME_PATH) -> dict:
    """DeepSpeed JSON: literal where the plan decided (stage, offload), "auto" where the HF integration fills it
    from TrainingArguments (a literal that disagrees with them raises in transformers' trainer_config_finalize)."""
    zero: dict = {
        "stage": plan.zero_stage,
        "overlap_comm": plan.overlap_comm,
        "contiguous_gradients": True,
        "reduce_bucket_size": "auto",
    }
    if plan.offload in ("optimizer", "all"):
        zero["offload_optimizer"] = _offload_block(plan, nvme_path)
    if plan.zero_stage == 3:
        zero.update({
            "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto",
            "stage3_max_live_parameters": 1_000_000_000,
            "stage3_max_reuse_distance": 1_000_000_000,
            "stage3_gather_16bit_weights_on_model_save": True,
        })
        if plan.offload == "all":
            zero["offload_param"] = _offload_block(plan, nvme_path)
    return {
        "bf16": {"enabled": "auto"},
        "fp16": {"enabled": "auto"},
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
        "zero_optimization": zero,
    }


def _nvme_bytes(result: dict) -> int:
    """The estimate's disk for NVMe swap files per node (memory.nvme_bytes), 0 when absent or not a count."""
    value = (result.get("memory") or {}).get("nvme_bytes")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _offload_block(plan: Plan, nvme_path: str) -> dict:
    block: dict = {"device": plan.offload_device, "pin_memory": True}
    if plan.offload_device == "nvme":
        block["nvme_path"] = nvme_path
    return block


def accelerate_settings(plan: Plan) -> dict:
    """The accelerate.yaml values (the template adds the comments)."""
    dtype = dtype_settings(plan)
    distributed = {"single": "NO", "ddp": "MULTI_GPU", "deepspeed": "DEEPSPEED", "fsdp2": "FSDP"}[plan.backend]
    parallelism: dict = {}
    if plan.sp_size > 1:
        parallelism = {
            "parallelism_config_dp_replicate_size": 1,
            "parallelism_config_dp_shard_size": plan.num_processes // plan.sp_size,
            "parallelism_config_tp_size": 1,
            "parallelism_config_sp_size": plan.sp_size,
            "parallelism_config_sp_backend": "deepspeed",
            "parallelism_config_sp_seq_length_is_variable": True,
            "parallelism_config_sp_attn_implementation": plan.attn,
        }
    elif plan.cp_size > 1:
        parallelism = {
            "parallelism_config_dp_replicate_size": 1,
            "parallelism_config_dp_shard_size": plan.num_processes // plan.cp_size,
            "parallelism_config_tp_size": 1,
            "parallelism_config_cp_size": plan.cp_size,
            "parallelism_config_cp_backend": "torch",
        }
    return {
        "distributed_type": distributed,
        "mixed_precision": None if plan.uses_deepspeed else dtype["mixed"],
        "num_processes": plan.num_processes,
        "num_machines": plan.nodes,
        "zero3_init_flag": plan.zero_stage == 3,
        "fsdp_offload_params": plan.offload != "none",
        "fsdp_activation_checkpointing": plan.backend == "fsdp2" and plan.grad_ckpt,
        "parallelism": parallelism,
    }


def accelerate_yaml_data(plan: Plan) -> dict:
    """The mapping accelerate.yaml must load to (yaml.safe_load): what the template writes, as data, so that the
    rendered file can be checked against it before it is written (rendered_check.check_yaml)."""
    acc = accelerate_settings(plan)
    data: dict = {"compute_environment": "LOCAL_MACHINE", "debug": False}
    if plan.uses_deepspeed:
        data["deepspeed_config"] = {"deepspeed_config_file": "ds_config.json",
                                    "deepspeed_multinode_launcher": "standard",
                                    "zero3_init_flag": acc["zero3_init_flag"]}
    data.update({"distributed_type": acc["distributed_type"], "downcast_bf16": "no", "enable_cpu_affinity": False})
    if plan.backend == "fsdp2":
        data["fsdp_config"] = {
            "fsdp_activation_checkpointing": acc["fsdp_activation_checkpointing"],
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_offload_params": acc["fsdp_offload_params"], "fsdp_reshard_after_forward": True,
            "fsdp_state_dict_type": "FULL_STATE_DICT", "fsdp_version": 2}
    if plan.backend == "ddp":
        data["gpu_ids"] = "all"
    data.update({"machine_rank": 0, "main_training_function": "main"})
    if acc["mixed_precision"] is not None:
        data["mixed_precision"] = acc["mixed_precision"]
    data.update({"num_machines": acc["num_machines"], "num_processes": acc["num_processes"]})
    if acc["parallelism"]:
        data["parallelism_config"] = dict(acc["parallelism"])
    data.update({"rdzv_backend": "static", "same_network": True, "use_cpu": False})
    return data


@dataclass(frozen=True)
class VllmLayout:
    """Which GPUs of a node serve vLLM and which train (server mode), and the server's parallelism."""

    train_gpus: str
    vllm_gpus: str
    tensor_parallel: int
    data_parallel: int
    max_model_len: int
    """Tokens per request (prompt + completion): the plan's seq_len. train.py keeps prompts to seq_len -
    max_completion_len and asks for at most max_completion_len new tokens, so every request fits; vLLM rejects one
    whose prompt + max_tokens exceed max_model_len (vllm/renderers/params.py, 0.31.0)."""
    max_prompt_len: int
    enable_scale_out: bool
    """`trl vllm-serve` adds --enable-scale-out for vLLM >= 0.30.0 (trl/scripts/vllm_serve.py build_command): the
    render and token-in generate endpoints TRL's client uses for multimodal prompts."""
    idle_gpus: int = 0
    """GPUs of the job nothing runs on: the server's share of every node but node 0. One server generates for the
    run (TRL's client connects the main process to one base URL: trl/generation/vllm_generation.py), and accelerate
    starts the same number of training processes on every node (accelerate/utils/launch.py: nproc_per_node =
    num_processes // num_machines), so nodes 1..N-1 cannot train on those GPUs. Said as a number in launch.sh, the
    README and generate's notes (planner.vllm_note). Node 0's server GPUs all run it: the planner takes only counts
    its tensor-parallel x data-parallel layout fills (vllm_memory.usable_server_gpus; rule VLLM012)."""


def vllm_layout(plan: Plan, model: ModelSpec, target: Target) -> VllmLayout | None:
    if plan.vllm_mode != "server":
        return None
    from rules import vercmp
    from rules.environments import bundle_pins

    common = {"max_model_len": plan.seq_len, "max_prompt_len": plan.seq_len - plan.max_completion_len,
              "enable_scale_out": vercmp.compare(bundle_pins(plan)["vllm"], VLLM_SCALE_OUT_SINCE) >= 0}
    train = plan.gpus_per_node - plan.vllm_gpus
    # The trainer takes the first GPUs, vLLM the last: disjoint by construction (TRL requires separate GPUs).
    train_ids = ",".join(str(i) for i in range(train))
    vllm_ids = ",".join(str(i) for i in range(train, plan.gpus_per_node))
    tp, dp = server_parallelism(plan, model, target)
    return VllmLayout(train_gpus=train_ids, vllm_gpus=vllm_ids, tensor_parallel=tp, data_parallel=dp,
                      idle_gpus=plan.vllm_gpus * (plan.nodes - 1), **common)


TRL_LEARNING_RATES = {"sft": 2e-5, "gkd": 2e-5, "dpo": 1e-6, "kto": 1e-6, "grpo": 1e-6, "rloo": 1e-6}
"""Each trainer's config default learning_rate in TRL 1.16 (trl/trainer/sft_config.py 2e-5, dpo_config.py,
kto_config.py, grpo_config.py and rloo_config.py 1e-6; trl/experimental/gkd/gkd_config.py GKDConfig inherits
SFTConfig's): what full fine-tuning is written with."""
LORA_LEARNING_RATE_FACTOR = 10
"""LoRA's best learning rate is about ten times full fine-tuning's (TRL docs, "LoRA Without Regret", after Schulman
et al. 2025, Thinking Machines Lab): an adapter kept at the full fine-tune's rate barely moves."""


def learning_rate(plan: Plan) -> tuple[float, str]:
    """The AdamW learning rate train.py passes, and why: TRL's default for the trainer, times ten for an adapter."""
    base = TRL_LEARNING_RATES[plan.trainer]
    config = {"sft": "SFTConfig", "gkd": "GKDConfig (SFTConfig's)", "dpo": "DPOConfig", "kto": "KTOConfig",
              "grpo": "GRPOConfig", "rloo": "RLOOConfig"}[plan.trainer]
    if plan.method == "full":
        return base, f"{config} default for full fine-tuning; tune it for your data"
    return (base * LORA_LEARNING_RATE_FACTOR,
            f"{LORA_LEARNING_RATE_FACTOR} x {config}'s {base:g}: LoRA's best rate is about ten times full "
            "fine-tuning's (TRL docs, LoRA Without Regret); tune it for your data")


def trainer_beta(plan: Plan) -> float | None:
    """KL coefficient for GRPO/RLOO: a reference model exists only when beta > 0 (TRL loads none at 0.0)."""
    if plan.trainer == "grpo":
        # GRPOConfig default 0.0 (no reference model); DeepSeek-R1 used 0.001 when a KL term is wanted.
        return 0.001 if plan.ref_model == "copy" else 0.0
    if plan.trainer == "rloo":
        # RLOOConfig default 0.05. Full fine-tuning without a reference copy means no KL term; with PEFT the
        # reference is the base model with the adapter disabled, which costs no memory.
        return 0.0 if (plan.method == "full" and plan.ref_model != "copy") else 0.05
    return None


# -------------------------------------------------------------------------------------------------- reasons

# Plan field -> (Request field, CLI flag) for "user pin" provenance.
_PIN_FLAGS: dict[str, tuple[str, str]] = {
    "trainer": ("trainer", "--trainer"), "method": ("method", "--method"), "lora_r": ("lora_r", "--lora-r"),
    "backend": ("backend", "--backend"), "zero_stage": ("zero", "--zero"), "offload": ("offload", "--offload"),
    "offload_device": ("offload_device", "--offload-device"), "precision": ("precision", "--precision"),
    "seq_len": ("seq_len", "--seq-len"), "micro_batch": ("micro_batch", "--micro-batch"),
    "grad_accum": ("grad_accum", "--grad-accum"), "grad_ckpt": ("grad_ckpt", "--grad-ckpt"),
    "liger": ("liger", "--liger"), "attn": ("attn", "--attn"), "packing": ("packing", "--packing"),
    "sp_size": ("sp_size", "--sp-size"), "cp_size": ("cp_size", "--cp-size"), "nodes": ("nodes", "--nodes"),
    "gpus_per_node": ("gpus", "--gpus"), "unsloth": ("unsloth", "--unsloth"),
    "num_generations": ("num_generations", "--num-generations"),
    "max_completion_len": ("max_completion_len", "--max-completion-len"), "vllm_mode": ("vllm", "--vllm"),
    "vllm_gpus": ("vllm_gpus", "--vllm-gpus"), "vllm_mem_fraction": ("vllm_mem_fraction", "--vllm-mem-fraction"),
    "ref_model": ("ref_model", "--ref-model"), "trust_remote_code": ("trust_remote_code", "--trust-remote-code"),
    "teacher": ("teacher", "--teacher"),
}
_BOOL_FLAGS = {"grad_ckpt": "--no-grad-ckpt", "liger": "--no-liger", "packing": "--no-packing"}


def _colocate_share_reason(plan: Plan, model: ModelSpec, target: Target) -> str:
    """Why the colocated engine has its share (a user pin is said by `reasons` itself)."""
    if plan.vllm_mode != "colocate":
        return "unused: vLLM does not share the training GPUs"
    default = DEFAULT_VLLM_MEM_FRACTION
    if plan.vllm_mem_fraction <= default:
        return f"fraction of each GPU vLLM reserves next to training (GRPOConfig default {default})"
    return (f"raised from GRPOConfig's {default} ({default * target.gpu_memory_bytes / GIB:.1f} GiB): the engine "
            f"needs {engine_need(model, plan, target).describe()}, and the KV cache of a group of "
            f"{plan.num_generations} completions")


def _ref_model_reason(plan: Plan) -> str:
    if plan.trainer == "sft":
        return "none: SFT has no reference model"
    if plan.trainer == "grpo" and plan.ref_model == "none":
        return "none: GRPOConfig beta defaults to 0.0, so TRL loads no reference model"
    if plan.ref_model == "none" and plan.method != "full":
        return "none: with PEFT the reference is the base model with the adapter disabled (no second copy)"
    if plan.trainer == "gkd":
        return f"the teacher, {plan.teacher}: frozen, loaded like the student (--teacher)"
    if plan.ref_model == "copy":
        return "copy: a frozen second model in the training dtype"
    if plan.ref_model == "bema":
        return ("bema: a copy that follows the policy's bias-corrected moving average (BEMACallback, every 400 steps; "
                "fp32 running weights, θ0 and the EMA kept in host RAM)")
    if plan.ref_model == "precompute":
        return ("precompute: reference log-probs scored once over the whole dataset before training "
                "(precompute_ref_log_probs=True; no copy in GPU memory; --max-steps does not shorten that pass)")
    return "none: this trainer has no reference model"


def _flag_text(knob: str, value) -> str:
    field, flag = _PIN_FLAGS[knob]
    if isinstance(value, bool):
        return flag if value else _BOOL_FLAGS.get(knob, flag)
    return f"{flag} {value}"


def reasons(plan: Plan, model: ModelSpec, target: Target, result: dict, request: Request | None) -> dict[str, str]:
    """Why each knob has its value: the planner's own provenance (result["why"]) first, then a user pin, then
    what is known about the default or the search. One line each, no newlines."""
    given = result.get("why") or {}
    pinned = request.pinned() if request is not None else {}
    mem = result.get("memory", {})
    if request is not None:
        searched = (f"chosen by the plan search: the fastest candidate that fits (predicted peak "
                    f"{mem.get('per_gpu_peak_bytes', 0) / GIB:.1f} of {mem.get('gpu_capacity_bytes', 0) / GIB:.1f} GiB)")
    else:
        searched = "the plan's value (no request recorded to tell a user pin from the search)"
    generating = plan.trainer in GENERATING_TRAINERS
    peft = plan.method in ("lora", "qlora")
    derived: dict[str, str] = {
        "trainer": "the trainer asked for (--trainer; sft when not given)",
        "method": searched,
        "lora_r": "TRL ModelConfig default lora_r=16" if peft else "unused: full fine-tuning trains every weight",
        "lora_alpha": "2 x r, the ratio of TRL's ModelConfig defaults (lora_r 16, lora_alpha 32)" if peft else
                      "unused: full fine-tuning",
        "backend": searched,
        "zero_stage": searched if plan.uses_deepspeed else "0: not a DeepSpeed plan",
        "offload": searched,
        "offload_device": searched if plan.offload != "none" else "unused: nothing is offloaded",
        "precision": dtype_settings(plan)["why"] + (
            f"; {target.gpu.id} has bf16" if target.gpu.has_bf16 else f"; {target.gpu.id} has no bf16"),
        "seq_len": "TRL's max_length default (1024)" if plan.seq_len == 1024 else "the requested sequence length",
        "micro_batch": searched,
        "grad_accum": searched,
        "grad_ckpt": searched,
        "liger": searched,
        "attn": choose_attention(request, model, target, plan.precision)[1] if request is not None and
        not request.attn else ("sdpa: PyTorch's fused attention, no extra package" if plan.attn == "sdpa" else searched),
        "packing": ("off: packing changes which samples share a sequence, a data choice left to --packing"
                    if plan.trainer == "sft" and not plan.packing else
                    searched if plan.trainer == "sft" else "only SFT packs sequences"),
        "sp_size": searched if plan.sp_size > 1 else "1: no sequence parallelism",
        "cp_size": searched if plan.cp_size > 1 else "1: no context parallelism",
        "num_processes": (f"one process per training GPU: ({plan.gpus_per_node} - {plan.vllm_gpus} vLLM) x "
                          f"{plan.nodes} node(s)" if plan.vllm_mode == "server" else
                          f"one process per GPU: {plan.gpus_per_node} x {plan.nodes} node(s)"),
        "nodes": f"the target: {target.describe()} ({target.origin})",
        "gpus_per_node": f"the target: {target.describe()} ({target.origin})",
        "unsloth": "Unsloth asked for (--unsloth)" if plan.unsloth else "not asked for (--unsloth)",
        "num_generations": "GRPOConfig/RLOOConfig default" if generating else "unused: this trainer does not sample",
        "max_completion_len": ("completion part of seq_len (GRPOConfig max_completion_length)" if generating else
                               "unused: this trainer does not sample"),
        "vllm_mode": searched if generating else "unused: this trainer does not sample",
        "vllm_gpus": searched if plan.vllm_mode == "server" else "0: no separate vLLM server",
        "vllm_mem_fraction": _colocate_share_reason(plan, model, target),
        "ref_model": _ref_model_reason(plan),
        "teacher": ("the model distilled into the student (--teacher), same vocabulary" if plan.trainer == "gkd" else
                    "unused: only GKD has a teacher"),
        "teacher_params": (f"{plan.teacher_params / 1e9:.2f}B parameters: the teacher's weights are in the memory "
                           "estimate and its forward in the step time" if plan.trainer == "gkd" else
                           "unused: only GKD has a teacher"),
        "trust_remote_code": ("asked for (--trust-remote-code)" if plan.trust_remote_code else
                              "never run code from the model repository unless asked"),
        "overlap_comm": ("ds_config.json zero_optimization.overlap_comm: gradient reduction on a side stream, "
                         "overlapping the backward (DeepSpeed's default turns it on at stage 3 only)"
                         if plan.uses_deepspeed and plan.overlap_comm else
                         "ds_config.json zero_optimization.overlap_comm" if plan.uses_deepspeed else
                         "unused: not a DeepSpeed plan"),
    }
    out: dict[str, str] = {}
    for knob in Plan.__dataclass_fields__:
        value = getattr(plan, knob)
        text = given.get(knob)
        if not text and knob in _PIN_FLAGS and _PIN_FLAGS[knob][0] in pinned and knob != "trainer":
            text = f"user pin ({_flag_text(knob, pinned[_PIN_FLAGS[knob][0]])})"
            if knob == "attn" and value != pinned["attn"]:
                # resolve.attention.sp_attention: FlashAttention 2 named as the model reports it under Ulysses SP
                text += (f", loaded as {value}: the Hub kernel transformers runs for it without the flash-attn "
                         "package, named so for DeepSpeed's Ulysses, which requires the same name on both sides")
        if not text and knob == "grad_accum" and "global_batch" in pinned:
            text = f"user pin (--global-batch {pinned['global_batch']}) / (micro-batch x data-parallel)"
        if not text and knob == "num_processes" and ("gpus" in pinned or "nodes" in pinned):
            text = "user pin (--gpus/--nodes): " + derived["num_processes"]
        if not text:
            text = derived.get(knob, searched)
        out[knob] = " ".join(str(text).split())
    return out


# ------------------------------------------------------------------------------------------- re-create command

def _is_local(resolved_id: str) -> bool:
    """A model or teacher read from a local folder: its resolved id is that folder's absolute path (a catalogue or
    hub id is `org/name`)."""
    return bool(resolved_id) and os.path.isabs(resolved_id)


def _local_model_path(typed: str) -> str | None:
    """The absolute path a --model or --teacher value is read from (`~` expanded, symlinks resolved: MODEL_ID's
    form), or None for a catalogue, size or hub name. Decided by the resolver itself, from the text alone (the
    wizard shows this line before any plan exists): a catalogue name wins over a folder of that name, and a path is
    looked at before the hub, so nothing is downloaded here."""
    text = typed.strip()
    if not os.path.exists(os.path.expanduser(text)):
        return None
    from advisor.catalog import resolve_model

    try:
        local = _is_local(resolve_model(text).hf_id)
    except AdvisorError:  # a folder generate refuses: the line keeps what was typed
        return None
    return os.path.realpath(os.path.expanduser(text)) if local else None


def _recorded_value(field: str, value) -> str:
    """A pin as the Re-create line writes it: a local model or teacher and a hardware file as absolute paths, since
    a relative path as typed works only from the folder generate ran in."""
    if field == "hardware" and isinstance(value, str):
        return os.path.realpath(value)  # as the file was opened: no `~` expansion, symlinks resolved
    if field in ("model", "teacher") and isinstance(value, str):
        return _local_model_path(value) or value
    return str(value)


def recreate_command(plan: Plan, model: ModelSpec, target: Target, request: Request | None) -> str:
    """The `trl-advisor generate` line that makes this bundle again: the user's pins, or every knob."""
    if request is not None:
        args = ["--model", _recorded_value("model", request.model)]
        for field, value in request.pinned().items():
            if field in ("model",):
                continue
            flag = "--" + field.replace("_", "-")  # Request fields are the contract's flag names
            if isinstance(value, bool):
                if value:
                    args.append(flag)
                elif field in ("grad_ckpt", "liger", "packing"):  # the contract's --no-* switches
                    args.append("--no-" + field.replace("_", "-"))
            else:
                args += [flag, _recorded_value(field, value)]
        return "trl-advisor generate " + " ".join(shlex.quote(a) for a in args)
    # a local model's id is its folder's name, which --model would not find: its path instead
    args = ["--model", model.hf_id if _is_local(model.hf_id) else model.id, "--trainer", plan.trainer,
            "--method", plan.method, "--gpu", target.gpu.id, "--gpus", str(plan.gpus_per_node),
            "--nodes", str(plan.nodes), "--backend", plan.backend]
    if plan.uses_deepspeed:
        args += ["--zero", str(plan.zero_stage)]
    args += ["--offload", plan.offload, "--precision", plan.precision, "--seq-len", str(plan.seq_len),
             "--micro-batch", str(plan.micro_batch), "--grad-accum", str(plan.grad_accum),
             "--grad-ckpt" if plan.grad_ckpt else "--no-grad-ckpt", "--attn", plan.attn]
    if plan.method != "full":
        args += ["--lora-r", str(plan.lora_r)]
    if plan.offload != "none":
        args += ["--offload-device", plan.offload_device]
    if plan.liger:
        args.append("--liger")
    if plan.packing:
        args.append("--packing")
    if plan.sp_size > 1:
        args += ["--sp-size", str(plan.sp_size)]
    if plan.cp_size > 1:
        args += ["--cp-size", str(plan.cp_size)]
    if plan.unsloth:
        args.append("--unsloth")
    if plan.trainer in GENERATING_TRAINERS:
        args += ["--num-generations", str(plan.num_generations), "--max-completion-len", str(plan.max_completion_len),
                 "--vllm", plan.vllm_mode]
        if plan.vllm_mode == "server":
            args += ["--vllm-gpus", str(plan.vllm_gpus)]
        if plan.vllm_mode == "colocate":
            args += ["--vllm-mem-fraction", str(plan.vllm_mem_fraction)]
    if plan.trainer in ("dpo", "kto"):
        args += ["--ref-model", plan.ref_model]
    if plan.trainer == "gkd" and plan.teacher:
        args += ["--teacher", plan.teacher]
    return "trl-advisor generate " + " ".join(shlex.quote(a) for a in args)


# ------------------------------------------------------------------------------------------------- rendering

def _host_note(result: dict) -> str | None:
    """The host-bound note of the plan's speed figure (advisor.model.calibration.host_bound_note), or None."""
    share = (result.get("speed") or {}).get("host_bound_share") or 0.0
    return calibration.host_bound_note(share) if share >= calibration.HOST_BOUND_NOTE_SHARE else None


def _padded_note(plan: Plan, model: ModelSpec, target: Target, result: dict) -> dict | None:
    """The README's figures for a dataset of rows of different lengths (advisor.model.padded_data), or None where
    padding changes nothing the estimate counts."""
    mem = padded_data_memory(model, plan, target)
    base = (result.get("memory") or {}).get("per_gpu_peak_bytes")
    if mem is None or not isinstance(base, int) or mem.per_gpu_peak_bytes <= base:
        return None
    remedies = []
    if not flash_obstacles(target, plan.precision):
        remedies.append("`--packing` (padding-free rows under FlashAttention 2, no mask)")
    if not plan.grad_ckpt:
        remedies.append("`--grad-ckpt` (one layer's mask held at a time)")
    if plan.micro_batch > 1:
        remedies.append(f"`--micro-batch {plan.micro_batch // 2}`")
    if not remedies:
        remedies.append("more GPUs (`--gpus`) or ZeRO-3 (`--backend deepspeed --zero 3`)")
    return {"peak_gib": mem.per_gpu_peak_bytes / GIB, "more_gib": (mem.per_gpu_peak_bytes - base) / GIB,
            "fits": mem.fits, "capacity_gib": mem.capacity_bytes / GIB, "remedies": " or ".join(remedies)}


_RESULT_KEYS = ("memory", "speed")


def _check_result(result: dict) -> None:
    missing = [k for k in _RESULT_KEYS if k not in result]
    mem = result.get("memory", {})
    missing += [f"memory.{k}" for k in ("per_gpu_peak_bytes", "per_gpu_reserved_bytes", "gpu_capacity_bytes",
                                        "headroom_bytes", "fits", "breakdown_bytes", "host_bytes") if k not in mem]
    missing += [f"speed.{k}" for k in ("step_seconds", "tokens_per_second", "mfu") if k not in result.get("speed", {})]
    if missing:
        raise ValueError(f"render_bundle: the generate result lacks {', '.join(missing)} (CONTRACT.md generate --json)")


def default_out_dir(plan: Plan, model: ModelSpec) -> str:
    """generated/<model-id>-<trainer>-<method>-<n>gpu, n = every GPU of the plan (training and vLLM)."""
    name = re.sub(r"[^a-z0-9._-]+", "-", model.id.lower()).strip("-") or "model"
    return f"generated/{name}-{plan.trainer}-{plan.method}-{plan.gpus_per_node * plan.nodes}gpu"


def model_origin(model: ModelSpec) -> str:
    """Where the model's architecture came from, for train.py's MODEL_ID line: a catalogue row, or a config.json read
    from a local folder or the hub (not labelled catalogue: the catalogue's rows are the ones checked against their
    sources)."""
    from advisor.catalog import all_models

    if any(row.id == model.id and row.source == model.source for row in all_models()):
        return f"catalogue {model.id}"
    return "local config.json" if model.source.startswith("file:") else "hub config.json"


def _config_rows(plan: Plan, why: dict[str, str], extra: list[tuple[str, object, str]]) -> str:
    """The CONFIG dict body of train.py: one `"key": literal,  # why` line per value."""
    lines = []
    rows = [(knob, getattr(plan, knob), why[knob]) for knob in Plan.__dataclass_fields__] + list(extra)
    for key, value, reason in rows:
        _finalize(reason)  # a comment ends at a newline: refuse one
        lines.append(f"    {key!r}: {value!r},  # {reason}")
    return Block("\n".join(lines))


def _alternative_line(alt: dict) -> str:
    p = alt.get("plan") or {}
    try:
        text = Plan(**p).short()
    except TypeError:
        keys = ("backend", "zero_stage", "offload", "method", "precision", "micro_batch", "grad_accum", "grad_ckpt",
                "liger", "sp_size", "cp_size", "vllm_mode")
        text = ", ".join(f"{k}={p[k]}" for k in keys if k in p)
    peak = alt.get("per_gpu_peak_bytes")
    tps = alt.get("tokens_per_second")
    nums = []
    if isinstance(peak, (int, float)):
        nums.append(f"peak {peak / GIB:.1f} GiB")
    if isinstance(tps, (int, float)):
        nums.append(f"{tps:,.0f} tokens/s")
    because = " ".join(str(alt.get("rejected_because", "")).split())
    return f"{text} ({', '.join(nums)}): {because}" if nums else f"{text}: {because}"


def render_bundle(plan: Plan, model: ModelSpec, target: Target, result: dict,
                  request: Request | None = None) -> dict[str, str]:
    """Every file of the bundle, name -> content. Pure and deterministic."""
    _check_result(result)
    why = reasons(plan, model, target, result, request)
    dtype = dtype_settings(plan)
    acc = accelerate_settings(plan)
    layout = vllm_layout(plan, model, target)
    dataset, dataset_why = DEFAULT_DATASETS[plan.trainer]
    out_dir = result.get("out") or default_out_dir(plan, model)
    recreate = recreate_command(plan, model, target, request)
    nvme_path = request.nvme_path if request is not None and request.nvme_path else NVME_PATH
    pad = pad_to_multiple_of(plan)
    beta = trainer_beta(plan)
    pad_why = pad_reason(plan, pad)
    lr, lr_why = learning_rate(plan)
    extra: list[tuple[str, object, str]] = [("pad_to_multiple_of", pad, pad_why), ("learning_rate", lr, lr_why)]
    job = result.get("job") if isinstance(result.get("job"), dict) else None
    job_steps = job.get("steps") if job else None
    if isinstance(job_steps, int) and not isinstance(job_steps, bool) and job_steps > 0:
        extra.append(("max_steps", job_steps,
                      f"the job you sized (--{job.get('given')}): train.py stops here unless --max-steps says otherwise"))
    if beta is not None:
        extra.append(("beta", beta, "KL coefficient: a reference model is loaded only when beta > 0; "
                      + ("0.001 as DeepSeek-R1 (ref_model copy)" if plan.trainer == "grpo" and beta else
                         "GRPOConfig default 0.0" if plan.trainer == "grpo" else
                         "RLOOConfig default 0.05" if beta else "full fine-tuning without a reference copy")))
    if plan.vllm_mode == "server":
        extra.append(("vllm_server_host", VLLM_HOST, "launch.sh starts the server on node 0, where the main process runs"))
        extra.append(("vllm_server_port", VLLM_PORT, "launch.sh serves on it; VLLM_SERVER_PORT changes both"))
    if plan.vllm_mode == "colocate":
        extra.append(("vllm_max_model_length", plan.seq_len, "prompt + completion: the plan's seq_len"))
    bema = plan.ref_model == "bema"
    environment_pins = bundle_environment(plan)
    trl_version, trl_series = trl_release(environment_pins)
    ctx = {
        "version": __version__,
        "trl_version": trl_version,
        "trl_series": trl_series,
        # the TRL 1.16 environment's release ([pins]), which an Unsloth bundle's requirements.txt says it cannot share
        "main_trl_series": trl_release({"trl": pins()["pins"]["trl"]})[1],
        "plan": plan,
        "plan_dict": plan.to_dict(),
        "model": model,
        "model_origin": model_origin(model),
        "target": target,
        "why": why,
        "dtype": dtype,
        "acc": acc,
        "layout": layout,
        "dataset": dataset,
        "dataset_why": dataset_why,
        "recreate": recreate,
        "config_rows": _config_rows(plan, why, extra),
        "pad_to_multiple_of": pad,
        "pad_reason": pad_why,
        "learning_rate": lr,
        "learning_rate_why": lr_why,
        # transformers' generate under SDPA without cuDNN attention (train.py generate_without_cudnn_attention)
        "generate_without_cudnn": generates_with_hf(plan) and plan.attn == "sdpa" and not plan.unsloth,
        "beta": beta,
        "bema": bema,
        "unsloth_note": calibration.UNSLOTH_UNMEASURED,
        "host_note": _host_note(result),
        "padded": _padded_note(plan, model, target, result),
        # LIGER_MODEL_TYPES: the model types liger-kernel 0.8.5 has an apply_liger_kernel_to_<type> for
        "liger_apply": f"apply_liger_kernel_to_{model.model_type}" if model.model_type in LIGER_MODEL_TYPES else None,
        "generating": plan.trainer in GENERATING_TRAINERS,
        # the CPU fallback for flash-attention plans: SDPA, unless transformers has no SDPA path for the model
        "cpu_attn": "eager" if model.model_type in SDPA_UNSUPPORTED else "sdpa",
        "peft": plan.method in ("lora", "qlora"),
        "multinode": plan.nodes > 1,
        "nop2p": target.intra_node_link == "pcie-nop2p" and plan.num_processes > 1,
        "vllm_host": VLLM_HOST,
        "vllm_port": VLLM_PORT,
        "vllm_server_mem": SERVER_MEM_FRACTION,
        "vllm_timeout": VLLM_STARTUP_TIMEOUT_S,
        "rendezvous_margin": RENDEZVOUS_MARGIN_S,
        "vllm_poll": VLLM_HEALTH_POLL_S,
        "stop_timeout": STOP_TIMEOUT_S,
        "main_process_port": MAIN_PROCESS_PORT,
        "nvme_path": nvme_path,
        "nvme": plan.uses_deepspeed and plan.offload != "none" and plan.offload_device == "nvme",
        "nvme_need_kib": -(-_nvme_bytes(result) // 1024),
        "cpus_per_task": (target.cpu_cores if target.cpu_cores else CPUS_PER_GPU * plan.gpus_per_node),
        "result": result,
        # the breakdown at the moment of the peak, a part at 0 said why (advisor.bundle.peak)
        "peak_moment": peak.peak_moment(result["memory"]),
        "breakdown_rows": peak.breakdown_rows(result["memory"], plan.offload),
        "absent_parts": any(why is not None for _, _, why in peak.breakdown_rows(result["memory"], plan.offload)),
        "safety_margin": peak.safety_margin_bytes(result["memory"]),
        "out_dir": out_dir,
        "alternatives": [_alternative_line(a) for a in result.get("alternatives", [])],
        "requirements": requirements(plan),
        "environment": environment_pins,
        # the Hub repository transformers loads for the attention (FLASH_ATTN_KERNEL_FALLBACK for flash_attention_2)
        "hub_kernel_repo": plan.attn if "/" in plan.attn else "kernels-community/flash-attn2",
        "per_node": plan.num_processes // plan.nodes,
    }
    env = environment()
    files: dict[str, str] = {
        "train.py": env.get_template("train.py.j2").render(ctx),
        "accelerate.yaml": env.get_template("accelerate.yaml.j2").render(ctx),
        "launch.sh": env.get_template("launch.sh.j2").render(ctx),
        "requirements.txt": env.get_template("requirements.txt.j2").render(ctx),
        "model_config.json": json.dumps(model_config_fields(model), indent=2, sort_keys=True) + "\n",
        **({"teacher_config.json": json.dumps(model_config_fields(teacher_spec(plan)), indent=2, sort_keys=True) + "\n"}
           if plan.trainer == "gkd" else {}),
    }
    if plan.uses_deepspeed:
        files["ds_config.json"] = json.dumps(ds_config(plan, nvme_path), indent=2, sort_keys=True) + "\n"
    if plan.nodes > 1:
        files["slurm.sbatch"] = env.get_template("slurm.sbatch.j2").render(ctx)
    names = sorted([*files, "README.md", "plan.json"])
    # what requirements.txt installs, so verify and check read the environment as data, not from comments
    plan_json = {**result, "out": out_dir, "files": names, "environment": ctx["environment"]}
    files["plan.json"] = json.dumps(plan_json, indent=2, sort_keys=True, default=_json_default) + "\n"
    ctx["files"] = names
    files["README.md"] = env.get_template("README.md.j2").render(ctx)
    expected_config = {**plan.to_dict(), **{key: value for key, value, _ in extra}}
    _check_rendered(files, {
        "train.py": ({"MODEL_ID": model.hf_id, "TRUST_REMOTE_CODE": plan.trust_remote_code, "DATASET": dataset,
                      "CONFIG": expected_config, "BF16": dtype["bf16"], "FP16": dtype["fp16"]},
                     (model.hf_id, recreate, plan.short(), target.describe())),
        "accelerate.yaml": accelerate_yaml_data(plan),
        "ds_config.json": ds_config(plan, nvme_path) if plan.uses_deepspeed else None,
        "model_config.json": model_config_fields(model),
        "teacher_config.json": model_config_fields(teacher_spec(plan)) if plan.trainer == "gkd" else None,
        "plan.json": plan_json,
    })
    return {name: files[name] for name in sorted(files, key=_bundle_order)}


def _check_rendered(files: dict[str, str], expected: dict) -> None:
    """Refuse a bundle whose files do not parse or do not read back as the plan (advisor.bundle.selfcheck)."""
    from advisor.bundle import selfcheck as rc

    try:
        constants, doc_parts = expected["train.py"]
        rc.check_python("train.py", files["train.py"], constants, doc_parts)
        rc.check_yaml("accelerate.yaml", files["accelerate.yaml"], expected["accelerate.yaml"])
        for name in ("ds_config.json", "model_config.json", "teacher_config.json", "plan.json"):
            if name in files:
                rc.check_json(name, files[name], expected[name])
        rc.check_shell("launch.sh", files["launch.sh"])
        if "slurm.sbatch" in files:
            rc.check_shell("slurm.sbatch", files["slurm.sbatch"], sbatch=True)
    except rc.RenderedFileError as exc:
        raise UnsafeValueError(f"the bundle was not written: {exc}",
                               hint="a value in the flags or a folder name cannot be written safely; "
                                    "if none looks odd, report it with the command line") from None


def _bundle_order(name: str) -> tuple[int, str]:
    return (BUNDLE_ORDER.index(name) if name in BUNDLE_ORDER else len(BUNDLE_ORDER), name)


def _json_default(value):
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"plan.json: {type(value).__name__} is not JSON serialisable")
