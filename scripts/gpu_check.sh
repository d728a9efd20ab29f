#!/usr/bin/env bash
# The GPU check, run from the GPU bundle (scripts/gpu_bundle.sh) on a GPU
# node: nothing is built or installed there.
#   gpu-bundle/gpu_check.sh OUT_DIR        (or scripts/gpu_check.sh OUT_DIR,
#                                          which uses ./gpu-bundle)
# Writes at most 8 logs into OUT_DIR and ends within 9 minutes: each step
# runs under its own timeout, cut to what is left of the 540 s budget, and a
# step the budget cannot reach is reported as not run (a failure).
#   env.log        versions, nvidia-smi, the bundle's MANIFEST, ldd; a node
#                  whose glibc or libstdc++ is older than the bundle needs
#                  (MANIFEST), or where the loader cannot find a CUDA
#                  library (cuBLAS, NCCL), ends the check here, named in
#                  summary.log
#   probe.log      a GPU visible and pentad able to use it; a GPU that is
#                  visible but cannot be used is a FAILURE, never a skip,
#                  and ends the check
#   ops.log        test_cuda_ops: every CUDA op against the CPU op
#   parity.log     fp32 training parity against the CPU backend (GPT-2 and
#                  Llama, tiny decks), bf16 follows the CPU's fp32 curve
#                  (also with 2 heads of 16: the fused attention kernels)
#   mfu.log        cuda_mfu: GPT-2 124M, 350M, Llama ~1.1B at T = 1024, bf16;
#                  350M again without the bf16 weight copies, and again with
#                  attention through cuBLAS instead of the fused kernel
#   tail.log       fp32 parity at a production shape (GPT-2 124M, T = 1024,
#                  V = 50257, 3 steps); the one-device multi-rank paths
#   sanitizer.log  compute-sanitizer memcheck and racecheck on a short run;
#                  racecheck of the fused attention's op test
#   summary.log    one line per step: ok / FAIL / TIMEOUT / NOT RUN, seconds
# Exit status 0 only when every step passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/env.sh" ]; then bundle=$here; else bundle=$here/../gpu-bundle; fi
[ -f "$bundle/env.sh" ] || { echo "gpu_check.sh: no bundle at $bundle (scripts/gpu_bundle.sh packs one)" >&2; exit 2; }
[ $# -eq 1 ] || { echo "usage: gpu_check.sh OUT_DIR" >&2; exit 2; }
out=$1
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
# shellcheck source=/dev/null
source "$bundle/env.sh"
src=$PENTAD_SOURCE_DIR
budget=${PENTAD_GPU_CHECK_BUDGET_S:-540}
start=$SECONDS
status=0
: > "$out/summary.log"
report() { echo "$1" | tee -a "$out/summary.log"; }

# step LOG NAME LIMIT_S COMMAND...: runs COMMAND under timeout (LIMIT_S or
# what is left of the budget, if less), its output appended to LOG.log.
step() {
  local group=$1 name=$2 limit=$3
  local log=$out/$group.log
  shift 3
  local left=$((budget - (SECONDS - start)))
  if [ "$left" -lt 5 ]; then
    report "NOT RUN  $name (the ${budget} s budget is spent)"
    status=1
    return 1
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "=== $name (limit ${limit} s) ===" >> "$log"
  local t0=$SECONDS rc
  timeout -k 5 "$limit" "$@" >> "$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    report "ok       $name ($((SECONDS - t0)) s)"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    report "TIMEOUT  $name (${limit} s): see $group.log"
    status=1
  else
    report "FAIL     $name (exit $rc, $((SECONDS - t0)) s): see $group.log"
    status=1
  fi
  return $rc
}

# Token data lives outside OUT_DIR (only the logs come back from a device).
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
prep() {  # the test corpus as token data in $data
  [ -f "$data/train.bin" ] || "$PENTAD" prep --out "$data" "$src/tests/data/corpus.txt" > /dev/null
}

# --- env ---------------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)  host: $(hostname)  bundle: $bundle"
  uname -a
  cat "$bundle/MANIFEST"
  echo "PENTAD_PYTHON=$PENTAD_PYTHON ($("$PENTAD_PYTHON" --version 2>&1))"
  echo "CUDA libraries from: $PENTAD_CUDA_LIBS"
  nvidia-smi 2>&1 || echo "nvidia-smi: not available"
  for b in pentad test_cuda_ops cuda_mfu; do echo "ldd $b:"; ldd "$bundle/bin/$b"; done
} > "$out/env.log" 2>&1
report "ok       env ($((SECONDS - start)) s)"
# The node's C and C++ runtimes against what the bundle needs (MANIFEST): the
# loader's own verdict (ldd's "version ... not found"), before anything runs.
too_old=$(for f in "$bundle"/bin/* "$bundle"/lib/ucx/*; do ldd "$f" 2>&1; done \
  | grep -oE "version \`(GLIBC|GLIBCXX|CXXABI)_[^']*' not found \(required by [^)]*\)" | sort -u)
if [ -n "$too_old" ]; then
  { echo "=== the node's runtimes are older than the bundle needs ==="
    echo "$too_old"
    echo "node: $(getconf GNU_LIBC_VERSION 2> /dev/null || echo 'glibc: unknown'); libstdc++: $(ldd "$bundle/bin/pentad" 2>&1 | awk '/libstdc\+\+/{print $3; exit}')"
  } >> "$out/env.log"
  missing=$(for family in GLIBC GLIBCXX CXXABI; do
    echo "$too_old" | grep -oE "\\b${family}_[0-9.]+" | sort -uV | tail -1
  done | paste -sd' ')
  report "FAIL     node runtimes: the bundle $(grep '^needs of the node' "$bundle/MANIFEST" | sed 's/^needs of the node: /needs /'); this node lacks $missing (the newest missing of each): see env.log (pack the bundle on an older distribution)"
  exit 1
fi
# CUDA's libraries (cuBLAS, cuBLASLt, NCCL) are the node's: a library the
# loader cannot find (ldd's "=> not found") ends the check here, by name.
not_found=$(for f in "$bundle"/bin/pentad "$bundle"/bin/test_cuda_ops "$bundle"/bin/cuda_mfu; do ldd "$f" 2>&1; done \
  | awk '$2 == "=>" && $3 == "not" {print $1}' | sort -u | paste -sd' ')
if [ -n "$not_found" ]; then
  echo "=== libraries the loader cannot find: $not_found (searched PENTAD_CUDA_LIBS=$PENTAD_CUDA_LIBS, then the system's) ===" >> "$out/env.log"
  report "FAIL     node libraries: the loader finds no $not_found on this node (CUDA's come from the node: its NVIDIA wheels, /usr/local/cuda): see env.log"
  exit 1
fi

# --- probe -------------------------------------------------------------------
visible=0
if nvidia-smi -L 2> /dev/null | grep -q '^GPU '; then visible=1; fi
if ! step probe cuda_probe 30 "$bundle/bin/cuda_probe"; then
  if [ $visible = 1 ]; then
    report "FAIL     a GPU is visible (nvidia-smi -L) but pentad cannot use it: see probe.log and env.log"
  else
    report "FAIL     no GPU visible here (nvidia-smi -L lists none)"
  fi
  exit 1
fi

# --- ops ---------------------------------------------------------------------
# Every op test must run: a CUDA test that skips itself here is a failure.
step ops test_cuda_ops 90 bash -c 'log=$("$0" 2>&1); rc=$?; echo "$log"; [ $rc -eq 0 ] || exit $rc
  if echo "$log" | grep -q "^\[  SKIPPED \]"; then echo "FAIL: op tests skipped on a GPU node"; exit 1; fi' \
  "$bundle/bin/test_cuda_ops"

# --- parity (tiny decks) -----------------------------------------------------
for model in gpt2 llama; do
  step parity "fp32_parity_$model" 45 bash "$src/tests/parity/run_layout.sh" "$src/tests/parity/$model.toml" 1 "" \
    "--set backend=cuda"
  step parity "bf16_follows_fp32_$model" 45 bash "$src/tests/precision/loss_curves.sh" \
    "$src/tests/parity/$model.toml" 20 1e-2 "" "--set backend=cuda --set train.dtype=bf16"
done
# 2 heads of 16: the model's attention through the fused kernels (attention_flash.cu).
step parity bf16_follows_fp32_gpt2_fused_attention 45 bash "$src/tests/precision/fused_attention_training.sh" \
  "$src/tests/parity/gpt2.toml"

# --- the benchmark, before the long tail --------------------------------------
for shape in gpt2-124m gpt2-350m llama-1b; do
  step mfu "mfu_$shape" 60 "$bundle/bin/cuda_mfu" --shape "$shape" --steps 5
done
# The bf16 weight copies' gain: 350M again, the weights converted at every GEMM.
step mfu "mfu_gpt2-350m_no_weight_copies" 45 "$bundle/bin/cuda_mfu" --shape gpt2-350m --steps 5 --weight-copies off
# The held bf16 activations' gain: 350M again, those activations in fp32, converted at every GEMM.
step mfu "mfu_gpt2-350m_fp32_activations" 45 "$bundle/bin/cuda_mfu" --shape gpt2-350m --steps 5 --bf16-activations off
# The fused attention's gain: 350M again, attention through cuBLAS (attention_tc.cu).
step mfu "mfu_gpt2-350m_attention_tc" 45 env PENTAD_CUDA_ATTENTION=tc "$bundle/bin/cuda_mfu" --shape gpt2-350m --steps 5

# --- production shape, multi-rank on one device ------------------------------
prod=(--set model.seq_len=1024 --set train.micro_batch=1 --set train.grad_accum=1 --set train.steps=3
      --set train.warmup_steps=2 --set train.eval_every=0 --set data.val= --set log.every=1
      --set checkpoint.save_final=false --set log.metrics=)
step tail prep_random_tokens 30 "$PENTAD_PYTHON" - "$data/prod.bin" <<'PY'
import struct, sys, random
random.seed(0)
n = 16384
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *[random.randrange(50257) for _ in range(n)]))
PY
step tail fp32_parity_gpt2_124m_T1024 120 bash "$src/tests/parity/run_layout.sh" "$src/input/gpt2-124m.toml" 1 \
  "${prod[*]} --set data.train=$data/prod.bin" "${prod[*]} --set data.train=$data/prod.bin --set backend=cuda"
step tail one_device_dp2_tp2_comm_mpi 45 bash "$src/tests/parity/run_layout.sh" "$src/tests/parity/gpt2.toml" 4 \
  "--set backend=cuda --set train.grad_accum=2" \
  "--set backend=cuda --set parallel.comm=mpi --set parallel.dp=2 --set parallel.tp=2"
step tail one_device_pp2_comm_mpi 45 bash "$src/tests/parity/run_layout.sh" "$src/tests/parity/gpt2.toml" 2 \
  "--set backend=cuda --set train.grad_accum=2" \
  "--set backend=cuda --set parallel.comm=mpi --set parallel.pp=2 --set train.grad_accum=2"
# The grouped message plan (NCCL's order) on device buffers, interleaved over two stages.
step tail one_device_pp2_v2_grouped_comm_mpi 45 bash "$src/tests/parity/run_layout.sh" "$src/tests/parity/gpt2.toml" 2 \
  "--set backend=cuda --set model.n_layers=4 --set train.grad_accum=4" \
  "--set backend=cuda --set parallel.comm=mpi --set model.n_layers=4 --set parallel.pp=2 --set parallel.virtual_stages=2 --set parallel.schedule=interleaved --set parallel.pp_p2p=grouped --set train.grad_accum=4"

# --- compute-sanitizer -------------------------------------------------------
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null || true)
if [ -z "$sanitizer" ]; then
  report "FAIL     compute-sanitizer: not found on PATH or in /usr/local/cuda/bin"
  status=1
else
  prep
  short=(train "$src/tests/parity/gpt2.toml" --set backend=cuda --set train.steps=2 --set data.train="$data/train.bin"
         --set data.val= --set checkpoint.save_final=false --set log.metrics=)
  step sanitizer memcheck 60 "$sanitizer" --tool memcheck --error-exitcode 1 --leak-check no "$PENTAD" "${short[@]}"
  step sanitizer racecheck 90 "$sanitizer" --tool racecheck --error-exitcode 1 "$PENTAD" "${short[@]}"
  # The fused bf16 attention (shared memory, barriers) at head dimensions the tiny deck does not have,
  # its op test without the T = 1024 cases.
  step sanitizer racecheck_fused_attention 60 env PENTAD_TEST_SHORT=1 "$sanitizer" --tool racecheck \
    --error-exitcode 1 "$bundle/bin/test_cuda_ops" --gtest_filter='*AttentionBf16Fused*'
fi

grep -hE "MFU|tokens/s" "$out/mfu.log" 2> /dev/null | head -12
report "total $((SECONDS - start)) s; logs in $out; $( [ $status = 0 ] && echo PASSED || echo FAILED)"
exit $status
