#!/bin/bash
# Scaling sweep: one `sbatch jobscripts/train.sbatch` per point, each job named
# <deck>-nodes<N> or <deck>-ranks<R> so its run directory says which point it
# is (runs/<deck>-nodes4-<jobid>/). Prints "point job-id" per submitted job.
#
#   jobscripts/sweep.sh [--dry-run] [sbatch options] DECK nodes=1,2,4,8 [--set k=v]...
#   jobscripts/sweep.sh [--dry-run] [sbatch options] DECK ranks=1,2,4,8 [--set k=v]...
#
# nodes=: -N <n> per point (add --ntasks-per-node=K --gpus-per-node=G for GPU
# nodes); ranks=: one node, -n <r> per point (CPU sweeps). sbatch options are
# the arguments before DECK that start with '-'. The job script sets
# parallel.dp from the task count unless --set gives it.
set -euo pipefail

usage() {
  sed -n '6,7p' "$0" | sed 's/^#   /usage: /' >&2
  exit 2
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
job_script=$here/train.sbatch
dry_run=0
sbatch_opts=()
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage ;;
    -*) sbatch_opts+=("$1"); shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || usage
deck=$1
axis=${2%%=*}
values=${2#*=}
shift 2
[ -r "$deck" ] || { echo "sweep.sh: cannot read deck '$deck'" >&2; exit 2; }
case $axis in nodes|ranks) ;; *) echo "sweep.sh: expected nodes=LIST or ranks=LIST, got '$axis'" >&2; exit 2 ;; esac
IFS=, read -ra points <<< "$values"
[ ${#points[@]} -gt 0 ] || usage
for p in "${points[@]}"; do
  [[ $p =~ ^[1-9][0-9]*$ ]] || { echo "sweep.sh: '$p' in $axis= is not a positive integer" >&2; exit 2; }
done

name=$(basename "$deck")
name=${name%.toml}
for p in "${points[@]}"; do
  if [ "$axis" = nodes ]; then size=(-N "$p"); else size=(-N 1 -n "$p"); fi
  cmd=(sbatch --parsable -J "$name-$axis$p" "${size[@]}" "${sbatch_opts[@]}" "$job_script" "$deck" "$@")
  if [ $dry_run = 1 ]; then
    printf '%q ' "${cmd[@]}"
    echo
  else
    id=$("${cmd[@]}")
    echo "$axis=$p ${id%%;*}"
  fi
done
