#!/usr/bin/env bash
# One SLURM test case: brings up a private single-node SLURM (slurm_env.sh),
# submits jobscripts/train.sbatch with tests/slurm/tiny.toml on data prepared
# from the project's sources, checks the outcome, and tears SLURM down.
#   slurm_case.sh train N | impossible | bad_deck | rank_killed | preempt | sweep | gpu_select
set -euo pipefail
case_name=${1:?usage: slurm_case.sh CASE [ARGS]}
: "${PENTAD:?}" "${PENTAD_SOURCE_DIR:?}"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$PENTAD_SOURCE_DIR
sbatch_script=$src/jobscripts/train.sbatch
deck=$here/tiny.toml
# shellcheck source=tests/slurm/slurm_env.sh
source "$here/slurm_env.sh"
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: the SLURM tests start slurmctld/slurmd/munged and need root"
  exit 77
fi

failed=0
check() {  # check "what" test-command...
  local what=$1
  shift
  if "$@"; then echo "ok    $what"; else echo "FAIL  $what"; failed=1; fi
}
finish() {
  [ $failed = 0 ] && echo "PASS $case_name" || echo "FAILED $case_name"
  exit $failed
}
now() { date +%s.%N; }
secs_since() { "${PENTAD_PYTHON:-python3}" -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.1f}')" "$1"; }
show_logs() {  # the job's own logs, for a failing case
  local f
  for f in "$SLURM_TMP"/slurm-*.out "$SLURM_TMP"/runs/*/train.log; do
    [ -f "$f" ] && { echo "---- $f"; tail -n 30 "$f"; }
  done
  return 0
}

slurm_up 8
cd "$SLURM_TMP"
export PENTAD_RUNS=$SLURM_TMP/runs
"$PENTAD" prep --out "$SLURM_TMP/data" "$src"/tests/data/corpus.txt >/dev/null
data_sets=(--set "data.train=$SLURM_TMP/data/train.bin" --set "data.val=$SLURM_TMP/data/val.bin")

# Python helper: reads metrics files, prints "first_step last_step first_loss last_loss n".
metrics_summary() {
  "${PENTAD_PYTHON:-python3}" - "$@" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(rows[0]["step"], rows[-1]["step"], rows[0]["loss"], rows[-1]["loss"], len(rows))
PY
}
# shellcheck disable=SC2317  # called through check
# lt A B [D]: A < B - D (D defaults to 0)
lt() { "${PENTAD_PYTHON:-python3}" -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) - float(sys.argv[3]) else 1)" "$1" "$2" "${3:-0}"; }
# PIDs of pentad processes of job $1 (rank $2 if given), from /proc.
job_pentad_pids() {
  local p env
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = pentad ] || continue
    env=$( { tr '\0' '\n' < "$p/environ"; } 2>/dev/null) || continue
    grep -qx "SLURM_JOB_ID=$1" <<< "$env" || continue
    [ -z "${2:-}" ] || grep -qx "SLURM_PROCID=$2" <<< "$env" || continue
    echo "${p#/proc/}"
  done
  return 0
}
# shellcheck disable=SC2317  # called through check
wait_metrics_rows() {  # wait_metrics_rows FILE N TIMEOUT_S
  timeout "$3" bash -c "until [ -f '$1' ] && [ \$(wc -l < '$1') -ge $2 ]; do sleep 0.2; done"
}

case $case_name in
train)
  n=${2:?train N}
  t0=$(now)
  set +e
  id=$(timeout 150 sbatch --parsable --wait -n "$n" -J "tiny-n$n" "$sbatch_script" "$deck" "${data_sets[@]}")
  rc=$?
  set -e
  id=${id%%;*}
  echo "job $id: sbatch --wait -n $n returned $rc after $(secs_since "$t0") s"
  run_dir=$PENTAD_RUNS/tiny-n$n-$id
  check "sbatch --wait exit status 0 (got $rc)" test "$rc" = 0
  st=$(slurm_wait_final "$id" 15 || true)
  check "job state COMPLETED (got $st)" test "$st" = COMPLETED
  check "run directory $run_dir has train.log and metrics.jsonl" test -s "$run_dir/train.log" -a -s "$run_dir/metrics.jsonl"
  check "train.log shows the resolved deck with dp = $n" grep -qE "^dp = $n( |$)" "$run_dir/train.log"
  if [ -s "$run_dir/metrics.jsonl" ]; then
    read -r s0 s1 l0 l1 nrows < <(metrics_summary "$run_dir/metrics.jsonl")
    check "metrics: steps $s0..$s1 in $nrows rows (1..60)" test "$s0 $s1 $nrows" = "1 60 60"
    check "loss fell: first $l0, last $l1 (last < first - 1.0)" lt "$l1" "$l0" 1.0
  fi
  [ $failed = 0 ] || show_logs
  ;;

impossible)
  # 16 tasks on a node of 8 CPUs: EnforcePartLimits=ALL rejects it at once.
  t0=$(now)
  set +e
  out=$(timeout 20 sbatch --parsable -n 16 -J impossible "$sbatch_script" "$deck" 2>&1)
  rc=$?
  set -e
  echo "sbatch -n 16: status $rc after $(secs_since "$t0") s: $out"
  check "sbatch failed at submission (status $rc, not 0 and not a timeout)" test "$rc" != 0 -a "$rc" != 124
  check "the refusal names the problem" grep -qiE "than permitted|not available|configuration" <<< "$out"
  check "nothing is queued" test -z "$(squeue -h -o %i)"
  ;;

bad_deck)
  t0=$(now)
  set +e
  id=$(timeout 60 sbatch --parsable --wait -n 2 -J bad-deck "$sbatch_script" "$deck" "${data_sets[@]}" --set train.stepz=5)
  rc=$?
  set -e
  id=${id%%;*}
  echo "job $id: status $rc after $(secs_since "$t0") s"
  st=$(slurm_wait_final "$id" 15 || true)
  check "sbatch --wait exit status non-zero (got $rc)" test "$rc" != 0 -a "$rc" != 124
  check "job state FAILED (got $st)" test "$st" = FAILED
  check "train.log names the unknown key train.stepz" grep -q "train.stepz" "$PENTAD_RUNS/bad-deck-$id/train.log"
  [ $failed = 0 ] || show_logs
  ;;

rank_killed)
  # A long run; SIGKILL to rank 1 must end the whole job (srun --kill-on-bad-exit).
  id=$(sbatch --parsable -n 4 -J killed "$sbatch_script" "$deck" "${data_sets[@]}" --set train.steps=100000 --set log.every=100)
  id=${id%%;*}
  run_dir=$PENTAD_RUNS/killed-$id
  check "job $id is training (3 metrics rows within 60 s)" wait_metrics_rows "$run_dir/metrics.jsonl" 3 60
  victim=$(job_pentad_pids "$id" 1)
  check "found rank 1's pid ($victim)" test -n "$victim"
  t0=$(now)
  [ -z "$victim" ] || kill -KILL "$victim"
  st=$(slurm_wait_final "$id" 30 || true)
  dt=$(secs_since "$t0")
  echo "job $id ended $st $dt s after rank 1 was killed"
  check "job state FAILED (got $st)" test "$st" = FAILED
  check "ended within 20 s of the kill ($dt s)" lt "$dt" 20
  check "no pentad process of job $id left" test -z "$(job_pentad_pids "$id")"
  [ $failed = 0 ] || show_logs
  ;;

preempt)
  # SIGUSR1 to the batch shell (what --signal=B:USR1@T sends before the time
  # limit): pentad checkpoints and exits 0, the job requeues itself, and the
  # second run resumes from the checkpoint and completes.
  # Enough steps that run 0 cannot finish before the signal lands (a step of
  # this deck takes ~2 ms; 100 steps once finished first on a quiet machine).
  steps=4000
  id=$(sbatch --parsable -n 2 -J preempt "$sbatch_script" "$deck" "${data_sets[@]}" --set train.steps=$steps --set log.every=500)
  id=${id%%;*}
  run_dir=$PENTAD_RUNS/preempt-$id
  check "job $id is training (15 metrics rows within 60 s)" wait_metrics_rows "$run_dir/metrics.jsonl" 15 60
  t0=$(now)
  scancel --batch --signal=USR1 "$id"
  # The resumed run still has most of the 4000 steps to go; under a loaded
  # machine (other tests at -j2) a step can take 10x its quiet ~2 ms.
  st=$(slurm_wait_final "$id" 200 || true)
  echo "job $id final state $st, $(secs_since "$t0") s after SIGUSR1"
  check "job state COMPLETED after the requeue (got $st)" test "$st" = COMPLETED
  check "the job ran twice (requeued once)" test "$(grep -c "^==== job $id run" "$run_dir/train.log" 2>/dev/null)" = 2
  check "first run's checkpoint under $run_dir/ckpt" test -n "$(ls "$run_dir/ckpt" 2>/dev/null)"
  check "second run's log says it resumed from the checkpoint" \
    grep -qiE "resum(ed|ing) from" <(sed -n "/^==== job $id run 1 /,\$p" "$run_dir/train.log" 2>/dev/null)
  if [ -s "$run_dir/metrics.jsonl" ] && [ -s "$run_dir/metrics.1.jsonl" ]; then
    read -r a0 a1 al0 al1 _ < <(metrics_summary "$run_dir/metrics.jsonl")
    read -r b0 b1 bl0 bl1 _ < <(metrics_summary "$run_dir/metrics.1.jsonl")
    echo "run 0: steps $a0..$a1 loss $al0 -> $al1; run 1: steps $b0..$b1 loss $bl0 -> $bl1"
    check "run 0 stopped early (last step $a1 < $steps)" test "$a1" -lt "$steps"
    check "run 1 resumed after step 1 and at most one step past run 0 (first step $b0, run 0 ended at $a1)" \
      test "$b0" -gt 1 -a "$b0" -le $((a1 + 1))
    check "run 1 finished (last step $b1 = $steps)" test "$b1" = "$steps"
    check "run 1 starts trained (first loss $bl0 < run 0's first $al0 - 1.0)" lt "$bl0" "$al0" 1.0
  else
    check "both runs wrote metrics (metrics.jsonl and metrics.1.jsonl)" false
  fi
  [ $failed = 0 ] || show_logs
  ;;

sweep)
  # jobscripts/sweep.sh: --dry-run prints one sbatch per point; a real sweep
  # submits them, and each run directory is named by its point.
  sweep=$src/jobscripts/sweep.sh
  dry=$("$sweep" --dry-run "$deck" ranks=1,2 --set train.steps=5)
  echo "$dry"
  check "--dry-run prints 2 sbatch commands" test "$(grep -c '^sbatch .*-J tiny-ranks[12] -N 1 -n [12] ' <<< "$dry")" = 2
  check "--dry-run submits nothing" test -z "$(squeue -h -o %i)"
  out=$("$sweep" "$deck" ranks=1,2 "${data_sets[@]}" --set train.steps=5)
  echo "$out"
  check "sweep prints 'ranks=R JOBID' per point" \
    test "$(sed -E 's/ [0-9]+$/ ID/' <<< "$out" | tr '\n' ' ')" = "ranks=1 ID ranks=2 ID "
  while read -r point id; do
    r=${point#ranks=}
    st=$(slurm_wait_final "$id" 60 || true)
    check "$point: job $id COMPLETED (got $st)" test "$st" = COMPLETED
    check "$point: runs/tiny-ranks$r-$id/train.log has dp = $r" grep -qE "^dp = $r( |$)" "$PENTAD_RUNS/tiny-ranks$r-$id/train.log"
  done <<< "$out"
  [ $failed = 0 ] || show_logs
  ;;

gpu_select)
  # The per-task GPU choice, checked without GPUs: the job is given
  # CUDA_VISIBLE_DEVICES=3,5,7,9 (as SLURM does for --gpus-per-node=4) and a
  # stand-in binary that records what each task sees. Each task must keep
  # exactly the device at its SLURM_LOCALID, and a CPU-only binary is not
  # switched to backend = "cuda".
  stub=$SLURM_TMP/stub-pentad
  # shellcheck disable=SC2016  # expanded by the stub, not here
  printf '#!/bin/bash\necho "local=$SLURM_LOCALID cuda=$CUDA_VISIBLE_DEVICES args=$*" >> %q\n' \
    "$SLURM_TMP/seen.txt" > "$stub"
  chmod +x "$stub"
  set +e
  id=$(CUDA_VISIBLE_DEVICES=3,5,7,9 PENTAD=$stub timeout 60 sbatch --parsable --wait -n 4 -J gpu "$sbatch_script" "$deck")
  rc=$?
  set -e
  id=${id%%;*}
  check "job $id exit status 0 (got $rc)" test "$rc" = 0
  seen=$(sort "$SLURM_TMP/seen.txt" 2>/dev/null | sed -E 's/ args=.*//' | tr '\n' ' ')
  echo "tasks saw: $seen"
  check "task i sees only device i of 3,5,7,9" test "$seen" = "local=0 cuda=3 local=1 cuda=5 local=2 cuda=7 local=3 cuda=9 "
  check "no backend=cuda for a binary without CUDA" test -z "$(grep -l 'backend=cuda' "$SLURM_TMP/seen.txt")"
  check "the job log reports 4 GPUs per node" grep -q "4 GPU(s)/node" "$SLURM_TMP/slurm-$id.out"
  check "the job log warns that the binary has no CUDA backend" grep -q "has no CUDA backend" "$SLURM_TMP/slurm-$id.out"
  [ $failed = 0 ] || show_logs
  ;;

*)
  echo "unknown case '$case_name'" >&2
  exit 2
  ;;
esac
finish
