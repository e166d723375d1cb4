"""The rule engine's types: a Rule, what it returns (Result), what the report shows (Finding), what it reads (Context)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from rules import vercmp

if TYPE_CHECKING:
    from advisor.core.files import BundleFiles
    from advisor.core.plan import Plan
    from advisor.core.request import Request
    from advisor.core.specs import ModelSpec
    from advisor.core.target import Target

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[str, ...] = ("error", "warning", "info")

Status = Literal["pass", "fail", "not-applicable", "unknown"]
PASS: Status = "pass"
FAIL: Status = "fail"
NOT_APPLICABLE: Status = "not-applicable"
"""The rule's subject is absent from this configuration (e.g. a Ulysses rule for a plan without SP)."""
UNKNOWN: Status = "unknown"
"""The rule applies but an input it needs is missing (e.g. the host RAM of a catalogue target)."""

AREAS: dict[str, str] = {
    "HW": "hardware",
    "DS": "distributed: DeepSpeed and FSDP",
    "PEFT": "LoRA, QLoRA and quantization",
    "SP": "sequence and context parallelism",
    "TRN": "trainer arithmetic and trainer-specific",
    "VLLM": "vLLM generation",
    "CMP": "compatibility matrix",
    "CFG": "configuration files",
    "VER": "versions",
    "MEM": "memory and feasibility",
}
"""Id prefix -> area, in report order."""


@dataclass(frozen=True)
class Result:
    """What a rule's check returns; the engine adds the rule's metadata and the evidence to make a Finding."""

    status: Status
    message: str = ""
    fix: str = ""
    auto_fix: dict | None = None
    """Plan field changes the planner may apply, e.g. {"sp_size": 4}."""
    evidence: dict = field(default_factory=dict)
    """Values the check used beyond the rule's declared `reads` (e.g. the valid sp sizes it computed)."""


def ok(message: str = "", **evidence: Any) -> Result:
    return Result(PASS, message, evidence=evidence)


def fail(message: str, fix: str = "", auto_fix: dict | None = None, **evidence: Any) -> Result:
    return Result(FAIL, message, fix, auto_fix, evidence)


def na(reason: str = "") -> Result:
    return Result(NOT_APPLICABLE, reason)


def unknown(reason: str, fix: str = "") -> Result:
    return Result(UNKNOWN, reason, fix)


@dataclass(frozen=True)
class Finding:
    """One rule's verdict on one configuration."""

    id: str
    name: str
    severity: Severity
    status: Status
    message: str
    fix: str
    auto_fix: dict | None
    sources: tuple[str, ...]
    reads: dict
    """The inputs the rule read and their values (evidence)."""

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    @property
    def is_error(self) -> bool:
        return self.status == FAIL and self.severity == "error"

    @property
    def source(self) -> str:
        return self.sources[0] if self.sources else ""

    @property
    def reported_severity(self) -> Severity:
        """The severity the JSON gives: the rule's when it failed; "info" otherwise, for a rule that could not be
        checked (status unknown) above all. An unchecked rule found nothing, so it is no error: `check` exits 1 only
        for a failed error-severity finding (is_error; CONTRACT.md), and a script that reads `severity` must agree
        with that exit code. The rule's own severity stays in `rule_severity` (the text report's "not checked: error
        if it fails")."""
        return self.severity if self.status == FAIL else "info"

    def to_dict(self) -> dict:
        return {
            "id": self.id, "name": self.name, "severity": self.reported_severity, "rule_severity": self.severity,
            "status": self.status,
            "message": self.message, "fix": self.fix, "auto_fix": self.auto_fix, "source": self.source,
            "sources": list(self.sources), "reads": {k: _jsonable(v) for k, v in self.reads.items()},
        }


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [_jsonable(v) for v in items]
    return str(value)


