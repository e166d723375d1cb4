"""Rendered bundles for a matrix of plans: every bundle passes the consistency checks, and each case's files say
what that case needs (expectations written from the library facts, not copied from the generator's output)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess

import pytest
import yaml
from gen_cases import MODELS, plan, result, target

from advisor import __version__
from advisor.bundle.consistency import check_bundle_files, train_constants
from advisor.bundle.render import default_out_dir, render_bundle
from advisor.core.request import Request

# (id, plan overrides, model, gpu)
CASES = [
    ("sft-full-single", dict(), "llama-3.1-8b", "H100-80GB"),
    ("sft-lora-ddp", dict(method="lora", backend="ddp", num_processes=4, gpus_per_node=4), "qwen2.5-7b", "H100-80GB"),
    ("sft-qlora-single-4090", dict(method="qlora", seq_len=1024, micro_batch=1, grad_accum=16), "llama-3.1-8b",
     "RTX-4090"),
    ("sft-qlora-ddp-4090-nop2p", dict(method="qlora", backend="ddp", num_processes=2, gpus_per_node=2),
     "llama-3.1-8b", "RTX-4090"),
    ("sft-full-z1", dict(backend="deepspeed", zero_stage=1, num_processes=8, gpus_per_node=8), "qwen2.5-7b",
     "H100-80GB"),
    ("sft-full-z2-optoffload", dict(backend="deepspeed", zero_stage=2, offload="optimizer", num_processes=8,
                                    gpus_per_node=8), "qwen2.5-7b", "A100-80GB"),
    ("sft-full-z3", dict(backend="deepspeed", zero_stage=3, num_processes=8, gpus_per_node=8), "llama-3.1-70b",
     "H100-80GB"),
    ("sft-lora-z3-offload-all-nvme", dict(method="lora", backend="deepspeed", zero_stage=3, offload="all",
                                          offload_device="nvme", num_processes=8, gpus_per_node=8),
     "llama-3.1-70b", "H100-80GB"),
    ("sft-qlora-z3", dict(method="qlora", backend="deepspeed", zero_stage=3, num_processes=8, gpus_per_node=8),
     "llama-3.1-70b", "H100-80GB"),
    ("sft-full-fsdp2", dict(backend="fsdp2", num_processes=8, gpus_per_node=8, liger=True), "llama-3.1-70b",
     "H100-80GB"),
    ("sft-qlora-fsdp2-offload", dict(method="qlora", backend="fsdp2", offload="all", num_processes=8,
                                     gpus_per_node=8), "llama-3.1-70b", "H100-80GB"),
    ("sft-ulysses-sp8", dict(backend="deepspeed", zero_stage=3, seq_len=131072, micro_batch=1, grad_accum=1,
                             sp_size=8, attn="flash_attention_2", num_processes=8, gpus_per_node=8),
     "llama-3.1-8b", "H100-80GB"),
    ("sft-ring-cp4", dict(backend="fsdp2", seq_len=65536, micro_batch=1, cp_size=4, num_processes=8,
                          gpus_per_node=8), "llama-3.1-8b", "H100-80GB"),
    ("sft-packing-liger-fa2", dict(packing=True, liger=True, attn="flash_attention_2"), "qwen2.5-1.5b", "H100-80GB"),
    ("sft-fp16-mixed-t4", dict(method="lora", precision="fp16-mixed", seq_len=512), "qwen2.5-1.5b", "T4"),
    ("sft-fp32", dict(precision="fp32", method="lora"), "qwen2.5-1.5b", "H100-80GB"),
    ("sft-bf16-mixed-ddp", dict(precision="bf16-mixed", backend="ddp", num_processes=2, gpus_per_node=2),
     "qwen2.5-1.5b", "A100-80GB"),
    ("sft-multinode-z3", dict(backend="deepspeed", zero_stage=3, num_processes=16, gpus_per_node=8, nodes=2),
     "llama-3.1-70b", "H100-80GB"),
    ("sft-multinode-fsdp2", dict(backend="fsdp2", num_processes=32, gpus_per_node=8, nodes=4), "llama-3.1-70b",
     "H100-80GB"),
    ("sft-unsloth-qlora", dict(method="qlora", unsloth=True), "llama-3.1-8b", "RTX-4090"),
    ("sft-unsloth-lora-ddp", dict(method="lora", unsloth=True, backend="ddp", num_processes=2, gpus_per_node=2),
     "llama-3.1-8b", "A100-80GB"),
    ("dpo-full-ref-copy-ddp", dict(trainer="dpo", ref_model="copy", backend="ddp", num_processes=2,
                                   gpus_per_node=2), "qwen2.5-1.5b", "A100-80GB"),
    ("dpo-full-bema-ddp", dict(trainer="dpo", ref_model="bema", backend="ddp", num_processes=2,
                               gpus_per_node=2), "qwen2.5-1.5b", "A100-80GB"),
    ("dpo-lora-z2", dict(trainer="dpo", method="lora", backend="deepspeed", zero_stage=2, num_processes=2,
                         gpus_per_node=2), "llama-3.1-8b", "A100-80GB"),
    ("dpo-full-precompute-z3", dict(trainer="dpo", ref_model="precompute", backend="deepspeed", zero_stage=3,
                                    num_processes=8, gpus_per_node=8), "llama-3.1-8b", "H100-80GB"),
    ("kto-full-ref-copy", dict(trainer="kto", ref_model="copy"), "qwen2.5-1.5b", "H100-80GB"),
    ("kto-lora-fsdp2", dict(trainer="kto", method="lora", backend="fsdp2", num_processes=4, gpus_per_node=4),
     "llama-3.1-8b", "H100-80GB"),
    ("gkd-full", dict(trainer="gkd", ref_model="copy", teacher="Qwen/Qwen2.5-7B", teacher_params=7615616512),
     "qwen2.5-1.5b", "H100-80GB"),
    ("gkd-lora-z3", dict(trainer="gkd", method="lora", ref_model="copy", teacher="Qwen/Qwen2.5-32B",
                         teacher_params=32763876352, backend="deepspeed", zero_stage=3,
                         num_processes=8, gpus_per_node=8), "qwen2.5-7b", "H100-80GB"),
    ("grpo-no-vllm", dict(trainer="grpo", micro_batch=8, grad_accum=1, num_generations=8, max_completion_len=512),
     "qwen2.5-1.5b", "H100-80GB"),
    ("grpo-colocate", dict(trainer="grpo", vllm_mode="colocate", vllm_mem_fraction=0.3, num_generations=8,
                           micro_batch=8, max_completion_len=1024), "qwen2.5-1.5b", "H100-80GB"),
    ("grpo-server-8gpu", dict(trainer="grpo", vllm_mode="server", vllm_gpus=2, backend="deepspeed", zero_stage=3,
                              num_processes=6, gpus_per_node=8, micro_batch=4, grad_accum=2, num_generations=8,
                              ref_model="copy"), "qwen2.5-7b", "H100-80GB"),
    ("grpo-server-70b-multinode", dict(trainer="grpo", vllm_mode="server", vllm_gpus=4, backend="deepspeed",
                                       zero_stage=3, num_processes=8, gpus_per_node=8, nodes=2, micro_batch=1,
                                       grad_accum=8, num_generations=8, trust_remote_code=True),
     "llama-3.1-70b", "H100-80GB"),
    ("rloo-lora-server", dict(trainer="rloo", method="lora", vllm_mode="server", vllm_gpus=1, backend="ddp",
                              num_processes=3, gpus_per_node=4, micro_batch=2, num_generations=2),
     "qwen2.5-7b", "A100-80GB"),
    ("rloo-full-colocate-z2", dict(trainer="rloo", ref_model="copy", vllm_mode="colocate", vllm_mem_fraction=0.4,
                                   backend="deepspeed", zero_stage=2, num_processes=4, gpus_per_node=4,
                                   num_generations=4), "qwen2.5-1.5b", "H100-80GB"),
]


def _render(overrides, model, gpu, **kw):
    p = plan(**overrides)
    return p, render_bundle(p, MODELS[model], target(gpu, p.gpus_per_node, p.nodes), result(p), **kw)


@pytest.fixture(params=CASES, ids=[c[0] for c in CASES])
def case(request):
    name, overrides, model, gpu = request.param
    p, files = _render(overrides, model, gpu)
    return name, p, files


def test_bundle_is_consistent(case):
    _, _, files = case
    assert check_bundle_files(files) == []


def test_files_present(case):
    _, p, files = case
    expected = {"README.md", "plan.json", "train.py", "accelerate.yaml", "launch.sh", "requirements.txt",
                "model_config.json"}
    if p.backend == "deepspeed":
        expected.add("ds_config.json")
    if p.nodes > 1:
        expected.add("slurm.sbatch")
    if p.trainer == "gkd":
        expected.add("teacher_config.json")  # --random-init builds the teacher from it too
    assert set(files) == expected
    assert json.loads(files["plan.json"])["files"] == sorted(expected)


def test_accelerate_yaml_matches_plan(case):
    _, p, files = case
    doc = yaml.safe_load(files["accelerate.yaml"])
    assert doc["num_processes"] == p.num_processes  # total over all machines (accelerate launch --num_processes)
    assert doc["num_machines"] == p.nodes
    assert doc["machine_rank"] == 0
    assert doc["distributed_type"] == {"single": "NO", "ddp": "MULTI_GPU", "deepspeed": "DEEPSPEED",
                                       "fsdp2": "FSDP"}[p.backend]
    if p.backend == "deepspeed":
        assert "mixed_precision" not in doc  # accelerate raises with deepspeed_config_file (api-facts 2.2)
        assert doc["deepspeed_config"]["deepspeed_config_file"] == "ds_config.json"
        assert doc["deepspeed_config"]["deepspeed_multinode_launcher"] == "standard"
        assert doc["deepspeed_config"]["zero3_init_flag"] is (p.zero_stage == 3)
        # keys accelerate forbids next to a config file
        for key in ("gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
                    "offload_param_device", "zero3_save_16bit_model"):
            assert key not in doc["deepspeed_config"]
    else:
        want = {"bf16": "bf16", "bf16-mixed": "bf16", "fp16-mixed": "fp16", "fp32": "no"}[p.precision]
        assert doc["mixed_precision"] == want  # a string: YAML's bare `no` would read as False
    if p.backend == "fsdp2":
        assert doc["fsdp_config"]["fsdp_version"] == 2
        assert doc["fsdp_config"]["fsdp_offload_params"] is (p.offload != "none")
    assert files["accelerate.yaml"].startswith("# accelerate.yaml")
    assert "# Re-create: trl-advisor generate" in files["accelerate.yaml"]


def test_train_py_config_block(case):
    _, p, files = case
    consts = train_constants(files["train.py"])
    cfg = consts["CONFIG"]
    for key, value in p.to_dict().items():
        assert cfg[key] == value, key
    assert consts["TRUST_REMOTE_CODE"] is p.trust_remote_code
    assert consts["BF16"] is (p.precision in ("bf16", "bf16-mixed"))
    assert consts["FP16"] is (p.precision == "fp16-mixed")
    assert consts["DTYPE"] == ("torch.bfloat16" if p.precision == "bf16" else "torch.float32")
    # every CONFIG line says why
    block = files["train.py"].split("CONFIG = {", 1)[1].split("\n}", 1)[0]
    for line in block.strip().splitlines():
        assert "  # " in line and len(line.split("  # ", 1)[1].strip()) > 3, line


def test_launch_script(case):
    _, p, files = case
    src = files["launch.sh"]
    assert src.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in src
    assert re.search(r'train\.py "\$@"\s*$', src)
    assert "accelerate launch --config_file accelerate.yaml" in src
    assert ("vllm serve" in src) is (p.vllm_mode == "server")
    if p.nodes > 1:
        for flag in ("--machine_rank", "--main_process_ip", "--main_process_port"):
            assert flag in src
        assert f"--num_machines {p.nodes}" in src and f"--num_processes {p.num_processes}" in src


def test_requirements(case):
    _, p, files = case
    lines = [ln for ln in files["requirements.txt"].splitlines() if ln and not ln.startswith("#")]
    names = {re.split(r"[=<>!~]", ln, maxsplit=1)[0] for ln in lines}
    if p.unsloth:
        assert "trl==1.15.0" in lines and "transformers==5.17.0" in lines and "unsloth==2026.10.9" in lines
        assert "separate virtual environment" in files["requirements.txt"]
    elif p.vllm_mode != "none":  # vllm 0.31.0 requires transformers>=5.10.4,<5.18.0 and torch==2.13.0
        assert "trl==1.16.0" in lines and "transformers==5.17.0" in lines and "torch==2.13.0" in lines
        if "/" in p.attn or p.attn == "flash_attention_2":  # transformers 5.17.0's KERNELS_MIN/MAX_VERSION
            assert "kernels>=0.16.0,<0.17" in lines
    elif "/" in p.attn or p.attn == "flash_attention_2":
        # hub kernels keep TRL 1.16's transformers 5.25.0, whose KERNELS_MIN/MAX_VERSION are 0.19.1 / 0.20.0
        # (transformers 5.25.0 utils/import_utils.py); the index serves kernels 0.19.1 (2026-12-07)
        assert "trl==1.16.0" in lines and "transformers==5.25.0" in lines and "kernels>=0.19.1,<0.20" in lines
    else:
        assert "trl==1.16.0" in lines and "transformers==5.25.0" in lines and "accelerate==1.15.0" in lines
    assert ("deepspeed" in names) is (p.backend == "deepspeed")
    assert ("vllm" in names) is (p.vllm_mode != "none")
    if p.vllm_mode != "none":
        assert "vllm==0.31.0" in lines  # trl[vllm] allows <= 0.31.0
    assert ("bitsandbytes" in names) is (p.method == "qlora")
    assert ("liger-kernel" in names) is (p.liger and not p.unsloth)
    assert ("kernels" in names) is ("/" in p.attn or p.attn == "flash_attention_2")
    assert ("math-verify" in names) is (p.trainer in ("grpo", "rloo"))  # the default accuracy reward


def test_readme(case):
    _, p, files = case
    text = files["README.md"]
    assert p.short() in text
    # a multi-node bundle runs through slurm.sbatch (launch.sh alone needs each node's rank)
    run = "sbatch slurm.sbatch" if p.nodes > 1 else "bash launch.sh"
    assert f"{run} --max-steps 20" in text
    assert f"{run} --max-steps 5 --no-save --random-init --synthetic-data" in text
    assert "trl-advisor verify" in text
    assert "34.00" in text  # the predicted peak of gen_cases.result(), in GiB
    assert "does not fit: 90.0 GiB > 79.6 GiB" in text  # the rejected alternative and its reason
    for knob in ("micro_batch", "grad_accum", "zero_stage", "precision"):
        assert f"| `{knob}` |" in text


def test_trl_named_is_the_pinned_trl(case):
    """train.py's header, README.md and plan.json name the TRL that requirements.txt installs: 1.15.0 for an
    Unsloth bundle (Unsloth 2026.10.9 requires trl<=1.15.0), 1.16.0 otherwise."""
    _, p, files = case
    pinned = next(ln.split("==", 1)[1] for ln in files["requirements.txt"].splitlines() if ln.startswith("trl=="))
    assert pinned == ("1.15.0" if p.unsloth else "1.16.0")
    assert f"Generated by trl-advisor {__version__} for TRL {pinned}. " in files["train.py"]
    assert f"Generated by trl-advisor {__version__} for TRL {pinned}. " in files["README.md"]
    assert json.loads(files["plan.json"])["environment"]["trl"] == pinned
    other = "1.16" if p.unsloth else "1.15"  # no other TRL release named as this bundle's (a comment may cite
    for name in ("train.py", "launch.sh"):   # the TRL 1.16 environment only in requirements.txt's Unsloth note)
        assert f"TRL {other}" not in files[name], name


# ------------------------------------------------------------------------------------------------ specific cases

def _files(name):
    _, overrides, model, gpu = next(c for c in CASES if c[0] == name)
    return _render(overrides, model, gpu)


def test_unsloth_under_deepspeed_installs_torch_first():
    """deepspeed 0.19.8 is an sdist that builds against torch: the Unsloth bundle's README and requirements.txt
    install torch (Unsloth's range) before `pip install -r requirements.txt`, as the TRL bundles do."""
    p, files = _render(dict(method="qlora", unsloth=True, backend="deepspeed", zero_stage=2, num_processes=2,
                            gpus_per_node=2), "llama-3.1-8b", "H100-80GB")
    assert "deepspeed==0.19.8" in files["requirements.txt"].splitlines()
    run = files["README.md"].split("## Run", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    torch_first = "pip install 'torch>=2.6,<2.15'"
    assert run[1].startswith(torch_first + " ") and run[2] == "pip install -r requirements.txt", run
    assert f"&& {torch_first} && pip install -r requirements.txt" in files["requirements.txt"]
    # without DeepSpeed, requirements.txt's torch line is enough
    _, plain = _files("sft-unsloth-qlora")
    assert "pip install 'torch" not in plain["README.md"] and "pip install 'torch" not in plain["requirements.txt"]


def test_ds_config_stage3_offload_nvme():
    p, files = _files("sft-lora-z3-offload-all-nvme")
    ds = json.loads(files["ds_config.json"])
    zero = ds["zero_optimization"]
    assert zero["stage"] == 3
    assert zero["offload_optimizer"] == {"device": "nvme", "nvme_path": "/local_nvme", "pin_memory": True}
    assert zero["offload_param"]["device"] == "nvme"
    assert zero["stage3_gather_16bit_weights_on_model_save"] is True
    for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size",
                "gradient_clipping"):
        assert ds[key] == "auto"
    assert ds["bf16"] == {"enabled": "auto"} and ds["fp16"] == {"enabled": "auto"}
    assert "nvme_path" in files["README.md"]


def test_ds_config_stage2_has_no_stage3_keys():
    _, files = _files("sft-full-z2-optoffload")
    zero = json.loads(files["ds_config.json"])["zero_optimization"]
    assert zero["stage"] == 2 and zero["offload_optimizer"]["device"] == "cpu"
    assert "offload_param" not in zero
    assert not [k for k in zero if k.startswith("stage3_")]


def test_qlora_quant_storage_only_when_sharded():
    _, z3 = _files("sft-qlora-z3")
    _, fsdp = _files("sft-qlora-fsdp2-offload")
    _, single = _files("sft-qlora-single-4090")
    for files in (z3, fsdp):
        assert "bnb_4bit_quant_storage=torch.bfloat16" in files["train.py"]
    assert "bnb_4bit_quant_storage" not in single["train.py"]
    for files in (z3, fsdp, single):
        src = files["train.py"]
        assert 'bnb_4bit_quant_type="nf4"' in src and "bnb_4bit_use_double_quant=True" in src
        assert "bnb_4bit_compute_dtype=torch.bfloat16" in src


def test_device_map():
    _, single = _files("sft-qlora-single-4090")
    _, ddp = _files("sft-qlora-ddp-4090-nop2p")
    _, z3 = _files("sft-qlora-z3")
    assert '{"": int(os.environ.get("LOCAL_RANK", "0"))}' in ddp["train.py"]
    assert '{"": int(os.environ.get("LOCAL_RANK", "0"))}' in single["train.py"]
    body = z3["train.py"].split("def device_map", 1)[1].split("def load_model", 1)[0]
    assert "return None" in body and "LOCAL_RANK" not in body


def test_consumer_pcie_disables_p2p():
    _, nop2p = _files("sft-qlora-ddp-4090-nop2p")
    _, single = _files("sft-qlora-single-4090")
    _, nvlink = _files("sft-lora-ddp")
    assert "export NCCL_P2P_DISABLE=1" in nop2p["launch.sh"]
    assert "NCCL_P2P_DISABLE" not in single["launch.sh"]  # one process: no NCCL
    assert "NCCL_P2P_DISABLE" not in nvlink["launch.sh"]


def test_fsdp2_activation_checkpointing_moves_to_fsdp():
    _, files = _files("sft-full-fsdp2")
    doc = yaml.safe_load(files["accelerate.yaml"])
    assert doc["fsdp_config"]["fsdp_activation_checkpointing"] is True
    assert "**{CHECKPOINTING_ARG: False}" in files["train.py"]
    assert 'gradient_checkpointing=CONFIG["grad_ckpt"]' not in files["train.py"]
    # Liger through its own per-architecture API (TRL 1.16 deprecates use_liger_kernel)
    assert "apply_liger_kernels()" in files["train.py"] and "use_liger_kernel=" not in files["train.py"]


def test_ulysses_sp():
    _, files = _files("sft-ulysses-sp8")
    par = yaml.safe_load(files["accelerate.yaml"])["parallelism_config"]
    assert par["parallelism_config_sp_size"] == 8
    assert par["parallelism_config_sp_backend"] == "deepspeed"
    assert par["parallelism_config_sp_attn_implementation"] == "flash_attention_2"
    assert par["parallelism_config_dp_shard_size"] * 8 == 8
    pad = train_constants(files["train.py"])["CONFIG"]["pad_to_multiple_of"]
    assert pad % 8 == 0 and 131072 % pad == 0  # a multiple of sp_size that never lengthens a row


def test_ring_cp():
    _, files = _files("sft-ring-cp4")
    par = yaml.safe_load(files["accelerate.yaml"])["parallelism_config"]
    assert par["parallelism_config_cp_size"] == 4 and par["parallelism_config_cp_backend"] == "torch"
    assert par["parallelism_config_dp_shard_size"] == 2
    pad = train_constants(files["train.py"])["CONFIG"]["pad_to_multiple_of"]
    assert pad % 8 == 0 and 65536 % pad == 0  # a multiple of 2 x cp_size


def _assignment(src, name):
    m = re.search(rf"^\s*{name}=(.*)$", src, re.MULTILINE)
    return shlex.split(m.group(1))[0]


def test_vllm_server_launch():
    p, files = _files("grpo-server-8gpu")
    src = files["launch.sh"]
    vllm = [int(x) for x in _assignment(src, "VLLM_GPUS").split(",")]
    train = [int(x) for x in _assignment(src, "TRAIN_GPUS").split(",")]
    assert sorted(vllm + train) == list(range(8)) and not set(vllm) & set(train)
    assert len(train) == p.num_processes
    for piece in ("VLLM_SERVER_DEV_MODE=1 setsid vllm serve", "--weight-transfer-config '{\"backend\": \"nccl\"}'",
                  "--logprobs-mode processed_logprobs", "--max-logprobs -1", "--enable-scale-out",
                  'CUDA_VISIBLE_DEVICES="$VLLM_DEVICES"', 'CUDA_VISIBLE_DEVICES="$TRAIN_DEVICES" setsid', "/health",
                  "trap stop_all EXIT", "--max-time"):
        assert piece in src, piece
    assert "--trust-remote-code" not in src
    cfg = train_constants(files["train.py"])["CONFIG"]
    assert _assignment(src, "VLLM_SERVER_PORT") == f'${{VLLM_SERVER_PORT:-{cfg["vllm_server_port"]}}}'
    assert 'vllm_mode="server"' in files["train.py"] and "use_vllm=True" in files["train.py"]
    assert cfg["beta"] == 0.001  # ref_model copy: a KL term, so a reference model (DeepSeek-R1's value)


def test_vllm_server_multinode_runs_server_on_node0_only():
    _, files = _files("grpo-server-70b-multinode")
    src = files["launch.sh"]
    assert 'if [[ "$MACHINE_RANK" == 0 ]]; then' in src
    assert "--trust-remote-code" in src  # the plan asks for it
    assert train_constants(files["train.py"])["TRUST_REMOTE_CODE"] is True
    # 70.6e9 params x 2 bytes = 141 GB; at most half of each 85.5 GB GPU for weights -> 4-way tensor parallel
    assert "--tensor-parallel-size 4" in src
    assert "--data-parallel-size 1" in src


def test_vllm_colocate():
    _, files = _files("grpo-colocate")
    src = files["train.py"]
    assert 'vllm_mode="colocate"' in src and "vllm_gpu_memory_utilization=VLLM_GPU_MEMORY_UTILIZATION" in src
    cfg = train_constants(src)["CONFIG"]
    assert cfg["vllm_mem_fraction"] == 0.3 and cfg["vllm_max_model_length"] == cfg["seq_len"]
    assert "vllm serve" not in files["launch.sh"]


def test_grpo_defaults_and_random_init_sampling():
    p, files = _files("grpo-no-vllm")
    src = files["train.py"]
    assert "from trl.rewards import accuracy_reward, think_format_reward" in src
    assert 'choices=("accuracy", "format", "both"), default="accuracy"' in src
    assert "trl-lib/DeepMath-103K" in src
    assert '"--reward-module"' in src
    assert 'sampling["top_k"] = 50' in src and '"remove_invalid_values": True' in src
    assert "use_vllm=False" in src and "max_prompt_length" not in src
    assert train_constants(src)["CONFIG"]["beta"] == 0.0  # GRPOConfig default: no reference model


def test_gkd_uses_experimental_module():
    _, files = _files("gkd-full")
    src = files["train.py"]
    assert "from trl.experimental.gkd import GKDConfig, GKDTrainer" in src
    assert src.index('os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")') < src.index("from trl.experimental")
    assert "teacher_model=teacher" in src and "trl-lib/chatbot_arena_completions" in src


def test_dpo_reference_and_bema():
    _, copy = _files("dpo-full-ref-copy-ddp")
    _, bema = _files("dpo-full-bema-ddp")
    _, lora = _files("dpo-lora-z2")
    _, z3 = _files("dpo-full-precompute-z3")
    assert "BEMACallback(update_ref_model=True)" in bema["train.py"] and "ref_model=ref_model" in bema["train.py"]
    assert "BEMACallback" not in copy["train.py"]  # a plain frozen copy unless the plan chose BEMA
    for files in (lora, z3):
        assert "BEMACallback" not in files["train.py"] and "bema_for_ref_model" not in files["train.py"]
    assert "ref_model=ref_model" in copy["train.py"]
    assert "max_prompt_length" not in copy["train.py"] and "max_length=CONFIG[\"seq_len\"]" in copy["train.py"]


def test_unsloth_import_order_and_env():
    _, files = _files("sft-unsloth-qlora")
    src = files["train.py"]
    assert src.index("import unsloth") < src.index("from trl import") < src.index("def main")
    assert src.index("import unsloth") < src.index("from transformers import")
    assert "FastLanguageModel.from_pretrained" in src and "load_in_4bit=True" in src
    assert "peft_config=" not in src


def test_trainer_api_names():
    """Only TRL 1.16 names: max_length (not max_seq_length), dtype (not torch_dtype), no use_liger_loss."""
    for name, *_ in CASES:
        src = _files(name)[1]["train.py"]
        # Unsloth's own loader does take max_seq_length (unsloth/models/loader.py)
        src = src.replace('max_seq_length=CONFIG["seq_len"]', "")
        for stale in ("max_seq_length", "torch_dtype", "use_liger_loss", "max_prompt_length", "trl vllm-serve"):
            assert stale not in src, (name, stale)


def test_out_dir_and_determinism():
    p, files = _files("sft-full-z3")
    assert default_out_dir(p, MODELS["llama-3.1-70b"]) == "generated/llama-3.1-70b-sft-full-8gpu"
    _, again = _files("sft-full-z3")
    assert files == again
    assert json.loads(files["plan.json"])["out"] == "generated/llama-3.1-70b-sft-full-8gpu"
    server, _ = _files("grpo-server-8gpu")
    assert default_out_dir(server, MODELS["qwen2.5-7b"]).endswith("-grpo-full-8gpu")  # vLLM GPUs count too


def test_plan_json_is_the_result_verbatim():
    p = plan()
    res = result(p)
    files = render_bundle(p, MODELS["llama-3.1-8b"], target(), res)
    doc = json.loads(files["plan.json"])
    assert {k: v for k, v in doc.items() if k not in ("out", "files", "environment")} == json.loads(json.dumps(res))
    # the environment requirements.txt installs, as data
    pinned = [ln for ln in files["requirements.txt"].splitlines() if ln and not ln.startswith("#")]
    assert sorted(f"{k}=={v}" if v[:1].isdigit() else f"{k}{v}" for k, v in doc["environment"]["pins"].items()) == \
        sorted(pinned)
    assert files["plan.json"] == json.dumps(doc, indent=2, sort_keys=True) + "\n"  # sorted keys


def test_render_rejects_a_result_without_the_estimate():
    p = plan()
    res = result(p)
    del res["memory"]["per_gpu_peak_bytes"]
    with pytest.raises(ValueError, match="per_gpu_peak_bytes"):
        render_bundle(p, MODELS["llama-3.1-8b"], target(), res)


def test_reasons_name_user_pins():
    p = plan(micro_batch=2, grad_accum=8, method="lora")
    req = Request(model="llama-3.1-8b", micro_batch=2, method="lora", gpu="H100-80GB", gpus=1)
    files = render_bundle(p, MODELS["llama-3.1-8b"], target(), result(p), request=req)
    cfg_block = files["train.py"]
    assert "'micro_batch': 2,  # user pin (--micro-batch 2)" in cfg_block
    assert "'method': 'lora',  # user pin (--method lora)" in cfg_block
    assert "'grad_accum': 8,  # chosen by the plan search" in cfg_block
    assert "trl-advisor generate --model llama-3.1-8b" in files["README.md"]
    assert "--micro-batch 2" in files["README.md"]


def test_reasons_from_the_planner_win():
    p = plan()
    res = result(p)
    res["why"] = {"micro_batch": "MEM003: the largest micro-batch under 90% of memory"}
    files = render_bundle(p, MODELS["llama-3.1-8b"], target(), res)
    assert "'micro_batch': 4,  # MEM003: the largest micro-batch under 90% of memory" in files["train.py"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_shell_scripts_parse(case, tmp_path):
    """`bash -n`: the scripts parse (the quoting lint in advisor.bundle.consistency does not parse shell)."""
    _, _, files = case
    for name in ("launch.sh", "slurm.sbatch"):
        if name in files:
            path = tmp_path / name
            path.write_text(files[name])
            proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr


def test_every_bundle_kind_reads_back_as_its_plan(case, tmp_path):
    """The reader behind check --bundle and verify turns each kind of generated bundle back into the plan it was
    rendered from: a field it cannot read (the reference model, BEMA, a teacher, ...) would be judged as another."""
    from advisor.check import check_bundle

    name, p, files = case
    model = next(c[2] for c in CASES if c[0] == name)
    doc = json.loads(files["plan.json"])
    doc["model"]["id"] = model  # the test result's placeholder id: the catalogue row it was rendered from
    for fname, text in {**files, "plan.json": json.dumps(doc)}.items():
        (tmp_path / fname).write_text(text, encoding="utf-8")
    report = check_bundle(str(tmp_path))
    got = report.reading.plan.to_dict()
    want = p.to_dict()
    assert {k: (got[k], want[k]) for k in want if got.get(k) != want[k]} == {}
    assert report.reading.vs_plan_json == []
