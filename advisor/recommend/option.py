"""What `recommend` returns: one Option per hardware choice that has a feasible plan, and the Recommendation that
ranks them (the command line and the wizard both read these)."""

from __future__ import annotations

from dataclasses import dataclass, field

from advisor.catalog.prices import GpuPrice
from advisor.core.request import Request
from advisor.core.specs import ModelSpec
from advisor.model.job import Job
from advisor.recommend.hardware import Hardware
from advisor.search import Candidate


@dataclass(frozen=True)
class Option:
    hardware: Hardware
    candidate: Candidate
    """The planner's chosen plan on this hardware, with its memory and speed estimates."""
    job: Job
    price: GpuPrice | None
    """None: no price known for this GPU (shown without a cost)."""
    pareto: bool = False
    """On the time-vs-cost front: no other priced option is at least as fast and as cheap, and better in one."""
    best_for: tuple[str, ...] = ()
    """Which picks this option is: fastest, cheapest, within_budget, within_deadline."""

    @property
    def hours(self) -> float:
        return self.job.hours

    @property
    def gpu_hours(self) -> float:
        return self.job.gpu_hours

    @property
    def tokens_per_second(self) -> float:
        return self.candidate.tokens_per_second

    @property
    def cost_usd(self) -> float | None:
        return self.job.gpu_hours * self.price.usd_per_gpu_hour if self.price is not None else None

    @property
    def headroom_bytes(self) -> int:
        return self.candidate.memory.headroom_bytes

    def label(self) -> str:
        return self.hardware.label()


PICKS = ("fastest", "cheapest", "within_budget", "within_deadline")


@dataclass(frozen=True)
class Recommendation:
    request: Request
    """The request as planned: the user's pins, the job size, and the method compared (see `method`)."""
    model: ModelSpec
    method: str
    """The method every option trains: the pinned one, else the most faithful that some option can run."""
    options: tuple[Option, ...]
    """Every feasible option, in the order asked for (--sort)."""
    gpu_types: tuple[str, ...]
    max_gpus: int
    max_nodes: int
    sort: str
    budget_usd: float | None = None
    deadline_hours: float | None = None
    planned: int = 0
    """Hardware choices planned for the compared method, infeasible ones included: searched, or ruled out by a
    pinned knob's rule without a search (`ruled_out`)."""
    searches: int = 0
    """Planner searches run in all, earlier methods' passes included."""
    infeasible: tuple[str, ...] = ()
    """Hardware choices where no plan fits (labels)."""
    not_searched: tuple[str, ...] = ()
    """Why larger counts of a type were skipped: more GPUs stopped shortening the job."""
    ruled_out: tuple[str, ...] = ()
    """Hardware choices a pinned knob rules out, skipped without a search (among `infeasible`): the label and the
    rule it breaks there (`1 x H100-80GB: SP006 sp 2 does not divide the 1 training processes`)."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def pick(self, name: str) -> Option | None:
        """The option that is `name` (one of PICKS), or None."""
        return next((o for o in self.options if name in o.best_for), None)

    @property
    def fastest(self) -> Option | None:
        return self.pick("fastest")

    @property
    def cheapest(self) -> Option | None:
        return self.pick("cheapest")

    @property
    def within_budget(self) -> Option | None:
        return self.pick("within_budget")

    @property
    def within_deadline(self) -> Option | None:
        return self.pick("within_deadline")
