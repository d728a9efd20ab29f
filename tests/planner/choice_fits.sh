#!/usr/bin/env bash
# The planner's winner for a small case is a valid layout that fits: plan the
# parity GPT-2 (L=4) on 4 ranks of this machine with a memory budget below
# what plain dp=4 needs (so replicated layouts must be dropped), then train
# the printed `run:` command for 2 steps and check the measured peak of the
# root rank is within the budget, and that the dropped layout really needs more.
# env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
deck=$PENTAD_SOURCE_DIR/tests/parity/gpt2.toml
machine=$PENTAD_SOURCE_DIR/input/machines/this-machine.toml
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
sets=(--set data.train="$tmp/data/train.bin" --set model.n_layers=4 --set train.grad_accum=4)
# What dp=4 (replicated everything) needs, measured.
"$MPIEXEC" -n 4 "$PENTAD" train "$deck" "${sets[@]}" --set parallel.dp=4 --set train.grad_accum=1 --set train.steps=2 \
  --set log.peak_tflops=0.1 --set log.metrics="$tmp/dp4.jsonl" > "$tmp/dp4.log" 2>&1 || { cat "$tmp/dp4.log"; exit 1; }
need=$("$PENTAD_PYTHON" -c "import json,sys; print(int([json.loads(l) for l in open(sys.argv[1])][-1]['peak_mem_bytes']))" "$tmp/dp4.jsonl")
budget=$((need * 85 / 100))
"$PENTAD" plan "$deck" --ranks 4 --machine "$machine" --gpu-mem "$budget" "${sets[@]}" > "$tmp/plan.txt" 2>&1 \
  || { cat "$tmp/plan.txt"; exit 1; }
cat "$tmp/plan.txt"
run=$(grep '^run: pentad train ' "$tmp/plan.txt" | tail -1 | sed 's/^run: pentad train //')
[ -n "$run" ] || { echo "FAIL: no run: line"; exit 1; }
# shellcheck disable=SC2086
eval "set -- $run"
"$MPIEXEC" -n 4 "$PENTAD" train "$@" --set train.steps=2 --set log.peak_tflops=0.1 \
  --set log.metrics="$tmp/win.jsonl" > "$tmp/win.log" 2>&1 || { cat "$tmp/win.log"; echo "FAIL: the chosen layout does not train"; exit 1; }
"$PENTAD_PYTHON" - "$tmp" "$budget" "$need" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report
tmp, budget, need = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
row = [json.loads(l) for l in open(f"{tmp}/win.jsonl")][-1]
plan = open(f"{tmp}/plan.txt").read()
winner = [l for l in plan.splitlines() if l.startswith("winner: ")][0]
peaks = [row["peak_mem_bytes"]] + [v for k, v in row.items() if k.endswith("_act_peak_bytes")]
import re
print(winner)
dropped = int(re.search(r"(\d+) do not fit in", plan).group(1))
checks = [
    (f"plan dropped {dropped} layouts that do not fit the budget {budget} B", dropped > 0),
    (f"the chosen layout trains (2 steps, loss {row['loss']:.3f})", row["step"] == 2),
    (f"measured peak of the root rank {row['peak_mem_bytes']:.0f} B <= budget {budget} B", row["peak_mem_bytes"] <= budget),
    (f"plain dp=4 measured {need} B > budget {budget} B (the budget binds)", need > budget),
]
sys.exit(report(checks))
PY
