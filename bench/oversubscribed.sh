#!/usr/bin/env bash
# The cost of running more ranks than cores: every parallel axis run twice
# on the same 2 cores (taskset) with the same tokens per step, once with one
# rank per core and once with two, one thread per rank. The work is the
# same, so the ratio of median step times says what the oversubscription
# costs beyond the extra communication of the wider layout (1.0: nothing).
# llama-small (micro-batch 2, T 256) for dp, ZeRO-3, tp, cp and pp;
# moe-small (micro-batch 2, T 64) for ep.
#   bench/oversubscribed.sh [RUNS] [STEPS]   (default 3 runs of 4 steps)
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
runs=${1:-3}
steps=${2:-4}
bench_scratch
bench_prep_corpus "$tmp/data"
cores=0,1
common=(--set train.micro_batch=2 --set train.threads=1 --set data.train="$tmp/data/train.bin" --set data.val=
        --set train.eval_every=0 --set train.steps="$steps" --set log.every=1000 --set checkpoint.save_final=false)
# one NAME RANKS DECK SETS...: RUNS runs, their median steps in $tmp/NAME.ms.
one() {
  local name=$1 n=$2 deck=$3
  shift 3
  for r in $(seq "$runs"); do
    bench_logged "$tmp/$name.$r.log" env OMP_NUM_THREADS=1 taskset -c "$cores" mpiexec -n "$n" "$pentad" train \
      "$root/input/$deck.toml" "${common[@]}" "$@"
    sed -n 's/^summary:.*median step \([0-9.]*\) ms.*/\1/p' "$tmp/$name.$r.log" >> "$tmp/$name.ms"
  done
}
# pair AXIS DECK "SETS for 2 ranks" "SETS for 4 ranks"
pairs=()
pair() {
  local axis=$1 deck=$2
  read -r -a two <<< "$3"
  read -r -a four <<< "$4"
  one "$axis.2" 2 "$deck" "${two[@]}"
  one "$axis.4" 4 "$deck" "${four[@]}"
  pairs+=("$axis")
}
s=--set
pair "dp ZeRO-1" llama-small "$s parallel.dp=2 $s parallel.zero=1 $s train.grad_accum=4" \
                             "$s parallel.dp=4 $s parallel.zero=1 $s train.grad_accum=2"
pair "dp ZeRO-3" llama-small "$s parallel.dp=2 $s parallel.zero=3 $s train.grad_accum=4" \
                             "$s parallel.dp=4 $s parallel.zero=3 $s train.grad_accum=2"
pair "tp" llama-small "$s parallel.tp=2 $s train.grad_accum=2" "$s parallel.tp=4 $s train.grad_accum=2"
pair "cp" llama-small "$s parallel.cp=2 $s train.grad_accum=2" "$s parallel.cp=4 $s train.grad_accum=2"
pair "pp 1f1b" llama-small "$s parallel.pp=2 $s parallel.schedule=1f1b $s train.grad_accum=4" \
                           "$s parallel.pp=4 $s parallel.schedule=1f1b $s train.grad_accum=4"
pair "ep" moe-small "$s parallel.dp=2 $s parallel.ep=2 $s train.grad_accum=2" \
                    "$s parallel.dp=4 $s parallel.ep=4 $s train.grad_accum=1"
/usr/bin/python3 - "$tmp" "${pairs[@]}" <<'PY'
import statistics, sys
tmp, axes = sys.argv[1], sys.argv[2:]
med = lambda name: statistics.median(float(x) for x in open(f"{tmp}/{name}.ms"))
print(f"{'axis':<10} {'2 ranks, ms/step':>17} {'4 ranks, ms/step':>17} {'4 / 2':>7}")
for a in axes:
    two, four = med(f"{a}.2"), med(f"{a}.4")
    print(f"{a:<10} {two:>17.1f} {four:>17.1f} {four / two:>7.2f}")
print("the same 2 cores, the same tokens per step; medians over runs of each run's median step")
PY
