"""The packages step's tiers: an exact pin missed inside the range the rules know to work is a warning with the pip
line; outside it, a missing package, a CPU torch or an unmet range pin is a failure."""

from __future__ import annotations

import pytest
from verify_cases import INSTALLED, FakeRun, machine, make_bundle, plan

from advisor.verify import packages, verify

TRL_REQUIRES = ["accelerate>=1.10.1", "datasets>=4.7.0", "transformers>=4.56.2",
                'deepspeed>=0.18.6; extra == "deepspeed"', 'transformers!=5.1.0; extra == "deepspeed"',
                'liger-kernel>=0.8.2; extra == "liger"', 'peft>=0.13.0; extra == "peft"',
                'pytest; extra == "test"', 'harbor>=0.13.0; python_version >= "3.12" and extra == "harbor"']
"""The requirement lines of trl 1.16.0's wheel metadata that matter here (importlib.metadata.requires('trl'))."""


def _packages(bundle, **software):
    outcome = verify(bundle, runner=FakeRun(), probe=machine(gpus=1, software={**INSTALLED, **software}),
                     progress=None, full_steps=True, trl_requires=TRL_REQUIRES)
    return outcome.step("packages")


def test_the_gpu_machines_transformers_is_a_warning_with_the_pip_line(tmp_path):
    step = _packages(make_bundle(tmp_path), transformers="5.17.0")
    assert step.status == "pass"
    (warning,) = step.warnings
    assert "transformers 5.17.0 installed, the bundle pins 5.25.0: inside the range that works" in warning
    assert "TRL requires transformers>=4.56.2" in warning and "the version rules pass" in warning
    assert warning.endswith("pip install transformers==5.25.0")
    assert "1 inside the working range" in step.detail


def test_outside_the_range_trl_declares_fails(tmp_path):
    step = _packages(make_bundle(tmp_path), transformers="4.55.0")
    assert step.status == "fail" and "TRL requires transformers>=4.56.2" in step.detail


def test_another_major_version_of_an_api_package_fails(tmp_path):
    # inside TRL's range, but train.py's loading and checkpointing arguments are transformers 5's
    step = _packages(make_bundle(tmp_path), transformers="4.57.0")
    assert step.status == "fail" and "another major version" in step.detail


def test_trl_must_be_the_api_release_the_bundle_is_written_for(tmp_path):
    bundle = make_bundle(tmp_path)
    assert _packages(bundle, trl="1.16.1").status == "pass"  # a patch release: a warning
    step = _packages(bundle, trl="1.15.0")
    assert step.status == "fail" and "TRL 1.16 API" in step.detail


def test_a_version_rule_that_fails_only_with_the_installed_version_fails(tmp_path):
    # trl[deepspeed] excludes transformers 5.1.0 (rule VER008 and TRL's metadata): on a DeepSpeed plan it fails
    bundle = make_bundle(tmp_path, plan(backend="deepspeed", zero_stage=2))
    step = _packages(bundle, transformers="5.1.0")
    assert step.status == "fail" and "5.1.0" in step.detail


def test_the_rules_alone_decide_without_trl_metadata(tmp_path):
    bundle = make_bundle(tmp_path, plan(backend="deepspeed", zero_stage=2))
    outcome = verify(bundle, runner=FakeRun(), probe=machine(gpus=1, software={**INSTALLED, "deepspeed": "0.17.5"}),
                     progress=None, full_steps=True, trl_requires=[])
    step = outcome.step("packages")
    assert step.status == "fail" and "VER008" in step.detail  # deepspeed >= 0.18.6 for TRL's integration


def test_missing_package_and_cpu_torch_fail(tmp_path):
    bundle = make_bundle(tmp_path)
    missing = _packages(bundle, accelerate=None)
    assert missing.status == "fail" and "accelerate not installed" in missing.detail
    cpu = _packages(bundle, torch="2.13.0+cpu")
    assert cpu.status == "fail" and "CPU build" in cpu.detail


def test_a_range_pin_not_met_fails():
    step = packages.judge("torch>=2.6\n", {"torch": "2.5.1"}.get, cpu=False, trl_requires=[])
    assert step.status == "fail" and "torch 2.5.1 does not satisfy >=2.6" in step.detail


def test_exact_pins_all_met_pass_without_warnings(tmp_path):
    step = _packages(make_bundle(tmp_path))
    assert step.status == "pass" and not step.warnings


@pytest.mark.parametrize(("line", "expected"), [
    ("transformers>=4.56.2", {"transformers": [">=4.56.2"]}),
    ('deepspeed>=0.18.6; extra == "deepspeed"', {"deepspeed": [">=0.18.6"]}),
    ('pytest; extra == "test"', {}),
    ('harbor>=0.13.0; python_version >= "3.12" and extra == "harbor"', {}),
    ("vllm<=0.31.0,>=0.22.0; extra == \"vllm\"", {"vllm": ["<=0.31.0,>=0.22.0"]}),
])
def test_declared_ranges(line, expected):
    assert packages.declared_ranges([line]) == expected


def test_a_cpu_torch_is_answered_with_the_cuda_build_not_the_requirements():
    """requirements.txt asks for torch>=2.6, which the CPU build satisfies: reinstalling from it changes nothing."""
    alone = packages.judge("torch>=2.6\n", {"torch": "2.13.0+cpu"}.get, cpu=False, trl_requires=[])
    assert alone.status == "fail" and "CUDA build" in alone.hint and "requirements.txt" not in alone.hint
    both = packages.judge("torch>=2.6\ntrl==1.16.0\n", {"torch": "2.13.0+cpu"}.get, cpu=False, trl_requires=[])
    assert "requirements.txt" in both.hint and "CUDA build" in both.hint
