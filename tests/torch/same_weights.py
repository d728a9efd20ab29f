#!/usr/bin/python3
"""Bitwise comparison of the model/ tensors of two pentad checkpoint files
(tests/torch/hf_export.sh, tests/ckpt/llmc_import.sh): the same names and
shapes, and every float32 bit pattern equal. Usage: same_weights.py A.h5 B.h5
"""
import sys

import h5py
import numpy as np


def tensors(path):
    f = h5py.File(path, "r")
    out = {}
    f["model"].visititems(lambda n, o: out.__setitem__(n, o[...]) if isinstance(o, h5py.Dataset) else None)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
    ok = set(a) == set(b) and len(a) > 0
    if not ok:
        print(f"FAIL tensor names differ: only in A {sorted(set(a) - set(b))[:4]}, only in B {sorted(set(b) - set(a))[:4]}")
    n_diff = 0
    for n in sorted(set(a) & set(b)):
        x, y = a[n], b[n]
        if x.shape != y.shape or not np.array_equal(x.view(np.uint32), y.view(np.uint32)):
            n_diff += 1
            worst = float(np.abs(x.astype(np.float64) - y).max()) if x.shape == y.shape else float("inf")
            print(f"FAIL model/{n}: shapes {x.shape} {y.shape}, max|diff| {worst:.3e}")
    print(f"{'ok  ' if ok and n_diff == 0 else 'FAIL'} {len(a)} tensors, {n_diff} differ bitwise "
          f"({sys.argv[1]} vs {sys.argv[2]})")
    return ok and n_diff == 0


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
