"""Hardware choices a pinned knob rules out, found before the planner searches them, and the values of that knob
that would keep a choice.

Why: the planner checks the rules lazily, after the memory estimates, on the candidates it could choose. When a pin
breaks a rule on every candidate (`--sp-size 7` on 28 attention heads), one search estimates every structure and
then runs the whole rulebook on each candidate, to choose nothing: about 80 ms per hardware choice, and recommend
has a few hundred of them (every type and count, once per method pass). Here only the rules that read a pinned knob
run, and on one structure for most choices: it passes them, or it fails one that reads nothing the structures
differ in, which every structure then fails.

Sound: a choice is ruled out only when every structure the planner would search for it fails one of these rules in
a way the micro-batch search cannot change (the planner's own test, `about_a_pin`). Its search would choose
nothing, so skipping it changes no option. That a rule's verdict follows from what it reads is the rule engine's
contract: each rule declares its `reads`, and the engine shows them as the finding's evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import rules
from advisor.core import request as R
from advisor.core.errors import AdvisorError
from advisor.core.plan import Plan
from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.core.target import Target
from advisor.recommend.commands import hardware_request
from advisor.recommend.hardware import Hardware
from advisor.resolve import check_against_target, check_request
from advisor.search import structures
from advisor.search.planner import SEARCHED_LATER, about_a_pin
from rules.common import divisors, join
from rules.engine import run_rule

_PLAN_FIELD = {"zero": "zero_stage", "vllm": "vllm_mode"}
"""Request knobs whose plan field has another name."""

_NOT_PINS = ("model", "trainer", "teacher", "tokens", "steps", "trust_remote_code")
"""Request fields that are not knobs pinned against the search (the trainer always has a value)."""

_PLAN_FIELDS = frozenset(f.name for f in fields(Plan))

_PER_GPU_COUNT = ("sp_size", "cp_size")
"""Knobs whose valid values divide a GPU count: the values tried are the divisors of the counts planned."""

_CHOICES: dict[str, tuple] = {
    "method": R.METHODS, "backend": R.BACKENDS, "zero": (0, 1, 2, 3), "offload": R.OFFLOADS,
    "offload_device": R.OFFLOAD_DEVICES, "precision": R.PRECISIONS, "attn": R.ATTN_BUILTIN, "vllm": R.VLLM_MODES,
    "ref_model": R.REF_MODELS, "grad_ckpt": (True, False), "liger": (True, False), "packing": (True, False)}
"""The other knobs whose every value can be tried."""


@dataclass(frozen=True)
class RuledOut:
    """A hardware choice a pinned knob rules out, and the rule it breaks there."""

    hardware: Hardware
    finding: rules.Finding


def pinned_knobs(req: Request) -> dict[str, str]:
    """plan field path -> request knob, for every knob the user pinned that the plan holds."""
    out: dict[str, str] = {}
    for knob in req.pinned():
        name = _PLAN_FIELD.get(knob, knob)
        if knob not in _NOT_PINS and name in _PLAN_FIELDS:
            out["plan." + name] = knob
    return out


def pin_rules(req: Request) -> tuple[rules.Rule, ...]:
    """The error rules that read a pinned knob and that the planner holds against the request whatever the
    micro-batch search sets (`about_a_pin`), in registry order: the only ones that rule a choice out here."""
    paths = set(pinned_knobs(req))
    return tuple(r for r in rules.all_rules()
                 if r.severity == "error" and paths.intersection(r.reads) and about_a_pin(req, r.id))


# ------------------------------------------------------------------------------------------------ one choice


def _errors(req: Request, model: ModelSpec, target: Target, plan: Plan, checks: tuple[rules.Rule, ...],
            first_only: bool) -> list[rules.Finding]:
    ctx = rules.Context(request=req, plan=plan, model=model, target=target)
    out = []
    for rule in checks:
        finding = run_rule(rule, ctx)
        if finding.is_error:
            out.append(finding)
            if first_only:
                break
    return out


class _Settled:
    """Which plan fields have one value in every structure of a choice (asked field by field, each answered
    once): a field the micro-batch search sets afterwards is never settled, nor a property such as global_batch
    (it follows the micro-batch)."""

    def __init__(self, req: Request, plans: list[Plan]) -> None:
        self.req, self.plans, self.known = req, plans, {}

    def __call__(self, name: str) -> bool:
        if name not in self.known:
            knob = SEARCHED_LATER.get("plan." + name)
            searched_later = knob is not None and getattr(self.req, knob) is None
            self.known[name] = (name in _PLAN_FIELDS and not searched_later
                                and len({getattr(p, name) for p in self.plans}) == 1)
        return self.known[name]


_PLAN_DEPENDENT = ("versions", "memory", "speed")
"""Reads that follow the plan beyond its fields: the versions (rules.model.default_versions picks them by the
plan's features), and the estimates, absent here, for which a rule may compute a stand-in from the plan (MEM003's
DeepSpeed host bytes)."""


def _same_on_every_structure(finding: rules.Finding, settled: _Settled) -> bool:
    """A rule's verdict is the same on every structure when each plan field it reads is settled; a rule that
    reads what follows the plan otherwise, or is gated by the versions (`applies_to`), is judged structure by
    structure."""
    rule = rules.get_rule(finding.id)
    if rule.applies_to:
        return False
    for path in rule.reads:
        root, _, name = path.partition(".")
        if root in _PLAN_DEPENDENT or (root == "plan" and not settled(name)):
            return False
    return True


def ruling_error(req: Request, model: ModelSpec, target: Target,
                 checks: tuple[rules.Rule, ...]) -> rules.Finding | None:
    """The pinned-knob error that every structure the planner would search on this target fails (as the first
    structure reads it), or None when some structure passes these rules: the planner then has work to do.

    The first structure decides most choices: it passes, or it fails a rule that reads only settled fields (then
    every structure fails it). Otherwise each structure is checked."""
    if not checks:
        return None
    plans = structures(req, model, target)
    if not plans:
        return None
    errors = _errors(req, model, target, plans[0], checks, first_only=False)
    if not errors:
        return None
    settled = _Settled(req, plans)
    for error in errors:
        if _same_on_every_structure(error, settled):
            return error
    if any(not _errors(req, model, target, plan, checks, first_only=True) for plan in plans[1:]):
        return None
    return errors[0]


# ------------------------------------------------------------------------------------------------ the values to suggest


def _keeps_a_choice(req: Request, model: ModelSpec, choices: list[Hardware], checks: tuple[rules.Rule, ...]) -> bool:
    """Whether some choice passes the request checks and the pinned-knob rules: one the planner would search."""
    try:
        check_request(req)
    except AdvisorError:
        return False
    for hw in choices:
        r, target = hardware_request(req, hw), hw.target()
        try:
            check_against_target(r, target)
        except AdvisorError:
            continue
        if ruling_error(r, model, target, checks) is None:
            return True
    return False


def _trial_choices(choices: list[Hardware]) -> list[Hardware]:
    """The smallest and the largest count of each GPU type: a value is tried on these only, so that a knob's
    values cost two choices per type, not every count. The counts are powers of two, so the largest one's divisors
    include every other count's; a value valid only on a count in between goes unlisted (never a wrong one
    listed)."""
    out: dict[tuple, Hardware] = {}
    for gpu in dict.fromkeys(hw.gpu for hw in choices):
        mine = [hw for hw in choices if hw.gpu == gpu]
        for hw in (min(mine, key=lambda h: h.gpus), max(mine, key=lambda h: h.gpus)):
            out[(gpu.id, hw.gpus_per_node, hw.nodes)] = hw
    return list(out.values())


def _values_to_try(knob: str, choices: list[Hardware]) -> list:
    if knob in _PER_GPU_COUNT:
        return sorted({d for hw in choices for d in divisors(hw.gpus)})
    return list(_CHOICES.get(knob, ()))


def valid_values(req: Request, knob: str, model: ModelSpec, choices: list[Hardware],
                 checks: tuple[rules.Rule, ...]) -> list:
    """The values of `knob` (the other pins kept) with which some choice passes the rules that ruled them all
    out: what a rule's own fix lists for one target (SP001's valid --sp-size values), over the choices planned."""
    tried = _trial_choices(choices)
    return [v for v in _values_to_try(knob, choices)
            if v != getattr(req, knob) and _keeps_a_choice(req.with_(**{knob: v}), model, tried, checks)]


# ------------------------------------------------------------------------------------------------ the message


def _flag(knob: str) -> str:
    return "--" + knob.replace("_", "-")


def _pin_text(knob: str, value) -> str:
    """The flag that pins `knob` to `value`: `--sp-size 7`, `--no-liger` (argparse BooleanOptionalAction)."""
    if isinstance(value, bool):
        return _flag(knob) if value else "--no-" + _flag(knob)[2:]
    return f"{_flag(knob)} {value}"


def blamed_knobs(req: Request, ruled_out: list[RuledOut]) -> list[str]:
    """The pinned knobs the breaking rules read, in the order of the request's fields."""
    read = {path for r in ruled_out for path in rules.get_rule(r.finding.id).reads}
    return [knob for path, knob in pinned_knobs(req).items() if path in read]


