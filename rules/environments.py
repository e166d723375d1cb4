"""The Python environment a bundle installs, as data: for a plan, the packages its requirements.txt pins (exact
versions and ranges, rules/data/pins.toml), and the transformers release its training processes import.

requirements.txt, README.md and plan.json read it (advisor.bundle.render); the rules' default versions come from
the same tables (rules.model.default_versions). Three environments exist:

- TRL 1.16 ([pins], torch a floor);
- TRL 1.16 with vLLM ([pins] with [pins_when_used] on top): vllm 0.31.0 caps transformers below 5.18 and pins
  torch 2.13.0, and the training processes import vllm in both modes, so training runs that transformers too;
- Unsloth ([unsloth]: trl 1.15.0, transformers 5.17.0, datasets < 5), with [pins_when_used] on top when the plan
  uses vLLM (trl 1.15.0's [vllm] extra allows vllm>=0.21.0,<=0.31.0, and 5.17.0 is inside vllm's cap).
"""

from __future__ import annotations

from rules import vercmp
from rules.datafiles import load_toml


def vllm_window(trl_version: str | None) -> str | None:
    """The vLLM specifier the given TRL supports (by major.minor), None when not recorded."""
    if not trl_version:
        return None
    try:
        release = vercmp.parse(trl_version)[0]
    except vercmp.VersionError:
        return None
    key = ".".join(str(x) for x in (release + (0,))[:2])
    return load_toml("compat.toml")["vllm"]["window"].get(key)


def vllm_requires(vllm_version: str | None) -> dict[str, str] | None:
    """package -> specifier that the given vLLM release requires of the environment it shares with training
    (transformers, torch; compat.toml [vllm.requires]); None when that release is not recorded."""
    if not vllm_version:
        return None
    table = load_toml("compat.toml")["vllm"].get("requires", {})
    for release, requires in table.items():
        try:
            if vercmp.compare(vllm_version, release) == 0:
                return dict(requires)
        except vercmp.VersionError:
            return None
    return None


def _uses_vllm(plan) -> bool:
    return getattr(plan, "vllm_mode", "none") != "none"


def bundle_pins(plan) -> dict[str, str]:
    """name -> pins.toml value (an exact version such as "5.17.0", or a specifier such as ">=2.6") for every package
    the plan's bundle installs, in requirements.txt order; only what this plan imports."""
    data = load_toml("pins.toml")
    if plan.unsloth:
        env = dict(data["unsloth"])
        names = ["torch", "unsloth", "unsloth_zoo", "trl", "transformers", "accelerate", "datasets", "peft"]
        if plan.method == "qlora":
            names.append("bitsandbytes")
        if plan.uses_deepspeed:
            names.append("deepspeed")
    else:
        env = {**data["pins"], **data.get("requires", {})}
        names = ["torch", "trl", "transformers", "accelerate", "datasets"]
        if plan.method in ("lora", "qlora"):
            names.append("peft")
        if plan.method == "qlora":
            names.append("bitsandbytes")
        if plan.uses_deepspeed:
            names.append("deepspeed")
        if plan.liger:
            names.append("liger-kernel")
    if _uses_vllm(plan):
        env.update(data["pins_when_used"])
        names.append("vllm")
    if plan.trainer in ("grpo", "rloo"):
        names.append("math-verify")  # the default --reward accuracy
    if uses_hub_kernels(plan):
        # the range the environment's own transformers accepts (pins.toml [kernels_for_transformers]): hub kernels
        # do not move transformers
        env["kernels"] = data["kernels_for_transformers"][env["transformers"]]
        names.append("kernels")
    return {name: env[name] for name in names}


def uses_hub_kernels(plan) -> bool:
    """Whether transformers loads the plan's attention through `kernels`: a hub kernel (`org/name`), or
    flash_attention_2, served by kernels-community/flash-attn2 when the flash-attn package is absent (the bundle
    does not build it: it compiles against CUDA for tens of minutes)."""
    return "/" in plan.attn or plan.attn == "flash_attention_2"


def training_transformers_version(plan) -> str:
    """The transformers release the plan's training processes run (exact: every environment pins it): 5.24.0 for
    TRL 1.16 (hub kernels included), 5.17.0 with vLLM or Unsloth (rules/data/pins.toml says why)."""
    return bundle_pins(plan)["transformers"]


def environment_summary(plan) -> dict:
    """What a bundle's requirements.txt and README say about its environment, from the same data as the pins:
    {"transformers": the training's release, "trl": its release, "vllm": None or {"version", "trl_window",
    "requires": {package: specifier}}, "pins": bundle_pins(plan)} (vLLM's requirements of the shared environment,
    compat.toml)."""
    pinned = bundle_pins(plan)
    summary: dict = {"transformers": pinned["transformers"], "trl": pinned["trl"], "vllm": None, "pins": pinned}
    if "vllm" in pinned:
        version = pinned["vllm"]
        summary["vllm"] = {"version": version, "trl_window": vllm_window(pinned["trl"]),
                           "requires": vllm_requires(version) or {}}
    return summary
