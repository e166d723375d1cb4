"""Checks a bundle: each config file against its JSON schema, and the files against each other (what train.py's
CONFIG says, accelerate.yaml, ds_config.json, launch.sh and plan.json must agree with)."""

from __future__ import annotations

import ast
import json
import math
import re
import shlex
from dataclasses import MISSING
from functools import cache, lru_cache
from importlib import resources

import jsonschema

from advisor.bundle.render import dtype_settings, sequence_split
from advisor.core import safeio
from advisor.core.plan import Plan
from advisor.core.request import REF_MODELS
from advisor.core.specs import ModelSpec

REQUIRED_FILES = ("README.md", "plan.json", "train.py", "accelerate.yaml", "launch.sh", "requirements.txt",
                  "model_config.json")
PLAN_JSON_KEYS = ("backend", "zero_stage", "offload", "method", "precision", "micro_batch", "grad_accum", "grad_ckpt",
                  "liger", "sp_size", "cp_size", "vllm_mode", "num_processes", "nodes")
"""The `plan` keys of `generate --json` (CONTRACT.md)."""

_DISTRIBUTED = {"single": "NO", "ddp": "MULTI_GPU", "deepspeed": "DEEPSPEED", "fsdp2": "FSDP"}
_MIXED = {"bf16": "bf16", "bf16-mixed": "bf16", "fp16-mixed": "fp16", "fp32": "no"}


@cache
def load_schema(name: str) -> dict:
    """advisor/bundle/schemas/NAME as a dict (package data)."""
    return json.loads(resources.files("advisor.bundle.schemas").joinpath(name).read_text(encoding="utf-8"))


def _whole_number(checker, instance) -> bool:
    """JSON Schema's "integer" as the libraries read it: an int, never 8.0 or true. jsonschema's own integer type
    takes 8.0 (a float with no fraction), which accelerate passes on as `--nproc_per_node 8.0` and torchrun refuses
    (torch/distributed/run.py determine_local_world_size: "Unsupported nproc_per_node value")."""
    return isinstance(instance, int) and not isinstance(instance, bool)


_VALIDATOR = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _whole_number))


def schema_errors(document, schema_name: str) -> list[str]:
    validator = _VALIDATOR(load_schema(schema_name))
    out = []
    for err in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(top)"
        out.append(f"{where}: {err.message}")
    return out


# ------------------------------------------------------------------------------------------------- plan invariants

UNKNOWN = "unknown "
"""How plan_invariants starts a problem of a value outside its field's choices (`precision` 'fp8')."""


def _object(value) -> dict:
    """A section of a config file (deepspeed_config, offload_param, bf16, ...) as the checks read it: {} when it is
    absent or not an object. The JSON schemas report a section of the wrong type; the comparisons then see none."""
    return value if isinstance(value, dict) else {}


def _number(value, default: int = 1):
    """A count of a config file for arithmetic: `default` when absent (None), the value when a whole number, and
    None for anything else (text, a list, true), which the schema reports and no product can use."""
    if value is None:
        return default
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def plan_invariants(plan: Plan, model: ModelSpec | None = None) -> list[str]:
    """Structural consistency of a plan: what must hold for its bundle to be coherent (not whether it fits or is
    fast; the rules judge that). Empty when the plan is consistent."""
    p = plan
    out: list[str] = []

    def need(cond: bool, text: str) -> None:
        if not cond:
            out.append(text)

    need(p.trainer in ("sft", "dpo", "grpo", "rloo", "kto", "gkd"), f"{UNKNOWN}trainer {p.trainer}")
    need(p.method in ("full", "lora", "qlora"), f"{UNKNOWN}method {p.method}")
    need(p.backend in _DISTRIBUTED, f"{UNKNOWN}backend {p.backend}")
    need(p.precision in _MIXED, f"{UNKNOWN}precision {p.precision}")
    need(p.offload in ("none", "optimizer", "all"), f"{UNKNOWN}offload {p.offload}")
    need(p.offload_device in ("cpu", "nvme"), f"{UNKNOWN}offload device {p.offload_device}")
    need(p.vllm_mode in ("none", "colocate", "server"), f"{UNKNOWN}vllm mode {p.vllm_mode}")
    need(p.ref_model in REF_MODELS, f"{UNKNOWN}ref_model {p.ref_model}")
    if out:
        return out  # the structural rules below are written for the values above
    need(min(p.micro_batch, p.grad_accum, p.seq_len, p.nodes, p.gpus_per_node, p.num_processes, p.lora_r) >= 1,
         "sizes must be positive")
    need(p.sp_size >= 1 and p.cp_size >= 1, "sp_size and cp_size are at least 1")
    need((p.zero_stage in (1, 2, 3)) == p.uses_deepspeed and (p.uses_deepspeed or p.zero_stage == 0),
         "zero_stage is 1-3 exactly when the backend is deepspeed")
    need(p.backend != "single" or (p.num_processes == 1 and p.nodes == 1), "backend single runs one process")
    need(p.offload == "none" or p.backend in ("deepspeed", "fsdp2"), "offload needs DeepSpeed or FSDP2")
    need(p.offload != "all" or p.backend == "fsdp2" or p.zero_stage == 3, "parameter offload needs ZeRO-3")
    need(p.offload == "none" or p.offload_device == "cpu" or p.zero_stage == 3, "NVMe offload needs ZeRO-3")
    need(p.backend != "fsdp2" or p.offload_device == "cpu", "FSDP2 offloads to CPU only")
    vllm_per_node = p.vllm_gpus if p.vllm_mode == "server" else 0
    need(p.num_processes == (p.gpus_per_node - vllm_per_node) * p.nodes,
         "num_processes = (gpus_per_node - vLLM server GPUs) x nodes")
    need(p.vllm_mode == "server" or p.vllm_gpus == 0, "vllm_gpus only in server mode")
    need(p.vllm_mode != "server" or 1 <= p.vllm_gpus < p.gpus_per_node, "server mode leaves GPUs to train on")
    need(p.vllm_mode == "none" or p.trainer in ("grpo", "rloo"), "only GRPO and RLOO generate with vLLM")
    need(p.vllm_mode != "colocate" or 0.0 < p.vllm_mem_fraction < 1.0, "colocate needs 0 < vllm_mem_fraction < 1")
    need(not (p.sp_size > 1 and p.cp_size > 1), "sequence and context parallelism exclude each other")
    if p.sp_size > 1:
        need(p.backend == "deepspeed", "Ulysses SP needs DeepSpeed (sp_backend deepspeed)")
        need(p.num_processes % p.sp_size == 0, "num_processes must be a multiple of sp_size")
        need(p.attn != "eager", "Ulysses SP rejects eager attention")
    if p.cp_size > 1:
        need(p.backend == "fsdp2", "ring-attention CP needs FSDP2")
        need(p.num_processes % p.cp_size == 0, "num_processes must be a multiple of cp_size")
        need(p.attn == "sdpa", "CP needs sdpa attention (transformers Trainer)")
        need(not p.packing, "TRL 1.16 forbids packing with CP")
    if p.sp_size > 1 or p.cp_size > 1:
        need(p.trainer not in ("grpo", "rloo"), "GRPO/RLOO reject SP and CP")
    if p.trainer in ("grpo", "rloo"):
        need(p.num_generations >= 2, "num_generations >= 2")
        need(0 < p.max_completion_len < p.seq_len, "0 < max_completion_len < seq_len")
        need(p.num_generations > 0 and (p.micro_batch * p.grad_accum * p.num_processes) % p.num_generations == 0,
             "micro_batch x grad_accum x processes must be a multiple of num_generations (GRPOConfig)")
    need(not p.packing or p.trainer == "sft", "only SFT packs")
    need(p.ref_model != "precompute" or p.trainer in ("dpo", "kto"), "precomputed reference: DPO/KTO only")
    if p.unsloth:
        # The planner's own set: single GPU, DDP or DeepSpeed (which stage, rule CMP002 judges), with or without
        # vLLM (rules/data/pins.toml [unsloth]); its FSDP2 needs its own wrap (rule CMP003), and no SP/CP
        need(p.backend in ("single", "ddp", "deepspeed"), "Unsloth runs single-GPU, DDP or DeepSpeed (not FSDP2)")
        need(p.sp_size == 1 and p.cp_size == 1, "Unsloth bundles use no SP/CP")
    if model is not None and p.sp_size > 1:
        need(model.heads % p.sp_size == 0, "attention heads must divide by sp_size")
        need(model.kv_heads % p.sp_size == 0 or p.sp_size % model.kv_heads == 0,
             "KV heads must divide sp_size or be divisible by it")
    return out


