"""check --bundle and verify --dry-run on bundles edited by hand with odd values.

Three classes of defect, each held here by every member rather than one example:
- a switch train.py reads as Python does (`if CONFIG["liger"]`, `bf16=BF16 and ...`) written 0 or 1 is False or
  True, as it is when train.py runs: never refused, never a difference from the planned True;
- a value of the wrong type or shape (a section that is a list, a count that is text, a precision no tool knows)
  is a finding that names it, never an exception of the cross-file check shown as "KeyError: 'fp8'";
- a module-level value is read as Python gives it: `4 * 2` is 8 everywhere (not "no literal CONFIG dict"), and an
  expression (`MODEL_ID = os.environ[...]`) is not mistaken for the text of a literal.
"""

from __future__ import annotations

import copy
import json
import re
import shutil

import pytest
import yaml

from advisor.bundle.consistency import check_bundle_files
from advisor.cli import main

SWITCHES = ("liger", "grad_ckpt", "packing", "unsloth", "trust_remote_code", "overlap_comm")
"""CONFIG's boolean Plan fields, each in every generated train.py."""


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    argvs = {
        "sft": ["--model", "qwen2.5-0.5b", "--gpu", "H100-80GB"],
        # ZeRO-3 with parameter offload, Ulysses SP and two nodes: every ds_config and accelerate section there is
        "ds3": ["--model", "7B", "--gpu", "H100-80GB", "--gpus", "8", "--nodes", "2", "--backend", "deepspeed",
                "--zero", "3", "--sp-size", "2", "--offload", "all"],
        "fsdp": ["--model", "7B", "--gpu", "H100-80GB", "--gpus", "8", "--backend", "fsdp2", "--cp-size", "2"],
        "server": ["--model", "qwen2.5-0.5b", "--gpu", "H100-80GB", "--gpus", "4", "--trainer", "grpo",
                   "--vllm", "server", "--vllm-gpus", "1"],
    }
    out = {}
    for name, argv in argvs.items():
        assert main(["generate", *argv, "--out", str(root / name)]) == 0, name
        out[name] = root / name
    return out


def _copy(src, tmp_path, name="b"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _edit_config(path, key: str, value: str) -> None:
    train = path / "train.py"
    text, count = re.subn(rf"^(    '{key}': )[^,]*,", lambda m: f"{m.group(1)}{value},", train.read_text(), count=1,
                          flags=re.MULTILINE)
    assert count == 1, key
    train.write_text(text)


def _run(capsys, argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _check(capsys, folder) -> tuple[int, dict, str]:
    code, out, err = _run(capsys, ["check", "--bundle", str(folder), "--json"])
    return code, (json.loads(out) if out.strip() else {}), err


def _ids(doc: dict) -> list[tuple[str, str]]:
    return sorted((f["id"], f["severity"]) for f in doc.get("findings", []))


# ---- switches written 0 or 1 -------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", SWITCHES)
@pytest.mark.parametrize("spelling", [("0", "False"), ("1", "True")])
def test_a_config_switch_written_0_or_1_reads_as_false_or_true(bundles, tmp_path, capsys, key, spelling):
    number, literal = spelling
    as_number, as_literal = _copy(bundles["sft"], tmp_path, "n"), _copy(bundles["sft"], tmp_path, "l")
    _edit_config(as_number, key, number)
    _edit_config(as_literal, key, literal)
    code, doc, err = _check(capsys, as_number)
    assert "expected true or false" not in err and code in (0, 1), err
    # the same verdict, findings and plan as the edit spelled with Python's own False / True
    code_literal, doc_literal, _ = _check(capsys, as_literal)
    assert (code, _ids(doc), doc["plan"]) == (code_literal, _ids(doc_literal), doc_literal["plan"])
    code, out, _ = _run(capsys, ["verify", "--dry-run", "--json", str(as_number)])
    files_steps = [s for s in json.loads(out)["steps"] if s["name"] in ("bundle", "consistency", "rules")]
    code_literal, out_literal, _ = _run(capsys, ["verify", "--dry-run", "--json", str(as_literal)])
    assert [(s["name"], s["status"]) for s in files_steps] == [
        (s["name"], s["status"]) for s in json.loads(out_literal)["steps"] if s["name"] in ("bundle", "consistency",
                                                                                            "rules")]
    assert code == code_literal


@pytest.mark.parametrize(("constant", "number"), [("BF16", "1"), ("FP16", "0"), ("TRUST_REMOTE_CODE", "0")])
def test_a_module_switch_written_0_or_1_is_not_a_difference_from_the_plan(bundles, tmp_path, capsys, constant,
                                                                          number):
    folder = _copy(bundles["sft"], tmp_path)
    train = folder / "train.py"
    text, count = re.subn(rf"^{constant} = (True|False)", f"{constant} = {number}", train.read_text(), count=1,
                          flags=re.MULTILINE)
    assert count == 1 and bool(int(number)) == (re.search(rf"^{constant} = True", train.read_text(), re.M) is not None)
    train.write_text(text)
    code, doc, _ = _check(capsys, folder)
    assert code == 0 and not [f for f in doc["findings"] if f["severity"] == "error"], doc["findings"]


@pytest.mark.parametrize("value", ["2", "None", "'yes'", "1.0"])
def test_a_switch_that_is_neither_0_1_nor_a_boolean_is_still_refused(bundles, tmp_path, capsys, value):
    folder = _copy(bundles["sft"], tmp_path)
    _edit_config(folder, "liger", value)
    code, _, err = _check(capsys, folder)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 2 and "CONFIG['liger']" in lines[0] and "true or false" in lines[0]


# ---- values of the wrong type or shape ---------------------------------------------------------------------------

def _paths(doc, prefix=()):
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))


