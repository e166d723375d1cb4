"""What TRL does with what train.py hands it, read in the installed TRL and transformers rather than in our files:
settings TRL means to force but that a renamed field swallows, and models TRL places itself (or leaves where they
are) under FSDP2."""

from __future__ import annotations

import ast
import importlib.util
import sys

import pytest
from gen_cases import MODELS, plan, result, target

from advisor.bundle.render import render_bundle
from advisor.bundle.write import write_bundle

pytest.importorskip("trl", reason="needs the [train] extra (trl, torch)")

TRAINERS = ("sft", "dpo", "kto", "grpo", "rloo", "gkd")


def _bundle(p, tmp_path, name="b"):
    out = tmp_path / name
    write_bundle(render_bundle(p, MODELS["qwen2.5-1.5b"], target("H100-80GB", p.gpus_per_node), result(p)), str(out),
                 force=False)
    return out


def _train_module(bundle, name):
    spec = importlib.util.spec_from_file_location(name, bundle / "train.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _extra(trainer):
    return {"teacher": "Qwen/Qwen3-1.7B", "teacher_params": 1_720_574_976, "ref_model": "copy"} \
        if trainer == "gkd" else {}


@pytest.mark.parametrize("trainer", TRAINERS)
def test_peft_under_zero3_checkpoints_reentrantly(trainer, tmp_path, monkeypatch):
    """TRL forces use_reentrant=True for PEFT + ZeRO-3 by assigning a new dict to args.gradient_checkpointing_kwargs
    (trl/trainer/*_trainer.py __init__). transformers >= 5.23 mirrors that deprecated name from
    activation_checkpointing_kwargs once, in TrainingArguments.__post_init__, and its Trainer reads only the new
    name: unless train.py sets it, the run checkpoints non-reentrantly. The config built by the bundle's own
    training_config carries use_reentrant=True under the name the Trainer reads, and TRL's assignment (replayed
    here, as the trainers write it) keeps it."""
    p = plan(trainer=trainer, method="lora", backend="deepspeed", zero_stage=3, grad_ckpt=True, num_processes=8,
             gpus_per_node=8, **_extra(trainer))
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    module = _train_module(_bundle(p, tmp_path), f"train_reentrant_{trainer}")
    config = module.training_config(module.parse_args(["--cpu", "--output-dir", str(tmp_path / "out")]))
    name = module.CHECKPOINTING_ARG
    assert getattr(config, name) is True
    # what TRL's trainers do for PEFT + ZeRO-3 (e.g. trl/trainer/sft_trainer.py), then what the Trainer reads
    config.gradient_checkpointing_kwargs = config.gradient_checkpointing_kwargs or {}
    config.gradient_checkpointing_kwargs["use_reentrant"] = True
    assert getattr(config, f"{name}_kwargs") == {"use_reentrant": True}


@pytest.mark.parametrize("kw", [dict(method="full", backend="deepspeed", zero_stage=3),
                                dict(method="lora", backend="deepspeed", zero_stage=2),
                                dict(method="lora", backend="fsdp2")])
def test_reentrant_only_where_trl_asks_for_it(kw, tmp_path):
    """Elsewhere transformers' default (non-reentrant) stays, which the speed model assumes."""
    p = plan(trainer="sft", grad_ckpt=True, num_processes=8, gpus_per_node=8, **kw)
    assert "use_reentrant" not in (_bundle(p, tmp_path) / "train.py").read_text(encoding="utf-8").split(
        "def training_config", 1)[1].split("\n\n\n", 1)[0]


def _main_calls(src: str) -> list[str]:
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "main")
    return [ast.unparse(n) for n in ast.walk(fn) if isinstance(n, ast.Assign)]


@pytest.mark.parametrize("backend", ["fsdp2", "ddp", "deepspeed"])
def test_gkd_teacher_is_sharded_under_fsdp2(backend, tmp_path):
    """GKDTrainer prepares its teacher with accelerator.prepare_model(evaluation_mode=True) unless DeepSpeed
    (trl/experimental/gkd/gkd_trainer.py), which under FSDP neither wraps nor moves it (accelerate's prepare_model:
    no device placement for FSDP, no wrap in evaluation mode); device_map is None under FSDP2, so the teacher stayed
    on the CPU. The bundle shards it with TRL's prepare_fsdp after the trainer is built, under FSDP2 only (DDP
    loads it on the process's GPU, DeepSpeed's prepare_deepspeed places it)."""
    p = plan(trainer="gkd", backend=backend, zero_stage=3 if backend == "deepspeed" else 0, num_processes=8,
             gpus_per_node=8, **_extra("gkd"))
    src = (_bundle(p, tmp_path) / "train.py").read_text(encoding="utf-8")
    sharded = "trainer.teacher_model = prepare_fsdp(trainer.teacher_model, trainer.accelerator)" in _main_calls(src)
    assert sharded is (backend == "fsdp2")
    if sharded:
        import trl.models

        assert callable(trl.models.prepare_fsdp)
        assert "from trl.models import prepare_fsdp" in src


