"""Where a generated bundle's optimizer step goes, timed inside the bundle's own launch.

    cd BUNDLE && BUNDLE_PHASES_OUT=phases.json \\
        accelerate launch --config_file accelerate.yaml /path/to/bench/bundle_phases.py train.py \\
        --max-steps 8 --no-save --random-init --synthetic-data

`trl-advisor verify` times a bundle from one step's end to the next (train.py's PeakMemoryCallback); the benchmark
times a step from its begin to its end inside one Python process it set up itself (bench.worker). When the two
disagree on the same configuration, this runs the bundle's train.py unchanged, under the bundle's own accelerate
launch and ds_config.json, with perf_counter wrappers around what one iteration calls: the Trainer's batch fetch
(get_batch_samples), compute_loss (the forward), accelerator.backward (with DeepSpeed: the engine's backward and,
on the last micro-batch, its step), DeepSpeedEngine.backward and .step themselves, and the logging of the step
(_maybe_log_save_evaluate); for GRPO/RLOO also the generation phase (_generate_and_score_completions, _generate,
_calculate_rewards, _get_per_token_logps_and_entropies) and each transformers generate call, synchronised, with
its batch, prompt width and the tokens it added (record["generate_calls"]). Host seconds, no synchronisation added
inside the step but around those generate calls (generation syncs every decode step anyway); each iteration ends
synchronised (the callback, as train.py's). The host's dispatch speed (bench.host_probe) is measured before and
after, so runs on different machines can be put side by side. Each step and each generate call also records what
it added to the one-time costs' counters (one_time_counts: kernels Triton compiled, the allocator's cudaMalloc and
cudaFree calls and retries), so a slow step can be told apart from a slow host. Writes one JSON document to
$BUNDLE_PHASES_OUT.

BUNDLE_PHASES_PROFILE="cprofile:5,torch:6" also profiles those optimizer steps (1-based), each from its begin to its
end: cProfile for the Python functions the host spends the step in (top functions by own time, with call counts),
torch.profiler for the ops and kernels (top ops by host time, the GPU's summed kernel time). A profiled step is
marked and its timing is the profiler's, not the bundle's.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time

TIMED_TRAINER_METHODS = ("get_batch_samples", "compute_loss", "_maybe_log_save_evaluate",
                         # GRPO/RLOO's generation phase (TRL 1.16 grpo_trainer.py / rloo_trainer.py): the whole
                         # phase, the generate call with its prompt padding, the rewards, the log-prob passes
                         "_generate_and_score_completions", "_generate", "_calculate_rewards",
                         "_get_per_token_logps_and_entropies")
TIMED_ENGINE_METHODS = ("backward", "step")
TOP = 40


def profile_plan(text: str | None) -> dict[int, str]:
    """{step: "cprofile" | "torch"} from "cprofile:5,torch:6"."""
    plan: dict[int, str] = {}
    for item in filter(None, (text or "").split(",")):
        kind, _, step = item.partition(":")
        if kind not in ("cprofile", "torch") or not step.isdigit():
            raise SystemExit(f"bundle_phases: BUNDLE_PHASES_PROFILE item {item!r} is not cprofile:N or torch:N")
        plan[int(step)] = kind
    return plan


def cprofile_top(prof, top: int = TOP) -> list[dict]:
    import pstats

    stats = pstats.Stats(prof)
    rows = []
    for (file, line, name), (_primitive, nc, tt, ct, _callers) in stats.stats.items():
        rows.append({"function": f"{os.path.basename(os.path.dirname(file))}/{os.path.basename(file)}:{line}:{name}",
                     "calls": nc, "own_s": round(tt, 6), "cumulative_s": round(ct, 6)})
    rows.sort(key=lambda r: -r["own_s"])
    return rows[:top]


def torch_top(prof, top: int = TOP) -> dict:
    events = prof.key_averages()
    ops = sorted(events, key=lambda e: -e.self_cpu_time_total)[:top]
    device_us = sum(getattr(e, "self_device_time_total", 0) or 0 for e in events)
    return {"device_kernel_s": round(device_us / 1e6, 6),
            "ops": [{"name": e.key, "calls": e.count, "self_host_s": round(e.self_cpu_time_total / 1e6, 6),
                     "host_total_s": round(e.cpu_time_total / 1e6, 6),
                     "device_s": round((getattr(e, "self_device_time_total", 0) or 0) / 1e6, 6)} for e in ops]}


def fold(events: list[tuple[str, float, float]], t_from: float, t_to: float) -> dict[str, float]:
    """Summed host seconds per kind of the calls that started in [t_from, t_to), and their count."""
    out: dict[str, float] = {}
    for kind, a, b in events:
        if t_from <= a < t_to:
            out[f"{kind}_s"] = round(out.get(f"{kind}_s", 0.0) + (b - a), 6)
            out[f"{kind}_calls"] = out.get(f"{kind}_calls", 0) + 1
    return out


def triton_cache_dir() -> str:
    """Where Triton writes the kernels it compiles (triton/runtime/cache.py: $TRITON_CACHE_DIR, else
    ~/.triton/cache): one folder per compiled kernel."""
    return os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")


def one_time_counts(torch, cuda: bool) -> dict[str, int]:
    """Counters of the one-time costs a step can pay: kernels Triton compiled so far (folders in its cache; a Liger
    kernel is compiled again for each new specialisation, e.g. an integer argument's divisibility by 16), graphs
    torch.compile traced (where torch._dynamo is loaded), and the
    caching allocator's cudaMalloc calls, cudaFree calls and retries after a failed allocation (each retry frees
    the cache and synchronises)."""
    try:
        kernels = sum(1 for e in os.scandir(triton_cache_dir()) if e.is_dir())
    except OSError:
        kernels = 0
    out = {"triton_kernels": kernels}
    dynamo = sys.modules.get("torch._dynamo.utils")
    if dynamo is not None:
        # graphs torch.compile traced so far (a recompile for a new shape is one more); read only where something
        # already imported torch._dynamo, so the count costs no import
        out["compiled_graphs"] = int(dynamo.counters["stats"]["unique_graphs"])
    if cuda:
        stats = torch.cuda.memory_stats()
        out.update(cuda_mallocs=int(stats.get("num_device_alloc", 0)), cuda_frees=int(stats.get("num_device_free", 0)),
                   alloc_retries=int(stats.get("num_alloc_retries", 0)))
    return out


def count_deltas(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What a step added to each counter of one_time_counts."""
    return {f"{k}_added": after[k] - before.get(k, 0) for k in after}


