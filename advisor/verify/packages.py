"""The packages step: installed versions against requirements.txt, in tiers.

* A package that is missing, a CPU build of torch on a GPU run, or a range pin (`torch>=2.6`) that is not met
  fails.
* An exact pin (`transformers==5.24.0`) that is met passes.
* An exact pin that is not met is judged against the range the rules know to work, and is a **warning** with the
  pip line that matches the bundle when the installed version is inside it, a failure when it is outside. The
  range is what the installed TRL release declares for the package (its wheel metadata: `transformers>=4.56.2`,
  `deepspeed>=0.18.6`, `vllm>=0.22.0,<=0.31.0` ...), narrowed by the version rules (VER*, CMP*: a rule that passes
  with the pinned versions and fails with the installed ones), and by the API the bundle is written against: trl
  must be the pinned major.minor (train.py calls the TRL 1.16 API; rules/data/trl_fields.toml lists that
  release's fields), and a package of STRICT_PACKAGES at 1.0 or later the pinned major version (transformers 4 and
  5 differ in the loading and checkpointing arguments train.py passes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from advisor.verify.limits import STRICT_PACKAGES
from advisor.verify.metrics import _clip
from advisor.verify.outcome import FAIL, PASS, SKIP, StepResult

FEATURE_EXTRAS = frozenset({"deepspeed", "liger", "peft", "quantization", "vllm", "kernels"})
"""TRL extras whose requirements describe the packages a bundle runs with (not its test or docs tools)."""

RuleCheck = Callable[[dict[str, str]], list[tuple[frozenset[str], str]]]
"""versions -> the failing version rules as (packages each reads, "ID: message")."""


def requirements(text: str) -> list[tuple[str, str]]:
    """(normalised name, specifier without spaces) of each requirement line; options and comments skipped."""
    out = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.match(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*([^;]*)", line)
        if m:
            out.append((m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")))
    return out


def declared_ranges(requires: Iterable[str] | None) -> dict[str, list[str]]:
    """Package -> the specifiers a distribution's metadata (`importlib.metadata.requires`) gives it, its feature
    extras included; lines under other markers (python_version, test and docs extras) are left out."""
    out: dict[str, list[str]] = {}
    for line in requires or ():
        req, _, marker = line.partition(";")
        marker = marker.strip()
        if marker:
            extra = re.fullmatch(r"""extra\s*==\s*["']([^"']+)["']""", marker)
            if not extra or extra.group(1) not in FEATURE_EXTRAS:
                continue
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(.*)$", req)
        if m and m.group(2).strip():
            out.setdefault(m.group(1).lower().replace("_", "-"), []).append(m.group(2).replace(" ", ""))
    return out


def _release(version: str) -> tuple[int, ...]:
    from rules import vercmp

    return tuple(vercmp.parse(version)[0]) + (0, 0)


def _api_problem(name: str, have: str, want: str) -> str | None:
    """Why `have` cannot run what was written for `want`, by the API rule of the module docstring, or None."""
    h, w = _release(have), _release(want)
    if name == "trl" and h[:2] != w[:2]:
        return f"trl {have}: train.py is written for the TRL {w[0]}.{w[1]} API (pinned {want})"
    if name in STRICT_PACKAGES and w[0] >= 1 and h[0] != w[0]:
        return f"{name} {have}: another major version than the pinned {want}"
    return None


def judge(text: str, installed: Callable[[str], str | None], *, cpu: bool, trl_requires: Iterable[str] | None,
          rule_check: RuleCheck | None = None) -> StepResult:
    """The packages step (see the module docstring). `installed(name)` is the version here (None: missing),
    `trl_requires` the installed TRL's requirement lines, `rule_check` runs the version rules on a versions map."""
    from rules import vercmp

    problems: list[str] = []
    warnings: list[str] = []
    drift: dict[str, tuple[str, str]] = {}
    pins: dict[str, str] = {}
    reqs = requirements(text)
    for name, spec in reqs:
        have = installed(name)
        shown_name, shown = _clip(name, 80), _clip(spec, 80)  # one short line per package whatever the file holds
        if have is None:
            problems.append(f"{shown_name} not installed (requirements.txt: {shown_name}{shown})")
            continue
        if name == "torch" and "+cpu" in have and not cpu:
            problems.append(f"torch {have} is a CPU build: it cannot train on the GPUs")
            continue
        if not spec:
            continue
        try:
            if spec.startswith("==") and not spec.endswith(".*"):
                want = spec[2:]
                pins[name] = want
                if vercmp.compare(have, want) != 0:
                    drift[name] = (have, want)
            elif not vercmp.satisfies(have, spec):
                problems.append(f"{shown_name} {have} does not satisfy {shown}")
        except vercmp.VersionError:
            warnings.append(f"{shown_name} {_clip(have, 40)}: cannot compare with {shown}")
    ranges = declared_ranges(trl_requires)
    rule_news: dict[str, list[str]] = {}
    if drift and rule_check is not None:
        here = {**pins, **{n: h for n, (h, _) in drift.items()}}
        before = {m for _, m in rule_check(dict(pins))}
        for packages, message in rule_check(here):
            if message in before:
                continue  # fails with the pins too: the rules step reports it
            for name in packages & set(drift):
                rule_news.setdefault(name, []).append(message)
    for name, (have, want) in drift.items():
        try:
            api = _api_problem(name, have, want)
            outside = [s for s in ranges.get(name, []) if not vercmp.satisfies(have, s)]
        except vercmp.VersionError:
            warnings.append(f"{name} {_clip(have, 40)}: cannot compare with the pinned {_clip(want, 40)}")
            continue
        if outside:
            problems.append(f"{name} {have}: TRL requires {name}{','.join(outside)} (pinned {want})")
        elif api:
            problems.append(api)
        elif rule_news.get(name):
            problems.append(f"{name} {have} (pinned {want}): {rule_news[name][0]}")
        else:
            basis = [f"TRL requires {name}{','.join(ranges[name])}"] if ranges.get(name) else []
            basis.append("the version rules pass")
            warnings.append(f"{name} {have} installed, the bundle pins {want}: inside the range that works "
                            f"({'; '.join(basis)}); to match the bundle: pip install {name}=={want}")
    if not reqs:
        return StepResult("packages", SKIP, "requirements.txt names no package")
    if problems:
        # requirements.txt asks for torch>=2.6, which a CPU build already satisfies: reinstalling from it changes nothing
        cpu_torch = any(p.startswith("torch ") and "CPU build" in p for p in problems)
        hint = ("install torch's CUDA build for your driver (https://pytorch.org/get-started/), e.g. pip install "
                "--force-reinstall torch --index-url https://download.pytorch.org/whl/cu128"
                if cpu_torch and len(problems) == 1 else "install the bundle's versions: pip install -r requirements.txt"
                + ("; then torch's CUDA build for your driver (https://pytorch.org/get-started/)" if cpu_torch else ""))
        return StepResult("packages", FAIL, "; ".join(problems), hint, warnings=warnings)
    exact = len(reqs) - len(drift)
    detail = f"{len(reqs)} requirements met" + (f" ({exact} exactly, {len(drift)} inside the working range)"
                                                if drift else "")
    return StepResult("packages", PASS, detail, warnings=warnings)