# ------------------------------------------------------------------------------------------------- file parsing

def train_constants(src: str) -> dict:
    """Module-level `NAME = <value>` assignments of train.py (CONFIG, MODEL_ID, BF16, ...), each as Python would give
    it (a literal, or arithmetic of literals: `'micro_batch': 4 * 2`, as the plan reader takes it); anything else is
    Unresolved(its source text): DTYPE compares by that text, and `MODEL_ID = os.environ["M"]` is not a model named
    `os.environ["M"]`. Switches written 0 or 1 (CONFIG's boolean fields, BF16, FP16, TRUST_REMOTE_CODE) are False
    and True, as train.py's Python reads them."""
    from advisor.bundle.literals import BOOL_CONSTANTS, plan_switches, python_bool

    tree = ast.parse(src)
    out: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if not name.isupper():
                continue
            value = _constant(node.value)
            if name == "CONFIG" and isinstance(value, dict):
                value = plan_switches(value)
            elif name in BOOL_CONSTANTS:
                value = python_bool(value)
            out[name] = value
    return out


def _constant(node: ast.AST):
    """A module-level value: a literal; a dict literal or `dict(key=...)` call whose values are literals or
    arithmetic of literals, as the dict it makes; anything else Unresolved(its source text)."""
    from advisor.bundle.literals import literal_value
    from advisor.core.files import Unresolved

    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError):  # TypeError: an unhashable key, `{[1]: 2}`
        pass
    values = None
    if isinstance(node, ast.Dict) and all(isinstance(k, ast.Constant) for k in node.keys):  # None: `**other`
        values = {k.value: literal_value(v) for k, v in zip(node.keys, node.values, strict=True)}
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict"
            and not node.args and all(kw.arg is not None for kw in node.keywords)):
        values = {kw.arg: literal_value(kw.value) for kw in node.keywords}
    if values is not None and not any(isinstance(v, Unresolved) for v in values.values()):
        return values
    return Unresolved(ast.unparse(node))


def shell_unquoted_expansions(src: str) -> list[str]:
    """`$VAR`, `${...}`, `$(...)` outside double quotes (comments and single-quoted text skipped; `$((...))`
    arithmetic allowed). A small lexer, not a shell parser: enough for the scripts we write."""
    problems: list[str] = []
    stack = ["top"]  # top | dq | cmd (inside $( ), unquoted) | arith | paren
    i, line, n = 0, 1, len(src)
    at_word_start = True
    while i < n:
        c = src[i]
        ctx = stack[-1]
        if c == "\n":
            line += 1
        if ctx in ("top", "cmd", "paren"):
            if c == "#" and at_word_start:
                while i < n and src[i] != "\n":
                    i += 1
                continue
            if c == "\\":
                i += 2
                continue
            if c == "'":
                j = src.index("'", i + 1)
                line += src.count("\n", i, j)
                i = j + 1
                at_word_start = False
                continue
            if c == '"':
                stack.append("dq")
            elif c == "$":
                if src.startswith("$((", i):
                    stack.append("arith")
                    i += 3
                    continue
                if src.startswith("$(", i):
                    problems.append(f"line {line}: unquoted command substitution")
                    stack.append("cmd")
                    i += 2
                    continue
                m = re.match(r"\$(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])", src[i:])
                if m:
                    problems.append(f"line {line}: unquoted {m.group(0)}")
                    i += len(m.group(0))
                    continue
            elif c == "(":
                stack.append("paren")
            elif c == ")" and ctx in ("cmd", "paren"):
                stack.pop()
            at_word_start = c in " \t\n;|&(){}"
            i += 1
            continue
        if ctx == "dq":
            if c == "\\":
                i += 2
                continue
            if c == '"':
                stack.pop()
            elif src.startswith("$((", i):
                stack.append("arith")
                i += 3
                continue
            elif src.startswith("$(", i):
                stack.append("cmd")
                i += 2
                continue
            i += 1
            continue
        if ctx == "arith":
            if src.startswith("))", i):
                stack.pop()
                i += 2
                continue
            i += 1
            continue
        i += 1
    return problems


def _requirement_names(text: str) -> dict[str, str]:
    out = {}
    for raw in text.splitlines():
        s = raw.split("#", 1)[0].strip()
        if not s:
            continue
        m = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)", s)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2).strip()
    return out


