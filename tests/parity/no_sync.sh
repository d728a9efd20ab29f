#!/usr/bin/env bash
# With gradient accumulation, zero 0 and 1 reduce nothing before the last
# micro-batch: each step launches exactly one reduction per bucket. ZeRO-2/3
# keep no full gradient, so they reduce-scatter every micro-batch (accum x
# buckets). Counts come from the run's metrics file (dp_reductions).
set -euo pipefail
deck=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
for z in 0 1 2; do
  "$MPIEXEC" -n 2 "$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" --set parallel.dp=2 \
    --set parallel.zero=$z --set train.grad_accum=4 --set train.steps=3 --set parallel.bucket_mb=0.02 \
    --set log.metrics="$tmp/m$z.jsonl" > "$tmp/log$z" 2>&1 || { cat "$tmp/log$z"; exit 1; }
done
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
failed = 0
for z, per_mb in ((0, 1), (1, 1), (2, 4)):
    rows = [json.loads(l) for l in open(f"{tmp}/m{z}.jsonl")]
    for r in rows:
        want = r["dp_buckets"] * per_mb
        ok = r["dp_reductions"] == want and r["dp_buckets"] > 1
        failed += not ok
        print(("ok    " if ok else "FAIL  ") + f"zero {z} step {r['step']}: {r['dp_reductions']:.0f} reductions, "
              f"{r['dp_buckets']:.0f} buckets x {per_mb} (grad_accum 4)")
print(f"{9 - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
