"""Read a user's training configuration folder for `check --bundle DIR`.

Reads any of: `ds_config.json` (or any JSON with a `zero_optimization` block), an accelerate YAML (a YAML with
`distributed_type` or `compute_environment`), a TRL config YAML (TrlParser keys such as `model_name_or_path`,
`per_device_train_batch_size`), `train.py` (the keyword arguments of `XConfig(...)`, `TrainingArguments(...)` and
`from_pretrained(...)` calls, read with `ast`, never executed), `launch.sh`, `requirements.txt` and `plan.json`.
From them it builds a best-effort Plan; every value it had to assume is listed in `assumptions`.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Any

from advisor.bundle.consistency import accelerate_launch_arguments, command_flag
from advisor.bundle.readback import (  # noqa: F401  (read API: the plan's limits, shared with verify)
    PLAN_DEFAULTS_NOTE,
    _int,
    apply_config_writes,
    plan_value_problem,
)
from advisor.core import safeio
from advisor.core.errors import InputFileError
from advisor.core.files import BundleFiles, Unresolved, dtype_name, model_id  # noqa: F401  (read API)

READS = ("ds_config.json (or any *.json with zero_optimization)", "an accelerate YAML (distributed_type)",
         "a TRL config YAML (model_name_or_path, per_device_train_batch_size, ...)", "train.py", "launch.sh",
         "requirements.txt", "plan.json")
MAX_FILE_BYTES = 2_000_000
"""Larger files are not configuration files (a checkpoint or a dataset dropped in the folder)."""

TRAINER_OF_CONFIG = {"SFTConfig": "sft", "DPOConfig": "dpo", "GRPOConfig": "grpo", "RLOOConfig": "rloo",
                     "KTOConfig": "kto", "GKDConfig": "gkd", "DistillationConfig": "gkd"}
TRAINER_OF_CLASS = {k.replace("Config", "Trainer"): v for k, v in TRAINER_OF_CONFIG.items()}
ARGUMENT_CLASSES = (*TRAINER_OF_CONFIG, "TrainingArguments", "ModelConfig", "ScriptArguments", "RewardConfig",
                    "OnlineDPOConfig")
"""Calls whose keyword arguments form the TrainingArguments-like namespace (TrlParser merges them the same way)."""
TRL_YAML_KEYS = frozenset({
    "model_name_or_path", "per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate",
    "output_dir", "dataset_name", "max_length", "num_train_epochs", "max_steps", "use_peft", "bf16",
    "gradient_checkpointing", "num_generations", "max_completion_length", "use_vllm", "lora_r", "max_seq_length",
})
ACCELERATE_MARKERS = frozenset({"distributed_type", "compute_environment"})


# ---------------------------------------------------------------- reading


ESSENTIAL_FILES = frozenset({"plan.json", "ds_config.json", "accelerate.yaml", "accelerate.yml", "train.py"})
MAX_YAML_BYTES = 64 * 1024
"""A YAML configuration file (an accelerate config, a TRL recipe) is a few KB. YAML is parsed by a pure-Python loader
(safeio.BoundedSafeLoader): a 1.8 MB one took 46 s to check on one CPU core (about 40 KB/s), a hang. Larger YAML
files are skipped (noted), or refused when they are one of ESSENTIAL_FILES."""
MAX_FOLDER_FILES = 200
"""Files of the kinds this reads that one folder may offer (a bundle has about ten): past it the bundle's own names
are read first and the rest is skipped, with one note, so a folder of 20,000 small files does not hang `check`."""
KNOWN_FIRST = ("plan.json", "train.py", "accelerate.yaml", "accelerate.yml", "ds_config.json", "launch.sh",
               "requirements.txt")
"""Files whose absence changes the plan the rules judge (backend, ZeRO stage, trainer): one that is there but cannot
be read is a usage error, not a note, so that a check never passes on a configuration it did not see."""


def read_folder(path: str) -> BundleFiles:
    """Read every configuration file of a folder; InputFileError for a missing folder, a malformed file, an
    essential file (ESSENTIAL_FILES) that cannot be read, or a folder with none of the files this reads. Other files
    that cannot be read (larger than MAX_FILE_BYTES, a named pipe, a device, not UTF-8) are skipped and each is
    named in `notes`."""
    if not os.path.exists(path):
        raise InputFileError(f"{path}: no such folder", hint="pass the folder that holds ds_config.json, "
                                                              "accelerate.yaml, train.py ...")
    if not os.path.isdir(path):
        raise InputFileError(f"{path}: not a folder", hint="check --bundle takes a folder, not a file")
    texts: dict[str, str] = {}
    notes: list[str] = []
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise InputFileError(f"{path}: cannot list the folder ({exc.strerror or exc})",
                             hint="check the folder's permissions") from None
    wanted = [n for n in names if _interesting(n)]
    if len(wanted) > MAX_FOLDER_FILES:
        known = [n for n in KNOWN_FIRST if n in wanted]
        rest = [n for n in wanted if n not in known]
        wanted = known + rest[:MAX_FOLDER_FILES - len(known)]
        notes.append(f"read {len(wanted)} of the folder's {len(known) + len(rest)} .json/.yaml/.py/.sh/.txt files "
                     f"(at most {MAX_FOLDER_FILES}: the bundle's own names first, then by name)")
    for name in wanted:
        full = os.path.join(path, name)
        limit = MAX_YAML_BYTES if name.endswith((".yaml", ".yml")) else MAX_FILE_BYTES
        try:
            texts[name] = safeio.read_text(full, max_bytes=limit, what="bundle file")
        except safeio.UnsafeInputError as exc:
            if name in ESSENTIAL_FILES:
                raise InputFileError(exc.message, hint=_UNREADABLE_HINT) from None
            notes.append(f"skipped {name}: {_skip_reason(exc, full)}")
    files = parse_texts(texts, root=path)
    files.notes = notes + files.notes
    if not _has_training_config(files):
        raise InputFileError(f"no training configuration files in {path}",
                             hint="check --bundle reads: " + "; ".join(READS))
    return files


_UNREADABLE_HINT = ("configuration files are UTF-8 text files of at most 2 MB (not a named pipe, device or folder); "
                    "replace it with the real file")


def _skip_reason(exc: safeio.UnsafeInputError, full: str) -> str:
    """Why a file was not read, without repeating its path: the error message after the path."""
    text = exc.message
    for prefix in (f"bundle file {full} ", f"cannot read bundle file {full}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def _interesting(name: str) -> bool:
    return name.endswith((".json", ".yaml", ".yml", ".py", ".sh", ".txt")) and not name.startswith(".")


def _has_training_config(files: BundleFiles) -> bool:
    return any((files.ds_config, files.accelerate, files.trl_yaml, files.plan_json, files.config_class,
                files.trl_args, files.trainer))


def parse_texts(texts: dict[str, Any], root: str | None = None) -> BundleFiles:
    """Parse a {file name: text} mapping (values may also be dicts, already parsed: used by the rule tests)."""
    files = BundleFiles(root=root, names=tuple(sorted(texts)))
    jsons: dict[str, dict] = {}
    yamls: dict[str, dict] = {}
    py_names = [n for n in texts if n.endswith(".py")]
    train_name = "train.py" if "train.py" in texts else next(
        (n for n in py_names if "Config(" in str(texts[n]) or "Trainer(" in str(texts[n])), None)
    sh_names = [n for n in texts if n.endswith(".sh")]
    sh_name = "launch.sh" if "launch.sh" in texts else (sh_names[0] if sh_names else None)
    for name, text in texts.items():
        where = os.path.join(root, name) if root else name
        if name.endswith(".json"):
            jsons[name] = text if isinstance(text, dict) else _load_json(text, where)
        elif name.endswith((".yaml", ".yml")):
            yamls[name] = text if isinstance(text, dict) else _load_yaml(text, where)
        elif name == train_name:
            files.train_py = text
            _read_train_py(files, text, where)
        elif name == sh_name:
            files.launch_sh = text
        elif name == "requirements.txt":
            files.requirements = _read_requirements(text)

    if "plan.json" in jsons:
        files.plan_json = jsons.pop("plan.json")
        check_plan_json(files.plan_json, os.path.join(root, "plan.json") if root else "plan.json")
    for name, data in yamls.items():
        if ACCELERATE_MARKERS & set(data) and files.accelerate is None:
            files.accelerate, files.accelerate_name = data, name
        elif (TRL_YAML_KEYS & set(data)) and files.trl_yaml is None:
            files.trl_yaml, files.trl_yaml_name = data, name
    _merge_trl_args(files)
    _pick_ds_config(files, jsons)
    _apply_launch_flags(files)
    _note_unmodelled_settings(files)
    if files.trainer is None and files.launch_sh:
        m = re.search(r"\btrl\s+(sft|dpo|grpo|rloo|kto)\b", files.launch_sh)
        if m:
            files.trainer = m.group(1)
    return files


def _load_json(text: str, where: str) -> dict:
    try:
        data = safeio.load_json(text, where=where)
    except safeio.UnsafeInputError as exc:
        message = exc.message
        if exc.syntax:
            line, column, expected = exc.syntax
            message = f"{where}: invalid JSON at line {line} column {column}: {expected}"
        raise InputFileError(message, hint="fix the syntax (JSON has no comments, trailing commas, NaN or Infinity)") \
            from None
    if not isinstance(data, dict):
        raise InputFileError(f"{where}: expected a JSON object at the top level, found {type(data).__name__}",
                             hint=_json_object_hint(os.path.basename(where)))
    return data


def _json_object_hint(name: str) -> str:
    """What the JSON file of this name holds, for a file that is not an object: the bundle's own records (plan.json,
    model_config.json, teacher_config.json) come back from generate, a DeepSpeed config is rewritten."""
    if name.startswith("ds_config") or name.startswith("ds_"):
        return "a DeepSpeed config is an object such as {\"zero_optimization\": {...}}"
    if name in ("plan.json", "model_config.json", "teacher_config.json"):
        return f"{name} is written by trl-advisor generate: write the bundle again with generate --out DIR --force"
    return "each JSON file of a bundle is an object ({...}) at the top level"


def _load_yaml(text: str, where: str) -> dict:
    try:
        data = safeio.load_yaml(text, where=where)
    except safeio.UnsafeInputError as exc:
        # a value the reader refuses (.inf, .nan, a 5,000-digit integer, too deep) parsed fine: its hint is the value's
        refused_number = "invalid YAML" not in exc.message and ("number" in exc.message or "digits" in exc.message)
        raise InputFileError(exc.message, hint="write a finite number of ordinary size, or remove the key"
                             if refused_number else "fix the indentation or quoting; aliases (*name) are not "
                                                    "accepted: write the values out") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputFileError(f"{where}: expected a YAML mapping at the top level, found {type(data).__name__}",
                             hint="accelerate and TRL config files are key: value mappings")
    return data


def _read_requirements(text: str) -> dict[str, str | None]:
    """name -> exact version for `name==X`; name -> None for a range (`name>=X,<Y`): no single version."""
    out: dict[str, str | None] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(.*)$", line)
        if not m or not line:
            continue
        name, spec = m.group(1).lower().replace("_", "-"), m.group(2).split(";", 1)[0].strip()
        exact = re.fullmatch(r"==\s*([0-9][^\s,]*)", spec)
        out[name] = exact.group(1) if exact else None
    return out


def _pick_ds_config(files: BundleFiles, jsons: dict[str, dict]) -> None:
    """ds_config.json by name; else the file the accelerate YAML or TRL args point to; else any JSON with a
    DeepSpeed block."""
    wanted: list[str] = ["ds_config.json"]
    ref = files.accelerate_ds.get("deepspeed_config_file")
    if isinstance(ref, str):
        wanted.insert(0, os.path.basename(ref))
    arg = files.trl_args.get("deepspeed") if files.trl_args else None
    if isinstance(arg, dict):
        files.ds_config, files.ds_config_name = arg, "TrainingArguments(deepspeed=...)"
        return
    if isinstance(arg, str):
        wanted.insert(0, os.path.basename(arg))
    for name in wanted:
        if name in jsons:
            files.ds_config, files.ds_config_name = jsons[name], name
            return
    for name, data in jsons.items():
        if "zero_optimization" in data or "train_micro_batch_size_per_gpu" in data or "train_batch_size" in data:
            files.ds_config, files.ds_config_name = data, name
            return


def _merge_trl_args(files: BundleFiles) -> None:
    merged: dict = {}
    origin: dict = {}
    if files.trl_yaml:
        for k, v in files.trl_yaml.items():
            merged[k] = v
            origin[k] = "yaml"
    for cls in ARGUMENT_CLASSES:
        for k, v in files.configs.get(cls, {}).items():
            merged[k] = v
            origin[k] = cls
    files.trl_args, files.trl_args_origin = merged, origin


# ---------------------------------------------------------------- train.py


def _read_train_py(files: BundleFiles, text: str, where: str) -> None:
    try:
        _read_train_tree(files, text, where)
        _compile_depth(text, where)
    except (RecursionError, MemoryError):
        # CPython's parser and ast.unparse recurse once per nesting level: `x = 1+1+...` 500 terms deep, or
        # thousands of nested unary operators, exhaust the stack. No training script is written like that.
        raise InputFileError(f"{where}: expressions nested too deeply to read",
                             hint="the file is read with ast (never run); split the deeply nested expression") \
            from None


MAX_NESTING = 100
"""Deepest AST nesting a train.py may have to be read: CPython's compiler recurses once or more per level, so a
deeper expression (`x = 1+1+...` hundreds of terms) compiles or not depending on how deep the caller's stack already
is; the reader and the cross-file check then disagree. Generated files nest under 20 levels."""


def _compile_depth(text: str, where: str) -> None:
    """Raise RecursionError when train.py nests deeper than MAX_NESTING (counted without recursion), so that every
    such file is refused alike, as one too deeply nested to read. A file that does not parse is the reader's own
    finding, not this check's."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise RecursionError(f"{where}: nested deeper than {MAX_NESTING}")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


