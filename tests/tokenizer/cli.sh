#!/usr/bin/env bash
# `pentad prep --tokenizer` from the command line, under mpiexec -n 2.
#   cli.sh CASE      (env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR)
# Bad-input cases: a non-zero exit on every rank within 60 s, the message
# (naming the file and line) printed once, no token file left. llama3: a
# 128000-rank file (a synthetic one: the 256 bytes, then made-up tokens)
# infers the llama3 pattern, writes version 2 (uint32) files whose first id is
# <|begin_of_text|> 128000, and reports vocabulary 128256.
set -uo pipefail
case_name=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
NP=2
text=$PENTAD_SOURCE_DIR/tests/tokenizer/multilingual.txt

# ranks FILE N [EXTRA_LINE...]: the 256 single bytes, then tokens "t256".. up
# to N ranks, then the extra lines as they are.
ranks() {
  local out=$1 n=$2
  shift 2
  /usr/bin/python3 - "$out" "$n" "$@" <<'PY'
import base64, sys
out, n, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
toks = [bytes([b]) for b in range(256)] + [b"t%d" % i for i in range(256, n)]
with open(out, "w") as f:
    f.writelines(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate(toks))
    f.writelines(line + "\n" for line in extra)
PY
}

# fails PATTERN [prep args...]
fails() {
  local pattern=$1; shift
  timeout 60 "$MPIEXEC" -n $NP "$PENTAD" prep --out "$tmp/out" "$@" > "$tmp/log" 2>&1
  local rc=$?
  if [ $rc -eq 124 ]; then echo "FAIL: hung (timeout)"; cat "$tmp/log"; exit 1; fi
  if [ $rc -eq 0 ]; then echo "FAIL: exit code 0"; cat "$tmp/log"; exit 1; fi
  local n
  n=$(grep -cE -- "$pattern" "$tmp/log")
  if [ "$n" -ne 1 ]; then
    echo "FAIL: expected the message /$pattern/ once, found $n times; output:"; cat "$tmp/log"; exit 1
  fi
  if grep -qE "Segmentation|core dumped|terminate called|Abort" "$tmp/log"; then
    echo "FAIL: crashed"; cat "$tmp/log"; exit 1
  fi
  if [ -e "$tmp/out/train.bin" ]; then echo "FAIL: train.bin was written"; exit 1; fi
  echo "ok: exit $rc, message: $(grep -E -- "$pattern" "$tmp/log")"
}

r=$tmp/r.tiktoken
case "$case_name" in
not_base64_rank)
  ranks "$r" 300 "dDMwMA=="
  fails "$r:301: expected 'BASE64 RANK', got \"dDMwMA==\"" --tokenizer "$r" --pattern gpt2 "$text" ;;
bad_base64)
  ranks "$r" 300 "dDMw*A== 300"
  fails "$r:301: \"dDMw\*A==\" is not valid base64" --tokenizer "$r" --pattern gpt2 "$text" ;;
ranks_not_contiguous)
  ranks "$r" 300 "dDMwMA== 301"
  fails "$r:301: rank 301 is out of range: .* \(not contiguous\)" --tokenizer "$r" --pattern gpt2 "$text" ;;
duplicate_rank)
  ranks "$r" 300 "dDMwMA== 299"
  fails "$r:301: rank 299 is already on line 300 \(duplicate rank\)" --tokenizer "$r" --pattern gpt2 "$text" ;;
duplicate_token)
  ranks "$r" 300 "dDI5OQ== 300"
  fails "$r:301: token \"t299\" is already on line 300" --tokenizer "$r" --pattern gpt2 "$text" ;;
empty_file)
  : > "$r"
  fails "rank file '$r': is empty" --tokenizer "$r" "$text" ;;
unknown_pattern)
  ranks "$r" 300
  fails "unknown pre-tokenization pattern 'gpt4' \(known: gpt2, cl100k, llama3, qwen2\)" --tokenizer "$r" --pattern gpt4 "$text" ;;
no_pattern_for_count)
  ranks "$r" 300
  fails "'$r' has 300 ranks, which fits no named pattern .*give --pattern" --tokenizer "$r" "$text" ;;
pattern_without_tokenizer)
  fails "--pattern needs --tokenizer FILE" --pattern gpt2 "$text" ;;
llama3)
  ranks "$r" 128000
  timeout 120 "$MPIEXEC" -n $NP "$PENTAD" prep --tokenizer "$r" --out "$tmp/out" --val-fraction 0 "$text" "$text" \
    > "$tmp/log" 2>&1 || { echo "FAIL: prep failed"; cat "$tmp/log"; exit 1; }
  cat "$tmp/log"
  /usr/bin/python3 - "$tmp/out/train.bin" "$tmp/log" "$text" <<'PY'
import os, struct, sys
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report
data = open(sys.argv[1], "rb").read()
magic, version, n = struct.unpack("<3i", data[:12])
ids = struct.unpack(f"<{n}I", data[1024:1024 + 4 * n]) if version == 2 else ()
log = open(sys.argv[2]).read()
text = open(sys.argv[3], "rb").read()
# The synthetic ranks have no token of two bytes, so nothing merges: each id
# is the byte it stands for.
half = n // 2
checks = [
    (f"version {version} == 2 (uint32)", version == 2),
    (f"first id {ids[0] if ids else None} == <|begin_of_text|> 128000", bool(ids) and ids[0] == 128000),
    (f"the second document also starts with 128000 (at {half})", len(ids) == n and n % 2 == 0 and ids[half] == 128000),
    ("both documents have the same ids", ids[:half] == ids[half:]),
    ("no id >= 128000 but the two separators", sum(1 for i in ids if i >= 128000) == 2),
    ("prep reports 'tokenizer BPE llama3', vocabulary 128256, version 2",
     "tokenizer BPE llama3" in log and "vocabulary 128256, token files version 2 (uint32)" in log),
    (f"each document's ids are its {len(text)} bytes", list(ids[1:half]) == list(text) and len(ids) == 2 * half),
]
sys.exit(report(checks))
PY
  ;;
*) echo "unknown case $case_name"; exit 2 ;;
esac