def _shell_assignment(src: str, name: str) -> str | None:
    m = re.search(rf"^\s*{name}=(.*)$", src, re.MULTILINE)
    if not m:
        return None
    words = shlex.split(m.group(1), comments=True)
    return words[0] if words else ""


def _reads_environment(src: str, name: str) -> bool:
    """Whether Python code reads the environment variable NAME (`os.environ.get("NAME", ...)`, `os.getenv("NAME")`,
    `os.environ["NAME"]`): the call, not the name in a docstring or a message."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "getenv"):
            key = node.args[0] if node.args else None
        elif isinstance(node, ast.Subscript):
            key = node.slice
        else:
            continue
        owner = node.func.value if isinstance(node, ast.Call) else node.value
        environ = (isinstance(owner, ast.Attribute) and owner.attr == "environ") or \
                  (isinstance(owner, ast.Name) and owner.id in ("environ", "os"))
        if environ and isinstance(key, ast.Constant) and key.value == name:
            return True
    return False


def _shell_default(value: str | None, name: str) -> str | None:
    """What `${NAME:-X}` (or `${NAME-X}`) gives when the environment leaves NAME unset: X; any other value as it is."""
    m = re.fullmatch(rf"\$\{{{name}:?-([^}}]*)\}}", value or "")
    return m.group(1) if m else value


def _gpu_list(text: str | None) -> list[int]:
    return [int(x) for x in (text or "").split(",") if x.strip().isdigit()]


# ----------------------------------------------------------------------------------------------------- the checks

def is_edit_after_planning(problem: str) -> bool:
    """A problem of check_bundle_files that says only that plan.json's record differs from train.py's CONFIG: an
    edit after planning, the user's right (check --bundle reports it as PLAN001, verify as a warning)."""
    return problem.startswith("plan.json: plan.") and " but train.py CONFIG has " in problem


def check_bundle_files(files: dict[str, str]) -> list[str]:
    """Problems found in a bundle (file name -> content); an empty list means consistent."""
    problems: list[str] = []
    for name in REQUIRED_FILES:
        if name not in files:
            problems.append(f"{name}: missing")
    if "train.py" not in files:
        return problems
    src = files["train.py"]
    try:
        compile(src, "train.py", "exec")
        consts = train_constants(src)
    except SyntaxError as exc:
        return problems + [f"train.py: does not compile: {exc}"]
    except (RecursionError, MemoryError):  # the compiler recurses once per nesting level
        return problems + ["train.py: does not compile: expressions nested too deeply"]
    cfg = consts.get("CONFIG")
    if not isinstance(cfg, dict):
        return problems + ["train.py: no literal CONFIG dict at module level"]
    # A field with a default (added to Plan after the bundle was written: a GKD teacher) may be absent: the default
    # is what such a bundle meant. A field without one is the plan itself.
    required = [k for k, f in Plan.__dataclass_fields__.items() if f.default is MISSING]
    missing = [k for k in required if k not in cfg]
    if missing:
        return problems + [f"train.py: CONFIG lacks {', '.join(missing)}"]
    from advisor.bundle.plan_values import plan_value_problem

    values = {k: cfg[k] for k in Plan.__dataclass_fields__ if k in cfg}
    wrong = plan_value_problem(values)
    if wrong:  # every check below compares and counts with these values: one of the wrong type is the problem
        return problems + [f"train.py: CONFIG['{wrong[0]}'] {wrong[1]}"]
    plan = Plan(**values)
    invariants = plan_invariants(plan)
    problems += [f"train.py: CONFIG: {p}" for p in invariants]
    if any(p.startswith(UNKNOWN) for p in invariants):
        # the other files are compared with what each named value means (its accelerate distributed_type, its
        # dtype): a value with no meaning has nothing to compare them with
        return problems
    problems += _check_train(src, consts, plan, cfg)
    problems += _check_plan_json(files, plan)
    problems += _check_accelerate(files, plan, cfg)
    problems += _check_ds(files, plan)
    problems += _check_launch(files, plan, cfg)
    problems += _check_slurm(files, plan)
    problems += _check_requirements(files, plan)
    problems += _check_model_config(files, plan)
    return problems


NAME_CONSTANTS = {"MODEL_ID": "the model's hub id or folder", "DATASET": "the dataset's hub id or folder"}
"""train.py's constants that from_pretrained / load_dataset take as a name: a literal there must be non-empty text
(an expression, `os.environ["DATA"]`, is decided when train.py runs and is not judged)."""


_RUNTIME_TEXT = (ast.Call, ast.Subscript, ast.JoinedStr, ast.BinOp, ast.IfExp, ast.BoolOp)
"""Expressions that may give text when train.py runs (`os.environ["DATA"]`, an f-string, `a + b`): not judged."""