UNMODELLED_DS_KEYS = {"reduce_bucket_size": "auto", "allgather_bucket_size": None,
                      "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
                      "stage3_max_live_parameters": 1_000_000_000, "stage3_max_reuse_distance": 1_000_000_000}
"""ZeRO settings the memory estimate takes at the value the bundles write (advisor/bundle/render.py; None: DeepSpeed's
default, which the bundles leave): the buckets at the HF integration's "auto" (advisor/model/buffers.py), every
partitioned parameter gathered per module. A file with another value runs with memory the estimate does not count."""
UNMODELLED_FSDP_KEYS = {"fsdp_reshard_after_forward": True}
"""FSDP2 settings the estimate takes as the bundles write them (buffers.py: layers resharded after their forward)."""


def _note_unmodelled_settings(files: BundleFiles) -> None:
    """Say where the files set a memory knob the estimate does not read: the figures are for the bundles' value."""
    zero = (files.ds_config or {}).get("zero_optimization")
    for key, assumed in UNMODELLED_DS_KEYS.items():
        if isinstance(zero, dict) and key in zero and zero[key] != assumed:
            shown = "DeepSpeed's default" if assumed is None else repr(assumed)
            files.assumptions.append(f"{files.ds_config_name or 'ds_config.json'} zero_optimization.{key} is "
                                     f"{str(zero[key])[:40]}: the memory estimate is for {shown}, not this value")
    fsdp = files.accelerate_fsdp
    for key, assumed in UNMODELLED_FSDP_KEYS.items():
        if key in fsdp and fsdp[key] != assumed:
            files.assumptions.append(f"{files.accelerate_name or 'accelerate.yaml'} fsdp_config.{key} is "
                                     f"{str(fsdp[key])[:40]}: the memory estimate is for {assumed!r}, not this value")


