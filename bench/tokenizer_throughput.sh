#!/usr/bin/env bash
# BPE encoding throughput, pentad beside js-tiktoken in one run, on one
# corpus: docs/*.md, README.md and tests/tokenizer/multilingual.txt repeated
# to about SIZE_MB.
#   bench/tokenizer_throughput.sh [THREADS] [SIZE_MB] [REPS]   (default: nproc, 4, 5)
# For gpt2 and cl100k: pentad's encode() on 1 thread, pentad's prep path
# (encode_documents) on THREADS threads, js-tiktoken 1.0.21's encode() (one
# thread: node), each the median MB/s of REPS timed runs, by wall time and,
# for the single-thread figures, by CPU time (less inflated by other work on a
# shared machine). Needs the build
# (bench/bench_tokenizer), node and js-tiktoken (scripts/deps.sh).
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
bench_scratch
build=${BUILD:-$root/build}
threads=${1:-$(nproc)}
size_mb=${2:-4}
reps=${3:-5}
js=$root/tests/tokenizer/js_tiktoken.cjs
inputs=("$root"/docs/*.md "$root/README.md" "$root/tests/tokenizer/multilingual.txt")
while [ "$(stat -c %s "$tmp/corpus.txt" 2>/dev/null || echo 0)" -lt $((size_mb * 1000000)) ]; do
  cat "${inputs[@]}" >> "$tmp/corpus.txt"
done
echo "load average before: $(cut -d" " -f1-3 /proc/loadavg) (other work on the machine slows both peers)"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; threads=$threads" \
     "OMP_NUM_THREADS=$threads OMP_PROC_BIND=${OMP_PROC_BIND:-unset} OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
echo "corpus: $(stat -c %s "$tmp/corpus.txt") bytes (docs/*.md, README.md, tests/tokenizer/multilingual.txt repeated);" \
     "node $(node --version); medians of $reps runs"
for enc in gpt2 cl100k_base; do
  node "$js" ranks "$enc" "$tmp/$enc.tiktoken"
  PENTAD_TOK_RANKS=$tmp/$enc.tiktoken PENTAD_TOK_CORPUS=$tmp/corpus.txt OMP_NUM_THREADS=$threads \
    "$build/bench/bench_tokenizer" --benchmark_repetitions="$reps" --benchmark_min_time=0.01 \
    --benchmark_format=json --benchmark_out="$tmp/$enc.json" --benchmark_out_format=json > /dev/null
  node "$js" bench "$enc" "$tmp/corpus.txt" "$reps" > "$tmp/$enc.js.json"
  /usr/bin/python3 - "$enc" "$tmp/$enc.json" "$tmp/$enc.js.json" "$threads" "$(stat -c %s "$tmp/corpus.txt")" <<'PY'
import json, statistics, sys
enc, runs, peer, threads, n_bytes = sys.argv[1], json.load(open(sys.argv[2]))["benchmarks"], json.load(open(sys.argv[3])), sys.argv[4], int(sys.argv[5])
def mb_s(name, key):  # median over the repetitions of MB/s by wall ("real_time") or CPU time of the main thread
    xs = [r for r in runs if r["run_name"].startswith(name) and r.get("run_type") == "iteration"]
    assert all(r["time_unit"] == "ms" for r in xs)
    return statistics.median(n_bytes / (r[key] / 1e3) / 1e6 for r in xs)
one, one_cpu = mb_s("BM_encode_1thread", "real_time"), mb_s("BM_encode_1thread", "cpu_time")
allt = mb_s("BM_encode_all_threads", "real_time")
js, js_cpu = peer["mb_per_s"], peer["cpu_mb_per_s"]
print(f"{enc:12s} pentad 1 thread {one:6.2f} MB/s ({one_cpu:6.2f} per CPU second) | pentad {threads} threads {allt:6.2f} MB/s | "
      f"js-tiktoken {js:5.2f} MB/s ({js_cpu:5.2f} per CPU second) | pentad/js 1 thread {one / js:.1f}x ({one_cpu / js_cpu:.1f}x per CPU second)")
PY
done
echo "load average after: $(cut -d" " -f1-3 /proc/loadavg)"
