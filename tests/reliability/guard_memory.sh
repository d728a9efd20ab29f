#!/usr/bin/env bash
# A layout that cannot fit is refused before anything is allocated, naming
# the keys and the bytes; an allocation that still fails (here: an address
# space limit the plan cannot see) is named with its bytes and rank. Either
# way every rank exits non-zero, quickly, and nothing hangs.
#   guard_memory.sh CASE   CASE: micro_batch | n_layers | d_model | alloc
#   (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR)
set -uo pipefail
case_name=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null || { echo "prep failed"; exit 1; }
cat > "$tmp/deck.toml" <<DECK
[model]
n_layers = 2
d_model = 32
n_heads = 2
seq_len = 16
[parallel]
dp = 2
[train]
steps = 2
micro_batch = 2
threads = 1
[data]
train = "$tmp/data/train.bin"
[log]
peak_tflops = 1
[checkpoint]
dir = "$tmp/ckpt"
save_final = false
DECK

limit_kib=unlimited
case $case_name in
  micro_batch) args=(--set train.micro_batch=100000000)
    pattern="memory: the layout does not fit: rank 0 \(pipeline stage 0\) plans .*activations .* but has .*MemAvailable.*train\.micro_batch" ;;
  n_layers) args=(--set model.n_layers=1000000)
    pattern="memory: the layout does not fit: rank 0 .*params .* but has .*model\.n_layers" ;;
  d_model) args=(--set model.d_model=1000000000 --set model.d_ff=256 --set model.n_heads=1)
    pattern="memory: the layout does not fit: rank 0 .*params .*TiB.* but has .*model\.d_model" ;;
  alloc) args=(--set model.d_model=2048 --set model.n_heads=4); limit_kib=1500000
    pattern="fatal error on rank [01] .*out of memory: backend cpu could not allocate [0-9]+ bytes \(.*\) for (params|grads|optim)" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac

t0=$(date +%s)
(ulimit -v "$limit_kib"; timeout 60 "$MPIEXEC" -n 2 "$PENTAD" train "$tmp/deck.toml" "${args[@]}") > "$tmp/out" 2>&1
rc=$?
dt=$(( $(date +%s) - t0 ))
echo "exit code $rc after $dt s"
fail=0
[ $rc -ne 124 ] || { echo "FAIL: hung (timeout)"; fail=1; }
[ $rc -ne 0 ] || { echo "FAIL: exit code 0"; fail=1; }
# 134: an uncaught exception (SIGABRT), the failure this guards against.
[ $rc -ne 134 ] || { echo "FAIL: SIGABRT (uncaught exception?)"; fail=1; }
grep -q "bad_alloc\|terminate called" "$tmp/out" && { echo "FAIL: an uncaught std::bad_alloc"; fail=1; }
n=$(grep -cE -- "$pattern" "$tmp/out")
[ "$n" -ge 1 ] || { echo "FAIL: no message matching /$pattern/"; fail=1; }
if [ "$case_name" != alloc ]; then
  # A collective refusal: printed once, by rank 0, and every rank exits 1.
  [ "$n" -le 1 ] || { echo "FAIL: the message was printed $n times"; fail=1; }
  [ $rc -eq 1 ] || { echo "FAIL: exit code $rc, expected 1 on every rank"; fail=1; }
  grep -qE "^step +[0-9]+/" "$tmp/out" && { echo "FAIL: training started"; fail=1; }
fi
[ $fail -eq 0 ] || { tail -20 "$tmp/out"; exit 1; }
grep -E -- "$pattern" "$tmp/out" | head -2 | cut -c1-400
echo PASS
