#!/usr/bin/env bash
# ZeRO stages under a pipeline: input/llama-small.toml with 16 blocks
# (~13M parameters) on pp 2 x dp 2 (1f1b, micro-batch 2, 2 micro-batches
# per rank, 1 MB buckets, one thread per rank), 2 steps per ZeRO stage.
# Prints the root rank's (stage 0) measured peak memory by category beside
# `pentad plan`'s prediction for the same deck, and the median step time
# (4 ranks on this machine's cores: see docs/data-parallel.md on ZeRO-3
# oversubscribed; the time column is not a GPU figure).
#   bench/pp_zero_memory.sh [STAGES]   (default "0 1 2 3")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
stages=${1:-0 1 2 3}
bench_scratch
bench_prep_corpus "$tmp/data"
sets=(--set model.n_layers=16 --set parallel.pp=2 --set parallel.dp=2 --set parallel.schedule=1f1b
      --set parallel.bucket_mb=1 --set train.micro_batch=2 --set train.grad_accum=2 --set train.threads=1
      --set data.train="$tmp/data/train.bin" --set data.val= --set train.eval_every=0 --set train.steps=2)
for z in $stages; do
  bench_logged "$tmp/z$z.log" env OMP_NUM_THREADS=1 mpiexec -n 4 "$pentad" train "$root/input/llama-small.toml" \
    "${sets[@]}" --set parallel.zero="$z" --set log.metrics="$tmp/z$z.jsonl" --set log.every=1000
  bench_logged "$tmp/z$z.pred" "$pentad" plan "$root/input/llama-small.toml" --ranks 4 "${sets[@]}" \
    --set parallel.zero="$z" --layout deck --json
done
/usr/bin/python3 - "$tmp" $stages <<'PY'
import json, re, sys
tmp, stages = sys.argv[1], sys.argv[2:]
cats = ("params", "grads", "optim", "activations", "comm", "scratch")
mib = lambda b: b / 2**20
print(f"{'zero':<5}" + "".join(f"{c:>22}" for c in cats) + f"{'total':>22}{'median step':>14}")
for z in stages:
    row = [json.loads(l) for l in open(f"{tmp}/z{z}.jsonl")][-1]
    # `pentad plan --json` prints the JSON object after any notes on stdout.
    text = open(f"{tmp}/z{z}.pred").read()
    st0 = json.loads(text[text.index("{"):])["stages"][0]
    cells = [f"{mib(row['peak_mem_' + c]):9.2f} ({mib(st0[c]):8.2f})" for c in cats]
    cells.append(f"{mib(row['peak_mem_bytes']):9.2f} ({mib(st0['total']):8.2f})")
    step = re.search(r"median step ([\d.]+) ms", [l for l in open(f"{tmp}/z{z}.log") if l.startswith("summary:")][-1])
    print(f"{z:<5}" + "".join(f"{c:>22}" for c in cells) + f"{step.group(1):>11} ms")
print("MiB on stage 0's root rank: measured (planner's prediction)")
PY
