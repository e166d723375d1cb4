"""Host limits (over a made-up /proc and /sys tree), installed versions, and the SLURM / torchrun context."""

from __future__ import annotations

import json
import resource
from importlib import metadata
from pathlib import Path

import pytest

from hw_probe.cluster import parse_gpu_count, read_cluster
from hw_probe.host import read_host
from hw_probe.software import PACKAGES, read_software

GIB = 1 << 30
KIB = 1024


def make_root(tmp_path: Path, *, mem_total_kb: int = 32 * 1024 * 1024, mem_available_kb: int = 20 * 1024 * 1024,
              numa: int = 2, cgroup: dict[str, str] | None = None) -> Path:
    root = tmp_path / "root"
    (root / "proc").mkdir(parents=True)
    (root / "proc/meminfo").write_text(
        f"MemTotal:       {mem_total_kb} kB\nMemFree:        1234 kB\nMemAvailable:   {mem_available_kb} kB\n")
    nodes = root / "sys/devices/system/node"
    nodes.mkdir(parents=True)
    for n in range(numa):
        (nodes / f"node{n}").mkdir()
    (nodes / "possible").write_text("0-1\n")  # not a node folder
    (root / "dev/shm").mkdir(parents=True)
    for name, text in (cgroup or {}).items():
        path = root / "sys/fs/cgroup" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# ---- host ----

