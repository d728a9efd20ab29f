#!/usr/bin/env bash
# Weak and strong scaling sweeps over dp, tp and pp on this machine, measured
# and set beside the planner's predictions by `pentad report`.
#   bench/scaling.sh [OUT_DIR] [STEPS]       (default: runs/scaling, 6 steps)
# One rank per core, one thread per rank (OMP_NUM_THREADS=1,
# train.threads=1); 4 ranks on this 2-core machine are oversubscribed and the
# report labels them so. Model: input/tiny.toml (GPT-2, L=4, C=128, T=64).
# Groups (one run directory per point, <group>-ranks<R>, as
# jobscripts/sweep.sh names its runs, so `pentad report` reads both):
#   weak-dp    micro_batch 4 x grad_accum 2 per rank; dp = 1, 2, 4
#   strong-dp  global batch 16 = micro_batch 4 x grad_accum x dp; dp = 1, 2, 4
#   strong-tp  micro_batch 8; tp = 1, 2, 4 (sequence parallel off)
#   strong-pp  micro_batch 4 x 4 micro-batches, 1f1b; pp = 1, 2, 4
# Writes OUT_DIR/scaling.csv and OUT_DIR/scaling.png; the predictions use
# input/machines/this-machine.toml (PENTAD_MACHINE to change).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
mpiexec=${MPIEXEC:-mpiexec}
out=${1:-runs/scaling}
steps=${2:-6}
machine=${PENTAD_MACHINE:-$root/input/machines/this-machine.toml}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -f "$out/data/train.bin" ] || bench_prep_corpus "$out/data"
deck=$root/input/tiny.toml
common=(--set data.train="$out/data/train.bin" --set data.val="" --set train.steps="$steps" --set train.threads=1
        --set train.eval_every=0 --set log.every=1000)
dirs=()
run() {  # group ranks --set...
  local group=$1 n=$2; shift 2
  local dir=$out/$group-ranks$n
  mkdir -p "$dir"
  echo "scaling: $group ranks=$n $*" >&2
  bench_logged "$dir/train.log" env OMP_NUM_THREADS=1 "$mpiexec" -n "$n" "$pentad" train "$deck" "${common[@]}" "$@" \
    --set log.metrics="$dir/metrics.jsonl"
  dirs+=("$dir")
}
for n in 1 2 4; do run weak-dp $n --set parallel.dp=$n --set train.micro_batch=4 --set train.grad_accum=2; done
for n in 1 2 4; do run strong-dp $n --set parallel.dp=$n --set train.micro_batch=4 --set train.grad_accum=$((4 / n)); done
for n in 1 2 4; do run strong-tp $n --set parallel.tp=$n --set train.micro_batch=8 --set train.grad_accum=1; done
for n in 1 2 4; do run strong-pp $n --set parallel.pp=$n --set parallel.schedule=1f1b --set train.micro_batch=4 --set train.grad_accum=4; done
"$pentad" report "${dirs[@]}" --machine "$machine" --one-node --csv "$out/scaling.csv" --plot "$out/scaling.png"
