#!/usr/bin/python3
"""Greedy decoding by the PyTorch float64 oracle, beside pentad's.

Rebuilds the model of a pentad checkpoint (or exported model.h5) from its
model/ tensors and resolved deck with reference.py's forward, decodes N tokens
greedily from the byte prompt (each token a full forward over the whole
prefix: no cache, each position's RoPE that of a cached generation, the
prompt in one call and each new token in its own, as LongRoPE's choice of
factors depends on it; argmax, ties to the lower id) and compares them with the
token ids pentad printed (`pentad sample --temperature 0 --ids`). With a
repetition penalty R (pentad's --repetition-penalty R), each step first
divides the logit of every id already in the sequence by R where it is
positive and multiplies it by R where it is negative, as transformers'
RepetitionPenaltyLogitsProcessor documents (written from that rule here).
Usage: /usr/bin/python3 generate.py WEIGHTS.h5 PROMPT N "PENTAD IDS" [R]
Exit 1 when the tokens differ (or fewer than N were decoded); exit 3 when
they agree but the reference is degenerate (fewer than MIN_DISTINCT distinct
tokens among the N: a loop that agreeing on proves little), so that the
caller can require enough prompts that are not.
"""
import sys
import tomllib

import h5py
import numpy as np
import torch

import reference

MIN_DISTINCT = 4  # a model that repeats one or two bytes tests nothing


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    path, prompt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    penalty = float(sys.argv[5]) if len(sys.argv) == 6 else 1.0
    got = [int(x) for x in sys.argv[4].split()]
    f = h5py.File(path, "r")
    cfg = f.attrs["config"]
    m = tomllib.loads(cfg if isinstance(cfg, str) else cfg.decode())["model"]
    if m["vocab_size"] != 256:
        sys.exit(f"{path}: vocabulary {m['vocab_size']}; this oracle decodes byte prompts (256)")
    p = {name: torch.from_numpy(f[name][...].astype(np.float64)) for name in reference.param_shapes(m)}
    tokens = list(prompt.encode())
    want, margins = [], []
    with torch.no_grad():
        for _ in range(n):
            if len(tokens) >= m["seq_len"]:
                break
            logits = reference.forward(p, m, torch.tensor([tokens]), prompt_len=len(prompt.encode()))[0, -1].numpy()
            if penalty != 1.0:
                seen = sorted(set(tokens))
                logits[seen] = np.where(logits[seen] < 0, logits[seen] * penalty, logits[seen] / penalty)
            best = int(np.argmax(logits))  # the first maximum: the lower id on ties
            top2 = np.sort(logits)[-2:]
            margins.append(float(top2[1] - top2[0]))
            want.append(best)
            tokens.append(best)
    print(f"{path}: {m['family']} L={m['n_layers']} C={m['d_model']} T={m['seq_len']}, prompt {prompt!r}"
          + (f", repetition penalty {penalty:g}" if penalty != 1.0 else ""))
    print(f"  torch fp64: {' '.join(map(str, want))}")
    print(f"  pentad    : {' '.join(map(str, got))}")
    print(f"  text      : {bytes(want).decode('utf-8', 'replace')!r}")
    print(f"  smallest top-1/top-2 logit margin of the reference: {min(margins):.3e}")
    ok, degenerate = True, False
    if got != want:
        first = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
        print(f"FAIL: the tokens differ from position {first} (pentad {len(got)} tokens, torch {len(want)})")
        ok = False
    if len(want) != n:
        print(f"FAIL: the reference decoded {len(want)} tokens, expected {n} (prompt + N > seq_len?)")
        ok = False
    if len(set(want)) < MIN_DISTINCT:
        print(f"DEGENERATE: only {len(set(want))} distinct tokens among {len(want)} (not counted)")
        degenerate = True
    print("FAILED" if not ok else "AGREE (degenerate)" if degenerate else "PASS")
    return 1 if not ok else 3 if degenerate else 0


if __name__ == "__main__":
    sys.exit(main())
