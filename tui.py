"""The wizard: `trl-advisor` on a terminal, or `trl-advisor wizard [REQUEST flags]`. It asks and shows; the core
computes.

Every number, sentence, rule and file on screen comes from the functions the command line calls:
`advisor.search.decide` (the plan, its memory and speed, the alternatives), `advisor.bundle.render.reasons` (why
each knob has its value), `advisor.check.check_request` (the rules, when no plan can be made),
`advisor.bundle.render.render_bundle` and `advisor.bundle.generate.generate` (the files), `hw_probe` (this machine)
and `rules` (the compatibility matrix, a rule's documentation). The app lays them out and turns keys into a
`Request`, so the screen and `trl-advisor generate` with the same flags agree; the command line it shows is
`advisor.bundle.render.recreate_command`.

Sections, top to bottom: the form (fields as data, parsed with the command line's messages) · outcomes (one core
call per change, run in a worker thread, stale answers dropped) · widgets · modal screens · the app · entry points.
"""

from __future__ import annotations

import asyncio
import functools
import io
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.suggester import SuggestFromList
from textual.widgets import (
    Checkbox,
    DataTable,
    Footer,
    Input,
    Label,
    Log,
    OptionList,
    Select,
    Static,
    TabbedContent,
    TabPane,
)
from textual.widgets.option_list import Option

from advisor.core import request as R
from advisor.core.errors import AdvisorError, NoFeasiblePlanError
from advisor.core.request import Request
from advisor.core.specs import GIB

# ==================================================================================================== the form

AUTO = "auto"
"""The form's word for "not pinned": the Request field stays None and the planner searches or defaults it."""

TARGET_MODES = (("this machine (probe)", "machine"), ("a catalogue GPU", "catalog"), ("a probe --json file", "file"))
"""Where the plan is for: no --gpu/--hardware (the probe), --gpu NAME, or --hardware FILE."""


def flag(name: str) -> str:
    """A Request field's command-line flag: the fields are the contract's flag names (recreate_command relies on
    it too)."""
    return "--" + name.replace("_", "-")


def _has_request_field(name: str) -> bool:
    return name in Request.__dataclass_fields__


def _generating(v: dict) -> bool:
    return v.get("trainer") in R.GENERATING_TRAINERS


@dataclass(frozen=True)
class FieldSpec:
    """One REQUEST flag as a form field. `shown` decides from the other values whether the field applies (a
    hidden field's value is kept but left out of the request, so the command line shows only what is used)."""

    name: str
    label: str
    kind: str
    """text | model | path | int | float | choice | switch (auto/on/off) | flag (auto/on) | bool (off/on)"""
    tab: str
    """target | training | rent"""
    section: str
    choices: tuple[tuple[str, object], ...] = ()
    """(label, value) for choice fields; AUTO first where the field may stay unpinned."""
    placeholder: str = AUTO
    shown: Callable[[dict], bool] = lambda v: True
    help: str = ""
    cli_flag: str = ""
    """The flag when it is not the name's (`prices` is `--price`, repeated; `show_all` is `--all`)."""

    @property
    def flag(self) -> str:
        return self.cli_flag or flag(self.name)

    @property
    def in_request(self) -> bool:
        """A REQUEST flag: the plan depends on it."""
        return _has_request_field(self.name)

    @property
    def rent_only(self) -> bool:
        """One of `trl-advisor recommend`'s own flags (the Rent tab): only the recommendation depends on it."""
        return self.tab == "rent" and not self.in_request

    @property
    def command(self) -> str:
        """The command whose `--help` documents the flag."""
        return "recommend" if self.rent_only else "generate"


def _choices(values: Iterable, *, auto: bool = True, label=str) -> tuple[tuple[str, object], ...]:
    return ((("auto", AUTO),) if auto else ()) + tuple((label(v), v) for v in values)


SWITCH = (("auto", AUTO), ("on", True), ("off", False))
ON_ONLY = (("auto", AUTO), ("on", True))
OFF_ON = (("off", False), ("on", True))


def _ref_models() -> tuple[str, ...]:
    """REF_MODELS as the core has it now (`bema` appears there when the core learns it)."""
    return tuple(R.REF_MODELS)


def form_fields() -> tuple[FieldSpec, ...]:
    """Every REQUEST flag, in form order. A field the core's Request lacks (checked by name: --teacher, --tokens,
    --steps) is left out, so the wizard works with the Request of before and after such a field is added."""
    what, trainer, how, where = "What to train", "Trainer", "How (auto = the planner decides)", "Where"
    specs = [
        FieldSpec("target_mode", "Plan for", "choice", "target", where, TARGET_MODES,
                  help="this machine's GPUs, a GPU from the catalogue, or a saved `trl-advisor probe --json`"),
        FieldSpec("gpu", "GPU", "choice", "target", where, shown=lambda v: v.get("target_mode") == "catalog",
                  help="trl-advisor gpus lists them"),
        FieldSpec("hardware", "Hardware file", "path", "target", where, placeholder="hw.json",
                  shown=lambda v: v.get("target_mode") == "file", help="written by `trl-advisor probe --json`"),
        FieldSpec("gpus", "GPUs per node", "int", "target", where, help="blank: 1 for a catalogue GPU, else all found"),
        FieldSpec("nodes", "Nodes", "int", "target", where),
        FieldSpec("model", "Model", "model", "training", what, placeholder="qwen2.5-7b, 8B, org/name or a path",
                  help="ctrl+o: browse the catalogue; Enter looks a hub id up online"),
        FieldSpec("trainer", "Trainer", "choice", "training", what, _choices(R.TRAINERS, auto=False, label=str.upper)),
        FieldSpec("method", "Method", "choice", "training", what, _choices(R.METHODS)),
        FieldSpec("lora_r", "LoRA rank", "int", "training", what, shown=lambda v: v.get("method") != "full"),
        FieldSpec("seq_len", "Sequence length", "int", "training", what, help="tokens per sequence"),
        FieldSpec("global_batch", "Global batch", "int", "training", what, help="sequences per optimizer step"),
        FieldSpec("micro_batch", "Micro-batch", "int", "training", what),
        FieldSpec("grad_accum", "Grad accumulation", "int", "training", what),
        FieldSpec("num_generations", "Generations", "int", "training", trainer, shown=_generating,
                  help="completions per prompt"),
        FieldSpec("max_completion_len", "Max completion", "int", "training", trainer, shown=_generating,
                  help="the completion part of the sequence length"),
        FieldSpec("vllm", "vLLM", "choice", "training", trainer, _choices(R.VLLM_MODES), shown=_generating),
        FieldSpec("vllm_gpus", "vLLM GPUs", "int", "training", trainer,
                  shown=lambda v: _generating(v) and v.get("vllm") in (None, "server")),
        FieldSpec("vllm_mem_fraction", "vLLM memory", "float", "training", trainer,
                  shown=lambda v: _generating(v) and v.get("vllm") in (None, "colocate"),
                  help="GPU fraction vLLM reserves in colocate mode"),
        FieldSpec("ref_model", "Reference model", "choice", "training", trainer, _choices(_ref_models()),
                  shown=lambda v: v.get("trainer") in R.PREFERENCE_TRAINERS),
    ]
    if _has_request_field("teacher"):
        specs.append(FieldSpec("teacher", "Teacher", "model", "training", trainer, placeholder="same forms as Model",
                               shown=lambda v: v.get("trainer") == "gkd", help="GKD distils this model into the student"))
    specs += [
        FieldSpec("backend", "Backend", "choice", "training", how, _choices(R.BACKENDS)),
        FieldSpec("zero", "ZeRO stage", "choice", "training", how, _choices((0, 1, 2, 3))),
        FieldSpec("offload", "Offload", "choice", "training", how, _choices(R.OFFLOADS)),
        FieldSpec("offload_device", "Offload device", "choice", "training", how, _choices(R.OFFLOAD_DEVICES),
                  shown=lambda v: v.get("offload") not in (None, "none")),
        FieldSpec("nvme_path", "NVMe folder", "path", "training", how, placeholder="/local_nvme",
                  shown=lambda v: v.get("offload_device") == "nvme",
                  help="the local NVMe folder DeepSpeed swaps to (absolute)"),
        FieldSpec("precision", "Precision", "choice", "training", how, _choices(R.PRECISIONS)),
        FieldSpec("grad_ckpt", "Checkpointing", "switch", "training", how, SWITCH),
        FieldSpec("liger", "Liger Kernel", "switch", "training", how, SWITCH),
        FieldSpec("attn", "Attention", "text", "training", how, help="sdpa, flash_attention_2, ... or org/kernel"),
        FieldSpec("packing", "Packing", "switch", "training", how, SWITCH),
        FieldSpec("sp_size", "Ulysses SP", "int", "training", how),
        FieldSpec("cp_size", "Ring CP", "int", "training", how),
        FieldSpec("unsloth", "Unsloth", "flag", "training", how, ON_ONLY),
        FieldSpec("trust_remote_code", "Remote code", "bool", "training", how, OFF_ON,
                  help="run code from the model repository"),
    ]
    # The Rent tab: the job's size (REQUEST flags: the plan and the bundle say how long the job takes too), then
    # `trl-advisor recommend`'s own flags (recommend chooses the hardware: the Target tab's choice is left out)
    job, rent = "The job", "What to rent"
    specs += [FieldSpec(name, label, "int", "rent", job, placeholder="", help=text)
              for name, label, text in (("tokens", "Tokens", "trained tokens (or steps): how long the job takes, "
                                         "on what, at what cost"),
                                        ("steps", "Steps", "optimizer steps (or tokens): how long the job takes, "
                                         "on what, at what cost"))
              if _has_request_field(name)]
    specs += [
        FieldSpec("budget_usd", "Budget $", "float", "rent", job, placeholder="",
                  help="also pick the fastest option costing at most this"),
        FieldSpec("deadline_hours", "Deadline h", "float", "rent", job, placeholder="",
                  help="also pick the cheapest option done within this many hours"),
        FieldSpec("sort", "Order by", "choice", "rent", job, (("time", "time"), ("cost", "cost")),
                  help="the table's order: the fastest or the cheapest first"),
        FieldSpec("gpu_types", "GPU types", "text", "rent", rent, placeholder="all supported",
                  help="comma-separated, any name --gpu takes: H100,A100-80GB (trl-advisor gpus lists them)"),
        FieldSpec("max_gpus", "Max GPUs", "int", "rent", rent, placeholder="64", help="most GPUs of one type"),
        FieldSpec("max_nodes", "Max nodes", "int", "rent", rent, placeholder="8", help="most nodes of 8 GPUs"),
        FieldSpec("prices", "Prices", "text", "rent", rent, placeholder="H100=2.49 ...",
                  help="USD per GPU-hour replacing the reference price: GPU=USD, several apart", cli_flag="--price"),
        FieldSpec("show_all", "Show", "bool", "rent", rent, (("front and picks", False), ("every option", True)),
                  help="every feasible option, or only the time-cost front, the picks and one row per unpriced GPU",
                  cli_flag="--all"),
    ]
    return tuple(specs)


RENT_DEFAULTS = {"sort": "time", "show_all": False}
"""The Rent tab's fields with a value before the user gives one (recommend's own defaults)."""


FIELDS = form_fields()
SPECS = {s.name: s for s in FIELDS}


@functools.cache
def field_of_knob() -> dict[str, str]:
    """Plan knob -> the Request field that pins it (zero_stage -> zero, vllm_mode -> vllm, gpus_per_node -> gpus),
    from the core's own table. The core's modules are imported when first needed, not before the first screen."""
    from advisor.bundle.render import _PIN_FLAGS

    return {knob: name for knob, (name, _flag) in _PIN_FLAGS.items()}


@functools.cache
def knob_of_field() -> dict[str, str]:
    return {name: knob for knob, name in field_of_knob().items()} | {"global_batch": "global_batch"}


