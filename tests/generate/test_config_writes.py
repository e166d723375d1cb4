"""check --bundle judges CONFIG as the run sees it: the generated train.py never writes CONFIG after its literal, so a
write there is the user's, and it counts (`CONFIG["micro_batch"] = 16` used to pass as the planned 8, which fits,
while 16 does not); a write it cannot be sure runs is said not read, never taken silently; and `2 * 8` is 16."""

from __future__ import annotations

import pytest

from advisor.bundle.generate import generate
from advisor.check import check_bundle
from advisor.core.errors import AdvisorError
from advisor.core.request import Request


@pytest.fixture(scope="module")
def bundle_text(tmp_path_factory):
    out = tmp_path_factory.mktemp("cw") / "b"
    generate(Request(model="8B", gpu="H100-80GB", gpus=8), out=str(out))  # FSDP2, micro-batch 8, fits
    return out, (out / "train.py").read_text()


def _with(bundle_text, tmp_path, code: str, replace: tuple[str, str] | None = None):
    src, text = bundle_text
    out = tmp_path / "b"
    out.mkdir()
    for p in src.iterdir():
        if p.is_file():
            (out / p.name).write_text(p.read_text())
    if replace:
        text = text.replace(*replace, 1)
    end = text.index("\n}\n", text.index("\nCONFIG = {")) + 3
    (out / "train.py").write_text(text[:end] + code + "\n" + text[end:])
    return out


@pytest.mark.parametrize("code", ["CONFIG['micro_batch'] = 16", "CONFIG.update(micro_batch=16)",
                                  "CONFIG.update({'micro_batch': 16})", "CONFIG |= {'micro_batch': 16}",
                                  "CONFIG.update(**{'micro_batch': 16})",
                                  "CONFIG['micro_batch'] = 2 * 8"])
def test_a_write_after_the_literal_is_what_is_checked(bundle_text, tmp_path, code):
    report = check_bundle(str(_with(bundle_text, tmp_path, code)))
    ids = {f.id for f in report.findings if f.failed}
    assert {"MEM001", "PLAN001"} <= ids, ids  # 16 does not fit; plan.json planned 8


def test_arithmetic_in_the_literal_is_evaluated(bundle_text, tmp_path):
    out = _with(bundle_text, tmp_path, "", replace=("'micro_batch': 8,", "'micro_batch': 2 * 8,"))
    assert "MEM001" in {f.id for f in check_bundle(str(out)).findings if f.failed}


def test_a_write_that_may_not_run_is_not_taken_silently(bundle_text, tmp_path):
    out = _with(bundle_text, tmp_path, "def _patch():\n    CONFIG['micro_batch'] = 16\n\n\n_patch()")
    with pytest.raises(AdvisorError) as err:
        check_bundle(str(out))
    assert "micro_batch" in err.value.message and "function" in err.value.message


def test_config_spelled_as_a_dict_call_reads_as_the_literal(bundle_text, tmp_path):
    import re

    src, text = bundle_text
    start = text.index("\nCONFIG = {")
    end = text.index("\n}\n", start) + 3
    items = [re.match(r"\s*'([a-z_0-9]+)':\s*(.*?),(\s*#.*)?$", line) for line in text[start:end].splitlines()[2:-1]]
    call = "\nCONFIG = dict(\n" + "\n".join(f"    {m.group(1)}={m.group(2)}," for m in items if m) + "\n)\n"
    out = _with(bundle_text, tmp_path, "")
    (out / "train.py").write_text(text[:start] + call + text[end:])
    report = check_bundle(str(out))
    assert not [f.id for f in report.findings if f.failed and f.severity != "info"]
    (out / "train.py").write_text((out / "train.py").read_text().replace("micro_batch=8,", "micro_batch=4,"))
    assert "PLAN001" in {f.id for f in check_bundle(str(out)).findings if f.failed}


def test_a_write_of_keys_it_cannot_name_is_said(bundle_text, tmp_path):
    out = _with(bundle_text, tmp_path, "OTHER = {}\nCONFIG.update(OTHER)")
    said = [a for a in check_bundle(str(out)).assumptions if "CONFIG.update(OTHER)" in a]
    assert len(said) == 1 and "does not read" in said[0]
