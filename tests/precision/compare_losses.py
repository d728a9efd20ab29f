#!/usr/bin/env python3
"""Per-step loss curves of a mixed-precision run against an fp32 run.

  compare_losses.py RUN.jsonl REF.jsonl TOL

Checks, printing the worst step:
  * every step: |loss_run - loss_ref| <= TOL * |loss_ref|;
  * the curves are not identical (the reduced precision is really in use);
  * the reference loss falls, so following it means something.
The tolerance is the caller's, stated next to the test (tests/precision/tests.cmake).
Exit 1 on failure.
"""
import json
import sys


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if line.strip()]


def main(run_path, ref_path, tol):
    run, ref = losses(run_path), losses(ref_path)
    failed = 0

    def check(ok, line):
        nonlocal failed
        print(("ok    " if ok else "FAIL  ") + line)
        failed += 0 if ok else 1

    check(len(run) == len(ref) and len(ref) > 1, f"{len(run)} and {len(ref)} steps logged")
    n = min(len(run), len(ref))
    rel = [abs(run[i] - ref[i]) / abs(ref[i]) for i in range(n)]
    worst = max(range(n), key=lambda i: rel[i])
    check(rel[worst] <= tol,
          f"per-step loss: worst rel diff {rel[worst]:.2e} at step {worst + 1} "
          f"({run[worst]:.6f} vs {ref[worst]:.6f}), tolerance {tol:g}; mean {sum(rel) / n:.2e}")
    check(rel[worst] > 0, "the curves differ (the reduced precision is in use)")
    check(ref[-1] < 0.9 * ref[0], f"reference loss falls ({ref[0]:.4f} -> {ref[-1]:.4f})")
    print(f"{'FAILED' if failed else 'passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
