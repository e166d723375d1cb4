"""The generated configs, read by the libraries that will read them for real: DeepSpeed's own config classes,
transformers' "auto" filling, accelerate's YAML loader, its launcher's argument merge and its plugins (which hold
the checks that raise at launch). Skipped where the [train] extra is not installed."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
from gen_cases import MODELS, plan, result, target

from advisor.bundle.render import render_bundle
from advisor.bundle.write import write_bundle

deepspeed_zero = pytest.importorskip("deepspeed.runtime.zero.config", reason="needs deepspeed ([train] extra)")
pytest.importorskip("accelerate", reason="needs accelerate ([train] extra)")
pytest.importorskip("transformers", reason="needs transformers ([train] extra)")

DS_PLANS = {
    "z1": plan(backend="deepspeed", zero_stage=1, num_processes=8, gpus_per_node=8),
    "z2-opt-offload": plan(backend="deepspeed", zero_stage=2, offload="optimizer", num_processes=8, gpus_per_node=8),
    "z3": plan(backend="deepspeed", zero_stage=3, num_processes=8, gpus_per_node=8, method="lora"),
    "z3-all-cpu": plan(backend="deepspeed", zero_stage=3, offload="all", num_processes=8, gpus_per_node=8),
    "z3-all-nvme": plan(backend="deepspeed", zero_stage=3, offload="all", offload_device="nvme", num_processes=8,
                        gpus_per_node=8),
    "z3-sp4": plan(backend="deepspeed", zero_stage=3, sp_size=4, attn="flash_attention_2", num_processes=8,
                   gpus_per_node=8, seq_len=32768),
    "z3-2nodes": plan(backend="deepspeed", zero_stage=3, num_processes=16, gpus_per_node=8, nodes=2),
    "z2-fp16": plan(backend="deepspeed", zero_stage=2, precision="fp16-mixed", num_processes=2, gpus_per_node=2),
}
OTHER_PLANS = {
    "single": plan(),
    "ddp-fp32": plan(backend="ddp", num_processes=4, gpus_per_node=4, precision="fp32"),
    "fsdp2": plan(backend="fsdp2", num_processes=8, gpus_per_node=8, offload="all"),
    "fsdp2-cp4": plan(backend="fsdp2", num_processes=8, gpus_per_node=8, cp_size=4, seq_len=65536),
    "fsdp2-2nodes": plan(backend="fsdp2", num_processes=16, gpus_per_node=8, nodes=2),
}


def _bundle_dir(p, tmp_path):
    files = render_bundle(p, MODELS["llama-3.1-8b"], target("H100-80GB", p.gpus_per_node, p.nodes), result(p))
    write_bundle(files, str(tmp_path / "b"), force=False)
    return tmp_path / "b"


def _training_args(p, world_size):
    """What transformers reads from TrainingArguments when it fills the "auto" values (trainer_config_process)."""
    return SimpleNamespace(
        world_size=world_size, per_device_train_batch_size=p.micro_batch, gradient_accumulation_steps=p.grad_accum,
        max_grad_norm=1.0, learning_rate=2e-5, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8, weight_decay=0.0,
        save_on_each_node=False, fp16=p.precision == "fp16-mixed", fp16_full_eval=False,
        bf16=p.precision in ("bf16", "bf16-mixed"), bf16_full_eval=False, fp16_backend="auto", fp16_opt_level="O1",
        half_precision_backend="auto", lr_scheduler_type="linear", warmup_steps=0, get_warmup_steps=lambda n: 0)


@pytest.mark.parametrize("name", sorted(DS_PLANS))
def test_ds_config_with_deepspeed_classes(name, tmp_path):
    from deepspeed.runtime.config import DeepSpeedConfig
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    p = DS_PLANS[name]
    cfg = json.loads((_bundle_dir(p, tmp_path) / "ds_config.json").read_text())
    # DeepSpeedZeroConfig is pydantic with extra="forbid": an unknown key raises; strict=False drops "auto" values.
    zero = deepspeed_zero.DeepSpeedZeroConfig(**cfg["zero_optimization"])
    assert zero.stage == p.zero_stage
    want_opt = p.offload_device if p.offload in ("optimizer", "all") else None
    assert (zero.offload_optimizer.device if zero.offload_optimizer else None) == want_opt
    # The autos, filled the way the HF Trainer fills them, then the whole config through DeepSpeedConfig.
    # DeepSpeedConfig takes world size 1 without torch.distributed, so resolve for one process.
    hf = HfTrainerDeepSpeedConfig(json.loads(json.dumps(cfg)))
    args = _training_args(p, world_size=1)
    hf.trainer_config_process(args)  # raises on a literal that disagrees with TrainingArguments
    hf.trainer_config_finalize(args, SimpleNamespace(config=SimpleNamespace(hidden_size=4096)), 100)
    assert "auto" not in json.dumps(hf.config)
    ds = DeepSpeedConfig(hf.config)
    assert ds.zero_optimization_stage == p.zero_stage
    assert ds.train_micro_batch_size_per_gpu == p.micro_batch
    assert ds.gradient_accumulation_steps == p.grad_accum
    assert ds.bfloat16_config.enabled is (p.precision in ("bf16", "bf16-mixed"))
    if p.zero_stage == 3:
        assert ds.zero_config.gather_16bit_weights_on_model_save is True


def _launch_env(bundle, extra_args=()):
    """What `accelerate launch --config_file accelerate.yaml train.py` would export (accelerate launch_command)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import (
        prepare_deepspeed_cmd_env,
        prepare_multi_gpu_env,
        prepare_simple_launcher_cmd_env,
    )

    args = launch_command_parser().parse_args(["--config_file", "accelerate.yaml", *extra_args, "train.py"])
    args, defaults, mp_from_config = _validate_launch_command(args)
    if args.use_deepspeed:
        fields = list(defaults.deepspeed_config.keys()) + (["mixed_precision"] if mp_from_config else [])
        args.deepspeed_fields_from_accelerate_config = ",".join(fields)
        return args, prepare_deepspeed_cmd_env(args)[1]
    if args.use_fsdp or args.multi_gpu:
        return args, prepare_multi_gpu_env(args)
    return args, prepare_simple_launcher_cmd_env(args)[1]


