"""advisor.bundle.consistency catches what it claims to: each test breaks one thing in a good bundle and expects that problem."""

from __future__ import annotations

import json

import jsonschema
import pytest
from gen_cases import MODELS, plan, result, target

from advisor.bundle.consistency import (
    check_bundle_files,
    load_schema,
    plan_invariants,
    shell_unquoted_expansions,
    train_constants,
)
from advisor.bundle.render import render_bundle


def _bundle(**kw):
    p = plan(**kw)
    return render_bundle(p, MODELS["qwen2.5-7b"], target("H100-80GB", p.gpus_per_node, p.nodes), result(p))


@pytest.fixture
def z3():
    return _bundle(backend="deepspeed", zero_stage=3, num_processes=8, gpus_per_node=8, method="lora")


@pytest.fixture
def server():
    return _bundle(trainer="grpo", vllm_mode="server", vllm_gpus=2, backend="ddp", num_processes=6, gpus_per_node=8,
                   micro_batch=4, grad_accum=2, num_generations=8)


def _problems(files, name, old, new):
    assert old in files[name], f"test setup: {old!r} not in {name}"
    broken = dict(files, **{name: files[name].replace(old, new, 1)})
    return check_bundle_files(broken)


def _has(problems, *words):
    return any(all(w in p for w in words) for p in problems)


def test_good_bundles_pass(z3, server):
    assert check_bundle_files(z3) == []
    assert check_bundle_files(server) == []


def test_mixed_precision_next_to_ds_config_file(z3):
    problems = _problems(z3, "accelerate.yaml", "num_machines: 1", "mixed_precision: bf16\nnum_machines: 1")
    assert _has(problems, "mixed_precision")


def test_num_processes_mismatch(z3):
    problems = _problems(z3, "accelerate.yaml", "num_processes: 8", "num_processes: 4")
    assert _has(problems, "num_processes 4")


def test_num_machines_mismatch(z3):
    problems = _problems(z3, "accelerate.yaml", "num_machines: 1", "num_machines: 2")
    assert _has(problems, "num_machines")


def test_ds_stage_mismatch(z3):
    problems = _problems(z3, "ds_config.json", '"stage": 3', '"stage": 2')
    assert _has(problems, "stage 2")


def test_ds_literal_batch_size(z3):
    problems = _problems(z3, "ds_config.json", '"train_micro_batch_size_per_gpu": "auto"',
                         '"train_micro_batch_size_per_gpu": 4')
    assert _has(problems, "train_micro_batch_size_per_gpu", "auto")


def test_ds_unknown_key(z3):
    problems = _problems(z3, "ds_config.json", '"stage": 3', '"stage": 3, "stage3_prefetch": 1')
    assert _has(problems, "ds_config.json", "stage3_prefetch")


def test_ds_offload_mismatch(z3):
    problems = _problems(z3, "ds_config.json", '"overlap_comm": true',
                         '"overlap_comm": true, "offload_optimizer": {"device": "cpu"}')
    assert _has(problems, "offload")


def test_ds_bf16_disabled_against_precision(z3):
    problems = _problems(z3, "ds_config.json", '"bf16": {\n    "enabled": "auto"', '"bf16": {\n    "enabled": false')
    assert _has(problems, "bf16.enabled")


def test_micro_batch_mismatch_between_config_and_plan_json(z3):
    problems = _problems(z3, "train.py", "'micro_batch': 4,", "'micro_batch': 2,")
    assert _has(problems, "plan.json", "micro_batch")


def test_grad_accum_not_from_config(z3):
    problems = _problems(z3, "train.py", 'gradient_accumulation_steps=CONFIG["grad_accum"]',
                         "gradient_accumulation_steps=8")
    assert _has(problems, "gradient_accumulation_steps")


def test_bf16_flag_against_precision(z3):
    problems = _problems(z3, "train.py", "BF16 = True", "BF16 = False")
    assert _has(problems, "BF16")


def test_train_py_must_compile(z3):
    problems = _problems(z3, "train.py", "def main(", "def main((")
    assert _has(problems, "does not compile")