LAUNCH_FLAG_KEYS = {"num_processes": int, "num_machines": int, "mixed_precision": str}
"""`accelerate launch` flags that override the config file's key of the same name (accelerate
commands/launch.py: command-line arguments win over the config file's defaults)."""


def _apply_launch_flags(files: BundleFiles) -> None:
    """launch.sh's `accelerate launch --num_processes 4 ...` (or `--num-processes=4`, in the LAUNCH=(...) array the
    bundles write and the `LAUNCH+=(...)` lines after it): what accelerate runs with, over accelerate.yaml's value,
    noted as read from launch.sh. Read as the arguments of the accelerate launch the script runs
    (consistency.accelerate_launch_arguments), so that the same text in a comment or a message is not taken."""
    if not files.launch_sh:
        return
    found: dict[str, Any] = {}
    arguments = accelerate_launch_arguments(files.launch_sh)
    for key, kind in LAUNCH_FLAG_KEYS.items():
        value = command_flag(arguments, key)
        if value is None:
            continue
        if kind is int:
            if not (value.isascii() and value.isdigit()):
                files.assumptions.append(f"launch.sh: --{key} {value[:40]} is not a number this reads")
                continue
            found[key] = int(value)
        else:
            found[key] = value
    if found:
        files.accelerate = {**(files.accelerate or {}), **found}
        where = files.accelerate_name or "the accelerate YAML"
        files.accelerate_name = f"{where} (overridden by launch.sh's {', '.join(f'--{k}' for k in found)})"


