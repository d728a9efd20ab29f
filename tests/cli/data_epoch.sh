#!/usr/bin/env bash
# Epoch order end to end: a 2-rank run (dp 2, 2 micro-batches each) over
# three shards in data.order = "epoch" reads, in its first N sequences, every
# window of the shards exactly once (N = the shards' windows, counted here
# from the files themselves), and the next epoch's sequences are windows too,
# in another order. The run's inputs and targets come from its debug dump.
#   data_epoch.sh      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON)
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash "$PENTAD_SOURCE_DIR"/tests/lib/make_shards.sh "$tmp/data"
deck=$PENTAD_SOURCE_DIR/tests/parity/gpt2.toml   # seq_len 16, micro_batch 2
T=16 B=8
n=$("$PENTAD_PYTHON" - "$tmp"/data/p*/val.bin <<'PY'
import os, sys
print(sum((os.path.getsize(p) - 1024) // 2 - 1 for p in sys.argv[1:]) // 16)
PY
)
steps=$(( n / B + 3 ))
echo "windows $n, global batch $B, $steps steps"
"$MPIEXEC" -n 2 "$PENTAD" train "$deck" --set data.train="$tmp/data/p*/val.bin" --set data.order=epoch \
  --set parallel.dp=2 --set train.grad_accum=2 --set train.steps=$steps --set log.every=1000 \
  --set log.dump="$tmp/run.h5" --set log.metrics="$tmp/m.jsonl" > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; exit 1; }
grep "^data:" "$tmp/run.log"
"$PENTAD_PYTHON" - "$tmp/run.h5" "$tmp/m.jsonl" "$n" "$T" "$tmp"/data/p*/val.bin <<'PY'
import collections, json, os, sys
import h5py, numpy as np
dump, metrics, n, T, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
windows = collections.Counter()
for p in files:
    tok = np.fromfile(p, dtype=np.uint16, offset=1024)
    for w in range((len(tok) - 1) // T):
        windows[tuple(tok[w * T : w * T + T + 1])] += 1
assert sum(windows.values()) == n
with h5py.File(dump, "r") as f:
    inputs, targets = f["batch/inputs"][...], f["batch/targets"][...]  # (steps, B, T)
rows = [tuple(i) + (t[-1],) for s in range(inputs.shape[0]) for i, t in zip(inputs[s], targets[s])]
shifted = all((inputs[s, j, 1:] == targets[s, j, :-1]).all() for s in range(inputs.shape[0]) for j in range(inputs.shape[1]))
checks = [
    ("targets are the inputs shifted by one", shifted),
    (f"the first {n} sequences are each window once", collections.Counter(rows[:n]) == windows),
    (f"the next {len(rows) - n} sequences are windows, none twice more than the data holds",
     all(c <= windows[r] for r, c in collections.Counter(rows[n:]).items())),
    ("the second epoch is in another order", rows[n:] != rows[: len(rows) - n]),
]
last = [json.loads(l) for l in open(metrics)][-1]
checks.append((f"metrics data_epochs {last['data_epochs']:.4f} = steps x batch / windows",
               abs(last["data_epochs"] - last["step"] * inputs.shape[1] / n) < 1e-6))
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report  # noqa: E402
sys.exit(report(checks))
PY
