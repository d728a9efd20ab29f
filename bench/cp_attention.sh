#!/usr/bin/env bash
# Context parallelism on this machine. (1) Ring-attention kernel time per cp
# rank (the busiest and the idlest rank of the step, as the runtime measures
# it), contiguous vs zig-zag, cp = 2, seq_len 2048 / 4096 / 8192; a one-layer
# model of small width (C=64, 4 heads of 16) so attention dominates. (2)
# Activation memory per rank (peak_mem_activations) vs cp = 1 / 2 / 4 at
# seq_len 4096, recompute = selective (ring attention never keeps the T x T
# probabilities, so none would compare unlike with like). One thread per
# rank; cp 4 runs 4 ranks on 2 cores (its times are not meaningful, its
# memory is). Medians over the steps after the first.
#   bench/cp_attention.sh [STEPS]
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
steps=${1:-5}
bench_scratch
bench_random_tokens "$tmp/tokens.bin" 200000 256
shape=(--set model.family=llama --set model.n_layers=1 --set model.d_model=64 --set model.n_heads=4
       --set model.n_kv_heads=4 --set model.vocab_size=256 --set train.micro_batch=1 --set train.grad_accum=1
       --set data.train="$tmp/tokens.bin" --set data.val= --set checkpoint.save_final=false
       --set log.every=1000 --set train.recompute=selective)
run() {  # name ranks steps sets...
  local name=$1 n=$2 s=$3; shift 3
  bench_logged "$tmp/$name.log" env OMP_NUM_THREADS=1 mpiexec -n "$n" "$pentad" train "$root/input/tiny.toml" \
    "${shape[@]}" --set train.steps="$s" --set log.metrics="$tmp/$name.jsonl" "$@"
}
for T in 2048 4096 8192; do
  for layout in contiguous zigzag; do
    run "t${T}_$layout" 2 "$steps" --set model.seq_len=$T --set parallel.cp=2 --set parallel.cp_layout=$layout
  done
done
for cp in 1 2 4; do
  run "mem_cp$cp" "$cp" 2 --set model.seq_len=4096 --set parallel.cp=$cp
done
/usr/bin/python3 - "$tmp" <<'PY'
import json, statistics, sys
tmp = sys.argv[1]
def rows(name):
    r = [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")]
    return r[1:] or r
med = lambda rs, k: statistics.median(x[k] for x in rs)
print("attention per cp rank, cp = 2 (kernel ms per step, forward + backward; GFLOP of visible pairs)")
print(f"{'seq_len':>7} {'layout':<11} {'ms max':>8} {'ms min':>8} {'max/min':>8} {'GFLOP max':>10} {'GFLOP min':>10} {'cp blocked ms':>14} {'step ms':>8}")
for T in (2048, 4096, 8192):
    for layout in ("contiguous", "zigzag"):
        rs = rows(f"t{T}_{layout}")
        mx, mn = med(rs, "cp_attn_ms_max"), med(rs, "cp_attn_ms_min")
        print(f"{T:7d} {layout:<11} {mx:8.1f} {mn:8.1f} {mx / mn:8.2f} {med(rs, 'cp_attn_gflop_max'):10.2f} "
              f"{med(rs, 'cp_attn_gflop_min'):10.2f} {med(rs, 'cp_blocked_ms'):14.1f} {med(rs, 'step_ms'):8.1f}")
print()
print("activation memory per rank, seq_len 4096 (peak_mem_activations)")
for cp in (1, 2, 4):
    r = [json.loads(l) for l in open(f"{tmp}/mem_cp{cp}.jsonl")][-1]
    print(f"cp={cp}: {r['peak_mem_activations'] / 2**20:8.2f} MiB activations, {r['peak_mem_scratch'] / 2**20:8.2f} MiB scratch")
PY
