#!/usr/bin/env bash
# The validation loss is a function of the weights alone: every layout (dp,
# cp, tp, pp) and every split of the same global batch into micro_batch x
# grad_accum reads the same fixed windows of data.val, each token once, and
# reports the same val_loss at every evaluation (rel 1e-5, as the training
# loss). The val file is cut so that the windows asked for (eval_batches
# global batches) exceed it: all of them are read, and the layouts whose
# slots do not divide them evenly pad with ignored targets.
#   val_loss.sh DECK        (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON)
set -euo pipefail
deck=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 3% of the corpus: 4074 val tokens, 254 windows of 16 tokens.
"$PENTAD" prep --val-fraction 0.03 --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
common=(--set data.train="$tmp/data/train.bin" --set data.val="$tmp/data/val.bin" --set train.steps=2
        --set train.eval_every=1 --set train.eval_batches=100 --set log.peak_tflops=1)
# name np sets...: global batch 4 sequences in every run.
layouts=(
  "mb4_a1 1 --set train.micro_batch=4 --set train.grad_accum=1"
  "mb2_a2 1 --set train.micro_batch=2 --set train.grad_accum=2"
  "mb1_a4 1 --set train.micro_batch=1 --set train.grad_accum=4"
  "dp2_mb2 2 --set parallel.dp=2 --set train.micro_batch=2 --set train.grad_accum=1"
  "dp2_mb1_a2 2 --set parallel.dp=2 --set train.micro_batch=1 --set train.grad_accum=2"
  "cp2 2 --set parallel.cp=2 --set train.micro_batch=4 --set train.grad_accum=1"
  "tp2_a2 2 --set parallel.tp=2 --set train.micro_batch=2 --set train.grad_accum=2"
  "pp2_a4 2 --set parallel.pp=2 --set train.micro_batch=1 --set train.grad_accum=4"
)
for l in "${layouts[@]}"; do
  read -r name np sets <<< "$l"
  # shellcheck disable=SC2086
  timeout 120 "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" "${common[@]}" $sets --set log.metrics="$tmp/$name.jsonl" \
    > "$tmp/$name.log" 2>&1 || { echo "FAIL: $name did not run"; cat "$tmp/$name.log"; exit 1; }
  grep -E "^validation:" "$tmp/$name.log" | sed "s/^/$name: /" || true
done
"$PENTAD_PYTHON" - "$tmp" "${layouts[@]}" <<'PY'
import json, os, sys
tmp, names = sys.argv[1], [l.split()[0] for l in sys.argv[2:]]
def rows(n):
    return [json.loads(l) for l in open(f"{tmp}/{n}.jsonl")]
ref = rows(names[0])
ref_val = [r["val_loss"] for r in ref if "val_loss" in r]
checks = [(f"{names[0]}: val_loss at both steps ({ref_val})", len(ref_val) == 2 and all(0 < v < 10 for v in ref_val))]
checks.append(("all 254 windows read, once", "validation: all 254 windows of 16 tokens"
               in open(f"{tmp}/{names[0]}.log").read()))
for n in names[1:]:
    rs = rows(n)
    val = [r["val_loss"] for r in rs if "val_loss" in r]
    loss_rel = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(rs, ref))
    val_rel = max(abs(a - b) / abs(b) for a, b in zip(val, ref_val)) if len(val) == len(ref_val) else 1.0
    checks.append((f"{n}: val_loss {val} vs {ref_val}: worst rel diff {val_rel:.1e} (train loss {loss_rel:.1e}), "
                   "tolerance 1e-5", len(val) == 2 and val_rel <= 1e-5 and loss_rel <= 1e-5))
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report  # noqa: E402
sys.exit(report(checks))
PY
