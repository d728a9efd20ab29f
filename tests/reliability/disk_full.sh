#!/usr/bin/env bash
# Disk full while pentad writes: a checkpoint, the final weights, the metrics
# file, the trace, the debug dump, a `ckpt export` or a `prep` (whose earlier
# token files in the same folder must stay as they were, nothing beside them). A tmpfs (mounted here,
# in a private mount namespace, so nothing leaks) holds a first checkpoint
# and is then filled; the run that writes KIND must print one message naming
# the file, exit non-zero on every rank (3 from the fatal path, not a crash),
# within 30 s, and the first checkpoint must still verify.
# usage: disk_full.sh KIND NP   (KIND: ckpt final metrics trace dump export prep;
# env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR). Exit 77 (skipped) where a tmpfs
# cannot be mounted (not root, no mount namespaces).
set -u
kind=${1:?usage: disk_full.sh KIND NP} np=${2:?usage: disk_full.sh KIND NP}
if [ -z "${PENTAD_IN_MOUNT_NS:-}" ]; then
  if ! unshare -m --propagation private true 2>/dev/null; then
    echo "SKIP: cannot enter a private mount namespace (unshare -m needs root)"; exit 77
  fi
  PENTAD_IN_MOUNT_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pentad_full_XXXXXX")
full=$tmp/full
mkdir -p "$full"
if ! mount -t tmpfs -o size=4m tmpfs "$full" 2>/dev/null; then
  echo "SKIP: cannot mount a tmpfs (mount -t tmpfs refused)"; rm -rf "$tmp"; exit 77
fi
trap 'umount "$full" 2>/dev/null; rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt >/dev/null || exit 1
ck=$full/ck
train=("$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" --set parallel.dp="$np"
       --set checkpoint.dir="$ck")

# The checkpoint that must survive: step 2.
run "$np" 60 "${train[@]}" --set train.steps=2 --set checkpoint.every=2
[ "$rc" -eq 0 ] || { echo "$out"; echo "FAIL: the first training exit $rc"; exit 1; }
if [ "$kind" = prep ]; then  # an earlier prep's token files, which the failed prep must leave as they are
  "$PENTAD" prep --out "$full/prep" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt >/dev/null || exit 1
  (cd "$full/prep" && md5sum train.bin val.bin) > "$tmp/prep.md5"
  for _ in 1 2 3 4 5 6 7 8; do cat "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt; done > "$tmp/corpus8.txt"
fi
dd if=/dev/zero of="$full/fill" bs=64k 2>/dev/null  # until ENOSPC
resume=(--set train.steps=4 --set checkpoint.resume=latest)
exact=3  # the fatal path's code
case "$kind" in
  ckpt)    file=$ck/step_000004.h5.tmp; run "$np" 60 "${train[@]}" "${resume[@]}" --set checkpoint.every=2 ;;
  final)   file=$ck/final.h5.tmp; run "$np" 60 "${train[@]}" "${resume[@]}" --set checkpoint.save_final=true ;;
  metrics) file=$full/m.jsonl; run "$np" 60 "${train[@]}" "${resume[@]}" --set log.metrics="$file" ;;
  trace)   file=$full/t.json; run "$np" 60 "${train[@]}" "${resume[@]}" --set log.trace="$file" ;;
  dump)    # A dump records a run from step 1 (no resume); its file cannot even be created: exit 1.
           file=$full/d.h5.tmp; exact=1; run "$np" 60 "${train[@]}" --set train.steps=2 --set log.dump="$full/d.h5" ;;
  export)  file=$full/exp/model.h5.tmp; exact=1; run "$np" 60 "$PENTAD" ckpt export "$ck" --to "$full/exp" ;;
  prep)    file=$full/prep/.prep-; exact=1; run "$np" 60 "$PENTAD" prep --out "$full/prep" "$tmp/corpus8.txt" ;;
  *) echo "unknown KIND $kind"; exit 2 ;;
esac
failed "disk full ($kind)" "$np" 30 "$exact"
expect "disk full ($kind): the message names the file" "$file" "$out"
expect "disk full ($kind): the reason" "No space left on device" "$out"
[ "$(grep -c 'pentad: \(fatal \)\?error' <<<"$out")" -eq 1 ] || bad "disk full ($kind): not exactly one error message"
verified "disk full ($kind): the previous checkpoint" "$ck" 2
if [ "$kind" = prep ]; then
  (cd "$full/prep" && md5sum -c --quiet "$tmp/prep.md5") || bad "disk full (prep): the earlier token files changed"
  [ "$(ls -A "$full/prep" | tr '\n' ' ')" = "train.bin val.bin " ] ||
    bad "disk full (prep): the output directory holds $(ls -A "$full/prep" | tr '\n' ' ')"
fi
[ "$fail" -eq 0 ] && echo "disk full ($kind, $np rank(s)): passed"
exit "$fail"
