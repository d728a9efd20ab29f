#!/usr/bin/env bash
# A frozen rank must not hang the job: SIGSTOP one rank of a 2-rank run and
# the other's blocked MPI call must end the job (every rank, non-zero exit)
# within parallel.comm_timeout_s plus a few seconds, naming the group, the
# operation, the step and the rank.
#   guard_frozen_rank.sh      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR)
set -uo pipefail
tmp=$(mktemp -d)
job=""
cleanup() {
  if [ -n "$job" ]; then kill -CONT -- $(descendants "$job") 2>/dev/null; kill -KILL "$job" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
TIMEOUT_S=3

# Every process below pid $1 (the ranks sit under mpiexec's proxy).
descendants() {
  local kids
  kids=$(pgrep -P "$1")
  for k in $kids; do echo "$k"; descendants "$k"; done
}

"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null || { echo "prep failed"; exit 1; }
cat > "$tmp/deck.toml" <<DECK
[model]
n_layers = 2
d_model = 32
n_heads = 2
seq_len = 32
[parallel]
dp = 2
comm_timeout_s = $TIMEOUT_S
[train]
steps = 1000000
micro_batch = 8
threads = 1
[data]
train = "$tmp/data/train.bin"
[log]
every = 1
peak_tflops = 1
[checkpoint]
dir = "$tmp/ckpt"
save_final = false
DECK

"$MPIEXEC" -n 2 "$PENTAD" train "$tmp/deck.toml" > "$tmp/out" 2>&1 &
job=$!
# Wait for training to be under way (a few step lines).
for _ in $(seq 1 600); do
  [ "$(grep -c '^step' "$tmp/out")" -ge 3 ] && break
  kill -0 "$job" 2>/dev/null || { echo "FAIL: the run ended before it was frozen"; cat "$tmp/out"; exit 1; }
  sleep 0.1
done
[ "$(grep -c '^step' "$tmp/out")" -ge 3 ] || { echo "FAIL: no step lines after 60 s"; cat "$tmp/out"; exit 1; }
# Rank 1: the pentad process whose environment says PMI_RANK=1.
victim=""
for p in $(descendants "$job"); do
  if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx 'PMI_RANK=1' &&
     [ "$(cat /proc/$p/comm 2>/dev/null)" = pentad ]; then victim=$p; fi
done
[ -n "$victim" ] || { echo "FAIL: rank 1 not found"; exit 1; }
t0=$(date +%s.%N)
kill -STOP "$victim"
limit=$((TIMEOUT_S + 15))
for _ in $(seq 1 $((limit * 10))); do
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$job" 2>/dev/null; then
  echo "FAIL: still running ${limit} s after rank 1 was stopped"; tail -20 "$tmp/out"; exit 1
fi
wait "$job"
rc=$?
job=""
dt=$(echo "$(date +%s.%N) - $t0" | bc)
echo "job ended ${dt} s after SIGSTOP, mpiexec exit code $rc"
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: exit code 0"; fail=1; }
pat="fatal error on rank 0 .*MPI operation '[A-Za-z_ ]+' in group '[A-Za-z_.]+' did not return within parallel.comm_timeout_s = $TIMEOUT_S s \(waited [0-9.]+ s, step [0-9]+\)"
grep -qE "$pat" "$tmp/out" || { echo "FAIL: no watchdog message matching /$pat/"; fail=1; }
# Neither rank may still exist (the launcher kills the stopped one; give
# the kernel a moment to reap it).
for _ in $(seq 1 50); do
  state=$(awk '{print $3}' "/proc/$victim/stat" 2>/dev/null)
  [ -z "$state" ] || [ "$state" = Z ] && break
  sleep 0.1
done
if [ -n "$state" ] && [ "$state" != Z ]; then echo "FAIL: rank 1 (pid $victim) still exists"; kill -KILL "$victim"; fail=1; fi
[ $fail -eq 0 ] || { tail -20 "$tmp/out"; exit 1; }
grep -E "did not return" "$tmp/out"
echo "PASS"
