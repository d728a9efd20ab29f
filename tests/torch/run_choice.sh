#!/usr/bin/env bash
# data.choice_eval against the PyTorch fp64 oracle: train DECK (one rank) on
# byte tokens of tests/data/corpus.txt with a multiple-choice file written by
# tests/lib/choice_file.py (80 examples, 2 to 5 endings, some too long for
# seq_len), scored at steps 5 and 10, and check the last scoring with
# choice_eval.py (each ending's loss sum, both accuracies).
# Usage: run_choice.sh DECK [--set k=v]...
# Env: PENTAD, PENTAD_SOURCE_DIR, PENTAD_PYTHON (torch + h5py), MPIEXEC.
set -euo pipefail
deck=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pentad_choice.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
"$PENTAD_PYTHON" "$PENTAD_SOURCE_DIR"/tests/lib/choice_file.py write "$tmp/choices.bin" 80 7
"$MPIEXEC" -n 1 "$PENTAD" train "$deck" --set "data.train=$tmp/data/train.bin" \
  --set "data.choice_eval=$tmp/choices.bin" --set train.choice_examples=70 --set train.eval_every=5 \
  --set "log.dump=$tmp/dump.h5" --set "log.metrics=$tmp/metrics.jsonl" --set log.peak_tflops=1 "$@" > "$tmp/log"
grep -E '^multiple-choice eval|^step +(5|10)/' "$tmp/log"
grep -q '^multiple-choice eval: the first 70 of 80 examples' "$tmp/log" || { echo "FAIL: no start-up line"; exit 1; }
"$PENTAD_PYTHON" "$here/choice_eval.py" "$tmp/dump.h5" "$tmp/choices.bin" "$tmp/metrics.jsonl" 70
