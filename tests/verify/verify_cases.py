"""Hand-built bundles, machines and fake runs for the verify tests.

The model row is Qwen2.5-0.5B's config.json; the predictions are round made-up numbers (verify compares, it does not
predict); the fake runner writes metrics/rank<k>.jsonl records in the shape train.py's PeakMemoryCallback writes
(advisor/bundle/templates/train.py.j2): a start record, then per optimizer step a `step` record (step_seconds and the peaks
so far) followed by a `log` record (the Trainer calls on_step_end before on_log), a final log with train_loss, and an
end record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from plan_defaults import build_plan

import hw_probe
from advisor.bundle.render import render_bundle
from advisor.bundle.write import write_bundle
from advisor.core.plan import Plan
from advisor.core.specs import GpuSpec, ModelSpec
from advisor.core.target import Target
from advisor.resolve import hardware as hardware_file
from advisor.verify import RunResult

GIB = 1 << 30
ROOT = Path(__file__).resolve().parents[2]
HARDWARE = ROOT / "tests" / "fixtures" / "hardware"

MODEL = ModelSpec(
    id="qwen2.5-0.5b", hf_id="Qwen/Qwen2.5-0.5B", model_type="qwen2", layers=24, hidden=896, intermediate=4864,
    heads=14, kv_heads=2, head_dim=64, vocab=151936, max_positions=32768, tied_embeddings=True, qkv_bias=True,
    source="https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json")

H100 = GpuSpec(
    id="H100-80GB", name="NVIDIA H100 80GB HBM3", memory_bytes=85520809984, bf16_tflops=989.5, fp16_tflops=989.5,
    fp8_tflops=1979.0, fp32_tflops=67.0, mem_bw_gbps=3350.0, nvlink_gbps=900.0, pcie_gen=5,
    compute_capability="9.0", source="https://www.nvidia.com/en-us/data-center/h100/")

PREDICTED_PEAK = 20 * GIB
PREDICTED_TPS = 40_000.0

INSTALLED = {"torch": "2.13.0", "transformers": "5.25.0", "trl": "1.16.0", "accelerate": "1.15.0",
             "deepspeed": "0.19.8", "peft": "0.21.2", "liger-kernel": "0.8.5", "vllm": None, "unsloth": None,
             "flash-attn": None, "bitsandbytes": "0.50.2", "kernels": None, "datasets": "5.2.0"}
"""The versions requirements.txt pins (rules/data/pins.toml), written out: a machine set up from the bundle."""


def plan(**kw) -> Plan:
    return build_plan(**{"grad_accum": 2, **kw})


def result(p: Plan, *, peak: int = PREDICTED_PEAK, tps: float = PREDICTED_TPS) -> dict:
    """A generate --json result (CONTRACT.md keys) with chosen predictions."""
    breakdown = {"weights": peak // 4, "gradients": peak // 8, "optimizer": peak // 4, "activations": peak // 4,
                 "logits": peak // 16, "other": peak - (peak // 4 * 3 + peak // 8 + peak // 16)}
    return {
        "request": {"model": MODEL.id},
        "model": {"id": MODEL.id, "params": 494032768, "trainable_params": 494032768, "layers": 24, "hidden": 896,
                  "heads": 14, "kv_heads": 2, "vocab": 151936},
        "hardware": {"gpu": "H100-80GB", "gpus_per_node": p.gpus_per_node, "nodes": p.nodes,
                     "gpu_memory_bytes": 85520809984},
        "memory": {"per_gpu_peak_bytes": peak, "per_gpu_reserved_bytes": peak + GIB,
                   "gpu_capacity_bytes": 85520809984, "fits": True, "headroom_bytes": 85520809984 - peak - GIB,
                   "breakdown_bytes": breakdown, "host_bytes": 8 * GIB},
        "speed": {"step_seconds": p.tokens_per_step / tps, "tokens_per_second": tps, "mfu": 0.3},
        "findings": [],
        "plan": {k: getattr(p, k) for k in ("backend", "zero_stage", "offload", "method", "precision", "micro_batch",
                                             "grad_accum", "grad_ckpt", "liger", "sp_size", "cp_size", "vllm_mode",
                                             "num_processes", "nodes")},
        "alternatives": [],
    }


def make_bundle(tmp_path: Path, p: Plan | None = None, *, name: str = "bundle", **result_kw) -> Path:
    p = p or plan()
    out = tmp_path / name
    target = Target(gpu=H100, gpus_per_node=p.gpus_per_node, nodes=p.nodes, intra_node_link="nvlink")
    files = render_bundle(p, MODEL, target, result(p, **result_kw))
    write_bundle(files, str(out), force=False)
    return out


def machine(fixture: str = "h100_sxm_x8_nvlink", *, gpus: int | None = None, software: dict | None = None,
            power_limit_watts: float | None = None):
    """A probe report from tests/fixtures/hardware, cut to `gpus` GPUs, with `software` (default INSTALLED) and,
    when given, every GPU's enforced power limit."""
    report = hardware_file.load_report(HARDWARE / f"{fixture}.json")
    data = report.model_dump(by_alias=True)
    if gpus is not None:
        data["gpus"] = data["gpus"][:gpus]
        data["links"] = [x for x in data["links"] if x["a"] < gpus and x["b"] < gpus]
    if power_limit_watts is not None:
        for g in data["gpus"]:
            g["power_limit_watts"] = power_limit_watts
    data["software"] = dict(INSTALLED if software is None else software)
    report = hw_probe.HardwareReport.model_validate(data)
    return lambda: report


