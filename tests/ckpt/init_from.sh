#!/usr/bin/env bash
# checkpoint.init_from and `ckpt export --format hf`, end to end on 2 ranks:
#  - llm.c: a GPT-2 with a padded vocabulary exported to gpt2_model.bin,
#    loaded under tp2 and exported again is the same file byte for byte; a
#    version 5 (bf16) copy loads as exactly its bf16 values;
#  - a pentad checkpoint as init_from (weights only, under pp2): the same
#    weights, the step and the AdamW moments fresh;
#  - a sharded Hugging Face export (model.safetensors.index.json) loads back
#    bitwise under tp2;
#  - bad input: one error naming the file/tensor/key, exit 1.
# Env: PENTAD, PENTAD_SOURCE_DIR, PENTAD_PYTHON, MPIEXEC.
set -u
: "${PENTAD:?}" "${PENTAD_SOURCE_DIR:?}" "${PENTAD_PYTHON:?}" "${MPIEXEC:?}"
export OMP_NUM_THREADS=1
T=$PENTAD_SOURCE_DIR/tests
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pentad_init_from_XXXXXX")
trap 'rm -rf "$DIR"' EXIT
fail=0
expect() { if ! grep -qF -- "$2" <<<"$3"; then echo "FAIL: $1: missing '$2' in:"; echo "$3"; fail=1; fi; }
# run NAME N DECK ARGS...: pentad train on N ranks; must succeed.
run() {
  local name=$1 n=$2 deck=$3
  shift 3
  out=$(timeout 120 "$MPIEXEC" -n "$n" "$PENTAD" train "$deck" --set "data.train=$DIR/data/train.bin" "$@" 2>&1) ||
    { echo "FAIL: $name: exit $?"; echo "$out" | tail -5; fail=1; }
}
# refused NAME N EXPECTED CMD...: exit 1 with EXPECTED in the one error line.
refused() {
  local name=$1 n=$2 want=$3
  shift 3
  out=$(timeout 120 "$MPIEXEC" -n "$n" "$PENTAD" "$@" 2>&1); rc=$?
  [ $rc -eq 1 ] || { echo "FAIL: $name: exit $rc, expected 1"; echo "$out" | tail -3; fail=1; }
  expect "$name" "$want" "$out"
  [ "$(grep -c 'pentad: error' <<<"$out")" -eq 1 ] || { echo "FAIL: $name: the error is not printed once"; fail=1; }
}
same() { "$PENTAD_PYTHON" "$T/torch/same_weights.py" "$1" "$2" || fail=1; }

"$PENTAD" prep --out "$DIR/data" "$T/data/corpus.txt" > /dev/null
GPT2=$T/torch/gpt2_tiny.toml
LLAMA=$T/torch/llama_tiny.toml

# ---- llm.c: V = 300 pads to Vp = 384 -----------------------------------------
run "gpt2 train" 1 "$GPT2" --set model.vocab_size=300 --set train.steps=5 --set checkpoint.save_final=true \
  --set "checkpoint.dir=$DIR/g"
"$PENTAD" ckpt export "$DIR/g/final.h5" --to "$DIR/g_out" > /dev/null || { echo "FAIL: llmc export"; fail=1; }
run "llmc init_from" 2 "$GPT2" --set model.vocab_size=300 --set parallel.tp=2 --set train.steps=0 \
  --set checkpoint.save_final=true --set "checkpoint.dir=$DIR/g2" --set "checkpoint.init_from=$DIR/g_out/gpt2_model.bin"
expect "llmc init_from" "llm.c GPT-2, version 3 (float32), 84 padded vocabulary rows dropped" "$out"
"$PENTAD" ckpt export "$DIR/g2/final.h5" --to "$DIR/g2_out" > /dev/null || { echo "FAIL: llmc re-export"; fail=1; }
if cmp "$DIR/g_out/gpt2_model.bin" "$DIR/g2_out/gpt2_model.bin"; then
  echo "ok   llm.c .bin -> pentad (tp2) -> llm.c .bin: identical ($(stat -c %s "$DIR/g_out/gpt2_model.bin") bytes)"
else
  echo "FAIL: llm.c round trip differs"; fail=1
