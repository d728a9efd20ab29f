#!/usr/bin/env bash
# The split backward (B then a deferred W, schedule zbh1 or zbv) gives
# bitwise the fused backward's step-1 gradients, per-step losses and final
# parameters (schedule 1f1b): same calls, and each gradient accumulates its
# micro-batches in the same order. (zbv against 1f1b holds for untied
# embeddings: a tied wte sums its two uses in one buffer on zbv's stage 0,
# but over the stage pair under 1f1b, a different order of the same terms.)
#   split_backward_identical.sh DECK NP "SETS" [SPLIT "SPLIT_SETS"]
#   SPLIT: zbh1 (default) or zbv; SPLIT_SETS: extra words for its run only
#   env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON
set -euo pipefail
deck=$1; np=$2; sets=${3:-}; split=${4:-zbh1}; split_sets=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
for s in 1f1b "$split"; do
  extra=""
  [ "$s" = "$split" ] && extra=$split_sets
  # shellcheck disable=SC2086
  "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" $sets $extra \
    --set parallel.schedule=$s --set log.dump="$tmp/$s.h5" > "$tmp/$s.log" 2>&1 \
    || { cat "$tmp/$s.log"; exit 1; }
  grep -q "^pipeline: $s " "$tmp/$s.log" || { echo "the run did not report schedule $s"; cat "$tmp/$s.log"; exit 1; }
done
"$PENTAD_PYTHON" - "$tmp" "$split" <<'PY'
import sys, h5py, numpy as np
tmp, split = sys.argv[1], sys.argv[2]
ref, run = h5py.File(f"{tmp}/1f1b.h5", "r"), h5py.File(f"{tmp}/{split}.h5", "r")
names = []
ref.visit(lambda n: names.append(n) if isinstance(ref[n], h5py.Dataset) and n.split("/")[0] in ("grad", "final", "metrics") else None)
# zbv's stages hold other blocks than 1f1b's (a V, not a cut in two), so the
# global gradient norm adds the same squares grouped by other stages: that
# one dataset is compared to rounding (1e-12 relative), everything else bitwise.
regrouped = {"metrics/grad_norm"} if split == "zbv" else set()
def same(n):
    if n not in run: return False
    a, b = run[n][...], ref[n][...]
    if n in regrouped: return a.shape == b.shape and bool(np.all(np.abs(a - b) <= 1e-12 * np.abs(b)))
    return np.array_equal(a, b)
diff = [n for n in names if not same(n)]
nz = sum(int(np.count_nonzero(ref[n][...])) for n in names if n.startswith("grad/"))
print(f"{split} vs 1f1b: {len(names)} datasets compared bitwise ({len(regrouped)} to rounding), {len(diff)} differ"
      + (f" (first: {diff[0]})" if diff else "") + f"; {nz} nonzero gradient elements")
sys.exit(1 if diff or nz == 0 or not names else 0)
PY
