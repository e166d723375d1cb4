"""Property-based fuzzing of the command line: random flags and values (valid, boundary, hostile), mutated
hardware files and mutated bundles. Whatever the input: the exit code is 0, 1 or 2, no traceback reaches the user,
`--json` output on success is JSON with the contract's keys, and every call ends within its time bound.

About a minute of CI time by default; `FUZZ_EXAMPLES=4000 FUZZ_REPORT=fuzz.json pytest tests/security/test_cli_fuzz.py`
runs a longer campaign and writes its figures (calls, exit codes, tracebacks, hangs, slowest call).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "900"))
CALL_SECONDS = 20
"""A call slower than this is a hang (the slowest planner search is a fraction of a second)."""
STATS: Counter = Counter()
SLOWEST: list[float] = [0.0]

HOSTILE_TEXT = ["", " ", "-", "--", "\n", "a\nb", "\x00", "\x1b[31m", "\u202e", "\udcff", "'", '"', '"""', "\\",
                "$(id)", "`id`", "; id", "../../etc/passwd", "/dev/zero", "x" * 300, "nan", "inf", "-inf", "1e400",
                "0", "-1", "2147483648", "9" * 30, "0x10", "1_000", "7B", "Qwen/Qwen2.5-7B", "qwen2.5-0.5b"]
NUMBERS = ["0", "1", "2", "3", "7", "8", "64", "1024", "4096", "8193", "-1", "2147483648", "10000000000",
           "1000000000000", "9" * 5000, "nan", "inf", "1.5", "1e3", ""]
CHOICES = {
    "--trainer": ["sft", "dpo", "grpo", "rloo", "kto", "gkd"], "--method": ["full", "lora", "qlora"],
    "--backend": ["single", "ddp", "deepspeed", "fsdp2"], "--offload": ["none", "optimizer", "all"],
    "--offload-device": ["cpu", "nvme"], "--precision": ["bf16", "bf16-mixed", "fp16-mixed", "fp32"],
    "--vllm": ["none", "colocate", "server"], "--ref-model": ["copy", "precompute", "none"],
    "--attn": ["sdpa", "eager", "flash_attention_2", "kernels-community/flash-attn2"],
    "--gpu": ["H100-80GB", "H200", "RTX-4090", "T4", "A100-40GB", "V100", "MI300X"],
    "--model": ["0.5B", "1.5B", "7B", "8B", "70B", "405B", "qwen3-30b-a3b", "gemma-2-2b", "google/gemma-2-2b",
                "mixtral-8x7b", "Qwen/Qwen2.5-7B"],
}
NUMERIC = ["--lora-r", "--seq-len", "--micro-batch", "--grad-accum", "--global-batch", "--gpus", "--nodes", "--zero",
           "--sp-size", "--cp-size", "--num-generations", "--max-completion-len", "--vllm-gpus",
           "--vllm-mem-fraction"]
SWITCHES = ["--grad-ckpt", "--no-grad-ckpt", "--liger", "--no-liger", "--packing", "--no-packing", "--unsloth",
            "--trust-remote-code"]
CONTRACT_KEYS = {"estimate": ("request", "model", "hardware", "memory", "speed", "findings"),
                 "generate": ("request", "model", "hardware", "memory", "speed", "findings", "plan", "alternatives",
                              "out", "files"),
                 "check": ("ok", "findings")}
NO_PLAN_KEYS = ("ok", "fits", "error", "hint", "request", "plan", "alternatives", "out", "files")
"""generate --json when no plan fits (exit 1): what a script reads instead of the plan."""


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def call(argv: list[str]) -> tuple[int, str, str, float]:
    """main(argv) in this process, its output captured, bounded by SIGALRM."""
    out, err = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CALL_SECONDS)
    start = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    except Hang:
        STATS["hangs"] += 1
        raise AssertionError(f"hang (> {CALL_SECONDS} s): {argv!r}") from None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    seconds = time.monotonic() - start
    SLOWEST[0] = max(SLOWEST[0], seconds)
    return rc, out.getvalue(), err.getvalue(), seconds


def judge(argv: list[str], rc: int, out: str, err: str) -> None:
    STATS["calls"] += 1
    STATS[f"exit {rc}"] += 1
    if "Traceback" in err or "Traceback" in out:
        STATS["tracebacks"] += 1
    assert rc in (0, 1, 2), f"exit {rc} for {argv!r}:\n{err[-1500:]}"
    assert "Traceback" not in err and "Traceback" not in out, f"traceback for {argv!r}:\n{err[-1500:]}"
    if rc == 2:
        lines = [line for line in err.splitlines() if line.startswith(("error:", "hint:"))]
        assert lines and lines[0].startswith("error:"), f"usage error without an error line: {argv!r}: {err!r}"
    command = argv[0]
    if rc in (0, 1) and "--json" in argv and command in CONTRACT_KEYS and out.strip():
        data = json.loads(out)
        keys = NO_PLAN_KEYS if command == "generate" and rc == 1 else CONTRACT_KEYS[command]
        for key in keys:
            assert key in data, f"{command} --json lacks {key!r}: {argv!r}"


def flag_values() -> st.SearchStrategy[list[str]]:
    choice = st.sampled_from(sorted(CHOICES)).flatmap(
        lambda flag: st.tuples(st.just(flag), st.one_of(st.sampled_from(CHOICES[flag]), st.sampled_from(CHOICES[flag]),
                                                         st.sampled_from(HOSTILE_TEXT), st.text(max_size=12))))
    # mostly plausible values (so that the search, the rules and the writer run), some boundary and hostile ones
    plausible = st.sampled_from(["1", "2", "4", "8", "16", "64", "512", "2048", "8192", "32768"])
    numeric = st.tuples(st.sampled_from(NUMERIC), st.one_of(plausible, plausible, st.sampled_from(NUMBERS),
                                                            st.integers(-5, 100000).map(str)))
    switch = st.sampled_from(SWITCHES).map(lambda s: (s,))
    return st.lists(st.one_of(choice, numeric, switch), max_size=7).map(lambda parts: [x for p in parts for x in p])