fi
"$PENTAD_PYTHON" "$T/ckpt/llmc_bf16.py" to-v5 "$DIR/g_out/gpt2_model.bin" "$DIR/v5.bin" || fail=1
run "llmc v5 init_from" 2 "$GPT2" --set model.vocab_size=300 --set parallel.pp=2 --set train.steps=0 \
  --set checkpoint.save_final=true --set "checkpoint.dir=$DIR/g5" --set "checkpoint.init_from=$DIR/v5.bin"
expect "llmc v5" "version 5 (bfloat16)" "$out"
"$PENTAD" ckpt export "$DIR/g5/final.h5" --to "$DIR/g5_out" > /dev/null || { echo "FAIL: v5 re-export"; fail=1; }
"$PENTAD_PYTHON" "$T/ckpt/llmc_bf16.py" same-as-bf16 "$DIR/g_out/gpt2_model.bin" "$DIR/g5_out/gpt2_model.bin" || fail=1

# ---- a pentad checkpoint, weights only ---------------------------------------
run "llama train" 1 "$LLAMA" --set train.steps=5 --set checkpoint.every=5 --set checkpoint.save_final=true \
  --set "checkpoint.dir=$DIR/l"
run "pentad init_from" 2 "$LLAMA" --set parallel.pp=2 --set train.steps=0 --set checkpoint.save_final=true \
  --set "checkpoint.dir=$DIR/l2" --set "checkpoint.init_from=$DIR/l/latest"
expect "pentad init_from" "pentad checkpoint of step 5" "$out"
same "$DIR/l/final.h5" "$DIR/l2/final.h5"
"$PENTAD_PYTHON" - "$DIR/l2/final.h5" <<'PY' || fail=1
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
moments = []
f["optim"].visititems(lambda n, o: moments.append(o[...]) if isinstance(o, h5py.Dataset) else None)
ok = int(f.attrs["step"]) == 0 and len(moments) > 0 and all(not m.any() for m in moments)
print(f"{'ok  ' if ok else 'FAIL'} init_from starts fresh: step {int(f.attrs['step'])}, "
      f"{len(moments)} AdamW moments, all zero: {all(not m.any() for m in moments)}")
sys.exit(0 if ok else 1)
PY

# ---- a sharded Hugging Face export -------------------------------------------
run "wide llama" 1 "$LLAMA" --set model.d_model=256 --set model.n_heads=8 --set model.n_kv_heads=4 \
  --set model.d_ff=512 --set train.steps=0 --set checkpoint.save_final=true --set "checkpoint.dir=$DIR/w"
out=$("$PENTAD" ckpt export "$DIR/w/final.h5" --to "$DIR/w_hf" --format hf --max-shard-mb 1 2>&1) ||
  { echo "FAIL: sharded export"; fail=1; }
expect "sharded export" "model.safetensors.index.json" "$out"
n_shards=$(ls "$DIR"/w_hf/model-*-of-*.safetensors 2>/dev/null | wc -l)
[ "$n_shards" -ge 3 ] || { echo "FAIL: $n_shards shards, expected >= 3 of at most 1 MiB"; fail=1; }
run "sharded init_from" 2 "$LLAMA" --set model.d_model=256 --set model.n_heads=8 --set model.n_kv_heads=4 \
  --set model.d_ff=512 --set parallel.tp=2 --set train.steps=0 --set checkpoint.save_final=true \
  --set "checkpoint.dir=$DIR/w2" --set "checkpoint.init_from=$DIR/w_hf"
same "$DIR/w/final.h5" "$DIR/w2/final.h5"

# ---- a GPT-2 file as Hugging Face's own gpt2 holds it: no "transformer."
# prefix, causal-mask buffers h.N.attn.bias, a longer position table --------
"$PENTAD" ckpt export "$DIR/g/final.h5" --to "$DIR/g_hf" --format hf > /dev/null || fail=1
mkdir -p "$DIR/g_plain" && cp "$DIR/g_hf/config.json" "$DIR/g_plain/"
"$PENTAD_PYTHON" - "$DIR/g_hf/model.safetensors" "$DIR/g_plain/model.safetensors" <<'PY' || fail=1
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n]); data = raw[8 + n:]
out, blobs, off = {}, [], 0
for k, e in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0] if kv[0] != "__metadata__" else -1):
    if k == "__metadata__":
        out[k] = e; continue
    b = data[e["data_offsets"][0]:e["data_offsets"][1]]
    name = k[len("transformer."):] if k.startswith("transformer.") else k
    out[name] = {"dtype": e["dtype"], "shape": e["shape"], "data_offsets": [off, off + len(b)]}; blobs.append(b); off += len(b)
    if name.endswith("attn.c_proj.bias"):
        mask = struct.pack("<256f", *[1.0 if j <= i else 0.0 for i in range(16) for j in range(16)])
        out[name.replace("c_proj.bias", "bias")] = {"dtype": "F32", "shape": [1, 1, 16, 16], "data_offsets": [off, off + len(mask)]}
        blobs.append(mask); off += len(mask)
