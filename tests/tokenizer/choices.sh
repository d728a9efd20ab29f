#!/usr/bin/env bash
# `pentad prep --choices` against js-tiktoken 1.0.21: HellaSwag-style JSON
# Lines (made by node from docs/*.md and tests/tokenizer/multilingual.txt:
# contexts, 2 to 5 endings, labels, JSON.stringify's escapes, a blank line)
# rendered by pentad with a tiktoken rank file and by js_tiktoken.cjs
# (encode(ctx), encode(" " + ending), the file laid out in node) are the same
# bytes; then the file trains as data.choice_eval. Bad lines are named.
#   choices.sh gpt2|cl100k_base       (env: PENTAD, PENTAD_SOURCE_DIR, MPIEXEC)
set -euo pipefail
enc=$1
here=$(cd "$(dirname "$0")" && pwd)
js=$here/js_tiktoken.cjs
command -v node > /dev/null || { echo "FAIL: node is not installed: run scripts/deps.sh"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$js" ranks "$enc" "$tmp/ranks.tiktoken"
node "$here/made_jsonl.cjs" choices "$tmp/hs_val.jsonl" "$PENTAD_SOURCE_DIR"/docs/*.md "$here/multilingual.txt"
"$PENTAD" prep --choices --tokenizer "$tmp/ranks.tiktoken" --out "$tmp/out" "$tmp/hs_val.jsonl" | tee "$tmp/log"
node "$js" choices "$enc" "$tmp/hs_val.jsonl" "$tmp/want.bin"
cmp "$tmp/out/hs_val.bin" "$tmp/want.bin" || { echo "FAIL: pentad's file differs from js-tiktoken's rendering"; exit 1; }
echo "ok: $(stat -c %s "$tmp/want.bin") bytes, the same as js-tiktoken's rendering"
grep -q "prep: 300 multiple-choice examples" "$tmp/log" || { echo "FAIL: no summary line"; exit 1; }
# The file scores in training: its first 100 examples at seq_len 128 (an ending of at most 30
# characters is at most 120 tokens, 4 per character, so it always fits; long contexts are cut).
vocab=$(case $enc in gpt2) echo 50257 ;; cl100k_base) echo 100277 ;; esac)
"$PENTAD" prep --tokenizer "$tmp/ranks.tiktoken" --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
"$MPIEXEC" -n 1 "$PENTAD" train "$PENTAD_SOURCE_DIR"/input/tiny.toml --set model.vocab_size="$vocab" \
  --set model.seq_len=128 --set model.n_layers=1 --set model.d_model=32 --set model.n_heads=2 --set train.steps=1 \
  --set train.micro_batch=8 --set data.train="$tmp/data/train.bin" --set data.val="" \
  --set data.choice_eval="$tmp/out/hs_val.bin" --set train.choice_examples=100 --set log.peak_tflops=1 > "$tmp/train.log" 2>&1 ||
  { cat "$tmp/train.log"; echo "FAIL: training with the file"; exit 1; }
grep -E "^multiple-choice eval|choice acc_norm" "$tmp/train.log"
grep -qE "^multiple-choice eval: the first 100 of 300 examples" "$tmp/train.log" || { echo "FAIL: not scored"; exit 1; }
# A line without a label (HellaSwag's test split) and one with a bad endings field are named.
for bad in '{"ctx": "a", "endings": ["b", "c"], "label": ""}' '{"ctx": "a", "endings": "b", "label": 0}'; do
  printf '%s\n%s\n' "$(head -1 "$tmp/hs_val.jsonl")" "$bad" > "$tmp/bad.jsonl"
  if "$PENTAD" prep --choices --tokenizer "$tmp/ranks.tiktoken" --out "$tmp/bad" "$tmp/bad.jsonl" > "$tmp/bad.log" 2>&1; then
    echo "FAIL: a bad line was accepted"; exit 1
  fi
  grep -E "multiple-choice input '.*bad.jsonl' line 2: " "$tmp/bad.log" || { cat "$tmp/bad.log"; echo "FAIL: message"; exit 1; }
  [ ! -e "$tmp/bad/bad.bin" ] || { echo "FAIL: a file was written"; exit 1; }
done
echo "PASS"
