#!/usr/bin/env bash
# Training resume through checkpoints, end to end with the pentad binary.
#   resume.sh bitwise NP "LAYOUT_SETS"   10 steps straight (checkpoint at 5) vs
#                                        resume from step 5: identical per-step
#                                        losses and identical final tensors
#   resume.sh reshard                    save under tp2 x dp2 zero1; load under
#                                        dp4 zero3, tp4, 1 rank and pp2: every
#                                        tensor (weights and AdamW moments)
#                                        equal bitwise; continuing under dp4
#                                        zero3 matches the unresharded run
#   resume.sh zbv_reshard                save under zbv (pp2, a V of 4 chunks);
#                                        load under 1f1b pp2 and 1 rank: every
#                                        tensor equal bitwise
#   resume.sh pp_zero3_reshard           save under pp2 x dp2 ZeRO-3 (zbh1; every
#                                        stage's weights and moments sharded over
#                                        dp); load under 1 rank and pp2 x dp2 ZeRO-2
#                                        (1f1b): every tensor equal bitwise
#   resume.sh moe                        MoE: bitwise resume under dp2 x ep2, and an
#                                        ep-split checkpoint loaded under other layouts,
#                                        expert tp (d_ff split over tp) among them
#   resume.sh vocab_pad                  a padded vocabulary: unpadded tensors in
#                                        the checkpoint, loaded bitwise under
#                                        tp4, pp2 and 1 rank unpadded
#   resume.sh shared_expert              MoE with a gated shared expert: saved under
#                                        tp2 + sp with expert tp (its width split
#                                        over tp) and under dp2 x ep2 ZeRO-1 (it
#                                        replicated over ep); each loaded bitwise
#                                        under the other and 1 rank
#   resume.sh kv_copies                  Llama with fewer key/value heads than
#                                        tp ranks (each head held by several):
#                                        saved under tp4 (2 heads) and tp2 x dp2
#                                        (1 head), loaded bitwise under layouts
#                                        with and without copies, and 1 rank
#   resume.sh epoch_batch_change         epoch order resumed under another
#                                        global batch goes on from the
#                                        checkpoint's sequence count
#   resume.sh signal                     SIGUSR1 to the ranks mid-run: one
#                                        committed checkpoint at a step all
#                                        ranks agree on, exit 0
# env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON
set -euo pipefail
mode=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
deck=$PENTAD_SOURCE_DIR/tests/parity/gpt2.toml
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
common=(--set data.train="$tmp/data/train.bin" --set train.eps=1e-3)
train() {  # NP LOGNAME args...
  local np=$1 name=$2; shift 2
  "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" "${common[@]}" "$@" > "$tmp/$name.log" 2>&1 \
    || { cat "$tmp/$name.log"; exit 1; }
}
compare() {  # FILE_A FILE_B MODE(bitwise|close) [METRICS_A METRICS_B]
  "$PENTAD_PYTHON" - "$@" <<'PY'
import json, sys
import h5py, numpy as np
a, b, mode = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), sys.argv[3]
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
failed = 0
diff = [n for n in names if not np.array_equal(a[n][...], b[n][...])]
ok = not diff and len(names) > 0 and any(n.startswith("optim/") for n in names)
print(("ok    " if ok else "FAIL  ") + f"{len(names)} tensors (weights and moments) bitwise equal"
      + (f"; {len(diff)} differ, first {diff[0]}" if diff else ""))
failed += not ok
if len(sys.argv) > 5:
    la = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[4]))}
    lb = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[5]))}
    steps = sorted(set(la) & set(lb))
    if mode == "bitwise":
        ok = steps and all(la[s] == lb[s] for s in steps)
        what = "identical"
    else:
        worst = max(abs(la[s] - lb[s]) / abs(lb[s]) for s in steps)
        ok = worst <= 1e-5
        what = f"within 1e-5 relative (worst {worst:.1e})"
    print(("ok    " if ok else "FAIL  ") + f"losses of steps {steps[0]}..{steps[-1]} {what}")
    failed += not ok
