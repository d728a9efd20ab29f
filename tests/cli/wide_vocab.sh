#!/usr/bin/env bash
# A Llama-3-sized vocabulary (128256 > 65535): a version 2 (uint32) token file
# whose ids span the whole vocabulary trains a tiny Llama deck on 1 rank and
# on tp=2 (each rank holds half of the vocabulary, so ids above 65535 land on
# the second rank). Checks: the file is read as version 2, the first loss is
# near ln(128256) (init_std is small, so the logits start near uniform), and
# the tp=2 run's per-step losses equal the 1-rank run's to fp32 accuracy.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import sys, numpy as np
tmp = sys.argv[1]
rng = np.random.default_rng(7)
V = 128256
for name, n in (("train", 4000), ("val", 600)):
    toks = rng.integers(0, V, size=n, dtype=np.uint32)
    toks[::97] = V - 1  # the largest id, often
    header = np.zeros(256, dtype=np.int32)
    header[:3] = (20240520, 2, n)
    with open(f"{tmp}/{name}.bin", "wb") as f:
        f.write(header.tobytes()); f.write(toks.tobytes())
PY
common=(--set model.family=llama --set model.n_layers=1 --set model.d_model=16 --set model.n_heads=2
        --set model.n_kv_heads=2 --set model.d_ff=32 --set model.vocab_size=128256 --set model.seq_len=16
        --set model.init_std=0.002 --set train.steps=3 --set train.micro_batch=2 --set train.warmup_steps=1
        --set train.eval_every=3 --set train.eval_batches=2 --set log.every=1
        --set data.train="$tmp/train.bin" --set data.val="$tmp/val.bin")
"$MPIEXEC" -n 1 "$PENTAD" train "$PENTAD_SOURCE_DIR/input/tiny.toml" "${common[@]}" \
  --set log.metrics="$tmp/tp1.jsonl" > "$tmp/tp1.out"
"$MPIEXEC" -n 2 "$PENTAD" train "$PENTAD_SOURCE_DIR/input/tiny.toml" "${common[@]}" --set parallel.tp=2 \
  --set log.metrics="$tmp/tp2.jsonl" > "$tmp/tp2.out"
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import json, math, os, sys
tmp = sys.argv[1]
a = [json.loads(l) for l in open(f"{tmp}/tp1.jsonl")]
b = [json.loads(l) for l in open(f"{tmp}/tp2.jsonl")]
checks = [(f"3 steps logged ({len(a)}, {len(b)})", len(a) == 3 and len(b) == 3)]
checks.append((f"first loss {a[0]['loss']:.4f} within 0.05 of ln(128256) = {math.log(128256):.4f}",
               abs(a[0]["loss"] - math.log(128256)) < 0.05))
for ra, rb in zip(a, b):
    checks.append((f"step {ra['step']}: tp=1 loss {ra['loss']:.6f} == tp=2 loss {rb['loss']:.6f} (rel 1e-5)",
                   abs(ra["loss"] - rb["loss"]) <= 1e-5 * abs(ra["loss"])))
va = [r["val_loss"] for r in a if "val_loss" in r]
vb = [r["val_loss"] for r in b if "val_loss" in r]
checks.append((f"val loss tp=1 {va} == tp=2 {vb} (rel 1e-5)",
               len(va) == 1 and len(vb) == 1 and abs(va[0] - vb[0]) <= 1e-5 * va[0]))
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report  # noqa: E402
sys.exit(report(checks))
PY
