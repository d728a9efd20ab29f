#!/usr/bin/env bash
# The CUDA binary on a machine without a usable GPU: `backend = cuda` must end
# on both ranks with a non-zero exit and one message naming the key and the
# reason, within 60 s. Where a GPU is present this case cannot arise: skip (77).
#   no_gpu.sh PROBE      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR)
set -uo pipefail
probe=$1
if "$probe" > /dev/null; then
  echo "SKIP: a GPU is usable here; the no-GPU path cannot be exercised"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null || { echo "prep failed"; exit 1; }
timeout 60 "$MPIEXEC" -n 2 "$PENTAD" train "$PENTAD_SOURCE_DIR"/input/tiny.toml --set backend=cuda \
  --set parallel.dp=2 --set data.train="$tmp/data/train.bin" --set data.val= > "$tmp/out" 2>&1
rc=$?
cat "$tmp/out" | tail -5
[ $rc -ne 124 ] || { echo "FAIL: hung"; exit 1; }
[ $rc -ne 0 ] || { echo "FAIL: exit code 0"; exit 1; }
n=$(grep -c "error: backend = cuda: no usable GPU" "$tmp/out")
[ "$n" -eq 1 ] || { echo "FAIL: expected the message once, found $n times"; exit 1; }
echo "ok: exit $rc, one message"
