"""Reference bundles, byte for byte: for each canonical scenario, `trl-advisor generate` writes a bundle that must
equal generated/reference/<scenario>/. A diff here is a change in what users run: read it, then regenerate with

    python -m advisor.bundle.references
"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.bundle.consistency import check_bundle_files
from advisor.bundle.references import REFERENCE_DIR, REFERENCE_SCENARIOS, generate_reference
from advisor.check import check_bundle

REPO = Path(__file__).resolve().parents[2]
REGEN = "python -m advisor.bundle.references"


def _read_tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("name", sorted(REFERENCE_SCENARIOS))
def test_bundle_matches_reference(name, tmp_path):
    reference = REPO / REFERENCE_DIR / name
    if not reference.is_dir():
        pytest.fail(f"{reference} is missing: {REGEN} {name}")
    proc = generate_reference(name, tmp_path)  # same relative --out, so plan.json's "out" matches
    assert proc.returncode == 0, f"trl-advisor generate failed:\n{proc.stderr}"
    produced = _read_tree(tmp_path / REFERENCE_DIR / name)
    expected = _read_tree(reference)
    assert sorted(produced) == sorted(expected), f"{name}: the bundle's files changed; {REGEN} {name}"
    for file_name, content in expected.items():
        assert produced[file_name] == content, f"{reference / file_name} is stale: {REGEN} {name}"


@pytest.mark.parametrize("name", sorted(REFERENCE_SCENARIOS))
def test_reference_is_consistent(name):
    reference = REPO / REFERENCE_DIR / name
    if not reference.is_dir():
        pytest.skip(f"{reference} not generated yet ({REGEN})")
    files = {n: c.decode("utf-8") for n, c in _read_tree(reference).items()}
    assert check_bundle_files(files) == []


@pytest.mark.parametrize("name", sorted(REFERENCE_SCENARIOS))
def test_reference_passes_the_rule_engine(name):

    report = check_bundle(str(REPO / REFERENCE_DIR / name))
    assert report.ok, [f.to_dict() for f in report.errors]


@pytest.mark.parametrize("name", sorted(REFERENCE_SCENARIOS))
def test_reference_loads_in_accelerate_and_deepspeed(name):
    import json

    config_args = pytest.importorskip("accelerate.commands.config.config_args", reason="needs the [train] extra")
    folder = REPO / REFERENCE_DIR / name
    config_args.load_config_from_file(str(folder / "accelerate.yaml"))
    ds_file = folder / "ds_config.json"
    if ds_file.exists():
        zero = pytest.importorskip("deepspeed.runtime.zero.config", reason="needs the [train] extra")
        zero.DeepSpeedZeroConfig(**json.loads(ds_file.read_text())["zero_optimization"])
