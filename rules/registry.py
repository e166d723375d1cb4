"""Declaring rules: the @rule decorator checks each rule's conventions at import, and lookups by id.

Each rule module ends with an explicit `RULES = (...)` tuple and rules/__init__.py concatenates them: no discovery by
walking the file system, no registration as an import side effect.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Iterable

from rules.model import AREAS, SEVERITIES, Context, Result, Rule

REQUIRED_SECTIONS = ("## Why", "## Fix", "## Example", "## References")
ID_PATTERN = re.compile(r"^(" + "|".join(AREAS) + r")\d{3}$")
NAME_PATTERN = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
URL_PATTERN = re.compile(r"https?://[^\s<>()\"']+[^\s<>()\"'.,;:]")
KNOWN_PACKAGES = ("trl", "transformers", "accelerate", "deepspeed", "peft", "vllm", "liger-kernel", "unsloth",
                  "torch", "datasets", "bitsandbytes", "kernels")


class RuleDefinitionError(Exception):
    """A rule that breaks the registry's conventions; raised at import so it can never ship."""


def rule(*, id: str, name: str, severity: str, reads: Iterable[str] = (), applies_to: dict[str, str] | None = None,
         seed: str | None = None, auto_fix: bool = False) -> Callable[[Callable[[Context], Result]], Rule]:
    """Turn a documented check function into a Rule.

    The docstring is the rule's `explain` page: a summary line, then `## Why`, `## Fix`, `## Example` and
    `## References` (at least one URL, which become the rule's sources).
    """

    def register(check: Callable[[Context], Result]) -> Rule:
        where = f"{id} ({check.__module__}.{check.__qualname__})"
        if not ID_PATTERN.match(id):
            raise RuleDefinitionError(f"{where}: id must be an area prefix ({', '.join(AREAS)}) and three digits")
        if not NAME_PATTERN.match(name):
            raise RuleDefinitionError(f"{where}: name {name!r} is not kebab-case")
        if severity not in SEVERITIES:
            raise RuleDefinitionError(f"{where}: severity must be one of {SEVERITIES}")
        doc = inspect.getdoc(check) or ""
        missing = [s for s in REQUIRED_SECTIONS if s not in doc]
        if missing:
            raise RuleDefinitionError(f"{where}: docstring lacks {', '.join(missing)}")
        references = doc.split("## References", 1)[1]
        sources = tuple(dict.fromkeys(URL_PATTERN.findall(references)))
        if not sources:
            raise RuleDefinitionError(f"{where}: ## References lists no URL")
        reads_t = tuple(reads)
        if not reads_t:
            raise RuleDefinitionError(f"{where}: declare the inputs the rule reads")
        bad_roots = [r for r in reads_t if r.split(".")[0] not in _READ_ROOTS]
        if bad_roots:
            raise RuleDefinitionError(f"{where}: reads {bad_roots} do not start with one of {_READ_ROOTS}")
        applies = tuple(sorted((applies_to or {}).items()))
        for package, _spec in applies:
            if package not in KNOWN_PACKAGES:
                raise RuleDefinitionError(f"{where}: applies_to names unknown package {package!r}")
        return Rule(id=id, name=name, severity=severity, check=check, doc=doc, reads=reads_t, sources=sources,
                    applies_to=applies, seed_id=seed, auto_fixable=auto_fix)

    return register


_READ_ROOTS = ("request", "plan", "model", "target", "memory", "speed", "versions", "files")


def validate_registry(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    """Ids and names unique across the whole registry."""
    rules = tuple(rules)
    seen_ids: dict[str, Rule] = {}
    seen_names: dict[str, Rule] = {}
    for r in rules:
        if r.id in seen_ids:
            raise RuleDefinitionError(f"duplicate rule id {r.id}")
        if r.name in seen_names:
            raise RuleDefinitionError(f"duplicate rule name {r.name} ({seen_names[r.name].id} and {r.id})")
        seen_ids[r.id] = r
        seen_names[r.name] = r
    return rules


def lookup(rules: Iterable[Rule], key: str) -> Rule:
    """A rule by id (case-insensitive) or by name; unknown -> UnknownNameError with close matches."""
    from advisor.core.errors import UnknownNameError

    rules = tuple(rules)
    wanted = key.strip()
    for r in rules:
        if r.id.lower() == wanted.lower() or r.name == wanted.lower():
            return r
    close = []
    m = re.fullmatch(r"([A-Za-z]+)-?0*(\d{1,3})", wanted)
    if m:  # `sp1`, `SP-01` -> SP001
        padded = f"{m.group(1).upper()}{int(m.group(2)):03d}"
        close += [r.id for r in rules if r.id == padded]
    close += difflib.get_close_matches(wanted.upper(), [r.id for r in rules], n=3, cutoff=0.6)
    close += difflib.get_close_matches(wanted.lower(), [r.name for r in rules], n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(list(dict.fromkeys(close))[:3])}?" if close else "list them with: trl-advisor rules"
    raise UnknownNameError(f"unknown rule '{key}'", hint=hint)
