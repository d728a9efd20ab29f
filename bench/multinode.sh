#!/usr/bin/env bash
# Multi-node on one machine: brings up the 2-node SLURM cluster of network
# namespaces the tests use (tests/slurm/slurm_env.sh; needs root), measures
# the links, fits a machine file to them, then runs a 1-node vs 2-node sweep
# through jobscripts/sweep.sh and reports it beside the planner's prediction.
#
#   bench/multinode.sh [OUT_DIR]     (default: runs/multinode-bench)
#
# 1. Links: input/tiny.toml at tp = 2, dp = 1 on two ranks, inside one node
#    (shared memory) and across the two (TCP over the veth links, with
#    parallel.tp_across_nodes = true), at micro_batch 4 and 32. Per step a
#    tp group sends B bytes in its all-reduces and is blocked t ms; with the
#    same number of calls c at both sizes, t = B / bandwidth + c x latency
#    gives bandwidth from the difference and latency from the intercept
#    (c = 20 all-reduces per step, as input/machines/this-machine.toml).
#    Medians over steps 6..30.
# 2. The fitted figures go into OUT_DIR/namespace-cluster.toml (compute
#    figures copied from input/machines/this-machine.toml).
# 3. Sweep: jobscripts/sweep.sh --ntasks=2 input/tiny.toml nodes=1,2 (dp 2,
#    the same global batch: both ranks on n1, or one on each node), then
#    pentad report with that machine file.
# The nodes share this machine's 2 cores: the sweep compares where the ranks
# sit, not how much hardware there is.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/..
pentad=${PENTAD:-$root/build/pentad}
out=$(realpath -m "${1:-$root/runs/multinode-bench}")
mkdir -p "$out"
export PENTAD=$pentad
# shellcheck source=tests/slurm/slurm_env.sh
source "$root/tests/slurm/slurm_env.sh"
export UCX_TLS=^cma  # the nodes share one kernel: no cross-memory attach between them
slurm_up 4 2
cd "$SLURM_TMP"
export PENTAD_RUNS=$SLURM_TMP/runs
"$pentad" prep --out "$SLURM_TMP/data" "$root"/tests/data/corpus.txt > /dev/null
deck=$root/input/tiny.toml
data=(--set "data.train=$SLURM_TMP/data/train.bin" --set "data.val=$SLURM_TMP/data/val.bin"
      --set train.eval_every=0 --set train.threads=1)

# median_col FILE KEY: the median of KEY over rows 6.. of a metrics file.
median_col() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][5:]
print(statistics.median(r[sys.argv[2]] for r in rows))
PY
}

declare -A bytes blocked
for where in intra inter; do
  for mb in 4 32; do
    if [ $where = intra ]; then place=(-N 1 -n 2 -w n1); else place=(-N 2 --ntasks-per-node=1); fi
    id=$(sbatch --parsable --wait "${place[@]}" -J "link-$where-mb$mb" "$root/jobscripts/train.sbatch" "$deck" \
      "${data[@]}" --set parallel.tp=2 --set parallel.dp=1 --set parallel.tp_across_nodes=true \
      --set "train.micro_batch=$mb" --set train.steps=30 --set log.every=10)
    m=$PENTAD_RUNS/link-$where-mb$mb-${id%%;*}/metrics.jsonl
    bytes[$where.$mb]=$(median_col "$m" tp_bytes_sent)
    blocked[$where.$mb]=$(median_col "$m" tp_blocked_ms)
    echo "link $where micro_batch $mb: tp bytes/step ${bytes[$where.$mb]}, blocked ${blocked[$where.$mb]} ms (job ${id%%;*})"
  done
done

# fit WHERE: "GB/s latency_us"
fit() {
  /usr/bin/python3 - "${bytes[$1.4]}" "${blocked[$1.4]}" "${bytes[$1.32]}" "${blocked[$1.32]}" <<'PY'
import sys
b1, t1, b2, t2 = (float(x) for x in sys.argv[1:])
bw = (b2 - b1) / ((t2 - t1) * 1e-3)          # bytes/s
lat = max((t1 * 1e-3 - b1 / bw) / 20, 0.0)   # s per call, 20 calls per step
print(f"{bw / 1e9:.3f} {lat * 1e6:.1f}")
PY
}
read -r intra_gbs intra_us < <(fit intra)
read -r inter_gbs inter_us < <(fit inter)
machine=$out/namespace-cluster.toml
cat > "$machine" <<EOF
# The 2-node SLURM cluster of network namespaces (tests/slurm/slurm_env.sh)
# on $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), written by bench/multinode.sh on $(date -I).
# One pentad rank per core; the nodes share the cores. Links fitted to
# tp = 2 all-reduces of input/tiny.toml at micro_batch 4 and 32 (20 calls
# per step): inside a node MPICH's shared memory, across nodes UCX over TCP
# on veth links through a bridge. Compute figures from this-machine.toml.
#   intra: ${bytes[intra.4]} B in ${blocked[intra.4]} ms, ${bytes[intra.32]} B in ${blocked[intra.32]} ms
#   inter: ${bytes[inter.4]} B in ${blocked[inter.4]} ms, ${bytes[inter.32]} B in ${blocked[inter.32]} ms
[machine]
name = "2-node namespace cluster (measured)"
devices_per_node = 2
memory = "20GiB"
peak_tflops = 0.040
compute_efficiency = 0.50
intra_node_gbs = $intra_gbs
inter_node_gbs = $inter_gbs
intra_node_latency_us = $intra_us
inter_node_latency_us = $inter_us
EOF
echo "---- $machine"
cat "$machine"

# The sweep: dp 2 on one node, then across two (same ranks, same global batch).
sweep=$("$root/jobscripts/sweep.sh" --ntasks=2 "$deck" nodes=1,2 "${data[@]}" --set train.steps=60 --set log.every=20)
echo "$sweep"
while read -r _ id; do
  st=$(slurm_wait_final "$id" 300)
  [ "$st" = COMPLETED ] || { echo "sweep job $id: $st" >&2; exit 1; }
done <<< "$sweep"
rm -rf "$out"/tiny-nodes*
cp -r "$PENTAD_RUNS"/tiny-nodes* "$out"/
"$pentad" report "$out"/tiny-nodes* --machine "$machine" --csv "$out/report.csv"
