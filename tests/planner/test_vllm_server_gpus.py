"""The vLLM server's GPUs all run it. One `vllm serve` generates for the whole run (TRL's client connects the main
process to one base URL: trl/generation/vllm_generation.py), and a dense model's server is one tensor-parallel group
(vLLM >= 0.14 refuses --data-parallel-size > 1 for dense models: trl/scripts/vllm_serve.py data_parallel_size help),
so a --vllm-gpus count that is no tensor-parallel size vLLM accepts for the model leaves reserved GPUs idle: refused
when pinned (exit 2), never chosen by the planner, found by `check --bundle` (VLLM012). A multi-node server plan says
how many GPUs its other nodes leave idle."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import shutil
from pathlib import Path

import pytest

from advisor.bundle.generate import generate
from advisor.catalog import resolve_model
from advisor.check import check_bundle
from advisor.cli import main
from advisor.core.errors import AdvisorError
from advisor.core.request import Request
from advisor.model.vllm_memory import server_parallelism, usable_server_gpus
from advisor.resolve import resolve_target
from advisor.search import decide, structures

REPRO = ["--model", "qwen2.5-7b", "--trainer", "grpo", "--method", "full", "--vllm", "server", "--gpus", "8",
         "--gpu", "H100-80GB"]


def _vllm_accepts(model, tp: int) -> bool:
    """vLLM's own conditions, written out apart from the code under test: the attention heads divide
    (ModelConfig.verify_with_parallel_config), the KV heads split or replicate evenly (QKVParallelLinear: divide()),
    and the dense MLP's column-parallel width divides (ColumnParallelLinear: divide())."""
    kv_ok = model.kv_heads % tp == 0 or tp % model.kv_heads == 0
    return model.heads % tp == 0 and kv_ok and (model.is_moe or model.intermediate % tp == 0)


def _cli(*argv: str) -> tuple[int, str, str]:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def test_usable_counts_are_the_tensor_parallel_sizes_vllm_accepts():
    assert usable_server_gpus(resolve_model("qwen2.5-7b"), 7) == [1, 2, 4]  # 7 divides 28 heads, not 4 KV heads
    assert usable_server_gpus(resolve_model("qwen2.5-0.5b"), 7) == [1, 2]  # 14 heads, 2 KV heads: 7 fails the KV
    assert usable_server_gpus(resolve_model("qwen2.5-1.5b"), 11) == [1, 2, 4]  # 6 splits 12 heads, not 8960 MLP
    assert usable_server_gpus(resolve_model("qwen3-30b-a3b"), 7) == list(range(1, 8))  # MoE: replicas fill the rest


@pytest.mark.parametrize("gpus", [3, 5, 6, 7])
def test_a_pinned_count_the_server_cannot_fill_is_a_usage_error(gpus):
    with pytest.raises(AdvisorError) as err:
        decide(Request(model="qwen2.5-7b", trainer="grpo", vllm="server", vllm_gpus=gpus, gpus=8, gpu="H100-80GB"))
    used = max(n for n in (1, 2, 4) if gpus % n == 0)
    assert err.value.exit_code == 2
    assert err.value.message.startswith(f"--vllm-gpus {gpus} leaves {gpus - used} of its GPUs idle: ")
    assert "28 attention heads and 4 KV heads" in err.value.message
    assert err.value.hint.startswith("use --vllm-gpus 1, 2 or 4")


def test_the_reported_repro_exits_2_with_one_line_and_a_hint_and_writes_nothing(tmp_path):
    for command in (["generate", *REPRO, "--vllm-gpus", "3", "--out", str(tmp_path / "b")],
                    ["check", *REPRO, "--vllm-gpus", "3"], ["estimate", *REPRO, "--vllm-gpus", "3"]):
        rc, _, err = _cli(*command)
        lines = err.strip().splitlines()
        assert rc == 2, (command, err)
        assert len(lines) == 2 and lines[0].startswith("error: --vllm-gpus 3 leaves 2 of its GPUs idle")
        assert lines[1] == "hint: use --vllm-gpus 1, 2 or 4, or drop --vllm-gpus and the planner chooses"
    assert not (tmp_path / "b").exists()


def test_the_mlp_width_is_named_where_it_rules_a_count_out():
    with pytest.raises(AdvisorError) as err:
        decide(Request(model="qwen2.5-1.5b", trainer="grpo", vllm_gpus=6, gpus=8, gpu="H100-80GB"))
    assert "MLP width 8960" in err.value.message and err.value.hint.startswith("use --vllm-gpus 1, 2 or 4")


@pytest.mark.parametrize(("model", "gpus", "tp", "dp"), [("qwen2.5-7b", 1, 1, 1), ("qwen2.5-7b", 2, 2, 1),
                                                         ("qwen2.5-7b", 4, 4, 1), ("qwen3-30b-a3b", 3, 1, 3)])
def test_usable_pinned_counts_are_planned_and_filled(tmp_path, model, gpus, tp, dp):
    method = "lora" if "30b" in model else "full"
    rc, _, err = _cli("generate", "--model", model, "--trainer", "grpo", "--method", method, "--vllm", "server",
                      "--vllm-gpus", str(gpus), "--gpus", "8", "--gpu", "H100-80GB", "--out", str(tmp_path / "b"))
    assert rc == 0, err
    launch = (tmp_path / "b" / "launch.sh").read_text(encoding="utf-8")
    assert re.search(r"^VLLM_GPUS=(\S+)", launch, re.M).group(1).count(",") + 1 == gpus
    assert f"--tensor-parallel-size {tp} --data-parallel-size {dp}" in launch


