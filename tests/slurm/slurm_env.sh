# shellcheck shell=bash
# Sourced by the SLURM tests: brings up a private single-node SLURM (munged,
# slurmctld, slurmd from Debian's packages, as root, no systemd) under a temp
# directory with its own key, sockets, ports and state, and tears it down on
# exit whatever happened: daemons and any job processes they left are killed
# by PID, then the directory is removed.
#
#   source tests/slurm/slurm_env.sh
#   slurm_up [CPUS]      # exports SLURM_CONF, SLURM_TMP; returns once the node is idle
#   ...sbatch / srun / scontrol...
#   (teardown runs from the EXIT trap; SLURM_KEEP=1 keeps the directory)

SLURM_TMP=""
SLURM_PIDS=()

slurm_log() { echo "slurm_env: $*" >&2; }

# A TCP port nobody listens on (the kernel picks it; a tiny race is acceptable).
slurm_free_port() {
  "${PENTAD_PYTHON:-python3}" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Processes whose environment names our slurm.conf: slurmstepd and job tasks
# started by our daemons (they inherit SLURM_CONF), never anything else.
slurm_job_pids() {
  local p
  [ -n "$SLURM_TMP" ] || return 0
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = "$$" ] && continue
    { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_TMP/etc/slurm.conf" && echo "$p"
  done
  return 0
}

# Kill the PIDs given: TERM, up to 5 s grace, then KILL.
slurm_kill_pids() {
  local p _i
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  for _i in $(seq 50); do
    local alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null || true
}

slurm_down() {
  local rc=$?
  [ -n "$SLURM_TMP" ] || return $rc
  if [ "${SLURM_KEEP_LOGS_ON_FAIL:-1}" = 1 ] && [ $rc -ne 0 ]; then
    local f
    for f in "$SLURM_TMP"/log/slurmctld.log "$SLURM_TMP"/log/slurmd.log; do
      [ -s "$f" ] && { echo "---- last lines of $f"; tail -n 12 "$f"; } >&2
    done
  fi
  scancel --quiet --full --signal=KILL --user=root 2>/dev/null || true
  # Daemons first (by the PIDs we started), then anything of ours still around.
  slurm_kill_pids "${SLURM_PIDS[@]}"
  local left
  left=$(slurm_job_pids)
  # shellcheck disable=SC2086
  [ -z "$left" ] || slurm_kill_pids $left
  if [ "${SLURM_KEEP:-0}" = 1 ]; then
    rm -f "$SLURM_TMP/run/owner"
    slurm_log "kept $SLURM_TMP (SLURM_KEEP=1)"
  else
    rm -rf "$SLURM_TMP"
  fi
  SLURM_TMP=""
  return $rc
}

# Instances whose test process died without its EXIT trap (SIGKILL from a
# test timeout): kill the daemons it recorded and its job processes, remove it.
slurm_reap_stale() {
  local d owner p pids recorded jobs
  for d in /tmp/pentad-slurm.*; do
    [ -f "$d/run/owner" ] || continue
    owner=$(cat "$d/run/owner")
    kill -0 "$owner" 2>/dev/null && continue
    pids=()
    read -ra recorded <<< "$(tr '\n' ' ' < "$d/run/daemons" 2>/dev/null)"
    for p in "${recorded[@]}"; do
      # Only if that PID is still one of ours (its command line names $d).
      { tr '\0' ' ' < "/proc/$p/cmdline"; } 2>/dev/null | grep -qF "$d/" && pids+=("$p")
    done
    mapfile -t jobs < <(SLURM_TMP=$d slurm_job_pids)
    slurm_kill_pids "${pids[@]}" "${jobs[@]}"
    slurm_log "removed stale instance $d (owner $owner gone)"
    rm -rf "$d"
  done
}

slurm_up() {
  local cpus=${1:-8}
  local host
  host=$(hostname -s)
  slurm_reap_stale
  SLURM_TMP=$(mktemp -d /tmp/pentad-slurm.XXXXXX)
  trap slurm_down EXIT
  trap 'exit 130' INT TERM
  chmod 755 "$SLURM_TMP"
  mkdir -p "$SLURM_TMP"/{etc,munge,state,spool,log,run}
  echo $$ > "$SLURM_TMP/run/owner"
  chmod 700 "$SLURM_TMP/munge" && chmod 755 "$SLURM_TMP/run"

  # munge: own key and socket directory (mode 755 so job steps can reach it).
  dd if=/dev/urandom of="$SLURM_TMP/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$SLURM_TMP/munge/munge.key"
  local sock=$SLURM_TMP/run/munge.socket
  munged --foreground --force --socket="$sock" --key-file="$SLURM_TMP/munge/munge.key" \
    --log-file="$SLURM_TMP/log/munged.log" --pid-file="$SLURM_TMP/run/munged.pid" \
    --seed-file="$SLURM_TMP/munge/munged.seed" >/dev/null 2>&1 &
  SLURM_PIDS+=($!)
  echo $! >> "$SLURM_TMP/run/daemons"
  timeout 10 bash -c "until [ -S '$sock' ]; do sleep 0.1; done" || {
    slurm_log "munged did not create $sock"; cat "$SLURM_TMP/log/munged.log" >&2; return 1; }

  local ctld_port slurmd_port node=pentad-ci
  ctld_port=$(slurm_free_port)
  slurmd_port=$(slurm_free_port)
  cat > "$SLURM_TMP/etc/slurm.conf" <<EOF
# Private single-node SLURM for pentad's tests (written by tests/slurm/slurm_env.sh).
ClusterName=pentadci
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock,cred_expire=5
StateSaveLocation=$SLURM_TMP/state
SlurmdSpoolDir=$SLURM_TMP/spool
SlurmctldPidFile=$SLURM_TMP/run/slurmctld.pid
SlurmdPidFile=$SLURM_TMP/run/slurmd.pid
SlurmctldLogFile=$SLURM_TMP/log/slurmctld.log
SlurmdLogFile=$SLURM_TMP/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$SLURM_TMP/log/jobcomp.txt
MpiDefault=none
EnforcePartLimits=ALL
MinJobAge=5
KillWait=5
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
JobRequeue=1
NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  export SLURM_CONF=$SLURM_TMP/etc/slurm.conf
  export SLURM_TMP
  # Keep the caller's site-wide sbatch/srun defaults out of the tests.
  unset SBATCH_PARTITION SBATCH_ACCOUNT SLURM_JOB_ID SLURM_JOBID

  slurmctld -D -i -f "$SLURM_CONF" >"$SLURM_TMP/log/slurmctld.out" 2>&1 &
  SLURM_PIDS+=($!)
  slurmd -D -N "$node" -f "$SLURM_CONF" >"$SLURM_TMP/log/slurmd.out" 2>&1 &
  SLURM_PIDS+=($!)
  echo "${SLURM_PIDS[@]:1}" >> "$SLURM_TMP/run/daemons"

  if ! timeout 30 bash -c 'until sinfo -h -N -o "%T" 2>/dev/null | grep -qx idle; do sleep 0.3; done'; then
    slurm_log "node did not become idle within 30 s"
    sinfo -N -l >&2 || true
    return 1
  fi
  slurm_log "up: $SLURM_CONF (ctld :$ctld_port, slurmd :$slurmd_port, $cpus CPUs)"
}

# State of JOBID from the job-completion log (last record: a requeued job has
# one per run). Empty if the job has not finished yet.
slurm_job_state() {
  sed -n "s/.*JobId=$1 .*JobState=\([A-Z_]*\).*/\1/p" "$SLURM_TMP/log/jobcomp.txt" 2>/dev/null | tail -n 1
}

# Waits (at most $2 s) for JOBID to reach a final state; prints it.
slurm_wait_final() {
  local id=$1 limit=${2:-60} st _i
  for _i in $(seq $((limit * 5))); do
    st=$(slurm_job_state "$id")
    case $st in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
      echo "$st"; return 0 ;;
    esac
    sleep 0.2
  done
  echo "TIMEOUT_WAITING(${st:-none})"
  return 1
}
