"""bench/host_probe.py on the CPU: what a benchmark record's host_probe holds."""

from __future__ import annotations

import pytest

from bench import host_probe as HP


def test_host_probe_times_each_kind_of_op():
    torch = pytest.importorskip("torch")
    host = HP.host_probe(torch, ops=200, python_calls=2000)
    assert set(host) == {"nograd_op_us", "autograd_op_us", "python_call_us"}
    assert all(v > 0 for v in host.values())
    # a tensor op dispatched through torch costs more than a bare Python call
    assert host["nograd_op_us"] > host["python_call_us"]


def test_the_worker_records_the_host_before_and_after_the_steps():
    import inspect

    from bench import worker as W
    src = inspect.getsource(W._run)
    # the probe brackets trainer.train(): one reading before, one after (the host drifts on a shared machine)
    before, train, after = (src.index('res["host_probe"] = {"before"'), src.index("trainer.train()"),
                            src.index('res["host_probe"]["after"]'))
    assert before < train < after


def test_the_cpus_a_row_could_use_are_recorded():
    torch = pytest.importorskip("torch")
    cpus = HP.host_cpus(torch)
    assert set(cpus) == {"logical_cpus", "usable_cpus", "torch_threads", "omp_num_threads", "cpu_model", "cpu_mhz"}
    assert 1 <= cpus["usable_cpus"] <= cpus["logical_cpus"] and cpus["torch_threads"] >= 1
    import inspect

    from bench import worker as W
    assert 'res["host_cpus"] = host_cpus(torch)' in inspect.getsource(W._run)


def test_the_cpu_model_is_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\ncpu MHz\t\t: 2000.000\n\n"
                    "processor\t: 1\nmodel name\t: other\ncpu MHz\t\t: 3800.5\n")
    assert HP.cpu_model(str(info)) == {"cpu_model": "Intel(R) Xeon(R) Platinum 8480+", "cpu_mhz": 2000.0}
    info.write_text("processor\t: 0\ncpu MHz\t\t: fast\n")
    assert HP.cpu_model(str(info)) == {"cpu_model": None, "cpu_mhz": None}
    assert HP.cpu_model(str(tmp_path / "missing")) == {"cpu_model": None, "cpu_mhz": None}