def _set(doc, path, value):
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


WRONG = ([1], "x", None, True, 2.5)


@pytest.mark.parametrize("name", ["ds3", "fsdp", "server"])
def test_no_section_or_value_of_the_wrong_type_stops_the_cross_file_check(bundles, name):
    files = {p.name: p.read_text() for p in bundles[name].iterdir() if p.is_file()}
    edits = []
    for fname, load, dump in (("ds_config.json", json.loads, json.dumps), ("accelerate.yaml", yaml.safe_load,
                                                                            yaml.safe_dump)):
        if fname in files:
            doc = load(files[fname])
            for path in list(_paths(doc)):
                for value in WRONG:
                    edited = copy.deepcopy(doc)
                    _set(edited, path, value)
                    edits.append((fname, dump(edited)))
    config = re.findall(r"^    '(\w+)': (.*?),  #", files["train.py"], re.MULTILINE)
    assert len(config) > 20
    for key, old in config:
        for value in ("[1]", "'x'", "None", "0", "-1", "'fp8'", "10**30"):
            edits.append(("train.py", files["train.py"].replace(f"    '{key}': {old},", f"    '{key}': {value},", 1)))
    for fname, text in edits:
        check_bundle_files({**files, fname: text})  # a list of problems, whatever the values; never an exception


@pytest.mark.parametrize(("fname", "edit", "named"), [
    ("train.py", ("'precision': 'bf16'", "'precision': 'fp8'"), "unknown precision fp8"),
    ("train.py", ("'ref_model': 'none'", "'ref_model': 'self'"), "unknown ref_model self"),
    ("accelerate.yaml", ("deepspeed_config:\n", "deepspeed_config: [1]\nunused:\n"), "deepspeed_config"),
    ("ds_config.json", ('"offload_param": {', '"offload_param": ["cpu"], "unused": {'), "offload_param"),
])
def test_a_wrong_value_is_a_finding_that_names_it_not_an_exception(bundles, tmp_path, capsys, fname, edit, named):
    folder = _copy(bundles["ds3"], tmp_path)
    text = (folder / fname).read_text()
    assert edit[0] in text
    (folder / fname).write_text(text.replace(edit[0], edit[1], 1))
    code, doc, err = _check(capsys, folder)
    messages = [f["message"] for f in doc.get("findings", [])] + [err]
    assert code in (1, 2) and any(named in m for m in messages), messages
    leaked = re.compile(r"\b(KeyError|AttributeError|TypeError|ValueError|ZeroDivisionError)\b")
    assert not [m for m in messages if leaked.search(m)]
    code, out, _ = _run(capsys, ["verify", "--dry-run", str(folder)])
    assert code in (1, 2) and not leaked.search(out)


# ---- module-level values as Python gives them --------------------------------------------------------------------

def test_arithmetic_in_config_is_read_alike_by_every_reader(bundles, tmp_path, capsys):
    folder = _copy(bundles["sft"], tmp_path)
    planned = re.search(r"^    'micro_batch': (\d+),", (folder / "train.py").read_text(), re.MULTILINE).group(1)
    _edit_config(folder, "micro_batch", f"{int(planned) // 2} * 2")
    files = {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}
    assert check_bundle_files(files) == []
    code, doc, _ = _check(capsys, folder)
    assert code == 0 and doc["plan"]["micro_batch"] == int(planned)
    assert not any("not read" in a for a in doc.get("assumptions", [])), doc.get("assumptions")


def test_an_expression_for_model_id_is_not_read_as_a_model_name(bundles, tmp_path, capsys):
    folder = _copy(bundles["sft"], tmp_path)
    train = folder / "train.py"
    text, count = re.subn(r"^MODEL_ID = .*$", "MODEL_ID = os.environ['TRAIN_MODEL']", train.read_text(), count=1,
                          flags=re.MULTILINE)
    assert count == 1
    train.write_text(text)
    code, doc, err = _check(capsys, folder)
    assert code == 0, err  # the model of the files' other statements (plan.json), said so; not "unknown model"
    assert doc["model"] == "qwen2.5-0.5b"
    assert any("MODEL_ID" in a and "not read" in a for a in doc["assumptions"]), doc["assumptions"]


# ---- counts that are not whole numbers, names that are not names -------------------------------------------------