text = json.dumps(out).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
PY
run "gpt2 plain names, seq_len 8" 2 "$GPT2" --set model.vocab_size=300 --set model.seq_len=8 --set parallel.tp=2 \
  --set train.steps=0 --set checkpoint.save_final=true --set "checkpoint.dir=$DIR/g8" --set "checkpoint.init_from=$DIR/g_plain"
"$PENTAD_PYTHON" - "$DIR/g/final.h5" "$DIR/g8/final.h5" <<'PY' || fail=1
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a["model"].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
bad = [n for n in names if not np.array_equal(a["model"][n][...][:8] if n == "wpe" else a["model"][n][...], b["model"][n][...])]
ok = not bad and b["model/wpe"].shape[0] == 8
print(f"{'ok  ' if ok else 'FAIL'} GPT-2 without the transformer. prefix, mask buffers skipped, wpe 16 -> 8 rows: "
      f"{len(names)} tensors, differing {bad}")
sys.exit(0 if ok else 1)
PY

# ---- bad input -----------------------------------------------------------------
out=$("$PENTAD" ckpt export "$DIR/l/latest" --to "$DIR/l_hf" --format hf 2>&1) || { echo "FAIL: export l/latest: $out"; fail=1; }
expect "export DIR/latest" "(21 tensors, fp32, step 5)" "$out"
TR=(train "$LLAMA" --set "data.train=$DIR/data/train.bin" --set train.steps=0 --set parallel.dp=2)
refused "init_from with resume" 2 "checkpoint.init_from = \"$DIR/l_hf\" and checkpoint.resume = \"latest\" are both set" \
  "${TR[@]}" --set "checkpoint.init_from=$DIR/l_hf" --set checkpoint.resume=latest
refused "config mismatch" 2 "\"intermediate_size\" = 96 but the deck has model.d_ff = 64" \
  "${TR[@]}" --set model.d_ff=64 --set "checkpoint.init_from=$DIR/l_hf"
mkdir -p "$DIR/bare" && cp "$DIR/l_hf/model.safetensors" "$DIR/bare/"
refused "shape mismatch" 2 "tensor 'model.layers.0.mlp.gate_proj.weight' has shape (96, 32), but the deck's LlamaForCausalLM needs (64, 32)" \
  "${TR[@]}" --set model.d_ff=64 --set "checkpoint.init_from=$DIR/bare/model.safetensors"
refused "class mismatch" 2 "architecture \"GPT2LMHeadModel\", but the deck's model is a LlamaForCausalLM" \
  "${TR[@]}" --set model.vocab_size=256 --set "checkpoint.init_from=$DIR/g_hf"
cp "$DIR/g_hf/model.safetensors" "$DIR/bare/gpt2.safetensors"
refused "missing tensor" 2 "has no tensor 'model.embed_tokens.weight'" \
  "${TR[@]}" --set "checkpoint.init_from=$DIR/bare/gpt2.safetensors"
mkdir -p "$DIR/bert" && cp "$DIR/l_hf/model.safetensors" "$DIR/bert/" &&
  sed 's/LlamaForCausalLM/BertForMaskedLM/' "$DIR/l_hf/config.json" > "$DIR/bert/config.json"
refused "unknown architecture" 2 "architecture \"BertForMaskedLM\" is not one pentad reads" \
  "${TR[@]}" --set "checkpoint.init_from=$DIR/bert"
# rope_scaling (Llama 3.1's "llama3", YaRN's "yarn") must agree with the deck's model.rope_scaling and its keys.
for v in llama3 factor yarn dynamic; do
  mkdir -p "$DIR/rope_$v" && cp "$DIR/l_hf/model.safetensors" "$DIR/rope_$v/"
  "$PENTAD_PYTHON" - "$DIR/l_hf/config.json" "$DIR/rope_$v/config.json" "$v" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_scaling"] = {"rope_type": "llama3", "factor": 32.0 if sys.argv[3] == "factor" else 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
