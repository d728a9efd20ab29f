#!/usr/bin/env bash
# pentad's BPE against js-tiktoken 1.0.21 (an independent implementation of
# tiktoken), token for token:  oracle.sh gpt2|cl100k_base
#  1. js-tiktoken's mergeable ranks are written as a .tiktoken file;
#  2. `pentad prep --tokenizer` (2 OpenMP threads) encodes docs/*.md,
#     README.md, tests/tokenizer/multilingual.txt, a > 2 MiB concatenation of
#     them (so prep reads a document in pieces), a copy with invalid UTF-8
#     spliced in, and that copy after tok_tool's utf8_replace;
#  3. valid UTF-8 documents: the ids equal js-tiktoken's encode() of the text.
#     The invalid copy: each valid run's ids equal js-tiktoken's ids of the
#     run, each invalid run's ids spell its bytes; the replaced copy equals
#     TextDecoder's U+FFFD rendering and then js-tiktoken's ids of it;
#  4. pentad's decode of each document's ids gives back its bytes (cmp);
#  5. the valid UTF-8 documents as one JSON Lines file (node's JSON.stringify,
#     a blank line between two): `pentad prep` of it gives js-tiktoken's ids,
#     and so does the file compressed by GNU gzip (two gzip members) and by
#     the zstd command (two frames).
set -euo pipefail
enc=$1
here=$(cd "$(dirname "$0")" && pwd)
js=$here/js_tiktoken.cjs
command -v node > /dev/null || { echo "FAIL: node is not installed: run scripts/deps.sh"; exit 1; }
command -v zstd > /dev/null || { echo "FAIL: zstd is not installed: run scripts/deps.sh"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
node "$js" ranks "$enc" "$tmp/ranks.tiktoken"
case $enc in gpt2) sep=50256 ;; cl100k_base) sep=100257 ;; esac
inputs=("$PENTAD_SOURCE_DIR"/docs/*.md "$PENTAD_SOURCE_DIR/README.md" "$here/multilingual.txt")
# A document larger than prep's 1 MiB chunks.
while [ "$(cat "${inputs[@]}" "$tmp"/big.txt 2>/dev/null | wc -c)" -lt $((3 * 1024 * 1024)) ]; do
  cat "${inputs[@]}" >> "$tmp/big.txt"
done
# Invalid UTF-8: lone continuation bytes, truncated 2/3/4-byte sequences,
# overlong forms, a surrogate, code points above U+10FFFF, C0/C1/F5..FF, a
# truncated sequence at the very end, in and between words.
node -e '
const fs = require("fs");
const text = fs.readFileSync(process.argv[1]);
const bad = [[0x80], [0xbf, 0x80], [0xc3], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc0, 0xaf], [0xe0, 0x80, 0xaf],
             [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf5], [0xff, 0xfe], [0xc1, 0xbf], [0xe2, 0x28, 0xa1]];
const parts = [];
let at = 0;
bad.forEach((b, i) => {
  const next = Math.floor(text.length * (i + 1) / (bad.length + 1));
  parts.push(text.subarray(at, next), Buffer.from(b));
  at = next;
});
parts.push(text.subarray(at), Buffer.from("word"), Buffer.from([0xe4, 0xb8]));
fs.writeFileSync(process.argv[2], Buffer.concat(parts));' "$here/multilingual.txt" "$tmp/invalid.txt"
"$TOK_TOOL" replace "$tmp/invalid.txt" "$tmp/replaced.txt"
inputs+=("$tmp/big.txt" "$tmp/invalid.txt" "$tmp/replaced.txt")
OMP_NUM_THREADS=2 "$PENTAD" prep --tokenizer "$tmp/ranks.tiktoken" --val-fraction 0 --out "$tmp/prep" "${inputs[@]}" \
  | tee "$tmp/prep.log"
grep -q "tokenizer BPE ${enc%_base}" "$tmp/prep.log" || { echo "FAIL: prep did not report the ${enc%_base} tokenizer"; exit 1; }
status=0
mkdir -p "$tmp/ids"
node "$js" compare "$enc" "$tmp/ranks.tiktoken" "$tmp/prep/train.bin" "$sep" "$tmp/ids" "${inputs[@]}" || status=1
# The replaced copy is exactly TextDecoder's rendering of the invalid one.
node -e '
const fs = require("fs");
const want = Buffer.from(new TextDecoder("utf-8").decode(fs.readFileSync(process.argv[1])));
const ok = want.equals(fs.readFileSync(process.argv[2]));
console.log((ok ? "ok   " : "FAIL ") + "utf8_replace(invalid.txt) == TextDecoder(\"utf-8\") output, " + want.length + " bytes");
process.exit(ok ? 0 : 1);' "$tmp/invalid.txt" "$tmp/replaced.txt" || status=1
n_ok=0
for i in "${!inputs[@]}"; do
  [ -f "$tmp/ids/doc$i.ids" ] || { echo "FAIL: no ids for ${inputs[$i]}"; status=1; continue; }
  "$TOK_TOOL" decode "$tmp/ranks.tiktoken" "$tmp/ids/doc$i.ids" "$tmp/decoded"
  if cmp -s "$tmp/decoded" "${inputs[$i]}"; then
    n_ok=$((n_ok + 1))
  else
    echo "FAIL decode(encode(x)) != x for ${inputs[$i]}: $(cmp "$tmp/decoded" "${inputs[$i]}" 2>&1 | head -1)"
    status=1
  fi
done
echo "$( [ $n_ok -eq ${#inputs[@]} ] && echo "ok  " || echo "FAIL") decode(encode(x)) == x byte for byte for $n_ok of ${#inputs[@]} documents"

valid=()
for f in "${inputs[@]}"; do [ "$f" = "$tmp/invalid.txt" ] || valid+=("$f"); done
node -e '
const fs = require("fs");
const lines = process.argv.slice(1).map((f) => JSON.stringify({ source: f, text: fs.readFileSync(f, "utf8") }));
lines.splice(1, 0, "");
fs.writeFileSync("'"$tmp"'/docs.jsonl", lines.join("\n") + "\n");' "${valid[@]}"
OMP_NUM_THREADS=2 "$PENTAD" prep --tokenizer "$tmp/ranks.tiktoken" --val-fraction 0 --out "$tmp/jsonl" "$tmp/docs.jsonl" \
  > "$tmp/jsonl.log" || { echo "FAIL: prep of docs.jsonl"; cat "$tmp/jsonl.log"; exit 1; }
grep -q "prep: ${#valid[@]} documents" "$tmp/jsonl.log" || { echo "FAIL: prep did not report ${#valid[@]} documents"; cat "$tmp/jsonl.log"; status=1; }
node "$js" compare "$enc" "$tmp/ranks.tiktoken" "$tmp/jsonl/train.bin" "$sep" "$tmp/ids" "${valid[@]}" || status=1
# The same file compressed in two parts (its first and second half) by GNU
# gzip (two members) and by the zstd command (two frames): the same token file.
half=$(( $(stat -c %s "$tmp/docs.jsonl") / 2 ))
same_when_compressed() {  # EXT WHAT COMMAND...
  local ext=$1 what=$2; shift 2
  { head -c "$half" "$tmp/docs.jsonl" | "$@"; tail -c +"$((half + 1))" "$tmp/docs.jsonl" | "$@"; } > "$tmp/docs.jsonl.$ext"
  OMP_NUM_THREADS=2 "$PENTAD" prep --tokenizer "$tmp/ranks.tiktoken" --val-fraction 0 --out "$tmp/$ext" \
    "$tmp/docs.jsonl.$ext" > "$tmp/$ext.log" || { echo "FAIL: prep of docs.jsonl.$ext"; cat "$tmp/$ext.log"; exit 1; }
  if cmp -s "$tmp/$ext/train.bin" "$tmp/jsonl/train.bin"; then
    echo "ok   docs.jsonl.$ext ($what) gives the token file of docs.jsonl"
  else
    echo "FAIL docs.jsonl.$ext ($what) does not give the token file of docs.jsonl"; status=1
  fi
}
same_when_compressed gz "GNU gzip, 2 members" gzip -c
same_when_compressed zst "zstd, 2 frames" zstd -q -c
exit $status