def estimate_of(bundle: Path, grad_accum: int | None = None):
    """(memory, speed) the model predicts for the plan the bundle's files describe (at `grad_accum` when given):
    what verify compares a run with."""
    from advisor.check import read_bundle
    from advisor.model.estimate import estimate_plan

    ctx, _ = read_bundle(str(bundle))
    p = ctx.plan if grad_accum is None else ctx.plan.with_(grad_accum=grad_accum)
    return estimate_plan(ctx.model, p, ctx.target)


@dataclass
class FakeRun:
    """Stands in for `bash launch.sh ...`: writes the metrics train.py would write, and a log.

    Measurements are given outright (`peaks`, `step_seconds`) or relative to the model's estimate of the plan that
    runs (`peak_factor`, `speed_factor`: the estimate of the bundle's files at the accumulation train.py in `cwd`
    has, so a quick-mode run is measured at its own accumulation). The first step is slow, as a real first step
    is (CUDA set-up, compiles)."""

    peaks: tuple[int, ...] | None = None
    """Peak allocated bytes per rank (one entry per rank)."""
    step_seconds: tuple[float, ...] | None = None
    peak_factor: float = 1.02
    speed_factor: float = 1.0
    ranks: int = 1
    losses: tuple[float, ...] | None = None
    returncode: int = 0
    timed_out: bool = False
    log: str = "train.py: step 1\n"
    device: str = "cuda:0"
    write_metrics: bool = True
    on_policy: tuple[int, ...] | None = None
    """GKD: the micro-batches of each step that generated on-policy, as train.py records them (None: not recorded)."""
    calls: list = field(default_factory=list)

    def __call__(self, command, *, cwd, log_path, timeout_seconds):
        command = list(command)
        train_py = (Path(cwd) / "train.py").read_text(encoding="utf-8")
        self.calls.append({"command": command, "cwd": Path(cwd), "timeout_seconds": timeout_seconds,
                           "train_py": train_py, "files": sorted(p.name for p in Path(cwd).iterdir())})
        Path(log_path).write_text(self.log, encoding="utf-8")
        if self.write_metrics:
            # where train.py writes them: --metrics-dir when given, else next to train.py
            folder = Path(command[command.index("--metrics-dir") + 1]) if "--metrics-dir" in command else \
                Path(cwd) / "metrics"
            steps = int(command[command.index("--max-steps") + 1]) if "--max-steps" in command else 10
            self._metrics(folder, steps, Path(cwd), train_py)
        return RunResult(returncode=self.returncode, timed_out=self.timed_out, seconds=42.0)

    def _measurements(self, steps: int, cwd: Path, train_py: str) -> tuple[tuple[int, ...], tuple[float, ...]]:
        peaks, times = self.peaks, self.step_seconds
        if peaks is None or times is None:
            from advisor.bundle.readback import config_dict

            bundle = (cwd / "plan.json").resolve().parent
            mem, spd = estimate_of(bundle, config_dict(train_py).get("grad_accum"))
            if peaks is None:
                peaks = (int(mem.per_gpu_peak_bytes * self.peak_factor),) * self.ranks
            if times is None:
                step = spd.step_seconds * self.speed_factor
                times = (10 * step + 2.0,) + (step,) * (steps - 1)
        return peaks, tuple(times)[:steps]

    def _metrics(self, folder: Path, steps: int, cwd: Path, train_py: str) -> None:
        peaks, times = self._measurements(steps, cwd, train_py)
        folder.mkdir(parents=True, exist_ok=True)
        losses = self.losses if self.losses is not None else tuple(12.1 - 0.01 * i for i in range(len(times)))
        world = len(peaks)
        for rank, peak in enumerate(peaks):
            mem0 = {"peak_allocated_bytes": peak // 10, "peak_reserved_bytes": peak // 10 + GIB,
                    "host_peak_rss_bytes": 3 * GIB}
            records = [{"event": "start", "rank": rank, "world_size": world, "device": self.device,
                        "micro_batch": 4, "grad_accum": 2, "seq_len": 1024, **mem0}]
            for i, seconds in enumerate(times, 1):
                # the peak is reached at the first optimizer step (Adam states) and stays
                mem = {"peak_allocated_bytes": peak, "peak_reserved_bytes": peak + GIB,
                       "host_peak_rss_bytes": 3 * GIB}
                drawn = {"on_policy_micro_batches": self.on_policy[i - 1]} if self.on_policy is not None else {}
                records.append({"event": "step", "step": i, "step_seconds": seconds, **drawn, **mem})
                records.append({"event": "log", "step": i, "loss": losses[i - 1], "grad_norm": 2.5,
                                "learning_rate": 2e-5, "num_tokens": 8192.0 * i, "epoch": i / len(times)})
            records.append({"event": "log", "step": len(times), "train_runtime": 12.0,
                            "train_loss": sum(losses[:len(times)]) / max(1, len(times)), "epoch": 1.0})
            records.append({"event": "end", "step": len(times), "peak_allocated_bytes": peak,
                            "peak_reserved_bytes": peak + GIB, "host_peak_rss_bytes": 3 * GIB})
            # json.dumps as train.py writes it (NaN stays NaN, as Python's json writes it)
            (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records),
                                                      encoding="utf-8")


