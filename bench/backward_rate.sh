#!/usr/bin/env bash
# Forward against backward FLOP rate of a serial training step, from
# pentad's own trace (log.trace), beside the per-op table of
# bench/bench_kernels and sgemm in the same run.
#   bench/backward_rate.sh [THREADS] [STEPS]   (default: nproc, 6)
# Shape: GPT-2 124M at B=4, T=256 (PENTAD_BENCH_* as bench_train). FLOPs
# counted (matmuls only, causal attention at half the square):
#   forward action  F: 2 x 12 L C^2 per token + 2 B H T^2 D per layer
#   backward action B: the head's forward and backward (6 V C per token;
#                      the last chunk runs the head inside its backward),
#                      4 x 12 L C^2 per token + 5 B H T^2 D per layer
# Medians over the traced steps after the first. OPENBLAS_CORETYPE is left
# as the environment sets it (printed).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
build=${BUILD:-$root/build}
threads=${1:-$(nproc)}
steps=${2:-6}
L=${PENTAD_BENCH_LAYERS:-12} C=${PENTAD_BENCH_DMODEL:-768} H=${PENTAD_BENCH_HEADS:-12}
V=${PENTAD_BENCH_VOCAB:-50257} T=${PENTAD_BENCH_SEQ:-256} B=${PENTAD_BENCH_BATCH:-4}
export OMP_NUM_THREADS=$threads
bench_scratch
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'); threads=$threads OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} shape: GPT-2 L=$L C=$C H=$H V=$V T=$T B=$B (fp32)"
bench_random_tokens "$tmp/train.bin" 200000 "$V"
bench_logged "$tmp/train.log" "$pentad" train "$root/input/gpt2-124m.toml" \
  --set model.n_layers="$L" --set model.d_model="$C" --set model.n_heads="$H" --set model.vocab_size="$V" \
  --set model.seq_len="$T" --set train.micro_batch="$B" --set train.grad_accum=1 --set train.steps="$steps" \
  --set train.warmup_steps=1 --set train.eval_every=0 --set data.train="$tmp/train.bin" --set data.val="" \
  --set checkpoint.dir="$tmp/ck" --set checkpoint.save_final=false --set log.metrics="" \
  --set log.trace="$tmp/trace.json"
"$build/bench/bench_kernels" --benchmark_repetitions=3 --benchmark_min_time=0.5 --benchmark_report_aggregates_only=true \
  --benchmark_format=json --benchmark_out="$tmp/ops.json" --benchmark_out_format=json > /dev/null
/usr/bin/python3 - "$tmp/trace.json" "$tmp/ops.json" "$L" "$C" "$H" "$V" "$T" "$B" <<'PY'
import json, re, statistics, sys
trace, ops = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["benchmarks"]
L, C, H, V, T, B = map(int, sys.argv[3:9])
D, tok = C // H, B * T
f_flops = 2 * 12 * L * C * C * tok + L * 2 * B * H * T * T * D
b_flops = 6 * V * C * tok + 4 * 12 * L * C * C * tok + L * 5 * B * H * T * T * D
dur = {"forward": {}, "backward": {}}
for e in trace["traceEvents"]:
    op = e.get("args", {}).get("op")
    if op in dur:
        dur[op][e["args"]["step"]] = dur[op].get(e["args"]["step"], 0) + e["dur"] * 1e-6
steps = sorted(dur["forward"])[1:]  # the first step warms up
tf = statistics.median(dur["forward"][s] for s in steps)
tb = statistics.median(dur["backward"][s] for s in steps)
med = {re.sub(r"/(min_warmup_time:[^/]*|real_time)", "", r["run_name"]): r for r in ops if r.get("aggregate_name") == "median"}
sgemm = med["BM_ref_sgemm_2048"]["GFLOP/s"]
fr, br = f_flops / tf / 1e9, b_flops / tb / 1e9
print(f"sgemm 2048^3 (same run)      : {sgemm:7.1f} GFLOP/s")
print(f"forward action  (median)     : {tf * 1e3:8.1f} ms  {fr:7.1f} GFLOP/s ({100 * fr / sgemm:.0f}% of sgemm)")
print(f"backward action (median)     : {tb * 1e3:8.1f} ms  {br:7.1f} GFLOP/s ({100 * br / sgemm:.0f}% of sgemm)")
print(f"backward rate / forward rate : {br / fr:.3f}")
print("per op (bench_kernels, medians of 3):")
for name, r in med.items():
    rate = f"{r['GFLOP/s']:7.1f} GFLOP/s" if "GFLOP/s" in r else f"{r['GB/s']:7.1f} GB/s"
    print(f"  {name:<32} {r['real_time']:9.3f} {r['time_unit']:<3} {rate}")
PY
