"""The plan a folder's files describe, field by field, and where each value came from.

A bundle states its plan several times: train.py's CONFIG (what the plan decided), the keyword arguments train.py
passes to TRL (what TRL is given), ds_config.json and accelerate.yaml (what DeepSpeed and accelerate read), and
plan.json (the record of what was planned, with its predictions). A user who edits one of them changes what runs.
For every Plan field the value that takes effect wins:

  1. a REQUEST flag (`check --bundle DIR --micro-batch 8`): it overrides the files, and a difference is a conflict;
  2. the file the libraries read at run time: a TRL keyword argument, the TRL YAML, ds_config.json's ZeRO block,
     accelerate.yaml's distributed_type, num_processes, FSDP and parallelism settings (TRL's own default when a
     TRL config is there but leaves the key out: that default is what runs);
  3. train.py's CONFIG, for what no runtime file states (its sequence length for GRPO, the LoRA rank of a full
     plan, the GPUs per node);
  4. plan.json (plan and request), for a folder whose files do not say;
  5. a documented default, listed in `files.assumptions`.

Every difference between the value used and plan.json, CONFIG or a flag is kept, with both values and both places,
so that `check --bundle` and `verify` can say what was edited. CONFIG keys that are not Plan fields (a teacher, a
beta, a server port) are read by others and ignored here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from advisor.bundle.literals import literal_value, plan_switches
from advisor.bundle.plan_values import plan_value_problem
from advisor.core import safeio
from advisor.core.errors import InputFileError
from advisor.core.files import BundleFiles, Unresolved
from advisor.core.plan import Plan

PLAN_JSON_REQUEST_FIELDS = ("trainer", "seq_len", "attn", "packing", "lora_r", "num_generations",
                            "max_completion_len", "vllm_gpus", "vllm_mem_fraction", "ref_model", "unsloth",
                            "offload_device", "lora_alpha", "gpus_per_node", "trust_remote_code")
"""Plan fields plan.json keeps in `request` (the resolved request) rather than in `plan`."""
REQUEST_TO_PLAN = {"zero": "zero_stage", "vllm": "vllm_mode", "gpus": "gpus_per_node"}
"""REQUEST flag names that differ from the Plan field they set."""
PLAN_TO_REQUEST = {v: k for k, v in REQUEST_TO_PLAN.items()}


def flag_name(field_name: str) -> str:
    """The REQUEST flag that sets a Plan field (`zero_stage` -> `--zero`)."""
    return "--" + PLAN_TO_REQUEST.get(field_name, field_name).replace("_", "-")


CONFIG_WHERE = "train.py CONFIG"
PLAN_DEFAULTS_NOTE = "not in the files: assumed"
PLAN_JSON_WHERE = "plan.json"


@dataclass(frozen=True)
class Difference:
    """One field stated twice with two values: `value` at `where` (the one used) and `other` at `other_where`."""

    field: str
    value: Any
    where: str
    other: Any
    other_where: str

    def text(self) -> str:
        return f"{self.field}: {self.value!r} in {self.where}, {self.other!r} in {self.other_where}"

    def to_dict(self) -> dict:
        return {"field": self.field, "value": self.value, "where": self.where, "other": self.other,
                "other_where": self.other_where}


@dataclass
class PlanReading:
    """The plan of a folder as its files describe it."""

    plan: Plan
    sources: dict[str, str] = field(default_factory=dict)
    """Plan field -> where its value came from (a file and key, a flag, plan.json, or "default")."""
    vs_plan_json: list[Difference] = field(default_factory=list)
    """Fields whose value in the files differs from plan.json's record (the files were edited after planning)."""
    vs_config: list[Difference] = field(default_factory=list)
    """Fields where the file the libraries read differs from train.py's CONFIG (CONFIG no longer says what runs)."""
    vs_flags: list[Difference] = field(default_factory=list)
    """Fields a REQUEST flag overrode: the flag's value, and what the files said."""
    planned: Plan | None = None
    """plan.json's plan, when plan.json holds a complete one (what was planned)."""


