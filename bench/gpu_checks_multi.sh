#!/usr/bin/env bash
# The bundles the planner picks (or is pinned to) for every GPU of this machine, run unchanged by `verify` and
# compared with the predictions: data parallelism, FSDP2, ZeRO-3 and GRPO across GPUs (about 8 minutes on two H200).
# Usage: bash bench/gpu_checks_multi.sh OUT_DIR [SECONDS [CASES]]
#   SECONDS: the time for the whole script (default 540); CASES: comma-separated case names (default: all)
# Results: OUT_DIR/verify-multi-<case>.json, OUT_DIR/logs-multi.tgz.
set -euo pipefail
out="$(mkdir -p "${1:?usage: bash bench/gpu_checks_multi.sh OUT_DIR [SECONDS]}" && cd "$1" && pwd)"
total="${2:-540}"
only="${3:-}"
cd "$(dirname "$0")/.."
t0=$SECONDS
logs="$(mktemp -d)"
export PYTHONUNBUFFERED=1 CUDA_DEVICE_ORDER=PCI_BUS_ID
command -v nvidia-smi > /dev/null || { echo "$(basename "$0"): no nvidia-smi here: run it on the GPU machine" >&2; exit 1; }
ngpu="$(nvidia-smi -L | grep -c '^GPU ')"
gpu="$(python3 -m advisor probe --json | python3 -c 'import json, sys; from advisor.catalog import match_nvml_name
r = json.load(sys.stdin); g = r["gpus"][0]; print(match_nvml_name(g["name"], g["memory_total_bytes"]).id)')"
echo "gpu_checks_multi: ${ngpu} x ${gpu}; ${total} s in all" >&2
(( ngpu >= 2 )) || { echo "gpu_checks_multi: needs 2 or more GPUs" >&2; exit 1; }

# case name | generate arguments (the planner picks everything not given)
cases=(
  "7b-sft|--model 7B"
  "8b-dpo|--model 8B --trainer dpo"
  "8b-dpo-fsdp2|--model 8B --trainer dpo --backend fsdp2"
  "7b-sft-zero3|--model 7B --backend deepspeed --zero 3"
  "1.5b-grpo|--model 1.5B --trainer grpo --vllm none"
)
for c in "${cases[@]}"; do
  name="${c%%|*}"; read -r -a args <<< "${c#*|}"
  [[ -z "$only" || ",$only," == *",$name,"* ]] || continue
  left=$(( total - 20 - (SECONDS - t0) ))
  (( left > 90 )) || { echo "$name: skipped, ${left} s left" >&2; continue; }
  bundle="$logs/bundle-$name"
  python3 -m advisor generate "${args[@]}" --gpu "$gpu" --gpus "$ngpu" --out "$bundle" --force \
    > "$logs/plan-$name.txt" 2>&1 || { cat "$logs/plan-$name.txt"; continue; }
  head -n 4 "$logs/plan-$name.txt"
  python3 -m advisor verify "$bundle" --random-init --synthetic-data --steps 6 --timeout "$(( left < 240 ? left : 240 ))" \
    --json > "$out/verify-multi-$name.json" 2> "$logs/verify-$name.log" || true
  python3 -m bench.verify_summary "$out/verify-multi-$name.json" "$name"
done
tar -czf "$out/logs-multi.tgz" --exclude="*.safetensors" --exclude="*.bin" --exclude="*.pt" -C "$logs" .
echo "gpu_checks_multi: done in $(( SECONDS - t0 )) s" >&2