def _module_names(tree: ast.Module) -> set[str]:
    """Names train.py itself defines: assignments, imports, functions and classes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _name_constant_problem(node: ast.AST, name: str, what: str, own: set[str]) -> str | None:
    """Why `NAME = <node>` cannot give from_pretrained / load_dataset a name, or None when it can (or is decided
    at run time). A literal must be non-empty text; a bare name must be one train.py defines, not one of Python's
    builtins (`MODEL_ID = SOMEVAR` stops with NameError); `torch.float16`, a number, a list or a comparison is no
    name."""
    import builtins

    if isinstance(node, ast.Constant):
        if isinstance(node.value, str) and node.value.strip():
            return None
        return f"train.py: {name} is {repr(node.value)[:60]}, not {what}"
    if isinstance(node, _RUNTIME_TEXT):
        return None
    root = node
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name):
        if root.id in own:
            return (f"train.py: {name} is {ast.unparse(node)[:60]}, not {what}"
                    if isinstance(node, ast.Attribute) and root.id == "torch" else None)
        if hasattr(builtins, root.id):
            return f"train.py: {name} is {ast.unparse(node)[:60]} (Python's builtin), not {what}"
        return (f"train.py: {name} = {ast.unparse(node)[:60]}, but train.py never defines {root.id} "
                "(NameError when it runs)")
    return f"train.py: {name} is {ast.unparse(node)[:60]}, not {what}"


def name_constant_problem(src: str, name: str) -> str | None:
    """Why train.py's module-level `NAME = ...` (a NAME_CONSTANTS name) cannot name a model or dataset, or None:
    absent, readable, or decided when train.py runs (the last assignment counts, as Python's)."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    assigned = [node.value for node in tree.body if isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name]
    if not assigned:
        return None
    return _name_constant_problem(assigned[-1], name, NAME_CONSTANTS[name], _module_names(tree))


def _check_train(src: str, consts: dict, plan: Plan, cfg: dict) -> list[str]:
    out = [problem for problem in (name_constant_problem(src, name) for name in NAME_CONSTANTS) if problem]
    if consts.get("TRUST_REMOTE_CODE") != plan.trust_remote_code:
        out.append("train.py: TRUST_REMOTE_CODE differs from the plan's trust_remote_code")
    if not plan.trust_remote_code and re.search(r"""trust_remote_code["']?\s*[:=]\s*True""", src):
        out.append("train.py: trust_remote_code=True although the plan does not ask for it")
    want_bf16 = plan.precision in ("bf16", "bf16-mixed")
    want_fp16 = plan.precision == "fp16-mixed"
    if consts.get("BF16") is not want_bf16 or consts.get("FP16") is not want_fp16:
        out.append(f"train.py: BF16={consts.get('BF16')} FP16={consts.get('FP16')} do not match precision "
                   f"{plan.precision}")
    want_dtype = dtype_settings(plan)["dtype"]
    if consts.get("DTYPE") != want_dtype:
        out.append(f"train.py: DTYPE {consts.get('DTYPE')} but precision {plan.precision} loads {want_dtype}")
    for arg, key in (("per_device_train_batch_size", "micro_batch"), ("gradient_accumulation_steps", "grad_accum")):
        # the whole argument: `CONFIG["micro_batch"] * 8` is not CONFIG's value
        if not re.search(rf'{arg}=CONFIG\["{key}"\]\s*[,)\n#]', src):
            out.append(f"train.py: {arg} is not taken from CONFIG['{key}']")
    rate = cfg.get("learning_rate")  # absent in bundles written before it was; present, AdamW needs 0 < lr < 1
    if "learning_rate" in cfg and not (isinstance(rate, (int, float)) and not isinstance(rate, bool)
                                       and 0 < rate < 1):
        out.append(f"train.py: learning_rate {rate!r:.40} is not a learning rate (a number between 0 and 1)")
    pad = cfg.get("pad_to_multiple_of")
    split = sequence_split(plan)
    # what sequence parallelism needs is a multiple of split; a larger multiple (render.SHAPE_MULTIPLE) only bounds
    # the batch shapes, and a bundle written without one is as correct
    if split > 1 and not (isinstance(pad, int) and pad % split == 0):
        out.append(f"train.py: pad_to_multiple_of {pad} but sp_size={plan.sp_size}, cp_size={plan.cp_size} "
                   f"need a multiple of {split}")
    elif pad is not None and not (isinstance(pad, int) and not isinstance(pad, bool) and pad > 0):
        out.append(f"train.py: pad_to_multiple_of {pad!r} is not a positive number of tokens")
    if isinstance(pad, int) and not isinstance(pad, bool) and pad > plan.seq_len:
        # the collator pads every batch up to the next multiple: each is then at least `pad` tokens long, longer
        # than the sequences the estimate and the rules plan for
        out.append(f"train.py: pad_to_multiple_of {pad} is longer than seq_len {plan.seq_len}: every batch would be "
                   f"padded to {pad} tokens")
    # the switch as train.py writes it now (CHECKPOINTING_ARG, the name transformers has), or in older bundles
    if plan.backend == "fsdp2" and plan.grad_ckpt and not any(
            form in src for form in ("{CHECKPOINTING_ARG: False}", "gradient_checkpointing=False")):
        out.append("train.py: FSDP2 checkpoints activations itself; TRL's gradient_checkpointing must be False")
    if plan.trainer in ("grpo", "rloo"):
        vllm_on = "use_vllm=True" in src
        if vllm_on != (plan.vllm_mode != "none"):
            out.append(f"train.py: use_vllm does not match vllm_mode {plan.vllm_mode}")
    return out


def _check_plan_json(files: dict[str, str], plan: Plan) -> list[str]:
    if "plan.json" not in files:
        return []
    try:
        doc = safeio.load_json(files["plan.json"], where="plan.json")
    except safeio.UnsafeInputError as exc:
        return [f"plan.json: not JSON: {exc.message}"]
    if not isinstance(doc, dict):
        return ["plan.json: not a JSON object"]
    out = []
    recorded = doc.get("plan")
    if not isinstance(recorded, dict):
        return ["plan.json: no plan object"]
    for key in PLAN_JSON_KEYS:
        if key not in recorded:
            out.append(f"plan.json: plan.{key} missing (CONTRACT.md)")
        elif recorded[key] != getattr(plan, key):
            out.append(f"plan.json: plan.{key}={recorded[key]!r} but train.py CONFIG has {getattr(plan, key)!r}")
    listed = doc.get("files")
    from advisor.bundle.write import MARKER_NAME  # written beside the files, not one of them

    present = sorted(n for n in files if n != MARKER_NAME)
    if not isinstance(listed, list) or sorted(map(str, listed)) != present:
        out.append(f"plan.json: files lists {listed!r:.200}, the bundle has {present}")
    for key in ("out", "memory", "speed"):
        if key not in doc:
            out.append(f"plan.json: {key} missing")
    return out


def _check_accelerate(files: dict[str, str], plan: Plan, cfg: dict) -> list[str]:
    if "accelerate.yaml" not in files:
        return []
    try:  # aliases refused: a "billion laughs" file would hang the schema check
        doc = safeio.load_yaml(files["accelerate.yaml"], where="accelerate.yaml")
    except safeio.UnsafeInputError as exc:
        return [f"accelerate.yaml: not YAML: {exc.message}"]
    out = [f"accelerate.yaml: {e}" for e in schema_errors(doc, "accelerate.schema.json")]
    if not isinstance(doc, dict):
        return out
    # a count that is not a whole number (8.0, '8', true) is the schema's finding above; one that is, is compared
    for key, want, unit in (("num_processes", plan.num_processes, "processes"), ("num_machines", plan.nodes, "nodes")):
        value = doc.get(key)
        if (value is None or _number(value, None) is not None) and value != want:
            out.append(f"accelerate.yaml: {key} {value!r} but the plan has {want} {unit}")
    if doc.get("distributed_type") != _DISTRIBUTED.get(plan.backend):
        out.append(f"accelerate.yaml: distributed_type {doc.get('distributed_type')} for backend {plan.backend}")
    rank = doc.get("machine_rank")
    if isinstance(rank, int) and not isinstance(rank, bool) and not 0 <= rank < plan.nodes:
        # torchrun refuses a node rank outside [0, nnodes); launch.sh passes each node's own --machine_rank
        out.append(f"accelerate.yaml: machine_rank {str(rank)[:40]} is outside 0..{plan.nodes - 1} for {plan.nodes} node(s)")
    if doc.get("use_cpu") not in (None, False):
        # accelerate launch then trains on the CPU (launch.py: args.cpu from use_cpu), with every GPU idle
        out.append(f"accelerate.yaml: use_cpu {doc.get('use_cpu')!r}: the plan trains on the GPUs (use_cpu: false)")
    ds = _object(doc.get("deepspeed_config"))
    uses_file = "deepspeed_config_file" in ds
    if uses_file and "mixed_precision" in doc:
        out.append("accelerate.yaml: mixed_precision next to deepspeed_config_file (accelerate raises ValueError)")
    if not uses_file and doc.get("mixed_precision") != _MIXED.get(plan.precision):
        out.append(f"accelerate.yaml: mixed_precision {doc.get('mixed_precision')} for precision {plan.precision}")
    if plan.uses_deepspeed:
        if ds.get("deepspeed_config_file") != "ds_config.json":
            out.append("accelerate.yaml: deepspeed_config_file must name ds_config.json")
        if bool(ds.get("zero3_init_flag")) != (plan.zero_stage == 3):
            out.append("accelerate.yaml: zero3_init_flag must be true exactly at ZeRO stage 3")
        if plan.nodes > 1 and ds.get("deepspeed_multinode_launcher") != "standard":
            out.append("accelerate.yaml: multi-node needs deepspeed_multinode_launcher standard (one launch per node)")
    fsdp = _object(doc.get("fsdp_config"))
    if plan.backend == "fsdp2":
        if bool(fsdp.get("fsdp_offload_params")) != (plan.offload != "none"):
            out.append("accelerate.yaml: fsdp_offload_params does not match the plan's offload")
        if bool(fsdp.get("fsdp_activation_checkpointing")) != plan.grad_ckpt:
            out.append("accelerate.yaml: fsdp_activation_checkpointing does not match grad_ckpt")
    par = _object(doc.get("parallelism_config"))
    sp = par.get("parallelism_config_sp_size", 1)
    cp = par.get("parallelism_config_cp_size", 1)
    if sp != plan.sp_size:
        out.append(f"accelerate.yaml: sp_size {sp} but train.py CONFIG sp_size {plan.sp_size}")
    if cp != plan.cp_size:
        out.append(f"accelerate.yaml: cp_size {cp} but train.py CONFIG cp_size {plan.cp_size}")
    if par:
        sizes = [_number(par.get(f"parallelism_config_{k}_size")) for k in ("dp_shard", "dp_replicate", "sp", "cp",
                                                                             "tp")]
        if None in sizes:
            out.append("accelerate.yaml: parallelism_config sizes must be whole numbers")
        elif math.prod(sizes) != plan.num_processes:
            out.append("accelerate.yaml: dp x sp x cp x tp must equal num_processes")
        if (_number(sp) or 1) > 1 and par.get("parallelism_config_sp_attn_implementation") != cfg.get("attn"):
            out.append("accelerate.yaml: sp_attn_implementation must equal the model's attn (train.py CONFIG)")
    return out


def _nvme_path_problems(doc: dict) -> list[str]:
    """Each offload block's nvme_path held to what --nvme-path is (advisor.resolve.checks.check_nvme_path): an
    absolute path, one printable line, at most PATH_MAX. DeepSpeed joins its swap folders onto it, and launch.sh
    checks the folder's free space before the run: a relative path lands under wherever the run starts."""
    from advisor.core.request import text_problem
    from advisor.resolve.checks import NVME_PATH_MAX

    out = []
    zero = doc.get("zero_optimization")
    for block in ("offload_param", "offload_optimizer"):
        sub = zero.get(block) if isinstance(zero, dict) else None
        if not isinstance(sub, dict) or "nvme_path" not in sub or sub.get("device") != "nvme":
            continue
        path = sub["nvme_path"]
        where = f"ds_config.json: zero_optimization.{block}.nvme_path"
        if not isinstance(path, str):
            out.append(f"{where} is {path!r:.40}, not a folder path")
        elif text_problem(path):
            out.append(f"{where} {text_problem(path)}")
        elif not path.startswith("/") or len(path) > NVME_PATH_MAX:
            out.append(f"{where} {path[:60]!r} must be an absolute path (starting with /) of at most "
                       f"{NVME_PATH_MAX} characters")
    return out


def _check_ds(files: dict[str, str], plan: Plan) -> list[str]:
    if "ds_config.json" not in files:
        return ["ds_config.json: missing for a DeepSpeed plan"] if plan.uses_deepspeed else []
    if not plan.uses_deepspeed:
        return [f"ds_config.json: present although the backend is {plan.backend}"]
    try:
        doc = safeio.load_json(files["ds_config.json"], where="ds_config.json")
    except safeio.UnsafeInputError as exc:
        return [f"ds_config.json: not JSON: {exc.message}"]
    out = [f"ds_config.json: {e}" for e in schema_errors(doc, "ds_config.schema.json")]
    if not isinstance(doc, dict):
        return out
    out += _nvme_path_problems(doc)
    zero = doc.get("zero_optimization") or {}
    if not isinstance(zero, dict):
        return out + [f"ds_config.json: zero_optimization is a {type(zero).__name__}, not an object"]
    if zero.get("stage") != plan.zero_stage:
        out.append(f"ds_config.json: stage {zero.get('stage')} but the plan has ZeRO-{plan.zero_stage}")
    opt = _object(zero.get("offload_optimizer")).get("device", "none")
    par = _object(zero.get("offload_param")).get("device", "none")
    want_opt = plan.offload_device if plan.offload in ("optimizer", "all") else "none"
    want_par = plan.offload_device if plan.offload == "all" else "none"
    if opt != want_opt or par != want_par:
        out.append(f"ds_config.json: offload optimizer={opt} param={par}, the plan says {plan.offload} "
                   f"({plan.offload_device})")
    for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size"):
        if doc.get(key) != "auto":
            out.append(f'ds_config.json: {key} must be "auto" (train.py\'s TrainingArguments set it)')
    for key, want in (("bf16", plan.precision in ("bf16", "bf16-mixed")), ("fp16", plan.precision == "fp16-mixed")):
        enabled = _object(doc.get(key)).get("enabled", False)
        if enabled != "auto" and enabled != want:
            out.append(f"ds_config.json: {key}.enabled={enabled} disagrees with precision {plan.precision}")
    if plan.zero_stage == 3 and zero.get("stage3_gather_16bit_weights_on_model_save") is not True:
        out.append("ds_config.json: ZeRO-3 must gather 16-bit weights on save, or save_model writes empty shards")
    return out


_SHELL_OPERATORS = ";&|()<>\n"
"""Characters that end a shell word outside quotes and separate commands (bash(1), DEFINITIONS: metacharacter), the
newline included so that each line's command stays apart."""


def shell_commands(src: str) -> list[list[str]]:
    """The simple commands of a shell script, each as the words bash passes it (quotes removed), comments and line
    continuations dropped; the elements of an array assignment (`LAUNCH=(accelerate launch ...)`, `LAUNCH+=(...)`)
    stand wherever the script expands the array (`"${LAUNCH[@]}"`), in the order the script runs them. Enough to
    tell an argument from text that only mentions it: `echo "... --cpu ..."` is one word of echo's, a `case`
    pattern or a comment is no argument of `accelerate launch`. Not a shell: no variable, no control flow (every
    branch counts), no heredoc, a quote inside `"$( )"` closes the outer one (so `"$(dirname "$0")"` stays one
    word); a script whose quotes do not close (bash -n refuses it) is read line by line."""
    return [list(words) for words in _parsed_commands(src)]


@lru_cache(maxsize=8)
def _parsed_commands(src: str) -> tuple[tuple[str, ...], ...]:
    """shell_commands' words, parsed once per script: the checks of one bundle ask for them a dozen times (3 ms
    each for a generated launch.sh)."""
    code = _without_comments(src).replace("\\\n", " ")
    try:
        commands = _shell_commands(code)
    except ValueError:
        commands = []
        for line in code.splitlines():
            try:
                commands += _shell_commands(line)
            except ValueError:
                continue
    return tuple(tuple(words) for words in commands)


def _without_comments(src: str) -> str:
    """The script with its comments removed: from a `#` that starts a word outside quotes to the end of its line
    (bash(1), COMMENTS). Done before splitting words, because a comment's apostrophe ("the server's log") would
    otherwise open a quote that swallows the commands after it."""
    out, i, n, quote = [], 0, len(src), ""
    while i < n:
        c = src[i]
        if quote:
            if c == "\\" and quote == '"':
                out.append(src[i:i + 2])
                i += 2
                continue
            quote = "" if c == quote else quote
        elif c == "\\":
            out.append(src[i:i + 2])
            i += 2
            continue
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or src[i - 1] in " \t\n" or src[i - 1] in _SHELL_OPERATORS):
            end = src.find("\n", i)
            i = n if end < 0 else end
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _shell_commands(src: str) -> list[list[str]]:
    lexer = shlex.shlex(src, posix=True, punctuation_chars=_SHELL_OPERATORS)
    lexer.whitespace, lexer.whitespace_split, lexer.commenters = " \t\r", True, ""
    commands: list[list[str]] = []
    arrays: dict[str, list[str]] = {}
    words: list[str] = []
    filling: tuple[str, list[str]] | None = None  # inside `NAME=( ... )`: the array and its new elements
    for token in lexer:
        if set(token) <= set(_SHELL_OPERATORS):
            if filling is not None and ")" in token:
                arrays[filling[0]] = filling[1]
                filling = None
            elif filling is None and "(" in token and words and re.fullmatch(r"[A-Za-z_]\w*\+?=", words[-1]):
                name = words[-1].rstrip("+=")
                filling = (name, list(arrays.get(name, [])) if words[-1].endswith("+=") else [])
                words = words[:-1]
            if words:
                commands.append(words)
            words = []
            continue
        expanded = re.fullmatch(r"\$\{([A-Za-z_]\w*)\[[@*]\]\}", token)
        if filling is not None:
            filling[1].append(token)
        elif expanded:
            words += arrays.get(expanded.group(1), [])
        else:
            words.append(token)
    if words:
        commands.append(words)
    return commands


