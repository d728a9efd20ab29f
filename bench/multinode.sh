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
#    parallel.tp_across_nodes = true), at micro_batch 1, 8 and 32. Per step
#    a tp group sends B bytes in its all-reduces and is blocked t ms; with
#    the same number of calls c at every size, a least-squares line
#    t = B / bandwidth + c x latency gives bandwidth from the slope and
#    latency from the intercept (c = 20 all-reduces per step, as
#    input/machines/this-machine.toml; a negative intercept is reported and
#    taken as 0). Medians over steps 6..30, then over MULTINODE_REPS (3)
#    interleaved repetitions.
# 2. The fitted figures go into OUT_DIR/namespace-cluster.toml (compute
#    figures copied from input/machines/this-machine.toml).
# 3. Sweep: jobscripts/sweep.sh --ntasks=2 input/tiny.toml nodes=1,2 (dp 2,
#    the same global batch: both ranks on n1, or one on each node), repeated
#    MULTINODE_REPS times, then pentad report with that machine file.
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
reps=${MULTINODE_REPS:-3}
# Interleaved repetitions (intra, inter, intra, ...): the machine's speed
# drifts; each point's figure is the median of its repetitions' medians.
declare -A b_runs t_runs
for rep in $(seq "$reps"); do
  for mb in 1 8 32; do
    for where in intra inter; do
      if [ $where = intra ]; then place=(-N 1 -n 2 -w n1); else place=(-N 2 --ntasks-per-node=1); fi
      id=$(sbatch --parsable --wait "${place[@]}" -J "link-$where-mb$mb" "$root/jobscripts/train.sbatch" "$deck" \
        "${data[@]}" --set parallel.tp=2 --set parallel.dp=1 --set parallel.tp_across_nodes=true \
        --set "train.micro_batch=$mb" --set train.steps=30 --set log.every=10)
      m=$PENTAD_RUNS/link-$where-mb$mb-${id%%;*}/metrics.jsonl
      b_runs[$where.$mb]+=" $(median_col "$m" tp_bytes_sent)"
      t_runs[$where.$mb]+=" $(median_col "$m" tp_blocked_ms)"
    done
  done
done
med() { /usr/bin/python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
for k in "${!t_runs[@]}"; do
  # shellcheck disable=SC2086  # the lists are space-separated numbers
  bytes[$k]=$(med ${b_runs[$k]})
  # shellcheck disable=SC2086
  blocked[$k]=$(med ${t_runs[$k]})
  echo "link $k: tp bytes/step ${bytes[$k]}, blocked ms per step:${t_runs[$k]} (median ${blocked[$k]})"
done

# fit WHERE: "GB/s latency_us intercept_ms" (least squares over the sizes)
fit() {
  /usr/bin/python3 - "${bytes[$1.1]}" "${blocked[$1.1]}" "${bytes[$1.8]}" "${blocked[$1.8]}" \
    "${bytes[$1.32]}" "${blocked[$1.32]}" <<'PY'
import sys
v = [float(x) for x in sys.argv[1:]]
b, t = v[0::2], [x * 1e-3 for x in v[1::2]]
n = len(b)
mb, mt = sum(b) / n, sum(t) / n
slope = sum((x - mb) * (y - mt) for x, y in zip(b, t)) / sum((x - mb) ** 2 for x in b)  # s per byte
icpt = mt - slope * mb                                                                  # s per step
print(f"{1 / slope / 1e9:.3f} {max(icpt, 0.0) / 20 * 1e6:.1f} {icpt * 1e3:.3f}")
PY
}
read -r intra_gbs intra_us intra_icpt < <(fit intra)
read -r inter_gbs inter_us inter_icpt < <(fit inter)
machine=$out/namespace-cluster.toml
cat > "$machine" <<EOF
# The 2-node SLURM cluster of network namespaces (tests/slurm/slurm_env.sh)
# on $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), written by bench/multinode.sh on $(date -I).
# One pentad rank per core; the nodes share the cores. Links fitted to
# tp = 2 all-reduces of input/tiny.toml at micro_batch 1, 8, 32 (20 calls
# per step; least squares): inside a node MPICH's shared memory, across
# nodes UCX over TCP on veth links through a bridge. Compute figures from
# this-machine.toml. Bytes per step and blocked ms per step (medians):
#   intra: ${bytes[intra.1]} B ${blocked[intra.1]} ms, ${bytes[intra.8]} B ${blocked[intra.8]} ms, ${bytes[intra.32]} B ${blocked[intra.32]} ms; intercept ${intra_icpt} ms
#   inter: ${bytes[inter.1]} B ${blocked[inter.1]} ms, ${bytes[inter.8]} B ${blocked[inter.8]} ms, ${bytes[inter.32]} B ${blocked[inter.32]} ms; intercept ${inter_icpt} ms
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

# The sweeps, $reps times each: dp 2 (the same global batch) on one node,
# then across two; and tp 2 the same way (parallel.tp_across_nodes = true),
# where every layer's all-reduces cross the link.
sed 's/^dp = 1$/dp = 1\ntp = 2\ntp_across_nodes = true/' "$deck" > "$SLURM_TMP/tiny-tp2.toml"
grep -q '^tp = 2$' "$SLURM_TMP/tiny-tp2.toml" || { echo "could not write the tp 2 deck" >&2; exit 1; }
rm -rf "$out"/tiny-nodes* "$out"/tiny-tp2-nodes*
for rep in $(seq "$reps"); do
  for d in "$deck" "$SLURM_TMP/tiny-tp2.toml"; do
    sweep=$("$root/jobscripts/sweep.sh" --ntasks=2 "$d" nodes=1,2 "${data[@]}" --set train.steps=60 --set log.every=20)
    echo "$sweep"
    while read -r _ id; do
      st=$(slurm_wait_final "$id" 300)
      [ "$st" = COMPLETED ] || { echo "sweep job $id: $st" >&2; exit 1; }
    done <<< "$sweep"
  done
done
cp -r "$PENTAD_RUNS"/tiny-nodes* "$PENTAD_RUNS"/tiny-tp2-nodes* "$out"/
"$pentad" report "$out"/tiny-nodes* "$out"/tiny-tp2-nodes* --machine "$machine" --csv "$out/report.csv"
# Per point: the median (min..max) over the repetitions, beside the prediction.
/usr/bin/python3 - "$out/report.csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
points = {}
for r in rows:
    points.setdefault((r["group"], r["layout"]), []).append(r)
print(f"{'point':<58} {'tok/s median (min..max)':>26} {'pred':>7} {'step ms':>8} {'pred':>7}")
for (g, layout), rs in points.items():
    t = [float(r["tokens_per_s"]) for r in rs]
    ms = [float(r["step_ms"]) for r in rs]
    print(f"{g + ' ' + layout:<58} {statistics.median(t):>8.0f} ({min(t):.0f}..{max(t):.0f}) n={len(t)} "
          f"{float(rs[0]['pred_tokens_per_s']):>7.0f} {statistics.median(ms):>8.1f} {float(rs[0]['pred_step_ms']):>7.1f}")
PY