def _read_train_tree(files: BundleFiles, text: str, where: str) -> None:
    try:
        tree = ast.parse(text, filename=where)
    except SyntaxError as exc:
        # a NUL byte fails before the tokenizer counts lines: lineno is None, and the byte is what to name
        at = f" at line {exc.lineno}" if exc.lineno else (f" at line {text.count(chr(10), 0, text.index(chr(0))) + 1}"
                                                          if "\0" in text else "")
        raise InputFileError(f"{where}: Python syntax error{at}: {exc.msg}",
                             hint="the file is read with ast (never run); fix the syntax") from exc
    constants = _module_constants(tree)
    unread: list[str] = []
    apply_config_writes(tree, {}, unread)
    files.assumptions.extend(dict.fromkeys(unread))
    calls: set[str] = set()
    imports: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imports += [(node.module or "", a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            imports += [(a.name, "") for a in node.names]
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if not name:
                continue
            calls.add(name)
            last = name.rsplit(".", 1)[-1]
            if last.endswith("Config") or last == "TrainingArguments":
                kwargs = _kwargs(node, constants)
                files.configs.setdefault(last, {}).update(kwargs)
                if last in TRAINER_OF_CONFIG and files.config_class is None:
                    files.config_class = last
                    files.trainer = TRAINER_OF_CONFIG[last]
            elif last == "from_pretrained":
                files.from_pretrained.append(_kwargs(node, constants))
                first = _value(node.args[0], constants) if node.args else None
                for candidate in (first, files.from_pretrained[-1].get("model_name"),
                                  files.from_pretrained[-1].get("pretrained_model_name_or_path")):
                    if isinstance(candidate, str) and not isinstance(candidate, Unresolved):
                        files.model_ids.append(candidate)
                        break
            elif last in TRAINER_OF_CLASS or last.endswith("Trainer"):
                kwargs = _kwargs(node, constants)
                if isinstance(kwargs.get("model"), str) and not isinstance(kwargs["model"], Unresolved):
                    files.model_ids.append(kwargs["model"])  # SFTTrainer(model="Qwen/Qwen2.5-0.5B", ...)
                if last in TRAINER_OF_CLASS and files.trainer is None:
                    files.trainer = TRAINER_OF_CLASS[last]
    files.calls = frozenset(calls)
    files.imports = tuple(imports)


def _module_constants(tree: ast.Module) -> dict[str, Any]:
    """`NAME = <literal>` at module level, so that `max_length=MAX_LEN` reads as the number."""
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _value(node.value, out)
            if not isinstance(value, Unresolved):
                out[node.targets[0].id] = value
            elif isinstance(node.value, ast.IfExp):
                either = [_value(b, out) for b in (node.value.body, node.value.orelse)]
                if all(isinstance(v, str) and not isinstance(v, Unresolved) for v in either):
                    out[_IFEXP_PREFIX + node.targets[0].id] = either
    if isinstance(out.get("CONFIG"), dict):  # what the file writes into CONFIG afterwards (a user's edit)
        out["CONFIG"] = apply_config_writes(tree, dict(out["CONFIG"]))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            value = _function_result(node, out)
            if value is not _NO_RESULT:
                out[_FUNC_PREFIX + node.name] = value
    for node in ast.walk(tree):
        # names assigned inside functions (`attn = CONFIG["attn"]`): the first assignment is the main path
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id not in out):
            value = _value(node.value, out)
            if not isinstance(value, Unresolved) and not isinstance(value, dict):
                out.setdefault(_LOCAL_PREFIX + node.targets[0].id, value)
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and (isinstance(node.value, ast.Dict) or (isinstance(node.value, ast.Call)
                                                          and _dotted(node.value.func) == "dict"))):
            value = _value(node.value, out)
            if isinstance(value, dict):
                out[_DICT_PREFIX + node.targets[0].id] = value
    return out


