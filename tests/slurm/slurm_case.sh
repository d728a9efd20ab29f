#!/usr/bin/env bash
# One SLURM test case: brings up a private single-node SLURM (slurm_env.sh),
# submits jobscripts/train.sbatch with tests/slurm/tiny.toml on data prepared
# from the project's sources, checks the outcome, and tears SLURM down.
#   slurm_case.sh train N | impossible | bad_deck | rank_killed | preempt | sweep | gpu_select
#   slurm_case.sh multinode_span | multinode_fail | multinode_unreachable | multinode_too_many | multinode_tp_split
# The multinode_* cases bring up a 2-node cluster of network namespaces
# (slurm_env.sh) and skip (77) where namespaces cannot be created.
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

case $case_name in
multinode_*)
  # 2 nodes of 4 CPUs. The nodes share this machine's kernel, so UCX's
  # cross-memory-attach transport could reach across them; without it every
  # byte between nodes crosses the veth links (counted below).
  export UCX_TLS=^cma
  # The suite's UCX_NET_DEVICES=lo (tests/CMakeLists.txt) would keep the
  # job's ranks off the nodes' links: every device, as on a real cluster.
  unset UCX_NET_DEVICES
  rc=0
  slurm_up 4 2 || rc=$?
  [ $rc = 0 ] || { [ $rc = 77 ] && echo "SKIP: no multi-node cluster here (see above)"; exit $rc; }
  ;;
*) slurm_up 8 ;;
esac
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
# refused_at_submission PATTERN SBATCH_OPTION...: sbatch with those options
# must fail at once with SLURM's message matching PATTERN, queueing nothing.
refused_at_submission() {
  local pattern=$1 t0 out rc
  shift
  t0=$(now)
  set +e
  out=$(timeout 20 sbatch --parsable "$@" "$sbatch_script" "$deck" 2>&1)
  rc=$?
  set -e
  echo "sbatch $*: status $rc after $(secs_since "$t0") s: $out"
  check "sbatch failed at submission (status $rc, not 0 and not a timeout)" test "$rc" != 0 -a "$rc" != 124
  check "SLURM's refusal names the problem" grep -qiE "$pattern" <<< "$out"
  check "nothing is queued" test -z "$(squeue -h -o %i)"
}
# compare_losses A B [FIRST_STEP]: per-step loss of two metrics files over
# their common steps (from FIRST_STEP); prints "n bitwise max_rel".
compare_losses() {
  "${PENTAD_PYTHON:-python3}" - "$@" <<'PY'
import json, sys
def rows(p):
    return {r["step"]: r["loss"] for r in (json.loads(l) for l in open(p) if l.strip())}
a, b = rows(sys.argv[1]), rows(sys.argv[2])
first = int(sys.argv[3]) if len(sys.argv) > 3 else 1
steps = sorted(s for s in a if s in b and s >= first)
rel = max((abs(a[s] - b[s]) / max(abs(b[s]), 1e-30) for s in steps), default=float("inf"))
print(len(steps), int(all(a[s] == b[s] for s in steps) and bool(steps)), f"{rel:.3e}")
PY
}
# shellcheck disable=SC2317  # called through check
ckpt_ok() { "$PENTAD" ckpt info "$1" > "$SLURM_TMP/ckpt_info.txt" 2>&1 || { cat "$SLURM_TMP/ckpt_info.txt"; return 1; }; }
# check_losses WHAT A B FIRST N_TEST: the per-step losses of metrics files A
# and B from step FIRST agree within the parity harness's 1e-5 (relative)
# over a number of common steps n with "n N_TEST" true (e.g. "== 60");
# prints whether they are bitwise equal as well.
check_losses() {
  local what=$1 a=$2 b=$3 first=$4 ntest=$5 n bitwise rel
  read -r n bitwise rel < <(compare_losses "$a" "$b" "$first")
  echo "$what: $n steps from step $first, bitwise equal: $bitwise, worst relative loss difference $rel"
  check "$what: $n steps ($ntest) within 1e-5 (worst $rel, bitwise $bitwise)" \
    "${PENTAD_PYTHON:-python3}" -c "import sys; sys.exit(0 if $n $ntest and $rel <= 1e-5 else 1)"
}
# Bytes node I sent into its link (the bridge side of its veth receives them).
node_tx() { cat "/sys/class/net/$(slurm_node_veth "$1")/statistics/rx_bytes"; }
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
  refused_at_submission "than permitted|not available|configuration" -n 16 -J impossible
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

