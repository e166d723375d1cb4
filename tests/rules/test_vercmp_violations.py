"""vercmp.violations: which known versions fall outside their specifiers (unknown ones never count)."""

from rules import all_rules, vercmp


def test_violations_lists_only_known_versions_outside_the_range():
    installed = {"trl": "1.16.0", "transformers": "5.17.0", "datasets": "not-a-version"}
    specs = {"trl": "<=1.15.0", "transformers": "<=5.17.0", "datasets": "<5", "peft": ">=0.18"}
    assert vercmp.violations(installed.get, specs) == [("trl", "1.16.0", "<=1.15.0")]


def test_rule_applies_names_the_package_outside_its_range():
    rule = next(r for r in all_rules() if r.applies_to)
    package, spec = rule.applies_to[0]
    applies, why = rule.applies({package: "0.0.1"})
    assert not applies and why == f"applies to {package}{spec}; the configuration has {package} 0.0.1"
    assert rule.applies({})[0]
