"""Every kind of bundle's requirements.txt installs: `pip install --dry-run --ignore-installed -r requirements.txt`
resolves it against the package index, and pip picks exactly the pinned versions.

The kinds are the three environments a bundle can pin (rules/environments.py): TRL 1.16, TRL 1.16 with vLLM, and
Unsloth (with and without vLLM). For each, the test resolves the bundle that imports the most packages (DeepSpeed,
QLoRA's peft and bitsandbytes, Liger, vLLM) plus the flagship bundles as `trl-advisor generate` writes them (GRPO
with a 4 + 4 GPU vLLM server, GRPO colocate, two-node SLURM, Unsloth). An offline test checks that every other plan's
requirements are a subset of its environment's largest, with the same versions, so these resolutions cover them.

Marked `resolve` (network, 10-80 s a file: the index serves no separate wheel metadata, so pip downloads whole wheels,
about 3 GB for a vLLM environment, and keeps none of them): `-m "not resolve"` deselects it locally; CI runs it. This
machine's pip configuration (local wheel folders, a torch cap) is left out, so the answer is the index's alone, with
torch's CUDA build and its CUDA wheels as a user's pip sees them; PIP_INDEX_URL (a site's mirror) is kept.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from plan_defaults import build_plan

from advisor.bundle.render import requirements
from advisor.cli import main
from rules.environments import bundle_pins, uses_hub_kernels

GENERATED = {
    "grpo-vllm-server-4+4": ["--model", "7B", "--trainer", "grpo", "--vllm", "server", "--vllm-gpus", "4",
                             "--gpus", "8", "--gpu", "H100-80GB"],
    "grpo-vllm-colocate": ["--model", "1.5B", "--trainer", "grpo", "--vllm", "colocate", "--gpus", "1",
                           "--gpu", "H100-80GB"],
    "sft-70b-two-node-slurm": ["--model", "70B", "--trainer", "sft", "--gpus", "8", "--nodes", "2",
                               "--gpu", "H100-80GB"],
    "unsloth-sft-qlora": ["--model", "8B", "--trainer", "sft", "--method", "qlora", "--unsloth", "--gpus", "1",
                          "--gpu", "RTX-4090"],
    "sft-8b-flash-attention-8xh100": ["--model", "8B", "--trainer", "sft", "--attn", "flash_attention_2", "--gpus", "8",
                                      "--gpu", "H100-80GB"],
    "unsloth-grpo-qlora-vllm-colocate": ["--model", "1.5B", "--trainer", "grpo", "--method", "qlora", "--vllm",
                                         "colocate", "--unsloth", "--gpus", "1", "--gpu", "H100-80GB"],
}
"""Bundles as users get them."""

LARGEST = {
    "trl": dict(trainer="grpo", method="qlora", backend="deepspeed", zero_stage=3, liger=True, num_processes=8, gpus_per_node=8),
    "trl+vllm": dict(trainer="grpo", method="qlora", backend="deepspeed", zero_stage=3, liger=True, num_processes=8,
                     gpus_per_node=8, vllm_mode="colocate"),
    "trl+kernels": dict(trainer="grpo", method="qlora", backend="deepspeed", zero_stage=3, liger=True, num_processes=8,
                        gpus_per_node=8, attn="flash_attention_2"),
    "trl+vllm+kernels": dict(trainer="grpo", method="qlora", backend="deepspeed", zero_stage=3, liger=True,
                             num_processes=8, gpus_per_node=8, vllm_mode="colocate", attn="flash_attention_2"),
    "unsloth": dict(trainer="grpo", method="qlora", unsloth=True, backend="deepspeed", zero_stage=3, num_processes=8,
                    gpus_per_node=8),
    "unsloth+vllm": dict(trainer="grpo", method="qlora", unsloth=True, vllm_mode="colocate", backend="deepspeed",
                         zero_stage=3, num_processes=8, gpus_per_node=8),
}
"""Per environment, the plan whose bundle imports the most packages."""


def _environment(plan) -> str:
    return (("unsloth" if plan.unsloth else "trl") + ("+vllm" if plan.vllm_mode != "none" else "")
            + ("+kernels" if uses_hub_kernels(plan) else ""))


def _every_plan_kind():
    """Each combination of what decides a bundle's packages."""
    for unsloth, method, backend, liger, vllm, trainer, attn in itertools.product(
            (False, True), ("full", "lora", "qlora"), ("single", "ddp", "deepspeed", "fsdp2"), (False, True),
            ("none", "colocate", "server"), ("sft", "grpo"), ("sdpa", "flash_attention_2")):
        if unsloth and (backend == "fsdp2" or liger or attn != "sdpa"):
            continue  # Unsloth: one GPU, DDP or ZeRO-2/3, its own attention, no Liger (rules CMP002, CMP005)
        if vllm != "none" and trainer == "sft":
            continue
        yield build_plan(trainer=trainer, method=method, backend=backend,
                         zero_stage=3 if backend == "deepspeed" else 0, liger=liger, unsloth=unsloth, vllm_mode=vllm,
                         num_processes=1 if backend == "single" else 8, gpus_per_node=8, attn=attn)