def test_trust_remote_code_sneaking_in(z3):
    problems = _problems(z3, "train.py", '"trust_remote_code": TRUST_REMOTE_CODE', '"trust_remote_code": True')
    assert _has(problems, "trust_remote_code=True")
    problems = _problems(z3, "train.py", "AutoTokenizer.from_pretrained(MODEL_ID, trust_remote_code=TRUST_REMOTE_CODE)",
                         "AutoTokenizer.from_pretrained(MODEL_ID, trust_remote_code=True)")
    assert _has(problems, "trust_remote_code=True")
    problems = _problems(z3, "train.py", "TRUST_REMOTE_CODE = False", "TRUST_REMOTE_CODE = True")
    assert _has(problems, "TRUST_REMOTE_CODE")


def test_sp_size_mismatch():
    files = _bundle(backend="deepspeed", zero_stage=3, num_processes=8, gpus_per_node=8, sp_size=4,
                    attn="flash_attention_2", seq_len=32768)
    assert check_bundle_files(files) == []
    problems = _problems(files, "accelerate.yaml", "parallelism_config_sp_size: 4", "parallelism_config_sp_size: 2")
    assert _has(problems, "sp_size")
    pad = train_constants(files["train.py"])["CONFIG"]["pad_to_multiple_of"]
    for wrong in ("None", "2", "6"):  # none, or not a multiple of sp_size 4
        problems = _problems(files, "train.py", f"'pad_to_multiple_of': {pad},", f"'pad_to_multiple_of': {wrong},")
        assert _has(problems, "pad_to_multiple_of")
    # a multiple of sp_size other than the one written (a bundle of an earlier version: sp_size itself) is correct
    assert _problems(files, "train.py", f"'pad_to_multiple_of': {pad},", "'pad_to_multiple_of': 4,") == []
    problems = _problems(files, "accelerate.yaml", 'sp_attn_implementation: "flash_attention_2"',
                         'sp_attn_implementation: "sdpa"')
    assert _has(problems, "sp_attn_implementation")


def test_vllm_gpus_overlap(server):
    problems = _problems(server, "launch.sh", "TRAIN_GPUS=0,1,2,3,4,5", "TRAIN_GPUS=0,1,2,3,4,6")
    assert _has(problems, "both serve vLLM and train")


def test_vllm_port_mismatch(server):
    problems = _problems(server, "launch.sh", 'VLLM_SERVER_PORT="${VLLM_SERVER_PORT:-8000}"',
                         'VLLM_SERVER_PORT="${VLLM_SERVER_PORT:-8001}"')
    assert _has(problems, "VLLM_SERVER_PORT 8001 but train.py connects to 8000")


def test_a_port_the_environment_may_change_must_be_read_by_train_py_too(server):
    """launch.sh serves on VLLM_SERVER_PORT when it is set; a train.py that takes CONFIG's port alone would then
    connect to the planned port, where nothing listens."""
    problems = _problems(server, "train.py", 'os.environ.get("VLLM_SERVER_PORT", "")', 'os.environ.get("X", "")')
    assert _has(problems, "VLLM_SERVER_PORT, which train.py does not read")
    # a bundle written before the variable existed: a fixed port in both files is consistent
    old = dict(server, **{"launch.sh": server["launch.sh"].replace('VLLM_SERVER_PORT="${VLLM_SERVER_PORT:-8000}"',
                                                                   "VLLM_PORT=8000")})
    assert not [p for p in check_bundle_files(old) if "PORT" in p]


def test_unquoted_variable_in_launch(server):
    problems = _problems(server, "launch.sh", 'kill -0 "$VLLM_PID"', "kill -0 $VLLM_PID")
    assert _has(problems, "launch.sh", "unquoted $VLLM_PID")


def test_launch_must_pass_args(z3):
    problems = _problems(z3, "launch.sh", 'train.py "$@"', "train.py")
    assert _has(problems, '"$@"')


def test_missing_ds_config(z3):
    broken = {k: v for k, v in z3.items() if k != "ds_config.json"}
    assert _has(check_bundle_files(broken), "ds_config.json", "missing")


