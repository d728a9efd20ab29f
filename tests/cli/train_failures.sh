#!/usr/bin/env bash
# Training-loop failures (issue 17): each case checks the message, the exit
# code of every rank, the time to exit, and that nothing valid was lost
# (earlier checkpoints still verify and load).
#   train_failures.sh CASE      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR)
# Cases: nan_loss_pp2 nan_grad_dp2_zero2 deck_directory zero_steps sigint sigint_twice
set -uo pipefail
case_name=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
NP=2

"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null || { echo "prep failed"; exit 1; }
cat > "$tmp/deck.toml" <<DECK
[model]
n_layers = 1
d_model = 16
n_heads = 2
seq_len = 8
[train]
steps = 5
micro_batch = 1
warmup_steps = 0
grad_clip = 0.0
[checkpoint]
dir = "$tmp/ck"
[log]
peak_tflops = 1.0
[data]
train = "$tmp/data/train.bin"
DECK

# Every rank runs under this wrapper, which records the rank's pid and exit
# code. mpiexec (hydra) signals each rank's whole process group, so pentad
# gets a SIGINT itself; the wrapper only survives it (a no-op trap).
cat > "$tmp/rank.sh" <<'SH'
#!/usr/bin/env bash
"$@" &
pid=$!
echo "$pid" > "$RANK_DIR/pid.$PMI_RANK"
trap ':' INT TERM
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
wait "$pid"
rc=$?
echo "$rc" > "$RANK_DIR/rc.$PMI_RANK"
exit "$rc"
SH
export RANK_DIR=$tmp
fail() { echo "FAIL: $*"; echo "---- output:"; cat "$tmp/out"; exit 1; }

# launch ARGS...: start the job in the background (pid in $job, start time in $t0).
launch() {
  rm -f "$tmp"/rc.* "$tmp"/pid.*
  t0=$(date +%s.%N)
  "$MPIEXEC" -n $NP bash "$tmp/rank.sh" "$PENTAD" "$@" > "$tmp/out" 2>&1 &
  job=$!
}
# finish LIMIT_S: wait for the job (at most LIMIT_S seconds); $rc, $secs.
finish() {
  local limit=$1
  if ! timeout "$limit" tail --pid="$job" -f /dev/null; then
    kill -KILL "$job" 2>/dev/null
    fail "still running after $limit s"
  fi
  wait "$job"
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}
# every_rank CODE: each rank exited with CODE.
every_rank() {
  local r got
  for ((r = 0; r < NP; ++r)); do
    got=$(cat "$tmp/rc.$r" 2>/dev/null || echo "none")
    [ "$got" = "$1" ] || fail "rank $r exited with $got, expected $1"
  done
  echo "ok: every rank exited $1 (mpiexec $rc) after $secs s"
}
# once PATTERN: the output holds PATTERN exactly once.
once() {
  local n
  n=$(grep -cE -- "$1" "$tmp/out")
  [ "$n" -eq 1 ] || fail "expected /$1/ once, found it $n times"
  echo "ok: $(grep -E -- "$1" "$tmp/out" | head -c 400)"
}
# latest_ok STEP: ck/latest names a committed checkpoint of STEP that verifies, and no .tmp is left.
latest_ok() {
  [ -f "$tmp/ck/latest" ] || fail "no checkpoint committed"
  local f="$tmp/ck/$(basename "$(cat "$tmp/ck/latest")")"
  "$PENTAD" ckpt info "$f" > "$tmp/info" 2>&1 || { cat "$tmp/info"; fail "ckpt info failed on $f"; }
  grep -q "^step: $1$" "$tmp/info" || { cat "$tmp/info"; fail "latest is not step $1"; }
  grep -q "checksums OK" "$tmp/info" || { cat "$tmp/info"; fail "checksums"; }
  if ls "$tmp/ck" | grep -q '\.tmp$'; then fail "temporary file left: $(ls "$tmp/ck")"; fi
  echo "ok: latest checkpoint is step $1 and verifies"
}
# wait_rows N FILE: until the metrics file has N rows (at most 60 s).
wait_rows() {
  for _ in $(seq 600); do
    [ -f "$2" ] && [ "$(wc -l < "$2")" -ge "$1" ] && return 0
    kill -0 "$job" 2>/dev/null || fail "the run ended before step $1"
    sleep 0.1
  done
  fail "no step $1 after 60 s"
}
no_crash() {
  if grep -qE "Segmentation|core dumped|terminate called|Abort|BAD TERMINATION" "$tmp/out"; then fail "crashed"; fi
}

