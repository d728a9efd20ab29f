#!/usr/bin/env bash
# train.sample_every on 2 ranks: rank 0 gathers the global weights and
# prints samples (temperature 1, seed train.seed), and they equal the samples
# of the 1-rank run of the same deck (the same weights up to rounding: the
# same tokens unless a uniform falls within rounding of a boundary of the
# cumulative distribution, ~1e-6 per token).
#   train_sample.sh LAYOUT   (tp2 | pp2 | ep2 | zero3 | cp2; env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR)
set -uo pipefail
layout=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null || { echo "prep failed"; exit 1; }
cat > "$tmp/deck.toml" <<DECK
[model]
family = "llama"
n_layers = 2
d_model = 64
n_heads = 4
n_kv_heads = 2
seq_len = 64
[train]
steps = 40
micro_batch = 2
grad_accum = 2
lr = 1e-2
sample_every = 20
sample_tokens = 32
[data]
train = "$tmp/data/train.bin"
DECK
case "$layout" in
  tp2) sets=(--set parallel.tp=2) ;;
  pp2) sets=(--set parallel.pp=2) ;;
  # dp=2 with grad_accum 1: the same global batch of 4 sequences.
  ep2) sets=(--set parallel.dp=2 --set parallel.ep=2 --set train.grad_accum=1 --set model.n_experts=4 --set model.dropless=true) ;;
  zero3) sets=(--set parallel.dp=2 --set train.grad_accum=1 --set parallel.zero=3) ;;
  cp2) sets=(--set parallel.cp=2) ;;
  *) echo "unknown layout $layout"; exit 2 ;;
esac
moe=()
[ "$layout" = ep2 ] && moe=(--set model.n_experts=4 --set model.dropless=true)

"$MPIEXEC" -n 1 "$PENTAD" train "$tmp/deck.toml" "${moe[@]}" > "$tmp/one.out" 2>&1 || { echo "FAIL: 1-rank run"; cat "$tmp/one.out"; exit 1; }
"$MPIEXEC" -n 2 "$PENTAD" train "$tmp/deck.toml" "${sets[@]}" > "$tmp/two.out" 2>&1 || { echo "FAIL: $layout run"; cat "$tmp/two.out"; exit 1; }
grep "^sample at step" "$tmp/one.out" > "$tmp/one.s"
grep "^sample at step" "$tmp/two.out" > "$tmp/two.s"
n=$(wc -l < "$tmp/one.s")
if [ "$n" -ne 2 ]; then echo "FAIL: the 1-rank run printed $n samples, expected 2 (steps 20 and 40)"; cat "$tmp/one.out"; exit 1; fi
if ! cmp -s "$tmp/one.s" "$tmp/two.s"; then
  echo "FAIL: the $layout samples differ from the 1-rank samples:"; echo "1 rank:"; cat "$tmp/one.s"; echo "$layout:"; cat "$tmp/two.s"; exit 1
fi
# Not a constant string: the samples hold at least 6 distinct bytes.
distinct=$(tail -n 1 "$tmp/two.s" | sed 's/.* -> //' | fold -w1 | sort -u | wc -l)
if [ "$distinct" -lt 6 ]; then echo "FAIL: the last sample has $distinct distinct bytes"; cat "$tmp/two.s"; exit 1; fi
echo "ok: $layout prints the 1-rank samples:"; cat "$tmp/two.s"