def accelerate_launch_arguments(src: str) -> list[list[str]]:
    """The arguments of each `accelerate launch` the script runs (`accelerate launch ...`, `accelerate-launch ...`,
    `python -m accelerate.commands.launch ...`, directly or through an array it expands), everything after `launch`:
    accelerate's options, the training script and the script's own options."""
    out = []
    for words in shell_commands(src):
        for i, word in enumerate(words):
            if word == "accelerate" and words[i + 1:i + 2] == ["launch"]:
                out.append(words[i + 2:])
                break
            if word == "accelerate-launch" or (word == "-m" and words[i + 1:i + 2] == ["accelerate.commands.launch"]):
                out.append(words[i + (1 if word == "accelerate-launch" else 2):])
                break
    return out


def vllm_serve_arguments(src: str) -> list[list[str]]:
    """The arguments of each `vllm serve` the script runs (the model, then the server's options)."""
    return [words[i + 2:] for words in shell_commands(src) for i in range(len(words) - 1)
            if words[i:i + 2] == ["vllm", "serve"]]


def command_flag(arguments: list[list[str]], name: str) -> str | None:
    """The last value any of these argument lists gives `--NAME`, in every spelling accelerate's parser takes:
    `--config_file X`, `--config_file=X`, `--config-file X` (accelerate/commands/utils.py _StoreAction adds the dashed
    form of each underscored option; the parser allows no abbreviation). None when absent."""
    spelled = re.compile("--" + re.escape(name).replace("_", "[_-]"))
    value = None
    for words in arguments:
        for i, word in enumerate(words):
            flag, eq, given = word.partition("=")
            if spelled.fullmatch(flag):
                if eq:
                    value = given
                elif i + 1 < len(words):
                    value = words[i + 1]
    return value