def test_meminfo_numa_and_disk(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    out = tmp_path / "runs" / "new"  # does not exist yet
    info, notes = read_host(str(out), root=str(root), cpu_affinity=lambda: 12)
    assert info.ram_total_bytes == 32 * GIB  # /proc/meminfo kB are KiB
    assert info.ram_available_bytes == 20 * GIB
    assert info.numa_nodes == 2
    assert info.cpu_cores == 12
    assert info.output_dir == str(out)
    assert info.disk_free_bytes is not None and info.disk_free_bytes > 0
    assert info.shm_bytes is not None
    assert notes == ()


def test_container_memory_limit_caps_ram(tmp_path: Path) -> None:
    root = make_root(tmp_path, cgroup={"memory.max": f"{8 * GIB}\n", "memory.current": f"{3 * GIB}\n"})
    info, notes = read_host(str(tmp_path), root=str(root), cpu_affinity=lambda: 4)
    assert info.ram_total_bytes == 8 * GIB
    assert info.ram_available_bytes == 5 * GIB  # limit minus what the cgroup already uses
    assert any("container memory limit 8.0 GiB" in n for n in notes)


@pytest.mark.parametrize("files", [
    {"memory.max": "max\n"},
    {"memory/memory.limit_in_bytes": "9223372036854771712\n"},  # cgroup v1's "no limit"
])
def test_unlimited_cgroup_changes_nothing(tmp_path: Path, files: dict[str, str]) -> None:
    root = make_root(tmp_path, cgroup=files)
    info, notes = read_host(str(tmp_path), root=str(root), cpu_affinity=lambda: 4)
    assert info.ram_total_bytes == 32 * GIB and notes == ()


def test_cgroup_v1_limit(tmp_path: Path) -> None:
    root = make_root(tmp_path, cgroup={"memory/memory.limit_in_bytes": f"{16 * GIB}\n",
                                       "memory/memory.usage_in_bytes": f"{1 * GIB}\n"})
    info, _ = read_host(str(tmp_path), root=str(root), cpu_affinity=lambda: 4)
    assert (info.ram_total_bytes, info.ram_available_bytes) == (16 * GIB, 15 * GIB)


def test_cpu_quota_lowers_core_count(tmp_path: Path) -> None:
    root = make_root(tmp_path, cgroup={"cpu.max": "250000 100000\n"})  # 2.5 CPUs
    info, notes = read_host(str(tmp_path), root=str(root), cpu_affinity=lambda: 64)
    assert info.cpu_cores == 3
    assert any("2.5 CPUs" in n for n in notes)


def test_missing_linux_files_degrade_to_none(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    info, notes = read_host(str(tmp_path), root=str(empty), cpu_affinity=lambda: None)
    assert (info.ram_total_bytes, info.ram_available_bytes, info.numa_nodes, info.cpu_cores, info.shm_bytes) == (
        None, None, None, None, None)
    assert info.disk_free_bytes is not None
    joined = " ".join(notes)
    for words in ("host RAM", "NUMA", "CPU core", "/dev/shm"):
        assert words in joined


def test_memlock_unlimited_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_root(tmp_path)
    monkeypatch.setattr(resource, "getrlimit", lambda _: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    info, _ = read_host(str(tmp_path), root=str(root), cpu_affinity=lambda: 1)
    assert info.locked_memory_limit_bytes is None
    monkeypatch.setattr(resource, "getrlimit", lambda _: (64 * KIB, 64 * KIB))
    info, _ = read_host(str(tmp_path), root=str(root), cpu_affinity=lambda: 1)
    assert info.locked_memory_limit_bytes == 64 * KIB


def test_memlock_matches_this_process(tmp_path: Path) -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    info, _ = read_host(str(tmp_path))
    assert info.locked_memory_limit_bytes == (None if soft == resource.RLIM_INFINITY else soft)


# ---- software ----

def test_versions_from_metadata() -> None:
    installed = {"torch": "2.13.0", "liger_kernel": "0.8.5", "flash_attn": "2.8.3"}

    def lookup(name: str) -> str:
        if name in installed:
            return installed[name]
        raise metadata.PackageNotFoundError(name)

    versions = read_software(lookup).by_package()
    assert versions["torch"] == "2.13.0"
    assert versions["liger-kernel"] == "0.8.5"  # found under its underscore spelling
    assert versions["flash-attn"] == "2.8.3"
    assert versions["trl"] is None
    assert list(versions) == list(PACKAGES)


def test_broken_metadata_counts_as_missing() -> None:
    def lookup(name: str) -> str:
        raise KeyError("Version")

    assert set(read_software(lookup).by_package().values()) == {None}


def test_real_installed_versions() -> None:
    versions = read_software().by_package()
    for key in ("torch", "trl", "accelerate", "transformers"):
        try:
            expected = metadata.version(key)
        except metadata.PackageNotFoundError:
            expected = None
        assert versions[key] == expected


# ---- cluster ----

@pytest.mark.parametrize(("value", "count"), [
    ("8", 8), ("h100:8", 8), ("gpu:h100:4", 4), ("a100:2,v100:2", 4), ("4(x2)", 4), ("h100", None), ("", None),
])
def test_parse_gpu_count(value: str, count: int | None) -> None:
    assert parse_gpu_count(value) == count


def test_slurm_job() -> None:
    info, notes = read_cluster({
        "SLURM_JOB_ID": "1234", "SLURM_NNODES": "4", "SLURM_GPUS_PER_NODE": "h100:8", "SLURM_NODEID": "2",
        "SLURM_JOB_NODELIST": "gpu-[001-004]",
    })
    assert (info.slurm, info.slurm_job_id, info.slurm_nodes, info.slurm_gpus_per_node, info.slurm_node_rank,
            info.slurm_nodelist) == (True, "1234", 4, 8, 2, "gpu-[001-004]")
    assert info.torchrun is False and notes == ()


def test_slurm_fallback_names() -> None:
    info, _ = read_cluster({"SLURM_JOBID": "77", "SLURM_JOB_NUM_NODES": "2", "SLURM_GPUS_ON_NODE": "4",
                            "SLURM_NODELIST": "n[1-2]"})
    assert (info.slurm_job_id, info.slurm_nodes, info.slurm_gpus_per_node, info.slurm_nodelist) == (
        "77", 2, 4, "n[1-2]")


def test_slurm_garbage_is_noted_not_raised() -> None:
    info, notes = read_cluster({"SLURM_JOB_ID": "9", "SLURM_NNODES": "two", "SLURM_GPUS_PER_NODE": "(null)",
                                "SLURM_NODEID": "-1"})
    assert info.slurm is True
    assert (info.slurm_nodes, info.slurm_gpus_per_node, info.slurm_node_rank) == (None, None, None)
    assert len(notes) == 2  # SLURM_NNODES and SLURM_NODEID; "(null)" is SLURM's way of saying unset


def test_torchrun() -> None:
    info, notes = read_cluster({"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8", "RANK": "9", "MASTER_ADDR": "node-a"})
    assert (info.torchrun, info.world_size, info.local_world_size, info.rank, info.master_addr) == (
        True, 16, 8, 9, "node-a")
    assert info.slurm is False and notes == ()


def test_no_launcher() -> None:
    info, notes = read_cluster({"HOME": "/root"})
    assert info.slurm is False and info.torchrun is False and notes == ()


@pytest.mark.parametrize("env", [
    {"SLURM_JOB_ID": "1", "SLURM_NNODES": "99999999999999999999999"},
    {"SLURM_JOB_ID": "1", "SLURM_NNODES": "0"},
    {"SLURM_JOB_ID": "1", "SLURM_NODEID": "999999999"},
    {"SLURM_JOB_ID": "1", "SLURM_GPUS_PER_NODE": "h100:99999999999"},
    {"LOCAL_WORLD_SIZE": "999999999"},
    {"WORLD_SIZE": "99999999999999"},
    {"WORLD_SIZE": "2", "RANK": "99999999999999"},
])
def test_what_the_probe_writes_loads_back(env) -> None:
    """A launcher variable out of the bounds `--hardware` holds a report to is dropped with a note: the probe never
    writes a file its own loader refuses (hw_probe.check_plausible)."""
    from hw_probe import check_plausible
    from hw_probe.model import HardwareReport

    info, notes = read_cluster(env)
    assert len(notes) == 1 and "ignored" in notes[0]
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "hardware" / "h100_sxm_x8_nvlink.json"
    data = json.loads(fixture.read_text())
    report = HardwareReport.model_validate({**data, "cluster": info.model_dump()})
    assert check_plausible(report) is None
