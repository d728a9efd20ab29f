#!/usr/bin/env bash
# PyTorch parity test: train DECK with pentad (one rank) on byte tokens of the
# source tree, dump init/grad/final tensors, and check them against the fp64
# oracle reference.py. Usage: run_parity.sh DECK RECOMPUTE(none|selective|full) [--set k=v]...
# Env: PENTAD (binary), PENTAD_SOURCE_DIR, PENTAD_PYTHON (torch + h5py), MPIEXEC;
# PENTAD_LOSS_MASK=1: the prompt/completion pairs of tests/data/sft.jsonl
# instead (token files with a loss mask; the oracle then requires ignored targets).
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 DECK RECOMPUTE [--set k=v]..." >&2
  exit 2
fi
deck=$1
recompute=$2
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${PENTAD:?set PENTAD to the pentad binary}"
: "${PENTAD_SOURCE_DIR:?set PENTAD_SOURCE_DIR to the source tree}"
: "${PENTAD_PYTHON:?set PENTAD_PYTHON to a python with torch and h5py}"
: "${MPIEXEC:?set MPIEXEC to the MPI launcher}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pentad_parity.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [[ "${PENTAD_LOSS_MASK:-0}" == 1 ]]; then
  "$PENTAD" prep --out "$tmp/data" --prompt-key prompt --completion-key completion "$PENTAD_SOURCE_DIR"/tests/data/sft.jsonl
else
  "$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt
fi
"$MPIEXEC" -n 1 "$PENTAD" train "$deck" \
  --set "data.train=$tmp/data/train.bin" \
  --set "train.recompute=$recompute" \
  --set "log.dump=$tmp/dump.h5" "$@"
"$PENTAD_PYTHON" "$here/reference.py" "$tmp/dump.h5"