def has_flag(arguments: list[list[str]], name: str) -> bool:
    """Whether any of these argument lists has the switch `--NAME` (underscores or dashes, as command_flag)."""
    spelled = re.compile("--" + re.escape(name).replace("_", "[_-]") + "(=.*)?")
    return any(spelled.fullmatch(word) for words in arguments for word in words)


def accelerate_flag(src: str, name: str) -> str | None:
    """The last value launch.sh gives `accelerate launch --NAME` (command_flag over accelerate_launch_arguments): an
    option of the command the script runs, not the same text in a comment or a message."""
    return command_flag(accelerate_launch_arguments(src), name)


_ACCELERATE_CHOICES = {"mixed_precision": ("no", "fp16", "bf16", "fp8"),
                       "dynamo_backend": None, "rdzv_backend": ("static", "c10d", "etcd", "etcd-v2")}
"""accelerate launch flags with a closed set of values (accelerate/commands/launch.py: --mixed_precision choices;
torchrun's rendezvous backends). dynamo_backend is refused altogether: the estimate models no compiled model."""


def _launcher_values(src: str, plan: Plan) -> list[str]:
    """Values launch.sh gives accelerate and vLLM that they would refuse, or that the plan does not model: a
    --mixed_precision accelerate lacks or that disagrees with the plan, --cpu, torch.compile through --dynamo_backend,
    and a vLLM --max-model-len shorter than the sequence the plan trains (vLLM rejects a longer request)."""
    out = []
    for flag, choices in _ACCELERATE_CHOICES.items():
        value = accelerate_flag(src, flag)
        if value is None or value.startswith("$"):
            continue
        if choices is None:
            if value.lower() not in ("no", "none"):
                out.append(f"launch.sh: --{flag} {value}: the plan is for an uncompiled model (the estimate "
                           "models none)")
        elif value not in choices:
            out.append(f"launch.sh: --{flag} {value!r} is not one accelerate takes ({', '.join(choices)})")
        elif flag == "mixed_precision" and value != _MIXED.get(plan.precision):
            out.append(f"launch.sh: --mixed_precision {value} for precision {plan.precision} "
                       f"(planned {_MIXED.get(plan.precision)})")
    # `--cpu` as a word of the training command: accelerate launch's flag (launch.py: use_cpu), or after the script
    # train.py's own, which trains on the CPU as well. The same text in a message, a comment, a `case` pattern or
    # another command's option (srun --cpus-per-task, vllm serve --cpu-offload-gb) is not one.
    if has_flag(accelerate_launch_arguments(src), "cpu"):
        out.append("launch.sh: --cpu trains on the CPU (accelerate launch's flag, and train.py's after the script); "
                   "the plan trains on the GPUs")
    length = command_flag(vllm_serve_arguments(src), "max_model_len")  # vLLM takes --max-model-len and --max_model_len
    length = length if length and length.isdigit() else None
    if length and plan.vllm_mode == "server" and int(length) < plan.seq_len:
        out.append(f"launch.sh: vllm serve --max-model-len {length} is shorter than the {plan.seq_len}-token "
                   "sequences the plan generates (prompt + completion); vLLM rejects longer requests")
    return out


