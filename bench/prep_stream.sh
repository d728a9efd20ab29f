#!/usr/bin/env bash
# `pentad prep` on a corpus of SIZE_MB (docs/*.md, README.md and
# tests/tokenizer/multilingual.txt repeated, one plain file), GPT-2 BPE
# (js-tiktoken's ranks) and the byte tokenizer, into shards of 20M tokens:
# wall time, MB/s and peak resident memory (wait4's ru_maxrss), the median of
# REPS runs. With PEER (another pentad binary, e.g. an older build) each run
# of this build is paired with one of PEER, alternately, and the ratios are
# printed too.
#   [PEER=OLD/pentad] bench/prep_stream.sh [SIZE_MB] [REPS]   (default: 180, 3)
# Needs node and js-tiktoken for the ranks (scripts/deps.sh).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
bench_scratch
size_mb=${1:-180}
reps=${2:-3}
inputs=("$root"/docs/*.md "$root/README.md" "$root/tests/tokenizer/multilingual.txt")
cat "${inputs[@]}" > "$tmp/unit.txt"
while [ "$(stat -c %s "$tmp/corpus.txt" 2>/dev/null || echo 0)" -lt $((size_mb * 1000000)) ]; do
  cat "$tmp/unit.txt" "$tmp/unit.txt" "$tmp/unit.txt" "$tmp/unit.txt" >> "$tmp/corpus.txt"
done
node "$root/tests/tokenizer/js_tiktoken.cjs" ranks gpt2 "$tmp/gpt2.tiktoken"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}" \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; load average before: $(cut -d" " -f1-3 /proc/loadavg)"
echo "corpus: $(stat -c %s "$tmp/corpus.txt") bytes; medians of $reps runs"
/usr/bin/python3 - "$tmp" "$pentad" "${PEER:-}" "$reps" <<'PY'
import os, statistics, subprocess, sys, time
tmp, pentad, peer, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
corpus = os.path.join(tmp, "corpus.txt")
n_bytes = os.path.getsize(corpus)
def run(binary, args):
    out = os.path.join(tmp, "out")
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "prep", "--out", out, "--shard-tokens", "20000000"] + args + [corpus],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    assert os.waitstatus_to_exitcode(status) == 0, f"{binary} prep {args} failed"
    subprocess.run(["rm", "-rf", out], check=True)
    return wall, usage.ru_maxrss / 1024
for name, args in [("gpt2", ["--tokenizer", os.path.join(tmp, "gpt2.tiktoken")]), ("bytes", [])]:
    this, other = [], []
    for _ in range(reps):
        this.append(run(pentad, args))
        if peer:
            other.append(run(peer, args))
    med = lambda xs, k: statistics.median(x[k] for x in xs)
    line = f"{name:6s} this build: {med(this, 0):7.2f} s, {n_bytes / 1e6 / med(this, 0):6.1f} MB/s, peak {med(this, 1):7.1f} MiB"
    if peer:
        ratio = statistics.median(a[0] / b[0] for a, b in zip(this, other))
        line += (f" | peer: {med(other, 0):7.2f} s, {n_bytes / 1e6 / med(other, 0):6.1f} MB/s, peak {med(other, 1):7.1f} MiB"
                 f" | wall ratio {ratio:.3f}")
    print(line)
PY
