#!/usr/bin/env bash
# data.choice_eval in every layout: each ending's loss sum (the debug dump's
# choice/row_loss) within the parity tolerance (rel 1e-5) of the 1-rank run,
# and the same accuracies, under dp (with padding rows: the 249 rows of 69
# examples over 2 ranks of 2-sequence micro-batches), cp (zig-zag, and
# contiguous), tp with sp, pp and dp x pp x tp; the global batch is 4
# sequences in each.
#   choice_eval.sh DECK        (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON)
set -euo pipefail
deck=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
"$PENTAD_PYTHON" "$PENTAD_SOURCE_DIR"/tests/lib/choice_file.py write "$tmp/choices.bin" 70 7
common=(--set data.train="$tmp/data/train.bin" --set data.choice_eval="$tmp/choices.bin" --set train.steps=3
        --set train.choice_examples=69 --set log.peak_tflops=1)
run() {  # name np sets...
  local name=$1 np=$2; shift 2
  timeout 120 "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" "${common[@]}" "$@" --set log.metrics="$tmp/$name.jsonl" \
    --set log.dump="$tmp/$name.h5" > "$tmp/$name.log" 2>&1 || { echo "FAIL: $name did not run"; cat "$tmp/$name.log"; exit 1; }
}
run ref 1 --set train.micro_batch=4
grep -E "^multiple-choice|^step +3/" "$tmp/ref.log"
layouts=(
  "dp2_mb2 2 --set parallel.dp=2 --set train.micro_batch=2"
  "cp2 2 --set parallel.cp=2 --set train.micro_batch=4"
  "cp2_contiguous 2 --set parallel.cp=2 --set parallel.cp_layout=contiguous --set train.micro_batch=4"
  "tp2_sp 2 --set parallel.tp=2 --set parallel.sp=true --set train.micro_batch=4"
  "pp2_a4 2 --set parallel.pp=2 --set train.micro_batch=1 --set train.grad_accum=4"
  "dp2_pp2_tp2 8 --set parallel.dp=2 --set parallel.pp=2 --set parallel.tp=2 --set train.micro_batch=1 --set train.grad_accum=2"
)
for l in "${layouts[@]}"; do
  read -r name np sets <<< "$l"
  # shellcheck disable=SC2086
  run "$name" "$np" $sets
done
"$PENTAD_PYTHON" - "$tmp" "${layouts[@]}" <<'PY'
import json, os, sys
import h5py
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report
tmp, layouts = sys.argv[1], [l.split()[0] for l in sys.argv[2:]]
def rows(name):
    with h5py.File(f"{tmp}/{name}.h5", "r") as f:
        return list(f["choice/row_loss"][...])
def acc(name):
    last = [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")][-1]
    return last.get("choice_acc_norm"), last.get("choice_acc")
ref = rows("ref")
checks = [(f"1 rank: {len(ref)} rows scored, accuracies {acc('ref')}", len(ref) == 249 and None not in acc("ref"))]
for n in layouts:
    got = rows(n)
    worst = max((abs(a - b) / abs(b) for a, b in zip(got, ref)), default=1.0) if len(got) == len(ref) else 1.0
    checks.append((f"{n}: every row's loss within rel {worst:.1e} of 1 rank (tolerance 1e-5)", worst <= 1e-5))
    checks.append((f"{n}: accuracies {acc(n)} == 1 rank's", acc(n) == acc("ref")))
sys.exit(report(checks))
PY
