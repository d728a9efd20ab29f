#!/usr/bin/env bash
# Mixed precision against fp32: train DECK for STEPS steps twice (REF_SETS,
# then RUN_SETS, e.g. --set train.dtype=bf16) on the same data and compare
# the per-step losses with compare_losses.py (relative tolerance TOL).
#   loss_curves.sh DECK STEPS TOL "REF_SETS" "RUN_SETS"
# env: PENTAD, PENTAD_SOURCE_DIR, PENTAD_PYTHON
set -euo pipefail
deck=$1; steps=$2; tol=$3; ref_sets=$4; run_sets=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
common=(--set data.train="$tmp/data/train.bin" --set data.val= --set train.steps="$steps"
        --set log.peak_tflops=1 --set checkpoint.save_final=false)
# shellcheck disable=SC2086
"$PENTAD" train "$deck" "${common[@]}" $ref_sets --set log.metrics="$tmp/ref.jsonl" > "$tmp/ref.log" 2>&1 \
  || { cat "$tmp/ref.log"; exit 1; }
# shellcheck disable=SC2086
"$PENTAD" train "$deck" "${common[@]}" $run_sets --set log.metrics="$tmp/run.jsonl" > "$tmp/run.log" 2>&1 \
  || { cat "$tmp/run.log"; exit 1; }
grep -E "^pentad|^summary" "$tmp/run.log" || true
"$PENTAD_PYTHON" "$(dirname "$0")/compare_losses.py" "$tmp/run.jsonl" "$tmp/ref.jsonl" "$tol"