n_checks = 2 if len(sys.argv) > 5 else 1
print(f"{n_checks - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
}
# load_each CK NAME "SETS" LAYOUT...: resume CK for 5 steps under each
# layout ("NP --set ..."), SETS added, and compare the final tensors with
# CK bitwise (logs and checkpoints in $tmp/NAME1, NAME2, ...).
load_each() {
  local ck=$1 name=$2 sets=$3 i=0 layout
  shift 3
  for layout in "$@"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    train "${layout%% *}" "$name$i" $sets ${layout#* } --set checkpoint.dir="$tmp/$name$i" \
      --set checkpoint.resume="$ck" --set train.steps=5 --set checkpoint.save_final=true
    echo "layout $i: $layout"
    compare "$ck" "$tmp/$name$i/final.h5" bitwise
  done
}

case "$mode" in
  bitwise)
    np=$2; layout=$3
    # @DATA@: the data folder, with three shards p0/ p1/ p2/ (tests/lib/make_shards.sh).
    if [[ "$layout" == *@DATA@* ]]; then
      bash "$PENTAD_SOURCE_DIR"/tests/lib/make_shards.sh "$tmp/data"
      layout=${layout//@DATA@/$tmp/data}
      set -f  # its glob patterns are pentad's to expand
    fi
    # shellcheck disable=SC2086
    train "$np" straight $layout --set checkpoint.dir="$tmp/A" --set checkpoint.every=5 --set log.metrics="$tmp/a.jsonl"
    # shellcheck disable=SC2086
    train "$np" resumed $layout --set checkpoint.dir="$tmp/B" --set checkpoint.resume="$tmp/A/step_000005.h5" \
      --set checkpoint.every=5 --set log.metrics="$tmp/b.jsonl"
    grep -q "resumed from" "$tmp/resumed.log"
    compare "$tmp/A/step_000010.h5" "$tmp/B/step_000010.h5" bitwise "$tmp/a.jsonl" "$tmp/b.jsonl" ;;
  epoch_batch_change)
    # Epoch order resumed under half the global batch (32 -> 16 sequences a
    # step) goes on from the checkpoint's sequence count: 160 after step 5,
    # 176 after step 6, 240 after step 10 (data_epochs x windows; the
    # batch's own count would give 96 and 160). A deck with another number
    # of sources is warned and takes its own count.
    bash "$PENTAD_SOURCE_DIR"/tests/lib/make_shards.sh "$tmp/data"
    d=(--set data.train="$tmp/data/p*/val.bin" --set data.order=epoch --set model.seq_len=64)
    train 2 A "${d[@]}" --set parallel.dp=2 --set train.micro_batch=16 --set checkpoint.dir="$tmp/A" \
      --set checkpoint.every=5 --set log.metrics="$tmp/a.jsonl"
    "$PENTAD" ckpt info "$tmp/A/step_000005.h5" > "$tmp/info.txt"
    grep "data sequences read: 160 (source 0)" "$tmp/info.txt" || { cat "$tmp/info.txt"; exit 1; }
    train 1 B "${d[@]}" --set train.micro_batch=16 --set checkpoint.dir="$tmp/B" \
      --set checkpoint.resume="$tmp/A/step_000005.h5" --set log.metrics="$tmp/b.jsonl"
    "$PENTAD_PYTHON" - "$tmp/a.jsonl" "$tmp/b.jsonl" <<'PY'
import json, os, sys
a = {r["step"]: r["data_epochs"] for r in map(json.loads, open(sys.argv[1]))}
b = {r["step"]: r["data_epochs"] for r in map(json.loads, open(sys.argv[2]))}
n = 160 / a[5]  # windows of the shards
checks = [(f"step {s}: {b[s] * n:.3f} sequences read, expected {want}", abs(b[s] * n - want) < 1e-6)
          for s, want in ((6, 176), (10, 240))]
