#!/usr/bin/env bash
# data.val with several entries: each entry (a source) is also evaluated
# alone, as val_loss_<k>. Its value is exactly the val_loss of a run whose
# data.val is that entry alone (bitwise: the same windows, the same
# evaluation), the overall val_loss is exactly that of the same files as one
# entry (a glob), and every layout reports each source's loss within the
# parity tolerance (rel 1e-5) of the 1-rank run. Source a is read whole,
# source b is cut at train.eval_batches global batches.
#   val_sources.sh DECK        (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON)
set -euo pipefail
deck=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --val-fraction 0.1 --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
mkdir -p "$tmp/val"
# val.bin (uint16 tokens) cut into a (the first 900 tokens) and b (the rest).
"$PENTAD_PYTHON" - "$tmp/data/val.bin" "$tmp/val/a.bin" "$tmp/val/b.bin" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
tokens = data[1024:]
for path, part in ((sys.argv[2], tokens[:1800]), (sys.argv[3], tokens[1800:])):
    header = struct.pack("<3i", 20240520, 1, len(part) // 2) + bytes(1024 - 12)
    open(path, "wb").write(header + part)
PY
common=(--set data.train="$tmp/data/train.bin" --set train.steps=2 --set train.eval_every=1
        --set train.eval_batches=20 --set log.peak_tflops=1)
run() {  # name np sets...
  local name=$1 np=$2; shift 2
  timeout 120 "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" "${common[@]}" "$@" --set log.metrics="$tmp/$name.jsonl" \
    > "$tmp/$name.log" 2>&1 || { echo "FAIL: $name did not run"; cat "$tmp/$name.log"; exit 1; }
}
both="$tmp/val/a.bin, $tmp/val/b.bin"
run ref 1 --set data.val="$both" --set train.micro_batch=4
grep -E "^validation" "$tmp/ref.log"
grep -E "^step +2/" "$tmp/ref.log"
run only_a 1 --set data.val="$tmp/val/a.bin" --set train.micro_batch=4
run only_b 1 --set data.val="$tmp/val/b.bin" --set train.micro_batch=4
run glob 1 --set data.val="$tmp/val/*.bin" --set train.micro_batch=4
layouts=(
  "dp2_mb1_a2 2 --set parallel.dp=2 --set train.micro_batch=1 --set train.grad_accum=2"
  "cp2 2 --set parallel.cp=2 --set train.micro_batch=4"
  "tp2_a2 2 --set parallel.tp=2 --set train.micro_batch=2 --set train.grad_accum=2"
  "pp2_a4 2 --set parallel.pp=2 --set train.micro_batch=1 --set train.grad_accum=4"
)
for l in "${layouts[@]}"; do
  read -r name np sets <<< "$l"
  # shellcheck disable=SC2086
  run "$name" "$np" --set data.val="$both" $sets
done
"$PENTAD_PYTHON" - "$tmp" "${layouts[@]}" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report
tmp, layouts = sys.argv[1], [l.split()[0] for l in sys.argv[2:]]
def vals(name, key):
    return [r[key] for r in map(json.loads, open(f"{tmp}/{name}.jsonl")) if key in r]
ref = {k: vals("ref", k) for k in ("val_loss", "val_loss_0", "val_loss_1")}
log = open(f"{tmp}/ref.log").read()
T = 16  # the deck's seq_len
n_a, n_b = (((os.path.getsize(f"{tmp}/val/{f}.bin") - 1024) // 2 - 1) // T for f in "ab")  # windows: (tokens - 1) // T
checks = [
    (f"two evaluations of each source: {ref}", all(len(v) == 2 and all(0 < x < 10 for x in v) for v in ref.values())),
    ("no val_loss_2", not vals("ref", "val_loss_2")),
    (f"source 0 read whole ({n_a} windows), source 1 cut at 80 of {n_b}",
     f"{n_a} windows (val_loss_0)" in log and "80 windows (val_loss_1)" in log and n_a < 80 < n_b),
    (f"val_loss_0 {ref['val_loss_0']} == val_loss of data.val = a.bin {vals('only_a', 'val_loss')}, bitwise",
     ref["val_loss_0"] == vals("only_a", "val_loss")),
    (f"val_loss_1 {ref['val_loss_1']} == val_loss of data.val = b.bin {vals('only_b', 'val_loss')}, bitwise",
     ref["val_loss_1"] == vals("only_b", "val_loss")),
    (f"val_loss {ref['val_loss']} == val_loss of data.val = val/*.bin (one entry) {vals('glob', 'val_loss')}, bitwise",
     ref["val_loss"] == vals("glob", "val_loss")),
    ("one entry: no val_loss_0", not vals("glob", "val_loss_0") and not vals("only_a", "val_loss_0")),
]
for n in layouts:
    worst = max((abs(a - b) / abs(b) for k in ref for a, b in zip(vals(n, k), ref[k])), default=1.0)
    complete = all(len(vals(n, k)) == 2 for k in ref)
    checks.append((f"{n}: val_loss, val_loss_0, val_loss_1 within rel {worst:.1e} of 1 rank (tolerance 1e-5)",
                   complete and worst <= 1e-5))
sys.exit(report(checks))
PY
