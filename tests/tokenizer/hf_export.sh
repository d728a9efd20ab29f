#!/usr/bin/env bash
# `pentad ckpt export --format hf --tokenizer`, checked by tokenizers.js (an
# independent reader of Hugging Face's tokenizer.json; npm, scripts/deps.sh).
#   hf_export.sh CASE      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON)
# gpt2, cl100k: js-tiktoken's ranks; a tiny GPT-2 with room for the
#   vocabulary is trained 1 step on 2 ranks and exported with its tokenizer.
#   Over docs/*.md, README.md and tests/tokenizer/multilingual.txt:
#   tokenizers.js's ids == js-tiktoken's encode(text, "all") (special-token
#   text as the special ids, as Hugging Face encodes it), and, on copies with
#   no special-token text, == `pentad prep`'s ids, whose decode by
#   tokenizers.js is the text. config.json and generation_config.json name
#   the bos/eos ids.
# llama3: a 128000-rank file (cl100k's 100256 ranks, then made-up tokens no
#   merge makes), a tiny Llama: tokenizers.js's ids == [<|begin_of_text|>] +
#   pentad's ids, on the files above and on a text of the made-up tokens.
# bytes: the byte tokenizer (--tokenizer bytes), a tiny GPT-2 with 256 ids:
#   tokenizers.js's ids of all the files above, as one text, == pentad's.
# errors: bad input gives one message on 2 ranks, exit 1, and no file written.
# Every case also reads the exported tokenizer.json back (`pentad prep
# --tokenizer DIR/tokenizer.json`): the same token file, bit for bit, as from
# the rank file (or without a tokenizer, for bytes), and the same tokenizer
# named; and `pentad sample` of the export directory, which takes that
# tokenizer.json itself, samples the checkpoint's ids; and exporting again
# with the exported tokenizer.json as --tokenizer writes the same files.
set -uo pipefail
: "${PENTAD:?}" "${MPIEXEC:?}" "${PENTAD_SOURCE_DIR:?}" "${PENTAD_PYTHON:?}"
export OMP_NUM_THREADS=1
case_name=$1
S=$PENTAD_SOURCE_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
js=$S/tests/tokenizer/js_tiktoken.cjs
hf=$S/tests/tokenizer/hf_tokenizers.cjs
fail=0
files=("$S"/docs/*.md "$S/README.md" "$S/tests/tokenizer/multilingual.txt")

# checkpoint DECK VOCAB: a checkpoint of DECK with model.vocab_size VOCAB,
# trained 1 step on 2 ranks (dp 2) on byte tokens, in $tmp/ck/final.h5.
checkpoint() {
  "$PENTAD" prep --out "$tmp/bytes" "$S/README.md" > /dev/null
  timeout 120 "$MPIEXEC" -n 2 "$PENTAD" train "$1" --set parallel.dp=2 --set model.vocab_size="$2" \
    --set model.n_layers=1 --set model.d_model=16 --set model.n_heads=2 --set model.seq_len=32 \
    --set train.steps=1 --set train.micro_batch=1 --set train.grad_accum=1 --set train.warmup_steps=1 \
    --set train.eval_every=0 --set data.train="$tmp/bytes/train.bin" --set data.val="$tmp/bytes/val.bin" \
    --set checkpoint.save_final=true --set checkpoint.dir="$tmp/ck" > "$tmp/train.log" 2>&1 ||
    { echo "FAIL: training the checkpoint"; tail -5 "$tmp/train.log"; exit 1; }
}

# export DIR ARGS...: ckpt export --format hf on 2 ranks; must succeed.
export_hf() {
  local dir=$1; shift
  timeout 120 "$MPIEXEC" -n 2 "$PENTAD" ckpt export "$tmp/ck/final.h5" --to "$dir" --format hf "$@" \
    > "$tmp/export.log" 2>&1 || { echo "FAIL: export: exit $?"; cat "$tmp/export.log"; exit 1; }
  cat "$tmp/export.log"
}

# Copies of the files without special-token text ("<|" -> "< |"), so that
# pentad's ordinary-text ids are what Hugging Face encodes too.
plain_copies() {
  mkdir -p "$tmp/plain"
  plain=()
  for f in "${files[@]}"; do
    sed 's/<|/< |/g' "$f" > "$tmp/plain/$(basename "$f")"
    plain+=("$tmp/plain/$(basename "$f")")
  done
}

# ids DIR BOS EOS: config.json and generation_config.json name them.
ids() {
  "$PENTAD_PYTHON" - "$@" <<'PY' || fail=1
import json, sys
d, bos, eos = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
bad = 0
for f in ("config.json", "generation_config.json"):
    j = json.load(open(f"{d}/{f}"))
    want = lambda i: None if i < 0 else i  # -1: not written
    ok = j.get("bos_token_id") == want(bos) and j.get("eos_token_id") == want(eos)
    print(f"{'ok  ' if ok else 'FAIL'} {f}: bos_token_id {j.get('bos_token_id')}, eos_token_id {j.get('eos_token_id')} (expected {bos}, {eos})")
    bad += not ok
sys.exit(bad)
PY
}

# read_back DIR DATA DESCRIBE FILE...: `pentad prep --tokenizer DIR/tokenizer.json`
# of FILE... writes DATA/train.bin bit for bit and names the tokenizer
# DESCRIBE (e.g. "BPE gpt2", "bytes").
read_back() {
  local dir=$1 data=$2 want=$3; shift 3
  rm -rf "$tmp/back"
  local out
  out=$("$PENTAD" prep --tokenizer "$dir/tokenizer.json" --val-fraction 0 --out "$tmp/back" "$@" 2>&1) ||
    { echo "FAIL: read back: prep exit $?"; echo "$out"; fail=1; return; }
  if cmp -s "$data/train.bin" "$tmp/back/train.bin"; then
    echo "ok   read back: $dir/tokenizer.json gives the same $(stat -c %s "$data/train.bin")-byte token file"
  else
    echo "FAIL: read back: $dir/tokenizer.json gives another token file than the original tokenizer"; fail=1
  fi
  grep -qF "tokenizer $want" <<<"$out" || { echo "FAIL: read back: 'tokenizer $want' not in:"; echo "$out"; fail=1; }
}

# re_export ARGS...: exporting again with the exported tokenizer.json as
# --tokenizer writes the same tokenizer.json and tokenizer_config.json, byte
# for byte, and passes on a chat_template.jinja (ARGS: more export arguments).
re_export() {
  # A chat template kept apart (newer transformers' chat_template.jinja) is passed on too.
  printf '{%% for m in messages %%}{{ m.content }}{%% endfor %%}\n' > "$tmp/hf/chat_template.jinja"
  export_hf "$tmp/hf2" --tokenizer "$tmp/hf" "$@" > /dev/null  # the directory: its tokenizer.json
  local f
  for f in tokenizer.json tokenizer_config.json config.json chat_template.jinja; do
    if cmp -s "$tmp/hf/$f" "$tmp/hf2/$f"; then
      echo "ok   re-export with $tmp/hf/tokenizer.json: the same $f"
    else
      echo "FAIL: re-export with $tmp/hf/tokenizer.json: $f differs"; fail=1
    fi
  done
}

# sample_both RANKS N: `pentad sample` of the export directory (its own
# tokenizer.json) and of the checkpoint with the rank file give the same ids
# for the prompt "a" (one token), and both prompts are N tokens: 2 where the
# tokenizer puts <|begin_of_text|> first (Llama 3), else 1.
sample_both() {
  local a b
  a=$("$PENTAD" sample "$tmp/ck/final.h5" --tokenizer "$1" --prompt a --tokens 4 --seed 1 --ids 2> "$tmp/s1.err") ||
    { echo "FAIL: sample of the checkpoint"; cat "$tmp/s1.err"; fail=1; return; }
  b=$("$PENTAD" sample "$tmp/hf" --prompt a --tokens 4 --seed 1 --ids 2> "$tmp/s2.err") ||
    { echo "FAIL: sample of the export directory"; cat "$tmp/s2.err"; fail=1; return; }
  if [ "$a" = "$b" ] && grep -q "prompt $2 tokens" "$tmp/s1.err" && grep -q "prompt $2 tokens" "$tmp/s2.err" &&
     grep -qF "tokenizer BPE" "$tmp/s2.err"; then
    echo "ok   sample: the export directory with its tokenizer.json samples the checkpoint's ids [$b], prompt \"a\" as $2 tokens"
  else
    echo "FAIL: sample: checkpoint [$a], export directory [$b]; expected both prompts of $2 tokens:"; cat "$tmp/s1.err" "$tmp/s2.err"; fail=1
  fi
}

# refused NAME EXPECTED ARGS...: ckpt export on 2 ranks exits 1 within 60 s,
# prints EXPECTED in one error line, and writes no file into $tmp/refused.
refused() {
  local name=$1 want=$2; shift 2
  rm -rf "$tmp/refused"
  out=$(timeout 60 "$MPIEXEC" -n 2 "$PENTAD" ckpt export "$tmp/ck/final.h5" --to "$tmp/refused" "$@" 2>&1); rc=$?
  [ $rc -eq 1 ] || { echo "FAIL: $name: exit $rc, expected 1"; echo "$out" | tail -3; fail=1; }
  grep -qF -- "$want" <<<"$out" || { echo "FAIL: $name: missing '$want' in:"; echo "$out"; fail=1; }
  [ "$(grep -c 'pentad: error' <<<"$out")" -eq 1 ] || { echo "FAIL: $name: the error is not printed once"; echo "$out"; fail=1; }
  if [ -n "$(ls -A "$tmp/refused" 2>/dev/null)" ]; then echo "FAIL: $name: files written: $(ls "$tmp/refused")"; fail=1; fi
  echo "ok   $name: $(grep 'pentad: error' <<<"$out")"
}

case "$case_name" in
gpt2|cl100k)
  enc=$case_name; [ "$enc" = cl100k ] && enc=cl100k_base
  node "$js" ranks "$enc" "$tmp/ranks.tiktoken"
  if [ "$case_name" = gpt2 ]; then vocab=50257 eot=50256; else vocab=100277 eot=100257; fi
  checkpoint "$S/input/tiny.toml" "$vocab"
  export_hf "$tmp/hf" --tokenizer "$tmp/ranks.tiktoken"
  node "$hf" tiktoken "$tmp/hf" "$enc" "${files[@]}" || fail=1
  plain_copies
  "$PENTAD" prep --tokenizer "$tmp/ranks.tiktoken" --val-fraction 0 --out "$tmp/data" "${plain[@]}" > /dev/null
  node "$hf" pentad "$tmp/hf" -1 "$tmp/data/train.bin" "$eot" "${plain[@]}" || fail=1
  ids "$tmp/hf" "$eot" "$eot"
  read_back "$tmp/hf" "$tmp/data" "BPE $case_name" "${plain[@]}"
  sample_both "$tmp/ranks.tiktoken" 1
  re_export
  ;;
llama3)
  node "$js" ranks cl100k_base "$tmp/cl100k.tiktoken"
  "$PENTAD_PYTHON" - "$tmp/cl100k.tiktoken" "$tmp/ranks.tiktoken" <<'PY'
import base64, sys
lines = open(sys.argv[1]).read().splitlines()
n = len(lines)
with open(sys.argv[2], "w") as f:
    f.write("\n".join(lines) + "\n")
    for r in range(n, 128000):  # NUL "pentad" and 4 letters: no two tokens join into one
        k = r - n
        code = bytes(97 + (k // 26**i) % 26 for i in range(4))
        f.write(base64.b64encode(b"\0pentad" + code).decode() + " %d\n" % r)
PY
  # A text of such tokens, each one piece (after a newline): tiktoken takes a
  # piece that is a token whole, which Hugging Face's BPE does only with
  # ignore_merges (no merge makes it).
  "$PENTAD_PYTHON" - "$tmp/fillers.txt" <<'PY'
import sys
with open(sys.argv[1], "wb") as f:
    for code in (b"aaaa", b"zzab", b"qrst"):
        f.write(b"filler\n\0pentad" + code + b"\n")
PY
  checkpoint "$S/tests/torch/llama_tiny.toml" 128256
  export_hf "$tmp/hf" --tokenizer "$tmp/ranks.tiktoken"
  plain_copies
  plain+=("$tmp/fillers.txt")
  "$PENTAD" prep --tokenizer "$tmp/ranks.tiktoken" --val-fraction 0 --out "$tmp/data" "${plain[@]}" > /dev/null
  node "$hf" pentad "$tmp/hf" 128000 "$tmp/data/train.bin" 128000 "${plain[@]}" || fail=1
  ids "$tmp/hf" 128000 128001
  read_back "$tmp/hf" "$tmp/data" "BPE llama3" "${plain[@]}"
  sample_both "$tmp/ranks.tiktoken" 2
  re_export
  ;;
bytes)
  checkpoint "$S/input/tiny.toml" 256
  export_hf "$tmp/hf" --tokenizer bytes
  cat "${files[@]}" > "$tmp/all.txt"  # one document: the byte tokenizer has no separator
  "$PENTAD" prep --val-fraction 0 --out "$tmp/data" "$tmp/all.txt" > /dev/null
  node "$hf" pentad "$tmp/hf" -1 "$tmp/data/train.bin" -1 "$tmp/all.txt" || fail=1
  ids "$tmp/hf" -1 -1
  read_back "$tmp/hf" "$tmp/data" "bytes" "$tmp/all.txt"
  re_export
  ;;
errors)
  node "$js" ranks gpt2 "$tmp/gpt2.tiktoken"
  checkpoint "$S/input/tiny.toml" 50000
  refused too_small "tokenizer '$tmp/gpt2.tiktoken' (gpt2) has 50257 ids, more than the vocabulary of checkpoint '$tmp/ck/final.h5' (50000, model.vocab_size)" \
    --format hf --tokenizer "$tmp/gpt2.tiktoken"
  head -300 "$tmp/gpt2.tiktoken" > "$tmp/bad.tiktoken"
  echo "not-base64! 300" >> "$tmp/bad.tiktoken"
  refused bad_rank_file "$tmp/bad.tiktoken:301:" --format hf --tokenizer "$tmp/bad.tiktoken" --pattern gpt2
  printf '{"model": ' > "$tmp/bad.json"
  refused bad_tokenizer_json "tokenizer.json '$tmp/bad.json': not valid JSON" --format hf --tokenizer "$tmp/bad.json"
  refused llmc "--tokenizer is for --format hf" --tokenizer "$tmp/gpt2.tiktoken"
  refused llmc_class "--class is for --format hf" --class Phi3ForCausalLM
  refused gpt2_as_phi3 "--class Phi3ForCausalLM: this model is written as GPT2LMHeadModel" --format hf --class Phi3ForCausalLM
  refused pattern_alone "--pattern needs --tokenizer FILE" --format hf --pattern gpt2
  refused bytes_pattern "--pattern needs --tokenizer FILE" --format hf --tokenizer bytes --pattern gpt2
  refused unknown_pattern "unknown pre-tokenization pattern 'gpt3'" --format hf --tokenizer "$tmp/gpt2.tiktoken" --pattern gpt3
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
[ $fail -eq 0 ] && echo "PASS" || echo "FAILED"
exit $fail
