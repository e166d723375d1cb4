#!/usr/bin/env bash
# The measurements that need a GPU, in one go (about 9 minutes on one H200):
#   1. the calibration rows not yet measured (resumes from the committed results),
#   2. the bundles the planner picks for a 0.5B, a 1.5B and a 7B model on this GPU, run and compared by `verify`.
# Usage: bash bench/gpu_checks.sh OUT_DIR [BENCH_BUDGET_SECONDS]
# Results: OUT_DIR/bench.jsonl (copy to bench/results/), OUT_DIR/verify-<size>.json, OUT_DIR/*.log.
set -euo pipefail
out="${1:?usage: bash bench/gpu_checks.sh OUT_DIR [BENCH_BUDGET_SECONDS]}"
budget="${2:-300}"
mkdir -p "$out"
cd "$(dirname "$0")/.."
gpu="$(python3 -m advisor probe --json | python3 -c 'import json, sys; from advisor.catalog import match_nvml_name
r = json.load(sys.stdin); g = r["gpus"][0]; print(match_nvml_name(g["name"], g["memory_total_bytes"]).id)')"
echo "gpu_checks: GPU ${gpu}; calibration budget ${budget} s" >&2

resume=()
for f in bench/results/*.jsonl; do resume+=(--resume-from "$f"); done
python3 -m bench.run --out "$out/bench.jsonl" "${resume[@]}" --budget-seconds "$budget" 2>&1 | tee "$out/bench.log" | tail -n 20

for size in 0.5B 1.5B 7B; do
  bundle="$out/bundle-$size"
  python3 -m advisor generate --model "$size" --gpu "$gpu" --gpus 1 --out "$bundle" --force --json > "$out/plan-$size.json"
  python3 -m advisor verify "$bundle" --random-init --synthetic-data --steps 8 --timeout 240 --json \
    > "$out/verify-$size.json" 2> "$out/verify-$size.log" || true
  python3 - "$out/verify-$size.json" "$size" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
m, p, e = v["measured"], v["predicted"], v["error_pct"]
print(f"{sys.argv[2]}: passed={v['passed']} peak measured {m.get('per_gpu_peak_bytes')} predicted "
      f"{p.get('per_gpu_peak_bytes')} ({e.get('per_gpu_peak_bytes')}%), tokens/s measured {m.get('tokens_per_second')} "
      f"predicted {p.get('tokens_per_second')} ({e.get('tokens_per_second')}%)")
PY
done
