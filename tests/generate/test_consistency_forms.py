"""The file check reads what the tools read: sbatch's `--nodes 2` and `-N 2` as `--nodes=2`, and a package the
plan no longer needs (Liger switched off in CONFIG) as harmless, where a missing one is an error."""

from __future__ import annotations

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
