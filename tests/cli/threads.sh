#!/usr/bin/env bash
# train.threads = 0 on the CPU backend: without OMP_NUM_THREADS each of the 2
# ranks on this node gets the cores its affinity mask allows divided by 2
# (all of them when the launcher bound it to fewer than the node's); with
# OMP_NUM_THREADS set that wins; a positive train.threads wins over both.
# The expected count is worked out here from the mask and the online cores.
#   threads.sh      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON)
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
deck=$PENTAD_SOURCE_DIR/tests/parity/gpt2.toml
run() {  # EXPECTED_LINE env/args...
  local want=$1; shift
  env "$@" > "$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
  if grep -qxF "$want" "$tmp/out"; then echo "ok    $want"; else
    echo "FAIL  expected '$want'; got: $(grep '^threads:' "$tmp/out" || echo none)"; failed=$((failed + 1)); fi
}
share=$("$PENTAD_PYTHON" -c '
import os
mine, online = len(os.sched_getaffinity(0)), os.sysconf("SC_NPROCESSORS_ONLN")
print(mine if mine < online else max(1, mine // 2))')
failed=0
train=("$MPIEXEC" -n 2 "$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" --set parallel.dp=2
       --set train.steps=1)
run "threads: $share per rank (train.threads = 0: the node's cores / its ranks)" -u OMP_NUM_THREADS "${train[@]}"
run "threads: 3 per rank (train.threads = 0: OMP_NUM_THREADS)" OMP_NUM_THREADS=3 "${train[@]}"
run "threads: 1 per rank (train.threads = 1)" OMP_NUM_THREADS=2 "${train[@]}" --set train.threads=1
echo "$((3 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
