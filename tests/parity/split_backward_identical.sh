#!/usr/bin/env bash
# The split backward (B then a deferred W, schedule zbh1) gives bitwise the
# fused backward's step-1 gradients, per-step losses and final parameters
# (schedule 1f1b): same calls, and each gradient accumulates its
# micro-batches in the same order.
#   split_backward_identical.sh DECK NP "SETS"   env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON
set -euo pipefail
deck=$1; np=$2; sets=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
for s in 1f1b zbh1; do
  # shellcheck disable=SC2086
  "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" $sets \
    --set parallel.schedule=$s --set log.dump="$tmp/$s.h5" > "$tmp/$s.log" 2>&1 \
    || { cat "$tmp/$s.log"; exit 1; }
  grep -q "^pipeline: $s " "$tmp/$s.log" || { echo "the run did not report schedule $s"; cat "$tmp/$s.log"; exit 1; }
done
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import sys, h5py, numpy as np
tmp = sys.argv[1]
ref, run = h5py.File(f"{tmp}/1f1b.h5", "r"), h5py.File(f"{tmp}/zbh1.h5", "r")
names = []
ref.visit(lambda n: names.append(n) if isinstance(ref[n], h5py.Dataset) and n.split("/")[0] in ("grad", "final", "metrics") else None)
diff = [n for n in names if n not in run or not np.array_equal(run[n][...], ref[n][...])]
nz = sum(int(np.count_nonzero(ref[n][...])) for n in names if n.startswith("grad/"))
print(f"zbh1 vs 1f1b: {len(names)} datasets compared bitwise, {len(diff)} differ"
      + (f" (first: {diff[0]})" if diff else "") + f"; {nz} nonzero gradient elements")
sys.exit(1 if diff or nz == 0 or not names else 0)
PY
