#!/usr/bin/env bash
# The prepared GPU run (issue 9): on a machine with a GPU, build the
# cuda-release preset, run the gpu-labelled tests and the one-GPU benchmark,
# and keep every log in one directory (default runs/gpu-<UTC time>/).
#   scripts/gpu_check.sh [OUT_DIR]
# Exit status: 0 when the build, `ctest -L gpu` and the benchmark all passed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/gpu-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
status=0
step() {  # step NAME COMMAND...: run, log to $out/NAME.log, report
  local name=$1
  shift
  local t0=$SECONDS
  if "$@" > "$out/$name.log" 2>&1; then
    echo "ok    $name ($((SECONDS - t0)) s)"
  else
    echo "FAIL  $name ($((SECONDS - t0)) s): see $out/$name.log"
    status=1
  fi
}
{ nvidia-smi || true; } > "$out/nvidia-smi.log" 2>&1
step configure cmake --preset cuda-release
step build cmake --build --preset cuda-release -j "$(nproc)" --target pentad test_cuda_ops cuda_probe cuda_mfu
if ! build-cuda/tests/cuda_probe; then
  echo "no usable GPU here: nothing to check"
  exit 1
fi
step ctest_gpu bash -c "cd build-cuda && ctest -L gpu --output-on-failure -V --timeout 600"
step cuda_mfu build-cuda/bench/cuda_mfu --shape all --steps 10
grep -E "MFU|SKIP|Failed|Passed" "$out/ctest_gpu.log" "$out/cuda_mfu.log" | head -40
echo "logs in $out"
exit $status