multinode_span)
  # One layout (dp 2 x tp 2) on one node and on two. On two, SLURM hands the
  # tasks out cyclically (ranks 0 and 2 on n1); pentad numbers them node by
  # node, so each tp group stays inside a node and dp crosses the link.
  common=("${data_sets[@]}" --set parallel.tp=2 --set parallel.dp=2 --set checkpoint.every=20 --set train.steps=60)
  set +e
  # 60 steps of 4 ranks: 170 s once on 2 cores under the suite's load; the waits allow 400.
  one=$(timeout 400 sbatch --parsable --wait -N 1 -n 4 -J one "$sbatch_script" "$deck" "${common[@]}")
  rc1=$?
  tx1=$(node_tx 1)
  tx2=$(node_tx 2)
  two=$(timeout 400 sbatch --parsable --wait -N 2 --ntasks-per-node 2 --distribution=cyclic -J two \
    "$sbatch_script" "$deck" "${common[@]}")
  rc2=$?
  set -e
  one=${one%%;*}
  two=${two%%;*}
  sent1=$(( $(node_tx 1) - tx1 ))
  sent2=$(( $(node_tx 2) - tx2 ))
  run1=$PENTAD_RUNS/one-$one
  run2=$PENTAD_RUNS/two-$two
  check "1-node job $one: exit status 0 (got $rc1)" test "$rc1" = 0
  check "2-node job $two: exit status 0 (got $rc2)" test "$rc2" = 0
  check "2-node job ran on n1 and n2" grep -q "^==== job $two run 0 on n\[1-2\]" "$run2/train.log"
  check "placement: 4 ranks on n1 (2) and n2 (2)" grep -q "^placement: 4 rank(s) on 2 node(s): n1 (2) n2 (2)" "$run2/train.log"
  for want in "rank 0 -> n1 local 0 | pp 0 dp 0 ep 0 cp 0 tp 0" "rank 1 -> n1 local 1 | pp 0 dp 0 ep 0 cp 0 tp 1" \
              "rank 2 -> n2 local 0 | pp 0 dp 1 ep 0 cp 0 tp 0" "rank 3 -> n2 local 1 | pp 0 dp 1 ep 0 cp 0 tp 1"; do
    check "placement line '$want' (node by node despite the cyclic launch)" grep -qF "  $want" "$run2/train.log"
  done
  check "tp inside a node, dp across" grep -qF "groups inside a node: tp | across nodes: dp" "$run2/train.log"
  echo "bytes into the bridge during the 2-node job: from n1 $sent1, from n2 $sent2"
  check "MPI crossed the network: > 1 MB from each node ($sent1, $sent2)" test "$sent1" -gt 1000000 -a "$sent2" -gt 1000000
  if [ -s "$run1/metrics.jsonl" ] && [ -s "$run2/metrics.jsonl" ]; then
    check_losses "2 nodes vs 1 node" "$run2/metrics.jsonl" "$run1/metrics.jsonl" 1 "== 60"
  else
    check "both jobs wrote metrics" false
  fi
  # Checkpoints written by ranks of both nodes into the shared directory.
  for st in 20 40 60; do
    check "checkpoint step $st in $run2/ckpt" test -s "$run2/ckpt/step_0000$st.h5"
  done
  check "pentad ckpt info verifies the 2-node checkpoint" ckpt_ok "$run2/ckpt"
  # Resume across hosts (same layout, 2 nodes) and resharded on one node
  # (dp 2 -> 1, grad_accum 1 -> 2, 2 ranks): both continue steps 61..80 alike.
  cp -r "$run2" "$SLURM_TMP/resharded"
  set +e
  three=$(PENTAD_RUN_DIR=$run2 timeout 150 sbatch --parsable --wait -N 2 --ntasks-per-node 2 -J three \
    "$sbatch_script" "$deck" "${common[@]}" --set train.steps=80)
  rc3=$?
  four=$(PENTAD_RUN_DIR=$SLURM_TMP/resharded timeout 150 sbatch --parsable --wait -N 1 -n 2 -J four \
    "$sbatch_script" "$deck" "${common[@]}" --set train.steps=80 --set parallel.dp=1 --set train.grad_accum=2)
  rc4=$?
  set -e
  three=${three%%;*}
  four=${four%%;*}
  check "resume on 2 nodes (job $three): exit 0 (got $rc3)" test "$rc3" = 0
  check "resharded resume on 1 node (job $four): exit 0 (got $rc4)" test "$rc4" = 0
  m3=$run2/metrics.job$three.jsonl
  m4=$SLURM_TMP/resharded/metrics.job$four.jsonl
  check "the 2-node resume says it resumed from step 60" \
    grep -qE "resum(ed|ing) from .*step_000060" <(sed -n "/^==== job $three run 0 /,\$p" "$run2/train.log")
  if [ -s "$m3" ] && [ -s "$m4" ]; then
    read -r f3 l3 _ _ _ < <(metrics_summary "$m3")
    check "the 2-node resume ran steps 61..80 (got $f3..$l3)" test "$f3 $l3" = "61 80"
    check_losses "resharded 1-node resume vs the 2-node resume" "$m4" "$m3" 61 "== 20"
  else
    check "both resumed jobs wrote metrics ($m3, $m4)" false
  fi
  [ $failed = 0 ] || show_logs
  ;;

