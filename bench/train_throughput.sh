#!/usr/bin/env bash
# pentad vs PyTorch CPU on the same model shape and thread count, side by side
# in one run, plus the sgemm rate measured in the same run.
#   bench/train_throughput.sh [THREADS] [STEPS]     (default: nproc, 4)
# Shape from PENTAD_BENCH_LAYERS, _DMODEL, _HEADS, _VOCAB, _SEQ, _BATCH
# (as bench_train; default GPT-2 124M at B=4, T=256), given to both peers.
# The issue's small shape:
#   PENTAD_BENCH_LAYERS=6 PENTAD_BENCH_DMODEL=384 PENTAD_BENCH_HEADS=6 \
#   PENTAD_BENCH_VOCAB=256 PENTAD_BENCH_BATCH=8 bench/train_throughput.sh
# Prints the figures and the ratios (PyTorch twice: as it runs by default, and
# with glibc's malloc keeping freed memory); OPENBLAS_CORETYPE is left as the
# environment sets it, for both peers (it is printed).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
build=${BUILD:-$root/build}
threads=${1:-$(nproc)}
steps=${2:-4}
L=${PENTAD_BENCH_LAYERS:-12} C=${PENTAD_BENCH_DMODEL:-768} H=${PENTAD_BENCH_HEADS:-12}
V=${PENTAD_BENCH_VOCAB:-50257} T=${PENTAD_BENCH_SEQ:-256} B=${PENTAD_BENCH_BATCH:-4}
export OMP_NUM_THREADS=$threads PENTAD_BENCH_LAYERS=$L PENTAD_BENCH_DMODEL=$C PENTAD_BENCH_HEADS=$H
export PENTAD_BENCH_VOCAB=$V PENTAD_BENCH_SEQ=$T PENTAD_BENCH_BATCH=$B
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'); threads=$threads OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} shape: GPT-2 L=$L C=$C H=$H V=$V T=$T B=$B (fp32)"
"$build/bench/bench_train" --benchmark_filter='BM_sgemm|BM_train_step/0' \
  --benchmark_repetitions=3 --benchmark_format=json --benchmark_out="${TMPDIR:-/tmp}/pentad_bench_train.json" \
  --benchmark_out_format=json > /dev/null
peer_args=(--threads "$threads" --steps "$steps" --layers "$L" --d-model "$C" --heads "$H" --vocab "$V" --seq "$T" --batch "$B")
peer=$(/usr/bin/python3 "$here/torch_peer.py" "${peer_args[@]}")
# PyTorch again with glibc's malloc told to keep what it frees: by default
# its CPU allocator hands large freed tensors back to the kernel and faults
# them in again the next step, which costs much more on some VMs than on
# bare metal (docs/benchmarks.md). pentad frees nothing during a step.
peer_kept=$(MALLOC_MMAP_THRESHOLD_=$((1 << 30)) MALLOC_TRIM_THRESHOLD_=$((1 << 40)) MALLOC_TOP_PAD_=$((1 << 30)) \
  /usr/bin/python3 "$here/torch_peer.py" "${peer_args[@]}")
/usr/bin/python3 - "${TMPDIR:-/tmp}/pentad_bench_train.json" "$peer" "$peer_kept" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
peer, kept = json.loads(sys.argv[2]), json.loads(sys.argv[3])
# Medians over the repetitions (the machine is shared and noisy).
med = {r["run_name"]: r for r in runs if r.get("aggregate_name") == "median"}
sgemm = next(v for k, v in med.items() if k.startswith("BM_sgemm"))["GFLOP/s"]
ours = next(v for k, v in med.items() if k.startswith("BM_train_step"))
ours_tok, ours_gf = ours["tokens/s"], ours["GFLOP/s"]
print(f"sgemm 2048^3            : {sgemm:8.1f} GFLOP/s")
print(f"pentad  (median step)   : {ours_tok:8.1f} tokens/s  {ours_gf:8.1f} GFLOP/s  ({100*ours_gf/sgemm:.0f}% of sgemm)")
for label, p in (("pytorch (default)", peer), ("pytorch (malloc kept)", kept)):
    print(f"{label:<24}: {p['tokens_per_s']:8.1f} tokens/s  {p['gflops']:8.1f} GFLOP/s  ({100*p['gflops']/sgemm:.0f}% of sgemm)  torch {p['torch']}")
for label, p in (("pytorch (default)", peer), ("pytorch (malloc kept)", kept)):
    print(f"ratio pentad / {label:<22}: {ours_tok / p['tokens_per_s']:.2f}x")
PY