def _values_fix(req: Request, knob: str, model: ModelSpec, choices: list[Hardware],
                checks: tuple[rules.Rule, ...]) -> str | None:
    values = valid_values(req, knob, model, choices, checks)
    if not values:
        return None
    if isinstance(values[0], bool):
        return f"use {_pin_text(knob, values[0])}"
    where = " on these GPU counts" if knob in _PER_GPU_COUNT else ""
    return f"valid {_flag(knob)} values for {model.id}{where}: {join(values)}"


def pin_problem(req: Request, model: ModelSpec, ruled_out: list[RuledOut], choices: list[Hardware],
                checks: tuple[rules.Rule, ...]) -> tuple[str, str]:
    """(message, hint) when pinned knobs rule out every choice: the knobs and the rules they break (one quoted as
    it reads on the largest choice), and for each knob the values that would keep a choice; the rule's own fix
    when no value of any knob would."""
    knobs = blamed_knobs(req, ruled_out)
    worst = max(ruled_out, key=lambda r: r.hardware.gpus)
    ids = list(dict.fromkeys(r.finding.id for r in ruled_out))
    f = worst.finding
    message = (f"{' '.join(_pin_text(k, getattr(req, k)) for k in knobs)} leaves no option: every one breaks "
               f"{' or '.join(ids)} (on {worst.hardware.label()}, {f.id} {f.name}: {f.message})")
    fixes = [fix for fix in (_values_fix(req, k, model, choices, checks) for k in knobs) if fix]
    if not fixes:
        return message, f.fix or f"trl-advisor explain {f.id} says what it needs"
    return message, f"{'; '.join(fixes)} (trl-advisor explain {f.id})"
