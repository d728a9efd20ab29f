#!/usr/bin/env bash
# `pentad ckpt info|export` on 2 ranks: a good checkpoint is summarised and
# verified, a missing or corrupted one is one clear error and exit 1.
# usage: cli.sh TEST_CHECKPOINT_BINARY   (env: PENTAD, MPIEXEC)
set -u
BIN=${1:?usage: cli.sh TEST_CHECKPOINT_BINARY}
MPIEXEC=${MPIEXEC:-mpiexec}
export OMP_NUM_THREADS=1
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pentad_ckpt_cli_XXXXXX")
trap 'rm -rf "$DIR"' EXIT
fail=0
expect() { if ! grep -qF -- "$2" <<<"$3"; then echo "FAIL: $1: missing '$2' in:"; echo "$3"; fail=1; fi; }

timeout 60 "$MPIEXEC" -n 2 "$BIN" --write-loop "$DIR/ck" 3 >/dev/null || { echo "FAIL: writing checkpoints"; exit 1; }

out=$(timeout 60 "$MPIEXEC" -n 2 "$PENTAD" ckpt info "$DIR/ck" 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: ckpt info exit $rc"; fail=1; }
expect "info" "checkpoint: $DIR/ck/step_000003.h5" "$out"
expect "info" "step: 3" "$out"
expect "info" "model/a" "$out"
expect "info" "(256, 512)" "$out"
expect "info" "checksums OK" "$out"
[ "$(grep -c 'checksums OK' <<<"$out")" -eq 1 ] || { echo "FAIL: info printed more than once"; fail=1; }

out=$(timeout 60 "$MPIEXEC" -n 2 "$PENTAD" ckpt info "$DIR/ck/nope.h5" 2>&1); rc=$?
[ $rc -eq 1 ] || { echo "FAIL: ckpt info on a missing file: exit $rc"; fail=1; }
expect "missing" "pentad: error: checkpoint '$DIR/ck/nope.h5' does not exist" "$out"
[ "$(grep -c 'pentad: error' <<<"$out")" -eq 1 ] || { echo "FAIL: the error is not printed once"; fail=1; }

# Corrupt one byte in the middle of the file's data.
cp "$DIR/ck/step_000003.h5" "$DIR/bad.h5"
size=$(stat -c %s "$DIR/bad.h5")
printf '\xff\xff\xff\xff' | dd of="$DIR/bad.h5" bs=1 seek=$((size / 2)) conv=notrunc status=none
out=$(timeout 60 "$MPIEXEC" -n 2 "$PENTAD" ckpt info "$DIR/bad.h5" 2>&1); rc=$?
[ $rc -eq 1 ] || { echo "FAIL: ckpt info on a corrupted file: exit $rc"; fail=1; }
expect "corrupt" "failed its checksum (file corrupted)" "$out"

out=$(timeout 60 "$MPIEXEC" -n 2 "$PENTAD" ckpt export "$DIR/ck" --to "$DIR/out" 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: ckpt export exit $rc: $out"; fail=1; }
expect "export" "wrote $DIR/out/model.h5" "$out"
[ -f "$DIR/out/model.h5" ] || { echo "FAIL: no model.h5"; fail=1; }

out=$(timeout 60 "$MPIEXEC" -n 2 "$PENTAD" ckpt export "$DIR/ck" 2>&1); rc=$?
[ $rc -eq 2 ] || { echo "FAIL: export without --to: exit $rc"; fail=1; }

[ $fail -eq 0 ] && echo "ckpt cli: passed"
exit $fail
