#!/usr/bin/env bash
# Bad input gets one clear message naming the thing, a non-zero exit on every
# rank, no hang, and no output file left looking valid.
#   bad_input.sh CASE      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR)
set -uo pipefail
case_name=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
NP=2

# A small valid corpus and deck.
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null || { echo "prep failed"; exit 1; }
cat > "$tmp/deck.toml" <<DECK
[model]
n_layers = 1
d_model = 16
n_heads = 2
seq_len = 8
[parallel]
dp = 2
[train]
steps = 2
micro_batch = 1
[data]
train = "$tmp/data/train.bin"
DECK

# run EXPECTED_PATTERN [pentad args...]: must exit non-zero within 60 s and
# print the pattern exactly once (rank 0 alone reports a collective error).
run() {
  local pattern=$1; shift
  timeout 60 "$MPIEXEC" -n $NP "$PENTAD" "$@" > "$tmp/out" 2>&1
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

# Token-file helper: header (magic, version, count) + uint16 tokens.
mkfile() {  # path magic version count ntokens maxtoken
  /usr/bin/python3 - "$@" <<'PY'
import struct, sys
path, magic, version, count, n, top = sys.argv[1], *map(int, sys.argv[2:])
hdr = [0] * 256
hdr[0], hdr[1], hdr[2] = magic, version, count
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *hdr))
    f.write(struct.pack("<%dH" % n, *[(i * 7) % (top + 1) for i in range(n)]))
PY
}

case "$case_name" in
  missing_data)
    run "data file '.*nope.bin'.*(No such file|cannot open)" train "$tmp/deck.toml" --set data.train="$tmp/nope.bin" ;;
  truncated_data)
    mkfile "$tmp/t.bin" 20240520 1 5000 100 200
    run "data file '.*t.bin'.*truncated" train "$tmp/deck.toml" --set data.train="$tmp/t.bin" ;;
  bad_magic)
    mkfile "$tmp/m.bin" 12345 1 100 100 200
    run "data file '.*m.bin'.*magic" train "$tmp/deck.toml" --set data.train="$tmp/m.bin" ;;
  token_out_of_vocab)
    mkfile "$tmp/v.bin" 20240520 1 1000 1000 300
    run "data file '.*v.bin'.*vocab_size" train "$tmp/deck.toml" --set data.train="$tmp/v.bin" --set model.vocab_size=256 ;;
  token_out_of_vocab_late)  # the one bad id is in the second rank's share of the check
    /usr/bin/python3 - "$tmp/late.bin" <<'PY'