def config_dict(train_py: str | None) -> dict:
    """train.py's module-level CONFIG dict ({} when there is none). A value that is not a literal (`10**30`, a call)
    is kept as Unresolved(its source text), so that the reader can say it did not read it instead of passing over
    the whole CONFIG in silence."""
    if not train_py:
        return {}
    from advisor.bundle.consistency import train_constants

    try:
        cfg = train_constants(train_py).get("CONFIG")
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return {}
    if isinstance(cfg, dict):
        return plan_switches(_with_later_writes(train_py, dict(cfg)))
    return plan_switches(_with_later_writes(train_py, _config_items(train_py))) if isinstance(cfg, str) else {}


def _with_later_writes(train_py: str, cfg: dict) -> dict:
    import ast

    try:
        tree = ast.parse(train_py)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return cfg
    return apply_config_writes(tree, cfg)


def apply_config_writes(tree, cfg: dict, unread: list[str] | None = None) -> dict:
    """CONFIG as the run sees it: the literal, then what the file writes into it afterwards. The generated train.py
    never writes CONFIG, so a write is the user's: `CONFIG["micro_batch"] = 16`, `CONFIG.update(micro_batch=16)`,
    `CONFIG.update({...})`, `CONFIG |= {...}`. At module level a literal value is applied in order; a write inside a
    function or of a value that is not a literal may or may not run: its key becomes Unresolved (said not read)."""
    import ast

    top = {id(node) for node in tree.body}

    literal = literal_value

    def is_config(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == "CONFIG"

    def writes(node: ast.AST) -> list[tuple[str | None, Any]]:
        """(key, value) pairs a statement writes into CONFIG; key None: it writes keys it does not name."""
        if isinstance(node, ast.Assign):
            return [(t.slice.value if isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str) else None,
                     literal(node.value)) for t in node.targets if isinstance(t, ast.Subscript) and is_config(t.value)]
        if isinstance(node, ast.AugAssign) and is_config(node.target) and isinstance(node.op, ast.BitOr):
            return _dict_items(node.value, literal)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) and is_config(node.target.value):
            key = node.target.slice
            return [(key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None,
                     Unresolved(ast.unparse(node)[:80]))]
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and is_config(node.value.func.value)
                and node.value.func.attr in ("update", "setdefault", "pop", "__setitem__")):
            call = node.value
            if call.func.attr != "update":
                key = call.args[0] if call.args else None
                return [(key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None,
                         Unresolved(ast.unparse(call)[:80]))]
            pairs = []
            for kw in call.keywords:  # `update(k=v)`, and `update(**{...})` key by key
                pairs += [(kw.arg, literal(kw.value))] if kw.arg is not None else _dict_items(kw.value, literal)
            for arg in call.args:
                pairs += _dict_items(arg, literal)
            return pairs
        return []

    for node in ast.walk(tree):
        for key, value in writes(node):
            if key is None:  # a key it does not name (`CONFIG.update(other)`): said, since it may change any
                if unread is not None:
                    unread.append(f"train.py: {ast.unparse(node)[:80]} writes CONFIG keys this does not read")
                continue
            cfg[key] = value if id(node) in top else Unresolved(f"written in a function: {value!r}"[:80])
    return cfg


def _dict_items(node, literal) -> list[tuple[str | None, Any]]:
    import ast

    if isinstance(node, ast.Dict):
        return [(k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else None, literal(v))
                for k, v in zip(node.keys, node.values, strict=True)]
    return [(None, None)]


def _config_items(train_py: str) -> dict:
    """CONFIG = {...} key by key: literal values as they are, other values as Unresolved source text."""
    import ast

    try:
        tree = ast.parse(train_py)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "CONFIG" and isinstance(node.value, ast.Dict)):
            out: dict = {}
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    continue
                out[key.value] = literal_value(value)
            return out
    return {}


