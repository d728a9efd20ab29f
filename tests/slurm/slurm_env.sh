# shellcheck shell=bash
# Sourced by the SLURM tests: brings up a private SLURM (munged, slurmctld,
# slurmd from Debian's packages, as root, no systemd) under a temp directory
# with its own key, sockets, ports and state, and tears it down on exit
# whatever happened: daemons and any job processes they left are killed by
# PID, network namespaces and links are deleted, then the directory is removed.
#
#   source tests/slurm/slurm_env.sh
#   slurm_up [CPUS [NODES]]  # exports SLURM_CONF, SLURM_TMP; returns once every node is idle
#   ...sbatch / srun / scontrol...
#   (teardown runs from the EXIT trap; SLURM_KEEP=1 keeps the directory)
#
# NODES = 1 (the default) is one node on loopback. NODES > 1 is a cluster on
# this machine: node i (named n1, n2, ...) is a network namespace with its own
# hostname (a UTS namespace), one veth link to a bridge that carries
# 10.213.X.0/24 (address .1 is slurmctld's, node i is .(10+i)), and its own
# slurmd with its own spool, pid and log files. The filesystem is shared (the
# working directory plays NFS), so is munged's socket. slurm_node_link i
# up|down takes node i's link away or back (a node failure, as seen from the
# others). Needs root and `ip netns`; slurm_cluster_possible says why not.
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
    for f in "$SLURM_TMP"/log/slurmctld.log "$SLURM_TMP"/log/slurmd*.log; do
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
  slurm_net_down "$SLURM_TMP"
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
    slurm_net_down "$d"
    slurm_log "removed stale instance $d (owner $owner gone)"
    rm -rf "$d"
  done
}

# Why a multi-node cluster cannot be built here (empty when it can): needs
# root, the ip tool, and permission to create a network namespace.
slurm_cluster_possible() {
  [ "$(id -u)" = 0 ] || { echo "not root"; return 0; }
  command -v ip >/dev/null || { echo "no 'ip' command (iproute2)"; return 0; }
  command -v unshare >/dev/null || { echo "no 'unshare' command (util-linux)"; return 0; }
  local probe=pentad-probe-$$ err
  if ! err=$(ip netns add "$probe" 2>&1); then echo "cannot create a network namespace: $err"; return 0; fi
  if ! err=$(nsenter --net=/run/netns/"$probe" unshare --uts true 2>&1); then
    ip netns del "$probe" 2>/dev/null
    echo "cannot create a UTS namespace inside a network namespace: $err"; return 0
  fi
  ip netns del "$probe" 2>/dev/null
  return 0
}

# The network of a cluster instance: names derive from a short tag so that a
# stale instance's links and namespaces can be found and removed.
slurm_net_down() {  # slurm_net_down DIR
  local d=$1 ns br
  [ -f "$d/run/netns" ] || return 0
  while read -r ns; do ip netns del "$ns" 2>/dev/null || true; done < "$d/run/netns"
  while read -r br; do ip link del "$br" 2>/dev/null || true; done < "$d/run/bridge"
  rm -f "$d/run/netns" "$d/run/bridge"
}

# Node i's network namespace and veth (root side) names.
slurm_node_ns() { echo "pentad-${SLURM_NET_TAG}-n$1"; }
slurm_node_veth() { echo "pv${SLURM_NET_TAG}n$1"; }
slurm_node_addr() { echo "${SLURM_NET_PREFIX}.$((10 + $1))"; }
# slurm_node_link I up|down: node I's only link (its end, inside the node).
slurm_node_link() {
  ip -n "$(slurm_node_ns "$1")" link set eth0 "$2"
}
# slurm_fabric_link I up|down: node I's port on the fabric bridge (the
# second network, see slurm_cluster_net) joined or detached, as a failed
# switch port: the link keeps its carrier, packets go nowhere, and the node
# stays up for SLURM.
slurm_fabric_link() {
  if [ "$2" = down ]; then ip link set "pf${SLURM_NET_TAG}n$1" nomaster
  else ip link set "pf${SLURM_NET_TAG}n$1" master "pfb${SLURM_NET_TAG}"; fi
}
# Run a command inside node I (its network and hostname).
slurm_on_node() {
  local i=$1
  shift
  nsenter --net=/run/netns/"$(slurm_node_ns "$i")" --uts=/proc/"$(cat "$SLURM_TMP/run/uts.n$i")"/ns/uts "$@"
}

slurm_cluster_net() {  # slurm_cluster_net NODES
  local n=$1 i x ns veth
  SLURM_NET_TAG=$(printf '%04x' $(( $$ & 0xffff )))
  # A /24 no interface of this machine uses yet.
  for x in $(seq $(( $$ % 200 + 20 )) 250) $(seq 20 250); do
    ip -4 -br addr | grep -q " 10\.213\.$x\." || break
  done
  SLURM_NET_PREFIX=10.213.$x
  local br=pbr${SLURM_NET_TAG} fab=pfb${SLURM_NET_TAG}
  printf '%s\n' "$br" "$fab" > "$SLURM_TMP/run/bridge"
  ip link add "$br" type bridge || return 1
  ip addr add "$SLURM_NET_PREFIX.1/24" dev "$br"
  ip link set "$br" up
  # A second network, the "fabric" (10.214.X.0/24, interface fab0 on every
  # node): jobs that set UCX_NET_DEVICES=fab0 send MPI traffic over it while
  # SLURM stays on eth0, so MPI's path can fail with the node still up.
  ip link add "$fab" type bridge || return 1
  ip link set "$fab" up
  for i in $(seq "$n"); do
    ns=$(slurm_node_ns "$i")
    veth=$(slurm_node_veth "$i")
    echo "$ns" >> "$SLURM_TMP/run/netns"
    ip netns add "$ns" || return 1
    ip link add "$veth" type veth peer name eth0 netns "$ns" || return 1
    ip link set "$veth" master "$br" up
    ip -n "$ns" addr add "$(slurm_node_addr "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip link add "pf${SLURM_NET_TAG}n$i" type veth peer name fab0 netns "$ns" || return 1
    ip link set "pf${SLURM_NET_TAG}n$i" master "$fab" up
    ip -n "$ns" addr add "10.214.$x.$((10 + i))/24" dev fab0
    ip -n "$ns" link set fab0 up
  done
  export SLURM_NET_TAG SLURM_NET_PREFIX
}