checks.append((f"{n:.3f} windows, a whole number", abs(n - round(n)) < 1e-6))
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report  # noqa: E402
sys.exit(report(checks))
PY
    s3="$tmp/data/p0/val.bin,$tmp/data/p1/val.bin,$tmp/data/p2/val.bin"
    train 1 C --set data.train="$s3" --set data.weights=1,1,1 --set data.order=epoch --set model.seq_len=64 \
      --set train.micro_batch=15 --set checkpoint.dir="$tmp/C" --set checkpoint.resume="$tmp/A/step_000005.h5"
    grep "warning: the checkpoint's data position counts 1 data sources, data.train has 3" "$tmp/C.log" ;;
  moe)
    # MoE (block 1 of 2 has experts): bitwise resume under dp2 x ep2 zero1;
    # a checkpoint saved under dp2 x ep2 x tp2 zero1 (experts split over ep,
    # replicated over tp, one writer per block) loads bitwise under 1 rank, dp4 x ep4 zero3 and
    # dp2 x ep2 x pp2 (whose first stage holds no expert).
    deck=$PENTAD_SOURCE_DIR/tests/parity/moe_llama.toml
    lay=(--set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=1)
    train 2 straight "${lay[@]}" --set checkpoint.dir="$tmp/A" --set checkpoint.every=5 --set log.metrics="$tmp/a.jsonl"
    train 2 resumed "${lay[@]}" --set checkpoint.dir="$tmp/B" --set checkpoint.resume="$tmp/A/step_000005.h5" \
      --set checkpoint.every=5 --set log.metrics="$tmp/b.jsonl"
    grep -q "resumed from" "$tmp/resumed.log"
    compare "$tmp/A/step_000010.h5" "$tmp/B/step_000010.h5" bitwise "$tmp/a.jsonl" "$tmp/b.jsonl"
    train 4 src --set parallel.dp=2 --set parallel.ep=2 --set parallel.tp=2 --set parallel.zero=1 --set checkpoint.dir="$tmp/S" \
      --set checkpoint.every=5 --set train.steps=5
    ck=$tmp/S/step_000005.h5
    load_each "$ck" L "" "1 --set train.grad_accum=1" "4 --set parallel.dp=4 --set parallel.ep=4 --set parallel.zero=3" \
      "4 --set parallel.dp=2 --set parallel.ep=2 --set parallel.pp=2 --set train.grad_accum=2"
    # Expert tp: the replicated checkpoint loads bitwise under dp2 x ep2 x
    # tp2 with each expert's d_ff split over tp; one saved so (every tp rank
    # writes its d_ff columns, tp rank 0 the rest) loads bitwise under 1 rank.
    etp=(--set parallel.dp=2 --set parallel.ep=2 --set parallel.tp=2 --set parallel.expert_tp=true)
    train 4 E1 "${etp[@]}" --set checkpoint.dir="$tmp/E1" --set checkpoint.resume="$ck" --set train.steps=5 \
      --set checkpoint.save_final=true
    echo "expert tp: replicated source -> dp2 x ep2 x tp2 expert_tp"
    compare "$ck" "$tmp/E1/final.h5" bitwise
    train 4 E2 "${etp[@]}" --set parallel.zero=1 --set checkpoint.dir="$tmp/E2" --set checkpoint.every=5 --set train.steps=5
    train 1 E3 --set train.grad_accum=1 --set checkpoint.dir="$tmp/E3" --set checkpoint.resume="$tmp/E2/step_000005.h5" \
      --set train.steps=5 --set checkpoint.save_final=true
    echo "expert tp: dp2 x ep2 x tp2 expert_tp source -> 1 rank"
    compare "$tmp/E2/step_000005.h5" "$tmp/E3/final.h5" bitwise ;;
  reshard)
    src=(--set parallel.tp=2 --set parallel.dp=2 --set parallel.zero=1 --set train.micro_batch=1 --set train.grad_accum=2)
    train 4 src "${src[@]}" --set checkpoint.dir="$tmp/S" --set checkpoint.every=5 --set log.metrics="$tmp/s.jsonl"
    ck=$tmp/S/step_000005.h5
    load_each "$ck" L "" "4 --set parallel.dp=4 --set parallel.zero=3 --set train.micro_batch=1 --set train.grad_accum=1" \
      "4 --set parallel.tp=4 --set train.micro_batch=2 --set train.grad_accum=2" \
      "1 --set train.micro_batch=2 --set train.grad_accum=2" \
      "2 --set parallel.pp=2 --set train.micro_batch=1 --set train.grad_accum=4"
    # Continue under dp4 zero3 to step 10: the same trajectory as the source run.
    train 4 cont --set parallel.dp=4 --set parallel.zero=3 --set train.micro_batch=1 \
      --set checkpoint.dir="$tmp/C" --set checkpoint.resume="$ck" --set log.metrics="$tmp/c.jsonl"
    "$PENTAD_PYTHON" - "$tmp/s.jsonl" "$tmp/c.jsonl" <<'PY'
