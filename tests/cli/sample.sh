#!/usr/bin/env bash
# `pentad sample`: bad input gets one message naming the thing and a non-zero
# exit; a fixed seed repeats its text and another seed changes it; top-k 1 is
# greedy; an export directory and the latest pointer sample like the
# checkpoint file; generation stops at model.seq_len and says so; a Hugging
# Face directory's generation_config.json gives the sampling defaults.
#   sample.sh CASE      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR)
set -uo pipefail
case_name=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A tiny byte-level model trained for a few steps (seq_len 16).
train_tiny() {  # extra --set arguments
  "$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null || { echo "prep failed"; exit 1; }
  cat > "$tmp/deck.toml" <<DECK
[model]
n_layers = 1
d_model = 32
n_heads = 2
seq_len = 16
[train]
steps = 30
micro_batch = 4
lr = 1e-2
[data]
train = "$tmp/data/train.bin"
[checkpoint]
dir = "$tmp/ckpt"
every = 30
save_final = true
DECK
  "$MPIEXEC" -n 1 "$PENTAD" train "$tmp/deck.toml" "$@" > "$tmp/train.out" 2>&1 || { echo "train failed"; cat "$tmp/train.out"; exit 1; }
}

# fail_with PATTERN [pentad args...]: a non-zero exit within 60 s and the
# pattern printed exactly once.
fail_with() {
  local pattern=$1; shift
  timeout 60 "$@" > "$tmp/out" 2>&1
  local rc=$?
  if [ $rc -eq 124 ]; then echo "FAIL: hung (timeout)"; cat "$tmp/out"; exit 1; fi
  if [ $rc -eq 0 ]; then echo "FAIL: exit code 0"; cat "$tmp/out"; exit 1; fi
  local n
  n=$(grep -cE -- "$pattern" "$tmp/out")
  if [ "$n" -ne 1 ]; then
    echo "FAIL: expected the message /$pattern/ once, found $n times; output:"; cat "$tmp/out"; exit 1
  fi
  if grep -qE "Segmentation|core dumped|terminate called|Abort" "$tmp/out"; then
    echo "FAIL: crashed"; cat "$tmp/out"; exit 1
  fi
  echo "ok: exit $rc, message: $(grep -E -- "$pattern" "$tmp/out")"
}

# sample_out FILE [sample args...]: stdout to FILE, stderr to FILE.err; must succeed.
sample_out() {
  local out=$1; shift
  "$PENTAD" sample "$@" > "$out" 2> "$out.err" || { echo "FAIL: sample $* exited non-zero"; cat "$out.err"; exit 1; }
}

same() {  # A B WHAT
  if ! cmp -s "$1" "$2"; then echo "FAIL: $3 differ:"; cat "$1" "$2"; exit 1; fi
  echo "ok: $3 are identical: $(cat "$1")"
}

ck="$tmp/ckpt/final.h5"
case "$case_name" in
  one_rank)
    train_tiny
    fail_with "sample runs on exactly one rank \(this job has 2\)" "$MPIEXEC" -n 2 "$PENTAD" sample "$ck" --prompt "a" ;;
  vocab_mismatch)
    # A model of 128 ids trained on ids < 128: the byte tokenizer has 256.
    /usr/bin/python3 - "$tmp/small.bin" <<'PY'
import struct, sys
hdr = [0] * 256
hdr[0], hdr[1], hdr[2] = 20240520, 1, 4000
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", *hdr))
    f.write(struct.pack("<4000H", *[(i * 7) % 128 for i in range(4000)]))
