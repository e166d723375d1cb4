"""The layers of trl-advisor point one way, and no modules import each other in a loop.

Every import is counted: at module level, inside functions (a lazy import is still a dependency), and under
`if TYPE_CHECKING:`. A module may import its own package (the same row below) and the rows beneath it, never a
row above; the pipeline reads from the bottom up:

    11  advisor.__main__    `python -m advisor`
    10  advisor.cli         parse, dispatch, print; computes nothing (bare `trl-advisor` opens the wizard)
     9  tui                 the wizard: shows what the layers below compute
     8  advisor.verify      run a bundle, compare with the estimate of the files on disk
     7  advisor.check       estimate / check / check --bundle: resolve or read back, estimate, rules, report
        advisor.autofix     check --fix: the rules' automatic fixes applied to a request (beside check)
     6  advisor.bundle      render, self-check, write, generate; read a folder back into a plan
        advisor.recommend   plan every GPU type and count for a job, price and rank them (beside bundle, not above)
     5  advisor.search      candidates, ranking, explanation, smallest change
     4  rules               the rule engine: a Context (plan, model, target, estimate, files) in, findings out
     3  advisor.model       memory and speed of one plan (knows no rules)
     2  advisor.resolve     request checks, documented defaults, the hardware target
     1  advisor.catalog     the catalogue data and what names mean
     0  advisor.core        plain types, errors, bounded reading      hw_probe   the machine (NVML); imports nothing of ours
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("advisor", "rules", "hw_probe", "tui.py")

LAYERS: tuple[tuple[str, int], ...] = (
    ("advisor.core", 0), ("hw_probe", 0), ("advisor.catalog", 1), ("advisor.resolve", 2), ("advisor.model", 3),
    ("rules", 4), ("advisor.search", 5), ("advisor.bundle", 6), ("advisor.recommend", 6), ("advisor.check", 7),
    ("advisor.autofix", 7), ("advisor.verify", 8), ("tui", 9), ("advisor.cli", 10), ("advisor.__main__", 11),
)
"""(package or module, layer): a module belongs to the longest prefix that names it."""
ROOT_MODULES = {"advisor": 0}
"""`advisor/__init__.py` holds the version only: any layer may read it."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for source in SOURCES:
        path = REPO / source
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        for f in files:
            out[_module_name(f)] = f
    return out


MODULES = _modules()


def _unit(module: str) -> tuple[str, int] | None:
    if module in ROOT_MODULES:
        return module, ROOT_MODULES[module]
    best = None
    for prefix, layer in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return best


def _ours(name: str) -> str | None:
    """The module of ours an import names (`from pkg import sub` names the submodule when there is one)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """Modules of ours `module` imports. `from pkg import sub` is an edge to pkg.sub when sub is a module (Python
    runs pkg/__init__.py first, but that face only hands names on), and to pkg for any other name."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                     for a in node.names]
        else:
            continue
        for name in names:
            target = _ours(name)
            if target and target != module:
                found.add(target)
    return found


GRAPH = {m: _imports(m) for m in MODULES}


def test_every_module_has_a_layer():
    assert [m for m in MODULES if _unit(m) is None] == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    unit, layer = _unit(module)
    upward = []
    for target in sorted(GRAPH[module]):
        t_unit, t_layer = _unit(target)
        if t_unit == unit:
            continue
        if t_layer >= layer and not (t_layer == 0 and layer == 0 and t_unit in ROOT_MODULES):
            upward.append(f"{target} (layer {t_layer} {t_unit})")
    assert not upward, f"{module} (layer {layer} {unit}) imports sideways or up: {', '.join(upward)}"


def test_the_probe_imports_nothing_of_ours():
    for module in (m for m in MODULES if m.startswith("hw_probe")):
        assert {t for t in GRAPH[module] if not t.startswith("hw_probe")} == set(), module


def test_no_import_cycles():
    """Tarjan's strongly connected components over the whole graph: any component of two or more modules is a
    loop (function-level imports included)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_test_sees_the_imports_it_must():
    """The checker itself: lazy imports inside functions and `from pkg import submodule` are edges."""
    assert "advisor.core.errors" in GRAPH["advisor.cli"]
    assert "advisor.bundle.read" in GRAPH["advisor.check"]  # `from advisor.bundle import read as bundle`
    assert any(t.startswith("advisor.verify") for t in GRAPH["advisor.cli"])  # imported inside cmd_verify
