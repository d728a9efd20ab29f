#!/usr/bin/env bash
# train.dtype = bf16 with and without the weight copies (a bf16 copy of the
# weights per update, or the weights rounded at every GEMM) gives
# bitwise-identical step-1 gradients, per-step losses and final parameters:
# the copy holds the values the GEMMs would round, so any copy left stale
# after the weights changed (an optimizer step, a ZeRO gather, a resume)
# shows here. With RESUME=1 each run first trains with a checkpoint at step
# 3, then resumes from it to the last step: the resumed runs' losses and
# final checkpoints (parameters, AdamW moments) are compared.
#   weight_copies_identical.sh DECK [NP "SETS"]
#   env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON, RESUME
set -euo pipefail
deck=$1; np=${2:-1}; sets=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
for c in true false; do
  run=(--set data.train="$tmp/data/train.bin" --set data.val= --set train.steps=6 --set train.grad_accum=2
       --set train.dtype=bf16 --set train.bf16_weight_copies=$c --set log.peak_tflops=1)
  if [[ ${RESUME:-0} == 1 ]]; then
    # shellcheck disable=SC2086
    "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" "${run[@]}" $sets --set checkpoint.every=3 \
      --set checkpoint.dir="$tmp/ckpt_$c" --set checkpoint.save_final=false > "$tmp/$c.first.log" 2>&1 \
      || { cat "$tmp/$c.first.log"; exit 1; }
    # A resumed run has no dump (it records from step 1): its final
    # checkpoint (parameters and AdamW moments) and its losses are compared.
    run+=(--set checkpoint.dir="$tmp/resumed_$c" --set checkpoint.resume="$tmp/ckpt_$c/step_000003.h5"
          --set checkpoint.save_final=true --set log.metrics="$tmp/$c.jsonl")
  else
    run+=(--set checkpoint.save_final=false --set log.dump="$tmp/$c.h5")
  fi
  # shellcheck disable=SC2086
  "$MPIEXEC" -n "$np" "$PENTAD" train "$deck" "${run[@]}" $sets > "$tmp/$c.log" 2>&1 \
    || { cat "$tmp/$c.log"; exit 1; }
done
grep -E "^summary" "$tmp/true.log" || true
# The copies were made and read: at least once per step run on rank 0 (the
# summary's count), and never without them.
steps_run=$([[ ${RESUME:-0} == 1 ]] && echo 3 || echo 6)
made=$(sed -n 's/^summary:.*| bf16 weight copies made \([0-9]*\)$/\1/p' "$tmp/true.log")
echo "bf16 weight copies made: ${made:-none} (steps run: $steps_run)"
[[ -n $made && $made -ge $steps_run ]] || { echo "FAIL: the copies were not made once per step"; exit 1; }
! grep -q "weight copies made" "$tmp/false.log" || { echo "FAIL: copies made with bf16_weight_copies = false"; exit 1; }
"$PENTAD_PYTHON" - "$tmp" "${RESUME:-0}" <<'PY'
import json, sys, h5py, numpy as np
tmp, resume = sys.argv[1], sys.argv[2] == "1"
if resume:
    a, b = (h5py.File(f"{tmp}/resumed_{c}/final.h5", "r") for c in ("true", "false"))
    keep = lambda n: b[n].dtype.kind == "f"
    losses = [[json.loads(l)["loss"] for l in open(f"{tmp}/{c}.jsonl") if '"loss"' in l] for c in ("true", "false")]
    print(f"losses of the resumed steps: {losses[0]} / {losses[1]}")
    bad_losses = losses[0] != losses[1] or len(losses[1]) != 3
else:
    a, b = (h5py.File(f"{tmp}/{c}.h5", "r") for c in ("true", "false"))
    keep = lambda n: n.split("/")[0] in ("grad", "final", "metrics")
    bad_losses = False
names = []
b.visit(lambda n: names.append(n) if isinstance(b[n], h5py.Dataset) and keep(n) else None)
diff = [n for n in names if n not in a or not np.array_equal(a[n][...], b[n][...])]
big = [n for n in names if b[n].size > 1]
nz = sum(int(np.count_nonzero(b[n][...])) for n in big)
print(f"copies vs none: {len(names)} datasets compared bitwise, {len(diff)} differ"
      + (f" (first: {diff[0]})" if diff else "") + f"; {nz} nonzero values in {len(big)} tensors")
sys.exit(1 if diff or bad_losses or not big or nz == 0 else 0)
PY
