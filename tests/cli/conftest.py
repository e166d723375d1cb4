"""Shared by the CLI tests: a hardware report edited from the 8 x H100 fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hardware"


@pytest.fixture
def edited_report(tmp_path):
    """edited_report(edit) -> the path of the 8 x H100 probe report after edit(data), written under tmp_path."""

    def write(edit) -> str:
        data = json.loads((FIXTURES / "h100_sxm_x8_nvlink.json").read_text())
        edit(data)
        path = tmp_path / "hw.json"
        path.write_text(json.dumps(data))
        return str(path)

    return write
