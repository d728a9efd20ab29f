#!/usr/bin/env bash
# One command: install what is missing, build, and run the whole test suite
# with CTest.
#   scripts/test.sh [ctest args...]     e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release -j "$(nproc)"
cd build
ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@"
