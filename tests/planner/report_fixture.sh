#!/usr/bin/env bash
# `pentad report` on a recorded scaling CSV (tests/planner/scaling_fixture.csv,
# written by bench/scaling.sh on this machine): the table lists every point
# with prediction beside measurement and the efficiency, and the plot is a
# non-empty PNG. Also: a CSV written by --csv reads back to the same table.
# env: PENTAD, PENTAD_SOURCE_DIR
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fx=$PENTAD_SOURCE_DIR/tests/planner/scaling_fixture.csv
"$PENTAD" report "$fx" --plot "$tmp/s.png" --csv "$tmp/again.csv" > "$tmp/table.txt"
cat "$tmp/table.txt"
"$PENTAD" report "$tmp/again.csv" > "$tmp/table2.txt"
n=$(($(wc -l < "$fx") - 1))
rows=$(grep -cE '^(weak|strong)-' "$tmp/table.txt" || true)
fail=0
[ "$rows" -eq "$n" ] || { echo "FAIL: $rows table rows for $n points"; fail=1; }
grep -q "worst memory error" "$tmp/table.txt" || { echo "FAIL: no error summary"; fail=1; }
grep -q "(oversubscribed)" "$tmp/table.txt" || { echo "FAIL: oversubscribed points not labelled"; fail=1; }
cmp -s <(head -n "$((n + 1))" "$tmp/table.txt") <(head -n "$((n + 1))" "$tmp/table2.txt") \
  || { echo "FAIL: the CSV written by --csv does not read back to the same table"; fail=1; }
size=$(stat -c %s "$tmp/s.png" 2>/dev/null || echo 0)
magic=$(head -c 8 "$tmp/s.png" | od -An -tx1 | tr -d ' \n')
[ "$size" -gt 1000 ] && [ "$magic" = 89504e470d0a1a0a ] || { echo "FAIL: plot is not a non-empty PNG ($size bytes, magic $magic)"; fail=1; }
# Run directories as jobscripts/sweep.sh + train.sbatch leave them
# (<deck>-ranks<R>-<job id>/, train.log with sbatch lines before the
# resolved deck, metrics.<restart>.jsonl): group "tiny", 2 points, the
# memory prediction exact. Their peak_mem_bytes and peak_mem_scratch were
# measured again on 2026-12-03 (the same deck, 1 and 2 ranks), when GPT-2's
# backward stopped allocating the gradient at the GELU's output (512 KiB
# less scratch here); the other fields are the original recording's.
runs=$PENTAD_SOURCE_DIR/tests/planner/fixture_runs
"$PENTAD" report "$runs"/tiny-ranks1-4566 "$runs"/tiny-ranks2-4567 \
  --machine "$PENTAD_SOURCE_DIR"/input/machines/this-machine.toml > "$tmp/runs.txt"
cat "$tmp/runs.txt"
[ "$(grep -cE '^tiny +[12] ' "$tmp/runs.txt")" -eq 2 ] || { echo "FAIL: sweep run directories not read as group tiny"; fail=1; }
grep -q "worst memory error 0.0%" "$tmp/runs.txt" || { echo "FAIL: memory prediction of the recorded runs is not exact"; fail=1; }
echo "table rows $rows / $n points, PNG $size bytes"
exit $fail
