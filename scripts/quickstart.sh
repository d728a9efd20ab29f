#!/usr/bin/env bash
# One command on a fresh Debian/Ubuntu machine: install what is missing,
# build, prepare a byte-level corpus from the project's own sources and docs,
# train input/tiny.toml on 2 MPI ranks (data parallel), keep the final
# weights in runs/tiny/ckpt/final.h5 and print a sample from them.
#   scripts/quickstart.sh [RANKS] [extra --set overrides...]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-2}
shift || true
scripts/deps.sh
cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release -j "$(nproc)" --target pentad
build/pentad prep --out data README.md docs/*.md $(find src app -name "*.[ch]pp" | sort) cpu/*.cpp cpu/*.hpp input/*.toml
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / ranks > 0 ? $(nproc) / ranks : 1 ))}
mpiexec -n "$ranks" build/pentad train input/tiny.toml --set parallel.dp="$ranks" \
  --set log.metrics=runs/tiny/metrics.jsonl --set checkpoint.dir=runs/tiny/ckpt --set checkpoint.save_final=true "$@"
echo "--- pentad sample runs/tiny/ckpt/final.h5 --prompt \"The pipeline\" --tokens 200 --temperature 0.8 --top-k 40 --seed 1"
build/pentad sample runs/tiny/ckpt/final.h5 --prompt "The pipeline" --tokens 200 --temperature 0.8 --top-k 40 --seed 1 --threads 1
