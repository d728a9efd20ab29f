#!/usr/bin/env bash
# Runs a gpu test command only where a GPU is usable. Where none is visible
# (nvidia-smi lists none), prints the probe's reason and exits 77, which
# CTest reports as "Skipped" (SKIP_RETURN_CODE). A GPU that nvidia-smi lists
# but the probe cannot use (a driver, loader or library failure) is a
# failure, never a skip.
#   with_gpu.sh PROBE COMMAND [ARGS...]
set -uo pipefail
probe=$1
shift
if ! "$probe"; then
  if nvidia-smi -L 2> /dev/null | grep -q '^GPU '; then
    echo "FAIL: nvidia-smi lists a GPU, but the probe cannot use it (above)"
    exit 1
  fi
  exit 77
fi
exec "$@"