multinode_fail)
  # A 2-node run loses n2 (its link goes down) mid-run. The job must end on
  # n1 within comm_timeout_s x 1.25 plus SLURM's kill wait, name n2, leave
  # the newest checkpoint intact, and (PENTAD_ELASTIC=1) resubmit itself on
  # n1 alone: dp 4 -> 2, grad_accum 1 -> 2, same global batch, resuming from
  # the checkpoint (ZeRO-1: the optimizer state is resharded). Its losses
  # must continue a reference run of the same 200 steps and global batch
  # (1 node, dp 2 x grad_accum 2: quicker than 4 ranks on these 2 cores).
  timeout_s=10
  steps=200
  common=("${data_sets[@]}" --set train.steps=$steps --set checkpoint.every=20 --set parallel.zero=1
          --set "parallel.comm_timeout_s=$timeout_s" --set log.every=50)
  set +e
  ref=$(timeout 200 sbatch --parsable --wait -N 1 -n 2 -w n1 -J ref "$sbatch_script" "$deck" "${common[@]}" \
    --set parallel.dp=2 --set train.grad_accum=2)
  rcr=$?
  set -e
  ref=${ref%%;*}
  check "reference job $ref (1 node, dp 2 x grad_accum 2): exit 0 (got $rcr)" test "$rcr" = 0
  id=$(PENTAD_ELASTIC=1 sbatch --parsable -N 2 --ntasks-per-node 2 -J fail "$sbatch_script" "$deck" "${common[@]}")
  id=${id%%;*}
  run_dir=$PENTAD_RUNS/fail-$id
  # (200 s: at -j2 beside other tests a step has taken 2 s here.)
  check "job $id is training on 2 nodes (45 metrics rows within 200 s)" wait_metrics_rows "$run_dir/metrics.jsonl" 45 200
  t0=$(now)
  slurm_node_link 2 down
  st=$(slurm_wait_final "$id" 90 || true)
  dt=$(secs_since "$t0")
  echo "job $id ended $st $dt s after n2's link went down"
  check "job state FAILED (got $st)" test "$st" = FAILED
  check "ended within comm_timeout_s x 1.25 + 20 s = $((timeout_s * 5 / 4 + 20)) s ($dt s)" lt "$dt" $((timeout_s * 5 / 4 + 20))
  check "the job log names the lost node n2" grep -q "error: lost node(s) n2: slurmd there does not answer" "$SLURM_TMP/slurm-$id.out"
  check "the ranks' own message says the dp group stopped answering" grep -q "did not return within parallel.comm_timeout_s" "$run_dir/train.log"
  # n2's ranks, cut off, end by their own watchdog (its slurmstepd is local):
  # comm_timeout_s, then MPI_Abort bounded to 10 s. The wait allows 60 s,
  # as the machine under the suite's -j2 load once took more than 20.
  t_left=$(date +%s)
  # (In this shell: a `bash -c` child does not see job_pentad_pids.)
  for _ in $(seq 120); do [ -z "$(job_pentad_pids "$id")" ] && break; sleep 0.5; done
  check "no rank of job $id is left on either node, $(($(date +%s) - t_left)) s after n1's ranks ended ($(job_pentad_pids "$id" | tr '\n' ' '))" test -z "$(job_pentad_pids "$id")"
  # The checkpoint the job names at the failure, which the elastic job
  # resumes from (ckpt/latest may already name a newer one of that job).
  newest=$(sed -n 's/.*error: lost node(s) .*newest checkpoint: \(step_[0-9]*\.h5\).*/\1/p' "$SLURM_TMP/slurm-$id.out")
  check "a newest checkpoint is named ($newest)" test -n "$newest"
  check "pentad ckpt info verifies it" ckpt_ok "$run_dir/ckpt"
  new=$(sed -n 's/.*elastic: resubmitted as job \([0-9]*\) on 1 node(s): dp 4 -> 2, grad_accum 1 -> 2 .*/\1/p' "$SLURM_TMP/slurm-$id.out")
  check "the job resubmitted itself on the remaining node (job '${new}')" test -n "$new"
  if [ -n "$new" ]; then
    st2=$(slurm_wait_final "$new" 200 || true)
    check "elastic job $new COMPLETED (got $st2)" test "$st2" = COMPLETED
    m=$run_dir/metrics.job$new.jsonl
    check "elastic job ran on n1 only" grep -q "^==== job $new run 0 on n1 " "$run_dir/train.log"
    if [ -s "$m" ]; then
      read -r f l _ _ _ < <(metrics_summary "$m")
      ck=$(sed -n 's/.*step_0*\([0-9]*\)\.h5.*/\1/p' <<< "$newest")
      check "elastic job resumed at the checkpoint (first step $f = ${ck:-?} + 1) and finished (last $l = $steps)" \
        test "$f $l" = "$(( ${ck:-0} + 1 )) $steps"
      check_losses "elastic job vs the reference (its loss continues the curve)" "$m" \
        "$PENTAD_RUNS/ref-$ref/metrics.jsonl" "$f" "== $steps - $f + 1"
      check_losses "the 2-node steps before the failure vs the reference" "$run_dir/metrics.jsonl" \
        "$PENTAD_RUNS/ref-$ref/metrics.jsonl" 1 ">= 45"
    else
      check "elastic job wrote $m" false
    fi
  fi
  slurm_node_link 2 up || true
  [ $failed = 0 ] || show_logs
  ;;

