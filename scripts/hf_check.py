#!/usr/bin/env python3
"""Check a `pentad ckpt export --format hf` directory with Hugging Face's own code.

Needs the `transformers`, `safetensors`, `torch` and `h5py` packages (not on
pentad's CPU test machines: run it where they are installed). Loads HF_DIR
with AutoModelForCausalLM.from_pretrained (float32), runs it on the step-1
batch of a pentad debug dump made from the same weights, and compares its
logits and loss with pentad's.

Make the dump with a run that starts from the export:
  pentad ckpt export ckpt/final.h5 --to out/hf --format hf
  mpiexec -n 1 pentad train DECK --set checkpoint.init_from=out/hf \
      --set train.steps=1 --set log.dump=out/dump.h5
  python3 scripts/hf_check.py out/hf out/dump.h5
Exit 0 when max|diff| <= 1e-5 * max|logits| and the loss agrees to 1e-5
relative (both fp32), 1 otherwise.
"""
import math
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

LOGITS_REL = 1e-5
LOSS_REL = 1e-5


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    hf_dir, dump = sys.argv[1], sys.argv[2]
    model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32)
    model.eval()
    f = h5py.File(dump, "r")
    ids = torch.from_numpy(f["batch/inputs"][0].astype(np.int64))
    targets = torch.from_numpy(f["batch/targets"][0].astype(np.int64))
    with torch.no_grad():
        logits = model(input_ids=ids).logits.double()
    got = f["logits"][...].astype(np.float64)
    ref = logits.numpy()
    if got.shape != ref.shape:
        print(f"FAIL logits shape: pentad {got.shape}, {type(model).__name__} {ref.shape}")
        return False
    diff = np.abs(got - ref)
    rel = float(diff.max() / np.abs(ref).max())
    loss = float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)))
    got_loss = float(f["metrics/loss"][0])
    lrel = abs(got_loss - loss) / abs(loss)
    ok = rel <= LOGITS_REL and lrel <= LOSS_REL
    print(f"{type(model).__name__}: logits max|diff| {diff.max():.3e} = {rel:.3e} of max|logits| (limit {LOGITS_REL:g}); "
          f"loss pentad {got_loss:.9g} transformers {loss:.9g} (relative {lrel:.3e}, limit {LOSS_REL:g}); "
          f"log(V) = {math.log(ref.shape[-1]):.4f}")
    print("ok" if ok else "FAIL")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