def parse_text(spec: FieldSpec, text: str):
    """A typed value from what the user typed (None when blank), or AdvisorError with the message and hint the
    command line gives for the same text after the flag (advisor.cli's argument types, argparse's wording)."""
    text = text.strip()
    if not text:
        return None
    if spec.kind == "int":
        try:
            return int(text)
        except ValueError:
            raise _argument_error(spec, f"expected a whole number, got {text!r}") from None
    if spec.kind == "float":
        try:
            return float(text)
        except ValueError:
            raise _argument_error(spec, f"expected a number, got {text!r}") from None
    return text


def _argument_error(spec: FieldSpec, message: str) -> AdvisorError:
    return AdvisorError(f"argument {spec.flag}: {message}", hint=f"see `trl-advisor {spec.command} --help`")


def field_problem(spec: FieldSpec, value) -> AdvisorError | None:
    """What the core says about this one value on its own (its bounds, choices and text checks): the error the
    command line prints for the flag alone, or None. Checks across fields run with the plan."""
    from advisor.resolve import check_request

    if value is None:
        return None
    try:
        if spec.in_request:
            check_request(Request(**{"model": "", spec.name: value}))
        elif spec.rent_only:
            rent_field_check(spec.name, value)
    except AdvisorError as exc:
        return exc
    return None


def rent_field_check(name: str, value) -> None:
    """recommend's own checks of one of its flags, where the core has them apart (the limits, the GPU names, the
    prices); the budget and the deadline are checked by the recommend run itself, which refuses them at once."""
    if name in ("max_gpus", "max_nodes"):
        from advisor.recommend import DEFAULT_MAX_GPUS, DEFAULT_MAX_NODES
        from advisor.recommend.hardware import check_limits

        check_limits(value if name == "max_gpus" else DEFAULT_MAX_GPUS, value if name == "max_nodes" else
                     DEFAULT_MAX_NODES)
    elif name == "gpu_types":
        from advisor.recommend.hardware import gpu_types

        gpu_types(value.split(","))  # as the command line splits --gpu-types
    elif name == "prices":
        from advisor.catalog.prices import parse_price_flags, price_override

        for gpu_id, usd in parse_price_flags(price_texts(value)).items():  # one price per GPU, as --price
            price_override(gpu_id, usd)


def price_texts(value: str | None) -> list[str]:
    """The Prices field as --price flags: GPU=USD items apart by spaces or commas."""
    return (value or "").replace(",", " ").split()


def to_choice(spec: FieldSpec, value):
    """The Select value for a field's value (AUTO for None)."""
    return AUTO if value is None and any(v == AUTO for _, v in spec.choices) else value


def from_choice(value):
    return None if value == AUTO else value


def request_from(values: dict, passthrough: dict) -> Request:
    """The Request the form describes: shown fields with a value, the target mode as --gpu / --hardware, and any
    Request field the form has no widget for (passed through from the command line as given)."""
    data = dict(passthrough)
    mode = values.get("target_mode", "machine")
    for spec in FIELDS:
        if spec.name == "target_mode" or spec.name not in Request.__dataclass_fields__:
            continue
        data[spec.name] = values.get(spec.name) if spec.shown(values) else None
    data["gpu"] = values.get("gpu") if mode == "catalog" else None
    data["hardware"] = values.get("hardware") if mode == "file" else None
    data["model"] = values.get("model") or ""
    data["trust_remote_code"] = bool(values.get("trust_remote_code"))
    return Request(**data)


def values_from(req: Request) -> tuple[dict, dict]:
    """(form values, passthrough) for a Request: the inverse of request_from."""
    values = {s.name: getattr(req, s.name) for s in FIELDS if s.name in Request.__dataclass_fields__}
    values["model"] = req.model or ""
    values["target_mode"] = "file" if req.hardware else "catalog" if req.gpu else "machine"
    values.update({s.name: RENT_DEFAULTS.get(s.name) for s in FIELDS if s.rent_only})
    known = set(values) | {"gpu", "hardware"}
    passthrough = {f.name: getattr(req, f.name) for f in fields(Request) if f.name not in known}
    return values, passthrough


def command_line(req: Request) -> str:
    """The `trl-advisor generate` line of a request. recreate_command reads only the request when it is given, so
    the same line is shown whether or not a plan exists (it reproduces a refusal as well)."""
    from advisor.bundle.render import recreate_command

    return recreate_command(None, None, None, req)


def fix_changes(auto_fix: dict) -> dict:
    """A rule's auto-fix (plan knob -> value) as Request field changes, through the core's knob table."""
    return {field_of_knob().get(knob, knob): value for knob, value in auto_fix.items()
            if field_of_knob().get(knob, knob) in Request.__dataclass_fields__}


# ================================================================================================ outcomes


@dataclass
class PlanView:
    """A plan the core chose, with everything the screens show about it."""

    request: Request
    decision: object
    result: dict
    why: dict[str, str]
    summary: list[str]
    """The first lines `trl-advisor generate` prints (model on target, plan, memory, speed)."""
    features: set[str]
    report: object = None
    """The hardware report the plan was made with (probe or file), None for a catalogue GPU."""

    ok = True

    @property
    def command(self) -> str:
        return command_line(self.request)

    @property
    def findings(self) -> list[dict]:
        return list(self.result.get("findings", []))

    @property
    def notes(self) -> list[str]:
        return list(getattr(self.decision, "notes", []) or [])

    @property
    def target_notes(self) -> list[str]:
        from advisor.search.planner import PLAN_NOTE_PREFIXES

        return [n for n in self.notes if not n.startswith(PLAN_NOTE_PREFIXES)]


@dataclass
class PlanProblem:
    """The core refused: a bad value (`input`, with the form field it concerns), a pin that breaks a rule in every
    plan (`rule`), or nothing fits (`nofit`). `findings` are what `trl-advisor check` reports for the request."""

    request: Request
    kind: str
    message: str
    hint: str | None
    about: str | None = None
    """The form field the message is about, when it is about one."""
    findings: list[dict] = field(default_factory=list)
    report: object = None

    ok = False

    @property
    def command(self) -> str:
        return command_line(self.request)


def _field_of_message(message: str) -> str | None:
    """The form field an input error names: the core's messages start with the flag."""
    head = message.split(" ", 1)[0].removeprefix("argument ").rstrip(":")
    return next((s.name for s in FIELDS if s.flag == head), None)


def compute_outcome(req: Request, *, probe: Callable[[], object], allow_network: bool = False) -> PlanView | PlanProblem:
    """Plan `req` as `trl-advisor generate` does (decide), without writing anything.

    The model name is resolved first with downloads off unless `allow_network` (the user pressed Enter in the model
    field): a hub id half typed must not start a download on every key. `probe` returns this machine's report
    (probed once by the app)."""
    from advisor.resolve import check_request

    try:  # what needs none of the planner's modules first: no model yet is the first screen's answer
        check_request(req)
        if not req.model:
            raise AdvisorError("choose a model", hint="a catalogue id (qwen2.5-7b), a size (8B), a hub id "
                               "(org/name) or a local folder; ctrl+o browses the catalogue")
    except AdvisorError as exc:
        return PlanProblem(req, "input", exc.message, exc.hint, about=_field_of_message(exc.message))

    from advisor import catalog, check
    from advisor.bundle.render import reasons
    from advisor.resolve import load_report
    from advisor.search import PinnedRuleError, decide, render_decision
    from rules import reportable

    report = None
    try:
        for name in ("model", "teacher"):
            value = getattr(req, name, None)
            if value:
                try:
                    catalog.resolve_model(value, allow_network=allow_network)
                except AdvisorError as exc:
                    return PlanProblem(req, "input", exc.message, exc.hint, about=name)
        if req.hardware:
            try:
                report = load_report(req.hardware)
            except AdvisorError as exc:
                return PlanProblem(req, "input", exc.message, exc.hint, about="hardware")
        elif not req.gpu:
            report = probe()
        decision, result = decide(req, probe=probe)
    except (PinnedRuleError, NoFeasiblePlanError) as exc:
        kind = "rule" if isinstance(exc, PinnedRuleError) else "nofit"
        found = check.check_request(req, probe=probe)
        return PlanProblem(req, kind, exc.message, exc.hint, findings=[f.to_dict() for f in reportable(found.findings)],
                           report=report)
    except AdvisorError as exc:
        return PlanProblem(req, "input", exc.message, exc.hint, about=_field_of_message(exc.message), report=report)
    c = decision.chosen
    summary = list(itertools.takewhile(lambda line: line not in ("why", "rejected", "findings")
                                       and not line.startswith("wrote "), render_decision(result, decision, "").splitlines()))
    return PlanView(req, decision, result, reasons(c.plan, decision.model, decision.target, result, req), summary,
                    plan_features(req, c.plan, decision.model, decision.target), report)


def plan_features(req: Request, plan, model, target) -> set[str]:
    """The plan's features in the compatibility matrix's words (the rules' own reading of a plan)."""
    from rules import Context
    from rules.common import features

    return features(Context(request=req, plan=plan, model=model, target=target))


def matrix_rows(features: set[str]) -> list[tuple[bool, dict]]:
    """The rows of `trl-advisor rules --matrix` that concern these features: (both in the plan, row), rows whose
    two features are both in the plan first."""
    from rules import compat_matrix

    rows = [r for r in compat_matrix()["rows"] if r["a"] in features or r["b"] in features]
    marked = [(r["a"] in features and r["b"] in features, r) for r in rows]
    return sorted(marked, key=lambda m: not m[0])


# ------------------------------------------------------------------------------------ what to rent (recommend)

RENT_HARDWARE = ("gpu", "gpus", "nodes", "hardware")
"""Request fields recommend chooses itself (it refuses them): left out of what the Rent tab asks."""


@dataclass(frozen=True)
class RentAsk:
    """What the Rent tab asks `advisor.recommend.recommend`: the form's request without its hardware, and recommend's
    own flags as the command line passes them."""

    request: Request
    gpu_types: str | None = None
    max_gpus: int | None = None
    max_nodes: int | None = None
    prices: tuple[str, ...] = ()
    """--price texts (GPU=USD), parsed by the core as the command line's are."""
    budget_usd: float | None = None
    deadline_hours: float | None = None
    sort: str = "time"

    def command(self, show_all: bool = False) -> str:
        """The `trl-advisor recommend` line that prints this table."""
        import shlex

        from advisor.recommend.commands import command

        extra = [("--gpu-types", self.gpu_types), ("--max-gpus", self.max_gpus), ("--max-nodes", self.max_nodes),
                 *(("--price", p) for p in self.prices), ("--budget-usd", self.budget_usd),
                 ("--deadline-hours", self.deadline_hours), ("--sort", None if self.sort == "time" else self.sort)]
        words = [f"{name} {shlex.quote(str(value))}" for name, value in extra if value is not None]
        return " ".join([command("recommend", self.request), *words, *(["--all"] if show_all else [])])


def rent_ask(values: dict, passthrough: dict) -> RentAsk:
    req = request_from(values, passthrough).with_(**dict.fromkeys(RENT_HARDWARE))
    return RentAsk(req, gpu_types=values.get("gpu_types") or None, max_gpus=values.get("max_gpus"),
                   max_nodes=values.get("max_nodes"), prices=tuple(price_texts(values.get("prices"))),
                   budget_usd=values.get("budget_usd"), deadline_hours=values.get("deadline_hours"),
                   sort=values.get("sort") or "time")


@dataclass
class RentView:
    """What `trl-advisor recommend` answers for the ask: the Recommendation, and its report as the command prints it."""

    ask: RentAsk
    rec: object
    """advisor.recommend.Recommendation"""

    ok = True

    def report(self, show_all: bool) -> str:
        from advisor.recommend import render_recommendation

        return render_recommendation(self.rec, show_all=show_all)

    def table(self, show_all: bool) -> tuple[list[str], list[tuple[object, bool, list[str]]], list[str], str]:
        """(headers, rows, the lines under the table, the first line) of the printed report; each row is (Option,
        on the Pareto front, its cells as printed). The cells are read off the report so that they are the command
        line's to the character (its columns are apart by two spaces or more, cells hold single spaces only)."""
        import re

        from advisor.recommend.render import shown_options

        lines = self.report(show_all).splitlines()
        options = shown_options(self.rec, show_all)
        split = lambda line: re.split(r" {2,}", line.strip())  # noqa: E731
        headers = split(lines[2])
        rows = []
        for option, line in zip(options, lines[3:3 + len(options)], strict=True):
            cells = split(line[1:])
            rows.append((option, line.startswith("*"), cells + [""] * (len(headers) - len(cells))))
        return headers, rows, lines[3 + len(options):], lines[0]


