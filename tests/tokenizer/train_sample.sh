#!/usr/bin/env bash
# GPT-2 BPE end to end: the project's docs tokenized with GPT-2's ranks
# (js-tiktoken's, written as a .tiktoken file), a tiny GPT-2 with the
# 50257-token vocabulary trained on them on 2 ranks (tp=2) with samples
# during training decoded by data.tokenizer, then `pentad sample
# --tokenizer` from its final checkpoint. Checks: the training samples are
# text starting from <|endoftext|>; the sample's text equals the prompt
# followed by js-tiktoken's decode of the ids pentad sampled (the same seed
# with --ids); the same seed gives the same text twice.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
js=$PENTAD_SOURCE_DIR/tests/tokenizer/js_tiktoken.cjs
node "$js" ranks gpt2 "$tmp/gpt2.tiktoken"
"$PENTAD" prep --tokenizer "$tmp/gpt2.tiktoken" --out "$tmp/data" "$PENTAD_SOURCE_DIR"/docs/*.md > "$tmp/prep.log"
"$MPIEXEC" -n 2 "$PENTAD" train "$PENTAD_SOURCE_DIR/input/tiny.toml" --set parallel.tp=2 \
  --set model.n_layers=1 --set model.d_model=32 --set model.n_heads=2 --set model.vocab_size=50258 \
  --set model.seq_len=32 --set train.steps=20 --set train.micro_batch=4 --set train.warmup_steps=2 \
  --set train.eval_every=0 --set train.sample_every=10 --set train.sample_tokens=12 \
  --set data.train="$tmp/data/train.bin" --set data.val="$tmp/data/val.bin" \
  --set data.tokenizer="$tmp/gpt2.tiktoken" --set checkpoint.save_final=true --set checkpoint.dir="$tmp/ck" \
  > "$tmp/train.log"
sample=(--tokenizer "$tmp/gpt2.tiktoken" --prompt "The pipeline schedule" --tokens 24 --temperature 0.8 --top-k 40 --seed 5 --threads 1)
"$PENTAD" sample "$tmp/ck/final.h5" "${sample[@]}" > "$tmp/text1" 2> "$tmp/err1"
"$PENTAD" sample "$tmp/ck/final.h5" "${sample[@]}" > "$tmp/text2" 2>/dev/null
"$PENTAD" sample "$tmp/ck/final.h5" "${sample[@]}" --ids > "$tmp/ids" 2>/dev/null
node "$js" decode gpt2 "$tmp/ids" "$tmp/js_text"
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import os, re, sys
tmp = sys.argv[1]
log = open(f"{tmp}/train.log", encoding="utf-8").read()
samples = re.findall(r'^sample at step (\d+) .*?: "<\|endoftext\|>" -> "(.*)"$', log, re.M)
text1 = open(f"{tmp}/text1", "rb").read()
ids = open(f"{tmp}/ids").read().split()
want = b"The pipeline schedule" + open(f"{tmp}/js_text", "rb").read() + b"\n"
checks = [
    (f"2 training samples from <|endoftext|>, decoded as text (steps {[s for s, _ in samples]})",
     [s for s, _ in samples] == ["10", "20"] and all(t and not t.startswith("ids ") for _, t in samples)),
    (f"sample stderr names the tokenizer: {open(f'{tmp}/err1').readline().strip()}",
     "tokenizer BPE gpt2" in open(f"{tmp}/err1").read()),
    (f"{len(ids)} ids sampled, all < 50257", 0 < len(ids) <= 24 and all(int(i) < 50257 for i in ids)),
    ("sample text == prompt + js-tiktoken's decode of the sampled ids", text1 == want),
    ("the same seed gives the same text", text1 == open(f"{tmp}/text2", "rb").read()),
]
if text1 != want:
    print("pentad:", text1[:200]); print("js:    ", want[:200])
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report  # noqa: E402
sys.exit(report(checks))
PY
