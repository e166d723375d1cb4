"""The catalogue tables say what each column is and never print a figure nobody measured: a GPU without bf16
tensor cores shows its fp16 peak, marked; a missing unit or link is "-", not 0; the model column that
`--model 8B` matches is labelled so, "-" for rows without an alias. And a parameter count reads as people write it."""

from __future__ import annotations

import contextlib
import io

from advisor.catalog import all_gpus
from advisor.cli import main


def _out(*argv: str) -> str:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(list(argv)) == 0
    return out.getvalue()


def _rows(text: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in text.splitlines()[1:] if line.strip()}


def test_gpus_table_has_no_zero_for_a_missing_figure():
    text = _out("gpus")
    assert text.splitlines()[0].split()[:5] == ["id", "memory", "16-bit", "TFLOP/s", "fp8"]
    rows = _rows(text)
    for gpu in all_gpus():
        row = rows[gpu.id]
        assert "0" not in row[3:6], row
        if not gpu.bf16_tflops and gpu.fp16_tflops:
            assert f"{gpu.fp16_tflops:g}" in row and "(fp16)" in row, row
    assert rows["T4"][3:5] == ["65", "(fp16)"]


def test_models_table_labels_the_size_alias_column():
    text = _out("models")
    assert text.splitlines()[0].split()[:3] == ["id", "--model", "params"]
    rows = _rows(text)
    assert rows["llama-3.1-8b"][1] == "8B" and rows["llama-3.2-3b"][1] == "-"


def test_estimate_writes_counts_in_billions_or_millions():
    assert "(8.03B params, 8.03B trainable)" in _out("estimate", "--model", "8B", "--gpu", "H100-80GB")
    assert "M trainable)" in _out("estimate", "--model", "8B", "--gpu", "H100-80GB", "--method", "lora")
