"""verify --random-init measures the model train.py's random checkpoint builds: for an image-text model_type that is
the text decoder alone (RANDOM_INIT_MODEL_TYPE), so its prediction leaves out the frozen vision tower the real model
loads; a run on the real weights is judged against the files' estimate, tower included."""

from __future__ import annotations

from verify_cases import machine

from advisor.catalog import resolve_model
from advisor.cli import main as cli_main
from advisor.core.errors import ExitCode
from advisor.verify import verify
from advisor.verify.report import markdown


def test_random_init_prediction_leaves_out_the_tower_it_does_not_build(tmp_path):
    bundle = tmp_path / "g3"
    assert cli_main(["generate", "--model", "gemma-3-4b", "--gpu", "H100-80GB", "--gpus", "1", "--method", "full",
                     "--out", str(bundle)]) == ExitCode.OK
    model = resolve_model("gemma-3-4b")

    def run(random_init: bool):
        return verify(bundle, probe=machine(gpus=1), runner=lambda *a, **k: None, progress=None, dry_run=True,
                      random_init=random_init, synthetic_data=True, write_report=False)

    real, random = run(False), run(True)
    tower = model.vision_params * 2  # bf16 weights, one copy
    assert real.predicted["per_gpu_peak_bytes"] - random.predicted["per_gpu_peak_bytes"] == tower
    assert real.predicted["source"] == "estimate of the files"
    assert "vision-tower" in random.predicted["source"] and "vision-tower" in markdown(random)
    assert "Predicted by" not in markdown(real)


def test_random_init_prediction_leaves_out_a_gkd_teachers_tower_too(tmp_path):
    # teacher_config.json builds the teacher's decoder alone, as model_config.json the student's: both towers go
    bundle = tmp_path / "g3-gkd"
    assert cli_main(["generate", "--model", "gemma-3-4b", "--trainer", "gkd", "--teacher", "gemma-3-12b", "--method",
                     "lora", "--gpu", "H100-80GB", "--gpus", "1", "--out", str(bundle)]) == ExitCode.OK
    student, teacher = resolve_model("gemma-3-4b"), resolve_model("gemma-3-12b")

    def run(random_init: bool):
        return verify(bundle, probe=machine(gpus=1), runner=lambda *a, **k: None, progress=None, dry_run=True,
                      random_init=random_init, synthetic_data=True, write_report=False)

    real, random = run(False), run(True)
    towers = (student.vision_params + teacher.vision_params) * 2  # bf16, one copy of each
    assert real.predicted["per_gpu_peak_bytes"] - random.predicted["per_gpu_peak_bytes"] == towers
    assert f"{(student.vision_params + teacher.vision_params) / 1e9:.2f}B vision-tower" in random.predicted["source"]
    assert real.predicted["step_seconds"] == random.predicted["step_seconds"]  # no tower ever ran: the same time