def planned_values(plan_json: dict | None) -> dict:
    """The Plan fields plan.json records: its `plan` object, completed from its resolved `request`."""
    if not isinstance(plan_json, dict):
        return {}
    known = {f.name for f in fields(Plan)}
    plan = plan_json.get("plan") if isinstance(plan_json.get("plan"), dict) else {}
    req = plan_json.get("request") if isinstance(plan_json.get("request"), dict) else {}
    out = {k: v for k, v in plan.items() if k in known}
    for key in PLAN_JSON_REQUEST_FIELDS:
        if key not in out and req.get(key) is not None and key in known:
            out[key] = req[key]
    hw = plan_json.get("hardware") if isinstance(plan_json.get("hardware"), dict) else {}
    if "gpus_per_node" not in out and isinstance(hw.get("gpus_per_node"), int):
        out["gpus_per_node"] = hw["gpus_per_node"]
    return out


class _Picker:
    """Decides one field at a time (in dependency order) and records where each value came from."""

    def __init__(self, files: BundleFiles, overrides: dict[str, Any]) -> None:
        self.files = files
        self.config = config_dict(files.train_py)
        self.planned = planned_values(files.plan_json)
        self.overrides = overrides
        self.values: dict[str, Any] = {}
        self.reading = PlanReading(plan=None)  # type: ignore[arg-type]  # set once every field is picked

    def pick(self, name: str, found: tuple[Any, str] | None, default: Any, why: str = "", *,
             quiet: bool = False) -> Any:
        """The value of `name`: flag, then `found` (value, where) from a runtime file, then CONFIG, then plan.json,
        then `default` (recorded as an assumption with `why`)."""
        r = self.reading
        in_config = name in self.config
        if in_config and isinstance(self.config[name], Unresolved):
            raise InputFileError(f"train.py: CONFIG[{name!r}] is {str(self.config[name])!r}, an expression, not a "
                                 "literal value", hint="write the value itself in train.py's CONFIG (the reader never "
                                                       "runs train.py)")
        if in_config:
            problem = plan_value_problem({name: self.config[name]})
            if problem:
                raise InputFileError(f"train.py: CONFIG[{name!r}] {problem[1]}",
                                     hint="correct the value in train.py's CONFIG (the reader never runs train.py)")
        file_value: tuple[Any, str] | None = found
        if found is not None and in_config and not same_value(found[0], self.config[name]):
            r.vs_config.append(Difference(name, found[0], found[1], self.config[name], CONFIG_WHERE))
        if file_value is None and in_config:
            file_value = (self.config[name], CONFIG_WHERE)
        if file_value is not None and name in self.planned and not same_value(file_value[0], self.planned[name]):
            r.vs_plan_json.append(Difference(name, file_value[0], file_value[1], self.planned[name], PLAN_JSON_WHERE))
        if name in self.overrides:
            value, where = self.overrides[name], flag_name(name)
            shown = file_value or ((self.planned[name], PLAN_JSON_WHERE) if name in self.planned else None)
            if shown is not None and not same_value(shown[0], value):
                r.vs_flags.append(Difference(name, value, where, shown[0], shown[1]))
        elif file_value is not None:
            value, where = file_value
        elif name in self.planned:
            value, where = self.planned[name], PLAN_JSON_WHERE
        else:
            value, where = default, "default"
            if not quiet:
                self.files.assumptions.append(f"{name} = {default!r} ({why or PLAN_DEFAULTS_NOTE})")
        self.values[name] = value
        r.sources[name] = where
        return value

    def fixed(self, name: str, value: Any, where: str) -> Any:
        """A value the others decide (ZeRO stage 0 without DeepSpeed): no choice, nothing to compare."""
        self.values[name] = value
        self.reading.sources[name] = where
        return value


