#!/usr/bin/env bash
# Bad input to `pentad plan` / `pentad report`: each case must fail with a
# non-zero exit and a message naming the flag, key or file.
# env: PENTAD, PENTAD_SOURCE_DIR
set -uo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
deck=$PENTAD_SOURCE_DIR/input/tiny.toml
fails=0
expect() {  # want_rc pattern -- command...
  local want=$1 pat=$2; shift 3
  "$@" > "$tmp/out" 2>&1
  local rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -q -- "$pat" "$tmp/out"; then
    echo "FAIL  $* -> rc $rc (want $want), output:"; cat "$tmp/out"; fails=$((fails + 1))
  else
    echo "ok    $* -> rc $rc: $(grep -m1 -- "$pat" "$tmp/out")"
  fi
}
expect 2 "--ranks N is required" -- "$PENTAD" plan "$deck"
expect 2 "--ranks needs a positive integer" -- "$PENTAD" plan "$deck" --ranks 0
expect 2 "unknown option '--gpus'" -- "$PENTAD" plan "$deck" --ranks 2 --gpus 8
expect 1 "--gpu-mem: unknown unit 'XB'" -- "$PENTAD" plan "$deck" --ranks 2 --gpu-mem 12XB
expect 2 "--layout: unknown key 'dq'" -- "$PENTAD" plan "$deck" --ranks 2 --layout dq=2
expect 1 "parallel: dp\*tp\*pp\*cp = 3 but the job has 4 ranks" -- "$PENTAD" plan "$deck" --ranks 4 --layout dp=1,tp=1,pp=3
expect 1 "model.n_heads=4 is not divisible by parallel.tp=8" -- "$PENTAD" plan "$deck" --ranks 8 --layout tp=8
expect 1 "model.n_layerz" -- "$PENTAD" plan "$deck" --ranks 2 --set model.n_layerz=3
expect 1 "--machine: cannot read '$tmp/none.toml'" -- "$PENTAD" plan "$deck" --ranks 2 --machine "$tmp/none.toml"
printf '[machine]\nname = "x"\ndevices_per_node = 2\nmemory = "1GiB"\npeak_tflops = 1.0\nbandwidth = 3\n' > "$tmp/m1.toml"
expect 1 "m1.toml:6: unknown key 'machine.bandwidth'" -- "$PENTAD" plan "$deck" --ranks 2 --machine "$tmp/m1.toml"
printf '[machine]\nname = "x"\ndevices_per_node = 2\nmemory = "1GiB"\npeak_tflops = -1.0\n' > "$tmp/m2.toml"
expect 1 "m2.toml:5: machine.peak_tflops: must be in" -- "$PENTAD" plan "$deck" --ranks 2 --machine "$tmp/m2.toml"
printf '[machine]\nname = "x"\nmemory = "1GiB"\npeak_tflops = 1.0\n' > "$tmp/m3.toml"
expect 1 "needs name, devices_per_node, memory and peak_tflops" -- "$PENTAD" plan "$deck" --ranks 2 --machine "$tmp/m3.toml"
expect 3 "no layout fits" -- "$PENTAD" plan "$deck" --ranks 2 --gpu-mem 1KiB
expect 2 "--moe-load needs a positive number (got '0')" -- "$PENTAD" plan "$deck" --ranks 2 --moe-load 0
expect 1 "--moe-load: the deck has no MoE blocks" -- "$PENTAD" plan "$deck" --ranks 2 --moe-load 1.2
expect 1 "--moe-load: applies to dropless routing (model.dropless = true); with model.capacity_factor=1 " -- \
  "$PENTAD" plan "$PENTAD_SOURCE_DIR/tests/parity/moe_gpt2.toml" --ranks 2 --moe-load 1.2
expect 2 "no run directory or CSV given" -- "$PENTAD" report
expect 1 "missing column 'group'" -- "$PENTAD" report "$deck"
mkdir -p "$tmp/run-ranks1"; echo "hello" > "$tmp/run-ranks1/train.log"
expect 1 "holds no resolved deck" -- "$PENTAD" report "$tmp/run-ranks1"
echo "$fails failed"
[ "$fails" -eq 0 ]
