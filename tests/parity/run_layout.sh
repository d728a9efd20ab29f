#!/usr/bin/env bash
# The layout parity harness: train DECK for N steps on 1 rank and under a
# layout on NP ranks, then compare the per-step losses and final parameters.
#   run_layout.sh DECK NP "REF_SETS" "LAYOUT_SETS"
# REF_SETS / LAYOUT_SETS: extra "--set k=v" words for the 1-rank and the
# parallel run (the global batch must be the same: micro_batch*grad_accum*dp).
# @DATA@ in them stands for the data folder, which then also holds three
# shards, p0/ p1/ p2/ (tests/lib/make_shards.sh).
# env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON; PENTAD_LOSS_MASK=1:
# the prompt/completion pairs of tests/data/sft.jsonl instead (token files
# with a loss mask: only the completions are trained targets).
set -euo pipefail
set -f  # the sets' glob patterns are pentad's to expand, not the shell's
deck=$1; np=$2; ref_sets=$3; layout_sets=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ "${PENTAD_LOSS_MASK:-0}" == 1 ]]; then
  "$PENTAD" prep --out "$tmp/data" --prompt-key prompt --completion-key completion \
    "$PENTAD_SOURCE_DIR"/tests/data/sft.jsonl > /dev/null
else
  "$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
fi
common=(--set data.train="$tmp/data/train.bin")
if [[ "$ref_sets $layout_sets" == *@DATA@* ]]; then
  bash "$PENTAD_SOURCE_DIR"/tests/lib/make_shards.sh "$tmp/data"
  ref_sets=${ref_sets//@DATA@/$tmp/data}
  layout_sets=${layout_sets//@DATA@/$tmp/data}
fi
# shellcheck disable=SC2086
"$MPIEXEC" -n 1 "$PENTAD" train "$deck" "${common[@]}" $ref_sets --set log.dump="$tmp/ref.h5" > "$tmp/ref.log" 2>&1 \
  || { cat "$tmp/ref.log"; exit 1; }
# shellcheck disable=SC2086
"$MPIEXEC" -n "$np" "$PENTAD" train "$deck" "${common[@]}" $layout_sets --set log.dump="$tmp/run.h5" > "$tmp/run.log" 2>&1 \
  || { cat "$tmp/run.log"; exit 1; }
grep -E "^summary" "$tmp/run.log" || true
if ! "$PENTAD_PYTHON" "$(dirname "$0")/compare_dumps.py" "$tmp/run.h5" "$tmp/ref.h5"; then
  # Keep the evidence for a post-mortem.
  keep=${TMPDIR:-/tmp}/pentad_parity_failed.$$
  cp -r "$tmp" "$keep" && echo "dumps and logs kept in $keep"
  exit 1
fi