@dataclass
class RentProblem:
    """recommend refused: a bad value (`about` names the field), or no option has a plan (`nofit`)."""

    ask: RentAsk
    kind: str
    message: str
    hint: str | None
    about: str | None = None

    ok = False


def compute_rent(ask: RentAsk) -> RentView | RentProblem:
    """`trl-advisor recommend` with the ask's flags, printing nothing: every catalogue GPU type and count planned
    (one planner search each: seconds, in a worker). The model is resolved with downloads off first, as for the
    plan."""
    from advisor import catalog
    from advisor.catalog.prices import parse_price_flags
    from advisor.recommend import recommend

    req = ask.request
    try:
        if not req.model:
            raise AdvisorError("choose a model", hint="in the Training tab (2)")
        try:
            catalog.resolve_model(req.model, allow_network=False)
        except AdvisorError as exc:
            return RentProblem(ask, "input", exc.message, exc.hint, about="model")
        limits = {k: v for k, v in (("max_gpus", ask.max_gpus), ("max_nodes", ask.max_nodes)) if v is not None}
        rec = recommend(req, gpu_types=ask.gpu_types.split(",") if ask.gpu_types is not None else None,
                        prices=parse_price_flags(ask.prices), budget_usd=ask.budget_usd,
                        deadline_hours=ask.deadline_hours, sort=ask.sort, **limits)
    except NoFeasiblePlanError as exc:
        return RentProblem(ask, "nofit", exc.message, exc.hint)
    except AdvisorError as exc:
        return RentProblem(ask, "input", exc.message, exc.hint, about=_field_of_message(exc.message))
    return RentView(ask, rec)


# ================================================================================================= widgets

BREAKDOWN = (("weights", "#4f8fe6"), ("gradients", "#b07fe0"), ("optimizer", "#e0904f"), ("activations", "#4fb36b"),
             ("logits", "#d6c14a"), ("other", "#8a8f98"))
"""The memory breakdown's parts (generate --json memory.breakdown_bytes) and their colours."""
RESERVE, FREE, MARGIN = ("allocator reserve", "#5c6370"), ("headroom", "#3a7a4a"), ("safety margin", "#3b3f46")


def memory_parts(memory: dict) -> list[tuple[str, int, str]]:
    """(name, bytes, colour) along the usable capacity: the breakdown of the peak, the allocator's reserve above
    it, the headroom left past the reserve and the safety margin (headroom_bytes), and that safety margin, kept back
    from the capacity. Only differences of the result's own figures, to draw them (reserve = reserved - peak,
    margin = capacity - reserved - headroom)."""
    parts = [(name, int(memory["breakdown_bytes"].get(name, 0)), colour) for name, colour in BREAKDOWN]
    peak, reserved = memory["per_gpu_peak_bytes"], memory["per_gpu_reserved_bytes"]
    headroom, capacity = memory["headroom_bytes"], memory["gpu_capacity_bytes"]
    parts.append((RESERVE[0], max(0, reserved - peak), RESERVE[1]))
    parts.append((FREE[0], max(0, headroom), FREE[1]))
    parts.append((MARGIN[0], max(0, capacity - reserved - max(0, headroom)), MARGIN[1]))
    return parts


def memory_bar(memory: dict, width: int) -> Text:
    """The parts as one line of `width` cells (cumulative rounding, so the cells add up to the width)."""
    parts = memory_parts(memory)
    total = max(sum(b for _, b, _ in parts), memory["gpu_capacity_bytes"], 1)
    bar, done, cum = Text(), 0, 0
    for name, size, colour in parts:
        cum += size
        end = round(cum / total * width)
        char = {"headroom": "░", "safety margin": "·", "allocator reserve": "▒"}.get(name, "█")
        bar.append(char * max(0, end - done), style=colour)
        done = max(done, end)
    return bar


def gib(n: float) -> str:
    return f"{n / GIB:.1f}"


def memory_legend(memory: dict) -> Text:
    legend = Text()
    for name, size, colour in memory_parts(memory):
        if size:
            # no-break spaces inside an item: a narrow screen wraps between items, never inside one
            legend.append("■\u00a0", style=colour).append(f"{name} {gib(size)}".replace(" ", "\u00a0") + "   ")
    legend.append("GiB per GPU", style="dim")
    return legend


def speed_text(speed: dict) -> str:
    """The same figures and rounding as `trl-advisor generate` prints."""
    return (f"{speed['tokens_per_second']:,.0f} tokens/s · {speed['step_seconds']:.2f} s/step · "
            f"MFU {speed['mfu'] * 100:.0f}%")


class MemoryBar(Static):
    """The per-GPU memory of the chosen plan against the usable capacity, with a legend."""

    DEFAULT_CSS = "MemoryBar { height: auto; margin: 1 0 0 0; }"

    memory: dict | None = None

    def show(self, memory: dict | None) -> None:
        self.memory = memory
        self.refresh(layout=True)

    def render(self):
        if not self.memory:
            return Text("")
        width = max(10, self.size.width - 2)
        return Text("\n").join([Text("▕") + memory_bar(self.memory, width) + Text("▏"), memory_legend(self.memory)])


class PlanStrip(Static):
    """Three lines under every tab: the plan (or why there is none), its memory and speed, the command line."""

    DEFAULT_CSS = "PlanStrip { height: 3; padding: 0 1; background: $boost; }"

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.lines: list[Text] = [Text("starting…", style="dim")]
        self.memory: dict | None = None

    def show(self, lines: list[Text], memory: dict | None = None) -> None:
        self.lines, self.memory = lines, memory
        self.refresh()

    def render(self):
        width = max(20, self.size.width - 2)
        lines = [line.copy() for line in self.lines[:3]]
        if self.memory is not None and len(lines) >= 2:
            # the bar takes what the figures leave of the second line
            rest = width - lines[1].cell_len - 3
            if rest >= 8:
                lines[1] = Text.assemble(memory_bar(self.memory, rest), " ", lines[1])
        for line in lines:
            line.truncate(width, overflow="ellipsis")
        return Text("\n").join(lines)


ALT_DIGITS = ("inverted_exclamation_mark", "trade_mark_sign", "pound_sign", "cent_sign", "infinity", "section_sign")
"""alt+1 .. alt+6 as Textual reads them (ESC+digit becomes the macOS option characters ¡™£¢∞§), and what tmux sends
for Esc followed quickly by a digit."""


class FieldInput(Input):
    """A text field that leaves alt+1..6 to the app (they switch tabs) instead of typing ¡™£¢∞§."""

    def check_consume_key(self, key: str, character: str | None) -> bool:
        return key not in ALT_DIGITS and super().check_consume_key(key, character)


class FieldRow(Vertical):
    """One field: its label, its editor, the plan's value for it when unpinned, and the core's message when the
    value is wrong."""

    DEFAULT_CSS = """
    FieldRow { height: auto; }
    FieldRow > Horizontal { height: 1; }
    FieldRow .name { width: 18; color: $text-muted; }
    FieldRow Input, FieldRow Select { width: 1fr; }
    FieldRow .plan { width: 13; padding-left: 1; color: $text-muted; }
    FieldRow .problem { display: none; height: auto; padding-left: 18; color: $text-error; }
    FieldRow.-invalid .problem { display: block; }
    FieldRow.-invalid .name { color: $text-error; }
    """

    def __init__(self, spec: FieldSpec, editor) -> None:
        super().__init__(id=f"row-{spec.name}")
        self.spec, self.editor = spec, editor

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Label(self.spec.label, classes="name")
            yield self.editor
            yield Static("", classes="plan")
        yield Static("", classes="problem")

    def set_problem(self, problem: AdvisorError | None) -> None:
        self.set_class(problem is not None, "-invalid")
        text = Text("")
        if problem is not None:
            text = Text(f"error: {problem.message}")
            if problem.hint:
                text.append(f"\nhint: {problem.hint}", style="dim")
        self.query_one(".problem", Static).update(text)

    def set_plan(self, text: str) -> None:
        self.query_one(".plan", Static).update(text)


def make_editor(spec: FieldSpec, value, gpu_choices: tuple[tuple[str, object], ...] = ()):
    """The widget that edits a field: a compact Input for typed values, a compact Select for choices."""
    ident = f"f-{spec.name}"
    if spec.kind in ("choice", "switch", "flag", "bool"):
        options = list(gpu_choices if spec.name == "gpu" else spec.choices)
        shown = to_choice(spec, value)
        if shown not in [v for _, v in options]:
            options.append((str(shown), shown))  # a value from the command line the list lacks: the core says why
        return Select(options, value=shown, allow_blank=False, compact=True, id=ident, name=spec.name,
                      classes="field")
    suggester = None
    if spec.kind == "model":
        suggester = SuggestFromList(model_names(), case_sensitive=False)
    elif spec.name == "attn":
        suggester = SuggestFromList(R.ATTN_BUILTIN, case_sensitive=False)
    return FieldInput("" if value is None else str(value), placeholder=spec.placeholder, compact=True, id=ident,
                      name=spec.name, classes="field", suggester=suggester, select_on_focus=False)


def model_names() -> list[str]:
    """Catalogue ids, hub ids and sizes, for completion as the model is typed."""
    from advisor.catalog import all_models

    models = all_models()
    sizes = sorted({m.size for m in models if m.size})
    return [m.id for m in models] + [m.hf_id for m in models] + sizes


def gpu_choices() -> tuple[tuple[str, str], ...]:
    from advisor.catalog import all_gpus

    return tuple((f"{g.id}  ({g.memory_gib:.0f} GiB)", g.id) for g in all_gpus())