def _check_launch(files: dict[str, str], plan: Plan, cfg: dict) -> list[str]:
    if "launch.sh" not in files:
        return []
    src = files["launch.sh"]
    out = [f"launch.sh: {p}" for p in shell_unquoted_expansions(src)]
    if "set -euo pipefail" not in src:
        out.append("launch.sh: no `set -euo pipefail`")
    if '"$@"' not in src:
        out.append('launch.sh: does not pass "$@" on to train.py')
    if not re.fullmatch(r"(\./)?accelerate\.yaml", accelerate_flag(src, "config_file") or ""):
        out.append("launch.sh: does not launch with --config_file accelerate.yaml")
    # an option of a command the script runs (vllm serve's), not the words in a comment or a message
    if not plan.trust_remote_code and has_flag(shell_commands(src), "trust_remote_code"):
        out.append("launch.sh: --trust-remote-code although the plan does not ask for it")
    if plan.nodes > 1:
        for flag, want in (("num_machines", plan.nodes), ("num_processes", plan.num_processes)):
            if accelerate_flag(src, flag) != str(want):
                out.append(f"launch.sh: --{flag} must be {want}")
        for flag in ("machine_rank", "main_process_ip", "main_process_port"):
            if accelerate_flag(src, flag) is None:
                out.append(f"launch.sh: multi-node launch lacks --{flag}")
    out += _launcher_values(src, plan)
    server = bool(vllm_serve_arguments(src))
    if server != (plan.vllm_mode == "server"):
        out.append(f"launch.sh: vllm serve {'started' if server else 'missing'} for vllm_mode {plan.vllm_mode}")
    if plan.vllm_mode == "server":
        vllm = _gpu_list(_shell_assignment(src, "VLLM_GPUS"))
        train = _gpu_list(_shell_assignment(src, "TRAIN_GPUS"))
        if set(vllm) & set(train):
            out.append(f"launch.sh: GPUs {sorted(set(vllm) & set(train))} both serve vLLM and train")
        if len(vllm) != plan.vllm_gpus:
            out.append(f"launch.sh: VLLM_GPUS has {len(vllm)} GPUs, the plan {plan.vllm_gpus}")
        if len(train) != plan.num_processes // plan.nodes:
            out.append(f"launch.sh: TRAIN_GPUS has {len(train)} GPUs, the plan trains on "
                       f"{plan.num_processes // plan.nodes} per node")
        if any(g >= plan.gpus_per_node for g in vllm + train):
            out.append(f"launch.sh: a GPU index is beyond the node's {plan.gpus_per_node} GPUs")
        # `VLLM_SERVER_PORT="${VLLM_SERVER_PORT:-8000}"`: the port unless the environment names another, which
        # train.py must then read too; bundles before it wrote a fixed `VLLM_PORT=8000`
        written = _shell_assignment(src, "VLLM_SERVER_PORT")
        name = "VLLM_SERVER_PORT" if written is not None else "VLLM_PORT"
        port = _shell_default(written if written is not None else _shell_assignment(src, "VLLM_PORT"), name)
        if str(cfg.get("vllm_server_port")) != str(port):
            out.append(f"launch.sh: {name} {port} but train.py connects to {cfg.get('vllm_server_port')}")
        if written is not None and written != port and not _reads_environment(files.get("train.py", ""),
                                                                                 "VLLM_SERVER_PORT"):
            out.append("launch.sh: the server's port may come from VLLM_SERVER_PORT, which train.py does not read: "
                       f"set, it would leave train.py connecting to {cfg.get('vllm_server_port')}")
        host = _shell_assignment(src, "VLLM_HOST")
        if cfg.get("vllm_server_host") != host:
            out.append(f"launch.sh: VLLM_HOST {host} but train.py connects to {cfg.get('vllm_server_host')}")
        if "/health" not in src or "trap " not in src:
            out.append("launch.sh: the vLLM server needs a readiness wait (/health) and a trap that stops it")
    return out


