#!/usr/bin/env bash
# Crash safety: a 4-rank job writes checkpoints in a loop (keep = 2; odd steps
# written by every rank with MPI-IO, even steps gathered to rank 0) and one
# rank is killed with SIGKILL at a random moment; hydra then ends the job.
# After every kill, `latest` must name a committed file (never a .tmp) that
# loads and verifies bitwise under another rank count (3). Several trials
# share one directory, so later trials resume after the survivors of earlier
# ones and clean up their temporaries.
# usage: crash_safety.sh TEST_CHECKPOINT_BINARY   (env: MPIEXEC, PENTAD_CRASH_TRIALS)
set -u
BIN=${1:?usage: crash_safety.sh TEST_CHECKPOINT_BINARY}
MPIEXEC=${MPIEXEC:-mpiexec}
TRIALS=${PENTAD_CRASH_TRIALS:-6}
export OMP_NUM_THREADS=1
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pentad_crash_XXXXXX")
trap 'rm -rf "$DIR"' EXIT

fail=0
bad() { echo "FAIL (trial $trial): $*"; fail=1; }

for trial in $(seq 1 "$TRIALS"); do
  rm -f "$DIR"/pid.*
  timeout 60 "$MPIEXEC" -n 4 "$BIN" --write-loop "$DIR" >"$DIR/loop.log" 2>&1 &
  job=$!
  for _ in $(seq 1 200); do
    [ "$(ls "$DIR"/pid.* 2>/dev/null | wc -l)" -eq 4 ] && break
    sleep 0.05
  done
  # The first trial waits for a first commit, so every kill has one to protect.
  for _ in $(seq 1 400); do [ -e "$DIR/latest" ] && break; sleep 0.05; done
  rank=$((RANDOM % 4))
  delay=$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.05 + 3.0 * rand() }')
  sleep "$delay"
  pid=$(cat "$DIR/pid.$rank" 2>/dev/null)
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    bad "rank $rank was not running before the kill"; cat "$DIR/loop.log"; wait "$job"; continue
  fi
  t0=$(date +%s.%N)
  kill -9 "$pid"
  wait "$job"
  rc=$?
  t_end=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  [ "$rc" -eq 124 ] && bad "the job did not end after rank $rank died (timeout)"
  [ "$rc" -eq 0 ] && bad "the job exited 0 although rank $rank was killed"

  latest=$(cat "$DIR/latest" 2>/dev/null || true)
  case "$latest" in *.tmp*) bad "latest names a temporary file: $latest" ;; esac
  if ! out=$(timeout 60 "$MPIEXEC" -n 3 "$BIN" --verify-latest "$DIR" 2>&1); then
    bad "the latest checkpoint does not verify:"; echo "$out"
  fi
  case "$out" in *"loads and verifies"*) ;; *) bad "no committed checkpoint to verify" ;; esac
  echo "trial $trial: killed rank $rank after ${delay}s, job ended in ${t_end}s (rc $rc);" \
       "files: $(cd "$DIR" && ls | grep -v '^pid\.\|loop.log' | tr '\n' ' ')"
  echo "  $out"
done

# A leftover temporary is never what `latest` resolves to.
if ls "$DIR"/*.tmp >/dev/null 2>&1; then echo "(temporaries left by the kills: $(cd "$DIR" && ls *.tmp | tr '\n' ' '))"; fi
[ "$fail" -eq 0 ] && echo "crash safety: $TRIALS trials passed"
exit "$fail"