if sys.argv[3] in ("yarn", "dynamic"):
    c["rope_scaling"] = {"rope_type": sys.argv[3], "factor": 4.0, "original_max_position_embeddings": 4096}
json.dump(c, open(sys.argv[2], "w"))
PY
done
refused "rope_scaling in config.json, none in the deck" 2 "but the deck has model.rope_scaling = \"none\"" \
  "${TR[@]}" --set "checkpoint.init_from=$DIR/rope_llama3"
refused "rope_scaling in the deck, null in config.json" 2 "\"rope_scaling\" is null but the deck has model.rope_scaling = \"llama3\"" \
  "${TR[@]}" --set model.rope_scaling=llama3 --set "checkpoint.init_from=$DIR/l_hf"
refused "rope_scaling factor" 2 "\"rope_scaling\" comes to \"factor\" = 32.0 but the deck has model.rope_scaling_factor = 8.0" \
  "${TR[@]}" --set model.rope_scaling=llama3 --set "checkpoint.init_from=$DIR/rope_factor"
refused "rope_scaling dynamic" 2 "pentad's RoPE scales as \"linear\", \"llama3\" or \"yarn\" only" \
  "${TR[@]}" --set model.rope_scaling=llama3 --set "checkpoint.init_from=$DIR/rope_dynamic"
refused "rope_scaling yarn, llama3 in the deck" 2 "but the deck has model.rope_scaling = \"llama3\"" \
  "${TR[@]}" --set model.rope_scaling=llama3 --set "checkpoint.init_from=$DIR/rope_yarn"
refused "rope_scaling yarn, another beta_fast" 2 "\"rope_scaling\" comes to \"beta_fast\" = 32.0 but the deck has model.rope_beta_fast = 16.0" \
  "${TR[@]}" --set model.rope_scaling=yarn --set model.rope_scaling_factor=4 --set model.rope_original_context=4096 \
  --set model.rope_beta_fast=16 --set "checkpoint.init_from=$DIR/rope_yarn"
run "rope_scaling llama3 agrees" 2 "$LLAMA" --set train.steps=0 --set parallel.dp=2 --set model.rope_scaling=llama3 \
  --set "checkpoint.init_from=$DIR/rope_llama3"
run "rope_scaling yarn agrees" 2 "$LLAMA" --set train.steps=0 --set parallel.dp=2 --set model.rope_scaling=yarn \
  --set model.rope_scaling_factor=4 --set model.rope_original_context=4096 --set "checkpoint.init_from=$DIR/rope_yarn"
size=$(stat -c %s "$DIR/bare/model.safetensors")
head -c $((size - 100)) "$DIR/bare/model.safetensors" > "$DIR/bare/cut.safetensors"
refused "truncated" 2 "safetensors file '$DIR/bare/cut.safetensors': tensor 'lm_head.weight': data_offsets [131712,164480] run past the data section" \
  "${TR[@]}" --set "checkpoint.init_from=$DIR/bare/cut.safetensors"
refused "llm.c into llama" 2 "an llm.c file is a GPT-2, but the deck has model.family = llama" \
  "${TR[@]}" --set "checkpoint.init_from=$DIR/g_out/gpt2_model.bin"
refused "no such file" 2 "checkpoint.init_from = '$DIR/nope': No such file or directory" \
  "${TR[@]}" --set "checkpoint.init_from=$DIR/nope"
run "gpt2 moe" 1 "$T/torch/moe_gpt2_tiny.toml" --set train.steps=0 --set checkpoint.save_final=true --set "checkpoint.dir=$DIR/gm"
refused "gpt2 moe export" 2 "a GPT-2 mixture of experts has no Hugging Face class" \
  ckpt export "$DIR/gm/final.h5" --to "$DIR/gm_hf" --format hf
run "llama moe every 2" 1 "$T/torch/moe_llama_tiny.toml" --set train.steps=0 --set checkpoint.save_final=true \
  --set "checkpoint.dir=$DIR/lm"
refused "moe_every export" 2 "model.moe_every = 2 puts dense MLP blocks between the MoE blocks" \
  ckpt export "$DIR/lm/final.h5" --to "$DIR/lm_hf" --format hf
refused "bad dtype" 2 "--dtype 'fp16': expected fp32 or bf16" ckpt export "$DIR/l/final.h5" --to "$DIR/x" --format hf --dtype fp16

[ $fail -eq 0 ] && echo "init_from: all checks passed"
exit $fail
