#!/usr/bin/env bash
# Per-rank memory and dp communication by ZeRO stage, measured by the
# backend's allocation accounting and the Comm byte counters, against the
# formulas in docs/data-parallel.md. Communication per step (d = 4, one micro-batch,
# bytes = 4 x elements x (d-1)/d as ring algorithms move them):
#   zero 0: all-reduce of N: 2 x 3N = 6N bytes
#   zero 1, 2: reduce-scatter of N (3N) + all-gather of S*d (3*4S ~ 3N)
#   zero 3: reduce-scatter (3N) + every unit gathered in forward and again in
#           backward (~2N elements, 3 x 2N bytes), +- one unit (the head is
#           gathered once for its fused forward/backward, the tied embedding twice)
# Memory, as in docs/data-parallel.md (fp32: 4 bytes per parameter
# and gradient, AdamW moments 8 bytes per parameter; N = parameters incl.
# padding, d = dp size, S = ceil(N/d) rounded up to 16 = the shard):
#   zero 0: params 4N, grads 4N, optim 8N
#   zero 1: params 4N, grads 4N, optim 8S, + 4S reduce-scatter landing buffer (comm)
#   zero 2: params 4N, grads 4S + gradient windows of the buckets in flight, optim 8S
#   zero 3: params 4S + gathered unit windows, grads as zero 2, optim 8S
# The window terms are bounded by what the schedule keeps alive: at most four
# buckets of gradients (two reductions in flight, the one being computed, the
# tied embedding's, open from the head to the end of backward) and three units
# of parameters (current, prefetched next, tied embedding); with bucket_mb
# tiny every unit is its own bucket, so the bound is 4 units' worth (a unit
# here is one of 8 equal blocks, ~N/10; 20% slack for the uneven units).
set -euo pipefail
deck=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
for z in 0 1 2 3; do
  "$MPIEXEC" -n 4 "$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" --set parallel.dp=4 \
    --set parallel.zero=$z --set train.steps=2 --set parallel.bucket_mb=0.001 --set model.n_layers=8 \
    --set log.metrics="$tmp/m$z.jsonl" > "$tmp/log$z" 2>&1 || { cat "$tmp/log$z"; exit 1; }
done
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import json, os, sys
tmp = sys.argv[1]
checks = []
def near(a, b, rel=0.01):
    return abs(a - b) <= rel * b
for z in range(4):
    r = [json.loads(l) for l in open(f"{tmp}/m{z}.jsonl")][-1]
    N, S = r["param_elems"], r["shard_elems"]
    p, g, o, c = (r["peak_mem_" + k] for k in ("params", "grads", "optim", "comm"))
    unit = N / 10  # 8 blocks + embedding + head: a block is about a tenth of N
    if z == 0:
        checks += [(f"z0 params {p:.0f} = 4N {4*N:.0f}", near(p, 4 * N)), (f"z0 grads {g:.0f} = 4N", near(g, 4 * N)),
                   (f"z0 optim {o:.0f} = 8N {8*N:.0f}", near(o, 8 * N))]
    if z >= 1:
        checks.append((f"z{z} optim {o:.0f} <= 8S {8*S:.0f} and >= 8S - 8*16*d", 8 * S - 8 * 16 * 4 <= o <= 8 * S))
        checks.append((f"z{z} optim is 1/4 of zero 0's", o < 8 * N / 4 * 1.05))
    if z == 1:
        checks += [(f"z1 grads {g:.0f} = 4N", near(g, 4 * N)), (f"z1 params = 4N", near(p, 4 * N))]
    if z >= 2:
        checks.append((f"z{z} grads {g:.0f} in [4S, 4S + 4 windows] = [{4*S:.0f}, {4*S + 3*4*unit*1.6:.0f}]",
                       4 * S <= g <= 4 * S + 4 * 4 * unit * 1.2))
        checks.append((f"z{z} grads below zero 1's 4N {4*N:.0f}", g < 4 * N))
    if z == 2:
        checks.append((f"z2 params = 4N", near(p, 4 * N)))
    b = r["dp_bytes_sent"]
    if z == 0:
        checks.append((f"z0 dp bytes {b:.0f} = 6N {6*N:.0f}", near(b, 6 * N, 1e-6)))
    if z in (1, 2):
        checks.append((f"z{z} dp bytes {b:.0f} = 3N + 12S {3*N + 12*S:.0f}", near(b, 3 * N + 12 * S, 1e-6)))
    if z == 3:
        lo, hi = 3 * N + 3 * (2 * N - 1.2 * unit), 3 * N + 3 * (2 * N + 1.2 * unit)
        checks.append((f"z3 dp bytes {b:.0f} in 3N + 3(2N +- unit) = [{lo:.0f}, {hi:.0f}]", lo <= b <= hi))
    if z == 3:
        checks.append((f"z3 params {p:.0f} in [4S, 4S + 4 windows] = [{4*S:.0f}, {4*S + 3*4*unit*1.6:.0f}]",
                       4 * S <= p <= 4 * S + 4 * 4 * unit * 1.2))
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report  # noqa: E402
sys.exit(report(checks))
PY
