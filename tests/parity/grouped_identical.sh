#!/usr/bin/env bash
# The pipeline's grouped messages (parallel.pp_p2p = grouped: the plan of
# parallel/pp/p2p_plan.hpp, NCCL's way, here over MPI with one tag so the
# n-th receive takes the n-th send as NCCL pairs them) give bitwise the
# eager run's gradients, per-step losses, validation losses and final
# parameters: the same messages into the same inputs, moved at other times.
# A message paired with the wrong receive (same size, other data) fails it.
#   grouped_identical.sh DECK NP "SETS"
#   env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON
set -euo pipefail
deck=$1; np=$2; sets=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
for mode in eager grouped; do
  # shellcheck disable=SC2086
  "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" --set data.val="$tmp/data/val.bin" \
    --set train.eval_every=5 $sets --set parallel.pp_p2p=$mode --set log.dump="$tmp/$mode.h5" > "$tmp/$mode.log" 2>&1 \
    || { cat "$tmp/$mode.log"; exit 1; }
  grep -q "^pipeline: .*| messages $mode\$" "$tmp/$mode.log" || { echo "the run did not report messages $mode"; cat "$tmp/$mode.log"; exit 1; }
done
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import re, sys, h5py, numpy as np
tmp = sys.argv[1]
ref, run = h5py.File(f"{tmp}/eager.h5", "r"), h5py.File(f"{tmp}/grouped.h5", "r")
names = []
ref.visit(lambda n: names.append(n) if isinstance(ref[n], h5py.Dataset) and n.split("/")[0] in ("grad", "final", "metrics") else None)
diff = [n for n in names if n not in run or not np.array_equal(run[n][...], ref[n][...])]
nz = sum(int(np.count_nonzero(ref[n][...])) for n in names if n.startswith("grad/"))
def vals(mode):
    text = open(f"{tmp}/{mode}.log").read()
    return re.findall(r"\| val loss ([0-9]+\.[0-9]+)", text)
ve, vg = vals("eager"), vals("grouped")
print(f"grouped vs eager: {len(names)} datasets compared bitwise, {len(diff)} differ"
      + (f" (first: {diff[0]})" if diff else "") + f"; {nz} nonzero gradient elements; "
      + f"validation losses {ve} vs {vg}")
sys.exit(1 if diff or nz == 0 or not names or not ve or ve != vg else 0)
PY