multinode_unreachable)
  # MPI over the second network (UCX_NET_DEVICES=fab0) while SLURM keeps
  # eth0; n2's port on it is detached before the job, so the ranks on n1 and
  # n2 cannot reach each other although SLURM launches them fine. Debian's
  # MPICH connects every pair inside MPI_Init, which fails at once
  # ("Destination is unreachable"); the job must end within seconds and
  # train.sbatch must say that MPI's network, not SLURM's, is broken between
  # n1 and n2. (An MPI that connects lazily would block in pentad's first
  # exchange instead, where the watchdog, armed from the start, ends it.)
  slurm_fabric_link 2 down
  t0=$(now)
  set +e
  id=$(UCX_NET_DEVICES=fab0 timeout 150 sbatch --parsable --wait -N 2 --ntasks-per-node 1 -J unreachable \
    "$sbatch_script" "$deck" "${data_sets[@]}" --set parallel.comm_timeout_s=10)
  rc=$?
  set -e
  id=${id%%;*}
  dt=$(secs_since "$t0")
  log=$PENTAD_RUNS/unreachable-$id/train.log
  echo "job $id: status $rc after $dt s"
  check "job exit status non-zero (got $rc)" test "$rc" != 0 -a "$rc" != 124
  check "job state FAILED (got $(slurm_wait_final "$id" 15 || true))" test "$(slurm_job_state "$id")" = FAILED
  check "ended within 30 s of submission ($dt s)" lt "$dt" 30
  check "the job log names both hosts and says MPI's network is broken between them" \
    grep -q "error: MPI could not connect the nodes n1,n2 at start-up, although slurmd answers on every one: the network MPI uses between them is broken (UCX_NET_DEVICES=fab0" \
    "$SLURM_TMP/slurm-$id.out"
  check "... quoting MPI's reason" grep -q "MPI said: .*unreachable" "$SLURM_TMP/slurm-$id.out"
  check "no node is reported lost" test -z "$(grep 'lost node' "$SLURM_TMP/slurm-$id.out")"
  check "no step ran" test -z "$(grep -E '^step ' "$log")"
  slurm_fabric_link 2 up
  [ $failed = 0 ] || show_logs
  ;;

multinode_too_many)
  # 3 nodes of a 2-node partition.
  refused_at_submission "node count|not available|configuration" -N 3 --ntasks-per-node 1 -J three-nodes
  ;;

multinode_tp_split)
  # tp 4 on nodes of 2 ranks: refused at start, naming the keys and the nodes.
  set +e
  id=$(timeout 60 sbatch --parsable --wait -N 2 --ntasks-per-node 2 -J tp-split "$sbatch_script" "$deck" \
    "${data_sets[@]}" --set model.n_heads=4 --set parallel.tp=4 --set parallel.dp=1)
  rc=$?
  set -e
  id=${id%%;*}
  log=$PENTAD_RUNS/tp-split-$id/train.log
  check "job exit status non-zero (got $rc)" test "$rc" != 0 -a "$rc" != 124
  check "job state FAILED (got $(slurm_wait_final "$id" 15 || true))" test "$(slurm_job_state "$id")" = FAILED
  check "the message names parallel.tp and the node sizes" \
    grep -qF "parallel.tp = 4 does not fit inside a node: the job's 2 node(s) hold n1: 2, n2: 2 rank(s)" "$log"
  check "the message names the way out (parallel.tp_across_nodes)" grep -qF "parallel.tp_across_nodes = true" "$log"
  check "no step ran" test -z "$(grep -E '^step ' "$log")"
  [ $failed = 0 ] || show_logs
  ;;

*)
  echo "unknown case '$case_name'" >&2
  exit 2
  ;;
esac
finish
