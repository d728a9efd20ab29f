#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/CMakeLists.txt: clang,
# -fsanitize=fuzzer,address) in build-fuzz/ and runs each from a seed corpus
# for a bounded time (FUZZ_SECONDS each, default 20: about two minutes in all).
# A crash, an ASan report or a leak fails the script; the reproducer is left
# in build-fuzz/crashes/.
#   tests/fuzz/run.sh            (env: FUZZ_SECONDS, FUZZ_JOBS)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out=$root/build-fuzz
seconds=${FUZZ_SECONDS:-20}
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (scripts/deps.sh installs clang)"; exit 1; }
CC=clang CXX=clang++ cmake -S tests/fuzz -B "$out" -DCMAKE_BUILD_TYPE=Release -DPENTAD_FUZZ=ON > /dev/null
cmake --build "$out" -j "${FUZZ_JOBS:-$(nproc)}" > /dev/null

# Seeds: every deck of the repository; small valid token files (with and without a loss mask); a checkpoint
# header input (fuzz_checkpoint.cpp's structured layout: every attribute); a
# small safetensors file; a small multiple-choice file (tests/lib/choice_file.py).
seeds=$out/seeds
rm -rf "$seeds" "$out/crashes"
mkdir -p "$seeds/config" "$seeds/token_file" "$seeds/checkpoint" "$seeds/safetensors" "$seeds/choice_file" \
  "$seeds/tokenizer_json" "$out/crashes"
python3 tests/lib/choice_file.py write "$seeds/choice_file/valid.bin" 3 1
find input tests -name '*.toml' -size -64k -exec cp {} "$seeds/config/" \; 2>/dev/null || true
python3 - "$seeds" <<'PY'
import struct, sys
seeds = sys.argv[1]
tokens = [t % 256 for t in range(64)]
with open(f"{seeds}/token_file/valid.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
    f.write(struct.pack(f"<{len(tokens)}H", *tokens))
# The same with a loss mask (version 3: one bit per token after the tokens).
with open(f"{seeds}/token_file/masked.bin", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 3, len(tokens), *([0] * 253)))
    f.write(struct.pack(f"<{len(tokens)}H", *tokens) + bytes([0x5A] * (len(tokens) // 8)))
# present = 0x7f (every attribute), int64 types, version 1, the right format.
with open(f"{seeds}/checkpoint/all_attributes", "wb") as f:
    f.write(bytes([0x7F, 0x00, 0x00]) + (3).to_bytes(8, "big") + (1337).to_bytes(8, "big") + bytes([0x00])
            + b"[model]\nn_layers = 1\n\0dp=1 zero=0\0gpt2\0")
# Two tensors (F32 and BF16) with metadata, as `ckpt export --format hf` writes them.
import json
header = json.dumps({"__metadata__": {"format": "pt"},
                     "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                     "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}}).encode()
with open(f"{seeds}/safetensors/two.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header + struct.pack("<4f", 1, -2, 0.5, 3) + bytes([0x80, 0x3F] * 3))
# Two tiny tokenizer.json files: a byte-level BPE (GPT-2's byte characters,
# its ByteLevel pre-tokenizer, two merges as strings) and a SentencePiece BPE
# with byte fallback (Llama 2's form, its merges as pairs).
def byte_chars():
    keep = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    extra = iter(range(0x100, 0x200))
    return [chr(b) if b in keep else chr(next(extra)) for b in range(256)]
chars = byte_chars()
vocab = {c: i for i, c in enumerate(chars)}
for t in [chars[32] + "t", "he"]:
    vocab[t] = len(vocab)
level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
gpt2 = {"version": "1.0", "added_tokens": [{"id": 258, "content": "<|endoftext|>", "special": True}],
        "normalizer": None, "pre_tokenizer": level, "decoder": level,
        "model": {"type": "BPE", "vocab": vocab, "merges": [chars[32] + " t", "h e"]}}
with open(f"{seeds}/tokenizer_json/byte_level.json", "w") as f:
    json.dump(gpt2, f)
sp = "\u2581"
pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [sp, "a", "b", sp + "a", "ab"]
llama = {"added_tokens": [{"id": i, "content": t, "special": True} for i, t in enumerate(pieces[:3])],
         "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": sp},
                                                            {"type": "Replace", "pattern": {"String": " "}, "content": sp}]},
         "pre_tokenizer": None,
         "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": sp}, "content": " "},
                                                      {"type": "ByteFallback"}, {"type": "Fuse"},
                                                      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
         "model": {"type": "BPE", "byte_fallback": True, "vocab": {p: i for i, p in enumerate(pieces)},
                   "merges": [[sp, "a"], ["a", "b"]]}}
with open(f"{seeds}/tokenizer_json/sentencepiece.json", "w") as f:
    json.dump(llama, f)
PY

# Leaks inside HDF5 on a damaged file are the library's (lsan.supp).
export LSAN_OPTIONS="suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0"
status=0
for target in config token_file checkpoint safetensors choice_file tokenizer_json; do
  corpus=$out/corpus/$target
  mkdir -p "$corpus"
  echo "fuzz: $target for ${seconds} s"
  if ! "$out/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$out/crashes/${target}-" "$corpus" "$seeds/$target" \
       > "$out/$target.log" 2>&1; then
    echo "fuzz: $target FAILED (reproducer in $out/crashes/):"
    tail -40 "$out/$target.log"
    status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$out/$target.log" | tail -2
  fi
done
exit $status