def _cell_len(cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else len(str(cell))


def fill_table(table: DataTable, headers: tuple[str, ...], rows: list[tuple[str, tuple]], width: int,
               caps: tuple[int | None, ...]) -> None:
    """Replace a table's columns and rows, fitted to `width` cells: each column as wide as its longest cell up to
    its cap, the uncapped one takes what is left; long cells wrap (the row grows) instead of being cut."""
    keep = table.cursor_row
    table.clear(columns=True)
    natural = [max([len(h)] + [_cell_len(cells[i]) for _, cells in rows]) for i, h in enumerate(headers)]
    widths = [min(n, cap) if cap else None for n, cap in zip(natural, caps, strict=True)]
    spare = width - sum(w + 2 for w in widths if w is not None) - 2
    widths = [w if w is not None else max(12, min(natural[i], spare)) for i, w in enumerate(widths)]
    for header, w in zip(headers, widths, strict=True):
        table.add_column(header, width=w)
    for key, cells in rows:
        table.add_row(*cells, key=key, height=None)
    if rows:
        table.move_cursor(row=min(max(keep, 0), len(rows) - 1))


NO_PLAN_YET = "No plan yet: it shows here once the request is planned."
"""What a tab shows in place of a plan's tables before the first plan is made (one line at 80 columns)."""
NO_FINDINGS_YET = "No plan yet: the rules that fire on it show here once the request is planned."
NO_MATRIX_YET = "No plan yet: its features' compatibility shows here once it is made."


def table_or_line(name: str, empty: str):
    """A table and the one line shown instead of it while it has no row (an empty table would show only its
    header, which reads like something failed to load). show_rows switches between them."""
    yield DataTable(id=name, cursor_type="row", zebra_stripes=True)
    line = Static(Text(empty, style="dim"), id=f"{name}-empty", classes="empty-line")
    line.display = bool(empty)
    yield line


def show_rows(table: DataTable, line: Static, rows: list, empty: str) -> None:
    """The table when it has rows, else the line `empty` (nothing at all when `empty` is ""). A table without rows
    loses its columns, and with them its header, but stays in place and focusable: the tab's keys and focus stay
    where they were (a hidden widget takes no focus, and the focus would go to another pane)."""
    if not rows:
        table.clear(columns=True)
    line.display = not rows and bool(empty)
    line.update(Text(empty, style="dim") if not rows else "")


LEXERS = {".py": "python", ".yaml": "yaml", ".json": "json", ".sh": "bash", ".sbatch": "bash", ".md": "markdown"}


def hardware_text(report) -> Text:
    """`trl-advisor probe` as it prints this report (hw_probe.render_text), links coloured by speed."""
    from hw_probe import render_text

    text = Text(render_text(report), no_wrap=True)  # a table: scrolled sideways on a narrow screen, not folded
    text.highlight_regex(r"\bNV\d+\b", "bold green")
    text.highlight_regex(r"\b(PIX|PXB)\b", "yellow")
    text.highlight_regex(r"\b(PHB|SYS)\b", "bold red")
    text.highlight_regex(r"^[A-Z][A-Za-z]+:", "bold")
    text.highlight_regex(r"not supported between[^\n]*|not installed:[^\n]*|none found[^\n]*", "red")
    return text


def catalogue_gpu_text(target) -> Text:
    """A catalogue target: the GPU's row (trl-advisor gpus) and the target the plan was made for."""
    g = target.gpu
    text = Text.assemble(("GPU  ", "bold"), f"{g.id}: {g.name}\n",
                         f"     {g.memory_gib:.0f} GiB, bf16 {g.bf16_tflops or 0:g} TFLOP/s, fp8 {g.fp8_tflops or 0:g}, "
                         f"HBM {g.mem_bw_gbps:g} GB/s, NVLink {g.nvlink_gbps or 0:g} GB/s, cc {g.compute_capability}\n",
                         f"     source {g.source}\n", ("Target  ", "bold"), target.describe(), "\n",
                         ("Host  ", "bold"), "not known for a catalogue GPU: host RAM, the locked-memory limit and "
                         "library versions are those the bundle pins (plan with a probe --json file to check them)")
    return text


# ============================================================================================ modal screens


class HelpScreen(ModalScreen[None]):
    """The keys, and how the wizard relates to the command line."""

    BINDINGS = [Binding("escape,q,f1,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 96; height: 90%; border: round $accent; padding: 0 1;
                                  background: $surface; }
    """

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        from rich.console import Group
        from rich.table import Table

        text = Text()
        text.append("trl-advisor wizard\n", style="bold")
        text.append("Fields left at auto are searched by the planner (or set to TRL's default); the value the plan "
                    "gives them is shown beside the field. Every figure comes from the same functions as "
                    "`trl-advisor generate`: the command line under every tab gives the same plan and files.\n\n")
        table = Table(box=None, show_header=False, pad_edge=False, expand=True)
        table.add_column(style="bold", no_wrap=True)
        table.add_column(ratio=1)
        for key, what in self.keys:
            table.add_row(key, what)
        with VerticalScroll():
            yield Static(Group(text, table))


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question before anything is replaced; it decides nothing itself."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Static { width: 70; height: auto; border: round $warning; padding: 1 2; background: $surface; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(self.question, "\n\n", ("y", "bold"), " yes   ", ("n", "bold"), " no"))

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class TextScreen(ModalScreen[None]):
    """A long text (a rule's documentation) to read and close."""

    BINDINGS = [Binding("escape,q", "dismiss", "Close")]
    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > VerticalScroll { width: 90%; max-width: 104; height: 90%; border: round $accent; padding: 0 1;
                                  background: $surface; }
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Text(self.text))


class ModelPicker(ModalScreen[str | None]):
    """The model catalogue, filtered as you type (id, hub id or size); Enter picks."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel"), Binding("down", "down", show=False),
                Binding("up", "up", show=False)]
    DEFAULT_CSS = """
    ModelPicker { align: center middle; }
    ModelPicker > Vertical { width: 90%; max-width: 90; height: 80%; border: round $accent; background: $surface; }
    ModelPicker OptionList { height: 1fr; border: none; }
    """

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(self.text, placeholder="filter: id, hub id or size", id="filter", compact=True)
            yield OptionList(id="models")

    def on_mount(self) -> None:
        self._fill(self.text)
        self.query_one("#filter", Input).focus()

    @on(Input.Changed, "#filter")
    def _filter(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def _fill(self, text: str) -> None:
        from advisor.catalog import all_models

        words = text.casefold().split()
        options = []
        for m in all_models():
            haystack = f"{m.id} {m.hf_id} {m.size or ''} {m.model_type}".casefold()
            if all(w in haystack for w in words):
                options.append(Option(f"{m.id:<30} {m.params / 1e9:7.2f}B  {m.hf_id}", id=m.id))
        listing = self.query_one("#models", OptionList)
        listing.set_options(options)
        if options:
            listing.highlighted = 0

    def action_down(self) -> None:
        self.query_one("#models", OptionList).action_cursor_down()

    def action_up(self) -> None:
        self.query_one("#models", OptionList).action_cursor_up()

    @on(Input.Submitted, "#filter")
    def _submit(self) -> None:
        listing = self.query_one("#models", OptionList)
        if listing.highlighted is not None and listing.option_count:
            self.dismiss(listing.get_option_at_index(listing.highlighted).id)

    @on(OptionList.OptionSelected, "#models")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


# ================================================================================================== the app

KEYS: tuple[tuple[str, str, str, str], ...] = (
    # (keys, action, footer/palette title, what it does): bindings, the help screen and the palette read this
    ("1", "show_tab('target')", "Target tab", "the hardware: this machine, a catalogue GPU or a probe --json file"),
    ("2", "show_tab('training')", "Training tab", "model, trainer, method, lengths, batch and every knob"),
    ("3", "show_tab('plan')", "Plan tab", "memory, speed, why each knob has its value, the alternatives"),
    ("4", "show_tab('rules')", "Rules tab", "the rules that fired with their fixes, the compatibility matrix"),
    ("5", "show_tab('bundle')", "Bundle tab", "the files: preview, write, then the commands to run and verify"),
    ("6", "show_tab('rent')", "Rent tab", "what to rent for the job: every catalogue GPU type and count, hours and "
                                          "cost (trl-advisor recommend)"),
    ("p", "pin", "Pin", "Plan tab: pin the highlighted knob to the value the plan gave it"),
    ("u", "unpin", "Unpin", "Plan tab: give the highlighted knob back to the planner"),
    ("f", "apply_fix", "Fix", "Rules tab: apply the highlighted rule's automatic fix"),
    ("e", "explain", "Explain", "Rules tab: the highlighted rule's documentation (trl-advisor explain)"),
    ("w", "write", "Write", "write the bundle into the folder (asks before replacing a bundle)"),
    ("v", "verify", "Verify", "run trl-advisor verify on the written bundle, with its progress (GPUs here only)"),
    ("o", "use_option", "Use option", "Rent tab: plan for the highlighted option's GPUs (also enter)"),
    ("c", "copy_command", "Copy command", "copy the trl-advisor generate line that reproduces the screen"),
    ("ctrl+o", "browse_models", "Models", "browse and search the model catalogue"),
    ("t", "toggle_theme", "Theme", "switch between the dark and the light theme"),
    ("f1,question_mark", "help", "Help", "the keys"),
    ("escape", "leave_field", "Leave field", "leave a text field (the number keys then switch tabs; alt+1 to alt+6 "
                                             "switch them from inside a field)"),
    ("q", "quit", "Quit", "quit (also ctrl+q)"),
)
FOOTER = {"pin", "unpin", "apply_fix", "explain", "write", "verify", "use_option", "copy_command", "help", "quit"}
"""The actions the footer lists (where they apply); the others are on the help screen and in the palette."""
TAB_ACTIONS = {"pin": "plan", "unpin": "plan", "apply_fix": "rules", "explain": "rules", "write": "bundle",
               "verify": "bundle", "use_option": "rent"}
TABS = ("target", "training", "plan", "rules", "bundle", "rent")
"""Tab order."""
DEBOUNCE_S = 0.15
"""Typing pauses shorter than this do not start a plan (a plan search takes tens of ms on a 2-core machine:
bench/results/planner-speed-2026-12-08.json, python -m bench.planner_speed)."""
PICK_WORDS = {"within_budget": "within the budget", "within_deadline": "within the deadline"}
RENT_DEBOUNCE_S = 0.4
"""The same for the Rent tab, whose answer takes seconds (one planner search per GPU type and count: 1-4 s on a
2-core machine): one recommend runs at a time, and a change while it runs is asked for when it ends."""


class PlanReady(Message):
    def __init__(self, generation: int, outcome: PlanView | PlanProblem) -> None:
        super().__init__()
        self.generation, self.outcome = generation, outcome


class RentReady(Message):
    def __init__(self, ask: RentAsk, outcome: RentView | RentProblem | None) -> None:
        super().__init__()
        self.ask, self.outcome = ask, outcome
        """outcome None: the run was cancelled (the app is quitting)."""


class Probed(Message):
    def __init__(self, report) -> None:
        super().__init__()
        self.report = report


class Written(Message):
    def __init__(self, out: str, request: Request, files: list[str] | None, error: AdvisorError | None) -> None:
        super().__init__()
        self.out, self.request, self.files, self.error = out, request, files, error


class VerifyLine(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class Verified(Message):
    def __init__(self, text: str, passed: bool | None) -> None:
        super().__init__()
        self.text, self.passed = text, passed


class _Progress(io.TextIOBase):
    """verify's progress stream: each write becomes a message to the app (thread-safe), shown in the log."""

    def __init__(self, app: App) -> None:
        self.app = app

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            self.app.post_message(VerifyLine(text))
        return len(text)


class WizardApp(App):
    """The wizard. `request`: the flags the command line gave; `probe`: returns this machine's report (default
    hw_probe.probe, run once in a worker); `verify`: advisor.verify.verify unless a test passes another."""

    TITLE = "trl-advisor"
    CSS = """
    #tabs { height: 1fr; }
    .field-help { dock: bottom; height: 1; color: $text-muted; }
    TabPane { padding: 0 1; }
    .section { text-style: bold; color: $accent; margin-top: 1; }
    #target-body { height: 1fr; }
    #target-cols { height: auto; max-width: 72; }
    .form-column { height: auto; }
    #hardware { height: 1fr; overflow-x: auto; }
    #hw-text { width: auto; }
    #hw-text.-wrap { width: 1fr; }
    #hw-notes { height: auto; margin-top: 1; }
    #training-cols { height: auto; }
    #training-cols > .form-column { width: 1fr; padding-right: 2; }
    #training-cols.-narrow { layout: vertical; }
    DataTable { height: auto; max-height: 16; }
    #plan-head, #rules-head { margin-top: 1; }
    .empty-line { height: auto; }
    #finding-detail { margin: 1 0; }
    #bundle-top, #verify-options { height: 1; }
    #bundle-top Label, #verify-options Label { width: 8; color: $text-muted; }
    #verify-options { display: none; }
    #verify-options.-gpus { display: block; }
    #verify-options Checkbox { width: auto; margin-right: 2; }
    #out { width: 1fr; }
    #bundle-body { height: 1fr; }
    #files { width: 21; height: 1fr; }
    #preview { width: 1fr; height: 1fr; }
    #bundle-status { height: auto; max-height: 8; }
    #verify-log { height: 8; display: none; }
    #verify-log.-running { display: block; }
    #rent-cols { height: auto; }
    #rent-cols > .form-column { width: 1fr; padding-right: 2; }
    #rent-cols FieldRow .name { width: 12; }
    #rent-cols FieldRow .plan { display: none; }
    #rent-cols FieldRow .problem { padding-left: 12; }
    #rent-cols .section { margin-top: 0; }
    #rent-head { margin-top: 1; }
    #option-detail { height: auto; }
    #rent-report { margin-top: 1; }
    """
    BINDINGS = [Binding(keys, action, title, show=action.split("(")[0] in FOOTER) for keys, action, title, _ in KEYS] + [
        # alt+1..6 switch tabs also while typing in a field (FieldInput leaves them to the app)
        Binding(key, f"show_tab('{tab}')", show=False, priority=True) for key, tab in zip(ALT_DIGITS, TABS, strict=True)]

    def __init__(self, request: Request | None = None, *, probe: Callable[[], object] | None = None,
                 verify: Callable | None = None) -> None:
        super().__init__()
        req = request or Request(model="")
        self.values, self.passthrough = values_from(req)
        self.values["gpu"] = self._catalogue_gpu(req.gpu)
        self.problems: dict[str, AdvisorError] = {}
        """Fields whose text the core refuses, name -> its error (no plan runs while any is shown)."""
        self._probe = probe
        self._verify = verify
        self.machine = None
        """This machine's hw_probe report, once the probe worker answers."""
        self.outcome: PlanView | PlanProblem | None = None
        self.generation = 0
        """Counts changes to the request; a plan answer for an older one is dropped."""
        self.shown_generation = -1
        self._debounce = None
        self._network = False
        self._files_cache: tuple | None = None
        self._out_default: str | None = None
        self.written: str | None = None
        self.written_request: Request | None = None
        self.verifying = False
        self.verify_passed: bool | None = None
        """The last verify's verdict (None: none ran, or it could not run)."""
        self._start_tab = "plan" if req.model else "training"
        self._sections: set[str] = set()
        """The form sections whose title is built (a form is built in two goes: its first field, then the rest)."""
        self._form_lock = asyncio.Lock()
        self._quitting = False
        self.rows: dict[str, FieldRow] = {}
        """The form's rows by field name, as each form tab is built (the first screen's tab first)."""
        self.rent: RentView | RentProblem | None = None
        """The Rent tab's answer on screen (recommend runs only while that tab is shown)."""
        self._rent_debounce = None
        self._rent_running: RentAsk | None = None
        """What the recommend worker is answering, None when none runs."""
        self._rent_rows: list = []
        """The options in the Rent tab's table, row by row, and their cells as the command line prints them."""
        self._rent_cells: list[dict[str, str]] = []

    # ---------------------------------------------------------------------------------------------- layout

    @staticmethod
    def _catalogue_gpu(name: str | None) -> str:
        from advisor.catalog import resolve_gpu
        from advisor.resolve import DEFAULT_GPU

        if not name:
            return DEFAULT_GPU
        try:
            return resolve_gpu(name).id
        except AdvisorError:
            return name  # kept as typed: the plan shows the core's error and its suggestion

    FORM_COLUMNS = {"target": (("Where",),), "training": (("What to train", "Trainer"),
                                                          ("How (auto = the planner decides)",)),
                    "rent": (("The job",), ("What to rent",))}
    """The sections of each form tab, column by column."""

    def compose(self) -> ComposeResult:
        with TabbedContent(id="tabs", initial=self._start_tab):
            with TabPane("1 Target", id="target"):
                with Vertical(id="target-body"):
                    with Horizontal(id="target-cols"):
                        yield Vertical(classes="form-column")
                    yield Static("", id="hw-notes")
                    with VerticalScroll(id="hardware"):
                        yield Static("", id="hw-text")
                yield Static("", id="help-target", classes="field-help")
            with TabPane("2 Training", id="training"):
                with VerticalScroll(id="training-form"), Horizontal(id="training-cols"):
                    yield Vertical(classes="form-column")
                    yield Vertical(classes="form-column")
                yield Static("", id="help-training", classes="field-help")
            with TabPane("3 Plan", id="plan"), VerticalScroll(id="plan-body"):
                yield Static(Text(NO_PLAN_YET, style="dim"), id="plan-head")
                yield MemoryBar(id="membar")
                yield Label("Why each knob has its value   (p pin · u unpin · enter edit)", classes="section")
                yield from table_or_line("knobs", "")
                yield Label("Alternatives and why they lost", classes="section")
                yield from table_or_line("alts", "")
                yield Static("", id="plan-command", classes="section")
            with TabPane("4 Rules", id="rules"), VerticalScroll(id="rules-body"):
                yield Static(Text(NO_FINDINGS_YET, style="dim"), id="rules-head")
                yield from table_or_line("findings", "")
                yield Static("", id="finding-detail")
                yield Label("Compatibility of this plan's features (trl-advisor rules --matrix)", classes="section")
                yield from table_or_line("matrix", NO_MATRIX_YET)
            with TabPane("5 Bundle", id="bundle"), Vertical():
                with Horizontal(id="bundle-top"):
                    yield Label("Folder")
                    yield FieldInput("", id="out", compact=True, placeholder="generated/<name>")
                with Horizontal(id="verify-options"):  # shown where there are GPUs to verify on
                    yield Label("Verify")
                    yield Checkbox("random init", id="random-init", compact=True,
                                   tooltip="random weights from the recorded architecture: no model download")
                    yield Checkbox("synthetic data", id="synthetic-data", compact=True,
                                   tooltip="generated tokens and a local tokenizer: no dataset download")
                with Horizontal(id="bundle-body"):
                    yield OptionList(id="files")
                    with VerticalScroll(id="preview"):
                        yield Static("", id="preview-text")
                yield Static("", id="bundle-status")
                yield Log(id="verify-log")
            with TabPane("6 Rent", id="rent"):
                with VerticalScroll(id="rent-body"):
                    with Horizontal(id="rent-cols"):
                        yield Vertical(classes="form-column")
                        yield Vertical(classes="form-column")
                    yield Static("", id="rent-head")
                    yield DataTable(id="options", cursor_type="row", zebra_stripes=True)
                    yield Static("", id="option-detail")
                    yield Static("", id="rent-report")
                    yield Static("", id="rent-command", classes="section")
                yield Static("", id="help-rent", classes="field-help")
        yield PlanStrip(id="strip")
        yield Footer()

    async def on_mount(self) -> None:
        self.theme = "textual-dark"
        self._narrow(self.size.width)
        if self.values.get("target_mode") == "machine":
            self._probe_machine()  # the plan needs it; for a GPU or a file it waits until the first plan is shown
        await self._ensure_form(self._start_tab, first=True)
        self._focus_tab(self._start_tab)
        # the first screen first, then the first plan, then the rest of the forms (or after a while, should the
        # plan wait for a slow probe)
        self.call_after_refresh(self._after_first_screen)
        self.set_timer(3.0, self._build_forms)

    def _after_first_screen(self) -> None:
        # the rest of the forms once the first plan is shown (_after_first_plan): built meanwhile, they would hold
        # the plan's worker back (the mounting keeps the event loop and the interpreter busy for a few 100 ms)
        self.request_changed(immediate=True)

    def _build_forms(self, *tabs: str) -> None:
        """Build the forms (these tabs' only, or all) in a worker of the app's own: an app handler that awaited the
        mounting would hold back every other message meanwhile, the first plan's among them."""
        async def build() -> None:
            for tab in tabs or sorted(self.FORM_COLUMNS, key=lambda t: t != self._start_tab):  # the shown one first
                await self._ensure_form(tab)

        if not self._quitting:
            self.run_worker(build(), group="forms")

    @property
    def forms_built(self) -> bool:
        return len(self.rows) == len(FIELDS)

    async def _ensure_form(self, tab: str, *, first: bool = False) -> None:
        """Build what is not built yet of a form tab (`first`: only its first field, the one the focus starts in).
        One at a time, and none once quitting: a Select mounted while the app closes fails its own mount."""
        async with self._form_lock:
            # nothing queried once built: the timer that builds the forms may fire while the app closes
            if tab in self.FORM_COLUMNS and not self._quitting and any(
                    s.tab == tab and s.name not in self.rows for s in FIELDS):
                await self._mount_form(tab, first)

    async def _mount_form(self, tab: str, first: bool = False) -> None:
        """Build the rows of a form tab not built yet, with the current values, problems and plan values, each
        section under its title. The forms hold most of the app's widgets (the Training form takes about 0.5 s to
        build on a 2-core machine, a section of it 0.2-0.3 s): building them before the first screen made it appear
        about twice as late (python -m bench.wizard_speed). So the first screen has its form's first field, the
        focus in it (keys typed at once land there), and the rest follows once the first plan is shown."""
        gpus = gpu_choices() if tab == "target" else ()
        columns = self.query_one(f"#{tab}-cols").query(".form-column")
        built: dict[str, FieldRow] = {}
        for column, column_sections in zip(columns, self.FORM_COLUMNS[tab], strict=True):
            widgets = []
            for section in column_sections:
                specs = [s for s in FIELDS if s.section == section and s.name not in self.rows]
                if first:
                    specs = specs[:1]
                if not specs:
                    continue
                if section not in self._sections:
                    self._sections.add(section)
                    widgets.append(Label(section, classes="section",
                                         id="sec-" + "-".join(w for w in section.lower().split() if w.isalpha())))
                for spec in specs:
                    built[spec.name] = FieldRow(spec, make_editor(spec, self.values.get(spec.name), gpus))
                    widgets.append(built[spec.name])
                if first:
                    break
            if widgets:
                await column.mount_all(widgets)  # after what the column holds: sections and rows stay in order
            if first and widgets:
                break
        # The rows join self.rows once mounted: messages are handled while the form is built (in a worker), and
        # what they show on the rows is shown here on the new ones, with any value set meanwhile (a pin, an option)
        self.rows.update(built)
        for name, row in built.items():
            spec, value = SPECS[name], self.values.get(name)
            if isinstance(row.editor, Select):
                if row.editor.value != to_choice(spec, value):
                    row.editor.value = to_choice(spec, value)
            elif name not in self.problems and row.editor.value != ("" if value is None else str(value)):
                row.editor.value = "" if value is None else str(value)
            if name in self.problems:
                row.set_problem(self.problems[name])
        self._refresh_rows()
        if self.outcome is not None:
            self._show_field_plan_values()
            self._show_outcome_problem_field()
        if tab == "rent":
            self._show_rent_tab()

    def on_resize(self, event) -> None:
        self._narrow(event.size.width)
        if self.outcome is not None:
            self._show_plan_tab()
            self._show_rules_tab()
        self._show_rent_tab()

    def _table_width(self) -> int:
        return max(40, self.size.width - 8)  # the tab's padding, the page's and the table's scroll bars

    def _narrow(self, width: int) -> None:
        self.query_one("#training-cols").set_class(width < 100, "-narrow")

    def _tab(self) -> str:
        return self.query_one("#tabs", TabbedContent).active

    # ------------------------------------------------------------------------------------ the request and form

    @property
    def request(self) -> Request:
        return request_from(self.values, self.passthrough)

    def _refresh_rows(self) -> None:
        """Show the fields that apply to the current values; sections with no field shown are hidden too."""
        for name, row in self.rows.items():
            row.display = SPECS[name].shown(self.values)
        for label in self.query("#sec-trainer"):
            label.display = any(s.shown(self.values) for s in FIELDS if s.section == "Trainer")

    def _open_problems(self) -> dict[str, AdvisorError]:
        return {n: p for n, p in self.problems.items() if SPECS[n].shown(self.values)}

    def set_field(self, name: str, value) -> None:
        """Change a field from the app (a pin, a fix, a picked model): the value, its widget, the plan."""
        spec = SPECS[name]
        self.values[name] = value
        self.problems.pop(name, None)
        row = self.rows.get(name)
        if row is not None:  # a form not built yet shows the value when it is
            row.set_problem(None)
            if isinstance(row.editor, Select):
                row.editor.value = to_choice(spec, value)
            else:
                row.editor.value = "" if value is None else str(value)
        self._refresh_rows()
        self._changed(spec)

    @on(Input.Changed, ".field")
    def _typed(self, event: Input.Changed) -> None:
        spec = SPECS[event.input.name]
        try:
            value = parse_text(spec, event.value)
            problem = field_problem(spec, value)
        except AdvisorError as exc:
            value, problem = self.values.get(spec.name), exc
        had = spec.name in self.problems
        if spec.name in self.rows:  # else mounted a moment ago: the form shows the problem when it joins
            self.rows[spec.name].set_problem(problem)
        if problem is not None:
            self.problems[spec.name] = problem
        else:
            self.problems.pop(spec.name, None)
        if problem is None and value == self.values.get(spec.name) and not had:
            return  # the app set this value itself (set_field)
        if problem is None:
            self.values[spec.name] = value
        self._refresh_rows()
        self._changed(spec)

    def _changed(self, spec: FieldSpec) -> None:
        """A field changed: plan again, or for one of recommend's own flags, ask recommend again only."""
        if spec.rent_only:
            self.rent_changed()
        else:
            self.request_changed()

    @on(Input.Submitted, ".field")
    def _submitted(self, event: Input.Submitted) -> None:
        # Enter in the model field may look a hub id up online; typing never does
        spec = SPECS[event.input.name]
        if spec.tab == "rent":  # Enter in the Rent tab's form: ask now, and on to the options
            if spec.rent_only:
                self.rent_changed(immediate=True)
            else:
                self.request_changed(immediate=True)
                self.rent_changed(immediate=True)
            self.query_one("#options", DataTable).focus()
            return
        self.request_changed(immediate=True, network=spec.kind == "model")

    @on(Select.Changed, ".field")
    def _chosen(self, event: Select.Changed) -> None:
        spec = SPECS[event.select.name]
        value = from_choice(event.value)
        if value == self.values.get(spec.name):
            return
        self.values[spec.name] = value
        self._refresh_rows()
        if spec.name == "target_mode":
            self._show_hardware()
        if spec.name == "show_all":
            self._show_rent_tab()  # the same answer, more or fewer of its rows
            return
        self._changed(spec)

    def on_descendant_focus(self, event) -> None:
        """Under the form: the focused field's flag (what to type on the command line) and what it means."""
        spec = SPECS.get(getattr(event.widget, "name", None) or "")
        if spec is None:
            if event.widget.id == "options":
                self.query_one("#help-rent", Static).update(Text.assemble(
                    ("enter", "bold"), "/", ("o", "bold"), ": plan for this option · ", ("*", "bold green"),
                    ": on the time-cost front · ", ("bold", "bold"), ": a pick"))
            return
        flag_text = "" if spec.name == "target_mode" else (spec.flag + (" FILE" if spec.kind == "path" else ""))
        line = Text.assemble((flag_text, "bold"), ("  " if flag_text else ""), spec.help or spec.label.lower())
        self.query_one(f"#help-{spec.tab}", Static).update(line)

    # ------------------------------------------------------------------------------------------- planning

    def request_changed(self, *, immediate: bool = False, network: bool = False) -> None:
        """Plan again after a short pause; an answer for an older request is dropped when it comes."""
        self.generation += 1
        self._network = self._network or network
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(0.001 if immediate else DEBOUNCE_S, self._start_plan)
        self.rent_changed()

    @property
    def settled(self) -> bool:
        """No change is waiting to be planned, the plan on screen is for the current request, every form tab is
        built, and on the Rent tab, the answer on screen is for what the tab asks."""
        return (self._debounce is None and self.shown_generation == self.generation
                and self.forms_built and self.rent_settled)

    def _start_plan(self) -> None:
        self._debounce = None
        generation = self.generation
        problems = {n: p for n, p in self._open_problems().items() if SPECS[n].in_request}
        if problems:
            name, problem = next(iter(problems.items()))
            self._show_strip_problem(problem.message, problem.hint, f"fix {SPECS[name].flag} in the "
                                     f"{SPECS[name].tab} tab")
            self.shown_generation = generation
            return
        if self.values.get("target_mode") == "machine" and self.machine is None:
            self.query_one(PlanStrip).show([Text("probing this machine…", style="dim")])
            return  # the probe's answer plans again
        self._plan(self.request, generation, self._network)
        self._network = False

    @work(thread=True, exclusive=True, group="plan")
    def _plan(self, req: Request, generation: int, network: bool) -> None:
        self.post_message(PlanReady(generation, compute_outcome(req, probe=self._machine_report,
                                                                allow_network=network)))

    def _machine_report(self):
        return self.machine

    @property
    def _probing(self) -> bool:
        return any(w.group == "probe" for w in self.workers)

    @work(thread=True, group="probe")
    def _probe_machine(self) -> None:
        if self._probe is None:
            import hw_probe

            report = hw_probe.probe()
        else:
            report = self._probe()
        self.post_message(Probed(report))

    def on_probed(self, message: Probed) -> None:
        self.machine = message.report
        self.query_one("#verify-options").set_class(self._gpus_here(), "-gpus")
        self._show_hardware()
        self.refresh_bindings()
        if self.values.get("target_mode") == "machine":
            self.request_changed(immediate=True)

    def on_plan_ready(self, message: PlanReady) -> None:
        if message.generation != self.generation:
            return  # a newer request is being planned
        first = self.outcome is None
        self.shown_generation = message.generation
        self.outcome = message.outcome
        self._files_cache = None
        self._show_outcome()
        if first:
            self.call_after_refresh(self._after_first_plan)

    def _after_first_plan(self) -> None:
        if self.machine is None and not self._probing:
            self._probe_machine()  # this machine's GPUs (the Target tab, whether verify can run here)
        self._build_forms()

    # ------------------------------------------------------------------------------------------- showing

    def _show_strip_problem(self, message: str, hint: str | None, where: str = "") -> None:
        first = Text.assemble(("✗ ", "bold red"), (message, "red"))
        second = Text.assemble(("fix: ", "bold"), hint or "", (f"   ({where})" if where else "", "dim"))
        self.query_one(PlanStrip).show([first, second, Text("$ " + command_line(self.request), style="dim")])

    def _show_outcome(self) -> None:
        o = self.outcome
        strip = self.query_one(PlanStrip)
        self._show_outcome_problem_field()
        if isinstance(o, PlanProblem):
            where = {"rule": "press 4 for the rules, f applies a fix", "nofit": "the smallest change that makes one"}
            if o.about in SPECS:
                where[o.kind] = f"{SPECS[o.about].flag}, {SPECS[o.about].tab} tab"
            self._show_strip_problem(o.message, o.hint, where.get(o.kind, ""))
        else:
            plan = o.decision.chosen.plan
            first = Text.assemble(("✓ ", "bold green"), (f"{o.decision.model.id} {plan.trainer.upper()}", "bold"),
                                  f" on {o.decision.target.describe()}: {plan.short()}")
            m = o.result["memory"]
            second = Text(f"{gib(m['per_gpu_peak_bytes'])} of {gib(m['gpu_capacity_bytes'])} GiB · "
                          f"{speed_text(o.result['speed'])}")
            strip.show([first, second, Text("$ " + o.command, style="dim")], memory=m)
        self._show_plan_tab()
        self._show_rules_tab()
        self._show_field_plan_values()
        self._show_hardware()
        self._show_bundle_tab()
        self.refresh_bindings()

    def _show_outcome_problem_field(self) -> None:
        """The core's refusal under the field it is about (an unknown model, an unreadable hardware file)."""
        o = self.outcome
        for name, row in self.rows.items():
            if name in self.problems or SPECS[name].rent_only:  # the Rent tab shows recommend's own
                continue
            about = isinstance(o, PlanProblem) and o.about == name
            row.set_problem(AdvisorError(o.message, hint=o.hint) if about else None)

    def _show_field_plan_values(self) -> None:
        """Beside each field left to the planner: the value the plan gave it (or TRL's default)."""
        o = self.outcome
        plan = o.decision.chosen.plan if isinstance(o, PlanView) else None
        for name, row in self.rows.items():
            text = ""
            if plan is not None and self.values.get(name) is None:
                knob = knob_of_field().get(name)
                if knob is not None:
                    value = getattr(plan, knob)
                    text = "→ " + ("on" if value is True else "off" if value is False else str(value))
            row.set_plan(text)

    def _show_plan_tab(self) -> None:
        o = self.outcome
        head = self.query_one("#plan-head", Static)
        knobs, alts = self.query_one("#knobs", DataTable), self.query_one("#alts", DataTable)
        width = self._table_width()
        self.query_one("#plan-command", Static).update(Text("$ " + o.command))
        if isinstance(o, PlanProblem):
            head.update(Text.assemble(("no plan\n", "bold red"), (o.message, "red"), "\n",
                                      ("fix: ", "bold"), o.hint or ""))
            self.query_one(MemoryBar).show(None)
            fill_table(knobs, ("", "knob", "value", "why"), [], width, (1, 18, 14, None))
            fill_table(alts, ("plan", "tokens/s", "peak GiB", "why not"), [], width, (40, 9, 8, None))
            self._show_rows(knobs, [], "No plan: no knob has a value (the problem above says why).")
            self._show_rows(alts, [], "No plan: no alternative either.")
            return
        text = Text("\n".join(o.summary))
        text.highlight_regex(r"^\S+", "bold")
        for note in o.notes:
            text.append(f"\nnote: {note}", style="yellow")
        head.update(text)
        self.query_one(MemoryBar).show(o.result["memory"])
        plan, pinned = o.decision.chosen.plan, o.request.pinned()
        rows = []
        for knob, why in o.why.items():
            value = getattr(plan, knob)
            shown = "on" if value is True else "off" if value is False else str(value)
            style = "dim" if why.startswith("unused") else ""
            marker = "●" if field_of_knob().get(knob) in pinned else " "  # a blank cell still takes a line
            rows.append((knob, (Text(marker, style="bold yellow"), Text(knob, style=style), Text(shown, style=style),
                                Text(why, style=style))))
        fill_table(knobs, ("", "knob", "value", "why"), rows, width, (1, 18, 14, None))
        self._show_rows(knobs, rows, "")
        rows = []
        for i, a in enumerate(o.decision.alternatives):
            peak = a.memory.per_gpu_peak_bytes if a.memory is not None else None
            rows.append((str(i), (Text(a.plan.short()), f"{a.tokens_per_second:,.0f}",
                                  gib(peak) if peak is not None else "-", Text(a.rejected_because))))
        fill_table(alts, ("plan", "tokens/s", "peak GiB", "why not"), rows, width, (40, 9, 8, None))
        self._show_rows(alts, rows, "No alternative: the search kept no other plan to compare.")

    def _shown_findings(self) -> list[dict]:
        o = self.outcome
        return list(o.findings) if o is not None else []

    def _show_rows(self, table: DataTable, rows: list, empty: str) -> None:
        show_rows(table, self.query_one(f"#{table.id}-empty", Static), rows, empty)

    def _show_rules_tab(self) -> None:
        o = self.outcome
        table = self.query_one("#findings", DataTable)
        findings = self._shown_findings()
        if o is None:  # the first plan is still being made (or waits for the probe of this machine)
            self.query_one("#rules-head", Static).update(Text(NO_FINDINGS_YET, style="dim"))
            self._show_rows(table, [], "")
            self._show_rows(self.query_one("#matrix", DataTable), [], NO_MATRIX_YET)
            self.query_one("#finding-detail", Static).update("")
            return
        if isinstance(o, PlanProblem):
            head = Text.assemble((f"{len(findings)} findings", "bold"), " of `trl-advisor check` with these flags "
                                 "(no plan could be made: ", (o.message, "red"), ")")
        else:
            head = Text.assemble((f"{len(findings)} findings", "bold"), " on the chosen plan, as "
                                 "`trl-advisor generate` reports them")
        self.query_one("#rules-head", Static).update(head)
        colours = {"error": "bold red", "warning": "yellow", "info": "cyan"}
        rows = []
        for i, f in enumerate(findings):
            fix = " ".join(f"{flag(k)} {v}" for k, v in fix_changes(f.get("auto_fix") or {}).items())
            severity = f["severity"] if f.get("status", "fail") == "fail" else "unknown"
            rows.append((str(i), (Text(severity, style=colours.get(severity, "")), f["id"], Text(f["message"]),
                                  Text(fix))))
        width = self._table_width()
        fill_table(table, ("severity", "rule", "message", "auto-fix"), rows, width, (8, 7, None, 24))
        self._show_rows(table, rows, "")  # the head says "0 findings", the detail below "no rule fired"
        self._show_finding_detail()
        rows = []
        if isinstance(o, PlanView):
            for i, (both, r) in enumerate(matrix_rows(o.features)):
                rows.append((str(i), ("●" if both else " ", r["a"], r["b"], r["verdict"], r["rule"], Text(r["reason"]))))
        matrix = self.query_one("#matrix", DataTable)
        fill_table(matrix, ("", "feature", "with", "verdict", "rule", "reason"), rows, width, (1, 12, 12, 12, 7, None))
        self._show_rows(matrix, rows, "No plan: no features to match (the problem above says why)."
                        if isinstance(o, PlanProblem) else "No row of the matrix concerns this plan's features.")

    def _highlighted_finding(self) -> dict | None:
        findings = self._shown_findings()
        table = self.query_one("#findings", DataTable)
        if not findings:
            return None
        row = table.cursor_row if 0 <= table.cursor_row < len(findings) else 0
        return findings[row]

    @on(DataTable.RowHighlighted, "#findings")
    def _show_finding_detail(self, _event=None) -> None:
        f = self._highlighted_finding()
        detail = self.query_one("#finding-detail", Static)
        if f is None:
            detail.update(Text("no rule fired" if isinstance(self.outcome, PlanView) else ""))
            return
        tag = f["severity"]
        if f.get("status") == "unknown":  # as check's report says it (rules.render.render_check)
            tag = f"not checked: {f.get('rule_severity', tag)} if it fails"
        text = Text.assemble((f"{f['id']} {f.get('name', '')}", "bold"), f" [{tag}]: {f['message']}")
        if f.get("fix"):
            text.append("\nfix: ", style="bold").append(f["fix"])
        if f.get("auto_fix"):
            changes = " ".join(f"{flag(k)} {v}" for k, v in fix_changes(f["auto_fix"]).items())
            text.append("\nf applies: ", style="bold green").append(changes)
        text.append(f"\ne: trl-advisor explain {f['id']}", style="dim")
        detail.update(text)

    def _show_hardware(self) -> None:
        o, mode = self.outcome, self.values.get("target_mode")
        box = self.query_one("#hw-text", Static)
        box.set_class(mode == "catalog", "-wrap")  # sentences fold; the probe's tables scroll sideways
        self.query_one("#hw-notes", Static).update("")
        if mode == "catalog":
            if isinstance(o, PlanView) and o.decision.target.origin == "catalog":
                box.update(catalogue_gpu_text(o.decision.target))
            else:
                box.update(Text("the GPU's row appears with the plan", style="dim"))
            return
        report = o.report if (mode == "file" and o is not None and o.request.hardware) else self.machine
        if mode == "file" and (o is None or not o.request.hardware or o.report is None):
            box.update(Text("choose a `trl-advisor probe --json` file", style="dim"))
            return
        if report is None:
            box.update(Text("probing this machine…", style="dim"))
            return
        text = Text.assemble(("This machine\n" if mode == "machine" else f"{o.request.hardware}\n", "bold underline"))
        text.append_text(hardware_text(report))
        box.update(text)
        notes = o.target_notes if isinstance(o, PlanView) else []
        self.query_one("#hw-notes", Static).update(Text("\n".join(f"note: {n}" for n in notes), style="yellow"))

    # ------------------------------------------------------------------------------------------- the Rent tab

    def rent_changed(self, *, immediate: bool = False) -> None:
        """Ask recommend again after a pause, while the Rent tab is shown (elsewhere its seconds of planning would
        slow the live plan; the tab asks when it is shown)."""
        if self._rent_debounce is not None:
            self._rent_debounce.stop()
            self._rent_debounce = None
        if self._tab() == "rent" and not self._quitting:
            self._rent_debounce = self.set_timer(0.001 if immediate else RENT_DEBOUNCE_S, self._start_rent)

    def _rent_ask(self) -> RentAsk:
        return rent_ask(self.values, self.passthrough)

    @property
    def rent_settled(self) -> bool:
        """Off the Rent tab always; on it, once the answer shown is for what the tab asks."""
        if self._tab() != "rent":
            return True
        return (self._rent_debounce is None and self._rent_running is None and self.rent is not None
                and self.rent.ask == self._rent_ask())

    def _start_rent(self) -> None:
        self._rent_debounce = None
        ask = self._rent_ask()
        problems = self._open_problems()
        if problems:  # no run for a value the core refuses: its message, under its field and here
            name, problem = next(iter(problems.items()))
            self.rent = RentProblem(ask, "input", problem.message, problem.hint, about=name)
            self._show_rent_tab()
            return
        if self.rent is not None and self.rent.ask == ask:
            return  # on screen already
        if self._rent_running is not None:
            return  # the answer being computed asks again for the newest when it comes
        self._rent_running = ask
        self._show_rent_tab()
        self._recommend(ask)

    @work(thread=True, exclusive=True, group="rent")
    def _recommend(self, ask: RentAsk) -> None:
        """compute_rent in a thread of its own, watched from this worker: the worker ends as soon as it is cancelled
        (the app quits) while the thread, a daemon, is left to end with the process, so quitting does not wait for
        seconds of planning."""
        import threading

        from textual.worker import get_current_worker

        answer: list = []
        thread = threading.Thread(target=lambda: answer.append(compute_rent(ask)), daemon=True,
                                  name="trl-advisor-recommend")
        thread.start()
        worker = get_current_worker()
        while thread.is_alive():
            if worker.is_cancelled:
                return
            thread.join(0.05)
        self.post_message(RentReady(ask, answer[0] if answer else None))

    def on_rent_ready(self, message: RentReady) -> None:
        self._rent_running = None
        if message.outcome is None:
            return
        if message.ask == self._rent_ask():
            self.rent = message.outcome
        else:  # an answer for what the tab asked before: dropped, and the newest asked for
            self.rent_changed(immediate=True)
        self._show_rent_tab()
        self.refresh_bindings()

    def _show_rent_tab(self) -> None:
        r, show_all = self.rent, bool(self.values.get("show_all"))
        head, report = self.query_one("#rent-head", Static), self.query_one("#rent-report", Static)
        table = self.query_one("#options", DataTable)
        ask = self._rent_ask()
        running = self._rent_running is not None or self._rent_debounce is not None
        for name, row in self.rows.items():
            if SPECS[name].rent_only and name not in self.problems:
                about = isinstance(r, RentProblem) and r.about == name and r.ask == ask
                row.set_problem(AdvisorError(r.message, hint=r.hint) if about else None)
        self.query_one("#rent-command", Static).update(Text("$ " + ask.command(show_all)))
        busy = Text("recommend is planning every GPU type and count for this job…\n" if running else "", style="dim")
        self._rent_rows, self._rent_cells = [], []
        if r is None:
            head.update(busy if running else Text("set the job's size: tokens or steps", style="dim"))
            fill_table(table, ("",), [], self._table_width(), (None,))
            report.update("")
            return
        if isinstance(r, RentProblem):
            where = f"   ({SPECS[r.about].flag}, {SPECS[r.about].tab} tab)" if r.about in SPECS else ""
            head.update(Text.assemble(busy, ("no recommendation\n", "bold red"), (r.message, "red"), "\n",
                                      ("fix: ", "bold"), r.hint or "", (where, "dim")))
            fill_table(table, ("",), [], self._table_width(), (None,))
            report.update("")
            return
        headers, rows, under, first = r.table(show_all)
        stale = r.ask != ask
        head.update(Text.assemble(busy, (first, "dim" if stale else "bold"),
                                  ("\n(for an earlier request: the new answer follows)" if stale and not running
                                   else "", "yellow")))
        self._rent_rows = [option for option, _, _ in rows]
        self._rent_cells = [dict(zip(headers, row, strict=True)) for _, _, row in rows]
        # the command line's columns, one line per option: the plan and global batch of the highlighted one are shown
        # under the table; on a narrow screen the per-GPU-hour price and the derived count make way (the cost and
        # the hours stay)
        order = [h for h in headers if h not in ("plan", "batch")]
        if self.size.width < 100:
            order = [h for h in order if h not in ("$/GPU-h", "steps", "tokens")]
        cells = []
        for i, (option, pareto, _row) in enumerate(rows):
            by = self._rent_cells[i]
            mark = Text("*" if pareto else " ", style="bold green")
            label = Text(by["GPUs"], style="bold" if option.best_for else "")  # a pick (named under the table)
            cells.append((str(i), (mark, label, *(Text(by[h], justify="right") for h in order[1:]))))
        # the table's width: the tab's padding and two scroll bars (the page's, the table's own)
        fill_table(table, ("", *order), cells, max(40, self.size.width - 6), (1, None, *(12 for _ in order[1:])))
        self._show_option_detail()
        text = Text("\n".join(under))
        text.highlight_regex(r"^(fastest|cheapest|budget|deadline|prices|hidden|note|next)\b", "bold")
        report.update(text)

    @on(DataTable.RowHighlighted, "#options")
    def _show_option_detail(self, _event=None) -> None:
        """Under the table: the highlighted option's plan, as the command line's table has it."""
        option = self._highlighted_option()
        detail = self.query_one("#option-detail", Static)
        if option is None:
            detail.update("")
            return
        by = self._rent_cells[self._rent_rows.index(option)]
        picks = ", ".join(PICK_WORDS.get(p, p) for p in option.best_for)
        batch = f", {by['batch']} sequences per step" if by.get("batch") else ""
        detail.update(Text.assemble((f"{by['GPUs']}: ", "bold"), by["plan"] + batch,
                                    (f"  ({picks})" if picks else "", "green"),
                                    ("   o: plan for it", "dim")))

    def _highlighted_option(self):
        table = self.query_one("#options", DataTable)
        if not isinstance(self.rent, RentView) or table.row_count == 0 or not self._rent_rows:
            return None
        return self._rent_rows[min(table.cursor_row, len(self._rent_rows) - 1)]

    @on(DataTable.RowSelected, "#options")
    async def _option_selected(self, _event: DataTable.RowSelected) -> None:
        await self.action_use_option()

    async def action_use_option(self) -> None:
        """Plan for the highlighted option: the request `generate` gets for it (advisor.recommend.generate_request:
        its GPU, count and nodes, and the method every option was compared with), then the Plan tab."""
        from advisor.recommend import generate_request

        option = self._highlighted_option()
        if option is None:
            self.notify("no option to use yet", severity="warning")
            return
        req = generate_request(self.rent.rec, option)
        await self._ensure_form("target")
        for name, value in (("target_mode", "catalog"), ("gpu", req.gpu), ("gpus", req.gpus), ("nodes", req.nodes),
                            ("method", req.method)):
            if self.values.get(name) != value:
                self.set_field(name, value)
        self._show_hardware()
        await self.action_show_tab("plan")
        self.notify(f"planning for {option.label()} ({req.method}): the Rent tab's option, as generate writes it")

    # ------------------------------------------------------------------------------------------- the bundle

    def _out_dir(self) -> str:
        return self.query_one("#out", Input).value.strip()

    def _show_bundle_tab(self) -> None:
        from advisor.bundle.render import default_out_dir

        o = self.outcome
        out = self.query_one("#out", Input)
        if isinstance(o, PlanView):
            default = default_out_dir(o.decision.chosen.plan, o.decision.model)
            if not out.value or out.value == self._out_default:
                out.value = default  # follows the plan until the user types a folder of their own
            self._out_default = default
        if self.query_one("#tabs", TabbedContent).active == "bundle":
            self._show_files()

    def bundle_files(self) -> dict[str, str]:
        """The files `trl-advisor generate --out FOLDER` would write for the plan on screen (render_bundle with the
        same arguments generate passes), name -> text; empty when there is no plan."""
        from advisor.bundle.render import default_out_dir, render_bundle

        o = self.outcome
        if not isinstance(o, PlanView):
            return {}
        out = self._out_dir() or default_out_dir(o.decision.chosen.plan, o.decision.model)
        key = (id(o), out)
        if self._files_cache is None or self._files_cache[0] != key:
            try:
                files = render_bundle(o.decision.chosen.plan, o.decision.model, o.decision.target,
                                      {**o.result, "out": out}, o.request)
            except AdvisorError as exc:
                files = {"(not written)": f"error: {exc.message}\nhint: {exc.hint or ''}\n"}
            self._files_cache = (key, files)
        return self._files_cache[1]

    def _show_files(self) -> None:
        listing = self.query_one("#files", OptionList)
        files = self.bundle_files()
        keep = listing.highlighted if listing.highlighted is not None else 0
        listing.set_options([Option(name, id=name) for name in files])
        if files:
            listing.highlighted = min(keep, len(files) - 1)
            self._preview(list(files)[listing.highlighted])
        else:
            self.query_one("#preview-text", Static).update(Text("no plan: nothing to write", style="dim"))
        self._show_bundle_status()

    @on(OptionList.OptionHighlighted, "#files")
    def _file_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._preview(event.option.id)

    def _preview(self, name: str) -> None:
        from rich.syntax import Syntax

        text = self.bundle_files().get(name, "")
        lexer = LEXERS.get(Path(name).suffix, "text")
        theme = "monokai" if self.current_theme.dark else "friendly"
        self.query_one("#preview-text", Static).update(
            Syntax(text, lexer, theme=theme, line_numbers=True, word_wrap=False, background_color="default"))

    @on(Input.Changed, "#out")
    def _folder_typed(self) -> None:
        if self.query_one("#tabs", TabbedContent).active == "bundle":
            self._show_files()

    def _show_bundle_status(self, extra: Text | None = None) -> None:
        import shlex

        status = Text()
        out = self._out_dir()
        if self.written:
            q = shlex.quote(self.written)
            launch, check = f"bash {q}/launch.sh", f"trl-advisor verify {q}"
            width = max(len(launch), len(check)) + 3
            status.append(f"wrote {self.written}/", style="bold green")
            if isinstance(self.outcome, PlanView) and self.outcome.request != self.written_request:
                status.append("  (for an earlier request: w writes the one on screen)", style="yellow")
            status.append("\n  ").append(launch.ljust(width), style="bold").append("train\n", style="dim")
            status.append("  ").append(check.ljust(width), style="bold").append(
                "a short run, measured against the prediction" + (" (v: here)" if self._gpus_here() else ""),
                style="dim")
        elif isinstance(self.outcome, PlanView):
            status.append("w writes ", style="dim").append(f"{len(self.bundle_files())} files", style="bold")
            status.append(f" into {out}/" + (" (the folder exists: asks before replacing it)" if Path(out).exists()
                                            else ""), style="dim")
        if extra is not None:
            status.append("\n").append_text(extra)
        self.query_one("#bundle-status", Static).update(status)

    def _gpus_here(self) -> bool:
        return bool(self.machine is not None and self.machine.gpus)

    def action_write(self) -> None:
        from advisor.bundle.render import default_out_dir

        o = self.outcome
        if not isinstance(o, PlanView) or not self.settled:
            self.notify("no plan to write yet" if self.settled else "planning: try again in a moment",
                        severity="warning")
            return
        out = self._out_dir() or default_out_dir(o.decision.chosen.plan, o.decision.model)
        path = Path(out)
        if path.is_dir() and not path.is_symlink() and any(path.iterdir()):
            from advisor.bundle.write import is_bundle_folder

            if is_bundle_folder(path):
                def answer(yes: bool | None) -> None:
                    if yes:
                        self._write(o.request, out, True)

                self.push_screen(ConfirmScreen(f"{out} already holds a trl-advisor bundle. Replace it with this "
                                               "one? (Files trl-advisor did not write are never replaced.)"), answer)
                return
        self._write(o.request, out, False)  # the core refuses anything it may not write, and says why

    @work(thread=True, group="write")
    def _write(self, req: Request, out: str, force: bool) -> None:
        from advisor.bundle.generate import generate

        try:
            outcome = generate(req, out=out, force=force, probe=self._machine_report)
        except AdvisorError as exc:
            self.post_message(Written(out, req, None, exc))
        else:
            self.post_message(Written(out, req, outcome.files, None))

    def on_written(self, message: Written) -> None:
        if message.error is not None:
            self.written = None
            self._show_bundle_status(Text.assemble(("error: ", "bold red"), message.error.message, "\n",
                                                   ("hint: ", "bold"), message.error.hint or ""))
            self.notify(message.error.message, severity="error")
            return
        self.written, self.written_request = message.out, message.request
        self._show_bundle_status()
        self.notify(f"wrote {len(message.files or [])} files into {message.out}/")
        self.refresh_bindings()

    def action_verify(self) -> None:
        if not (self.written and self._gpus_here()) or self.verifying:
            self.notify("verify runs here once a bundle is written on a machine with GPUs"
                        if not self.verifying else "verify is running", severity="warning")
            return
        self.verifying = True
        log = self.query_one("#verify-log", Log)
        log.clear()
        log.add_class("-running")
        self._run_verify(self.written, self.query_one("#random-init", Checkbox).value,
                         self.query_one("#synthetic-data", Checkbox).value)

    @work(thread=True, group="verify")
    def _run_verify(self, out: str, random_init: bool, synthetic_data: bool) -> None:
        run = self._verify
        if run is None:
            from advisor.verify import verify as run
        try:
            # verify's own default number of steps, as `trl-advisor verify DIR` runs it
            outcome = run(out, random_init=random_init, synthetic_data=synthetic_data, progress=_Progress(self))
        except AdvisorError as exc:
            self.post_message(Verified(f"error: {exc.message}\nhint: {exc.hint or ''}", None))
        else:
            self.post_message(Verified(outcome.render(), outcome.passed))

    def on_verify_line(self, message: VerifyLine) -> None:
        self.query_one("#verify-log", Log).write(message.text)

    def on_verified(self, message: Verified) -> None:
        self.verifying = False
        self.verify_passed = message.passed
        style = "bold green" if message.passed else "bold red"
        verdict = {True: "verify passed", False: "verify failed", None: "verify could not run"}[message.passed]
        self._show_bundle_status(Text.assemble((verdict + "\n", style), message.text))
        self.notify(verdict, severity="information" if message.passed else "error")

    # ------------------------------------------------------------------------------------------- actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Tab actions exist only on their tab (hidden from the footer elsewhere); verify only with GPUs here."""
        tab = TAB_ACTIONS.get(action)
        if tab is not None and self.query_one("#tabs", TabbedContent).active != tab:
            return False
        if action in ("pin", "unpin") and not isinstance(self.outcome, PlanView):
            return None
        if action == "verify" and not self._gpus_here():
            return False
        return True

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "bundle":
            self._show_files()
        if event.pane.id == "rent":
            self._show_rent_tab()
            self.rent_changed(immediate=True)  # asks only when what the tab asks changed since its answer
        self.refresh_bindings()

    async def action_show_tab(self, tab: str) -> None:
        await self._ensure_form(tab)
        self.query_one("#tabs", TabbedContent).active = tab
        self._focus_tab(tab)

    def _focus_tab(self, tab: str) -> None:
        """Focus the tab's first control at once: were it left for later, the screen would first move the focus
        off the hidden pane to whatever comes next, and which one wins would depend on timing."""
        first = {"target": "#f-target_mode", "training": "#f-model", "plan": "#knobs", "rules": "#findings",
                 "bundle": "#files", "rent": "#f-tokens"}[tab]
        for widget in self.query(first):  # none while that form is still being built (a key pressed at once)
            widget.focus()

    def action_leave_field(self) -> None:
        self.query_one("#tabs", TabbedContent).query_one("Tabs").focus()

    def _highlighted_knob(self) -> str | None:
        table = self.query_one("#knobs", DataTable)
        if not isinstance(self.outcome, PlanView) or table.row_count == 0:
            return None
        return table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value

    def action_pin(self) -> None:
        knob = self._highlighted_knob()
        name = field_of_knob().get(knob) if knob else None
        if name not in SPECS:
            self.notify(f"{knob} is not a flag: it follows from the others", severity="warning")
            return
        value = getattr(self.outcome.decision.chosen.plan, knob)
        self.set_field(name, value)
        self.notify(f"pinned {flag(name)} {value}")

    def action_unpin(self) -> None:
        knob = self._highlighted_knob()
        name = field_of_knob().get(knob) if knob else None
        if name not in SPECS or not any(v == AUTO for _, v in SPECS[name].choices) and SPECS[name].choices:
            self.notify(f"{knob} always has a value: change it in the form", severity="warning")
            return
        self.set_field(name, None)

    @on(DataTable.RowSelected, "#knobs")
    async def _edit_knob(self, event: DataTable.RowSelected) -> None:
        name = field_of_knob().get(event.row_key.value)
        if name not in SPECS:
            self.notify(f"{event.row_key.value} is not a flag: it follows from the others", severity="warning")
            return
        await self._ensure_form(SPECS[name].tab)
        self.query_one("#tabs", TabbedContent).active = SPECS[name].tab
        self.rows[name].editor.focus()

    def action_apply_fix(self) -> None:
        f = self._highlighted_finding()
        if f is None or not f.get("auto_fix"):
            fixable = [x for x in self._shown_findings() if x.get("auto_fix")]
            if not fixable:
                self.notify("no rule here has an automatic fix", severity="warning")
                return
            f = fixable[0]
        changes = fix_changes(f["auto_fix"])
        for name, value in changes.items():
            if name in SPECS:
                self.set_field(name, value)
        self.notify(f"{f['id']}: " + " ".join(f"{flag(k)} {v}" for k, v in changes.items()))

    def action_explain(self) -> None:
        import rules

        f = self._highlighted_finding()
        if f is not None:
            self.push_screen(TextScreen(rules.explain(f["id"])))

    def action_copy_command(self) -> None:
        command = command_line(self.request)
        self.copy_to_clipboard(command)
        self.notify(command, title="copied")

    def action_browse_models(self) -> None:
        def picked(model: str | None) -> None:
            if model:
                self.set_field("model", model)

        self.push_screen(ModelPicker(str(self.values.get("model") or "")), picked)

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"
        if self.query_one("#tabs", TabbedContent).active == "bundle":
            self._show_files()

    def action_help(self) -> None:
        keys = [(k.replace("question_mark", "?").replace(",", " / "), what) for k, _, _, what in KEYS]
        keys.insert(6, ("enter", "Plan tab: edit the highlighted knob in the form; Rent tab: in a field, on to the "
                             "options; on an option, use it"))
        keys.append(("ctrl+p", "the command palette: every action by name"))
        keys.append(("tab", "next field (shift+tab: previous)"))
        self.push_screen(HelpScreen(keys))

    async def action_quit(self) -> None:
        if self.verifying:
            # The run is in its own process group and ends at verify's timeout; quitting now would leave it running
            self.notify("verify is running: the wizard quits when you ask again after it ends", severity="warning")
            return
        self._quitting = True
        self.rent_changed()  # no new recommend (one running is left to end with the process)
        async with self._form_lock:  # a form being built finishes first
            self.exit(0)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for _keys, action, title, what in KEYS:
            yield SystemCommand(title, what, lambda a=action: self.run_action(a))

    # ------------------------------------------------------------------------------------------- crashes

    def _fatal_error(self) -> None:
        # An unexpected error leaves the app; run_app hands the exception to the command line, which prints one
        # line and writes the traceback to a file (exit 3), as for every other command.
        self.bell()
        self._close_messages_no_wait()


# ============================================================================================= entry points


def make_app(request: Request | None = None, *, probe: Callable[[], object] | None = None,
             verify: Callable | None = None) -> WizardApp:
    return WizardApp(request, probe=probe, verify=verify)


def run_app(app: WizardApp, **run_options) -> int:
    """Run the app; an unexpected error inside it is raised here, for the command line's exit 3."""
    from textual.worker import WorkerFailed

    app.run(**run_options)
    error = getattr(app, "_exception", None)
    if error is not None:
        raise error.error if isinstance(error, WorkerFailed) else error
    return int(app.return_code or 0)


def run_wizard(request: Request | None = None) -> int:
    """`trl-advisor` / `trl-advisor wizard [REQUEST flags]` on a terminal (advisor.cli checks that it is one)."""
    return run_app(make_app(request))


__all__ = ["FIELDS", "PlanProblem", "PlanView", "WizardApp", "compute_outcome", "make_app", "run_app", "run_wizard"]