import json, sys
a = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1]))}
b = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2]))}
steps = sorted(b)
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in steps)
ok = steps == list(range(6, 11)) and worst <= 1e-5
print(("ok    " if ok else "FAIL  ") + f"continued under dp4 zero3, steps {steps[0]}..{steps[-1]}: worst loss rel diff {worst:.1e} (tolerance 1e-5)")
print(f"{int(ok)} passed, {int(not ok)} failed")
sys.exit(0 if ok else 1)
PY
    ;;
  vocab_pad)
    # V = 300, padded inside the run (model.pad_vocab_to): the checkpoint saved
    # under tp2 x dp2 zero1 (512 rows, rank 1 holds 44 of them and 212 of
    # padding) holds (300, C) tensors, and loads bitwise under tp4 (a rank of
    # padding only), pp2 (the tied wte's copy on the last stage) and 1 rank
    # with no padding at all.
    v=(--set model.vocab_size=300)
    train 4 src "${v[@]}" --set parallel.tp=2 --set parallel.dp=2 --set parallel.zero=1 --set train.micro_batch=1 \
      --set train.grad_accum=2 --set checkpoint.dir="$tmp/S" --set checkpoint.every=5 --set train.steps=5
    ck=$tmp/S/step_000005.h5
    "$PENTAD_PYTHON" - "$ck" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r")
