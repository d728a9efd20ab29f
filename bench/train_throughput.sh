#!/usr/bin/env bash
# pentad vs PyTorch CPU on the same model shape and thread count, side by side
# in one run, plus the sgemm rate measured in the same run.
#   bench/train_throughput.sh [THREADS] [STEPS]     (default: nproc, 4)
# Prints both figures and the ratios; OPENBLAS_CORETYPE is left as the
# environment sets it, for both peers (it is printed).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
build=${BUILD:-$root/build}
threads=${1:-$(nproc)}
steps=${2:-4}
export OMP_NUM_THREADS=$threads
echo "threads=$threads OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} shape: GPT-2 L=12 C=768 H=12 V=50257 T=256 B=4 (fp32)"
"$build/bench/bench_train" --benchmark_filter='BM_sgemm|BM_train_step/0' \
  --benchmark_repetitions=3 --benchmark_format=json --benchmark_out="${TMPDIR:-/tmp}/pentad_bench_train.json" \
  --benchmark_out_format=json > /dev/null
peer=$(/usr/bin/python3 "$here/torch_peer.py" --threads "$threads" --steps "$steps")
/usr/bin/python3 - "${TMPDIR:-/tmp}/pentad_bench_train.json" "$peer" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))["benchmarks"]
peer = json.loads(sys.argv[2])
# Medians over the repetitions (the machine is shared and noisy).
med = {r["run_name"]: r for r in runs if r.get("aggregate_name") == "median"}
sgemm = next(v for k, v in med.items() if k.startswith("BM_sgemm"))["GFLOP/s"]
ours = next(v for k, v in med.items() if k.startswith("BM_train_step"))
ours_tok, ours_gf = ours["tokens/s"], ours["GFLOP/s"]
print(f"sgemm 2048^3            : {sgemm:8.1f} GFLOP/s")
print(f"pentad  (median step)   : {ours_tok:8.1f} tokens/s  {ours_gf:8.1f} GFLOP/s  ({100*ours_gf/sgemm:.0f}% of sgemm)")
print(f"pytorch {peer['torch']:<15} : {peer['tokens_per_s']:8.1f} tokens/s  {peer['gflops']:8.1f} GFLOP/s  ({100*peer['gflops']/sgemm:.0f}% of sgemm)")
print(f"ratio pentad / pytorch  : {ours_tok / peer['tokens_per_s']:.2f}x")
PY
