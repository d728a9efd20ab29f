#!/usr/bin/env bash
# Recompute policies none / selective / full give bitwise-identical step-1
# gradients, per-step losses and final parameters (same ops, same order).
#   recompute_identical.sh DECK [NP "SETS"]   env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON
# NP ranks (default 1) and extra "--set k=v" words, e.g. a parallel layout.
set -euo pipefail
deck=$1; np=${2:-1}; sets=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
for r in none selective full; do
  # shellcheck disable=SC2086
  "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" $sets \
    --set train.grad_accum=2 --set train.recompute=$r --set log.dump="$tmp/$r.h5" > "$tmp/$r.log" 2>&1 \
    || { cat "$tmp/$r.log"; exit 1; }
done
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import sys, h5py, numpy as np
tmp = sys.argv[1]
files = {r: h5py.File(f"{tmp}/{r}.h5", "r") for r in ("none", "selective", "full")}
ref = files["none"]
names = []
ref.visit(lambda n: names.append(n) if isinstance(ref[n], h5py.Dataset) and n.split("/")[0] in ("grad", "final", "metrics") else None)
failed = 0
for r in ("selective", "full"):
    diff = [n for n in names if not np.array_equal(files[r][n][...], ref[n][...])]
    nz = sum(int(np.count_nonzero(ref[n][...])) for n in names if n.startswith("grad/"))
    print(f"{r} vs none: {len(names)} datasets compared bitwise, {len(diff)} differ"
          + (f" (first: {diff[0]})" if diff else "") + f"; {nz} nonzero gradient elements")
    failed += bool(diff) or nz == 0
print(f"{2 - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