@dataclass(frozen=True)
class Rule:
    """A permanent id, a kebab-case name, a severity, and a documented check."""

    id: str
    name: str
    severity: Severity
    check: Callable[[Context], Result]
    doc: str
    """The check's docstring: a summary line, then ## Why, ## Fix, ## Example, ## References."""
    reads: tuple[str, ...]
    """Dotted inputs the check reads (`plan.sp_size`, `model.heads`, `files.ds_config`): shown as evidence."""
    sources: tuple[str, ...]
    """URLs from the References section."""
    applies_to: tuple[tuple[str, str], ...] = ()
    """(package, specifier): the rule is not applicable when a known version falls outside the specifier."""
    seed_id: str | None = None
    """The id of the issue-mined constraint (HW-01, SP-02 ...) this rule descends from, kept for traceability."""
    auto_fixable: bool = False

    @property
    def area(self) -> str:
        return self.id.rstrip("0123456789")

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0].strip() if self.doc.strip() else ""

    def sections(self) -> dict[str, str]:
        """`## Why` ... -> {"Why": "...", ...}, in docstring order."""
        out: dict[str, list[str]] = {}
        current: str | None = None
        for line in self.doc.splitlines():
            if line.startswith("## "):
                current = line[3:].strip()
                out[current] = []
            elif current is not None:
                out[current].append(line)
        return {k: "\n".join(v).strip() for k, v in out.items()}

    def applies(self, versions: Mapping[str, str]) -> tuple[bool, str]:
        """Whether the known versions fall inside `applies_to`; an unknown version never excludes the rule."""
        for package, have, spec in vercmp.violations(versions.get, self.applies_to)[:1]:
            return False, f"applies to {package}{spec}; the configuration has {package} {have}"
        return True, ""


@dataclass
class Context:
    """Everything a rule may read. `versions` defaults to the target's probed software, gaps filled with the
    versions the bundle pins (rules/data/pins.toml); `version_origin` says where each came from."""

    request: Request | None
    plan: Plan
    model: ModelSpec
    target: Target
    memory: Any = None
    """advisor.model.memory.MemoryEstimate, or None when no estimate is available (MEM rules are then not applicable)."""
    speed: Any = None
    versions: dict | None = None
    files: BundleFiles | None = None
    version_origin: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.versions is None:
            self.versions, self.version_origin = default_versions(self.target, self.plan)
        else:
            self.versions = {normalize_package(k): str(v) for k, v in self.versions.items() if v}
            self.version_origin = {k: self.version_origin.get(k, "given") for k in self.versions}

    @property
    def world(self) -> int:
        """Training processes (one per training GPU)."""
        return self.plan.num_processes

    def version(self, package: str) -> str | None:
        """The version of `package` the rules assume; None when it is not known or cannot be read as a version
        (a 5,000-digit pin in requirements.txt, a probe's odd local build string): unknown, never a crash."""
        value = self.versions.get(normalize_package(package)) if self.versions else None
        return value if value is None or vercmp.is_version(value) else None

    def arg(self, name: str, default: Any = None) -> Any:
        """A TRL/TrainingArguments value from the user's files (train.py, TRL YAML), else `default`."""
        if self.files is None:
            return default
        return self.files.trl_args.get(name, default)

    def has_arg(self, name: str) -> bool:
        return self.files is not None and name in self.files.trl_args


def normalize_package(name: str) -> str:
    """Distribution names compare lower-case with `-` (`Liger_Kernel` -> `liger-kernel`)."""
    return name.strip().lower().replace("_", "-").replace(".", "-")


def default_versions(target: Target, plan: Plan) -> tuple[dict[str, str], dict[str, str]]:
    """The probe's versions where it read them; the bundle's pins for the rest (vLLM only when the plan uses it)."""
    from rules import datafiles

    versions: dict[str, str] = {}
    origin: dict[str, str] = {}
    for name, value in (target.software or {}).items():
        if value:
            key = normalize_package(name)
            versions[key] = str(value)
            origin[key] = "probe"
    pins = datafiles.pins()
    if getattr(plan, "vllm_mode", "none") != "none":
        pins.update(datafiles.pins_when_used())
    if getattr(plan, "unsloth", False):
        # An Unsloth bundle pins its own environment (trl<=1.15 ...): exact pins replace the TRL 1.16 ones, and a
        # package given only as a range (datasets>=3.4.1,<5) has no single version to assume.
        for name, value in datafiles.unsloth_env().items():
            if datafiles.is_exact(value):
                pins[name] = value
            else:
                pins.pop(name, None)
                pins.pop(normalize_package(name), None)
    if hasattr(plan, "attn"):
        # what the plan's own requirements.txt installs wins (vLLM moves transformers to 5.17.0, for one)
        from rules.environments import bundle_pins

        pins.update({name: value for name, value in bundle_pins(plan).items() if datafiles.is_exact(value)})
    for name, value in pins.items():
        key = normalize_package(name)
        if key not in versions and datafiles.is_exact(value):
            versions[key] = value
            origin[key] = "pin"
    return versions, origin