def rule_check_for(ctx) -> RuleCheck:
    """Runs the version and compatibility rules (VER*, CMP*) on the bundle's plan with a given versions map."""
    from dataclasses import replace

    from rules.engine import run_rules
    from rules.rulebook import ALL_RULES

    chosen = [r for r in ALL_RULES if r.id.startswith(("VER", "CMP"))]

    def check(versions: dict[str, str]) -> list[tuple[frozenset[str], str]]:
        merged = {**(ctx.versions or {}), **versions}
        c = replace(ctx, versions=merged, version_origin={k: "given" for k in merged})
        out = []
        for f in run_rules(c, chosen):
            if f.is_error:
                packages = frozenset(k.split(".", 1)[1] for k in f.reads if k.startswith("versions."))
                out.append((packages, f"{f.id}: {f.message}"))
        return out

    return check


def installed_lookup(report) -> Callable[[str], str | None]:
    """name -> the version installed here: the probe's reading where it has one, else package metadata."""
    from hw_probe.software import installed_version

    software = getattr(report, "software", None)
    probed = {k.lower().replace("_", "-"): v for k, v in (software.by_package() if software else {}).items()}

    def lookup(name: str) -> str | None:
        if name in probed:  # the probe read it (None: not installed)
            return probed[name]
        return installed_version((name, name.replace("-", "_")))

    return lookup


def trl_requirements() -> list[str] | None:
    """The installed TRL's requirement lines (None when TRL is not installed here)."""
    from importlib import metadata

    try:
        return list(metadata.requires("trl") or [])
    except metadata.PackageNotFoundError:
        return None
    except Exception:  # a broken dist-info: no range to read
        return None
