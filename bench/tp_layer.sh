#!/usr/bin/env bash
# Tensor parallelism at the GPT-2 124M shape (L=12 C=768 H=12, V padded to
# 50304 so tp divides it, T=256,
# micro-batch 4) on this machine: per-layer TP communication time (time blocked
# in tp collectives) beside compute, and the activation memory per rank for
# tp 1/2/4 with and without sequence parallelism. One thread per rank; tp 4
# runs 4 ranks on 2 cores (oversubscribed: its times are not meaningful, its
# memory is).
#   bench/tp_layer.sh [STEPS]
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
steps=${1:-3}
bench_scratch
bench_random_tokens "$tmp/tokens.bin" 300000 50257
shape=(--set model.vocab_size=50304 --set model.seq_len=256 --set train.micro_batch=4 --set train.grad_accum=1 --set data.train="$tmp/tokens.bin"
       --set data.val= --set checkpoint.save_final=false --set log.every=1000)
run() {  # name ranks steps sets...
  local name=$1 n=$2 s=$3; shift 3
  bench_logged "$tmp/$name.log" env OMP_NUM_THREADS=1 mpiexec -n "$n" "$pentad" train "$root/input/gpt2-124m.toml" \
    "${shape[@]}" --set train.steps="$s" --set log.metrics="$tmp/$name.jsonl" "$@"
}
run tp1 1 "$steps"
run tp2 2 "$steps" --set parallel.tp=2
run tp2_sp 2 "$steps" --set parallel.tp=2 --set parallel.sp=true
run tp4 4 1 --set parallel.tp=4
run tp4_sp 4 1 --set parallel.tp=4 --set parallel.sp=true
/usr/bin/python3 - "$tmp" <<'PY'
import json, statistics, sys
tmp, L = sys.argv[1], 12
print(f"{'layout':<8} {'step ms':>9} {'tp blocked ms/layer':>20} {'compute ms/layer':>17} {'tp MB/step':>11} {'activations MiB/rank':>21}")
for name in ("tp1", "tp2", "tp2_sp", "tp4", "tp4_sp"):
    rows = [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")]
    timed = rows[1:] or rows
    step = statistics.median(r["step_ms"] for r in timed)
    blocked = statistics.median(r["tp_blocked_ms"] for r in timed)
    act = rows[-1]["peak_mem_activations"] / 2**20
    mb = rows[-1]["tp_bytes_sent"] / 1e6
    over = " (oversubscribed)" if name.startswith("tp4") else ""
    print(f"{name:<8} {step:9.0f} {blocked / L:20.1f} {(step - blocked) / L:17.1f} {mb:11.1f} {act:21.1f}{over}")
PY