def _check_slurm(files: dict[str, str], plan: Plan) -> list[str]:
    if "slurm.sbatch" not in files:
        return ["slurm.sbatch: missing for a multi-node plan"] if plan.nodes > 1 else []
    src = files["slurm.sbatch"]
    out = [f"slurm.sbatch: {p}" for p in shell_unquoted_expansions(src)]
    # sbatch takes `--opt=value`, `--opt value` and the short forms (-N 2); the last of a repeated option wins
    short = {"-N": "--nodes"}
    directives = {short.get(k, k): v for k, v in
                  re.findall(r"^#SBATCH[ \t]+(--[a-z-]+|-N)(?:=|[ \t]+)([^\s#]+)", src, re.MULTILINE)}
    if directives.get("--nodes") != str(plan.nodes):
        out.append(f"slurm.sbatch: --nodes={directives.get('--nodes')} but the plan has {plan.nodes} nodes")
    if directives.get("--ntasks-per-node") != "1":
        out.append("slurm.sbatch: one task per node (each runs one accelerate launch)")
    gpus = _slurm_gpus_per_node(directives)
    if gpus != plan.gpus_per_node:
        asked = (f"--gres={directives['--gres']}" if "--gres" in directives else
                 f"--gpus-per-node={directives['--gpus-per-node']}" if "--gpus-per-node" in directives else
                 "no --gres / --gpus-per-node")
        out.append(f"slurm.sbatch: {asked} but each node has {plan.gpus_per_node} GPUs")
    if "set -euo pipefail" not in src or "scontrol show hostnames" not in src or "srun" not in src:
        out.append("slurm.sbatch: needs set -euo pipefail, the head node from scontrol, and srun")
    return out


def _slurm_gpus_per_node(directives: dict[str, str]) -> int | None:
    """The GPUs per node a job asks for: `--gres=gpu:8`, `--gres=gpu:h100:8` (name[:type][:count], one when no count
    is written; several resources comma-separated) or sbatch's `--gpus-per-node=8` / `=h100:8`. None when neither
    names a count."""

    def count(text: str) -> int | None:
        return int(text) if text.isascii() and text.isdigit() else None

    if "--gres" in directives:
        for item in directives["--gres"].split(","):
            parts = item.split(":")
            if parts[0] == "gpu":
                if len(parts) == 1:
                    return 1
                n = count(parts[-1])
                return n if n is not None else (1 if len(parts) == 2 else None)  # gpu:h100 is one of that type
        return None
    if "--gpus-per-node" in directives:
        return count(directives["--gpus-per-node"].split(":")[-1])
    return None


def _check_requirements(files: dict[str, str], plan: Plan) -> list[str]:
    if "requirements.txt" not in files:
        return []
    reqs = _requirement_names(files["requirements.txt"])
    out = []
    expected = {"trl": True, "deepspeed": plan.uses_deepspeed, "vllm": plan.vllm_mode != "none",
                "bitsandbytes": plan.method == "qlora", "liger-kernel": plan.liger and not plan.unsloth,
                "unsloth": plan.unsloth, "peft": plan.method != "full" or plan.unsloth}  # unsloth imports peft
    for name, want in expected.items():
        # a package the plan needs and lacks breaks the run; one it does not need is only installed for nothing
        if want and name not in reqs:
            out.append(f"requirements.txt: {name} missing for this plan")
    trl = reqs.get("trl", "")
    if plan.unsloth and trl != "==1.15.0":
        out.append("requirements.txt: Unsloth 2026.10.9 needs trl<=1.15.0 (pin 1.15.0)")
    if not plan.unsloth and trl != "==1.16.0":
        out.append("requirements.txt: train.py uses the TRL 1.16 API; pin trl==1.16.0")
    return out


def _check_model_config(files: dict[str, str], plan: Plan) -> list[str]:
    """model_config.json, and a GKD bundle's teacher_config.json: `verify --random-init` builds each model from its
    file, so each must be a config transformers builds without remote code."""
    out = []
    for name in ("model_config.json", "teacher_config.json"):
        if name in files:
            out += _check_config_file(name, files[name], plan)
    if plan.trainer == "gkd" and plan.teacher and "teacher_config.json" not in files:
        out.append("teacher_config.json: missing for a GKD plan with a teacher (verify --random-init builds the "
                   "teacher from it)")
    return out


def _check_config_file(name: str, text: str, plan: Plan) -> list[str]:
    try:
        doc = safeio.load_json(text, where=name)
    except safeio.UnsafeInputError as exc:
        return [f"{name}: not JSON: {exc.message}"]
    if not isinstance(doc, dict):
        return [f"{name}: not a JSON object"]
    out = []
    from advisor.catalog.hf_config import BUILT_IN_MODEL_TYPES, MAX_CONFIG_INT

    model_type = doc.get("model_type")
    if not isinstance(model_type, str):
        out.append(f"{name}: no model_type")
    elif model_type not in BUILT_IN_MODEL_TYPES and not plan.trust_remote_code:
        # AutoConfig.for_model raises on a model_type transformers does not register; remote code is off
        out.append(f"{name}: model_type {model_type[:40]!r} is not one transformers builds without remote code "
                   "(verify --random-init builds the model from this file)")
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "vocab_size"):
        value = doc.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            out.append(f"{name}: {key} must be a positive integer")
        elif value > MAX_CONFIG_INT:  # the bound a local config.json is held to (advisor.catalog.hf_config)
            out.append(f"{name}: {key} is above {MAX_CONFIG_INT:,}")
    return out


MODEL_CONFIG_DIMS = (("num_hidden_layers", "layers"), ("hidden_size", "hidden"), ("num_attention_heads", "heads"),
                     ("num_key_value_heads", "kv_heads"), ("vocab_size", "vocab"))
"""model_config.json keys against the ModelSpec fields the estimate uses."""


def model_config_problems(text: str | None, model) -> list[str]:
    """model_config.json against the model the files train: `verify --random-init` builds the model from that file,
    so a file of another architecture would run (and measure) a model the check never estimated."""
    if not text:
        return []
    try:
        doc = safeio.load_json(text, where="model_config.json")
    except safeio.UnsafeInputError:
        return []  # reported by the files' own checks
    if not isinstance(doc, dict):
        return []
    wrong = [f"{key} {doc.get(key)!r} (the model has {getattr(model, attr)})" for key, attr in MODEL_CONFIG_DIMS
             if isinstance(doc.get(key), int) and not isinstance(doc.get(key), bool)
             and doc.get(key) != getattr(model, attr)]
    if not wrong:
        return []
    return [f"model_config.json describes another architecture than {model.id}: " + ", ".join(wrong[:3])
            + ("" if len(wrong) <= 3 else f" and {len(wrong) - 3} more") + "; verify --random-init builds the model "
            "from this file"]
