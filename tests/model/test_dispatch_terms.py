"""The dispatch probe's records and what bench/dispatch_terms.py reads off them (bench/results/dispatch-probe-*.json).
The speed model does not use these values yet: with them its fit moved OVERLAP_P and DeepSpeed's hook constants in a
way that broke the ZeRO twins' ordering (tests/model/test_accuracy.py, branch dispatch-probe); until that is explained
they are data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import dispatch_terms as D

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cases():
    return D.load()


def test_derivation_reads_the_committed_probes(cases):
    assert len(cases) >= 15 and {c["method"] for c in cases} >= {"full", "lora", "full-liger"}
    got = D.derived(cases)
    assert got["KERNELS_FWD_PER_LAYER"] == 40  # transformers' Llama/Qwen2 layer: the count the model uses
    assert 15e-6 < got["LAUNCH_SECONDS"] < 40e-6
    assert 1e-3 < got["CKPT_LAYER_SECONDS"] < 5e-3 and 0 < got["CKPT_FORWARD_SHARE"] < 1


def test_kernel_line_recovers_known_counts():
    hf, hb = D._head_kernels_at_one_tile()

    def case(layers, per=(40, 88), fixed=(95, 75)):
        f = fixed[0] + hf + per[0] * layers
        b = fixed[1] + hb + per[1] * layers
        tiny = {"forward": {"kernels": f}, "step": {"kernels": f + b}, "forward_s": 1.0, "step_s": 2.0}
        return {"model": "qwen2.5-x", "method": "full", "layers": layers, "no_ckpt": {"tiny": tiny}}

    got = D.kernel_counts([case(24), case(28), case(36)])
    assert (got["KERNELS_FWD_PER_LAYER"], got["KERNELS_BWD_PER_LAYER"], got["MICRO_BATCH_KERNELS"]) == (40, 88, (95, 75))


def test_terms_cli_takes_no_arguments():
    done = subprocess.run([sys.executable, "-m", "bench.dispatch_terms", "--bogus"], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
