#!/usr/bin/env bash
# Expert tensor parallelism on this machine: input/moe-small.toml with every
# block MoE and d_ff 2048 (GPT-2, C=128, 8 experts, top-2, T=64,
# micro-batch 8) on tp 2, one thread per rank, with the experts replicated
# over tp and with parallel.expert_tp (each expert's d_ff split over tp).
# REPS alternated pairs of whole runs; prints each run's wall time, the
# median ratio expert_tp / replicated, and the last run's median step and
# peak tracked memory of each.
#   bench/moe_expert_tp.sh [REPS] [STEPS]
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
reps=${1:-7}
steps=${2:-6}
bench_scratch
bench_prep_corpus "$tmp/data"
run() {  # expert_tp(true|false) -> "start end" wall clock seconds on stdout
  local t0 t1
  t0=$EPOCHREALTIME
  bench_logged "$tmp/$1.log" env OMP_NUM_THREADS=1 mpiexec -n 2 "$pentad" train "$root/input/moe-small.toml" \
    --set parallel.tp=2 --set parallel.expert_tp="$1" --set model.moe_every=1 --set model.d_ff=2048 \
    --set data.train="$tmp/data/train.bin" --set data.val= --set train.eval_every=0 --set train.steps="$steps" \
    --set train.threads=1 --set log.every=1000
  t1=$EPOCHREALTIME
  echo "$t0 $t1"
}
: > "$tmp/times"
for ((i = 0; i < reps; i++)); do
  echo "etp $(run true) rep $(run false)" >> "$tmp/times"
done
/usr/bin/python3 - "$tmp" <<'PY'
import re, statistics, sys
tmp = sys.argv[1]
# "etp T0 T1 rep T0 T1" per pair
pairs = []
for l in open(f"{tmp}/times"):
    w = l.split()
    pairs.append((float(w[2]) - float(w[1]), float(w[5]) - float(w[4])))
for i, (a, b) in enumerate(pairs):
    print(f"pair {i + 1}: expert_tp {a:.3f} s, replicated {b:.3f} s, ratio {a / b:.3f}")
ratios = sorted(a / b for a, b in pairs)
print(f"wall ratio expert_tp / replicated: median {statistics.median(ratios):.3f} "
      f"(min {ratios[0]:.3f}, max {ratios[-1]:.3f}) over {len(pairs)} pairs")
for name in ("true", "false"):
    s = [l for l in open(f"{tmp}/{name}.log") if l.startswith("summary:")][-1]
    step = re.search(r"median step ([\d.]+) ms", s).group(1)
    mem = re.search(r"peak tracked memory ([\d.]+ MiB)", s).group(1)
    print(f"{'expert_tp' if name == 'true' else 'replicated':<10}  median step {step} ms, peak tracked memory {mem}")
PY