import struct, sys
n = 4000
tok = [i % 200 for i in range(n)]
tok[n - 3] = 300
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *tok))
PY
    run "data file '.*late.bin': token 300 at index 3997 is >= model.vocab_size 256" train "$tmp/deck.toml" \
      --set data.train="$tmp/data/train.bin,$tmp/late.bin" ;;
  data_glob_no_match)
    run "data.train: '.*/nope_\*\.bin' matches no file" train "$tmp/deck.toml" --set data.train="$tmp/data/train.bin,$tmp/nope_*.bin" ;;
  data_named_twice)
    run "data.train: '.*/data/train.bin' is named twice" train "$tmp/deck.toml" --set data.train="$tmp/data/*.bin,$tmp/data/train.bin" ;;
  data_bad_shard)  # one bad file among good shards is named
    cp "$tmp/data/train.bin" "$tmp/data/shard_0.bin"
    mkfile "$tmp/data/shard_1.bin" 12345 1 100 100 200
    run "data file '.*shard_1.bin'.*magic" train "$tmp/deck.toml" --set data.train="$tmp/data/shard_*.bin" ;;
  data_weights_count)
    run "data.weights=\"1,2,3\" gives 3 weights for the 2 entries of data.train" train "$tmp/deck.toml" \
      --set data.train="$tmp/data/train.bin,$tmp/data/val.bin" --set data.weights=1,2,3 ;;
  data_weights_not_number)
    run "data.weights=\"1,x\": 'x' is not a weight" train "$tmp/deck.toml" \
      --set data.train="$tmp/data/train.bin,$tmp/data/val.bin" --set data.weights=1,x ;;
  data_weights_zero_share)  # global batch of 2: a weight of 1 against 100 rounds to no sequence
    run "data.weights: source '.*val.bin' \(weight 1\) gets 0 of the 2 sequences of a global batch" train \
      "$tmp/deck.toml" --set data.train="$tmp/data/train.bin,$tmp/data/val.bin" --set data.weights=100,1 ;;
  data_order_unknown)
    run "set data.order=shuffled: must be one of \"random\", \"epoch\" \(got \"shuffled\"\)" train "$tmp/deck.toml" --set data.order=shuffled ;;
  lr_wsd_no_decay)
    run "train.lr_schedule = \"wsd\" needs train.decay_steps >= 1" train "$tmp/deck.toml" --set train.lr_schedule=wsd ;;
  lr_wsd_too_long)
    run "train.warmup_steps=10 \+ train.decay_steps=5 is more than train.steps=2" train "$tmp/deck.toml" \
      --set train.lr_schedule=wsd --set train.decay_steps=5 ;;
  lr_decay_without_wsd)
    run "train.decay_steps=5 is read by train.lr_schedule = \"wsd\" only \(got \"cosine\"\)" train "$tmp/deck.toml" \
      --set train.decay_steps=5 ;;
  loss_mask_cut)  # a version 3 file whose loss mask lost its last byte
    /usr/bin/python3 - "$tmp/cut.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(200):
        f.write(json.dumps({"p": f"question {i}?", "c": f" answer {i}."}) + "\n")
PY
    "$PENTAD" prep --out "$tmp/sft" --prompt-key p --completion-key c "$tmp/cut.jsonl" > /dev/null
    truncate -s -1 "$tmp/sft/train.bin"
    run "data file '.*sft/train.bin': size mismatch: header says [0-9]+ tokens \([0-9]+ bytes with the loss mask\)" \
      train "$tmp/deck.toml" --set data.train="$tmp/sft/train.bin" ;;
  loss_mask_val_untrained)  # empty completions and no end token (bytes): nothing to validate on
    /usr/bin/python3 - "$tmp/empty.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(200):
        f.write(json.dumps({"p": f"question {i}?", "c": ""}) + "\n")
