#!/usr/bin/env python3
"""Layout parity: compare a run's debug dump (log.dump) with the 1-rank run's.

Every layout starts from the serial model's weights and sees the serial
model's tokens, so the per-step loss and the final parameters must agree up
to fp32 reduction-order rounding:
  * per-step loss: |a - b| <= 1e-5 * |b|   (ARCHITECTURE.md section 5)
  * final tensors: |a - b| <= ATOL * max|b| + RTOL * |b| per element,
    ATOL = 1e-5, RTOL = 1e-4: a few ulps of fp32 per step compounded over the
    steps of AdamW, whose update for a tiny gradient can flip with its sign.
Exception: the attention key biases (attn/bk) have an identically zero
gradient in exact arithmetic (softmax is invariant to adding q.b_k to every
score of a row). In fp32 they receive rounding noise that AdamW turns into a
random walk of size ~ lr * noise / eps, different in every layout. They are
checked for staying negligible (|b_k| <= NULL_BOUND in both runs) rather than
for equality; any real gradient reaching them would break that bound.
With q/k norms (a block with attn/k_norm) the key bias passes through the
key's RMS normalisation before the dot product, so its gradient is real and
it is compared as every other tensor.
The batches must be identical bitwise (that is the data contract, no tolerance).
Prints the worst mismatch per class and 'N passed, N failed'; exit 1 on failure.
"""
import sys

import h5py
import numpy as np

LOSS_RTOL = 1e-5
ATOL, RTOL = 1e-5, 1e-4
NULL_BOUND = 1e-3
NULL_GRADIENT = ("attn/bk",)


def names(group, prefix=""):
    out = []
    for k, v in group.items():
        if isinstance(v, h5py.Group):
            out += names(v, prefix + k + "/")
        else:
            out.append(prefix + k)
    return out


def main(run_path, ref_path):
    passed = failed = 0
    run, ref = h5py.File(run_path, "r"), h5py.File(ref_path, "r")

    def check(ok, line):
        nonlocal passed, failed
        print(("ok    " if ok else "FAIL  ") + line)
        if ok:
            passed += 1
        else:
            failed += 1

    for key in ("batch/inputs", "batch/targets"):
        a, b = run[key][...], ref[key][...]
        check(a.shape == b.shape and np.array_equal(a, b), f"{key} identical {a.shape}")

    la, lb = run["metrics/loss"][...], ref["metrics/loss"][...]
    rel = np.abs(la - lb) / np.abs(lb)
    i = int(np.argmax(rel))
    check(la.shape == lb.shape and rel.max() <= LOSS_RTOL,
          f"per-step loss over {len(lb)} steps: worst rel diff {rel.max():.2e} at step {i + 1} "
          f"({la[i]:.8f} vs {lb[i]:.8f}), tolerance {LOSS_RTOL:g}")
    check(lb[-1] < lb[0], f"reference loss falls ({lb[0]:.4f} -> {lb[-1]:.4f}) so the check is not vacuous")

    gn_a, gn_b = run["metrics/grad_norm"][...], ref["metrics/grad_norm"][...]
    rel = np.abs(gn_a - gn_b) / np.abs(gn_b)
    check(rel.max() <= 1e-4, f"per-step grad norm: worst rel diff {rel.max():.2e}")

    if "metrics/aux_loss" in ref:
        # MoE: the load-balancing (+ z) loss is defined per sequence, so it
        # too is the same in every layout.
        aa, ab = run["metrics/aux_loss"][...], ref["metrics/aux_loss"][...]
        rel = np.abs(aa - ab) / np.maximum(np.abs(ab), 1e-30)
        check(aa.shape == ab.shape and rel.max() <= LOSS_RTOL and ab.min() > 0,
              f"per-step MoE aux loss: worst rel diff {rel.max():.2e}, tolerance {LOSS_RTOL:g}")

    worst = (0.0, "", 0.0)
    bad = []
    tensors = names(ref["final"])
    null_worst = 0.0
    for n in tensors:
        a, b = run["final/" + n][...], ref["final/" + n][...]
        if a.shape != b.shape:
            bad.append(f"{n}: shape {a.shape} vs {b.shape}")
            continue
        if n.endswith(NULL_GRADIENT) and n.rsplit("/", 1)[0] + "/k_norm" not in tensors:
            m = float(max(np.abs(a).max(), np.abs(b).max()))
            null_worst = max(null_worst, m)
            if m > NULL_BOUND:
                bad.append(f"{n}: null-gradient tensor grew to {m:.3e}")
            continue
        tol = ATOL * np.abs(b).max() + RTOL * np.abs(b)
        excess = np.abs(a - b) - tol
        if excess.max() > 0:
            bad.append(f"{n}: max |diff| {np.abs(a - b).max():.3e}")
        d = float(np.abs(a - b).max())
        if d > worst[0]:
            worst = (d, n, float(np.abs(b).max()))
    check(not bad and len(tensors) > 0,
          f"final parameters: {len(tensors)} tensors, worst |diff| {worst[0]:.3e} in {worst[1]} "
          f"(max|ref| {worst[2]:.3e}); null-gradient tensors max {null_worst:.2e}"
          + ("; " + "; ".join(bad[:5]) if bad else ""))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