def same_value(a: Any, b: Any) -> bool:
    """Two statements of one plan field agree: numbers by value (8 == 8.0), booleans only with booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a) == bool(b) and type(a) is type(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return a == b


def read_plan(files: BundleFiles, target, overrides: dict[str, Any] | None = None) -> PlanReading:
    """The plan the files describe on `target` (see the module docstring for which value wins). InputFileError for a
    value of the wrong type or out of range, naming the file and key."""
    from advisor import resolve

    p = _Picker(files, dict(overrides or {}))
    a = files.trl_args
    has_trl = files.config_class is not None or files.trl_yaml is not None
    trl_where = (f"train.py {files.config_class}" if files.config_class else
                 files.trl_yaml_name or "the TRL YAML")

    unresolved: set[str] = set()

    def arg(name: str, kind: str | None = None, source: dict | None = None, label: str | None = None):
        """(value, where) of a TRL argument the files set, or None. An argument train.py takes from CONFIG is
        named by its CONFIG key: that is the line a user edits. One set to an expression the reader cannot evaluate
        (`per_device_train_batch_size=bs`) is None too, and said among the assumptions: the value the check uses
        instead (CONFIG, plan.json, a default) is not what the files state."""
        raw = (source or a).get(name)
        if isinstance(raw, Unresolved):
            if name not in unresolved:
                unresolved.add(name)
                files.assumptions.append(f"{name} = {_shown(raw)} in the files is not read: an expression the "
                                         "reader does not run (the check takes the field from CONFIG, plan.json "
                                         "or a default)")
            return None
        value = _arg(files, name, kind, source, label) if kind else raw
        if value is None:
            return None
        origin = label or files.trl_args_origin.get(name)
        if origin == "yaml":
            return value, f"{files.trl_yaml_name or 'the TRL YAML'} {name}"
        key = re.search(rf"\b{re.escape(name)}\s*=\s*CONFIG\[[\"'](\w+)[\"']\]", files.train_py or "")
        if key:
            return value, f"train.py CONFIG[{key.group(1)!r}] ({origin or 'TRL'} {name})"
        return value, f"train.py {origin or ''} {name}".replace("  ", " ")

    train_src = files.train_py or ""

    def config_read(field_name: str) -> bool:
        """train.py reads CONFIG[field] itself (a Liger switch applied through Liger's own API, say): then CONFIG
        says what runs, not TRL's default for a keyword train.py does not pass."""
        return field_name in p.config and any(f"CONFIG[{q}{field_name}{q}]" in train_src for q in "\"'")

    def trl_default(name: str, value: Any, field_name: str | None = None) -> tuple[Any, str] | None:
        """TRL's default for a key a TRL config leaves out: what runs (None without a TRL config, or when train.py
        decides the field from CONFIG itself)."""
        if not has_trl or (field_name is not None and config_read(field_name)) or name in unresolved:
            return None  # a keyword set to an expression is not TRL's default either
        return value, f"{trl_where} (TRL default for {name})"

    # ---- trainer and backend
    found = None
    if files.trainer:
        found = (files.trainer, f"train.py {files.config_class}" if files.config_class else "launch.sh")
    trainer = p.pick("trainer", found, "sft", "no TRL config class or `trl <trainer>` command found")
    generating = trainer in ("grpo", "rloo")

    acc = files.accelerate or {}
    acc_where = files.accelerate_name or "the accelerate YAML"
    dist = str(acc.get("distributed_type", "")).upper()
    fsdp = files.accelerate_fsdp
    found = None
    if dist == "DEEPSPEED":
        found = ("deepspeed", f"{acc_where} distributed_type")
    elif dist == "FSDP":
        found = ("fsdp2", f"{acc_where} distributed_type")
        if str(fsdp.get("fsdp_version", 1)) != "2":
            files.assumptions.append("FSDP version 1 in the files: planned as FSDP2 (the only FSDP this tool models)")
    elif dist == "MULTI_GPU":
        found = ("ddp", f"{acc_where} distributed_type")
    elif dist == "NO":
        found = ("single", f"{acc_where} distributed_type")
    elif files.ds_config is not None or a.get("deepspeed"):
        found = ("deepspeed", files.ds_config_name or "TrainingArguments(deepspeed=...)")
    elif a.get("fsdp"):
        found = ("fsdp2", f"{trl_where} fsdp")
    backend = p.pick("backend", found, "ddp" if target.world_size > 1 else "single",
                     "no accelerate YAML or DeepSpeed config")

    # ---- ZeRO stage and offload
    ds_where = files.ds_config_name or "ds_config.json"
    if backend == "deepspeed":
        stage, where = _int(files.zero.get("stage")), f"{ds_where} zero_optimization.stage"
        if stage is None:
            stage, where = _int(files.accelerate_ds.get("zero_stage")), f"{acc_where} zero_stage"
        found = (stage if 0 <= stage <= 3 else 3, where) if stage is not None else None
        p.pick("zero_stage", found, 2, "accelerate's default when the config does not set it")
        opt_block, par_block = files.zero.get("offload_optimizer"), files.zero.get("offload_param")
        stated = files.ds_config is not None or bool(files.accelerate_ds)
        opt_dev = _device(opt_block.get("device") if isinstance(opt_block, dict)
                          else files.accelerate_ds.get("offload_optimizer_device"))
        par_dev = _device(par_block.get("device") if isinstance(par_block, dict)
                          else files.accelerate_ds.get("offload_param_device"))
        offload = ("all" if par_dev != "none" else "optimizer" if opt_dev != "none" else "none")
        device = par_dev if par_dev != "none" else opt_dev
        where = f"{ds_where} zero_optimization" if files.ds_config is not None else f"{acc_where} deepspeed_config"
        offload = p.pick("offload", (offload, where) if stated else None, "none")
        if offload != "none" and device != "none":
            p.pick("offload_device", (device, where), "cpu")
        else:
            p.pick("offload_device", None, "cpu")
        overlap = files.zero.get("overlap_comm")
        stage3 = p.values["zero_stage"] == 3
        if isinstance(overlap, bool):
            found = (overlap, f"{ds_where} zero_optimization.overlap_comm")
        elif stated and "overlap_comm" not in files.zero:
            # a DeepSpeed config that does not set it runs DeepSpeedZeroConfig's default, on at stage 3 only
            # (accelerate's own config from the YAML sets none either), whatever CONFIG or plan.json say
            found = (stage3, f"{where} (overlap_comm not set: DeepSpeed's default)")
        else:
            found = None
        p.pick("overlap_comm", found, stage3, "DeepSpeed's default: on at ZeRO stage 3 only",
               quiet=p.values["zero_stage"] == 0)
    else:
        p.fixed("zero_stage", 0, f"backend {backend}")
        if backend == "fsdp2" and files.accelerate is not None:
            p.pick("offload", ("all" if _truthy(fsdp.get("fsdp_offload_params")) else "none",
                               f"{acc_where} fsdp_offload_params"), "none")
        elif backend == "fsdp2":
            p.pick("offload", None, "none")
        else:
            p.fixed("offload", "none", f"backend {backend}")
        p.pick("offload_device", None, "cpu", quiet=p.values["offload"] == "none")  # unused without offload

    # ---- method and adapter
    found = None
    if files.train_py is not None or files.trl_yaml is not None:
        method = "qlora" if files.quant_4bit() else "lora" if files.peft_enabled() else "full"
        found = (method, "train.py" if files.train_py is not None else trl_where)
    method = p.pick("method", found, "full")
    lora = files.configs.get("LoraConfig", {})
    found = arg("lora_r", "int") or arg("r", "int", lora, "LoraConfig")
    full = method == "full"  # a full plan's LoRA values are unused: defaulting them is no assumption
    lora_r = p.pick("lora_r", found, 16, "TRL ModelConfig default", quiet=full)
    found = arg("lora_alpha", "float") or arg("lora_alpha", "float", lora, "LoraConfig")
    if found is not None:
        found = (int(found[0]), found[1])
    p.pick("lora_alpha", found, 2 * int(lora_r), "2 x lora_r, TRL's default ratio", quiet=full)

    # ---- precision
    found, ambiguous = None, False
    if has_trl or files.model_dtype() is not None:
        fp16 = _truthy(a.get("fp16"))
        bf16 = a.get("bf16")
        bf16 = (not fp16) if bf16 is None or isinstance(bf16, Unresolved) else _truthy(bf16)
        dtype = files.model_dtype()
        if fp16:
            precision = "fp16-mixed"
        elif bf16:
            precision = "bf16" if dtype == "bfloat16" else "bf16-mixed"
            if dtype is None:
                files.assumptions.append("precision = 'bf16-mixed' (bf16=True with no model dtype: TRL loads the "
                                         "model in float32)")
        else:
            precision = "fp32"
        found = (precision, f"{trl_where} bf16/fp16 and the model dtype")
        if precision == "bf16" and method == "qlora" and backend in ("deepspeed", "fsdp2"):
            # sharded QLoRA loads in bf16 under either bf16 precision (render.qlora_sharded_dtype): the files cannot
            # tell them apart, and they run alike (fp32 adapters); CONFIG or plan.json says which was planned
            found, ambiguous = None, True
    p.pick("precision", found, "bf16", quiet=ambiguous)

    # ---- lengths and batch
    if generating:
        found = arg("max_completion_length", "int") or trl_default("max_completion_length",
                                                                  resolve.DEFAULT_MAX_COMPLETION, "max_completion_len")
        max_completion = p.pick("max_completion_len", found, resolve.DEFAULT_MAX_COMPLETION,
                                "GRPOConfig/RLOOConfig default")
        found = arg("vllm_max_model_length", "int")
        p.pick("seq_len", found, 2 * int(max_completion),
               "prompt length not in the files: assumed equal to the completion")
    else:
        p.fixed("max_completion_len", 0, f"{trainer} does not sample")
        found = arg("max_length", "int") or trl_default("max_length", resolve.DEFAULT_SEQ_LEN, "seq_len")
        p.pick("seq_len", found, resolve.DEFAULT_SEQ_LEN, "TRL default max_length")
    found = arg("per_device_train_batch_size", "int") or trl_default("per_device_train_batch_size", 8, "micro_batch")
    p.pick("micro_batch", found, resolve.DEFAULT_MICRO_BATCH, "TrainingArguments default")
    found = arg("gradient_accumulation_steps", "int") or trl_default("gradient_accumulation_steps", 1, "grad_accum")
    p.pick("grad_accum", found, 1, "TrainingArguments default")

    # ---- checkpointing, kernels, attention, packing
    found = None
    for key in ("activation_checkpointing", "gradient_checkpointing"):
        if key in a and not isinstance(a[key], Unresolved):
            found = (_truthy(a[key]), f"{files.trl_args_origin.get(key) or trl_where} {key}")
            break
    if found is None and has_trl and not config_read("grad_ckpt"):
        found = (True, f"{trl_where} (TRL default for gradient_checkpointing)")
    if _truthy(fsdp.get("fsdp_activation_checkpointing")):
        found = (True, f"{acc_where} fsdp_activation_checkpointing")  # FSDP checkpoints the layers itself
    elif (unsloth_ckpt := files.model_init_kwargs.get("use_gradient_checkpointing")) is not None \
            and not isinstance(unsloth_ckpt, Unresolved):
        # Unsloth's own checkpointing ("unsloth", True or False); an expression the reader cannot evaluate is left
        # to CONFIG (an Unresolved string is not "on")
        on = unsloth_ckpt.strip().lower() == "unsloth" if isinstance(unsloth_ckpt, str) else False
        found = (on or _truthy(unsloth_ckpt), "train.py use_gradient_checkpointing")
    p.pick("grad_ckpt", found, True, "TRL default gradient_checkpointing=True")
    found = arg("use_liger_kernel")
    if found is None and re.search(r"\bapply_liger_kernel_to_\w+", files.train_py or ""):
        # a generated train.py applies Liger through Liger's own API, gated by CONFIG["liger"]: what CONFIG says runs
        found = None if "liger" in p.config else (True, "train.py apply_liger_kernel_to_<model_type>")
    elif found is None:
        found = trl_default("use_liger_kernel", False, "liger")
    if found is not None:
        found = (_truthy(found[0]), found[1])
    p.pick("liger", found, False)
    attn = files.model_init_kwargs.get("attn_implementation") or a.get("attn_implementation")
    found = (attn, "train.py attn_implementation") if isinstance(attn, str) and not isinstance(
        attn, Unresolved) else None
    chosen_attn = p.pick("attn", found, "sdpa", "transformers' default when none is named")
    if not _known_attention(chosen_attn):
        where = p.reading.sources.get("attn", "the files")
        raise InputFileError(f"{where}: attn {_shown(str(chosen_attn))} is neither an attention implementation "
                             "transformers knows nor a hub kernel id",
                             hint="write one transformers knows (sdpa, flash_attention_2, eager, ...) or a hub "
                                  "kernel id org/name[@rev][:function], as --attn takes it")
    found = arg("packing") or (trl_default("packing", False, "packing") if trainer == "sft" else None)
    if found is not None:
        found = (_truthy(found[0]), found[1])
    p.pick("packing", found, False)

    # ---- parallelism and processes
    par = files.parallelism
    for name, key in (("sp_size", "parallelism_config_sp_size"), ("cp_size", "parallelism_config_cp_size")):
        value = _int(par.get(key))
        found = ((value or 1), f"{acc_where} {key}") if files.accelerate is not None else None
        p.pick(name, found, 1)
    procs = _int(acc.get("num_processes"))
    machines = _int(acc.get("num_machines"))
    nodes = p.pick("nodes", (machines, f"{acc_where} num_machines") if machines else None, target.nodes,
                   "the target's node count")

    found = None
    if generating and has_trl:
        use_vllm = _truthy(a.get("use_vllm"))
        mode = str(a.get("vllm_mode", "colocate")) if use_vllm else "none"
        found = (mode, f"{trl_where} use_vllm/vllm_mode")
    vllm_mode = p.pick("vllm_mode", found, "none") if generating else p.fixed("vllm_mode", "none",
                                                                                f"{trainer} does not sample")
    if vllm_mode == "server":
        served = files.vllm_server_gpus()
        p.pick("vllm_gpus", (served, "launch.sh vllm serve GPUs") if served else None,
               max(1, target.gpus_per_node - (procs // int(nodes) if procs and procs > 0 else
                                              target.gpus_per_node - 1)),
               "GPUs per node not used by training processes")
    else:
        p.fixed("vllm_gpus", 0, "no vLLM server")
    vllm_gpus = p.values["vllm_gpus"]
    gpus_found = None
    if procs and procs > 0 and files.accelerate is not None and "gpus_per_node" not in p.config:
        gpus_found = (max(1, procs // max(1, int(nodes))) + int(vllm_gpus), f"{acc_where} num_processes")
    p.pick("gpus_per_node", gpus_found, target.gpus_per_node, "the target's GPUs per node")
    p.pick("num_processes", (procs, f"{acc_where} num_processes") if procs and procs > 0 else None,
           max(1, int(p.values["gpus_per_node"]) - int(vllm_gpus)) * int(nodes),
           "one per training GPU of the target")

    # ---- trainer specifics
    ref = None
    if has_trl:
        full = p.values["method"] == "full"
        if trainer in ("dpo", "kto"):
            precompute = a.get("precompute_ref_log_probs")
            bema = any(m.startswith("trl.experimental.bema_for_ref_model") for m, _ in files.imports)
            ref = ("precompute" if _truthy(precompute) and not isinstance(precompute, Unresolved)
                   else "bema" if bema and full else "copy" if full else "none")
        elif trainer == "rloo" or (trainer == "grpo" and (_arg(files, "beta", "float") or 0) > 0):
            ref = "copy" if full else "none"
        elif trainer == "gkd":
            ref = "copy"  # the teacher model
        else:
            ref = "none"
    p.pick("ref_model", (ref, f"{trl_where} reference model settings") if ref else None, "none")
    unsloth = any(m == "unsloth" or m.startswith("unsloth.") for m, _ in files.imports)
    # no train.py: TRL's own scripts run the YAML (`trl sft`), without Unsloth
    p.pick("unsloth", (unsloth, "train.py imports") if files.train_py is not None else None, False, quiet=True)
    if generating:
        found = arg("num_generations", "int") or trl_default("num_generations",
                                                             resolve.DEFAULT_NUM_GENERATIONS.get(trainer, 2),
                                                             "num_generations")
        p.pick("num_generations", found, resolve.DEFAULT_NUM_GENERATIONS.get(trainer, 2))
    else:
        p.fixed("num_generations", 0, f"{trainer} does not sample")
    if vllm_mode == "colocate":
        found = arg("vllm_gpu_memory_utilization", "float") or trl_default("vllm_gpu_memory_utilization",
                                                                          resolve.DEFAULT_VLLM_MEM_FRACTION,
                                                                          "vllm_mem_fraction")
        p.pick("vllm_mem_fraction", found, resolve.DEFAULT_VLLM_MEM_FRACTION)
    else:
        p.fixed("vllm_mem_fraction", 0.0, "vLLM does not share the training GPUs")
    trc = files.model_init_kwargs.get("trust_remote_code", a.get("trust_remote_code"))
    found = (_truthy(trc), "train.py trust_remote_code") if trc is not None and not isinstance(
        trc, Unresolved) else None
    p.pick("trust_remote_code", found, False, quiet=True)  # off unless a file turns it on (transformers' default)

    # ---- every other Plan field (a GKD teacher, ...): CONFIG, then plan.json, then the Plan's own default
    for f in fields(Plan):
        if f.name not in p.values:
            p.pick(f.name, None, f.default, quiet=True)

    values = p.values
    found_problem = plan_value_problem(values, lower=False)
    if found_problem:
        name, problem = found_problem
        where = p.reading.sources.get(name, "the files")
        raise InputFileError(f"{files.root or 'the bundle'}: {where} gives {name} a value that {problem}",
                             hint="correct the value in train.py, the TRL YAML or the accelerate YAML")
    reading = p.reading
    reading.plan = Plan(**{f.name: values[f.name] for f in fields(Plan)})
    planned = p.planned
    if set(planned) >= {f.name for f in fields(Plan)} and not plan_value_problem(planned):
        try:
            reading.planned = Plan(**{f.name: planned[f.name] for f in fields(Plan)})
        except TypeError:
            reading.planned = None
    elif planned:
        # plan.json of an older release, missing a field: what was planned, completed with what runs
        try:
            reading.planned = Plan(**{f.name: planned.get(f.name, values[f.name]) for f in fields(Plan)})
        except TypeError:
            reading.planned = None
    return reading


# ---------------------------------------------------------------- values as the files give them

def _int(value: Any) -> int | None:
    """A whole number from a config value (`8`, `"8"`), None for anything else (booleans, text, 40-digit strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,18}", value.strip()):
        return int(value)
    return None



_ARG_HINT = "write the value as a literal number in the file (the reader never runs train.py)"


def _arg(files: BundleFiles, name: str, kind: str, source: dict | None = None, label: str | None = None) -> Any:
    """A numeric TRL/TrainingArguments value (`source`: another call's keywords, e.g. LoraConfig's) as the files
    give it; None when absent or an expression the reader cannot evaluate. A value of the wrong type (`"eight"`,
    true, a list) is an InputFileError naming the file and the key."""
    values = files.trl_args if source is None else source
    value = values.get(name)
    if value is None or isinstance(value, Unresolved):
        return None
    problem = safeio.value_problem(value, kind)
    if problem:
        origin = label or files.trl_args_origin.get(name)
        where = (files.trl_yaml_name or "the TRL YAML") if origin == "yaml" else f"train.py {origin or ''}".strip()
        raise InputFileError(f"{where}: {name} {problem}", hint=_ARG_HINT)
    return value



def _device(value: Any) -> str:
    text = str(value or "none").lower()
    return text if text in ("cpu", "nvme") else "none"


def _known_attention(attn: Any) -> bool:
    """What --attn accepts (advisor.resolve.checks.check_attn): a file's value is held to the flag's grammar."""
    from advisor.core import request as R

    return isinstance(attn, str) and (attn in R.ATTN_BUILTIN or bool(R.HUB_KERNEL_ID.match(attn)))


SHOWN_CHARS = 60
"""How much of a file's expression a report quotes (a 1 MB value is not echoed whole)."""


def _shown(text: str) -> str:
    """An expression from a file as a report quotes it: repr, cut to SHOWN_CHARS."""
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)