def _kwargs(call: ast.Call, constants: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments as values; `**name` is expanded when `name = dict(...)` / `{...}` was assigned in the file."""
    out: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is not None:
            out[kw.arg] = _value(kw.value, constants)
        elif isinstance(kw.value, ast.Name) and isinstance(constants.get(_DICT_PREFIX + kw.value.id), dict):
            out.update(constants[_DICT_PREFIX + kw.value.id])
        elif isinstance(kw.value, ast.Dict):  # `**{NAME: value}`: keyword names chosen at run time
            for key_node, value_node in zip(kw.value.keys, kw.value.values, strict=False):
                if key_node is None:
                    continue
                value = _value(value_node, constants)
                for name in _key_names(key_node, constants):
                    out[name] = value
    return out


def _key_names(node: ast.AST, constants: dict[str, Any]) -> list[str]:
    """The keyword names a `**{key: ...}` key can be: its value when known; for a name bound to `"a" if ... else
    "b"` (train.py's CHECKPOINTING_ARG: transformers' new and old name of one TrainingArguments field), both."""
    key = _value(node, constants)
    if isinstance(key, str) and not isinstance(key, Unresolved):
        return [key]
    if isinstance(node, ast.Name) and isinstance(constants.get(_IFEXP_PREFIX + node.id), list):
        return constants[_IFEXP_PREFIX + node.id]
    return []


_DICT_PREFIX = "\0dict:"
_IFEXP_PREFIX = "\0either:"
_FUNC_PREFIX = "\0func:"
_LOCAL_PREFIX = "\0local:"
_NO_RESULT = object()


def _function_result(fn: ast.FunctionDef, constants: dict[str, Any]) -> Any:
    """What a small module-level helper returns, when the file says it without running: every `return` gives the
    same literal (e.g. `return None`), or each returns None or a dict display (`{"": local_rank}`: a per-process
    placement, read as a dict whose values are unresolved)."""
    returns = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if not returns:
        return _NO_RESULT
    values = [_value(r, constants) if r is not None else None for r in returns]
    if all(not isinstance(v, Unresolved) for v in values) and all(v == values[0] for v in values):
        return values[0]
    if all(r is None or (isinstance(r, ast.Constant) and r.value is None) or isinstance(r, ast.Dict) for r in returns):
        dicts = [v for v in values if isinstance(v, dict)]
        return dicts[0] if dicts else None
    return _NO_RESULT
"""Key prefix for dict-valued assignments anywhere in the file (`common = dict(...)` inside a function)."""


def _value(node: ast.AST, constants: dict[str, Any]) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, ast.Name) and _LOCAL_PREFIX + node.id in constants:
        return constants[_LOCAL_PREFIX + node.id]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        container = constants.get(node.value.id)
        key = _value(node.slice, constants)
        if isinstance(container, dict) and not isinstance(key, Unresolved) and key in container:
            return container[key]
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
        # `CONFIG["liger"] and not args.cpu`: runtime flags (args.*) are taken as true for a GPU run
        known = [v for v in (_value(e, constants) for e in node.values) if not isinstance(v, Unresolved)]
        if known:
            falsy = [v for v in known if not v]
            return falsy[0] if falsy else known[-1]
    if isinstance(node, ast.IfExp):
        # `use_gradient_checkpointing="unsloth" if CONFIG["grad_ckpt"] else False`: a known test picks its branch
        test = _value(node.test, constants)
        if not isinstance(test, Unresolved) and isinstance(test, (str, int, float, bool, type(None))):
            return _value(node.body if test else node.orelse, constants)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        operand = _value(node.operand, constants)
        if not isinstance(operand, Unresolved) and isinstance(operand, (str, int, float, bool, type(None))):
            return not operand
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq))
            and len(node.comparators) == 1):
        # `precompute_ref_log_probs=CONFIG["ref_model"] == "precompute"`: both sides known, so is the answer
        left, right = _value(node.left, constants), _value(node.comparators[0], constants)
        if not isinstance(left, Unresolved) and not isinstance(right, Unresolved) and \
                isinstance(left, (str, int, float, bool, type(None))) and \
                isinstance(right, (str, int, float, bool, type(None))):
            return (left == right) if isinstance(node.ops[0], ast.Eq) else (left != right)
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        # `4 * 2`, `CONFIG["micro_batch"] * 8`: arithmetic of literals and known values (advisor.bundle.literals)
        from advisor.bundle.literals import literal_value

        return literal_value(node, leaf=lambda n: _value(n, constants))
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return node.attr  # torch.bfloat16 -> "bfloat16"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and _FUNC_PREFIX + node.func.id in constants:
        return constants[_FUNC_PREFIX + node.func.id]
    if isinstance(node, ast.Call) and _dotted(node.func) == "dict" and not node.args:
        return {k: v for k, v in _kwargs(node, constants).items()}
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values, strict=False):
            if k is None:
                continue
            key = _value(k, constants)
            if isinstance(key, (str, int)):
                out[key] = _value(v, constants)
        return out
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e, constants) for e in node.elts]
    return Unresolved(ast.unparse(node))


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):  # AutoModel.from_pretrained(...).to(...)
        inner = _dotted(node.func)
        return ".".join([inner, *reversed(parts)]) if inner else None
    return None


# ---------------------------------------------------------------- files -> plan

_PLAN_JSON_HINT = "re-create the bundle with trl-advisor generate --force, or correct the value in plan.json"


def _section(doc: dict, key: str, where: str) -> dict:
    """doc[key] when it is an object, {} when absent or null; InputFileError naming the key otherwise."""
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputFileError(f"{where}: {key} is {safeio.shown(value)}, expected an object", hint=_PLAN_JSON_HINT)
    return value


def check_plan_json(doc: dict, where: str = "plan.json") -> None:
    """The plan.json values that readers use before any rule runs: `model.id` and `request.model` are text,
    `hardware.gpu` is text, `hardware.gpus_per_node` / `nodes` / `gpu_memory_bytes` are whole numbers in range,
    `plan`'s values fit the Plan fields, `files` is a list of names. InputFileError names the first wrong key."""
    from advisor.core import request

    def fail(key: str, problem: str) -> None:
        raise InputFileError(f"{where}: {key} {problem}", hint=_PLAN_JSON_HINT)

    for section in ("model", "request", "hardware", "plan", "memory", "speed"):
        _section(doc, section, where)
    model = _section(doc, "model", where)
    for key, value in (("model.id", model.get("id")), ("request.model", _section(doc, "request", where).get("model"))):
        if value is not None:
            problem = safeio.value_problem(value, "str") or (request.text_problem(value) if len(value) <= 1000
                                                             else "is longer than 1000 characters")
            if problem:
                fail(key, problem)
    hw = _section(doc, "hardware", where)
    gpus, nodes = request.LIMITS["gpus"], request.LIMITS["nodes"]
    for key, kind, low, high in (("gpu", "str", None, None), ("gpus_per_node", "int", gpus[0], gpus[1]),
                                 ("nodes", "int", nodes[0], nodes[1]),
                                 ("gpu_memory_bytes", "int", 0, 1 << 44)):  # 16 TiB, as hw_probe's bound
        if hw.get(key) is not None:
            problem = safeio.value_problem(hw[key], kind, low=low, high=high)
            if problem:
                fail(f"hardware.{key}", problem)
    if hw.get("gpu") is not None:
        # the GPU the plan was made for: check and verify predict on it, so a name the catalogue lacks is the
        # file's fault, named as such (not the --gpu flag's "unknown GPU")
        from advisor.catalog import resolve_gpu
        from advisor.core.errors import AdvisorError

        try:
            resolve_gpu(hw["gpu"])
        except AdvisorError as exc:
            why = "is ambiguous" if "ambiguous" in exc.message else "is not a GPU of the catalogue"
            fail("hardware.gpu", f"is {safeio.shown(hw['gpu'])}, which {why} (`trl-advisor gpus` lists them)")
    plan = _section(doc, "plan", where)
    found = plan_value_problem(plan)
    if found:
        fail(f"plan.{found[0]}", found[1])
    listed = doc.get("files")
    if listed is not None and not (isinstance(listed, list) and all(isinstance(n, str) for n in listed)):
        fail("files", f"is {safeio.shown(listed)}, expected a list of file names")


def hardware_hint(files: BundleFiles) -> dict:
    """GPU id, GPUs per node and nodes as far as the files say (plan.json, then the accelerate YAML). Values are
    type- and range-checked: a wrong one is an InputFileError naming the file and the key."""
    from advisor.core import request

    out: dict = {}
    hw = (files.plan_json or {}).get("hardware")
    if isinstance(hw, dict):  # check_plan_json ran on it when the folder was read
        out.update({k: hw[k] for k in ("gpu", "gpus_per_node", "nodes") if hw.get(k)})
    acc = files.accelerate or {}
    where = files.accelerate_name or "the accelerate YAML"
    gpus, nodes = request.LIMITS["gpus"], request.LIMITS["nodes"]
    machines = _int(acc.get("num_machines")) or 1
    procs = _int(acc.get("num_processes"))
    if not 1 <= machines <= nodes[1]:
        raise InputFileError(f"{where}: num_machines is {machines}, outside 1 to {nodes[1]}",
                             hint="num_machines counts the nodes of the job")
    if procs is not None and not 0 <= procs <= gpus[1] * nodes[1]:
        raise InputFileError(f"{where}: num_processes is {procs}, outside 0 to {gpus[1] * nodes[1]:,}",
                             hint="num_processes counts the training processes over all nodes (one per GPU)")
    if "nodes" not in out and machines:
        out["nodes"] = machines
    if "gpus_per_node" not in out and procs and procs > 0:
        per_node = max(1, procs // max(1, out.get("nodes", 1))) + (files.vllm_server_gpus() or 0)
        out["gpus_per_node"] = min(per_node, gpus[1])
    return out


def plan_from_files(files: BundleFiles, model, target, overrides: dict | None = None):
    """The Plan the files describe (advisor.bundle.readback.read_plan: the value that takes effect for each field,
    train.py's CONFIG and plan.json for what no runtime file states, documented defaults otherwise, each default
    appended to `files.assumptions`)."""
    from advisor.bundle.readback import read_plan

    return read_plan(files, target, overrides).plan
