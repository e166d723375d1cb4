"""The `trl-advisor` command line: argument parsing, dispatch, and the one place that maps errors to exit codes.

Imports of the engine happen inside the command functions, so `trl-advisor --help` stays fast (no pydantic, no
torch, no textual at start-up).
"""

from __future__ import annotations

import argparse
import decimal
import json
import math
import os
import re
import sys
from collections.abc import Callable, Sequence

from advisor import __version__
from advisor.core.errors import AdvisorError, ExitCode

EPILOG = """examples:
  trl-advisor generate --model 70B --gpus 8 --gpu H100-80GB
  trl-advisor estimate --model Qwen/Qwen2.5-7B --method lora --seq-len 2048 --micro-batch 4 --gpu H200
  trl-advisor check --model qwen2.5-7b --gpus 8 --gpu H100-80GB --sp-size 7
  trl-advisor probe --json > hw.json   # then plan elsewhere with --hardware hw.json
"""


_ASCII_INT = re.compile(r"-?[0-9]+")
_ASCII_NUMBER = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
"""What a flag's number may look like. Python's int() and float() also take '1_0', ' 8 ', '+4' and digits of other
scripts ('٨'), and float() 'nan' and 'inf': none is a number a user means on a command line, so each is refused
with the flag's own message rather than read as something else."""


def _positive_int(text: str) -> int:
    if not _ASCII_INT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(text)


def _count(text: str) -> int:
    """A job size: a whole number, also written as 1e9 or 2.5e9 (read exactly, as a decimal: no float rounding)."""
    if _ASCII_INT.fullmatch(text):
        return int(text)
    if not _ASCII_NUMBER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a whole number (1000000000 or 1e9), got {text!r}")
    try:
        value = decimal.Decimal(text)
    except decimal.InvalidOperation:
        raise argparse.ArgumentTypeError(f"expected a whole number (1000000000 or 1e9), got {text!r}") from None
    if not value.is_finite() or value != value.to_integral_value() or abs(value.adjusted()) > 30:
        raise argparse.ArgumentTypeError(f"expected a whole number (1000000000 or 1e9), got {text!r}")
    return int(value)


def _float(text: str) -> float:
    if not _ASCII_NUMBER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    return value


