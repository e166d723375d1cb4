"""`generate`: search, pick, explain, and write the bundle."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.bundle.render import default_out_dir, render_bundle
from advisor.bundle.write import write_bundle
from advisor.core.request import Request
from advisor.search import Decision, decide, render_decision


@dataclass
class GenerateOutcome:
    result: dict
    decision: Decision
    out: str
    files: list[str]
    notes: list[str]

    def render(self) -> str:
        return render_decision(self.result, self.decision, self.out)


def generate(req: Request, *, out: str | None = None, force: bool = False, probe=None) -> GenerateOutcome:
    decision, result = decide(req, probe=probe)
    plan = decision.chosen.plan
    out_dir = out or default_out_dir(plan, decision.model)
    result["out"] = out_dir
    files = render_bundle(plan, decision.model, decision.target, result, req)
    left_behind: list[str] = []
    written = write_bundle(files, out_dir, force=force, left_behind=left_behind)
    result["files"] = sorted(files)
    notes = list(decision.notes) + [f"the replaced bundle could not be deleted: it is in {path}; remove it by hand"
                                    for path in left_behind]
    return GenerateOutcome(result=result, decision=decision, out=out_dir, files=written, notes=notes)
