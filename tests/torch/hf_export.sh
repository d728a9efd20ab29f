#!/usr/bin/env bash
# Hugging Face export and init_from (docs/huggingface.md). Trains DECK on one
# rank, exports it with `ckpt export --format hf`, then:
#  - bitwise round trips: init_from the export under each LAYOUT (0 steps,
#    final.h5) must give exactly the exported weights (same_weights.py);
#  - fine-tuning: init_from under the last LAYOUT, one step with a debug
#    dump; the independent Hugging Face-structured PyTorch model of
#    hf_loader.py, reading the safetensors by Hugging Face names, must give
#    the dump's step-1 logits and loss.
#  - sampling the export itself (`pentad sample HF_DIR`: config.json and the
#    safetensors read directly, no deck; fp32 export): at temperature 1, for
#    three prompts and three seeds, exactly the ids sampled from the
#    checkpoint; for a Llama also with config.json's max_position_embeddings
#    raised to Llama 3.1's 131072 (the cache then sized by the prompt and
#    --tokens); and for a Llama, the same directory as MistralForCausalLM
#    (its sliding window the deck's seq_len): init_from round trip, the same
#    ids, the positions cut to the window, a shorter window refused; and
#    rewritten as Phi3ForCausalLM (to_phi3.py: fused qkv_proj, gate_up_proj):
#    the same round trip and ids, the loader's Phi-3 against a fine-tuning
#    step; with LongRoPE, and with it on half of each head (a partial
#    rotary, Phi-4-mini's kind), the round trip, the loader's Phi-3 against
#    a fine-tuning step and the --class export (HF_PHI3_ROPE=1); and exported as
#    Phi3ForCausalLM by pentad (--class): to_phi3.py's tensors bitwise.
# Usage: hf_export.sh DECK LAYOUT...   LAYOUT = "N[:key=value,...]", e.g.
#   "1" or "4:parallel.tp=2,parallel.pp=2". With HF_DTYPE=bf16 the export is
#   bf16: no bitwise round trip to the fp32 weights then, only the loader
#   check (pentad and the loader both start from the same bf16 values).
# Env: PENTAD, PENTAD_SOURCE_DIR, PENTAD_PYTHON (torch + h5py), MPIEXEC;
# HF_PHI3_ROPE=1 adds the LongRoPE and partial rotary Phi-3 checks;
# HF_DECK_SETS="key=value ..." sets deck keys in every training (a variant
# of DECK, e.g. model.renormalize_top_k=false).
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 DECK LAYOUT..." >&2
  exit 2
fi
deck=$1
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${PENTAD:?set PENTAD to the pentad binary}"
: "${PENTAD_SOURCE_DIR:?set PENTAD_SOURCE_DIR to the source tree}"
: "${PENTAD_PYTHON:?set PENTAD_PYTHON to a python with torch and h5py}"
: "${MPIEXEC:?set MPIEXEC to the MPI launcher}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pentad_hf.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# train LAYOUT ARGS...: pentad train DECK under LAYOUT, quiet unless it fails.
train() {
  local layout=$1 n sets=() x
  shift
  for x in ${HF_DECK_SETS:-}; do sets+=(--set "$x"); done
  n=${layout%%:*}
  if [[ $layout == *:* ]]; then
    IFS=, read -ra kv <<< "${layout#*:}"
    for x in "${kv[@]}"; do sets+=(--set "$x"); done
  fi
  if ! "$MPIEXEC" -n "$n" "$PENTAD" train "$deck" --set "data.train=$tmp/data/train.bin" "${sets[@]}" "$@" \
       > "$tmp/log" 2>&1; then
    cat "$tmp/log"
    echo "FAIL: pentad train under '$layout' $*"
    exit 1
  fi
  grep -h "init_from:" "$tmp/log" || true
}

