#!/usr/bin/env bash
# A lost or damaged `latest` pointer is not "no checkpoint yet": with step
# files present, `checkpoint.resume = "latest"` and `ckpt info DIR` take the
# newest step file that verifies and say so; with none that verifies they
# refuse (exit 1), never start fresh.
# usage: lost_latest.sh NP   (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR)
set -u
np=${1:?usage: lost_latest.sh NP}
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pentad_latest_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt >/dev/null || exit 1
ck=$tmp/ck
train=("$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" --set parallel.dp="$np"
       --set checkpoint.dir="$ck" --set checkpoint.every=2 --set checkpoint.keep=0)
run "$np" 60 "${train[@]}" --set train.steps=6
[ "$rc" -eq 0 ] || { echo "$out"; echo "FAIL: the first training exit $rc"; exit 1; }

# Pointer deleted: resume from step 6 with a warning.
rm "$ck/latest"
run "$np" 60 "${train[@]}" --set train.steps=8 --set checkpoint.resume=latest
[ "$rc" -eq 0 ] || bad "resume without a pointer: exit $rc"
expect "resume without a pointer" \
  "warning: checkpoint pointer '$ck/latest' is missing; using the newest checkpoint in '$ck' that verifies: $ck/step_000006.h5" "$out"
expect "resume without a pointer" "resumed from $ck/step_000006.h5" "$out"
expect "resume without a pointer" "step     7/8" "$out"
reject "resume without a pointer" "starting fresh|step     1/" "$out"
[ "$(grep -c '^warning: checkpoint pointer' <<<"$out")" -eq 1 ] || bad "the warning is not printed once"
echo "resume without a pointer ($np rank(s)): exit $rc in ${secs}s"

# ckpt info follows the same rule: missing, damaged and empty pointers.
for how in missing damaged empty; do
  case $how in
    missing) rm -f "$ck/latest" ;;
    damaged) printf '\000\023garbage\377' > "$ck/latest" ;;
    empty)   : > "$ck/latest" ;;
  esac
  run "$np" 60 "$PENTAD" ckpt info "$ck"
  [ "$rc" -eq 0 ] || bad "ckpt info, pointer $how: exit $rc"
  expect "ckpt info, pointer $how" "checkpoint pointer '$ck/latest' is $how" "$out"
  expect "ckpt info, pointer $how" "checkpoint: $ck/step_000008.h5" "$out"
  expect "ckpt info, pointer $how" "checksums OK" "$out"
done

# The newest step file is damaged: the next one is taken, and named.
: > "$ck/step_000010.h5"
rm -f "$ck/latest"
run "$np" 60 "$PENTAD" ckpt info "$ck"
expect "a damaged newest file" "verifies: $ck/step_000008.h5 (skipped 1 newer: checkpoint '$ck/step_000010.h5' is empty)" "$out"

# No step file verifies: refuse, do not start fresh.
mkdir "$tmp/bad" && : > "$tmp/bad/step_000004.h5"
run "$np" 60 "${train[@]}" --set checkpoint.dir="$tmp/bad" --set train.steps=8 --set checkpoint.resume=latest
failed "no step file verifies" "$np" 30 1
expect "no step file verifies" "none of the 1 step files in '$tmp/bad' verifies" "$out"
reject "no step file verifies" "starting fresh|step     1/" "$out"
[ "$fail" -eq 0 ] && echo "lost latest pointer ($np rank(s)): passed"
exit "$fail"
