#!/usr/bin/env bash
# Measured activation high-water marks of the pipeline schedules against the
# schedule checker: pp 4 with 8 micro-batches under afab, 1f1b, zbh1 and zbv
# (8 blocks: its V has 8 chunks). For every stage, the activation slots alive
# at once (counted by the executor) must equal the checker's replay of the
# same list (`pentad schedule`) and its formula, and the backend's measured
# activation peak must be exactly that many slots (zbh1: that many slots
# and W stashes, what a deferred W keeps). With a split backward the W actions
# pending at once must equal the replay's too, and their kept bytes must be
# non-zero. (zbv's activation bytes per chunk are checked by the planner's
# memory model test, planner_memory_model_zbh1_*, which knows each chunk's
# own high-water mark.)
# env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
deck=$PENTAD_SOURCE_DIR/tests/parity/gpt2.toml
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
for sched in afab 1f1b zbh1 zbv; do
  "$PENTAD" schedule --schedule $sched --pp 4 --m 8 > "$tmp/$sched.sched"
  shape=(--set model.n_layers=4)
  [ $sched = zbv ] && shape=(--set model.n_layers=8 --set parallel.virtual_stages=2)
  "$MPIEXEC" -n 4 "$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" "${shape[@]}" \
    --set parallel.pp=4 --set parallel.schedule=$sched --set train.grad_accum=8 --set train.steps=3 \
    --set log.metrics="$tmp/$sched.jsonl" > "$tmp/$sched.log" 2>&1 || { cat "$tmp/$sched.log"; exit 1; }
done
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import json, re, sys
sys.path.insert(0, __import__("os").environ["PENTAD_SOURCE_DIR"] + "/tests/lib")
from report import report
tmp = sys.argv[1]
checks = []
peaks = {}
for sched in ("afab", "1f1b", "zbh1", "zbv"):
    text = open(f"{tmp}/{sched}.sched").read()
    replay = {int(r): (int(p), int(e)) for r, p, e in
              re.findall(r"rank (\d+): peak in-flight (\d+) \(expected (\d+)\)", text)}
    replay_w = {int(r): int(w) for r, w in re.findall(r"rank (\d+): peak in-flight .*\| deferred W (\d+)", text)}
    row = [json.loads(l) for l in open(f"{tmp}/{sched}.jsonl")][-1]
    for s in range(4):
        measured = int(row[f"pp{s}_inflight"])
        predicted, expected = replay[s]
        checks.append((f"{sched} stage {s}: {measured} activation slots in flight, checker replay {predicted} "
                       f"(formula {expected})", measured == predicted == expected))
        act, slot = row[f"pp{s}_act_peak_bytes"], row[f"pp{s}_slot_bytes"]
        w, w_bytes = int(row[f"pp{s}_deferred_w"]), row[f"pp{s}_deferred_w_bytes"]
        if sched in ("zbh1", "zbv"):
            checks.append((f"{sched} stage {s}: {w} W actions pending at most, checker replay {replay_w[s]}; "
                           f"they kept {w_bytes:.0f} B", w == replay_w[s] and w_bytes > 0))
        else:
            checks.append((f"{sched} stage {s}: no W deferred (fused backward)", w == 0 and w_bytes == 0))
        if sched == "zbh1":
            # Every slot of the one chunk keeps a W stash of the same size once its B ran.
            stash = w_bytes / w if w else 0
            checks.append((f"{sched} stage {s}: activation peak {act:.0f} B = {measured} x (slot {slot:.0f} B "
                           f"+ W stash {stash:.0f} B)", slot > 0 and stash > 0 and act == measured * (slot + stash)))
        elif sched != "zbv":  # zbv: two chunks of different sizes, each its own slot pool (see the header)
            checks.append((f"{sched} stage {s}: activation peak {act:.0f} B = {measured} x slot {slot:.0f} B",
                           slot > 0 and act == measured * slot))
        peaks[(sched, s)] = act
# afab holds all 8 micro-batches everywhere; 1f1b at most pp - stage.
checks.append(("afab needs more activation memory than 1f1b on every stage",
               all(peaks[("afab", s)] > peaks[("1f1b", s)] for s in range(4))))
sys.exit(report(checks))
PY
