"""The file check reads what the tools read: sbatch's `--nodes 2` and `-N 2` as `--nodes=2`, and a package the
plan no longer needs (Liger switched off in CONFIG) as harmless, where a missing one is an error."""

from __future__ import annotations

import json

import pytest

from advisor.bundle.consistency import check_bundle_files
from advisor.bundle.generate import generate
from advisor.core.request import Request


def _files(out) -> dict[str, str]:
    return {p.name: p.read_text() for p in out.iterdir() if p.is_file()}


@pytest.mark.parametrize("form", ["--nodes=2", "--nodes 2", "-N 2", "-N 2  # two nodes"])
def test_sbatch_options_in_every_form_sbatch_takes(tmp_path, form):
    out = tmp_path / "b"
    generate(Request(model="70B", gpu="H100-80GB", gpus=8, nodes=2), out=str(out))
    files = _files(out)
    assert "#SBATCH --nodes=2" in files["slurm.sbatch"]
    files["slurm.sbatch"] = files["slurm.sbatch"].replace("#SBATCH --nodes=2", f"#SBATCH {form}")
    assert check_bundle_files(files) == []
    files["slurm.sbatch"] = files["slurm.sbatch"].replace(f"#SBATCH {form}", "#SBATCH --nodes 3")
    assert any("--nodes=3" in p for p in check_bundle_files(files))


def test_a_package_no_longer_needed_is_no_error_and_a_missing_one_is(tmp_path):
    out = tmp_path / "b"
    generate(Request(model="0.5B", gpu="H100-80GB", gpus=1, liger=True), out=str(out))
    files = _files(out)
    files["train.py"] = files["train.py"].replace("'liger': True,", "'liger': False,", 1)
    assert not [p for p in check_bundle_files(files) if "requirements.txt" in p]
    files = _files(out)
    files["requirements.txt"] = "\n".join(line for line in files["requirements.txt"].splitlines()
                                          if not line.startswith("liger-kernel"))
    assert any("liger-kernel missing" in p for p in check_bundle_files(files))