slurm_up() {
  local cpus=${1:-8} nodes=${2:-1}
  local host ctld_addr i
  host=$(hostname -s)
  slurm_reap_stale
  SLURM_TMP=$(mktemp -d /tmp/pentad-slurm.XXXXXX)
  trap slurm_down EXIT
  trap 'exit 130' INT TERM
  chmod 755 "$SLURM_TMP"
  mkdir -p "$SLURM_TMP"/{etc,munge,state,spool,log,run}
  echo $$ > "$SLURM_TMP/run/owner"
  chmod 700 "$SLURM_TMP/munge" && chmod 755 "$SLURM_TMP/run"
  if [ "$nodes" -gt 1 ]; then
    local why
    why=$(slurm_cluster_possible)
    [ -z "$why" ] || { slurm_log "no multi-node cluster here: $why"; return 77; }
    slurm_cluster_net "$nodes" || { slurm_log "could not build the cluster network"; return 1; }
    ctld_addr=$SLURM_NET_PREFIX.1
  else
    ctld_addr=127.0.0.1
  fi

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

  local ctld_port slurmd_port node_lines node_list
  ctld_port=$(slurm_free_port)
  slurmd_port=$(slurm_free_port)
  if [ "$nodes" -gt 1 ]; then
    node_lines=""
    for i in $(seq "$nodes"); do
      node_lines+="NodeName=n$i NodeHostname=n$i NodeAddr=$(slurm_node_addr "$i") CPUs=$cpus State=UNKNOWN"$'\n'
    done
    node_list=n[1-$nodes]
  else
    node_lines="NodeName=pentad-ci NodeHostname=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN"
    node_list=pentad-ci
  fi
  cat > "$SLURM_TMP/etc/slurm.conf" <<EOF
# Private SLURM for pentad's tests (written by tests/slurm/slurm_env.sh).
ClusterName=pentadci
SlurmctldHost=$host($ctld_addr)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock,cred_expire=5
StateSaveLocation=$SLURM_TMP/state
SlurmdSpoolDir=$SLURM_TMP/spool/%n
SlurmctldPidFile=$SLURM_TMP/run/slurmctld.pid
SlurmdPidFile=$SLURM_TMP/run/slurmd.%n.pid
SlurmctldLogFile=$SLURM_TMP/log/slurmctld.log
SlurmdLogFile=$SLURM_TMP/log/slurmd.%n.log
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
SlurmdTimeout=${SLURM_NODE_TIMEOUT:-10}
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
JobRequeue=1
$node_lines
PartitionName=ci Nodes=$node_list Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  export SLURM_CONF=$SLURM_TMP/etc/slurm.conf
  export SLURM_TMP
  # Keep the caller's site-wide sbatch/srun defaults out of the tests.
  unset SBATCH_PARTITION SBATCH_ACCOUNT SLURM_JOB_ID SLURM_JOBID

  slurmctld -D -i -f "$SLURM_CONF" >"$SLURM_TMP/log/slurmctld.out" 2>&1 &
  SLURM_PIDS+=($!)
  if [ "$nodes" -gt 1 ]; then
    for i in $(seq "$nodes"); do
      mkdir -p "$SLURM_TMP/spool/n$i"
      # Its own hostname (UTS namespace) inside its own network namespace;
      # the shell records its pid (for slurm_on_node), then becomes slurmd.
      # nsenter, not `ip netns exec`: that remounts /sys, without the cgroup
      # filesystem slurmd needs.
      nsenter --net=/run/netns/"$(slurm_node_ns "$i")" unshare --uts --ipc bash -c \
        'hostname "$1" && echo $$ > "$2" && exec slurmd -D -N "$1" -f "$3"' _ \
        "n$i" "$SLURM_TMP/run/uts.n$i" "$SLURM_CONF" >"$SLURM_TMP/log/slurmd.n$i.out" 2>&1 &
      SLURM_PIDS+=($!)
    done
  else
    mkdir -p "$SLURM_TMP/spool/$node_list"
    slurmd -D -N "$node_list" -f "$SLURM_CONF" >"$SLURM_TMP/log/slurmd.out" 2>&1 &
    SLURM_PIDS+=($!)
  fi
  echo "${SLURM_PIDS[@]:1}" >> "$SLURM_TMP/run/daemons"

  if ! timeout 30 bash -c "until [ \"\$(sinfo -h -N -o '%T' 2>/dev/null | grep -cx idle)\" = $nodes ]; do sleep 0.3; done"; then
    slurm_log "not all $nodes node(s) became idle within 30 s"
    sinfo -N -l >&2 || true
    return 1
  fi
  if [ "$nodes" -gt 1 ]; then
    slurm_log "up: $SLURM_CONF (ctld $ctld_addr:$ctld_port, $nodes nodes n1..n$nodes at $SLURM_NET_PREFIX.11.., $cpus CPUs each)"
  else
    slurm_log "up: $SLURM_CONF (ctld :$ctld_port, slurmd :$slurmd_port, $cpus CPUs)"
  fi
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