PY
    "$PENTAD" prep --out "$tmp/sft" --prompt-key p --completion-key c "$tmp/empty.jsonl" > /dev/null
    run "data.val '.*sft/val.bin': the loss mask trains no target in the [0-9]+ windows evaluated" \
      train "$tmp/deck.toml" --set data.val="$tmp/sft/val.bin" ;;
  prep_pairs_half)
    run "prep: --prompt-key and --completion-key go together" prep --out "$tmp/o" --prompt-key p \
      "$PENTAD_SOURCE_DIR"/tests/data/sft.jsonl ;;
  prep_pairs_plain_file)
    run "prep input '.*corpus.txt': prompt/completion pairs are read from JSON Lines files only" \
      prep --out "$tmp/o" --prompt-key prompt --completion-key completion \
      "$PENTAD_SOURCE_DIR"/tests/data/sft.jsonl "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt ;;
  unreadable_deck)
    run "cannot read input deck '.*missing.toml'" train "$tmp/missing.toml" ;;
  non_numeric)
    sed 's/^n_layers = 1/n_layers = "one"/' "$tmp/deck.toml" > "$tmp/nn.toml"
    run "nn.toml:2: model.n_layers: expected an integer" train "$tmp/nn.toml" ;;
  set_unknown_key)
    run "unknown key 'model.n_layer'" train "$tmp/deck.toml" --set model.n_layer=2 ;;
  set_non_numeric)
    run "model.d_model.*expected an integer" train "$tmp/deck.toml" --set model.d_model=wide ;;
  toml_syntax)
    printf '[model\nn_layers = 1\n' > "$tmp/syn.toml"
    run "syn.toml:1: TOML syntax error" train "$tmp/syn.toml" ;;
  bad_layout)
    run "parallel.*dp.*3.*2 ranks|2 ranks.*dp" train "$tmp/deck.toml" --set parallel.dp=3 ;;
  heads_not_dividing)
    run "model.d_model=16 is not divisible by model.n_heads=3" train "$tmp/deck.toml" --set model.n_heads=3 ;;
  pp_too_few_micro_batches)
    run "train.grad_accum=1 gives 1 micro-batches, fewer than parallel.pp=2" train "$tmp/deck.toml" \
      --set parallel.dp=1 --set parallel.pp=2 --set model.n_layers=2 ;;
  pp_interleaved_not_multiple)
    run "train.grad_accum=3 micro-batches must be a multiple of parallel.pp=2" train "$tmp/deck.toml" \
      --set parallel.dp=1 --set parallel.pp=2 --set model.n_layers=4 --set parallel.virtual_stages=2 \
      --set parallel.schedule=interleaved --set train.grad_accum=3 ;;
  zbh1_too_few_micro_batches)
    run "train.grad_accum=1 gives 1 micro-batches, fewer than parallel.pp=2" train "$tmp/deck.toml" \
      --set parallel.dp=1 --set parallel.pp=2 --set model.n_layers=2 --set parallel.schedule=zbh1 ;;
  zbh1_virtual_stages)
    run "parallel.virtual_stages=2 needs parallel.schedule=interleaved \(got parallel.schedule=zbh1\)" train "$tmp/deck.toml" \
      --set parallel.dp=1 --set parallel.pp=2 --set model.n_layers=4 --set parallel.virtual_stages=2 \
      --set parallel.schedule=zbh1 --set train.grad_accum=4 ;;
  zbv_virtual_stages)
    run "parallel.schedule=zbv needs parallel.virtual_stages=2, its V's two chunks per rank \(got parallel.virtual_stages=1\)" \
      train "$tmp/deck.toml" --set parallel.dp=1 --set parallel.pp=2 --set model.n_layers=4 \
      --set parallel.schedule=zbv --set train.grad_accum=4 ;;
  zbv_too_few_micro_batches)
    run "train.grad_accum=1 gives 1 micro-batches, fewer than parallel.pp=2" train "$tmp/deck.toml" \
      --set parallel.dp=1 --set parallel.pp=2 --set model.n_layers=4 --set parallel.virtual_stages=2 \
      --set parallel.schedule=zbv ;;
  zbv_empty_chunk)
    run "parallel.stage_layers leaves pipeline chunk 2 without blocks; parallel.schedule=zbv needs at least one block" \
      train "$tmp/deck.toml" --set parallel.dp=1 --set parallel.pp=2 --set model.n_layers=4 \
      --set parallel.virtual_stages=2 --set parallel.schedule=zbv --set train.grad_accum=2 \
      --set 'parallel.stage_layers="2,1,0,1"' ;;
  pp_stage_layers)
    run "parallel.stage_layers=\"2,1\" sums to 3 blocks, but model.n_layers=2" train "$tmp/deck.toml" \
      --set parallel.dp=1 --set parallel.pp=2 --set model.n_layers=2 --set train.grad_accum=2 --set parallel.stage_layers=2,1 ;;
  cp_seq_len_zigzag)
    # zig-zag cuts each sequence into 2*cp chunks: 6 tokens do not split into 4.
    run "model.seq_len=6 is not divisible by 2\*parallel.cp=2 \(parallel.cp_layout = \"zigzag\"" \
      train "$tmp/deck.toml" --set parallel.dp=1 --set parallel.cp=2 --set model.seq_len=6 ;;
  cp_seq_len_contiguous)
    run "model.seq_len=7 is not divisible by parallel.cp=2 \(parallel.cp_layout = \"contiguous\"\)" \
      train "$tmp/deck.toml" --set parallel.dp=1 --set parallel.cp=2 --set parallel.cp_layout=contiguous \
      --set model.seq_len=7 ;;
  unwritable_dir)
    touch "$tmp/afile"
    run "checkpoint.dir: cannot create directory '.*afile/ck'" train "$tmp/deck.toml" \
      --set checkpoint.save_final=true --set checkpoint.dir="$tmp/afile/ck"
    [ ! -e "$tmp/afile/ck" ] || { echo "FAIL: something was created"; exit 1; } ;;
  unwritable_metrics)
    touch "$tmp/afile"
    run "log.metrics: cannot create directory '.*afile'" train "$tmp/deck.toml" --set log.metrics="$tmp/afile/m.jsonl" ;;
  diverged_no_partial_output)
    # A run that fails mid-way leaves neither the dump nor its temporary file.
    run "not finite" train "$tmp/deck.toml" --set train.lr=1e30 --set train.min_lr=1e30 \
      --set train.grad_clip=0 --set train.steps=5 --set log.dump="$tmp/d.h5"
    if [ -e "$tmp/d.h5" ] || [ -e "$tmp/d.h5.tmp" ]; then echo "FAIL: partial dump left behind"; ls -la "$tmp"; exit 1; fi ;;
  moe_ep_not_dividing_dp)
    run "parallel.dp=2 is not divisible by parallel.ep=4" train "$tmp/deck.toml" \
      --set model.n_experts=4 --set parallel.ep=4 ;;
  moe_ep_not_dividing_experts)
    run "model.n_experts=3 is not divisible by parallel.ep=2" train "$tmp/deck.toml" \
      --set model.n_experts=3 --set parallel.ep=2 ;;
  moe_top_k)
    run "model.top_k=3 is larger than model.n_experts=2" train "$tmp/deck.toml" \
      --set model.n_experts=2 --set model.top_k=3 ;;
  moe_capacity_zero)
    run "model.capacity_factor=0: must be > 0" train "$tmp/deck.toml" --set model.n_experts=4 --set model.capacity_factor=0 ;;
  moe_ep_dense)
    run "parallel.ep=2 needs a mixture-of-experts model \\(model.n_experts > 0\\)" train "$tmp/deck.toml" \
      --set parallel.ep=2 ;;
  unknown_command)
    run "unknown command 'trian'" trian "$tmp/deck.toml" ;;
  schedule_unknown_kind)  # pentad schedule names every schedule the deck knows
    run "--schedule must be one of afab, 1f1b, interleaved, zbh1, zbv \\(got 'zbx'\\)" schedule --pp 2 --m 4 \
      --schedule zbx ;;
  choice_missing)
    run "data.choice_eval: multiple-choice file '$tmp/none.bin': cannot be read" train "$tmp/deck.toml" \
      --set data.choice_eval="$tmp/none.bin" ;;
  choice_token_file)  # a token file where the multiple-choice file goes
    run "multiple-choice file '$tmp/data/train.bin': magic 20240520, expected 20240522 .*this is a token file" \
      train "$tmp/deck.toml" --set data.choice_eval="$tmp/data/train.bin" ;;
  choice_bad_label)  # example 1's label (byte 1024 + 2 * (its offset + 3)) set to 9
    /usr/bin/python3 "$PENTAD_SOURCE_DIR"/tests/lib/choice_file.py write "$tmp/c.bin" 3 1
    /usr/bin/python3 - "$tmp/c.bin" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
first = struct.unpack_from("<H", b, 1026)[0]  # example 0's size in bytes
struct.pack_into("<H", b, 1024 + first + 6, 9)
open(sys.argv[1], "wb").write(b)
PY
    run "multiple-choice file '$tmp/c.bin': example 1 \(byte offset [0-9]+\): label 9 is not one of its [0-9] endings" \
      train "$tmp/deck.toml" --set data.choice_eval="$tmp/c.bin" ;;
  choice_ending_too_long)  # seq_len 8: an ending of 9 tokens leaves no context
    /usr/bin/python3 - "$tmp/c.bin" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
import choice_file
choice_file.write(sys.argv[1], [(0, [1, 2], [[3], [4]]), (1, [5], [[6], list(range(10, 19))])])
PY
    run "data.choice_eval '$tmp/c.bin': multiple-choice example 1, ending 1: 9 tokens leave no context within model.seq_len = 8" \
      train "$tmp/deck.toml" --set data.choice_eval="$tmp/c.bin" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
