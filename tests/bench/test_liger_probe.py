"""bench/liger_probe.py on the CPU: the eager rows it times (Liger's need CUDA), each with both host rates."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None or
                                importlib.util.find_spec("transformers") is None,
                                reason="needs torch and transformers")


def test_eager_ops_are_timed_per_call_on_the_cpu(tmp_path):
    from bench import liger_probe as L

    out = tmp_path / "probe.json"
    assert L.main(["--out", str(out), "--hidden", "64", "--tokens", "32", "--calls", "20"]) == 0
    doc = json.loads(out.read_text())
    rows = doc["rows"]
    assert {(r["op"], r["impl"]) for r in rows} == {("rmsnorm", "eager"), ("swiglu", "eager"), ("rope", "eager")}
    for r in rows:
        # both host rates are measured (their ratio is the machine's business: no timing is asserted)
        assert r["host_forward_nograd_s"] > 0 and r["host_forward_backward_s"] > 0
        assert r["gpu_forward_backward_s"] is None and r["hidden"] == 64
    assert doc["device"] == "cpu" and doc["versions"]["torch"]


def test_bad_sizes_are_a_usage_error(capsys):
    from bench import liger_probe as L

    for argv in (["--hidden", "abc"], ["--hidden", "100"], ["--tokens", "0"]):
        with pytest.raises(SystemExit) as exc:
            L.main(["--out", "x.json", *argv])
        assert exc.value.code == 2