def _integer_paths(schema, doc, prefix=()):
    """Every value of `doc` its JSON schema types "integer" (the counts accelerate and DeepSpeed compute with)."""
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    for key, value in (doc.items() if isinstance(doc, dict) else ()):
        sub = props.get(key, {})
        kinds = sub.get("type") if isinstance(sub, dict) else None
        if (kinds == "integer" or (isinstance(kinds, list) and "integer" in kinds)) and isinstance(value, int) \
                and not isinstance(value, bool):
            yield (*prefix, key), value
        yield from _integer_paths(sub, value, (*prefix, key))


@pytest.mark.parametrize("name", ["ds3", "fsdp", "server"])
@pytest.mark.parametrize("spelling", ["float", "text"])
def test_a_count_that_is_not_a_whole_number_is_a_finding(bundles, name, spelling):
    # accelerate passes num_processes 8.0 on as `--nproc_per_node 8.0`, which torchrun refuses; '8' // 1 is a
    # TypeError in accelerate's launcher: every integer of both files, not only num_processes, is held to an int
    from advisor.bundle.consistency import load_schema

    files = {p.name: p.read_text() for p in bundles[name].iterdir() if p.is_file()}
    seen = 0
    for fname, schema_name, load, dump in (
            ("accelerate.yaml", "accelerate.schema.json", yaml.safe_load, yaml.safe_dump),
            ("ds_config.json", "ds_config.schema.json", json.loads, json.dumps)):
        if fname not in files:
            continue
        doc = load(files[fname])
        for path, value in _integer_paths(load_schema(schema_name), doc):
            edited = copy.deepcopy(doc)
            _set(edited, path, float(value) if spelling == "float" else str(value))
            problems = check_bundle_files({**files, fname: dump(edited)})
            assert any(path[-1] in p and "integer" in p for p in problems), (fname, path, problems)
            seen += 1
    assert seen >= 3, name  # num_processes, num_machines, machine_rank at least


@pytest.mark.parametrize("constant", ["MODEL_ID", "DATASET"])
@pytest.mark.parametrize("value", ["None", "5", "''", "'   '", "['Qwen/Qwen2.5-0.5B']"])
def test_a_name_constant_that_is_not_text_is_refused(bundles, tmp_path, capsys, constant, value):
    folder = _copy(bundles["sft"], tmp_path)
    train = folder / "train.py"
    text, count = re.subn(rf"^{constant} = .*$", f"{constant} = {value}", train.read_text(), count=1,
                          flags=re.MULTILINE)
    assert count == 1
    train.write_text(text)
    code, doc, err = _check(capsys, folder)
    messages = [f["message"] for f in doc.get("findings", [])] + [err]
    assert code in (1, 2) and any(constant in m and "not" in m for m in messages), messages
    assert "Traceback" not in err


def test_a_name_constant_given_as_an_expression_is_not_judged(bundles, tmp_path, capsys):
    folder = _copy(bundles["sft"], tmp_path)
    train = folder / "train.py"
    text, count = re.subn(r"^DATASET = .*$", "DATASET = os.environ.get('DATA', 'trl-lib/Capybara')",
                          train.read_text(), count=1, flags=re.MULTILINE)
    assert count == 1
    train.write_text(text)
    code, doc, err = _check(capsys, folder)
    assert code == 0, (err, doc.get("findings"))


@pytest.mark.parametrize(("gpu", "why"), [("XYZ", "is not a GPU of the catalogue"), ("", "is not a GPU of the catalogue"),
                                          ("V100", "is ambiguous")])
@pytest.mark.parametrize("command", ["check", "verify"])
def test_a_plan_json_gpu_the_catalogue_lacks_names_plan_json_in_check_and_verify(bundles, tmp_path, capsys, gpu,
                                                                                  why, command):
    """check and verify predict on the GPU plan.json names: a name the catalogue does not know is plan.json's fault,
    one line naming the file and key, and the same usage error (exit 2) in both."""
    folder = _copy(bundles["sft"], tmp_path)
    doc = json.loads((folder / "plan.json").read_text())
    doc["hardware"]["gpu"] = gpu
    (folder / "plan.json").write_text(json.dumps(doc))
    argv = ["check", "--bundle", str(folder)] if command == "check" else ["verify", str(folder), "--dry-run"]
    code, _, err = _run(capsys, argv)
    assert code == 2 and f"plan.json: hardware.gpu is {gpu!r}, which {why}" in err, err


@pytest.mark.parametrize("name", ["plan.json", "model_config.json", "ds_config.json"])
@pytest.mark.parametrize("text", ["[]", "null", "3"])
def test_a_json_file_that_is_not_an_object_gets_the_hint_for_that_file(bundles, tmp_path, capsys, name, text):
    path = _copy(bundles["ds3"], tmp_path)
    (path / name).write_text(text)
    assert main(["check", "--bundle", str(path)]) == 2
    error, hint = capsys.readouterr().err.strip().splitlines()[-2:]
    assert name in error and "expected a JSON object" in error
    if name == "ds_config.json":
        assert "DeepSpeed config" in hint
    else:
        assert "DeepSpeed" not in hint and "generate" in hint
