"""`--hardware FILE` values of the wrong JSON type, or that no real host has. `probe --json` writes integers as JSON
integers, switches as true/false and versions as strings; a value of another type (a number in quotes, true where a
count goes, 8.0e10 where bytes go, "false" where a switch goes) is a usage error naming the field, never read as
something else (pydantic's lax mode reads "false" as False and true as 1). Host RAM and core counts beyond any
machine are refused as GPU memory is. Every report the probe itself writes still loads."""

from __future__ import annotations

import json

import pytest

import hw_probe
from advisor.cli import main
from hw_probe.fake import FIXTURE_CONTEXT, fixture_report


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))


def gpu0(**values):
    return lambda d: d["gpus"][0].update(values)


def host(**values):
    return lambda d: d["host"].update(values)


WRONG_TYPES = [
    (gpu0(memory_total_bytes="85520809984"), "gpus.0.memory_total_bytes"),
    (gpu0(memory_total_bytes=85520809984.0), "gpus.0.memory_total_bytes"),
    (gpu0(memory_total_bytes=True), "gpus.0.memory_total_bytes"),
    (gpu0(mig_mode="false"), "gpus.0.mig_mode"),
    (gpu0(bf16=1), "gpus.0.bf16"),
    (gpu0(pcie_gen_max="5"), "gpus.0.pcie_gen_max"),
    (gpu0(power_limit_watts="700"), "gpus.0.power_limit_watts"),
    (gpu0(index="0"), "gpus.0.index"),
    (lambda d: d["links"][0].update(nvlink_count="18"), "links.0.nvlink_count"),
    (lambda d: d["links"][0].update(p2p="no"), "links.0.p2p"),
    (host(cpu_cores=True), "host.cpu_cores"),
    (host(ram_total_bytes="2164349915136"), "host.ram_total_bytes"),
    (lambda d: d["cluster"].update(slurm="true", slurm_nodes=2), "cluster.slurm"),
    (lambda d: d["cluster"].update(slurm=True, slurm_nodes=2.0), "cluster.slurm_nodes"),
    (lambda d: d.update(nvml_available="yes"), "nvml_available"),
    (lambda d: d["software"].update(torch=2.5), "software.torch"),
]

IMPOSSIBLE_HOSTS = [
    (host(ram_total_bytes=10**30), "host.ram_total_bytes is 1000000000000000000000000000000, above 1 PiB"),
    (host(ram_available_bytes=10**20), "host.ram_available_bytes"),
    (host(ram_available_bytes=3 * 2**40, ram_total_bytes=2 * 2**40), "more than host.ram_total_bytes"),
    (host(cpu_cores=10**9), "host.cpu_cores is 1000000000"),
    (host(numa_nodes=10**9), "host.numa_nodes"),
]


def usage_error(capsys, path: str, field: str) -> None:
    rc = main(["estimate", "--model", "1.5B", "--hardware", path])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    assert field in lines[0], err


@pytest.mark.parametrize(("change", "field"), WRONG_TYPES + IMPOSSIBLE_HOSTS)
def test_a_report_value_of_the_wrong_type_or_size_names_its_field(edited_report, capsys, change, field):
    usage_error(capsys, edited_report(change), field)


@pytest.mark.parametrize("name", sorted(FIXTURE_CONTEXT))
def test_every_report_the_probe_writes_loads_back(name):
    report = fixture_report(name)
    data = json.loads(report.to_json())
    assert hw_probe.report_from_data(data, where=f"{name}.json") == report


def test_a_report_with_large_but_real_limits_loads(edited_report, capsys):
    # shm and the locked-memory limit may be any size an administrator sets ("unlimited" written as a number)
    path = edited_report(host(shm_bytes=2**62, locked_memory_limit_bytes=2**63 - 1))
    assert main(["estimate", "--model", "1.5B", "--hardware", path]) == 0, capsys.readouterr().err
