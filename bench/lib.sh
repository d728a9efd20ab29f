# The preamble of the bench/*.sh scripts, sourced once `here` names bench/:
#   here=$(cd "$(dirname "$0")" && pwd)
#   source "$here/lib.sh"
# Strict mode, the repository root and the pentad binary (PENTAD overrides),
# and the helpers they share: a scratch directory removed on exit, token
# data, and a run whose log is printed only when it fails.
set -euo pipefail
root=$here/..
pentad=${PENTAD:-$root/build/pentad}

# tmp: a scratch directory, removed when the script exits.
bench_scratch() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
}

# bench_random_tokens FILE N VOCAB: N uniform random tokens below VOCAB
# (seed 0) in the llm.c token-file format (256-int header, uint16 tokens).
bench_random_tokens() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import struct, sys, random
random.seed(0)
n, vocab = int(sys.argv[2]), int(sys.argv[3])
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *[random.randrange(vocab) for _ in range(n)]))
PY
}

# bench_prep_corpus DIR: the test corpus tokenised into DIR (DIR/train.bin).
bench_prep_corpus() {
  "$pentad" prep --out "$1" "$root"/tests/data/corpus.txt > /dev/null
}

# bench_logged LOG COMMAND...: runs COMMAND with its output in LOG; on
# failure prints LOG and ends the script.
bench_logged() {
  local log=$1
  shift
  "$@" > "$log" 2>&1 || { cat "$log"; exit 1; }
}