def timed(fn, kind: str, events: list):
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            events.append((kind, t0, time.perf_counter()))
    wrapper.__wrapped__ = fn
    return wrapper


def main() -> int:
    out_path = os.environ.get("BUNDLE_PHASES_OUT")
    if not out_path or len(sys.argv) < 2:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    train_py = os.path.abspath(sys.argv[1])
    sys.argv = [train_py, *sys.argv[2:]]
    sys.path.insert(0, os.path.dirname(train_py))
    import torch
    import transformers

    from bench.host_probe import host_cpus, host_probe
    from bench.verify_runs import versions

    cuda = torch.cuda.is_available()
    profiles = profile_plan(os.environ.get("BUNDLE_PHASES_PROFILE"))
    record: dict = {"train_py": train_py, "argv": sys.argv[1:], "host_probe": {"before": host_probe(torch)},
                    "cpus": host_cpus(torch), "versions": versions(), "iterations": []}
    events: list[tuple[str, float, float]] = []
    try:
        import deepspeed

        engine = deepspeed.DeepSpeedEngine
        for name in TIMED_ENGINE_METHODS:
            setattr(engine, name, timed(getattr(engine, name), f"engine_{name}", events))
    except ImportError:
        pass

    class PhaseCallback(transformers.TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
            self.t_last = time.perf_counter()
            self.counts = one_time_counts(torch, cuda)

        def on_step_begin(self, args, state, control, **kwargs):
            self.kind = profiles.get(state.global_step + 1)
            if self.kind == "cprofile":
                import cProfile

                self.prof = cProfile.Profile()
                self.prof.enable()
            elif self.kind == "torch":
                from torch.profiler import ProfilerActivity, profile

                self.prof = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else []))
                self.prof.start()
            self.t_begin = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if cuda:
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            if self.kind == "cprofile":
                self.prof.disable()
                record.setdefault("profiles", []).append({"step": state.global_step, "kind": "cprofile",
                                                          "top": cprofile_top(self.prof)})
            elif self.kind == "torch":
                self.prof.stop()
                record.setdefault("profiles", []).append({"step": state.global_step, "kind": "torch",
                                                          **torch_top(self.prof)})
            # the batch fetch of this iteration ran before on_step_begin, so the window opens at the last step's end
            # (the logging of that step, which runs after on_step_end, falls in this window too)
            counts = one_time_counts(torch, cuda)
            record["iterations"].append({"step": state.global_step, "profiled": self.kind, "iter_s": round(t1 - self.t_last, 6),
                                         "step_s": round(t1 - self.t_begin, 6), **fold(events, self.t_last, t1),
                                         **count_deltas(self.counts, counts)})
            self.counts = counts
            self.t_last = time.perf_counter()

    original_train = transformers.Trainer.train

    def train(self, *args, **kwargs):
        for name in TIMED_TRAINER_METHODS:
            if hasattr(self, name):
                setattr(self, name, timed(getattr(self, name), name, events))
        self.accelerator.backward = timed(self.accelerator.backward, "accelerator_backward", events)
        self.add_callback(PhaseCallback())
        record["trainer"] = type(self).__name__
        try:
            return original_train(self, *args, **kwargs)
        finally:
            record["host_probe"]["after"] = host_probe(torch)
            record["omp_num_threads"] = os.environ.get("OMP_NUM_THREADS")
            record["torch_threads"] = torch.get_num_threads()
            tmp = f"{out_path}.tmp{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(record, f, indent=1)
            os.replace(tmp, out_path)

    transformers.Trainer.train = train
    generate = transformers.GenerationMixin.generate

    def timed_generate(self, *args, **kwargs):
        # transformers' generate alone, with the tokens it added: its time over them is the decode step the model's
        # generation term predicts (the prefill's share is one forward of the prompts)
        if cuda:
            torch.cuda.synchronize()
        before = one_time_counts(torch, cuda)
        t0 = time.perf_counter()
        out = generate(self, *args, **kwargs)
        if cuda:
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        ids = kwargs.get("input_ids", args[0] if args else None)
        seqs = getattr(out, "sequences", out)
        if ids is not None and hasattr(seqs, "shape"):
            record.setdefault("generate_calls", []).append(
                {"seconds": round(t1 - t0, 6), "batch": int(seqs.shape[0]), "prompt_tokens": int(ids.shape[1]),
                 "new_tokens": int(seqs.shape[1] - ids.shape[1]),
                 "padded_prompts": bool(kwargs.get("attention_mask") is not None
                                        and not bool(kwargs["attention_mask"].all())),
                 **count_deltas(before, one_time_counts(torch, cuda))})
        events.append(("generate", t0, t1))
        return out

    transformers.GenerationMixin.generate = timed_generate
    runpy.run_path(train_py, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