def test_slurm_nodes_mismatch():
    files = _bundle(backend="deepspeed", zero_stage=3, num_processes=16, gpus_per_node=8, nodes=2)
    assert check_bundle_files(files) == []
    problems = _problems(files, "slurm.sbatch", "#SBATCH --nodes=2", "#SBATCH --nodes=3")
    assert _has(problems, "--nodes=3")
    problems = _problems(files, "slurm.sbatch", "#SBATCH --gres=gpu:8", "#SBATCH --gres=gpu:4")
    assert _has(problems, "--gres")


def test_requirements_must_match(z3):
    problems = _problems(z3, "requirements.txt", "deepspeed==0.19.8\n", "")
    assert _has(problems, "deepspeed")
    problems = _problems(z3, "requirements.txt", "trl==1.16.0", "trl==0.19.0")
    assert _has(problems, "trl==1.16.0")


# ------------------------------------------------------------------------------------------------- shell lint

@pytest.mark.parametrize("src", [
    'echo "$X"', 'cd "$(dirname "${BASH_SOURCE[0]}")"', "echo '$NOT_EXPANDED'", 'x="$((SECONDS + 5))"',
    "(( SECONDS >= deadline ))", '# a comment with $X', 'A=(a b "$c")', '"${A[@]}" "$@"',
    'y="$(cmd "$a" | tail -n 1)"', 'case " $* " in\n  *" --x "*) ;;\nesac',
])
def test_shell_lint_accepts(src):
    assert shell_unquoted_expansions(src) == []


@pytest.mark.parametrize("src", [
    "echo $X", "cd ${HOME}", "x=$(date)", "run $@", 'echo "ok" $BAD', 'y="$(cmd $a)"',
])
def test_shell_lint_flags(src):
    assert shell_unquoted_expansions(src)


# ------------------------------------------------------------------------------------------------ schemas

@pytest.mark.parametrize("name", ["ds_config.schema.json", "accelerate.schema.json"])
def test_schemas_are_valid(name):
    jsonschema.Draft202012Validator.check_schema(load_schema(name))


def test_ds_schema_rejects_stage4_and_gpu_offload():
    validator = jsonschema.Draft202012Validator(load_schema("ds_config.schema.json"))
    base = json.loads(_bundle(backend="deepspeed", zero_stage=2, num_processes=2, gpus_per_node=2)["ds_config.json"])
    assert validator.is_valid(base)
    bad = json.loads(json.dumps(base))
    bad["zero_optimization"]["stage"] = 4  # DeepSpeedZeroConfig accepts 0-3
    assert not validator.is_valid(bad)
    bad = json.loads(json.dumps(base))
    bad["zero_optimization"]["offload_optimizer"] = {"device": "gpu"}  # OffloadDeviceEnum: none, cpu, nvme
    assert not validator.is_valid(bad)
    bad = json.loads(json.dumps(base))
    bad["zero_optimization"]["offload_param"] = {"device": "cpu"}  # parameter offload is ZeRO-3 only
    assert not validator.is_valid(bad)


def test_accelerate_schema_rejects_unknown_top_level_key():
    validator = jsonschema.Draft202012Validator(load_schema("accelerate.schema.json"))
    doc = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU", "num_processes": 2,
           "num_machines": 1, "machine_rank": 0, "mixed_precision": "bf16"}
    assert validator.is_valid(doc)
    assert not validator.is_valid(dict(doc, fsdp_version=2))  # ClusterConfig raises on unknown keys
    assert not validator.is_valid(dict(doc, mixed_precision=False))  # YAML's bare `no`


# ------------------------------------------------------------------------------------------------ invariants

def test_plan_invariants_catch_inconsistent_plans():
    assert plan_invariants(plan()) == []
    assert plan_invariants(plan(backend="single", num_processes=2, gpus_per_node=2))
    assert plan_invariants(plan(offload="all", backend="deepspeed", zero_stage=2, num_processes=2, gpus_per_node=2))
    assert plan_invariants(plan(trainer="grpo", micro_batch=1, grad_accum=1, num_generations=8,
                                max_completion_len=512))
    assert plan_invariants(plan(cp_size=2, backend="fsdp2", num_processes=2, gpus_per_node=2, attn="flash_attention_2"))
    assert plan_invariants(plan(trainer="grpo", vllm_mode="server", vllm_gpus=1, num_processes=1, gpus_per_node=1,
                                num_generations=2, micro_batch=2))