shapes = {n: f[n].shape for n in ("model/wte", "optim/m/model/wte", "optim/v/model/wte")}
ok = all(s == (300, 32) for s in shapes.values())
print(("ok    " if ok else "FAIL  ") + f"unpadded vocabulary tensors in the checkpoint: {shapes}")
sys.exit(0 if ok else 1)
PY
    load_each "$ck" P "${v[*]}" "4 --set parallel.tp=4 --set train.micro_batch=2 --set train.grad_accum=2" \
      "2 --set parallel.pp=2 --set train.micro_batch=1 --set train.grad_accum=4" \
      "1 --set model.pad_vocab_to=1 --set train.micro_batch=2 --set train.grad_accum=2" ;;
  shared_expert)
    deck=$PENTAD_SOURCE_DIR/tests/parity/moe_llama.toml
    s=(--set model.shared_expert_ffn=48 --set model.shared_expert_gate=true)
    train 2 T "${s[@]}" --set parallel.tp=2 --set parallel.sp=true --set parallel.expert_tp=true \
      --set checkpoint.dir="$tmp/T" --set checkpoint.every=5 --set train.steps=5
    echo "source: tp2 + sp, expert tp"
    load_each "$tmp/T/step_000005.h5" U "${s[*]}" "1 --set train.grad_accum=1" \
      "2 --set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=1 --set train.micro_batch=1"
    train 2 E "${s[@]}" --set parallel.dp=2 --set parallel.ep=2 --set parallel.zero=1 --set train.micro_batch=1 \
      --set checkpoint.dir="$tmp/E" --set checkpoint.every=5 --set train.steps=5
    echo "source: dp2 x ep2 zero1"
    load_each "$tmp/E/step_000005.h5" F "${s[*]}" "1 --set train.grad_accum=1" \
      "2 --set parallel.tp=2 --set parallel.sp=true --set parallel.expert_tp=true" ;;
  kv_copies)
    # Each key/value block written once although several tp ranks hold it
    # (the writer refuses a block written twice), read by every holder.
    deck=$PENTAD_SOURCE_DIR/tests/parity/llama.toml
    train 4 K2 --set parallel.tp=4 --set checkpoint.dir="$tmp/K2" --set checkpoint.every=5 --set train.steps=5
    ck=$tmp/K2/step_000005.h5
    echo "source: 2 key/value heads, tp4"
    load_each "$ck" A "" "2 --set parallel.tp=2" "1 --set parallel.tp=1"
    k1=(--set model.n_kv_heads=1)
    train 4 K1 "${k1[@]}" --set parallel.tp=2 --set parallel.dp=2 --set parallel.zero=1 --set train.micro_batch=1 \
      --set train.grad_accum=1 --set checkpoint.dir="$tmp/K1" --set checkpoint.every=5 --set train.steps=5
    ck=$tmp/K1/step_000005.h5
    echo "source: 1 key/value head, tp2 x dp2 zero1"
    load_each "$ck" B "${k1[*]}" "4 --set parallel.tp=4" "1 --set parallel.tp=1" ;;
  zbv_reshard)
    L4=(--set model.n_layers=4)
    train 2 V "${L4[@]}" --set parallel.pp=2 --set parallel.virtual_stages=2 --set parallel.schedule=zbv \
      --set train.grad_accum=2 --set checkpoint.dir="$tmp/V" --set checkpoint.every=5 --set train.steps=5
    ck=$tmp/V/step_000005.h5
    load_each "$ck" Z "${L4[*]}" "2 --set parallel.pp=2 --set train.grad_accum=2" "1 --set train.grad_accum=2"
    ;;
  pp_zero3_reshard)
    train 4 P --set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=3 --set parallel.schedule=zbh1 \
      --set train.micro_batch=1 --set train.grad_accum=2 --set checkpoint.dir="$tmp/P" --set checkpoint.every=5 \
      --set train.steps=5
    ck=$tmp/P/step_000005.h5
    load_each "$ck" Q "" "1 --set train.micro_batch=2 --set train.grad_accum=2" \
      "4 --set parallel.pp=2 --set parallel.dp=2 --set parallel.zero=2 --set train.micro_batch=1 --set train.grad_accum=2"
    ;;
  signal)
    "$MPIEXEC" -n 2 "$PENTAD" train "$deck" "${common[@]}" --set parallel.dp=2 --set train.steps=100000 \
      --set checkpoint.dir="$tmp/G" --set log.metrics="$tmp/g.jsonl" > "$tmp/sig.log" 2>&1 &
    launcher=$!
    for _ in $(seq 600); do
      [ -f "$tmp/g.jsonl" ] && [ "$(wc -l < "$tmp/g.jsonl")" -ge 3 ] && break
      sleep 0.1
    done
    # SIGUSR1 to every rank (what srun forwards on a SLURM warning signal).
    # (matched on this test's own checkpoint dir, so concurrent tests are spared)
    pkill -USR1 -f "checkpoint.dir=$tmp/G" || true
    rc=0
    timeout 60 tail --pid=$launcher -f /dev/null || rc=124
    wait $launcher || rc=$?
    cat "$tmp/sig.log" | grep -E "signal received|checkpoint:" || true
    "$PENTAD_PYTHON" - "$tmp" "$rc" <<'PY'
import json, os, re, sys
import h5py
tmp, rc = sys.argv[1], int(sys.argv[2])
log = open(f"{tmp}/sig.log").read()
rows = [json.loads(l) for l in open(f"{tmp}/g.jsonl")]
latest = open(f"{tmp}/G/latest").read().strip()
step = int(h5py.File(os.path.join(f"{tmp}/G", os.path.basename(latest)), "r").attrs["step"])
m = re.search(r"signal received: stopped after step (\d+)", log)
checks = [
    (f"exit code 0 (got {rc})", rc == 0),
    ("one 'signal received' line", log.count("signal received") == 1 and m is not None),
    (f"committed checkpoint at step {step} = last logged step {rows[-1]['step']}", m and step == rows[-1]["step"] == int(m.group(1))),
    ("no temporary file left", not any(f.endswith(".tmp") for f in os.listdir(f"{tmp}/G"))),
]
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report  # noqa: E402
sys.exit(report(checks))
PY
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
