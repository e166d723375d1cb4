#!/usr/bin/env bash
# Issue 14's GPU measurements in one command on one H200:
#   1. the calibration rows not yet measured (bench/matrix.py; rows in bench/results/h200*.jsonl,
#      plan-quality-h200*.jsonl and incoming/*.jsonl count as done):
#      KTO first, then a row of every model family, stratum and code path, then the rest, cheapest first;
#   2. the plan-quality rows (python -m bench.plan_quality): the planner's pick and its neighbours for four workloads,
#      a whole workload at a time.
# SECONDS bounds the whole script. Part 1 may start rows during CAL_SHARE of it (default 0.55), part 2 in what is
# left; neither starts a row whose planning guess would end past its share (bench.run --budget-seconds), and rows
# left over are recorded as `skipped`: running the same command again with the same OUT_DIR measures them (rows
# already recorded are not run again; rows that timed out are).
#
# Usage: bash bench/calibration_run.sh OUT_DIR [SECONDS]   (default 480)
# Needs the training stack importable (torch, transformers, trl, peft, deepspeed, liger-kernel, bitsandbytes,
# datasets), nvcc and ninja for DeepSpeed's JIT ops, nvidia-smi. Writes, and nothing else under OUT_DIR:
#   OUT_DIR/calibration.jsonl, calibration.log      part 1: one record per row, child logs
#   OUT_DIR/plan-quality.jsonl, plan-quality.log    part 2
#   OUT_DIR/plan-quality.rows.json                  the rows part 2 measured (as written from the model in this commit)
#   OUT_DIR/summary.txt                             both runs' output (a line per row, the tables) and the timing
set -euo pipefail
out="$(mkdir -p "${1:?usage: bash bench/calibration_run.sh OUT_DIR [SECONDS]}" && cd "$1" && pwd)"
total="${2:-480}"
share="${CAL_SHARE:-0.55}"
py="${PYTHON:-python3}"
cd "$(dirname "$0")/.."
t0=$SECONDS
export PYTHONUNBUFFERED=1 CUDA_DEVICE_ORDER=PCI_BUS_ID
command -v nvidia-smi > /dev/null ||
  { echo "$(basename "$0"): no nvidia-smi here: run it on the GPU machine" >&2; exit 1; }
summary="$out/summary.txt"
{
  echo "calibration_run: ${total} s in all, calibration share ${share}; $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} | tee -a "$summary"

# what the committed results (and measured ones not yet committed, in bench/results/incoming/) hold is not run again;
# calibration and plan-quality names never overlap (pq- prefix), so both parts resume from every file
resume=()
for f in bench/results/h200*.jsonl bench/results/plan-quality-h200*.jsonl bench/results/incoming/*.jsonl; do
  if [[ -e "$f" ]]; then resume+=(--resume-from "$f"); fi
done
end_margin=20  # seconds kept for the summary and the processes' exit
left() { echo $(( total - end_margin - (SECONDS - t0) )); }

# part 1: its share of the script's time, counted from the start
cal_budget="$("$py" -c "print(int($total * $share) - $end_margin)")"
echo "part 1: calibration rows, ${cal_budget} s" | tee -a "$summary"
# all DeepSpeed ops are built in the background during part 1, so part 2's DeepSpeed rows find them ready
timeout "$((cal_budget + 30))" "$py" -m bench.run --out "$out/calibration.jsonl" "${resume[@]}" --order coverage \
  --redo timeout --budget-seconds "$cal_budget" --prebuild-ops all >> "$summary" 2>&1 || true
tail -n 4 "$summary"

# part 2: the rest of the time
pq_budget="$(left)"
echo "part 2: plan-quality rows, ${pq_budget} s" | tee -a "$summary"
if (( pq_budget > 45 )); then
  timeout "$((pq_budget + 30))" "$py" -m bench.plan_quality run --out "$out/plan-quality.jsonl" \
    --budget-seconds "$pq_budget" -- --redo timeout "${resume[@]}" >> "$summary" 2>&1 || true
  tail -n 4 "$summary"
else
  echo "part 2: no time left" | tee -a "$summary"
fi
echo "calibration_run: done in $(( SECONDS - t0 )) s; results in $out" | tee -a "$summary"