"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
train 1 --set train.steps=20 --set checkpoint.save_final=true --set "checkpoint.dir=$tmp/a"
dtype=${HF_DTYPE:-fp32}
"$PENTAD" ckpt export "$tmp/a/final.h5" --to "$tmp/hf" --format hf --dtype "$dtype"
i=0
for layout in "$@"; do
  [[ $dtype == fp32 ]] || break
  i=$((i + 1))
  train "$layout" --set train.steps=0 --set checkpoint.save_final=true --set "checkpoint.dir=$tmp/b$i" \
    --set "checkpoint.init_from=$tmp/hf"
  echo "round trip pentad -> hf -> pentad under '$layout':"
  "$PENTAD_PYTHON" "$here/same_weights.py" "$tmp/a/final.h5" "$tmp/b$i/final.h5"
done
last=${*: -1}
train "$last" --set train.steps=1 --set "log.dump=$tmp/dump.h5" --set "checkpoint.init_from=$tmp/hf"
echo "fine-tuning under '$last' from the export, against the Hugging Face-structured model:"
"$PENTAD_PYTHON" "$here/hf_loader.py" "$tmp/hf" "$tmp/dump.h5"

# Sampling from the directory (fp32 export: the checkpoint's weights bit for
# bit, so the same sampled ids). The byte prompts and the tiny models' seq_len
# (16) leave room for 8 new tokens after a 6-byte prompt. Greedy decoding of
# trained models against hf_loader.py is in run_greedy.sh.
if [[ $dtype != fp32 ]]; then
  echo "sampling: skipped for the $dtype export (its weights are not the checkpoint's)"
  exit 0