@pytest.fixture(scope="module")
def two_node_files(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("two") / "b"
    generate(Request(model="70B", gpu="H100-80GB", gpus=8, nodes=2), out=str(out))
    files = _files(out)
    assert check_bundle_files(files) == []
    return files


@pytest.mark.parametrize("form", ["--config_file=accelerate.yaml", "--config-file accelerate.yaml",
                                  "--config-file=./accelerate.yaml", "--config_file './accelerate.yaml'",
                                  '--config_file "accelerate.yaml"'])
def test_every_spelling_accelerate_takes_for_its_config_file(two_node_files, form):
    """accelerate's parser adds the dashed form of each underscored option and takes `=value` or a separate word
    (accelerate/commands/utils.py _StoreAction); the file may be named ./accelerate.yaml."""
    files = dict(two_node_files)
    files["launch.sh"] = files["launch.sh"].replace("--config_file accelerate.yaml", form)
    assert check_bundle_files(files) == []
    files["launch.sh"] = files["launch.sh"].replace(form, "--config_file other.yaml")
    assert any("--config_file accelerate.yaml" in p for p in check_bundle_files(files))


@pytest.mark.parametrize(("flags", "bad"), [("--num_machines=2 --num-processes=16", None),
                                            ("--num-machines 2 --num_processes '16'", None),
                                            ("--num_machines 3 --num_processes 16", "--num_machines must be 2"),
                                            ("--num_machines 2 --num_processes 1_6", "--num_processes must be 16")])
def test_multi_node_flags_in_every_spelling(two_node_files, flags, bad):
    files = dict(two_node_files)
    assert "LAUNCH+=(--num_machines 2 --num_processes 16)" in files["launch.sh"]
    files["launch.sh"] = files["launch.sh"].replace("--num_machines 2 --num_processes 16", flags)
    problems = check_bundle_files(files)
    assert (problems == []) if bad is None else any(bad in p for p in problems), problems


@pytest.mark.parametrize(("gres", "ok"), [("--gres=gpu:8", True), ("--gres=gpu:h100:8", True),
                                          ("--gres=nvme:1,gpu:h100:8", True), ("--gpus-per-node=8", True),
                                          ("--gpus-per-node=h100:8", True), ("--gres=gpu:h100:4", False),
                                          ("--gres=gpu", False), ("--gres=gpu:0", False)])
def test_sbatch_gpu_requests_in_every_form_slurm_takes(two_node_files, gres, ok):
    """Slurm's GRES is name[:type][:count] (one when no count is written); --gpus-per-node is sbatch's own form."""
    files = dict(two_node_files)
    files["slurm.sbatch"] = files["slurm.sbatch"].replace("#SBATCH --gres=gpu:8", f"#SBATCH {gres}")
    problems = [p for p in check_bundle_files(files) if "GPUs" in p]
    assert (problems == []) is ok, problems


@pytest.fixture(scope="module")
def one_gpu_files(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("one") / "b"
    generate(Request(model="0.5B", gpu="H100-80GB", gpus=1), out=str(out))
    return _files(out)


@pytest.mark.parametrize("edit", ['CONFIG["micro_batch"] * 8', 'CONFIG["micro_batch"] + 0', '2 * CONFIG["micro_batch"]'])
def test_an_expression_around_config_is_not_configs_value(one_gpu_files, edit):
    """`per_device_train_batch_size=CONFIG["micro_batch"] * 8` trains 8x the micro-batch CONFIG names."""
    files = dict(one_gpu_files)
    old = 'per_device_train_batch_size=CONFIG["micro_batch"],'
    assert old in files["train.py"]
    files["train.py"] = files["train.py"].replace(old, f"per_device_train_batch_size={edit},")
    assert any("per_device_train_batch_size is not taken from CONFIG['micro_batch']" in p
               for p in check_bundle_files(files))


@pytest.mark.parametrize(("name", "value", "says"), [
    ("MODEL_ID", "SOMEVAR", "never defines SOMEVAR (NameError when it runs)"),
    ("MODEL_ID", "torch.float16", "MODEL_ID is torch.float16, not"),
    ("MODEL_ID", "str", "(Python's builtin)"),
    ("MODEL_ID", "['a']", "MODEL_ID is ['a'], not"),
    ("DATASET", "UNDEFINED.attr", "never defines UNDEFINED"),
    ("DATASET", "3", "DATASET is 3, not"),
    ("DATASET", "None", "DATASET is None, not"),
    ("DATASET", "1 == 1", "DATASET is 1 == 1, not"),
])
def test_model_and_dataset_names_that_cannot_name_anything(one_gpu_files, name, value, says):
    import re

    files = dict(one_gpu_files)
    files["train.py"], n = re.subn(rf"^{name} = .*$", f"{name} = {value}", files["train.py"], count=1, flags=re.M)
    assert n == 1
    assert any(says in p for p in check_bundle_files(files)), check_bundle_files(files)


@pytest.mark.parametrize("value", ['os.environ["MODEL"]', 'os.environ.get("M", "Qwen/Qwen2.5-0.5B")', 'f"{ORG}/x"',
                                   '"Qwen/Qwen2.5-0.5B"'])
def test_names_decided_when_train_py_runs_are_not_judged(one_gpu_files, value):
    import re

    files = dict(one_gpu_files)
    files["train.py"] = re.sub(r"^MODEL_ID = .*$", f"MODEL_ID = {value}", files["train.py"], count=1, flags=re.M)
    assert not [p for p in check_bundle_files(files) if "MODEL_ID" in p]


@pytest.fixture(scope="module")
def server_files(tmp_path_factory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("server") / "b"
    generate(Request(model="0.5B", gpu="H100-80GB", gpus=4, trainer="grpo", vllm="server", vllm_gpus=1),
             out=str(out))
    files = _files(out)
    assert check_bundle_files(files) == []
    return files


@pytest.mark.parametrize(("edit", "says"), [
    ("LAUNCH=(accelerate launch --config_file accelerate.yaml --mixed_precision banana)",
     "--mixed_precision 'banana' is not one accelerate takes"),
    ("LAUNCH=(accelerate launch --config_file accelerate.yaml --mixed_precision=fp16)",
     "--mixed_precision fp16 for precision bf16"),
    ("LAUNCH=(accelerate launch --config_file accelerate.yaml --cpu)", "--cpu trains on the CPU"),
    ("LAUNCH=(accelerate launch --config_file accelerate.yaml --dynamo_backend inductor)", "uncompiled model"),
    ("LAUNCH=(accelerate launch --config_file accelerate.yaml --rdzv-backend banana)", "--rdzv_backend 'banana'"),
])
def test_launcher_values_accelerate_refuses_or_the_plan_does_not_model(server_files, edit, says):
    files = dict(server_files)
    old = "LAUNCH=(accelerate launch --config_file accelerate.yaml)"
    assert old in files["launch.sh"]
    files["launch.sh"] = files["launch.sh"].replace(old, edit)
    assert any(says in p for p in check_bundle_files(files)), check_bundle_files(files)


@pytest.mark.parametrize("line", [
    'echo "launch.sh: a CPU smoke test passes --cpu to train.py" >&2',
    'case " $* " in *" --cpu "*) echo "no vLLM server for a --cpu run" >&2 ;; esac',
    "LAUNCH+=(--mixed_precision bf16)  # not --cpu: the plan's precision",
    "srun --cpus-per-task=8 --cpu-bind=cores true",
    "LAUNCH+=(--num_cpu_threads_per_process 8)",
    "# LAUNCH+=(--cpu --mixed_precision fp16 --trust-remote-code)  the server's old line",
    'echo "vllm serve --trust-remote-code --max-model-len 64 is not what runs" >&2',
])
def test_text_that_mentions_a_flag_is_not_an_argument(server_files, line):
    """A flag counts where the command takes it (accelerate launch's words, the array it expands, vllm serve's):
    the same text in a message, a comment (one with an apostrophe too), a `case` pattern or another command's
    option is not one."""
    files = dict(server_files)
    old = "LAUNCH=(accelerate launch --config_file accelerate.yaml)"
    files["launch.sh"] = files["launch.sh"].replace(old, f"{old}\n{line}")
    assert line in files["launch.sh"]
    assert check_bundle_files(files) == []


@pytest.mark.parametrize(("old", "new"), [
    ("LAUNCH=(accelerate launch --config_file accelerate.yaml)",
     "LAUNCH=(accelerate launch --config_file accelerate.yaml)\nLAUNCH+=(\"--cpu\")"),
    ("LAUNCH=(accelerate launch --config_file accelerate.yaml)",
     "LAUNCH=(accelerate launch --config_file accelerate.yaml \\\n  --cpu)  # for the CI's runner"),
    ('run_training "${LAUNCH[@]}" train.py "$@"', 'run_training "${LAUNCH[@]}" train.py --cpu "$@"'),
    ('run_training "${LAUNCH[@]}" train.py "$@"', 'run_training accelerate launch --config_file accelerate.yaml --cpu train.py "$@"'),
])
def test_cpu_as_an_argument_of_the_training_command(server_files, old, new):
    files = dict(server_files)
    assert old in files["launch.sh"]
    files["launch.sh"] = files["launch.sh"].replace(old, new)
    assert any("--cpu trains on the CPU" in p for p in check_bundle_files(files)), check_bundle_files(files)


def test_a_vllm_context_shorter_than_the_sequence(server_files):
    import re

    files = dict(server_files)
    files["launch.sh"], n = re.subn(r"--max-model-len '?[0-9]+'?", "--max-model-len 128", files["launch.sh"])
    assert n >= 1
    assert any("--max-model-len 128 is shorter than the 1024-token" in p for p in check_bundle_files(files))


def test_accelerate_use_cpu_and_padding_longer_than_the_sequence(server_files):
    files = dict(server_files)
    files["accelerate.yaml"] = files["accelerate.yaml"].replace("use_cpu: false", "use_cpu: true")
    assert any("use_cpu True: the plan trains on the GPUs" in p for p in check_bundle_files(files))
    files = dict(server_files)
    old = "'pad_to_multiple_of': 64,"
    assert old in files["train.py"]
    files["train.py"] = files["train.py"].replace(old, "'pad_to_multiple_of': 4096,")
    assert any("pad_to_multiple_of 4096 is longer than seq_len 1024" in p for p in check_bundle_files(files))


def test_machine_rank_and_nvme_path_held_to_what_the_tools_take(tmp_path, two_node_files):
    files = dict(two_node_files)
    files["accelerate.yaml"] = files["accelerate.yaml"].replace("machine_rank: 0", f"machine_rank: {10 ** 30}")
    assert any("machine_rank 1000000000000000000000000000000 is outside 0..1" in p for p in check_bundle_files(files))
    out = tmp_path / "nvme"
    generate(Request(model="8B", gpu="H100-80GB", gpus=1, backend="deepspeed", zero=3, offload="all",
                     offload_device="nvme", nvme_path="/local_nvme/me"), out=str(out))
    files = _files(out)
    assert check_bundle_files(files) == []
    for bad, says in (("relative/dir", "must be an absolute path"), ("/a\nb", "newline"), ("", "absolute path")):
        edited = dict(files)
        edited["ds_config.json"] = files["ds_config.json"].replace('"/local_nvme/me"', json.dumps(bad))
        assert edited["ds_config.json"] != files["ds_config.json"]
        problems = [p for p in check_bundle_files(edited) if "nvme_path" in p]
        assert problems and any(says in p for p in problems), (bad, problems)


@pytest.mark.parametrize(("edit", "says"), [
    ({"model_type": "banana"}, "model_type 'banana' is not one transformers builds"),
    ({"hidden_size": 0}, "hidden_size must be a positive integer"),
    ({"model_type": None}, "no model_type"),
])
def test_a_gkd_teacher_config_is_held_to_what_the_model_config_is(tmp_path, edit, says):
    out = tmp_path / "gkd"
    generate(Request(model="0.5B", gpu="H100-80GB", gpus=1, trainer="gkd", teacher="qwen2.5-1.5b", method="lora"),
             out=str(out))
    files = _files(out)
    assert check_bundle_files(files) == []
    for name in ("teacher_config.json", "model_config.json"):
        doc = json.loads(files[name])
        doc.update(edit)
        edited = {**files, name: json.dumps(doc)}
        assert any(p.startswith(f"{name}: ") and says in p for p in check_bundle_files(edited)), name
    without = {k: v for k, v in files.items() if k != "teacher_config.json"}
    assert any("teacher_config.json: missing" in p for p in check_bundle_files(without))
