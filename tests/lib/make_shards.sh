#!/usr/bin/env bash
# Token shards for the dataset tests: tests/data/corpus.txt cut into three
# parts at line boundaries, each made into byte-level token files by
# `pentad prep`: DIR/p0, DIR/p1, DIR/p2, each with train.bin and val.bin.
#   make_shards.sh DIR      (env: PENTAD, PENTAD_SOURCE_DIR)
set -euo pipefail
dir=$1
mkdir -p "$dir/text"
split -n l/3 -d "$PENTAD_SOURCE_DIR/tests/data/corpus.txt" "$dir/text/part_"
for i in 0 1 2; do
  "$PENTAD" prep --out "$dir/p$i" "$dir/text/part_0$i" > /dev/null
done