PY
    train_tiny --set model.vocab_size=128 --set data.train="$tmp/small.bin"
    fail_with "the model does not match the tokenizer: tokenizer bytes \(256\) has 256 ids, the model's vocabulary model.vocab_size=128" \
      "$PENTAD" sample "$ck" --prompt "a" ;;
  prompt_too_long)
    train_tiny
    fail_with "the prompt has 17 tokens, more than model.seq_len=16" "$PENTAD" sample "$ck" --prompt "seventeen bytes.." ;;
  empty_prompt)
    train_tiny
    fail_with "the prompt is empty and tokenizer bytes \(256\) has no end-of-text token" "$PENTAD" sample "$ck" ;;
  temperature_negative)
    train_tiny
    fail_with "--temperature -0.5.*must be >= 0" "$PENTAD" sample "$ck" --prompt "a" --temperature -0.5 ;;
  top_p_zero)
    train_tiny
    fail_with "--top-p 0.0+: must be in \(0, 1\]" "$PENTAD" sample "$ck" --prompt "a" --top-p 0 ;;
  top_p_above_one)
    train_tiny
    fail_with "--top-p 1.50+: must be in \(0, 1\]" "$PENTAD" sample "$ck" --prompt "a" --top-p 1.5 ;;
  min_p_above_one)
    train_tiny
    fail_with "--min-p 1.50+: must be in \[0, 1\] \(0 = none\)" "$PENTAD" sample "$ck" --prompt "a" --min-p 1.5 ;;
  repetition_penalty_zero)
    train_tiny
    fail_with "--repetition-penalty 0.0+: must be > 0 \(1 = none\)" "$PENTAD" sample "$ck" --prompt "a" --repetition-penalty 0 ;;
  top_k_negative)
    train_tiny
    fail_with "--top-k -3: must be >= 0" "$PENTAD" sample "$ck" --prompt "a" --top-k -3 ;;
  threads_negative)
    train_tiny
    fail_with "--threads -1: must be >= 0" "$PENTAD" sample "$ck" --prompt "a" --threads -1 ;;
  temperature_not_a_number)
    train_tiny
    fail_with "sample: .*--temperature = warm" "$PENTAD" sample "$ck" --prompt "a" --temperature warm ;;
  missing_checkpoint)
    fail_with "checkpoint '.*nope.h5' does not exist" "$PENTAD" sample "$tmp/nope.h5" --prompt "a" ;;
  not_a_checkpoint)
    echo "just text" > "$tmp/x.h5"
    fail_with "weights '.*x.h5' is not an HDF5 file" "$PENTAD" sample "$tmp/x.h5" --prompt "a" ;;
  both_prompts)
    train_tiny
    echo "b" > "$tmp/p.txt"
    fail_with "give --prompt or --prompt-file, not both" "$PENTAD" sample "$ck" --prompt "a" --prompt-file "$tmp/p.txt" ;;
  pattern_without_tokenizer)
    train_tiny
    fail_with "--pattern needs --tokenizer FILE" "$PENTAD" sample "$ck" --prompt "a" --pattern gpt2 ;;
  seed_repeats)
    train_tiny
    sample_out "$tmp/a" "$ck" --prompt "The " --tokens 12 --temperature 1.5 --seed 7 --ids
    sample_out "$tmp/b" "$ck" --prompt "The " --tokens 12 --temperature 1.5 --seed 7 --ids
    sample_out "$tmp/c" "$ck" --prompt "The " --tokens 12 --temperature 1.5 --seed 8 --ids
    same "$tmp/a" "$tmp/b" "two runs with --seed 7"
    # 12 draws at temperature 1.5 from a barely trained byte model: the
    # chance of equal ids for another seed is far below 1e-6.
    if cmp -s "$tmp/a" "$tmp/c"; then echo "FAIL: --seed 8 gave the same tokens as --seed 7"; cat "$tmp/a"; exit 1; fi
    echo "ok: --seed 8 differs: $(cat "$tmp/c")"
    sample_out "$tmp/t1" "$ck" --prompt "The " --tokens 12 --temperature 1.5 --seed 7
    sample_out "$tmp/t2" "$ck" --prompt "The " --tokens 12 --temperature 1.5 --seed 7
    same "$tmp/t1" "$tmp/t2" "two texts with --seed 7" ;;
  top_k_one_is_greedy)
    train_tiny
    sample_out "$tmp/g" "$ck" --prompt "The " --tokens 12 --temperature 0 --ids
    sample_out "$tmp/k" "$ck" --prompt "The " --tokens 12 --temperature 1.3 --top-k 1 --seed 3 --ids
    same "$tmp/g" "$tmp/k" "greedy and --top-k 1" ;;
  export_and_latest)
    train_tiny
    "$PENTAD" ckpt export "$tmp/ckpt/final.h5" --to "$tmp/export" > /dev/null || { echo "FAIL: export"; exit 1; }
    sample_out "$tmp/f" "$ck" --prompt "The " --tokens 8 --temperature 0 --ids
    sample_out "$tmp/e" "$tmp/export" --prompt "The " --tokens 8 --temperature 0 --ids
    same "$tmp/f" "$tmp/e" "the checkpoint file and the export directory"
    # The step-30 checkpoint holds the same weights as final.h5.
    sample_out "$tmp/l" "$tmp/ckpt/latest" --prompt "The " --tokens 8 --temperature 0 --ids
    same "$tmp/f" "$tmp/l" "final.h5 and ckpt/latest"
    sample_out "$tmp/d" "$tmp/ckpt" --prompt "The " --tokens 8 --temperature 0 --ids
    same "$tmp/f" "$tmp/d" "final.h5 and the checkpoint directory" ;;
  stops_at_seq_len)
    train_tiny
    sample_out "$tmp/s" "$ck" --prompt "0123456789" --tokens 32 --temperature 0 --ids
    n=$(wc -w < "$tmp/s")
    if [ "$n" -ne 6 ]; then echo "FAIL: expected 16 - 10 = 6 tokens, got $n"; cat "$tmp/s" "$tmp/s.err"; exit 1; fi
    grep -q "generated 6 tokens (stopped: model.seq_len reached)" "$tmp/s.err" || { echo "FAIL: no stop line"; cat "$tmp/s.err"; exit 1; }
    echo "ok: 6 tokens, $(grep -o 'stopped: [^)]*' "$tmp/s.err")" ;;
  hf_dir_errors)
    # A Hugging Face directory (`ckpt export --format hf`) whose config.json,
    # tokenizer.json or tensors pentad cannot sample from.
    train_tiny
    "$PENTAD" ckpt export "$ck" --to "$tmp/hf" --format hf > /dev/null || { echo "FAIL: export"; exit 1; }
    sample_out "$tmp/ok" "$tmp/hf" --prompt "The " --tokens 4 --temperature 0 --ids
    echo "ok: the unchanged directory samples: $(cat "$tmp/ok")"
    # variant NAME PYTHON: $tmp/NAME, the export with config.json changed by
    # PYTHON (a statement on the dict c).
    variant() {
      mkdir "$tmp/$1" && ln -s "$tmp/hf/model.safetensors" "$tmp/$1/"
      /usr/bin/python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(c, open(sys.argv[2], "w"))' \
        "$tmp/hf/config.json" "$tmp/$1/config.json" "$2"
    }
    mkdir "$tmp/nocfg" && ln -s "$tmp/hf/model.safetensors" "$tmp/nocfg/"
    fail_with "'$tmp/nocfg': the directory has no config.json" "$PENTAD" sample "$tmp/nocfg" --prompt "a"
    variant gemma2 'c["architectures"] = ["Gemma2ForCausalLM"]'
    fail_with "architecture \"Gemma2ForCausalLM\" is not one pentad reads" "$PENTAD" sample "$tmp/gemma2" --prompt "a"
    variant nolayers 'del c["n_layer"]'
    fail_with "config.json' has no \"n_layer\"" "$PENTAD" sample "$tmp/nolayers" --prompt "a"
    variant relu 'c["activation_function"] = "relu"'
    fail_with "\"activation_function\" = \"relu\": pentad's GPT-2 uses the tanh GELU" "$PENTAD" sample "$tmp/relu" --prompt "a"
    variant deeper 'c["n_layer"] = 2'
    fail_with "'$tmp/deeper' has no tensor 'transformer.h.1.ln_1.weight'" "$PENTAD" sample "$tmp/deeper" --prompt "a"
    variant wide 'c["vocab_size"] = 50257'
    fail_with "model.vocab_size=50257, more than the byte tokenizer's 256: give its --tokenizer FILE \(the directory has no tokenizer.json\)" \
      "$PENTAD" sample "$tmp/wide" --prompt "a"
    variant badtok 'pass'
    echo '{"model": {"type": "Unigram"}}' > "$tmp/badtok/tokenizer.json"
    fail_with "tokenizer.json '$tmp/badtok/tokenizer.json': \"model\" type \"Unigram\"" "$PENTAD" sample "$tmp/badtok" --prompt "a"
    fail_with "the prompt has 17 tokens, more than model.seq_len=16 of $tmp/hf" "$PENTAD" sample "$tmp/hf" --prompt "seventeen bytes.."
    # generation_config.json's eos_token_id (one id or a list) stops
    # generation, beside the tokenizer's end-of-text (the byte tokenizer has
    # none): with a sampled token other than the first listed, the output is
    # the same seed's tokens before its first occurrence (the i-th token's
    # draw depends on the seed and i only). Not a token id: refused by key.
    sample_out "$tmp/free" "$tmp/hf" --prompt "The " --tokens 12 --seed 3 --ids
    read -ra all < "$tmp/free"
    stop=
    for id in "${all[@]:1}"; do [ "$id" != "${all[0]}" ] && { stop=$id; break; }; done
    [ -n "$stop" ] || { echo "FAIL: the 12 sampled tokens are all ${all[0]}: no stop token to pick"; exit 1; }
    want=()
    for id in "${all[@]}"; do [ "$id" = "$stop" ] && break; want+=("$id"); done
    variant stops 'pass'
    echo "{\"eos_token_id\": [100000, $stop]}" > "$tmp/stops/generation_config.json"
    sample_out "$tmp/stopped" "$tmp/stops" --prompt "The " --tokens 12 --seed 3 --ids
    if [ "$(cat "$tmp/stopped")" = "${want[*]}" ] && grep -q "stopped: end-of-text, id $stop)" "$tmp/stopped.err" &&
       grep -q "stops at ids 100000 $stop " "$tmp/stopped.err"; then
      echo "ok: [${all[*]}] stops before the listed eos $stop: [$(cat "$tmp/stopped")]"
    else
      echo "FAIL: eos_token_id [100000, $stop]: got [$(cat "$tmp/stopped")], want [${want[*]}]"; cat "$tmp/stopped.err"; exit 1
    fi
    variant badeos 'pass'
    echo '{"eos_token_id": "x"}' > "$tmp/badeos/generation_config.json"
    fail_with "generation_config.json': \"eos_token_id\" = \"x\" is not a token id or a list of them" \
      "$PENTAD" sample "$tmp/badeos" --prompt "a"
    echo '{"eos_token_id": ' > "$tmp/badeos/generation_config.json"
    fail_with "generation_config.json' is not valid JSON: " "$PENTAD" sample "$tmp/badeos" --prompt "a" ;;
  stop_strings)
    # --stop: generation ends at the first token that completes a stop string
    # in the generated text; stdout's text ends before it, the ids end with that
    # token. With the byte tokenizer each token is one byte, so both follow
    # from a free run of the same seed (the i-th draw depends on the seed and i).
    train_tiny
    sample_out "$tmp/free" "$ck" --prompt "The " --tokens 12 --seed 7 --ids
    sample_out "$tmp/free_text" "$ck" --prompt "The " --tokens 12 --seed 7
    # The stop string: bytes 5-6 of the generated text (two bytes: a string spanning tokens).
    read -r stop_str first < <(/usr/bin/python3 -c 'import sys
ids = [int(x) for x in open(sys.argv[1]).read().split()]
s = bytes(ids[5:7])
print(s.hex(), bytes(ids).find(s))' "$tmp/free")
    stop_text=$(/usr/bin/python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(sys.argv[1]))' "$stop_str")
    sample_out "$tmp/cut" "$ck" --prompt "The " --tokens 12 --seed 7 --ids --stop "$stop_text" --stop "never here"
    sample_out "$tmp/cut_text" "$ck" --prompt "The " --tokens 12 --seed 7 --stop "never here" --stop "$stop_text"
    want_ids=$(/usr/bin/python3 -c 'import sys
ids = open(sys.argv[1]).read().split(); n = int(sys.argv[2]) + 2
print(" ".join(ids[:n]))' "$tmp/free" "$first")
    want_text=$(/usr/bin/python3 -c 'import sys
ids = [int(x) for x in open(sys.argv[1]).read().split()]
sys.stdout.buffer.write(b"The " + bytes(ids[:int(sys.argv[2])]))' "$tmp/free" "$first")
    if [ "$(cat "$tmp/cut")" = "$want_ids" ] && [ "$(cat "$tmp/cut_text")" = "$want_text" ] &&
       grep -q "stopped: a --stop string" "$tmp/cut.err"; then
      echo "ok: --stop $stop_str (hex): ids [$(cat "$tmp/cut")] of [$(cat "$tmp/free")], text '$(cat "$tmp/cut_text")'"
    else
      echo "FAIL: --stop $stop_str: ids [$(cat "$tmp/cut")] want [$want_ids]; text '$(cat "$tmp/cut_text")' want '$want_text'"
      cat "$tmp/cut.err"; exit 1
    fi
    sample_out "$tmp/none" "$ck" --prompt "The " --tokens 12 --seed 7 --ids --stop "never here"
    same "$tmp/free" "$tmp/none" "a stop string never generated: the free run's ids"
    fail_with "--stop: an empty string" "$PENTAD" sample "$ck" --prompt "a" --stop "" ;;
  hf_dir_generation_config)
    # generation_config.json's sampling settings (do_sample, temperature,
    # top_k, top_p, min_p, repetition_penalty) are the defaults where the command
    # line gives none: the same ids as the export (no such keys) sampled with
    # them as options; an option given overrides the file's; do_sample false
    # is greedy; bad values are refused by key.
    train_tiny
    "$PENTAD" ckpt export "$ck" --to "$tmp/hf" --format hf > /dev/null || { echo "FAIL: export"; exit 1; }
    grep -qE '"(temperature|top_k|top_p|do_sample)"' "$tmp/hf/generation_config.json" &&
      { echo "FAIL: the export's generation_config.json already has sampling keys"; exit 1; }
    gen() {  # gen NAME JSON: $tmp/NAME, the export with generation_config.json = JSON
      mkdir "$tmp/$1" && ln -s "$tmp/hf/model.safetensors" "$tmp/hf/config.json" "$tmp/$1/"
      echo "$2" > "$tmp/$1/generation_config.json"
    }
    gen gen '{"do_sample": true, "temperature": 0.7, "top_k": 5, "top_p": 0.8, "repetition_penalty": 1.05, "min_p": 0.1}'
    differs=0
    for seed in 1 2 3; do
      sample_out "$tmp/a$seed" "$tmp/gen" --prompt "The " --tokens 12 --seed $seed --ids
      sample_out "$tmp/b$seed" "$tmp/hf" --prompt "The " --tokens 12 --seed $seed --ids --temperature 0.7 --top-k 5 \
        --top-p 0.8 --repetition-penalty 1.05 --min-p 0.1
      same "$tmp/a$seed" "$tmp/b$seed" "seed $seed: the file's settings and the same options"
      sample_out "$tmp/c$seed" "$tmp/hf" --prompt "The " --tokens 12 --seed $seed --ids
      cmp -s "$tmp/a$seed" "$tmp/c$seed" || differs=1
      sample_out "$tmp/d$seed" "$tmp/gen" --prompt "The " --tokens 12 --seed $seed --ids --temperature 1 --top-k 0 \
        --top-p 1 --repetition-penalty 1 --min-p 0
      same "$tmp/c$seed" "$tmp/d$seed" "seed $seed: options over the file's settings and pentad's defaults"
      sample_out "$tmp/e$seed" "$tmp/gen" --prompt "The " --tokens 12 --seed $seed --ids --top-k 0
      sample_out "$tmp/f$seed" "$tmp/hf" --prompt "The " --tokens 12 --seed $seed --ids --temperature 0.7 --top-p 0.8 \
        --repetition-penalty 1.05 --min-p 0.1
      same "$tmp/e$seed" "$tmp/f$seed" "seed $seed: --top-k over the file's, its temperature and top-p kept"
    done
    [ $differs = 1 ] || { echo "FAIL: the file's settings sample what pentad's defaults do for every seed"; exit 1; }
    grep -qF "sample: temperature 0.7, top-k 5, top-p 0.8, repetition penalty 1.05, min-p 0.1 from generation_config.json" \
      "$tmp/a1.err" ||
      { echo "FAIL: stderr does not name the file's settings"; cat "$tmp/a1.err"; exit 1; }
    echo "ok: $(grep -F 'from generation_config.json' "$tmp/a1.err")"
    grep -q "from generation_config.json" "$tmp/e1.err" && grep -q "top-k" <(grep "from generation_config" "$tmp/e1.err") &&
      { echo "FAIL: --top-k given, yet stderr names the file's top-k"; cat "$tmp/e1.err"; exit 1; }
    gen greedy '{"do_sample": false, "temperature": 0.7}'
    sample_out "$tmp/g" "$tmp/greedy" --prompt "The " --tokens 12 --seed 5 --ids
    sample_out "$tmp/h" "$tmp/hf" --prompt "The " --tokens 12 --seed 5 --ids --temperature 0
    same "$tmp/g" "$tmp/h" "do_sample false and --temperature 0"
    grep -qF "sample: greedy (do_sample false) from generation_config.json" "$tmp/g.err" ||
      { echo "FAIL: stderr does not say greedy"; cat "$tmp/g.err"; exit 1; }
    bad() {  # bad JSON MESSAGE
      rm -rf "$tmp/bad" && gen bad "$1"
      fail_with "generation_config.json': $2" "$PENTAD" sample "$tmp/bad" --prompt "a"
    }
    bad '{"temperature": -1}' '"temperature" = -1 is not a number >= 0'
    bad '{"top_p": 0}' '"top_p" = 0 is not in \(0, 1\]'
    bad '{"top_p": 1.5}' '"top_p" = 1.5 is not in \(0, 1\]'
    bad '{"top_k": 2.5}' '"top_k" = 2.5 is not an integer >= 0'
    bad '{"do_sample": "yes"}' '"do_sample" = "yes" is not true or false'
    bad '{"repetition_penalty": 0}' '"repetition_penalty" = 0 is not a number > 0'
    bad '{"min_p": 1.5}' '"min_p" = 1.5 is not in \[0, 1\]' ;;
  *)
    echo "unknown case $case_name"; exit 2 ;;
esac
