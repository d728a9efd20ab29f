#!/usr/bin/env bash
# Expert parallelism on this machine with input/moe-small.toml (GPT-2, C=128,
# 8 experts, top-2, blocks 1 and 3 MoE, T=64, micro-batch 8): all-to-all bytes
# per step against the formula, and the time of dispatch/combine (the
# all-to-alls) beside the expert compute and the host-side routing. Runs
# dp 2 x ep 1 (experts replicated, no all-to-all) and dp 2 x ep 2, capacity
# 1.25 and dropless, one thread per rank; medians over the steps after the first.
#   bench/moe_ep.sh [STEPS]
# Formula, bytes one rank sends per step: tokens x top_k x C x 4 bytes x 2
# directions (dispatch, combine) x 2 (forward, backward) x MoE blocks, times
# the share of assignments that go to another rank ((ep-1)/ep if the router
# spreads them evenly) and are not dropped; the counts exchange adds
# (ep-1) x E/ep x 4 bytes per MoE block and direction pass.
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
steps=${1:-10}
bench_scratch
bench_prep_corpus "$tmp/data"
run() {  # name sets...
  local name=$1; shift
  bench_logged "$tmp/$name.log" env OMP_NUM_THREADS=1 mpiexec -n 2 "$pentad" train "$root/input/moe-small.toml" \
    --set data.train="$tmp/data/train.bin" --set data.val= --set train.steps="$steps" --set train.threads=1 \
    --set log.peak_tflops=1 --set log.every=1000 --set parallel.dp=2 --set log.metrics="$tmp/$name.jsonl" "$@"
}
run ep1_cap --set parallel.ep=1
run ep2_cap --set parallel.ep=2
run ep1_dropless --set parallel.ep=1 --set model.dropless=true
run ep2_dropless --set parallel.ep=2 --set model.dropless=true
/usr/bin/python3 - "$tmp" <<'PY'
import json, statistics, sys
tmp = sys.argv[1]
C, k, E, T, mb, n_moe = 128, 2, 8, 64, 8, 2
tokens = mb * T  # per rank per step
print(f"{'layout':<14} {'step ms':>8} {'a2a ms':>7} {'experts ms':>10} {'routing ms':>10} "
      f"{'dropped':>8} {'ep KiB sent':>11} {'formula KiB':>11} {'ratio':>6}")
for name in ("ep1_cap", "ep2_cap", "ep1_dropless", "ep2_dropless"):
    rows = [json.loads(l) for l in open(f"{tmp}/{name}.jsonl")][1:]
    ep = 2 if name.startswith("ep2") else 1
    med = lambda key: statistics.median(r[key] for r in rows)
    full = tokens * k * C * 4 * 2 * 2 * n_moe
    # Per step: the expected off-rank share of the kept assignments.
    expect = statistics.median(full * (ep - 1) / ep * (1 - r["moe_dropped_fraction"])
                               + (ep - 1) * (E // ep) * 4 * 2 * n_moe for r in rows)
    sent = med("ep_bytes_sent")
    ratio = f"{sent / expect:.3f}" if expect else "-"
    print(f"{name:<14} {med('step_ms'):8.1f} {med('moe_comm_ms'):7.1f} {med('moe_expert_ms'):10.1f} "
          f"{med('moe_route_ms'):10.1f} {100 * med('moe_dropped_fraction'):7.1f}% {sent / 1024:11.1f} "
          f"{expect / 1024:11.1f} {ratio:>6}")
print(f"all assignments off-rank (upper bound): {tokens * k * C * 4 * 2 * 2 * n_moe / 1024:.1f} KiB per rank per step")
PY