@pytest.mark.parametrize("model", ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b", "llama-3.1-8b",
                                   "gemma-2-9b", "qwen3-30b-a3b"])
@pytest.mark.parametrize("gpus", [2, 3, 4, 5, 6, 8, 12, 16])
def test_the_planner_only_chooses_counts_the_server_fills(model, gpus):
    """Every server count the search estimates runs tensor-parallel x data-parallel on all of its GPUs, at a
    tensor-parallel size vLLM accepts. Before: only the heads were checked, so Qwen2.5-1.5B on 12 GPUs got servers
    of 3 and 6 (TP 3 fails its 2 KV heads, TP 6 its MLP width 8960)."""
    req = Request(model=model, trainer="grpo", vllm="server", gpus=gpus, gpu="H100-80GB")
    spec, target = resolve_model(model), resolve_target(req)
    counts = sorted({p.vllm_gpus for p in structures(req, spec, target)})
    assert counts and counts[0] == 1
    for plan in (p for p in structures(req, spec, target) if p.method == "lora"):
        tp, dp = server_parallelism(plan, spec, target)
        assert tp * dp == plan.vllm_gpus and _vllm_accepts(spec, tp), (model, gpus, plan.vllm_gpus, tp, dp)


def test_the_planner_takes_a_wanted_count_down_to_one_the_server_fills():
    req = Request(model="qwen2.5-7b", trainer="grpo", vllm="server", gpus=6, gpu="H100-80GB")
    counts = {p.vllm_gpus for p in structures(req, resolve_model("qwen2.5-7b"), resolve_target(req))}
    assert counts == {1, 2}  # half of 6 is 3, which 4 KV heads do not split: 2


def _server_bundle(root: Path) -> Path:
    rc, _, err = _cli("generate", *REPRO, "--vllm-gpus", "2", "--out", str(root / "b2"))
    assert rc == 0, err
    return root / "b2"


def _edit(path: Path, **values: str) -> None:
    text = path.read_text(encoding="utf-8")
    for name, value in values.items():
        text, n = re.subn(rf"^{name}=.*$", f"{name}={value}", text, flags=re.M)
        assert n == 1, name
    path.write_text(text, encoding="utf-8")


def test_check_bundle_finds_server_gpus_edited_to_a_count_it_cannot_fill(tmp_path):
    bundle = _server_bundle(tmp_path)
    assert not [f for f in check_bundle(str(bundle)).errors if f.id == "VLLM012"]
    edited = tmp_path / "edited"
    shutil.copytree(bundle, edited)
    _edit(edited / "launch.sh", VLLM_GPUS="5,6,7", TRAIN_GPUS="0,1,2,3,4")
    found = [f for f in check_bundle(str(edited)).errors if f.id == "VLLM012"]
    assert found and "on 2 of its 3 GPUs, leaving 1 idle" in found[0].message
    assert "1, 2 or 4 GPUs" in found[0].fix


def test_check_bundle_finds_the_reported_bundle(tmp_path):
    """The reported bundle as the old generator wrote it: VLLM_GPUS=5,6,7 with tensor-parallel 1, 5 training GPUs."""
    bundle = _server_bundle(tmp_path)
    _edit(bundle / "launch.sh", VLLM_GPUS="5,6,7", TRAIN_GPUS="0,1,2,3,4")
    launch = bundle / "launch.sh"
    launch.write_text(launch.read_text(encoding="utf-8").replace("--tensor-parallel-size 2", "--tensor-parallel-size 1"),
                      encoding="utf-8")
    acc = bundle / "accelerate.yaml"
    acc.write_text(re.sub(r"^num_processes: 6", "num_processes: 5", acc.read_text(encoding="utf-8"), flags=re.M),
                   encoding="utf-8")
    rc, out, _ = _cli("check", "--bundle", str(bundle))
    assert rc == 1 and "VLLM012" in out and "on 1 of its 3 GPUs, leaving 2 idle" in out


def test_a_multi_node_server_plan_states_its_idle_gpus(tmp_path):
    req = Request(model="qwen2.5-7b", trainer="grpo", method="lora", vllm="server", vllm_gpus=4, nodes=4, gpus=8,
                  gpu="H100-80GB")
    outcome = generate(req, out=str(tmp_path / "mn"))
    assert any(n.startswith("vLLM server: 12 of the job's 32 GPUs stay idle (4 per node on nodes 1 to 3)")
               for n in outcome.notes), outcome.notes
    readme = (tmp_path / "mn" / "README.md").read_text(encoding="utf-8")
    assert "Idle GPUs: 12 of the job's 32 (GPUs 4,5,6,7 of nodes 1 to 3)." in readme
    assert "stay idle, 12 of the job's 32 GPUs" in (tmp_path / "mn" / "launch.sh").read_text(encoding="utf-8")
    one = generate(dataclasses.replace(req, nodes=1), out=str(tmp_path / "one"))
    assert not [n for n in one.notes if n.startswith("vLLM server: ")]
    assert "Idle GPUs" not in (tmp_path / "one" / "README.md").read_text(encoding="utf-8")
