"""Meta-tests: the registry keeps its own conventions (ids, names, docs, sources, a case file per rule)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import yaml
from rules_harness import CASES, load_cases

import rules
from advisor.core.errors import UnknownNameError
from rules import ALL_RULES, get_rule
from rules.model import AREAS
from rules.registry import REQUIRED_SECTIONS, RuleDefinitionError, rule


def test_at_least_64_rules_and_every_area_populated():
    assert len(ALL_RULES) >= 64
    by_area = Counter(r.area for r in ALL_RULES)
    assert set(by_area) == set(AREAS), f"areas without rules: {set(AREAS) - set(by_area)}"


def test_ids_unique_and_well_formed():
    ids = [r.id for r in ALL_RULES]
    assert len(ids) == len(set(ids))
    for r in ALL_RULES:
        assert re.fullmatch(r"(HW|DS|PEFT|SP|TRN|VLLM|CMP|CFG|VER|MEM)\d{3}", r.id), r.id


def test_ids_numbered_without_gaps_per_area():
    # ids are permanent: a retired one would be redirected, so today's set is 001..N in each area
    for area in AREAS:
        numbers = sorted(int(r.id[len(area):]) for r in ALL_RULES if r.area == area)
        assert numbers == list(range(1, len(numbers) + 1)), f"{area}: {numbers}"


def test_names_kebab_case_and_unique():
    names = [r.name for r in ALL_RULES]
    assert len(names) == len(set(names))
    for name in names:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name), name


@pytest.mark.parametrize("r", ALL_RULES, ids=lambda r: r.id)
def test_every_field_present(r):
    assert r.severity in ("error", "warning", "info")
    assert r.summary and not r.summary.startswith("#")
    assert r.reads and all(isinstance(x, str) and "." in x for x in r.reads)
    assert r.sources
    assert callable(r.check)
    for package, spec in r.applies_to:
        assert package and spec[:1] in "<>=!~", (package, spec)


@pytest.mark.parametrize("r", ALL_RULES, ids=lambda r: r.id)
def test_docstring_sections_present_and_not_empty(r):
    sections = r.sections()
    for heading in REQUIRED_SECTIONS:
        title = heading[3:]
        assert title in sections, f"{r.id} lacks {heading}"
        assert sections[title].strip(), f"{r.id}: {heading} is empty"


@pytest.mark.parametrize("r", ALL_RULES, ids=lambda r: r.id)
def test_every_source_is_a_url(r):
    for url in r.sources:
        assert re.fullmatch(r"https?://[^\s]+", url), url


@pytest.mark.parametrize("r", ALL_RULES, ids=lambda r: r.id)
def test_every_rule_has_a_case_file_with_pass_and_fail(r):
    path = CASES / f"{r.id}.yaml"
    assert path.is_file(), f"{r.id} has no tests/rules/cases/{r.id}.yaml"
    rule_id, cases = load_cases(path)
    assert rule_id == r.id
    statuses = {c["expect"]["status"] for c in cases}
    assert "pass" in statuses and "fail" in statuses, f"{r.id}: needs a passing and a failing case ({statuses})"
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), f"{r.id}: duplicate case names"
    for c in cases:
        assert c["name"].split("_")[0] in ("pass", "fail", "na", "unknown"), c["name"]


def test_no_orphan_case_files():
    ids = {r.id for r in ALL_RULES}
    for path in CASES.glob("*"):
        assert path.suffix == ".yaml" and path.stem in ids, f"orphan case file {path.name}"
        assert yaml.safe_load(path.read_text())["rule"] == path.stem


def test_seed_ids_refer_to_the_research_seed():
    for r in ALL_RULES:
        if r.seed_id:
            assert re.fullmatch(r"(HW|DS|Q|GC|K|U|V|T|SP|CP|F)-\d{2}", r.seed_id), (r.id, r.seed_id)


def test_registry_refuses_a_rule_without_sections():
    with pytest.raises(RuleDefinitionError, match="lacks"):
        @rule(id="HW999", name="bad-rule", severity="error", reads=("plan.attn",))
        def bad(ctx):
            """Only a summary."""


def test_registry_refuses_bad_id_name_and_missing_url():
    doc = "S.\n\n## Why\nw\n## Fix\nf\n## Example\ne\n## References\n- {}\n"
    with pytest.raises(RuleDefinitionError, match="id must be"):
        rule(id="XX001", name="ok-name", severity="error", reads=("plan.attn",))(_with_doc(doc.format("https://x.y")))
    with pytest.raises(RuleDefinitionError, match="kebab"):
        rule(id="HW998", name="Bad_Name", severity="error", reads=("plan.attn",))(_with_doc(doc.format("https://x.y")))
    with pytest.raises(RuleDefinitionError, match="no URL"):
        rule(id="HW997", name="no-url", severity="error", reads=("plan.attn",))(_with_doc(doc.format("a book")))


def _with_doc(doc):
    def check(ctx):
        return None

    check.__doc__ = doc
    return check


def test_get_rule_by_id_and_name_and_unknown():
    assert get_rule("sp001").id == "SP001"
    assert get_rule("ulysses-heads-divisible").id == "SP001"
    with pytest.raises(UnknownNameError) as info:
        get_rule("SP01")
    assert "SP001" in info.value.hint
    assert info.value.exit_code == 2


def test_explain_is_ruff_style():
    text = rules.explain("SP001")
    assert text.startswith("SP001 ulysses-heads-divisible (error)\n")
    for title in ("Why", "Fix", "Example", "References"):
        assert f"\n{title}\n" in text
    assert "Reads: plan.sp_size" in text


def test_rules_json_and_text_list_every_rule():
    data = rules.rules_json()
    assert [d["id"] for d in data] == [r.id for r in ALL_RULES]
    assert {"id", "name", "severity", "summary", "sections", "reads", "sources"} <= set(data[0])
    text = rules.render_rules()
    assert all(r.id in text for r in ALL_RULES)


def test_compat_matrix_rows_point_to_rules():
    m = rules.compat_matrix()
    ids = {r.id for r in ALL_RULES}
    assert m["rows"]
    for row in m["rows"]:
        assert row["rule"] in ids, row
        assert row["verdict"] in m["verdicts"], row
        assert row["source"].startswith("https://"), row
        assert m["cells"][f"{row['a']}|{row['b']}"] == row["verdict"]
        assert m["cells"][f"{row['b']}|{row['a']}"] == row["verdict"]
    cmp_rules = {r.id for r in ALL_RULES if r.area == "CMP"}
    assert cmp_rules <= {row["rule"] for row in m["rows"]}, "every CMP rule has a matrix row"
    for feature in ("deepspeed", "fsdp2", "unsloth", "liger", "hf-kernels", "vllm-server", "vllm-colocate"):
        assert feature in m["features"], feature
    assert "deepspeed" in rules.render_matrix(m)


def test_docs_file_is_current():
    from pathlib import Path

    from rules.render import rules_markdown

    docs = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
    assert docs.read_text(encoding="utf-8") == rules_markdown(), "run: python -m rules --write-docs"


def test_importing_rules_stays_light():
    import json
    import subprocess
    import sys

    code = "import rules, sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    heavy = {"torch", "textual", "pynvml", "transformers", "trl", "deepspeed", "accelerate", "peft"}
    assert not loaded & heavy, sorted(loaded & heavy)
