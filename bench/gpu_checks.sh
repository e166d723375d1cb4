#!/usr/bin/env bash
# The measurements that need a GPU, in one go (about 9 minutes on one H200, about 8 on two):
#   1. the calibration rows not yet measured (resumes from the committed results in bench/results/),
#   2. the bundles the planner picks for a 0.5B, a 1.5B and a 7B model on one GPU, run and compared by `verify`.
# With two or more GPUs the work runs in two lanes at once, each pinned to one GPU: lane A (GPU 0) the DeepSpeed rows
# and the near-capacity rows (these run while DeepSpeed's ops build), lane B (GPU 1) the verify runs, then the other
# rows. Each lane stops starting rows past its budget; what is left is resumed by running this again.
#
# Usage: bash bench/gpu_checks.sh OUT_DIR [SECONDS]   (SECONDS: the time for the whole script, default 540)
# Rows recorded as error or timeout (a crash fixed since, a slow start) run again.
# Results: OUT_DIR/bench-*.jsonl (copy to bench/results/), OUT_DIR/verify-<size>.json, OUT_DIR/logs.tgz.
set -euo pipefail
out="$(mkdir -p "${1:?usage: bash bench/gpu_checks.sh OUT_DIR [SECONDS]}" && cd "$1" && pwd)"
total="${2:-540}"
cd "$(dirname "$0")/.."
t0=$SECONDS
logs="$(mktemp -d)"
export PYTHONUNBUFFERED=1 CUDA_DEVICE_ORDER=PCI_BUS_ID  # CUDA and NVML number the GPUs alike
command -v nvidia-smi > /dev/null || { echo "$(basename "$0"): no nvidia-smi here: run it on the GPU machine" >&2; exit 1; }
ngpu="$(nvidia-smi -L | grep -c '^GPU ')"
gpu="$(python3 -m advisor probe --json | python3 -c 'import json, sys; from advisor.catalog import match_nvml_name
r = json.load(sys.stdin); g = r["gpus"][0]; print(match_nvml_name(g["name"], g["memory_total_bytes"]).id)')"
echo "gpu_checks: ${ngpu} x ${gpu}; ${total} s in all" >&2

resume=()
for f in bench/results/*.jsonl; do resume+=(--resume-from "$f"); done
left() { echo $(( total - 30 - (SECONDS - t0) )); }  # seconds a lane may still start work in (30 s for the end)

# rows of lane A (DeepSpeed + near-capacity) and of lane B (the rest), as comma-separated names
read -r lane_a lane_b < <(python3 -c '
from bench import matrix as M
rows = M.build_matrix()
a = [r["name"] for r in rows if r["backend"] == "deepspeed" or r.get("expect") == "near"]
b = [r["name"] for r in rows if r["name"] not in a]
print(",".join(a), ",".join(b))')

bench() {  # bench LANE NAMES: run those rows (skipping recorded ones) within the time left
  local budget; budget="$(left)"
  (( budget > 60 )) || { echo "lane $1: no time left for calibration rows" >&2; return 0; }
  timeout "$((budget + 20))" python3 -m bench.run --out "$out/bench-$1.jsonl" --only "$2" "${resume[@]}" \
    --redo error,timeout --budget-seconds "$budget" --log "$logs/bench-$1.log" > "$logs/bench-$1.out" 2>&1 || true
  tail -n 25 "$logs/bench-$1.out"
}

verify_planned() {  # the planner's bundle for each size on one GPU, run unchanged and compared
  for size in 0.5B 1.5B 7B; do
    local bundle="$logs/bundle-$size"
    python3 -m advisor generate --model "$size" --gpu "$gpu" --gpus 1 --out "$bundle" --force > "$logs/plan-$size.txt"
    python3 -m advisor verify "$bundle" --random-init --synthetic-data --steps 8 --timeout 240 --json \
      > "$out/verify-$size.json" 2> "$logs/verify-$size.log" || true
    python3 -m bench.verify_summary "$out/verify-$size.json" "$size"
  done
}

if (( ngpu >= 2 )); then
  ( export CUDA_VISIBLE_DEVICES=0; bench a "$lane_a" ) > "$logs/lane-a.txt" 2>&1 &
  pid_a=$!
  ( export CUDA_VISIBLE_DEVICES=1; verify_planned; bench b "$lane_b" ) > "$logs/lane-b.txt" 2>&1 &
  pid_b=$!
  wait "$pid_a" "$pid_b" || true
  cat "$logs/lane-a.txt" "$logs/lane-b.txt"
else
  verify_planned
  bench a "$lane_a"
  bench b "$lane_b"
fi
tar -czf "$out/logs.tgz" --exclude="*.safetensors" --exclude="*.bin" --exclude="*.pt" -C "$logs" .
echo "gpu_checks: done in $(( SECONDS - t0 )) s; results in $out" >&2
