"""check --bundle reads what launch.sh tells accelerate: `--num_processes 4` on the accelerate launch line overrides
accelerate.yaml's 8 (accelerate's command-line flags win over its config file), and the report's last line counts
every finding the exit code counts."""

from __future__ import annotations

import pytest

from advisor.bundle.generate import generate
from advisor.check import check_bundle, render_bundle_check
from advisor.core.request import Request

LINE = "LAUNCH=(accelerate launch --config_file accelerate.yaml)"


@pytest.mark.parametrize("flag", ["--num_processes 4", "--num_processes=4", "--num-processes 4"])
def test_a_launch_flag_overrides_the_yaml(tmp_path, flag):
    out = tmp_path / "b"
    generate(Request(model="8B", gpu="H100-80GB", gpus=8), out=str(out))
    text = (out / "launch.sh").read_text()
    assert LINE in text
    (out / "launch.sh").write_text(text.replace(LINE, LINE[:-1] + f" {flag})"))
    report = check_bundle(str(out))
    assert report.plan.num_processes == 4
    failed = {f.id for f in report.findings if f.failed}
    # half the ranks: FSDP2's shards double, past the planner's limit (MEM002) or the GPU (MEM001)
    assert "PLAN001" in failed and failed & {"MEM001", "MEM002"}, failed
    text = render_bundle_check(report)
    assert "launch.sh's --num_processes" in text
    assert text.rstrip().splitlines()[-1].startswith(f"in all: {report.counts()['error']} error(s)")


@pytest.mark.parametrize(("added", "read"), [
    ("LAUNCH+=(--num_processes 4)", 4),  # an array line after the first, as multi-node bundles write them
    ("# LAUNCH+=(--num_processes 4)  the old count", None),
    ('echo "accelerate launch --num_processes 4 would halve the ranks" >&2', None),
])
def test_launch_flags_are_the_arguments_the_script_gives(tmp_path, added, read):
    """What accelerate is given, wherever the script adds it to the command; the same words in a comment or a
    message are not given to it."""
    out = tmp_path / "b"
    generate(Request(model="8B", gpu="H100-80GB", gpus=8), out=str(out))
    text = (out / "launch.sh").read_text()
    assert LINE in text
    (out / "launch.sh").write_text(text.replace(LINE, f"{LINE}\n{added}"))
    report = check_bundle(str(out))
    assert report.plan.num_processes == (read or 8)
    assert ("launch.sh's --num_processes" in render_bundle_check(report)) is (read is not None)


@pytest.mark.parametrize("backend, file, old, new, key", [
    ("deepspeed", "ds_config.json", '"reduce_bucket_size": "auto"', '"reduce_bucket_size": 5000000000',
     "zero_optimization.reduce_bucket_size"),
    ("fsdp2", "accelerate.yaml", "fsdp_reshard_after_forward: true", "fsdp_reshard_after_forward: false",
     "fsdp_config.fsdp_reshard_after_forward"),
])
def test_a_memory_knob_the_estimate_does_not_read_is_said(tmp_path, backend, file, old, new, key):
    out = tmp_path / "b"
    generate(Request(model="8B", gpu="H100-80GB", gpus=8, backend=backend, zero=3 if backend == "deepspeed" else None),
             out=str(out))
    assert not [a for a in check_bundle(str(out)).assumptions if "memory estimate is for" in a]  # as written
    text = (out / file).read_text()
    assert old in text
    (out / file).write_text(text.replace(old, new))
    said = [a for a in check_bundle(str(out)).assumptions if "memory estimate is for" in a]
    assert len(said) == 1 and key in said[0]