TRACEBACK_LOG = """\
[2026-11-29 16:43:46] [INFO] [real_accelerator.py:260:get_accelerator] Setting ds_accelerator to cuda
Using /root/.cache/torch_extensions/py312_cu130 as PyTorch extensions root...
[rank0]: Traceback (most recent call last):
[rank0]:   File "/b/train.py", line 612, in <module>
[rank0]:     main()
[rank0]:   File "/site/deepspeed/ops/op_builder/builder.py", line 710, in <genexpr>
[rank0]:     ccs = sorted(ccs, key=lambda cc: tuple(int(part.split('+')[0]) for part in cc.split('.')))
[rank0]: ValueError: invalid literal for int() with base 10: '0a'
Traceback (most recent call last):
  File "/venv/bin/accelerate", line 10, in <module>
    sys.exit(main())
  File "/site/accelerate/commands/launch.py", line 1190, in simple_launcher
    raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)
subprocess.CalledProcessError: Command '['/venv/bin/python', 'train.py', '--max-steps', '10']' returned non-zero exit status 1.
"""

OOM_LOG = """\
Traceback (most recent call last):
  File "/b/train.py", line 612, in <module>
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB
subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 1.
"""

H100_TARGET = Target(gpu=H100, gpus_per_node=1, nodes=1, intra_node_link="nvlink")
"""One H100-80GB, as the bundles of make_bundle plan for."""
