#!/usr/bin/env bash
# Evaluation with no step: a run with train.steps = 0 evaluates the weights
# it loaded (checkpoint.init_from) once, and so does a resume of a checkpoint
# already at train.steps. Trained 10 steps with data.val and data.choice_eval
# and final.h5 saved, the weights score exactly as the run's last
# evaluation did: val_loss bitwise and the same accuracies on one rank, the
# same within the parity tolerance (rel 1e-5) under tp 2 and pp 2 (the same
# global batch, so the same validation windows); the line
# and the metrics row say "step 0" (init_from) or "step 10" (resumed).
#   eval_only.sh        (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON)
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
deck=$PENTAD_SOURCE_DIR/tests/torch/gpt2_tiny.toml
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
"$PENTAD_PYTHON" "$PENTAD_SOURCE_DIR"/tests/lib/choice_file.py write "$tmp/choices.bin" 50 5
common=(--set data.train="$tmp/data/train.bin" --set data.val="$tmp/data/val.bin" --set data.choice_eval="$tmp/choices.bin"
        --set log.peak_tflops=1)
run() {  # name np sets...
  local name=$1 np=$2; shift 2
  timeout 120 "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" "${common[@]}" "$@" --set log.metrics="$tmp/$name.jsonl" \
    > "$tmp/$name.log" 2>&1 || { echo "FAIL: $name did not run"; cat "$tmp/$name.log"; exit 1; }
  grep -E "^eval at|^summary" "$tmp/$name.log" || true
}
run trained 1 --set checkpoint.dir="$tmp/ck" --set checkpoint.save_final=true
run init_1 1 --set train.steps=0 --set checkpoint.init_from="$tmp/ck/final.h5"
run init_tp2 2 --set train.steps=0 --set checkpoint.init_from="$tmp/ck/final.h5" --set parallel.tp=2
run init_pp2 2 --set train.steps=0 --set checkpoint.init_from="$tmp/ck/final.h5" --set parallel.pp=2
run resumed 1 --set checkpoint.resume="$tmp/ck/final.h5" --set checkpoint.dir="$tmp/ck2"
run no_eval 1 --set train.steps=0 --set data.val="" --set data.choice_eval=""
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report
tmp = sys.argv[1]
def rows(name):
    return [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")]
keys = ("val_loss", "choice_acc_norm", "choice_acc")
last = rows("trained")[-1]
ref = {k: last.get(k) for k in keys}
def log(name):
    return open(f"{tmp}/{name}.log").read()
checks = [(f"the trained run's last evaluation: step {last['step']}, {ref}", last["step"] == 10 and None not in ref.values())]
for name, step, exact in (("init_1", 0, True), ("init_tp2", 0, False), ("init_pp2", 0, False), ("resumed", 10, True)):
    r = rows(name)
    got = {k: r[0].get(k) for k in keys} if len(r) == 1 else {}
    ok = len(r) == 1 and r[0].get("step") == step and None not in got.values()
    if ok and exact:
        ok = got == ref
    elif ok:
        ok = (abs(got["val_loss"] - ref["val_loss"]) <= 1e-5 * abs(ref["val_loss"])
              and got["choice_acc_norm"] == ref["choice_acc_norm"] and got["choice_acc"] == ref["choice_acc"])
    checks.append((f"{name}: one metrics row, step {step}, {got} {'==' if exact else 'within 1e-5 of'} the run's",
                   ok))
    checks.append((f"{name}: the console says 'eval at step {step} (no step run)'",
                   f"eval at step {step} (no step run) | val loss" in log(name)))
checks.append(("nothing to evaluate: no eval line, no metrics row",
               "eval at step" not in log("no_eval") and not rows("no_eval")))
sys.exit(report(checks))
PY
