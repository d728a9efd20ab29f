#!/usr/bin/env bash
# Runs a gpu test command only where a GPU is usable; else prints the reason
# and exits 77, which CTest reports as "Skipped" (SKIP_RETURN_CODE).
#   with_gpu.sh PROBE COMMAND [ARGS...]
set -uo pipefail
probe=$1
shift
"$probe" || exit 77
exec "$@"
