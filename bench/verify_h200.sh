#!/usr/bin/env bash
# Issue 11's GPU measurements in one command (python -m bench.verify_runs): the edited bundle that runs out of
# memory, the 8B LoRA 16k bundle with --full-steps and in quick mode, then one quick verify per bundle kind, all
# on this machine's own transformers. About 8 minutes on one H200 at the default budget.
#
# Usage: bash bench/verify_h200.sh OUT_DIR [SECONDS [CASES]]
#   SECONDS: no case starts whose predicted cost would end it later (default 480); CASES: comma-separated names
#   (python -m bench.verify_runs --list), default all in priority order. At 480 s the three demonstrations fit
#   (about 45 s, 290 s and 100 s predicted); each small-model kind after them takes about 40 s.
# Results: OUT_DIR/verify-h200-DATE-HHMM.jsonl (copy it to bench/results/, then python -m bench.verify_docs --write)
#          OUT_DIR/verify-h200-DATE-HHMM.logs.tgz (each case's generate, verify and training logs)
set -euo pipefail
out="$(mkdir -p "${1:?usage: bash bench/verify_h200.sh OUT_DIR [SECONDS]}" && cd "$1" && pwd)"
budget="${2:-480}"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 CUDA_DEVICE_ORDER=PCI_BUS_ID HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
command -v nvidia-smi > /dev/null || { echo "$(basename "$0"): no nvidia-smi here: run it on the GPU machine" >&2; exit 1; }
work="$(mktemp -d)"
only=()
[[ -n "${3:-}" ]] && only=(--only "$3")
python3 -m bench.verify_runs --out "$out/verify-h200-$(date +%F-%H%M).jsonl" --budget-seconds "$budget" \
  --work "$work" --logs "$work/logs" "${only[@]}"
