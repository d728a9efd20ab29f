#!/usr/bin/env bash
# Data-parallel weak scaling on this machine: the same per-rank micro-batch on
# 1 and 2 ranks (one rank per core, one thread per rank), for a model big
# enough that compute dominates. Prints median tokens/s, the scaling
# efficiency, and the share of the gradient reduction hidden behind backward
# (dp_comm_hidden), with and without MPICH's async progress thread.
#   bench/dp_scaling.sh [STEPS]
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
steps=${1:-8}
bench_scratch
"$pentad" prep --out "$tmp/data" $(find "$here"/../src -name "*.cpp" | sort) > /dev/null
model=(--set model.n_layers=4 --set model.d_model=512 --set model.n_heads=8 --set model.seq_len=256
       --set train.micro_batch=4 --set train.steps="$steps" --set log.every=1000
       --set data.train="$tmp/data/train.bin" --set data.val="" --set parallel.bucket_mb=4)
run() {  # name ranks [env...]
  local name=$1 n=$2; shift 2
  bench_logged "$tmp/$name.log" env OMP_NUM_THREADS=1 "$@" mpiexec -n "$n" "$pentad" train "$root/input/tiny.toml" \
    "${model[@]}" --set parallel.dp="$n" --set log.metrics="$tmp/$name.jsonl"
}
run dp1 1
run dp2 2
run dp2_async 2 MPIR_CVAR_ASYNC_PROGRESS=1
/usr/bin/python3 - "$tmp" <<'PY'
import json, statistics, sys
tmp = sys.argv[1]
def load(name):
    rows = [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")][1:]  # first step warms up
    hid = [r["dp_comm_hidden"] for r in rows if r.get("dp_comm_hidden") is not None]
    return statistics.median(r["tokens_per_s"] for r in rows), (statistics.median(hid) if hid else float("nan"))
t1, _ = load("dp1")
print(f"dp=1            : {t1:9.0f} tokens/s")
for name in ("dp2", "dp2_async"):
    t2, hid = load(name)
    print(f"{name:<16}: {t2:9.0f} tokens/s  speed-up {t2 / t1:.2f}x  weak-scaling efficiency {t2 / (2 * t1):.0%}"
          f"  reduction hidden behind backward {hid:.0%}")
PY
