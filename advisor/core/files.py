"""A folder of training configuration files as read: the parsed contents the rules look at (`Context.files`).

A plain type: the reading and parsing are advisor.bundle.read's, the judging is the rules'. Values the reader
could not evaluate without running the code are `Unresolved`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from advisor.core import safeio


class Unresolved(str):
    """A keyword argument whose value is an expression the reader cannot evaluate without running the code."""


@dataclass
class BundleFiles:
    """The parsed configuration files of one folder (or of an in-memory mapping, in tests)."""

    root: str | None = None
    names: tuple[str, ...] = ()
    ds_config: dict | None = None
    ds_config_name: str | None = None
    accelerate: dict | None = None
    accelerate_name: str | None = None
    trl_yaml: dict | None = None
    trl_yaml_name: str | None = None
    train_py: str | None = None
    configs: dict = field(default_factory=dict)
    """Config class name -> keyword arguments, from train.py (`GRPOConfig`, `LoraConfig`, `BitsAndBytesConfig`)."""
    trl_args: dict = field(default_factory=dict)
    """The TRL/TrainingArguments/ModelConfig namespace: the TRL YAML, then train.py's literal keyword arguments."""
    trl_args_origin: dict = field(default_factory=dict)
    """Argument -> "yaml" or the train.py class it was passed to (a wrong key in a Config(...) call raises; the
    same key in a TrlParser YAML is ignored)."""
    trainer: str | None = None
    config_class: str | None = None
    from_pretrained: list = field(default_factory=list)
    """Keyword arguments of each `from_pretrained(...)` call in train.py."""
    model_ids: list = field(default_factory=list)
    """Literal model ids passed to `from_pretrained(...)` or to a trainer's `model=`."""
    calls: frozenset = frozenset()
    """Every called name in train.py, dotted as written (`deepspeed.initialize`, `model.merge_and_unload`)."""
    imports: tuple = ()
    """(module, name) for `from module import name`; (module, "") for `import module`."""
    launch_sh: str | None = None
    requirements: dict = field(default_factory=dict)
    """requirements.txt: package -> exact version, or None when only a range is given."""
    plan_json: dict | None = None
    assumptions: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    """Files of the folder that were not read (too large, a named pipe, a device, not UTF-8), one line each."""

    # ---- views the rules share ----
    @property
    def zero(self) -> dict:
        """The ds_config `zero_optimization` block ({} when absent)."""
        z = (self.ds_config or {}).get("zero_optimization")
        return z if isinstance(z, dict) else {}

    @property
    def accelerate_ds(self) -> dict:
        d = (self.accelerate or {}).get("deepspeed_config")
        return d if isinstance(d, dict) else {}

    @property
    def accelerate_fsdp(self) -> dict:
        d = (self.accelerate or {}).get("fsdp_config")
        return d if isinstance(d, dict) else {}

    @property
    def parallelism(self) -> dict:
        d = (self.accelerate or {}).get("parallelism_config")
        return d if isinstance(d, dict) else {}

    @property
    def model_init_kwargs(self) -> dict:
        """What the model is loaded with: `model_init_kwargs`, then any `from_pretrained(...)` keywords."""
        out: dict = {}
        mik = self.trl_args.get("model_init_kwargs")
        if isinstance(mik, str):  # TrlParser accepts a JSON string on the command line and in the YAML
            try:
                mik = safeio.load_json(mik, where="model_init_kwargs")
            except safeio.UnsafeInputError:
                mik = None
        if isinstance(mik, dict):
            out.update(mik)
        for kwargs in self.from_pretrained:
            out.update(kwargs)
        return out

    def call_names(self) -> set[str]:
        """Last components of the called names (`model.merge_and_unload` -> `merge_and_unload`)."""
        return {c.rsplit(".", 1)[-1] for c in self.calls}

    def launch_lines(self) -> list[str]:
        """launch.sh's commands: comments dropped, backslash continuations joined."""
        if not self.launch_sh:
            return []
        out = []
        for line in self.launch_sh.replace("\\\n", " ").splitlines():
            code = re.sub(r"(^|\s)#.*$", "", line).strip()
            if code:
                out.append(code)
        return out

    def launch_env_all(self, name: str) -> list[str]:
        """Every value launch.sh assigns to NAME (exported or inline, not in comments), in file order."""
        found = []
        for line in self.launch_lines():
            found += re.findall(rf"(?:^|[\s;]){re.escape(name)}=([^\s;]+)", line)
        return [v.strip("'\"") for v in found]

    def launch_env(self, name: str) -> str | None:
        """The last value launch.sh assigns to NAME, else None."""
        values = self.launch_env_all(name)
        return values[-1] if values else None

    def vllm_server_gpus(self) -> int | None:
        """GPUs per node the launch script gives `vllm serve`: its CUDA_VISIBLE_DEVICES (or a VLLM_GPUS variable)."""
        for line in self.launch_lines():
            if re.search(r"\b(vllm\s+serve|trl\s+vllm-serve)\b", line):
                m = re.search(r"CUDA_VISIBLE_DEVICES=[\"']?([0-9][0-9,]*)", line)
                if m:
                    return len([x for x in m.group(1).split(",") if x])
        value = self.launch_env("VLLM_GPUS")
        if value and re.fullmatch(r"[0-9][0-9,]*", value):
            return len([x for x in value.split(",") if x])
        return None

    def quant_4bit(self) -> bool:
        bnb = self.configs.get("BitsAndBytesConfig", {})
        return bool(self.trl_args.get("load_in_4bit") or bnb.get("load_in_4bit")
                    or self.model_init_kwargs.get("load_in_4bit"))

    def quant_8bit(self) -> bool:
        bnb = self.configs.get("BitsAndBytesConfig", {})
        return bool(self.trl_args.get("load_in_8bit") or bnb.get("load_in_8bit")
                    or self.model_init_kwargs.get("load_in_8bit"))

    def quant_storage(self) -> str | None:
        value = self.configs.get("BitsAndBytesConfig", {}).get("bnb_4bit_quant_storage")
        if value is None:
            value = self.trl_args.get("bnb_4bit_quant_storage")
        return dtype_name(value) if value is not None else None

    def model_dtype(self) -> str | None:
        """The dtype the model is loaded in, as a short name (`bfloat16`), None when the files do not say."""
        mik = self.model_init_kwargs
        for key in ("dtype", "torch_dtype"):
            if mik.get(key) is not None:
                return dtype_name(mik[key])
        if self.trl_args.get("dtype") is not None:
            return dtype_name(self.trl_args["dtype"])
        return None

    def peft_enabled(self) -> bool:
        return bool(self.trl_args.get("use_peft") or "LoraConfig" in self.configs or "get_peft_model" in
                    self.call_names() or self.quant_4bit())

    def lora_target_modules(self) -> list[str]:
        value = self.configs.get("LoraConfig", {}).get("target_modules")
        if value is None:
            value = self.trl_args.get("lora_target_modules")
        if isinstance(value, str):
            return [value]
        return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def dtype_name(value: Any) -> str:
    """`torch.bfloat16`, `"bf16"`, `"bfloat16"` -> `bfloat16`."""
    text = str(value).rsplit(".", 1)[-1].strip().lower()
    return {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}.get(
        text, text)


def model_id(files: BundleFiles) -> str | None:
    """The model the files train: TRL `model_name_or_path`, plan.json, or the first `from_pretrained("...")`."""
    value = files.trl_args.get("model_name_or_path")
    if isinstance(value, str) and not isinstance(value, Unresolved):
        return value
    plan_model = (files.plan_json or {}).get("model")
    if isinstance(plan_model, dict) and isinstance(plan_model.get("id"), str) and plan_model["id"]:
        return plan_model["id"]
    request = (files.plan_json or {}).get("request")
    if isinstance(request, dict) and isinstance(request.get("model"), str) and request["model"]:
        return request["model"]
    return files.model_ids[0] if files.model_ids else None