def add_request_flags(p: argparse.ArgumentParser, *, model_required: bool = True, where: bool = True) -> None:
    """Each flag's help names its default (the constants of advisor.resolve, so the text cannot drift from them).
The REQUEST flags of the contract, shared by estimate, check and generate. `where=False` (recommend, which
    chooses the hardware itself) keeps the hardware flags parseable, so that giving one is a clear usage error, but
    out of --help."""
    from advisor.resolve import defaults as D
    from advisor.resolve.hardware import DEFAULT_GPU

    g = p.add_argument_group("what to train")
    g.add_argument("--model", required=model_required,
                   help="catalogue id, HF repo id, size (7B, 70B), local dir or config.json, or a hub id")
    g.add_argument("--trainer", default="sft", help="sft | dpo | grpo | rloo | kto | gkd (default sft)")
    g.add_argument("--method", help="full | lora | qlora (default: generate takes the most faithful that fits; "
                   "estimate and check: full)")
    g.add_argument("--lora-r", type=_positive_int,
                   help=f"LoRA rank (all-linear targets; default {D.DEFAULT_LORA_R}, TRL's, alpha 2 x r)")
    g.add_argument("--seq-len", type=_positive_int,
                   help=f"tokens per sequence (prompt + completion; default {D.DEFAULT_SEQ_LEN}, TRL's max_length)")
    g.add_argument("--micro-batch", type=_positive_int,
                   help=f"per_device_train_batch_size (default: generate searches 1-64; estimate and check: "
                        f"{D.DEFAULT_MICRO_BATCH})")
    g.add_argument("--grad-accum", type=_positive_int,
                   help="gradient accumulation steps (default: generate, what reaches the global batch; "
                        "estimate and check: 1)")
    g.add_argument("--global-batch", type=_positive_int,
                   help="sequences per optimizer step, all GPUs: exactly this when given (default: generate, about 64, "
                        "TRL's examples' 8 GPUs x 8; estimate and check: micro-batch x grad-accum x data-parallel "
                        "GPUs)")
    g.add_argument("--trust-remote-code", action="store_true", help="allow model code from the hub (off by default)")
    h = p.add_argument_group("where")
    def shown(text: str) -> str:
        return text if where else argparse.SUPPRESS

    h.add_argument("--gpus", type=_positive_int, help=shown("GPUs per node (default: this machine's; 1 with --gpu)"))
    h.add_argument("--nodes", type=_positive_int, help=shown("number of nodes (default 1; SLURM's with --hardware)"))
    h.add_argument("--gpu", help=shown(f"catalogue GPU (H100-80GB, H200, RTX-4090...; list: trl-advisor gpus; "
                                       f"default: this machine's, else {DEFAULT_GPU})"))
    h.add_argument("--hardware", metavar="FILE", help=shown("a `trl-advisor probe --json` file"))
    k = p.add_argument_group("how (pin a knob; unpinned knobs are defaulted or searched)")
    k.add_argument("--backend", help="single | ddp | deepspeed | fsdp2")
    k.add_argument("--zero", type=_positive_int, help="DeepSpeed ZeRO stage 1-3 (0, DeepSpeed without ZeRO, is "
                   "refused: --backend ddp is the same without DeepSpeed)")
    k.add_argument("--offload", help="none | optimizer | all")
    k.add_argument("--offload-device", help="cpu | nvme")
    k.add_argument("--nvme-path", metavar="DIR",
                   help="with --offload-device nvme: the local NVMe folder DeepSpeed swaps to (absolute; default "
                        "/local_nvme)")
    k.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=None, help="gradient checkpointing")
    k.add_argument("--liger", action=argparse.BooleanOptionalAction, default=None, help="Liger Kernel")
    k.add_argument("--attn", help="sdpa | flash_attention_2 | eager | <hub kernel id>")
    k.add_argument("--precision", help="bf16 | bf16-mixed | fp16-mixed | fp32")
    k.add_argument("--packing", action=argparse.BooleanOptionalAction, default=None, help="sequence packing")
    k.add_argument("--sp-size", type=_positive_int, help="Ulysses sequence-parallel degree")
    k.add_argument("--cp-size", type=_positive_int, help="ring-attention context-parallel degree")
    k.add_argument("--unsloth", action="store_true", default=None,
                   help="use Unsloth's patched model (its own environment: trl<=1.15, transformers<=5.17; full, LoRA "
                        "or QLoRA; several GPUs by DDP or DeepSpeed ZeRO-2/3)")
    t = p.add_argument_group("GRPO / RLOO / DPO / KTO / GKD")
    t.add_argument("--num-generations", type=_positive_int,
                   help="completions per prompt (default: GRPO " + str(D.DEFAULT_NUM_GENERATIONS["grpo"]) + ", RLOO "
                        + str(D.DEFAULT_NUM_GENERATIONS["rloo"]) + ", TRL's)")
    t.add_argument("--max-completion-len", type=_positive_int,
                   help=f"completion part of --seq-len (default {D.DEFAULT_MAX_COMPLETION}, at most half of it)")
    t.add_argument("--vllm", help="none | colocate | server")
    t.add_argument("--vllm-gpus", type=_positive_int, help="GPUs per node for the vLLM server")
    t.add_argument("--vllm-mem-fraction", type=_float,
                   help=f"GPU fraction vLLM reserves in colocate mode (default {D.DEFAULT_VLLM_MEM_FRACTION}, raised "
                        "where the engine needs more)")
    t.add_argument("--ref-model", help="copy | precompute | none | bema (DPO/KTO reference)")
    t.add_argument("--teacher", metavar="MODEL", help="GKD: the teacher model (same forms as --model; required for GKD)")
    j = p.add_argument_group("job size (reports the whole run's hours and GPU-hours; give one)")
    j.add_argument("--tokens", type=_count, help="trained tokens, counted as tokens/s counts them (1e9 works)")
    j.add_argument("--steps", type=_count, help="optimizer steps (global batch x --seq-len tokens each)")


REQUEST_FIELDS = ("model", "trainer", "method", "lora_r", "gpus", "nodes", "gpu", "hardware", "seq_len", "micro_batch",
                  "grad_accum", "global_batch", "backend", "zero", "offload", "offload_device", "nvme_path", "grad_ckpt", "liger",
                  "attn", "precision", "packing", "sp_size", "cp_size", "unsloth", "num_generations",
                  "max_completion_len", "vllm", "vllm_gpus", "vllm_mem_fraction", "ref_model", "teacher",
                  "trust_remote_code", "tokens", "steps")