@pytest.mark.parametrize("name", sorted(DS_PLANS) + sorted(OTHER_PLANS))
def test_accelerate_reads_the_yaml(name, tmp_path, monkeypatch):
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import DeepSpeedPlugin, FullyShardedDataParallelPlugin

    p = {**DS_PLANS, **OTHER_PLANS}[name]
    bundle = _bundle_dir(p, tmp_path)
    config = load_config_from_file(str(bundle / "accelerate.yaml"))  # unknown top-level keys raise here
    assert isinstance(config, ClusterConfig)
    assert config.num_processes == p.num_processes and config.num_machines == p.nodes
    monkeypatch.chdir(bundle)
    extra = ["--machine_rank", "1", "--main_process_ip", "10.0.0.1", "--main_process_port", "29500"] \
        if p.nodes > 1 else []
    args, env = _launch_env(bundle, extra)
    assert args.num_processes == p.num_processes
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if p.uses_deepspeed:
        # DeepSpeedPlugin runs _deepspeed_config_checks: mixed_precision next to a config file raises here.
        plugin = DeepSpeedPlugin()
        assert plugin.zero_stage == p.zero_stage
        assert plugin.zero3_init_flag is (p.zero_stage == 3)
    if p.backend == "fsdp2":
        plugin = FullyShardedDataParallelPlugin()
        assert plugin.fsdp_version == 2
    if p.sp_size > 1 or p.cp_size > 1:
        pc = ParallelismConfig()  # reads PARALLELISM_CONFIG_* and validates the sizes
        assert pc.sp_size == p.sp_size and pc.cp_size == p.cp_size
        assert pc.total_size == p.num_processes
    assert os.environ.get("ACCELERATE_USE_DEEPSPEED", "false") == ("true" if p.uses_deepspeed else "false")


@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_model_config_builds_the_architecture(model_id, tmp_path):
    """model_config.json through AutoConfig.for_model gives a model with exactly the catalogue's parameter count
    (ModelSpec.params, computed independently from the layer shapes)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    p = plan()
    spec = MODELS[model_id]
    files = render_bundle(p, spec, target(), result(p))
    fields = json.loads(files["model_config.json"])
    model_type = fields.pop("model_type")
    config = AutoConfig.for_model(model_type, **fields)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert sum(t.numel() for t in model.parameters()) == spec.params
