#!/usr/bin/env bash
# train.dtype = bf16 with and without one of its storage options gives
# bitwise-identical step-1 gradients, per-step losses and final parameters:
#   KEY=bf16_weight_copies: a bf16 copy of the weights per update, or the
#     weights rounded at every GEMM. The copy holds the values the GEMMs
#     would round, so any copy left stale after the weights changed (an
#     optimizer step, a ZeRO gather, a resume) shows here.
#   KEY=bf16_activations: the MLP activation stored as its GEMMs read it
#     (rounded to bf16), or in fp32 and rounded at every GEMM. A writer that
#     forgot to round, or a GEMM that read the wrong buffer, shows here.
# With the option on, the run's summary must show it used (copies made at
# least once per step; held activations read in place at least twice per
# step), and never with it off.
# With RESUME=1 each run first trains with a checkpoint at step
# 3, then resumes from it to the last step: the resumed runs' losses and
# final checkpoints (parameters, AdamW moments) are compared.
#   bf16_storage_identical.sh DECK [NP "SETS"]
#   env: KEY (default bf16_weight_copies), PENTAD, MPIEXEC, PENTAD_SOURCE_DIR,
#        PENTAD_PYTHON, RESUME
set -euo pipefail
deck=$1; np=${2:-1}; sets=${3:-}
key=${KEY:-bf16_weight_copies}
case $key in
  bf16_weight_copies) used="bf16 weight copies made"; per_step=1 ;;
  bf16_activations) used="bf16 activations read in place"; per_step=2 ;;
  *) echo "KEY=$key: expected bf16_weight_copies or bf16_activations"; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
for c in true false; do
  run=(--set data.train="$tmp/data/train.bin" --set data.val= --set train.steps=6 --set train.grad_accum=2
       --set train.dtype=bf16 --set train.$key=$c --set log.peak_tflops=1)
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
# The option was used: its count on rank 0's summary, at least per_step
# times per step run, and absent without it.
steps_run=$([[ ${RESUME:-0} == 1 ]] && echo 3 || echo 6)
count=$(sed -n "s/^summary:.*| $used \([0-9]*\)\( |.*\)\{0,1\}$/\1/p" "$tmp/true.log")
echo "$used: ${count:-none} (steps run: $steps_run)"
[[ -n $count && $count -ge $((per_step * steps_run)) ]] || { echo "FAIL: $key was not used every step"; exit 1; }
! grep -q "$used" "$tmp/false.log" || { echo "FAIL: '$used' with $key = false"; exit 1; }
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
print(f"on vs off: {len(names)} datasets compared bitwise, {len(diff)} differ"
      + (f" (first: {diff[0]})" if diff else "") + f"; {nz} nonzero values in {len(big)} tensors")
sys.exit(1 if diff or bad_losses or not big or nz == 0 else 0)
PY
