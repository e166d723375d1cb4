"""A default that `--help` names is the default the command uses: each figure in a flag's help is held to the constant
or the behaviour behind it, and `estimate` with nothing pinned takes what the help says it takes."""

from __future__ import annotations

import argparse
import json

from advisor.cli import build_parser, main


def _help(command: str) -> dict[str, str]:
    """flag -> its help text, for one subcommand."""
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            sub = action.choices[command]
            return {s: " ".join((a.help or "").split()) for a in sub._actions for s in a.option_strings}
    raise AssertionError("no subcommands")


def _default(command: str, flag: str):
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return next(a.default for a in action.choices[command]._actions if flag in a.option_strings)
    raise AssertionError("no subcommands")


def test_recommend_limits_and_order():
    from advisor.recommend.hardware import GPUS_PER_NODE
    from advisor.recommend.sweep import DEFAULT_MAX_GPUS, DEFAULT_MAX_NODES

    h = _help("recommend")
    assert f"(default {DEFAULT_MAX_GPUS}: {DEFAULT_MAX_NODES} nodes of {GPUS_PER_NODE})" in h["--max-gpus"]
    assert f"most nodes of {GPUS_PER_NODE} GPUs (default {DEFAULT_MAX_NODES})" in h["--max-nodes"]
    assert f"(default {_default('recommend', '--sort')})" in h["--sort"]


def test_verify_steps_and_timeout():
    from advisor.verify.limits import DEFAULT_STEPS, DEFAULT_TIMEOUT_SECONDS, QUICK_TIMED_STEPS

    h = _help("verify")
    assert f"warm-up + {QUICK_TIMED_STEPS} timed steps; {DEFAULT_STEPS} with --full-steps" in h["--steps"]
    assert _default("verify", "--timeout") == DEFAULT_TIMEOUT_SECONDS
    assert f"(default {DEFAULT_TIMEOUT_SECONDS})" in h["--timeout"]


def test_request_figures_are_the_constants():
    from advisor.bundle.render import NVME_PATH
    from advisor.search.candidates import DEFAULT_GLOBAL_BATCH, MICRO_BATCHES

    h = _help("generate")
    assert f"generate searches {min(MICRO_BATCHES)}-{max(MICRO_BATCHES)}" in h["--micro-batch"]
    assert f"(default: generate, about {DEFAULT_GLOBAL_BATCH}," in h["--global-batch"]
    assert f"default {NVME_PATH})" in h["--nvme-path"]
    assert f"(default {_default('generate', '--trainer')})" in h["--trainer"]


def _estimate(capsys, *argv) -> dict:
    assert main(["estimate", "--model", "0.5B", "--gpu", "H100-80GB", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["request"]


def test_estimate_takes_the_defaults_its_help_names(capsys):
    from advisor.resolve import defaults as D

    h = _help("estimate")
    req = _estimate(capsys)
    assert "estimate and check: full" in h["--method"] and req["method"] == "full"
    assert f"estimate and check: {req['micro_batch']})" in h["--micro-batch"]
    assert "estimate and check: 1)" in h["--grad-accum"] and req["grad_accum"] == 1
    assert f"default {req['seq_len']}," in h["--seq-len"]
    assert f"default {req['lora_r']}, TRL's, alpha 2 x r" in h["--lora-r"]
    assert "1 with --gpu" in h["--gpus"] and req["gpus"] == 1
    assert "(default 1;" in h["--nodes"] and req["nodes"] == 1
    grpo, rloo = _estimate(capsys, "--trainer", "grpo"), _estimate(capsys, "--trainer", "rloo")
    assert f"GRPO {grpo['num_generations']}, RLOO {rloo['num_generations']}" in h["--num-generations"]
    assert f"(default {grpo['max_completion_len']}, at most half of it)" in h["--max-completion-len"]
    assert _estimate(capsys, "--trainer", "grpo", "--seq-len", "600")["max_completion_len"] == 300
    colocate = _estimate(capsys, "--trainer", "grpo", "--vllm", "colocate")
    assert f"(default {colocate['vllm_mem_fraction']}," in h["--vllm-mem-fraction"]
    assert colocate["vllm_mem_fraction"] == D.DEFAULT_VLLM_MEM_FRACTION


def test_global_batch_help_says_what_estimate_takes(capsys):
    req = _estimate(capsys)
    assert req["global_batch"] == 8
    assert "estimate and check" in _help("estimate")["--global-batch"]


def test_every_zero_stage_the_help_names_is_taken(capsys):
    h = _help("estimate")["--zero"]
    low = int(h.split("stage ")[1].split("-")[0])
    code = main(["estimate", "--model", "0.5B", "--gpu", "H100-80GB", "--gpus", "2", "--zero", str(low)])
    capsys.readouterr()
    assert code == 0
