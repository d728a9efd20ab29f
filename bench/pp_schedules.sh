#!/usr/bin/env bash
# Pipeline schedules on this machine: pp = 2 (one rank per core, one thread
# per rank), afab, 1f1b, interleaved (2 chunks per rank), zbh1 and zbv (the
# split backward, Qi et al. 2024; zbv: 2 chunks per rank in a V) at m = 2,
# 4, 8, 16 micro-batches. Prints the median tokens/s and the measured bubble
# (idle / busy time, median over steps) per stage beside the formula
# (pp-1)/m, (pp-1)/(v m) interleaved, (pp-1)/(3m) zbh1 or (pp-1)/(6m) zbv,
# the activation peak per stage (with zbh1 and zbv it includes what the
# deferred W actions keep) and, for those two, the most W actions pending
# at once per stage with the bytes they kept.
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
  for sched in afab 1f1b interleaved zbh1 zbv; do
    v=1; { [ "$sched" = interleaved ] || [ "$sched" = zbv ]; } && v=2
    bench_logged "$tmp/$sched-$m.log" env OMP_NUM_THREADS=1 mpiexec -n 2 "$pentad" train "$root/input/tiny.toml" \
      "${model[@]}" --set parallel.schedule=$sched --set parallel.virtual_stages=$v --set train.grad_accum=$m \
      --set log.metrics="$tmp/$sched-$m.jsonl"
  done
done
/usr/bin/python3 - "$tmp" <<'PY'
import json, statistics, sys
tmp = sys.argv[1]
print(f"{'schedule':<12}{'m':>4}{'tokens/s':>11}{'bubble 0 / 1':>15}{'formula':>9}{'act stage 0 / 1':>20}"
      f"{'deferred W 0 / 1':>30}")
for m in (2, 4, 8, 16):
    for sched in ("afab", "1f1b", "interleaved", "zbh1", "zbv"):
        rows = [json.loads(l) for l in open(f"{tmp}/{sched}-{m}.jsonl")][1:]  # first step warms up
        tok = statistics.median(r["tokens_per_s"] for r in rows)
        bub = [statistics.median(r[f"pp{s}_bubble"] for r in rows) for s in (0, 1)]
        last = rows[-1]
        act = [last[f"pp{s}_act_peak_bytes"] / 2**20 for s in (0, 1)]
        w = "".join(f"{int(last[f'pp{s}_deferred_w'])} ({last[f'pp{s}_deferred_w_bytes'] / 2**20:.1f}Mi)"
                    + (" / " if s == 0 else "") for s in (0, 1)) if sched.startswith("zb") else "-"
        print(f"{sched:<12}{m:>4}{tok:>11.0f}{bub[0]:>8.3f} /{bub[1]:>6.3f}{last['pp_bubble_formula']:>9.3f}"
              f"{act[0]:>9.1f}Mi /{act[1]:>7.1f}Mi{w:>30}")
PY