fi
echo "sampling the export directly (pentad sample $tmp/hf):"
sample() { "$PENTAD" sample "$@" --tokens 8 --ids 2> "$tmp/sample.err" || { cat "$tmp/sample.err"; echo "FAIL: pentad sample $*"; exit 1; }; }
# same_ids DIR [REF]: DIR samples REF's ids (default: the checkpoint's) for
# every prompt and seed.
same_ids() {
  local prompt seed a b n=0 ref=${2:-$tmp/a/final.h5}
  for prompt in "The pi" "Each r" "A chec"; do
    for seed in 1 2 3; do
      a=$(sample "$ref" --prompt "$prompt" --seed "$seed")
      b=$(sample "$1" --prompt "$prompt" --seed "$seed")
      [[ "$a" == "$b" ]] || { echo "FAIL: prompt '$prompt', seed $seed: $ref samples [$a], $1 [$b]"; exit 1; }
      n=$((n + 1))
    done
  done
  echo "ok   $1: the ids of $ref for $n prompts and seeds at temperature 1 (e.g. [$b])"
}
same_ids "$tmp/hf"
grep -h "^sample: $tmp/hf (Hugging Face)" "$tmp/sample.err"
# A mixture of experts: the banner names the experts config.json gives.
experts=$("$PENTAD_PYTHON" -c 'import json, sys
c = json.load(open(sys.argv[1])); e = c.get("num_local_experts") or c.get("num_experts")
print("E=%d top-%d" % (e, c["num_experts_per_tok"]) if e else "")' "$tmp/hf/config.json")
if [[ -n $experts ]]; then
  grep -qF " $experts" "$tmp/sample.err" || { cat "$tmp/sample.err"; echo "FAIL: the banner does not name $experts"; exit 1; }
  echo "ok   the banner names the experts: $experts"
fi
# Qwen2-MoE's shared expert: the banner names its width and its gate.
shared=$("$PENTAD_PYTHON" -c 'import json, sys
c = json.load(open(sys.argv[1])); s = c.get("shared_expert_intermediate_size")
print("shared=%d gated" % s if s else "")' "$tmp/hf/config.json")
if [[ -n $shared ]]; then
  grep -qF " $shared" "$tmp/sample.err" || { cat "$tmp/sample.err"; echo "FAIL: the banner does not name $shared"; exit 1; }
  echo "ok   the banner names the shared expert: $shared"
fi
# A scaled RoPE: the banner names the kind, factor and original context config.json gives.
rope=$("$PENTAD_PYTHON" -c 'import json, sys
r = json.load(open(sys.argv[1])).get("rope_scaling")
o = " of %d" % r["original_max_position_embeddings"] if r and r["rope_type"] != "linear" else ""
print("rope=%s x%g%s" % (r["rope_type"], r["factor"], o) if r else "")' \
  "$tmp/hf/config.json")
if [[ -n $rope ]]; then
  grep -qF " $rope V=" "$tmp/sample.err" || { cat "$tmp/sample.err"; echo "FAIL: the banner does not name $rope"; exit 1; }
  echo "ok   the banner names the RoPE scaling: $rope"
fi
if grep -q '"max_position_embeddings"' "$tmp/hf/config.json"; then
  mkdir "$tmp/long"
  ln -s "$tmp/hf"/*.safetensors* "$tmp/long/"
  "$PENTAD_PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); c["max_position_embeddings"] = 131072; json.dump(c, open(sys.argv[2], "w"))' \
    "$tmp/hf/config.json" "$tmp/long/config.json"
  same_ids "$tmp/long"
  grep -qF "seq_len=14 (of 131072: the prompt and --tokens)" "$tmp/sample.err" ||
    { cat "$tmp/sample.err"; echo "FAIL: the cache is not sized by the prompt and --tokens"; exit 1; }
  echo "ok   max_position_embeddings 131072: $(grep -o 'seq_len=[^,]*' "$tmp/sample.err")"
fi
# The same Llama (without RoPE scaling) as Mistral's config.json (MistralForCausalLM: Llama's
# modules; its sliding window here the deck's seq_len, so the whole context):
# init_from it gives the exported weights bit for bit, and sampling it gives
# the checkpoint's ids; a window shorter than the deck's seq_len is refused.
if grep -q '"LlamaForCausalLM"' "$tmp/hf/config.json" && ! grep -q '"rope_type"' "$tmp/hf/config.json"; then
  seq=$("$PENTAD_PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["max_position_embeddings"])' "$tmp/hf/config.json")
  for w in "$seq" 8; do
    mkdir "$tmp/mistral$w"
    ln -s "$tmp/hf"/*.safetensors* "$tmp/mistral$w/"
    "$PENTAD_PYTHON" -c 'import json, sys; c = json.load(open(sys.argv[1])); c.update(architectures=["MistralForCausalLM"], model_type="mistral", max_position_embeddings=131072, sliding_window=int(sys.argv[3])); json.dump(c, open(sys.argv[2], "w"))' \
      "$tmp/hf/config.json" "$tmp/mistral$w/config.json" "$w"
  done
  train 1 --set train.steps=0 --set checkpoint.save_final=true --set "checkpoint.dir=$tmp/m" \
    --set "checkpoint.init_from=$tmp/mistral$seq"
  echo "round trip pentad -> hf (as MistralForCausalLM) -> pentad:"
  "$PENTAD_PYTHON" "$here/same_weights.py" "$tmp/a/final.h5" "$tmp/m/final.h5"
  same_ids "$tmp/mistral$seq"
  grep -qF "seq_len=14 (of $seq: the prompt and --tokens)" "$tmp/sample.err" ||
    { cat "$tmp/sample.err"; echo "FAIL: Mistral's positions are not cut to its window ($seq)"; exit 1; }
  if "$MPIEXEC" -n 1 "$PENTAD" train "$deck" --set "data.train=$tmp/data/train.bin" --set train.steps=0 \
       --set "checkpoint.init_from=$tmp/mistral8" > "$tmp/log" 2>&1; then
    echo "FAIL: init_from a Mistral window of 8 < seq_len $seq was accepted"; exit 1
  fi
  grep -qF "\"sliding_window\" = 8 is shorter than the deck's model.seq_len = $seq" "$tmp/log" ||
    { cat "$tmp/log"; echo "FAIL: the short window is not named"; exit 1; }
  echo "ok   sliding_window 8 < model.seq_len $seq refused: $(grep -o '"sliding_window" = 8[^:]*' "$tmp/log" | head -1)"
fi
# The same Llama as Phi3ForCausalLM (to_phi3.py: q, k and v fused in
# self_attn.qkv_proj, gate and up in mlp.gate_up_proj; its sliding window the
# deck's seq_len): init_from gives the exported weights bit for bit; a
# fine-tuning step under the last layout gives the logits and loss of
# hf_loader.py's Phi-3, which cuts the fused tensors apart itself; sampling
# gives the checkpoint's ids with the positions cut to the window. Refused,
# naming the key: a window shorter than the deck's seq_len, a scaled RoPE
# other than LongRoPE, LongRoPE lists of the wrong length and a partial rotary
# factor that turns no whole pair. Then LongRoPE and the partial rotary
# (below).
if grep -q '"LlamaForCausalLM"' "$tmp/hf/config.json" && ! grep -q '"rope_type"' "$tmp/hf/config.json"; then
  seq=$("$PENTAD_PYTHON" -c 'import json, sys; print(json.load(open(sys.argv[1]))["max_position_embeddings"])' "$tmp/hf/config.json")
  phi3() { "$PENTAD_PYTHON" "$here/to_phi3.py" "$tmp/hf" "$@" max_position_embeddings=131072 > /dev/null; }
  phi3 "$tmp/phi3" "sliding_window=$seq"
  train 1 --set train.steps=0 --set checkpoint.save_final=true --set "checkpoint.dir=$tmp/p" \
    --set "checkpoint.init_from=$tmp/phi3" | grep -F "Phi3ForCausalLM" ||
    { cat "$tmp/log"; echo "FAIL: init_from does not name Phi3ForCausalLM"; exit 1; }
  echo "round trip pentad -> hf (as Phi3ForCausalLM) -> pentad:"
  "$PENTAD_PYTHON" "$here/same_weights.py" "$tmp/a/final.h5" "$tmp/p/final.h5"
  train "$last" --set train.steps=1 --set "log.dump=$tmp/pdump.h5" --set "checkpoint.init_from=$tmp/phi3"
  echo "fine-tuning under '$last' from the Phi3ForCausalLM directory, against the Hugging Face-structured Phi-3:"
  "$PENTAD_PYTHON" "$here/hf_loader.py" "$tmp/phi3" "$tmp/pdump.h5"
  same_ids "$tmp/phi3"
  grep -qF "seq_len=14 (of $seq: the prompt and --tokens)" "$tmp/sample.err" ||
    { cat "$tmp/sample.err"; echo "FAIL: Phi-3's positions are not cut to its window ($seq)"; exit 1; }
  grep -h "^sample: $tmp/phi3 (Hugging Face)" "$tmp/sample.err"
  # pentad's own Phi-3 export (--class Phi3ForCausalLM): every tensor bitwise
  # to_phi3.py's, and its config.json sizes the loader's Phi-3 to the same logits.
  "$PENTAD" ckpt export "$tmp/a/final.h5" --to "$tmp/phi3x" --format hf --class Phi3ForCausalLM > /dev/null
  "$PENTAD_PYTHON" -c 'import json, sys
sys.path.insert(0, sys.argv[3])
from hf_loader import read_model
a, b = read_model(sys.argv[1]), read_model(sys.argv[2])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
bad = [n for n in a if not (a[n].shape == b[n].shape and bool((a[n] == b[n]).all()))]
assert not bad, bad
c = json.load(open(sys.argv[2] + "/config.json"))
assert c["architectures"] == ["Phi3ForCausalLM"] and c["model_type"] == "phi3", c
print("ok   --class Phi3ForCausalLM: %d tensors, each bitwise to_phi3.py'"'"'s" % len(a))' \
    "$tmp/phi3" "$tmp/phi3x" "$here"
  "$PENTAD_PYTHON" "$here/hf_loader.py" "$tmp/phi3x" "$tmp/pdump.h5"
  train 1 --set train.steps=0 --set checkpoint.save_final=true --set "checkpoint.dir=$tmp/px" \
    --set "checkpoint.init_from=$tmp/phi3x" > /dev/null
  echo "round trip pentad -> hf (--class Phi3ForCausalLM) -> pentad:"
  "$PENTAD_PYTHON" "$here/same_weights.py" "$tmp/a/final.h5" "$tmp/px/final.h5"
  phi3 "$tmp/phi3w8" sliding_window=8
  if "$MPIEXEC" -n 1 "$PENTAD" train "$deck" --set "data.train=$tmp/data/train.bin" --set train.steps=0 \
       --set "checkpoint.init_from=$tmp/phi3w8" > "$tmp/log" 2>&1; then
    echo "FAIL: init_from a Phi-3 window of 8 < seq_len $seq was accepted"; exit 1
  fi
  grep -qF "\"sliding_window\" = 8 is shorter than the deck's model.seq_len = $seq: pentad's attention sees the whole causal context, Phi3ForCausalLM's" "$tmp/log" ||
    { cat "$tmp/log"; echo "FAIL: the short Phi-3 window is not named"; exit 1; }
  echo "ok   Phi-3 sliding_window 8 < model.seq_len $seq refused"
  # refused KEY=JSON MESSAGE: sampling a Phi-3 directory with that key fails naming it.
  refused() {
    rm -rf "$tmp/phi3bad"
    phi3 "$tmp/phi3bad" "$1"
    if "$PENTAD" sample "$tmp/phi3bad" --prompt "The pi" --tokens 2 > /dev/null 2> "$tmp/sample.err"; then
      echo "FAIL: a Phi-3 with $1 was sampled"; exit 1
    fi
    grep -qF "$2" "$tmp/sample.err" || { cat "$tmp/sample.err"; echo "FAIL: $1: no message naming [$2]"; exit 1; }
    echo "ok   Phi-3 $1 refused: $(grep -oF "$2" "$tmp/sample.err")"
  }
  refused 'rope_scaling={"type": "linear", "factor": 4}' "Phi3ForCausalLM's scaled RoPE is LongRoPE"
  refused 'rope_scaling={"type": "longrope", "short_factor": [1, 1], "long_factor": [2, 2]}' \
    'model.rope_short_factor has 2 numbers but rope_scaling = "longrope" needs one per pair'
  refused 'partial_rotary_factor=0.01' '"partial_rotary_factor" = 0.01 turns 0 of a head'"'"'s'

fi
# (With HF_PHI3_ROPE=1: torch_hf_headdim, whose heads are 16 wide.)
if [[ ${HF_PHI3_ROPE:-0} == 1 ]] && grep -q '"LlamaForCausalLM"' "$tmp/hf/config.json" &&
   ! grep -q '"rope_type"' "$tmp/hf/config.json"; then
  # Phi-3's LongRoPE: per-pair factors, the short list for a forward call
  # whose context is at most original_max_position_embeddings (8 here, under
  # seq_len), the long list beyond; every rotated pair times
  # sqrt(1 + ln 8 / ln 8) (max_position_embeddings 64 = 8 x 8). Then
  # Phi-4-mini's kind: the same on the first half of each head only
  # (partial_rotary_factor 0.5, the lists half as long). Each: a bitwise
  # round trip; fine-tuning (context seq_len: the long list) against the
  # loader's Phi-3; pentad's --class export gives back the directory, and
  # without --class it is refused. The old type "su" samples as
  # "longrope". (Decoding across the two lists against the oracles:
  # torch_greedy_longrope.)
  read -r D lr short long lrp shortp longp < <("$PENTAD_PYTHON" -c 'import json, sys
c = json.load(open(sys.argv[1])); D = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
j = lambda x: json.dumps(x, separators=(",", ":"))
out = [str(D)]
for n in (D // 2, D // 4):
    short = [round(1 + 0.5 * i / n, 4) for i in range(n)]; long = [round(1.5 ** (8 * i / n), 4) for i in range(n)]
    out += [j({"type": "longrope", "short_factor": short, "long_factor": long}), j(short), j(long)]
print(*out)' "$tmp/hf/config.json")
  for kind in longrope su; do
    "$PENTAD_PYTHON" "$here/to_phi3.py" "$tmp/hf" "$tmp/phi3$kind" "rope_scaling=${lr/longrope/$kind}" \
      original_max_position_embeddings=8 max_position_embeddings=64 > /dev/null
  done
  "$PENTAD_PYTHON" "$here/to_phi3.py" "$tmp/hf" "$tmp/phi3partial" "rope_scaling=$lrp" partial_rotary_factor=0.5 \
    original_max_position_embeddings=8 max_position_embeddings=64 > /dev/null
  rope_keys=(--set model.rope_scaling=longrope --set model.rope_scaling_factor=8 --set model.rope_original_context=8)
  for variant in longrope partial; do
    if [[ $variant == longrope ]]; then
      keys=("${rope_keys[@]}" --set "model.rope_short_factor=$short" --set "model.rope_long_factor=$long")
      what="LongRoPE"
    else
      keys=("${rope_keys[@]}" --set "model.rope_short_factor=$shortp" --set "model.rope_long_factor=$longp"
            --set "model.rotary_dim=$((D / 2))")
      what="LongRoPE on $((D / 2)) of $D channels"
    fi
    train 1 --set train.steps=0 --set checkpoint.save_final=true --set "checkpoint.dir=$tmp/p$variant" \
      --set "checkpoint.init_from=$tmp/phi3$variant" "${keys[@]}"
    if [[ $variant == longrope ]]; then  # (the partial rotary reads q and k's rows otherwise: round trip below)
      echo "round trip pentad -> hf (Phi-3, $what) -> pentad:"
      "$PENTAD_PYTHON" "$here/same_weights.py" "$tmp/a/final.h5" "$tmp/p$variant/final.h5"
    fi
    train "$last" --set train.steps=1 --set "log.dump=$tmp/${variant}dump.h5" \
      --set "checkpoint.init_from=$tmp/phi3$variant" "${keys[@]}"
    echo "fine-tuning under '$last' from the Phi-3 with $what (context $seq > 8: the long factors):"
    "$PENTAD_PYTHON" "$here/hf_loader.py" "$tmp/phi3$variant" "$tmp/${variant}dump.h5"
    if "$PENTAD" ckpt export "$tmp/p$variant/final.h5" --to "$tmp/${variant}bad" --format hf > /dev/null 2> "$tmp/err"; then
      echo "FAIL: the Phi-3 with $what was exported as LlamaForCausalLM"; exit 1
    fi
    grep -qF 'model.rope_scaling = "longrope" is written as Phi3ForCausalLM only' "$tmp/err" || { cat "$tmp/err"; echo "FAIL: the LlamaForCausalLM export of $what is not refused by name"; exit 1; }
    "$PENTAD" ckpt export "$tmp/p$variant/final.h5" --to "$tmp/${variant}x" --format hf --class Phi3ForCausalLM > /dev/null
    "$PENTAD_PYTHON" -c 'import json, sys
sys.path.insert(0, sys.argv[3])
from hf_loader import read_model
a, b = read_model(sys.argv[1]), read_model(sys.argv[2])
assert sorted(a) == sorted(b) and all(bool((a[n] == b[n]).all()) for n in a)
ca, cb = (json.load(open(d + "/config.json")) for d in sys.argv[1:3])
for k in ("rope_scaling", "original_max_position_embeddings", "max_position_embeddings", "partial_rotary_factor"):
    assert ca.get(k) == cb.get(k), (k, ca.get(k), cb.get(k))
print("ok   --class Phi3ForCausalLM of the Phi-3 with %s: its tensors, rope_scaling, partial_rotary_factor and "
      "context keys as given; without --class refused" % sys.argv[4])' \
      "$tmp/phi3$variant" "$tmp/${variant}x" "$here" "$what"
    train 1 --set train.steps=0 --set checkpoint.save_final=true --set "checkpoint.dir=$tmp/q$variant" \
      --set "checkpoint.init_from=$tmp/${variant}x" "${keys[@]}"
    echo "round trip pentad (Phi-3 with $what) -> hf (--class Phi3ForCausalLM) -> pentad:"
    "$PENTAD_PYTHON" "$here/same_weights.py" "$tmp/p$variant/final.h5" "$tmp/q$variant/final.h5"
  done
  same_ids "$tmp/phi3su" "$tmp/phi3longrope"
  grep -qF " rope=longrope x8 of 8 V=" "$tmp/sample.err" || { cat "$tmp/sample.err"; echo "FAIL: the banner does not name LongRoPE"; exit 1; }
  sample "$tmp/phi3partial" --prompt "The pi" > /dev/null
  grep -qF " rotary=$((D / 2))/$D rope=longrope" "$tmp/sample.err" || { cat "$tmp/sample.err"; echo "FAIL: the banner does not name the partial rotary"; exit 1; }
  echo "ok   the banner names the partial rotary: $(grep -oF " rotary=$((D / 2))/$D" "$tmp/sample.err")"
fi
