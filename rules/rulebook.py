"""Every rule, in report order: each area module ends with an explicit RULES tuple, concatenated here and validated
once (ids permanent and unique, sections present). No discovery."""

from __future__ import annotations

from rules import (
    compat,
    configfiles,
    distributed,
    hardware,
    memory,
    parallelism,
    peft_quant,
    trainers,
    versions,
    vllm_rules,
)
from rules.model import Rule
from rules.registry import lookup, validate_registry

ALL_RULES: tuple[Rule, ...] = validate_registry((
    *hardware.RULES, *distributed.RULES, *peft_quant.RULES, *parallelism.RULES, *trainers.RULES,
    *vllm_rules.RULES, *compat.RULES, *configfiles.RULES, *versions.RULES, *memory.RULES,
))


def all_rules() -> tuple[Rule, ...]:
    return ALL_RULES


def get_rule(rule_id: str) -> Rule:
    """A rule by id or name; unknown -> advisor.core.errors.UnknownNameError with close matches as the hint."""
    return lookup(ALL_RULES, rule_id)