NEGATABLE_FLAGS = frozenset({"grad_ckpt", "liger", "packing"})
"""REQUEST switches with a --no-* form (BooleanOptionalAction, default None): False is a value the user gave."""


def request_from_args(args: argparse.Namespace):
    from advisor.core.request import Request

    values = {name: getattr(args, name) for name in REQUEST_FIELDS}
    for name, value in values.items():
        if isinstance(value, str) and not value.strip():
            # an empty value is not the flag left out: `--gpu ""` from a script whose variable was unset
            flag = "--" + name.replace("_", "-")
            raise AdvisorError(f"{flag} is empty", hint=f"give {flag} a value, or leave the flag out")
    return Request(**values)


def _print_json(data) -> None:
    _write_stdout(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def _write_stdout(text: str) -> None:
    """Write a command's data to stdout, flushed. A reader that stops early (`trl-advisor check ... | head -1`)
    closes the pipe: the rest of the output is dropped and the command still ends with its own exit code, so that a
    pipeline run with `set -o pipefail` reads "findings" (1) as findings, not as a clean 0."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()


def _write_stderr(text: str) -> None:
    """A diagnostic line on stderr. Its reader may be gone too (`trl-advisor ... 2>&1 | head -1`): the line is
    dropped then, so that the exit code, the one thing left for the caller, stays the command's own rather than
    Python's 1 for an exception raised while reporting the error."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except BrokenPipeError:
        _point_at_null(sys.stderr)
    except (OSError, ValueError):  # a full disk under `2> file`, a closed stream: nothing better to do
        pass


def _discard_stdout() -> None:
    _point_at_null(sys.stdout)


def _point_at_null(stream) -> None:
    """Point a standard stream's descriptor at the null device once its reader is gone: later writes, and the flush
    at interpreter exit, succeed silently instead of raising BrokenPipeError again or printing "Exception ignored"
    (the approach of the Python documentation, library/signal.html, "Note on SIGPIPE")."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # no null device, or a stream without a descriptor (in memory)
        pass


def _note(text: str) -> None:
    _write_stderr(f"note: {_one_line(text)}\n")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _emit(text: str) -> None:
    """A human report on stdout. Reports quote values from user files (a YAML key, a model name): control characters
    and bidirectional overrides among them are shown escaped, so that no file can move the cursor or recolour the
    terminal of whoever runs `check`; newlines and tabs are the report's own layout."""
    text = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    _write_stdout(text.encode("utf-8", "backslashreplace").decode("utf-8"))


# ---- commands -------------------------------------------------------------------------------------------------

def cmd_probe(args) -> int:
    import hw_probe

    report = hw_probe.probe(output_dir=args.out_dir)
    if args.json:
        _write_stdout(report.to_json() + "\n")
    else:
        from hw_probe.render import render_text

        _emit(render_text(report) + "\n")
    return ExitCode.OK


def cmd_models(args) -> int:
    from advisor.catalog import all_models

    models = all_models()
    if args.json:
        _print_json([{**m.to_dict(), "params": m.params, "active_params": m.active_params}
                     for m in models])
        return ExitCode.OK
    # "--model" column: the size alias that names the row (`--model 8B`); most rows have none
    rows = [("id", "--model", "params", "layers", "hidden", "heads/kv", "vocab", "hf id")]
    for m in models:
        rows.append((m.id, m.size or "-", f"{m.params / 1e9:.2f}B", str(m.layers), str(m.hidden),
                     f"{m.heads}/{m.kv_heads}", str(m.vocab), m.hf_id))
    _emit(_table(rows))
    return ExitCode.OK


def cmd_gpus(args) -> int:
    from advisor.catalog import all_gpus

    gpus = all_gpus()
    if args.json:
        _print_json([g.to_dict() for g in gpus])
        return ExitCode.OK
    # dense 16-bit tensor peak: bf16 where the GPU has it, else fp16 (V100, T4: no bf16 tensor cores), marked so;
    # "-" where a GPU has no such unit or link, not a 0 that reads as a measured figure
    rows = [("id", "memory", "16-bit TFLOP/s", "fp8 TFLOP/s", "HBM GB/s", "NVLink GB/s", "cc", "name")]
    for g in gpus:
        sixteen = (f"{g.bf16_tflops:g}" if g.bf16_tflops else f"{g.fp16_tflops:g} (fp16)" if g.fp16_tflops else "-")
        rows.append((g.id + ("" if g.supported else " (plan only)"), f"{g.memory_gib:.0f} GiB", sixteen,
                     f"{g.fp8_tflops:g}" if g.fp8_tflops else "-", f"{g.mem_bw_gbps:g}",
                     f"{g.nvlink_gbps:g}" if g.nvlink_gbps else "-", g.compute_capability, g.name))
    _emit(_table(rows))
    return ExitCode.OK


def cmd_estimate(args) -> int:
    from advisor.check import estimate_request, render_estimate

    result = estimate_request(request_from_args(args))
    for note in result.get("notes", []):
        _note(note)
    if args.json:
        _print_json(result)
    else:
        _emit(render_estimate(result) + "\n")
    return ExitCode.OK


def cmd_check(args) -> int:
    import rules
    from advisor import check

    if args.bundle and args.fix:
        raise AdvisorError("--fix corrects a request, not a bundle's files",
                           hint="check the request with its flags and --fix, then generate the bundle again")
    if args.bundle:
        # REQUEST flags fill what the files lack and override what they state (each override is a finding)
        flags = {name: getattr(args, name) for name in REQUEST_FIELDS if name not in ("model", "hardware")}
        # a flag is given when it is not None; False counts for the --no-* switches only (0 is a value: --zero 0)
        given = [n for n, v in flags.items() if v is not None and (v is not False or n in NEGATABLE_FLAGS)]
        request = request_from_args(args) if given or args.model is not None else None
        if request is not None and request.model is None:
            from dataclasses import replace

            request = replace(request, model="")
        report = check.check_bundle(args.bundle, hardware=args.hardware, request=request)
    else:
        if not args.model:
            raise AdvisorError("check needs --model (or --bundle DIR)", hint="trl-advisor check --model 7B --gpus 8")
        if args.trainer is None:
            args.trainer = "sft"
        if args.fix:
            return _check_fixed(args)
        report = check.check_request(request_from_args(args))
    for note in getattr(report, "notes", []) or []:
        _note(note)
    if args.json:
        _print_json(report.to_json())
    elif args.bundle:
        _emit(check.render_bundle_check(report))
    else:
        _emit(rules.render_check(report).rstrip("\n") + "\n")
    return ExitCode.OK if report.ok else ExitCode.FINDINGS


def _check_fixed(args) -> int:
    """check --fix: the rules' automatic fixes applied to the request until it passes or none applies."""
    import rules
    from advisor import check
    from advisor.autofix import apply_auto_fixes
    from advisor.bundle.render import recreate_command

    outcome = apply_auto_fixes(request_from_args(args), check.check_request)
    report = outcome.report
    command = recreate_command(report.plan, report.model, report.target, outcome.request)
    for note in getattr(report, "notes", []) or []:
        _note(note)
    if args.json:
        _print_json({**report.to_json(), "auto_fixed": [a.to_dict() for a in outcome.applied],
                     "fixed_request": outcome.request.pinned(), "generate": command,
                     "stopped": outcome.stopped or None})
        return ExitCode.OK if report.ok else ExitCode.FINDINGS
    lines = [f"auto-fix  {a.rule}: {a.knob.replace('_', '-')} {a.before!r} -> {a.after!r}" for a in outcome.applied]
    if not outcome.applied:
        lines.append("auto-fix  nothing to change" if report.ok else "auto-fix  no automatic fix applies")
    if outcome.stopped:
        lines.append(f"stopped   {outcome.stopped}")
    _emit("\n".join(lines) + "\n\n" + rules.render_check(report).rstrip("\n") + "\n"
          + (f"\nnext      {command}\n" if report.ok else ""))
    return ExitCode.OK if report.ok else ExitCode.FINDINGS


def cmd_generate(args) -> int:
    from advisor.bundle.generate import generate

    if args.out is not None and not args.out.strip():
        raise AdvisorError("--out is empty", hint="name the folder to write, or leave --out out for the default")
    try:
        outcome = generate(request_from_args(args), out=args.out, force=args.force)
    except AdvisorError as exc:
        if args.json and exc.exit_code == ExitCode.FINDINGS:
            # a script reads "no plan" from stdout as it reads a plan: the contract's keys where they mean something
            _print_json({"ok": False, "fits": False, "error": exc.message, "hint": exc.hint, "plan": None,
                         "out": None, "files": [], **exc.details})
        raise
    for note in outcome.notes:
        _note(note)
    try:
        if args.json:
            _print_json(outcome.result)
        else:
            _emit(outcome.render() + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        raise  # a reader that stopped early (`| head`): main treats it as done
    except OSError as exc:  # the bundle is on disk: say so, not only "No space left on device"
        where = outcome.result.get("out", "the output folder")
        raise AdvisorError(f"the bundle was written to {where}, but its report could not be written to stdout: "
                           f"{exc.strerror or type(exc).__name__}",
                           hint="the bundle is complete (its README.md has the report); to write it again pass "
                                "--force") from None
    return ExitCode.OK


def cmd_recommend(args) -> int:
    from advisor.catalog.prices import parse_price_flags
    from advisor.recommend import recommend, recommendation_json, render_recommendation

    limits = {k: v for k, v in (("max_gpus", args.max_gpus), ("max_nodes", args.max_nodes)) if v is not None}
    req = request_from_args(args)
    try:
        rec = recommend(req, gpu_types=args.gpu_types.split(",") if args.gpu_types is not None
                        else None, prices=parse_price_flags(args.price or ()),
                        budget_usd=args.budget_usd, deadline_hours=args.deadline_hours, sort=args.sort, **limits)
    except AdvisorError as exc:
        if args.json and exc.exit_code == ExitCode.FINDINGS:
            # nothing feasible is an answer a script reads from stdout too (CONTRACT.md: exit 1, the same keys)
            _print_json({"ok": False, "error": exc.message, "hint": exc.hint, "request": req.pinned(),
                         "options": []})
        raise
    if args.json:
        _print_json(recommendation_json(rec))
    else:
        _emit(render_recommendation(rec, show_all=args.all) + "\n")
    # a budget or deadline no option meets is "nothing feasible" for scripts (exit 1), with the table still shown
    missed = (args.budget_usd is not None and rec.within_budget is None) or (
        args.deadline_hours is not None and rec.within_deadline is None)
    return ExitCode.FINDINGS if missed else ExitCode.OK


def cmd_explain(args) -> int:
    import rules
    from advisor.check import explain_check_finding

    _emit((explain_check_finding(args.rule_id) or rules.explain(args.rule_id)) + "\n")
    return ExitCode.OK


def cmd_rules(args) -> int:
    import rules

    if args.matrix:
        data = rules.compat_matrix()
        if args.json:
            _print_json(data)
        else:
            _emit(rules.render_matrix(data) + "\n")
        return ExitCode.OK
    if args.json:
        _print_json(rules.rules_json())
    else:
        _emit(rules.render_rules() + "\n")
    return ExitCode.OK


def cmd_verify(args) -> int:
    from advisor.verify import verify

    outcome = verify(args.dir, steps=args.steps, random_init=args.random_init, synthetic_data=args.synthetic_data,
                     timeout_seconds=args.timeout, full_steps=args.full_steps, dry_run=args.dry_run)
    if args.json:
        _print_json(outcome.to_json())
    else:
        _emit(outcome.render() + "\n")
    for path in outcome.reports:
        _note(f"report {path}" if not path.startswith("not written") else path)
    if outcome.interrupted:
        return 130  # as a shell reports a command ended by Ctrl-C (128 + SIGINT)
    if args.dry_run:
        # nothing ran, so only the files can fail here: this machine (no GPU, other packages) is no reason for exit 1,
        # a bundle whose files are wrong wherever it runs is (CONTRACT.md: verify exits 1 on a fail)
        broken = [s for s in outcome.steps if s.name in DRY_RUN_FILE_STEPS and s.status == "fail"]
        return ExitCode.FINDINGS if broken else ExitCode.OK
    return ExitCode.OK if outcome.passed else ExitCode.FINDINGS


DRY_RUN_FILE_STEPS = ("bundle", "consistency", "rules")
"""verify's steps that judge the bundle's files alone (advisor/verify/session.py), not the machine it runs on."""


def cmd_wizard(args) -> int:
    """The wizard, with the REQUEST flags filled in (`args` None: bare `trl-advisor`). It needs a terminal on both
    stdin and stdout; without one, a usage error (exit 2), never a screen written into a pipe."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # one line and a hint, as every usage error (a script's log gets no help page)
        raise AdvisorError("the wizard needs a terminal: stdin and stdout are not both one",
                           hint="run it in a terminal, or give a command (probe, models, gpus, estimate, check, "
                                "generate, recommend, verify, explain, rules), e.g. trl-advisor generate --model 8B "
                                "--gpus 8 --gpu H100-80GB; `trl-advisor --help` lists them")
    request = None
    if args is not None:
        from advisor.resolve import check_request

        request = request_from_args(args)
        if request.model is None:
            request = request.with_(model="")  # the wizard asks for it
        check_request(request)  # a value wrong whatever the hardware: the same error as generate, before the screen
    from tui import run_wizard

    return run_wizard(request)


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"


# ---- parser -----------------------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line plus a hint, exit 2 (CONTRACT.md), not a usage dump."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise AdvisorError(message, hint=f"see `{self.prog} --help`")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="trl-advisor", description="Plan, generate and verify Hugging Face TRL post-training runs "
                "for the GPUs you have. With no command on a terminal: the interactive wizard.",
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"trl-advisor {__version__}")
    p.add_argument("--debug", action="store_true", help="print the traceback of an internal error (exit 3)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, func: Callable, help_text: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(func=func)
        return sp

    sp = command("probe", cmd_probe, "this machine: GPUs, links, memory, host, software, cluster")
    sp.add_argument("--json", action="store_true", help="machine-readable report (save it for --hardware)")
    sp.add_argument("--out-dir", default=".", help="folder whose free disk space to report")
    for name, func, text in (("models", cmd_models, "the model catalogue"), ("gpus", cmd_gpus, "the GPU catalogue")):
        sp = command(name, func, text)
        sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp = command("estimate", cmd_estimate, "memory and speed of one configuration (nothing searched)")
    add_request_flags(sp)
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp = command("check", cmd_check, "run every rule against a configuration or an existing bundle")
    add_request_flags(sp, model_required=False)
    sp.set_defaults(trainer=None)  # with --bundle, only a --trainer the user gives overrides the files (default sft)
    sp.add_argument("--bundle", metavar="DIR", help="check the plan the files describe (ds_config.json, accelerate "
                    "YAML, train.py CONFIG, TRL YAML, requirements.txt) against the rules and the estimate; "
                    "REQUEST flags fill what the files lack and override what they state")
    sp.add_argument("--fix", action="store_true",
                    help="apply the rules' automatic fixes to the request, one error at a time, and print the "
                         "corrected request's findings and the generate line that runs it (nothing is written)")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp = command("generate", cmd_generate, "search the plans, pick the fastest that fits, write the bundle")
    add_request_flags(sp)
    sp.add_argument("--out", metavar="DIR", help="output folder (default generated/<name>/)")
    sp.add_argument("--force", action="store_true", help="replace an existing output folder")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp = command("recommend", cmd_recommend, "which GPUs to rent for a job (--tokens N or --steps N): every "
                 "catalogue GPU type and count planned, ranked by time and cost")
    add_request_flags(sp, where=False)
    r = sp.add_argument_group("what to rent (no --gpu, --gpus, --nodes or --hardware: recommend chooses them)")
    r.add_argument("--gpu-types", metavar="A,B,...", help="GPU types to consider (default: every supported one)")
    r.add_argument("--max-gpus", type=_positive_int, help="most GPUs of one type (default 64: 8 nodes of 8)")
    r.add_argument("--max-nodes", type=_positive_int, help="most nodes of 8 GPUs (default 8)")
    r.add_argument("--price", action="append", metavar="GPU=USD",
                   help="USD per GPU-hour for a GPU type, replacing the reference price (repeatable)")
    r.add_argument("--budget-usd", type=_float, help="also pick the fastest option costing at most this")
    r.add_argument("--deadline-hours", type=_float, help="also pick the cheapest option done within this")
    r.add_argument("--sort", default="time", help="time | cost: the table's order (default time)")
    r.add_argument("--all", action="store_true", help="list every feasible option, not only the front and picks")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp = command("explain", cmd_explain, "a rule's documentation")
    sp.add_argument("rule_id", metavar="RULE_ID")
    sp = command("rules", cmd_rules, "all rules, or the compatibility matrix")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp.add_argument("--matrix", action="store_true", help="the compatibility matrix")
    sp = command("verify", cmd_verify, "run a bundle briefly on the GPUs here and compare with its predictions")
    sp.add_argument("dir", nargs="?", default=".", metavar="DIR")
    sp.add_argument("--steps", type=_positive_int, default=None,
                    help="optimizer steps of the run (default: warm-up + 4 timed steps; 10 with --full-steps)")
    sp.add_argument("--random-init", action="store_true", help="random weights from the recorded architecture")
    sp.add_argument("--synthetic-data", action="store_true", help="generated tokens, local tokenizer (offline)")
    sp.add_argument("--full-steps", action="store_true",
                    help="run the plan's own gradient accumulation (default: quick mode, fewer micro-batches per "
                         "step, the step time scaled back to the plan)")
    sp.add_argument("--dry-run", action="store_true",
                    help="make the checks that start nothing and print the command, environment and checks a run "
                         "would make; exit 0, or 1 when the files fail their own checks (bundle, consistency, "
                         "rules), wherever they would run")
    sp.add_argument("--timeout", type=_positive_int, default=1200, metavar="SECONDS",
                    help="stop the run after this long (default 1200)")
    sp.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    sp = command("wizard", cmd_wizard, "the interactive wizard, with the REQUEST flags filled in (needs a terminal)")
    add_request_flags(sp, model_required=False)
    p.command_names = tuple(sub.choices)  # for _parse's hint
    return p


def _check_text_arguments(args: argparse.Namespace) -> None:
    """Every text flag, whatever the command: no control characters or non-UTF-8 bytes (they would end a comment
    line in a generated script, or garble a terminal). Values are checked here once, before any command runs."""
    from advisor.core.request import text_problem

    for name, value in vars(args).items():
        if isinstance(value, str):
            problem = text_problem(value)
            flag = name.upper() if name in ("dir", "rule_id") else "--" + name.replace("_", "-")
            if problem:
                raise AdvisorError(f"{flag} {problem}", hint="pass the value without control characters or newlines")
            if name in PATH_ARGUMENTS and not value.strip():
                # `verify "$DIR"` with DIR unset must not mean the current folder, nor --bundle "" "no --bundle"
                raise AdvisorError(f"{flag} is empty", hint=f"give {flag} a path, or leave it out")


PATH_ARGUMENTS = frozenset({"dir", "bundle", "hardware", "out_dir"})
"""Arguments that name a file or folder: an empty one is a usage error, never the current folder or "not given"
(generate says so of --out itself, with its default)."""


def _internal_error(exc: BaseException, argv: Sequence[str], debug: bool) -> int:
    """An unexpected exception: one line on stderr and the traceback in a file it names (or on stderr with --debug),
    exit 3 (CONTRACT.md), so that a script can tell a crash from a verdict (1) or a usage error (2)."""
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    summary = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")[:200]
    if debug:
        _write_stderr(text)
        _write_stderr(f"internal error: {summary}; please report it with the command line\n")
        return int(ExitCode.INTERNAL)
    where = "(could not be written)"
    try:
        fd, path = tempfile.mkstemp(prefix="trl-advisor-crash-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(f"trl-advisor {__version__}\ncommand: {' '.join(map(repr, argv))}\n\n{text}")
        where = path
    except OSError:
        pass
    _write_stderr(f"internal error: {summary}; traceback in {where}; please report it with the command line\n")
    return int(ExitCode.INTERNAL)


def _tolerate_unencodable_output() -> None:
    """stdout and stderr may have an encoding that cannot hold a user's text (PYTHONIOENCODING=ascii, a Latin-1
    terminal, a C locale) while reports quote folder names in any alphabet: such characters are written as
    backslash escapes instead of ending the run in a UnicodeEncodeError. Every write is covered, argparse's and the
    wizard's included. JSON is unaffected: json.dumps writes ASCII only (ensure_ascii), so it stays valid JSON."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # an in-memory stream (StringIO) encodes nothing
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or detached stream: its writes fail as they would have
                pass


MAX_ARGUMENTS = 2000
"""The most command-line words parsed. The longest real command line (every REQUEST flag, a --price for every
catalogue GPU) is a few hundred words; argparse's time grows with the square of the number of options (3.11
recomputes the last option's index for each one), so 80,000 words, well within the kernel's ARG_MAX, took 30 s:
a hang to whoever runs it."""


def _stand_in_for_closed_streams() -> bool:
    """Open the null device on each standard stream the caller closed (`trl-advisor ... >&-`, `<&-`, `2>&-`);
    True when stdout was one of them.

    Python sets sys.stdin/stdout/stderr to None for a closed descriptor, and every later use (the wizard's
    isatty, a report, an error line) then raised AttributeError: exit 3 for a closed stdin or stdout, and a lost
    traceback with exit 1 (read by scripts as "findings") for a closed stderr. Holding descriptors 0-2 also keeps
    a file opened later (a bundle file, a child's log) from taking the number 1 or 2, where anything written to
    stdout or stderr, by us or by a child process, would land inside it."""
    closed_stdout = False
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if getattr(sys, name) is not None:
            continue
        closed_stdout = closed_stdout or name == "stdout"
        try:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            setattr(sys, name, open(fd, mode, encoding="utf-8", errors="backslashreplace", closefd=False))
        except OSError:  # no /dev/null: nothing better to stand in; the stream stays None
            continue
    return closed_stdout


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    stdout_closed = _stand_in_for_closed_streams()
    _tolerate_unencodable_output()
    # --debug anywhere: print tracebacks of internal errors instead of writing them to a file
    debug = "--debug" in argv or os.environ.get("TRL_ADVISOR_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    try:
        if stdout_closed:  # refused before anything runs: a bundle written whose report is lost is worse
            raise AdvisorError("stdout is closed: there is nowhere to write the report",
                               hint="run it with stdout open; redirect it to a file, or to /dev/null to discard it")
        if len(argv) > MAX_ARGUMENTS:
            raise AdvisorError(f"{len(argv):,} command-line arguments: at most {MAX_ARGUMENTS:,} are read",
                               hint="give each flag once; see `trl-advisor --help`")
        parser = build_parser()
        if not argv:
            return cmd_wizard(None)  # on a terminal the wizard; elsewhere a usage error (exit 2)
        args = _parse(parser, argv)
        if not getattr(args, "func", None):
            raise AdvisorError("no command given", hint="see `trl-advisor --help`")
        _check_text_arguments(args)
        return int(args.func(args))
    except AdvisorError as e:
        _write_stderr(f"error: {_one_line(e.message)}\n" + (f"hint: {_one_line(e.hint)}\n" if e.hint else ""))
        return int(e.exit_code)
    except KeyboardInterrupt:
        _write_stderr("interrupted\n")
        return 130
    except BrokenPipeError:  # a write outside _write_stdout (argparse's --help) to a reader that stopped early
        _discard_stdout()
        return ExitCode.OK
    except OSError as e:  # a file we were told to read or write: say which, no traceback
        name = _one_line(str(e.filename)) if e.filename else ""
        _write_stderr(f"error: {e.strerror or type(e).__name__}" + (f": {name}" if name else "") + "\n"
                      "hint: check the path, its permissions and the free disk space\n")
        return int(ExitCode.USAGE)
    except SystemExit as e:  # argparse --help / --version, or a signal turned into an exit
        return int(e.code) if isinstance(e.code, int) else (0 if e.code is None else int(ExitCode.USAGE))
    except Exception as e:  # noqa: BLE001 - the one place every unexpected error becomes exit 3
        return _internal_error(e, argv, debug)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """parse_args, with a flag the command does not take pointed at that command's own help: argparse reports
    unrecognized arguments from the top-level parser, whose help lists no command's flags."""
    try:
        return parser.parse_args(argv)
    except AdvisorError as e:
        command = next((a for a in argv if a in getattr(parser, "command_names", ())), None)
        if command and e.message.startswith("unrecognized arguments"):
            e.hint = f"see `trl-advisor {command} --help`"
        raise


def _one_line(text: str) -> str:
    """A message as one printable line: user values inside it (a GPU name from a hardware file, a model id from a
    bundle) may hold anything, so control characters and bidirectional overrides are shown escaped, as on stdout
    (_emit): no file can retitle, clear or recolour the terminal through an error message."""
    flat = " ".join(str(text)[:MAX_LINE_CHARS * 4].encode("utf-8", "backslashreplace").decode("utf-8").split())
    flat = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), flat)
    return flat if len(flat) <= MAX_LINE_CHARS else flat[:MAX_LINE_CHARS] + f" ... ({len(flat):,} characters)"


MAX_LINE_CHARS = 600
"""The longest error, hint or note line printed: a value from a file or the command line (a 100,000-character
path) is cut, with its length, instead of echoed whole."""