case "$case_name" in
  nan_loss_pp2)
    # The loss goes non-finite first, on the last stage only (rank 1).
    launch train "$tmp/deck.toml" --set parallel.pp=2 --set model.n_layers=2 --set train.grad_accum=2 \
      --set model.family=llama --set train.lr=1e12 --set train.min_lr=1e12 --set checkpoint.every=1
    finish 60
    every_rank 1
    once "pentad: error: step 2: loss or gradient norm is not finite \(loss -?nan, grad norm -?nan\); first non-finite: the loss, on rank 1 \(pp 1 dp 0 cp 0 tp 0\); lower train.lr"
    no_crash
    latest_ok 1
    # It still loads: resume at step 1 of train.steps = 1 runs nothing and says so.
    launch train "$tmp/deck.toml" --set parallel.pp=2 --set model.n_layers=2 --set train.grad_accum=2 \
      --set model.family=llama --set checkpoint.resume=latest --set train.steps=1
    finish 60
    every_rank 0
    once "^resumed from .*step_000001.h5"
    once "^summary: no steps run \(resumed at step 1, train.steps = 1\)"
    ;;
  nan_grad_dp2_zero2)
    # The loss is finite, a gradient is not: the tensor is named (its
    # reduced gradient, gathered from the ZeRO-2 shards), on both dp ranks.
    launch train "$tmp/deck.toml" --set parallel.dp=2 --set parallel.zero=2 --set train.lr=1e8 \
      --set train.min_lr=1e8 --set checkpoint.every=1
    finish 60
    every_rank 1
    once "step 2: loss or gradient norm is not finite \(loss [0-9.]+, grad norm -?nan\); first non-finite: the gradient of model/layers/0/[a-z_/]+, on ranks 0 \(pp 0 dp 0 cp 0 tp 0\), 1 \(pp 0 dp 1 cp 0 tp 0\); lower train.lr"
    no_crash
    latest_ok 1
    ;;
  deck_directory)
    launch train "$tmp/data"
    finish 60
    every_rank 1
    once "pentad: error: cannot read input deck '.*/data': is a directory"
    if grep -q "data.train" "$tmp/out"; then fail "the message speaks of data.train"; fi
    ;;
  zero_steps)
    launch train "$tmp/deck.toml" --set parallel.dp=2 --set train.steps=0
    finish 60
    every_rank 0
    once "^summary: no steps run \(train.steps = 0\) in [0-9.]+ s$"
    if grep -qiE "nan" "$tmp/out"; then fail "nan printed"; fi
    ;;
  sigint)
    # Ctrl-C: mpiexec forwards SIGINT to the ranks; they finish the step,
    # checkpoint it and exit 130.
    launch train "$tmp/deck.toml" --set parallel.dp=2 --set train.steps=100000 --set log.metrics="$tmp/m.jsonl"
    wait_rows 3 "$tmp/m.jsonl"
    kill -INT "$job"
    t0=$(date +%s.%N)
    finish 60
    every_rank 130
    # mpiexec's own code: MPICH 4.0.2's hydra returned 0 in about 1 run of 5
    # here although every rank exited 130 (a launcher race, not yet
    # understood; see docs/running.md). The ranks' codes above are pentad's.
    [ "$rc" -eq 130 ] || echo "warning: mpiexec exited $rc although every rank exited 130 (hydra)"
    once "^signal received: stopped after step [0-9]+ with a checkpoint; exiting with code 130 \(SIGINT\)$"
    step=$(grep -oE "stopped after step [0-9]+" "$tmp/out" | grep -oE "[0-9]+$")
    last=$(tail -1 "$tmp/m.jsonl" | grep -oE '"step":[0-9]+' | grep -oE "[0-9]+")
    [ "$step" = "$last" ] || fail "stopped after step $step, last logged step $last"
    latest_ok "$step"
    no_crash
    ;;
  sigint_twice)
    # A second SIGINT does not wait for the step: the ranks die at once,
    # nothing is committed for it, the earlier checkpoints stay. The two
    # signals are 50 ms apart (closer, the kernel may merge them into one)
    # and a step takes ~1 s on a quiet machine, so the step rarely ends
    # between them; when it does, the run rightly stops gracefully, which
    # says nothing about the second signal: that attempt is run again (at
    # most 3). A run that ignored the second SIGINT fails every attempt.
    for attempt in 1 2 3; do
      rm -rf "$tmp/ck" "$tmp/m.jsonl"
      launch train "$tmp/deck.toml" --set parallel.dp=2 --set train.steps=100000 --set log.metrics="$tmp/m.jsonl" \
        --set model.n_layers=2 --set model.d_model=384 --set model.seq_len=256 --set train.micro_batch=8 \
        --set checkpoint.every=2
      wait_rows 3 "$tmp/m.jsonl"
      t0=$(date +%s.%N)
      for r in $(seq 0 $((NP - 1))); do kill -INT "$(cat "$tmp/pid.$r")"; done
      sleep 0.05
      for r in $(seq 0 $((NP - 1))); do kill -INT "$(cat "$tmp/pid.$r")" 2>/dev/null; done
      finish 60
      grep -q "signal received" "$tmp/out" || break
      echo "attempt $attempt: the step ended between the two signals; again"
      [ "$attempt" -lt 3 ] || fail "the run waited for the end of the step (3 attempts)"
    done
    [ "$rc" -ne 0 ] || fail "mpiexec exited 0"
    for r in $(seq 0 $((NP - 1))); do
      got=$(cat "$tmp/rc.$r" 2>/dev/null || echo "none (killed by mpiexec)")
      echo "rank $r: exit $got"
    done
    echo "ok: mpiexec exited $rc after $secs s, without a checkpoint for the signal"
    latest_ok 2
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
exit 0
