#!/usr/bin/env bash
# `pentad prep --prompt-key --completion-key` against js-tiktoken 1.0.21:
# prompt/completion JSON Lines (tests/data/sft.jsonl, and lines made by node
# from docs/*.md and tests/tokenizer/multilingual.txt: multilingual text,
# JSON.stringify's escapes, an empty completion, a blank line) give the same
# token file, loss mask included, as js_tiktoken.cjs's own rendering of the
# rule; then two steps train on it under dp 2 with a validation loss, and
# the metrics count the trained targets.
#   sft.sh gpt2|cl100k_base       (env: PENTAD, PENTAD_SOURCE_DIR, MPIEXEC)
set -euo pipefail
enc=$1
here=$(cd "$(dirname "$0")" && pwd)
js=$here/js_tiktoken.cjs
command -v node > /dev/null || { echo "FAIL: node is not installed: run scripts/deps.sh"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $enc in gpt2) eot=50256 vocab=50257 version=3 ;; cl100k_base) eot=100257 vocab=100277 version=4 ;; esac
node "$js" ranks "$enc" "$tmp/ranks.tiktoken"
node "$here/made_jsonl.cjs" pairs "$tmp/made.jsonl" "$PENTAD_SOURCE_DIR"/docs/*.md "$here/multilingual.txt"
cat "$PENTAD_SOURCE_DIR"/tests/data/sft.jsonl | sed 's/"prompt"/"question"/; s/"completion"/"answer"/' > "$tmp/all.jsonl"
cat "$tmp/made.jsonl" >> "$tmp/all.jsonl"
"$PENTAD" prep --tokenizer "$tmp/ranks.tiktoken" --prompt-key question --completion-key answer --val-fraction 0 \
  --out "$tmp/out" "$tmp/all.jsonl" | tee "$tmp/log"
node "$js" sft "$enc" "$tmp/all.jsonl" question answer "$eot" "$tmp/want.bin"
cmp "$tmp/out/train.bin" "$tmp/want.bin" || { echo "FAIL: pentad's token file differs from js-tiktoken's rendering"; exit 1; }
echo "ok: $(stat -c %s "$tmp/want.bin") bytes, the same as js-tiktoken's rendering"
grep -q "token files version $version (uint.., with the loss mask)" "$tmp/log" || { echo "FAIL: summary"; exit 1; }
# Training on it: dp 2, a validation part, the trained targets in the metrics.
"$PENTAD" prep --tokenizer "$tmp/ranks.tiktoken" --prompt-key question --completion-key answer \
  --out "$tmp/split" "$tmp/all.jsonl" > /dev/null
"$MPIEXEC" -n 2 "$PENTAD" train "$PENTAD_SOURCE_DIR"/input/tiny.toml --set model.vocab_size="$vocab" \
  --set model.seq_len=64 --set model.n_layers=1 --set model.d_model=32 --set model.n_heads=2 --set train.steps=2 \
  --set train.micro_batch=2 --set parallel.dp=2 --set data.train="$tmp/split/train.bin" \
  --set data.val="$tmp/split/val.bin" --set train.eval_batches=1 --set log.metrics="$tmp/m.jsonl" \
  --set log.peak_tflops=1 > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; echo "FAIL: training"; exit 1; }
grep -E "^step +2/2" "$tmp/train.log"
"${PENTAD_PYTHON:-python3}" - "$tmp/m.jsonl" "$tmp/train.log" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n = [r["trained_targets"] for r in rows if "loss" in r]
assert len(n) == 2 and all(0 < x < 4 * 64 for x in n), f"FAIL: trained_targets {n}"
shown = [int(m.group(1)) for m in re.finditer(r"^step +\d+/2 \|.* \| (\d+) trained", open(sys.argv[2]).read(), re.M)]
assert shown == n, f"FAIL: the console says {shown} trained, the metrics {n}"
print(f"ok: trained targets per step {n} of {4 * 64}, on the console too")
PY
# Steps whose batch trains no target (empty completions, the byte tokenizer's
# no end token): the loss is 0 and there is no gradient (docs/running.md).
if [[ $enc == gpt2 ]]; then
  "${PENTAD_PYTHON:-python3}" -c 'import json
for i in range(100): print(json.dumps({"q": "question %d?" % i, "a": ""}))' > "$tmp/empty.jsonl"
  "$PENTAD" prep --prompt-key q --completion-key a --out "$tmp/empty" "$tmp/empty.jsonl" > /dev/null
  "$MPIEXEC" -n 2 "$PENTAD" train "$PENTAD_SOURCE_DIR"/input/tiny.toml --set model.vocab_size=256 \
    --set model.seq_len=16 --set model.n_layers=1 --set model.d_model=32 --set model.n_heads=2 --set train.steps=2 \
    --set train.micro_batch=2 --set parallel.dp=2 --set data.train="$tmp/empty/train.bin" --set data.val="" \
    --set log.metrics="$tmp/e.jsonl" --set log.peak_tflops=1 > "$tmp/e.log" 2>&1 || { cat "$tmp/e.log"; echo "FAIL: training"; exit 1; }
  "${PENTAD_PYTHON:-python3}" - "$tmp/e.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if "loss" in l]
got = [(r["trained_targets"], r["loss"], r["grad_norm"]) for r in rows]
assert got == [(0, 0, 0)] * 2, f"FAIL: (trained_targets, loss, grad_norm) per step {got}"
print("ok: no trained target: loss 0, grad norm 0 at both steps")
PY
fi
echo "PASS"
