# Shared by the reliability scripts: a tiny GPT-2 training, checks on a
# failed run (message, exit code, time, no rank left behind) and a check that
# a checkpoint still verifies (`pentad ckpt info`).
# env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR
deck=$PENTAD_SOURCE_DIR/tests/parity/gpt2.toml
fail=0
bad() { echo "FAIL: $*"; fail=1; }
expect() { grep -qF -- "$2" <<<"$3" || { bad "$1: missing '$2' in:"; echo "$3" | tail -20; }; }
reject() { if grep -qE -- "$2" <<<"$3"; then bad "$1: unexpected '$2' in:"; echo "$3" | tail -20; fi; }

# run NP LIMIT_S args...: sets $out (stdout and stderr), $rc and $secs.
run() {
  local np=$1 limit=$2; shift 2
  local t0; t0=$(date +%s.%N)
  out=$(timeout "$limit" "$MPIEXEC" -n "$np" "$@" 2>&1); rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

# A failed run: non-zero, no crash, no hang, within max_s, no process left.
# failed NAME NP MAX_S [EXACT_RC]
failed() {
  local name=$1 np=$2 max_s=$3 want=${4:-}
  [ "$rc" -eq 0 ] && bad "$name: exit 0 on $np rank(s)"
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && bad "$name: did not exit (timeout) on $np rank(s)"
  [ "$rc" -gt 128 ] && [ "$rc" -ne 137 ] && bad "$name: killed by signal $((rc - 128)) on $np rank(s)"
  if [ -n "$want" ] && [ "$rc" -ne "$want" ]; then
    bad "$name: exit $rc on $np rank(s), expected $want; the run's last lines:"
    tail -8 <<<"$out" | sed 's/^/  | /'
  fi
  reject "$name" "Segmentation|signal 11|core dumped|backtrace" "$out"
  awk -v s="$secs" -v m="$max_s" 'BEGIN { exit !(s > m) }' && bad "$name: took ${secs}s (limit ${max_s}s)"
  # Every rank has exited: none of the job's processes (their arguments name $tmp) is left.
  sleep 0.2
  if pgrep -f -- "$tmp/" >/dev/null; then bad "$name: processes left: $(pgrep -af -- "$tmp/")"; fi
  echo "$name ($np rank(s)): exit $rc in ${secs}s"
}

# verified NAME DIR STEP: `pentad ckpt info DIR` names step STEP and its checksums pass.
verified() {
  run 1 60 "$PENTAD" ckpt info "$2"
  [ "$rc" -eq 0 ] || bad "$1: ckpt info $2 exit $rc"
  expect "$1: ckpt info" "step: $3" "$out"
  expect "$1: ckpt info" "checksums OK" "$out"
}
