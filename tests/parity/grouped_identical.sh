#!/usr/bin/env bash
# The pipeline's grouped messages (parallel.pp_p2p = grouped: the plan of
# parallel/pp/p2p_plan.hpp, NCCL's way, here over MPI with one tag so the
# n-th receive takes the n-th send as NCCL pairs them) give bitwise the
# eager run's gradients, per-step losses, validation losses and final
# parameters: the same messages into the same inputs, moved at other times.
# A message paired with the wrong receive (same size, other data) fails it.
# The grouped run's trace must show training going on past a started group:
# some group waited for only after a compute action that follows its start
# (p2p_waits_deferred), not where it was started.
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
    --set train.eval_every=5 $sets --set parallel.pp_p2p=$mode --set log.dump="$tmp/$mode.h5" \
    --set log.trace="$tmp/$mode.trace.json" > "$tmp/$mode.log" 2>&1 \
    || { cat "$tmp/$mode.log"; exit 1; }
  grep -q "^pipeline: .*| messages $mode\$" "$tmp/$mode.log" || { echo "the run did not report messages $mode"; cat "$tmp/$mode.log"; exit 1; }
done
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import json, re, sys, h5py, numpy as np
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
# Deferred waits: per traced step and rank, a group's start ('group started')
# and its wait ('idle (wait recv)', the same group index) with a compute
# event between them.
ev = [e for e in json.load(open(f"{tmp}/grouped.trace.json"))["traceEvents"] if e.get("ph") == "X"]
starts = {(e["pid"], e["args"]["step"], e["args"]["group"]): e["ts"] for e in ev if e["args"]["op"] == "group started"}
waits = {(e["pid"], e["args"]["step"], e["args"]["group"]): e["ts"] for e in ev
         if e["args"]["op"] == "idle (wait recv)" and "group" in e["args"]}
comp = [(e["pid"], e["args"]["step"], e["ts"]) for e in ev if e["cat"] == "compute"]
spanned = sum(1 for k, t0 in starts.items() if k in waits and
              any(p == k[0] and s == k[1] and t0 < t < waits[k] for p, s, t in comp))
print(f"grouped trace: {len(starts)} groups started, {len(waits)} waited for, {spanned} waited for after a later compute")
sys.exit(1 if diff or nz == 0 or not names or not ve or ve != vg or spanned == 0 or len(waits) != len(starts) else 0)
PY