@st.composite
def argvs(draw, out_root: str):
    command = draw(st.sampled_from(["estimate", "check", "generate", "generate", "estimate", "explain", "rules",
                                    "models", "gpus"]))
    if command in ("rules", "models", "gpus"):
        return [command] + draw(st.sampled_from([[], ["--json"], ["--matrix"], ["--bogus"]]))
    if command == "explain":
        return [command, draw(st.one_of(st.sampled_from(["SP001", "MEM001", "sp001", "XX999", ""]),
                                        st.sampled_from(HOSTILE_TEXT)))]
    argv = [command]
    if draw(st.integers(0, 9)):
        argv += ["--model", draw(st.sampled_from(CHOICES["--model"]))]
    argv += draw(flag_values())
    if draw(st.booleans()):
        argv += ["--gpu", draw(st.sampled_from(CHOICES["--gpu"]))]
    if draw(st.booleans()):
        argv.append("--json")
    if command == "generate":
        argv += ["--out", os.path.join(out_root, f"b{draw(st.integers(0, 10**9))}")]
        if draw(st.booleans()):
            argv.append("--force")
    return argv


OUT_ROOT = tempfile.mkdtemp(prefix="trl-advisor-fuzz-")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=False)
@given(argv=argvs(OUT_ROOT))
def test_random_command_lines(argv):
    rc, out, err, _ = call(argv)
    judge(argv, rc, out, err)


# ---------------------------------------------------------------------------------------------- mutated files

HARDWARE = sorted((REPO / "tests/fixtures/hardware").glob("*.json"))
JSON_VALUES = [None, True, False, 0, -1, 1024, 2**63, 1e308, "eight", "", [], [2], {}, {"a": 1}, "NaN", 1.5]


def _mutate_json(data, rng: random.Random, depth: int = 0):
    """Replace one value somewhere in the document by a random JSON value, or drop a key."""
    if isinstance(data, dict) and data and depth < 6:
        key = rng.choice(sorted(data, key=str))
        if rng.random() < 0.15:
            data.pop(key)
        elif rng.random() < 0.6 and isinstance(data[key], (dict, list)):
            _mutate_json(data[key], rng, depth + 1)
        else:
            data[key] = rng.choice(JSON_VALUES)
    elif isinstance(data, list) and data and depth < 6:
        i = rng.randrange(len(data))
        if isinstance(data[i], (dict, list)) and rng.random() < 0.7:
            _mutate_json(data[i], rng, depth + 1)
        else:
            data[i] = rng.choice(JSON_VALUES)
    return data


def _mutate_text(text: str, rng: random.Random) -> str:
    ops = rng.randrange(4)
    if ops == 0 and text:
        cut = rng.randrange(len(text))
        return text[:cut]
    if ops == 1 and text:
        i = rng.randrange(len(text))
        return text[:i] + rng.choice(["\x00", "\n", "{", "}", "[", ":", "'", '"', "*", "&a", "\udcff", "9" * 400]) \
            + text[i:]
    if ops == 2:
        return text.replace("8", rng.choice(["-1", "0", "1e400", "99999999999", "nan", "[8]", '"eight"']), 1)
    return text + rng.choice(["\n!!python/object:os.system x", "\na: &a [*a]", "\n" + "[" * 3000, "\x80\xff"])


@settings(max_examples=max(20, EXAMPLES // 3), deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), which=st.sampled_from(HARDWARE), command=st.sampled_from(["estimate",
                                                                                                  "generate"]))
def test_mutated_hardware_files(seed, which, command):
    rng = random.Random(seed)
    data = _mutate_json(json.loads(which.read_text()), rng)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hw.json"
        text = json.dumps(data)
        if rng.random() < 0.3:
            text = _mutate_text(text, rng)
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        argv = [command, "--model", "0.5B", "--hardware", str(path), "--json"]
        if command == "generate":
            argv += ["--out", str(Path(tmp) / "b")]
        rc, out, err, _ = call(argv)
        judge(argv, rc, out, err)


REFERENCE = sorted(p for p in (REPO / "generated/reference").iterdir() if p.is_dir())


@settings(max_examples=max(20, EXAMPLES // 3), deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), which=st.sampled_from(REFERENCE))
def test_mutated_bundles(seed, which):
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "b"
        shutil.copytree(which, bundle)
        for _ in range(rng.randint(1, 3)):
            victim = rng.choice(sorted(p for p in bundle.iterdir() if p.is_file()))
            text = victim.read_text(encoding="utf-8", errors="surrogateescape")
            if victim.suffix == ".json" and rng.random() < 0.6:
                try:
                    text = json.dumps(_mutate_json(json.loads(text), rng))
                except ValueError:
                    pass
            else:
                text = _mutate_text(text, rng)
            victim.write_text(text, encoding="utf-8", errors="surrogateescape")
        argv = ["check", "--bundle", str(bundle), "--json"]
        rc, out, err, _ = call(argv)
        judge(argv, rc, out, err)


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    shutil.rmtree(OUT_ROOT, ignore_errors=True)
    path = os.environ.get("FUZZ_REPORT")
    if path:
        Path(path).write_text(json.dumps({"tracebacks": 0, "hangs": 0, **STATS,
                                          "slowest_call_seconds": round(SLOWEST[0], 3)}, indent=2,
                                         sort_keys=True) + "\n", encoding="utf-8")