@pytest.mark.parametrize("trainer", ["dpo", "kto"])
@pytest.mark.parametrize("backend", ["fsdp2", "ddp"])
def test_precompute_reference_under_fsdp2_loads_on_its_own_gpu(trainer, backend, tmp_path, monkeypatch):
    """Under FSDP, DPO/KTO with precompute_ref_log_probs load a reference of their own for the precompute from
    args.model_init_kwargs, and create_model_from_path gives it device_map "auto" unless the run is DDP or DeepSpeed
    (trl/trainer/dpo_trainer.py, kto_trainer.py __init__; trl/trainer/utils.py): every process would spread a whole
    copy over all its visible GPUs. The bundle's model_init_kwargs load it like the policy, on the process's GPU."""
    p = plan(trainer=trainer, method="full", ref_model="precompute", backend=backend, num_processes=8,
             gpus_per_node=8)
    bundle = _bundle(p, tmp_path)
    src = (bundle / "train.py").read_text(encoding="utf-8")
    sets_kwargs = any(a.startswith("config.model_init_kwargs =") for a in _main_calls(src))
    assert sets_kwargs is (backend == "fsdp2")
    if not sets_kwargs:
        return
    module = _train_module(bundle, f"train_precompute_{trainer}")
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setattr(module.torch.cuda, "is_available", lambda: True)
    args = module.parse_args([])
    assert module.own_gpu(args) == {"": 3}
    assert module.model_kwargs(args)["device_map"] is None  # the policy: FSDP2 places it
    assert module.own_gpu(module.parse_args(["--cpu"])) is None


@pytest.mark.parametrize("trainer", ["grpo", "rloo"])
def test_the_vllm_server_port_is_the_one_launch_sh_serves_on(trainer, tmp_path, monkeypatch, capsys):
    """launch.sh serves on VLLM_SERVER_PORT when the environment sets it, else on the planned port; the TRL config
    train.py builds connects to the same one, and a value launch.sh would refuse is refused here too (usage error,
    exit 2, naming the variable), not handed to TRL's client to fail at its first request."""
    import re

    p = plan(trainer=trainer, vllm_mode="server", vllm_gpus=1, num_processes=3, gpus_per_node=4, backend="ddp")
    bundle = _bundle(p, tmp_path)
    launch = (bundle / "launch.sh").read_text(encoding="utf-8")
    module = _train_module(bundle, f"train_vllm_port_{trainer}")
    planned = module.CONFIG["vllm_server_port"]
    assert re.search(rf'^VLLM_SERVER_PORT="\$\{{VLLM_SERVER_PORT:-{planned}\}}"$', launch, re.M)
    assert re.search(r"^export VLLM_SERVER_PORT$", launch, re.M)

    def port(value: str | None) -> int:
        if value is None:
            monkeypatch.delenv("VLLM_SERVER_PORT", raising=False)
        else:
            monkeypatch.setenv("VLLM_SERVER_PORT", value)
        # --cpu: this host has no GPU for TrainingArguments' bf16 check; only the config is built (main() refuses
        # --cpu for a vLLM plan, and is not run)
        args = module.parse_args(["--cpu", "--output-dir", str(tmp_path / "out")])
        assert module.training_config(args).vllm_server_port == args.vllm_server_port
        return args.vllm_server_port

    assert port(None) == port("") == planned
    assert port("8123") == 8123 and port("1") == 1 and port("65535") == 65535
    for bad in ("0", "08", "65536", "80a", "8 0", "-1", "８０"):
        with pytest.raises(SystemExit) as exc:
            port(bad)
        assert exc.value.code == 2
        assert f"VLLM_SERVER_PORT={bad!r} is not a TCP port (a whole number 1 .. 65535)" in capsys.readouterr().err
