#!/usr/bin/env bash
# Unsloth against the plain Hugging Face plan of the same knobs, on one GPU (issue 12): the planner's Unsloth QLoRA
# bundle (7B, 2048 tokens, micro-batch 8, checkpointing) verified in Unsloth's own environment, then the plain plan
# with the same knobs in the TRL 1.16 one, both by `trl-advisor verify` (bench.verify_runs cases unsloth-7b-qlora and
# qlora-7b-hf-twin; the random-init checkpoint is written once and shared). About 4 minutes on an H200.
#
# Usage: UNSLOTH_SITE=DIR TRL_SITE=DIR bash bench/unsloth_h200.sh OUT_DIR
#   UNSLOTH_SITE: site folder of the Unsloth environment (unsloth 2026.10.9, unsloth_zoo, trl 1.15.0, datasets 4.x,
#                 peft, bitsandbytes; Unsloth 2026.10.9 refuses trl > 1.15, transformers > 5.17 and datasets >= 5)
#   TRL_SITE:     site folder of the TRL 1.16 training stack (the bundles' requirements.txt)
# Results: OUT_DIR/verify-unsloth.jsonl, OUT_DIR/verify-twin.jsonl (copy them to bench/results/).
set -euo pipefail
out="$(mkdir -p "${1:?usage: UNSLOTH_SITE=DIR TRL_SITE=DIR bash bench/unsloth_h200.sh OUT_DIR}" && cd "$1" && pwd)"
: "${UNSLOTH_SITE:?set UNSLOTH_SITE to the site folder of the Unsloth environment}"
: "${TRL_SITE:?set TRL_SITE to the site folder of the TRL 1.16 environment}"
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
# Unsloth's loader asks the Hub for statistics and opens a socket unless told it is offline
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
  UNSLOTH_DISABLE_STATISTICS=1 UNSLOTH_COMPILE_LOCATION="$work/unsloth_compiled_cache"
PYTHONPATH="$UNSLOTH_SITE:$PWD" python3 -m bench.verify_runs --only unsloth-7b-qlora --work "$work" \
  --logs "$out/logs" --out "$out/verify-unsloth.jsonl" --budget-seconds 420
PYTHONPATH="$TRL_SITE:$PWD" python3 -m bench.verify_runs --only qlora-7b-hf-twin --work "$work" \
  --logs "$out/logs" --out "$out/verify-twin.jsonl" --budget-seconds 250
