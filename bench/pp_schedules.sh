#!/usr/bin/env bash
# Pipeline schedules on this machine: pp = 2 (one rank per core, one thread
# per rank), afab, 1f1b, interleaved (2 chunks per rank) and zbh1 (the split
# backward, Qi et al. 2024) at m = 2, 4, 8,
# 16 micro-batches. Prints the median tokens/s and the measured bubble
# (idle / busy time, median over steps, worst stage) beside the formula
# (pp-1)/m, (pp-1)/(v m) interleaved or (pp-1)/(3m) zbh1, and the activation
# peak per stage (with zbh1 it includes what the deferred W actions keep).
#   bench/pp_schedules.sh [STEPS]
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
steps=${1:-6}
bench_scratch
bench_prep_corpus "$tmp/data"
model=(--set model.n_layers=8 --set model.d_model=256 --set model.n_heads=8 --set model.seq_len=128
       --set train.micro_batch=2 --set train.steps="$steps" --set log.every=1000
       --set data.train="$tmp/data/train.bin" --set data.val="" --set parallel.pp=2)
for m in 2 4 8 16; do
  for sched in afab 1f1b interleaved zbh1; do
    v=1; [ "$sched" = interleaved ] && v=2
    bench_logged "$tmp/$sched-$m.log" env OMP_NUM_THREADS=1 mpiexec -n 2 "$pentad" train "$root/input/tiny.toml" \
      "${model[@]}" --set parallel.schedule=$sched --set parallel.virtual_stages=$v --set train.grad_accum=$m \
      --set log.metrics="$tmp/$sched-$m.jsonl"
  done
done
/usr/bin/python3 - "$tmp" <<'PY'
import json, statistics, sys
tmp = sys.argv[1]
print(f"{'schedule':<12}{'m':>4}{'tokens/s':>11}{'bubble':>9}{'formula':>9}{'act stage0':>12}{'act stage1':>12}")
for m in (2, 4, 8, 16):
    for sched in ("afab", "1f1b", "interleaved", "zbh1"):
        rows = [json.loads(l) for l in open(f"{tmp}/{sched}-{m}.jsonl")][1:]  # first step warms up
        tok = statistics.median(r["tokens_per_s"] for r in rows)
        bub = statistics.median(r["pp_bubble"] for r in rows)
        last = rows[-1]
        print(f"{sched:<12}{m:>4}{tok:>11.0f}{bub:>9.3f}{last['pp_bubble_formula']:>9.3f}"
              f"{last['pp0_act_peak_bytes'] / 2**20:>10.1f}Mi{last['pp1_act_peak_bytes'] / 2**20:>10.1f}Mi")
PY