def test_every_plan_kind_is_covered_by_its_environments_largest():
    largest = {env: bundle_pins(build_plan(**kw)) for env, kw in LARGEST.items()}
    seen = set()
    for plan in _every_plan_kind():
        env = _environment(plan)
        seen.add(env)
        pins = bundle_pins(plan)
        extra = {name: value for name, value in pins.items() if largest[env].get(name) != value}
        assert not extra, f"{plan.short()}: {extra} not in the resolved {env} environment {largest[env]}"
    assert seen == set(LARGEST)


def test_vllm_environments_pin_what_vllm_requires():
    """The transformers and torch a vLLM bundle pins satisfy the pinned vllm's own requirements (compat.toml, read
    from its wheel metadata), and an environment without vLLM keeps TRL 1.16's transformers."""
    from rules import vercmp
    from rules.compat import vllm_requires

    for env in ("trl+vllm", "unsloth+vllm"):
        pins = bundle_pins(build_plan(**LARGEST[env]))
        needs = vllm_requires(pins["vllm"])
        assert needs, f"no requirements recorded for vllm {pins['vllm']}"
        for package, spec in needs.items():
            assert vercmp.satisfies(pins[package], spec), (env, package, pins[package], spec)
    assert bundle_pins(build_plan(**LARGEST["trl"]))["transformers"] == "5.25.0"


def test_hub_kernels_keep_the_environments_transformers():
    """A hub-kernel or flash_attention_2 plan pins `kernels` in the range of the transformers its environment
    already pins, and moves nothing: transformers 5.25.0 (KERNELS_MIN/MAX_VERSION 0.19.1 / 0.20.0 in its
    utils/import_utils.py; kernels 0.19.1 is on the index, 2026-12-07) for TRL 1.16, and 5.17.0 (0.16.0 / 0.17.0)
    where vLLM 0.31.0 caps transformers below 5.18."""
    for attn in ("flash_attention_2", "kernels-community/flash-attn3"):
        plain = bundle_pins(build_plan(attn=attn))
        assert (plain["transformers"], plain["kernels"]) == ("5.25.0", ">=0.19.1,<0.20"), attn
        without = bundle_pins(build_plan())
        assert {k: v for k, v in plain.items() if k != "kernels"} == without, "kernels moved another pin"
        for mode in ("colocate", "server"):
            vllm = bundle_pins(build_plan(trainer="grpo", vllm_mode=mode, attn=attn))
            assert (vllm["transformers"], vllm["kernels"], vllm["vllm"]) == ("5.17.0", ">=0.16.0,<0.17", "0.31.0")


# ------------------------------------------------------------------------------------------- against the index

def _generated_lines(tmp: Path) -> dict[str, list[str]]:
    out = {}
    for name, argv in GENERATED.items():
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            rc = main(["generate", *argv, "--out", str(tmp / name)])
        assert rc == 0, f"{name}: {err.getvalue()}"
        text = (tmp / name / "requirements.txt").read_text(encoding="utf-8")
        out[name] = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    return out


def _cases(tmp: Path) -> dict[str, list[str]]:
    """Distinct requirement sets, named by every bundle that has it."""
    named = {f"largest-{env}": requirements(build_plan(**kw)) for env, kw in LARGEST.items()}
    named.update(_generated_lines(tmp))
    by_lines: dict[tuple[str, ...], list[str]] = {}
    for name, lines in named.items():
        by_lines.setdefault(tuple(sorted(lines)), []).append(name)
    return {" = ".join(names): list(lines) for lines, names in by_lines.items()}


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return _cases(tmp_path_factory.mktemp("bundles"))


_KEPT_PIP_VARS = {"PIP_INDEX_URL", "PIP_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_TIMEOUT"}


def _pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in _KEPT_PIP_VARS}
    env["PIP_CONFIG_FILE"] = os.devnull  # no pip.conf: no find-links, extra indexes or constraints of this machine
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# One parametrized test per distinct set; the ids are fixed here so that xdist workers agree on them.
_IDS = [*(f"largest-{env}" for env in LARGEST), *GENERATED]


@pytest.mark.resolve
@pytest.mark.parametrize("name", _IDS)
def test_requirements_resolve_against_the_index(name, cases, tmp_path):
    key = next((k for k in cases if name in k.split(" = ")), None)
    assert key is not None
    if key.split(" = ")[0] != name:
        pytest.skip(f"the same requirements as {key.split(' = ')[0]}, resolved there")
    lines = cases[key]
    req = tmp_path / "requirements.txt"
    req.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = tmp_path / "report.json"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--report", str(report), "-r", str(req)], env=_pip_env(), capture_output=True, text=True,
                          timeout=900)
    seconds = time.monotonic() - start
    assert proc.returncode == 0, (f"{key}: pip cannot install these together ({seconds:.0f} s; network? deselect "
                                  f"with -m 'not resolve'):\n" + "\n".join(lines) + "\n" + proc.stderr[-3000:])
    resolved = {_canonical(item["metadata"]["name"]): item for item in json.loads(report.read_text())["install"]}
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9][^,;\s]*)", line)
        if m:  # an exact pin: pip chose that release
            assert resolved[_canonical(m.group(1))]["metadata"]["version"] == m.group(2), line
    # what was resolved came from the index (no local wheel folder of this machine)
    assert all(item["download_info"]["url"].startswith("https://") for item in resolved.values())
    print(f"{key}: {len(resolved)} packages resolved in {seconds:.0f} s")
