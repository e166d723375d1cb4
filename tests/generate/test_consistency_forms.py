"""The file check reads what the tools read: sbatch's `--nodes 2` and `-N 2` as `--nodes=2`, and a package the
plan no longer needs (Liger switched off in CONFIG) as harmless, where a missing one is an error."""

from __future__ import annotations

import pytest

from advisor.bundle.consistency import check_bundle_files
from advisor.bundle.generate import generate
from advisor.core.request import Request


def _files(out) -> dict[str, str]:
    return {p.name: p.read_text() for p in out.iterdir() if p.is_file()}


@pytest.mark.parametrize("form", ["--nodes=2", "--nodes 2", "-N 2", "-N 2  # two nodes"])
def test_sbatch_options_in_every_form_sbatch_takes(tmp_path, form):
    out = tmp_path / "b"
    generate(Request(model="70B", gpu="H100-80GB", gpus=8, nodes=2), out=str(out))
    files = _files(out)
    assert "#SBATCH --nodes=2" in files["slurm.sbatch"]
    files["slurm.sbatch"] = files["slurm.sbatch"].replace("#SBATCH --nodes=2", f"#SBATCH {form}")
    assert check_bundle_files(files) == []
    files["slurm.sbatch"] = files["slurm.sbatch"].replace(f"#SBATCH {form}", "#SBATCH --nodes 3")
    assert any("--nodes=3" in p for p in check_bundle_files(files))


def test_a_package_no_longer_needed_is_no_error_and_a_missing_one_is(tmp_path):
    out = tmp_path / "b"
    generate(Request(model="0.5B", gpu="H100-80GB", gpus=1, liger=True), out=str(out))
    files = _files(out)
    files["train.py"] = files["train.py"].replace("'liger': True,", "'liger': False,", 1)
    assert not [p for p in check_bundle_files(files) if "requirements.txt" in p]
    files = _files(out)
    files["requirements.txt"] = "\n".join(line for line in files["requirements.txt"].splitlines()
                                          if not line.startswith("liger-kernel"))
    assert any("liger-kernel missing" in p for p in check_bundle_files(files))
