#!/usr/bin/env bash
# Evaluation with no step: a run with train.steps = 0 evaluates the weights
# it loaded (checkpoint.init_from) once, and so does a resume of a checkpoint
# already at train.steps. Trained 10 steps with data.val and data.choice_eval
# and final.h5 saved, the weights score exactly as the run's last
# evaluation did: val_loss bitwise and the same accuracies on one rank, the
# same within the parity tolerance (rel 1e-5) under tp 2 and pp 2 (the same
# global batch, so the same validation windows); the line
# and the metrics row say "step 0" (init_from) or "step 10" (resumed).
# train.steps = 0 needs no data.train: without it the scores are the same
# bits, and with save_final and no eval data the run only converts: its
# final.h5 holds the loaded weights bit for bit (`ckpt info` verifies it).
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
run no_train 1 --set train.steps=0 --set checkpoint.init_from="$tmp/ck/final.h5" --set data.train=""
run convert 1 --set train.steps=0 --set checkpoint.init_from="$tmp/ck/final.h5" --set data.train="" \
  --set data.val="" --set data.choice_eval="" --set checkpoint.dir="$tmp/ck3" --set checkpoint.save_final=true
"$PENTAD" ckpt info "$tmp/ck3/final.h5" > "$tmp/convert_info.log" 2>&1 || { echo "FAIL: ckpt info"; cat "$tmp/convert_info.log"; exit 1; }
if "$MPIEXEC" -n 1 "$PENTAD" train "$deck" "${common[@]}" --set data.train="" > "$tmp/refused.log" 2>&1; then
  echo "FAIL: train.steps > 0 without data.train ran"; exit 1
fi
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
r = rows("no_train")
checks.append((f"no data.train: the same metrics row as with it ({r[0] if r else None})",
               len(r) == 1 and {k: r[0].get(k) for k in keys} == {k: rows("init_1")[0].get(k) for k in keys}
               and "data: no data.train (train.steps = 0: no step runs)" in log("no_train")))
import h5py
with h5py.File(f"{tmp}/ck/final.h5") as a, h5py.File(f"{tmp}/ck3/final.h5") as b:
    names = []
    a["model"].visit(lambda n: names.append(n) if isinstance(a["model"][n], h5py.Dataset) else None)
    same = [n for n in names if n in b["model"] and (a["model"][n][()] == b["model"][n][()]).all()]
    checks.append((f"converted: final.h5 holds the {len(names)} loaded weight tensors bit for bit ({len(same)} equal)",
                   len(names) > 0 and len(same) == len(names) and b.attrs["step"] == 0))
checks.append(("converted: ckpt info verifies it", "checksums OK" in open(f"{tmp}/convert_info.log").read()))
checks.append(("train.steps > 0 without data.train: refused by name",
               "data.train: required" in open(f"{tmp}/refused.log").read()))
sys.exit(report(checks))
PY
