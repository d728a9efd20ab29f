#!/usr/bin/python3
"""Multiple-choice evaluation (data.choice_eval) against the PyTorch fp64 oracle.

Rebuilds the model of a pentad debug dump from its final/ tensors (the
weights of the run's last evaluation) with reference.py's forward, reads the
multiple-choice file with tests/lib/choice_file.py (not pentad's reader) and
scores every ending: the summed cross-entropy of its tokens after the
context, the context's first tokens cut when context + ending exceed
seq_len + 1 tokens. Checks the dump's choice/row_loss and row_tokens against
it, and the last metrics row's choice_acc_norm (least mean loss per token)
and choice_acc (least summed loss) against the accuracies it implies.
Usage: /usr/bin/python3 choice_eval.py DUMP.h5 CHOICES.bin METRICS.jsonl N_EXAMPLES
"""
import json
import os
import sys
import tomllib

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import choice_file  # noqa: E402
import reference  # noqa: E402
from report import report  # noqa: E402

ROW_RTOL = 1e-5  # a row's loss is a sum of <= 10 fp32 token losses (reference.py's LOSS_RTOL)
TIE = 1e-6       # relative gap between the best two endings below which either pick is right


def pick(scores):
    best = min(range(len(scores)), key=lambda c: (scores[c], c))
    rest = sorted(scores)
    gap = (rest[1] - rest[0]) / max(abs(rest[0]), 1e-12)
    return best, gap


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    dump, choices, metrics, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    f = h5py.File(dump, "r")
    cfg = f.attrs["config"]
    m = tomllib.loads(cfg if isinstance(cfg, str) else cfg.decode())["model"]
    T = m["seq_len"]
    p = {k: torch.from_numpy(f["final/" + k][...].astype(np.float64)) for k in reference.param_shapes(m)}
    examples = choice_file.read(choices)[:n]
    want_loss, want_tokens, cut = [], [], 0
    correct_norm = correct_sum = ties = differ = 0
    with torch.no_grad():
        for label, ctx, ends in examples:
            sums, means = [], []
            for e in ends:
                keep = min(len(ctx), T + 1 - len(e))
                cut += keep < len(ctx)
                row = ctx[len(ctx) - keep:] + e
                logits = reference.forward(p, m, torch.tensor([row[:-1]]))[0]
                losses = F.cross_entropy(logits, torch.tensor(row[1:]), reduction="none")
                s = float(losses[keep - 1:].sum())
                want_loss.append(s)
                want_tokens.append(len(e))
                sums.append(s)
                means.append(s / len(e))
            (b_norm, g_norm), (b_sum, g_sum) = pick(means), pick(sums)
            ties += (g_norm < TIE) + (g_sum < TIE)
            correct_norm += b_norm == label
            correct_sum += b_sum == label
            differ += b_norm != b_sum
    got_loss = f["choice/row_loss"][...]
    got_tokens = f["choice/row_tokens"][...]
    rows = [json.loads(line) for line in open(metrics)]
    scored = [r for r in rows if "choice_acc_norm" in r]
    last = scored[-1] if scored else {}
    worst = max((abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got_loss, want_loss)), default=1.0)
    acc_norm, acc = correct_norm / len(examples), correct_sum / len(examples)
    print(f"{dump}: {m['family']} T={T}, {len(examples)} examples, {len(want_loss)} rows, {cut} contexts cut, "
          f"torch acc_norm {acc_norm:.4f} acc {acc:.4f}, pentad {last.get('choice_acc_norm')} {last.get('choice_acc')}")
    checks = [
        (f"{len(got_loss)} rows in the dump, {len(want_loss)} endings in the file", len(got_loss) == len(want_loss)),
        ("each row's scored tokens are its ending's", list(got_tokens) == want_tokens),
        (f"every row's loss sum within rel {worst:.2e} of fp64 torch (tolerance {ROW_RTOL})", worst <= ROW_RTOL),
        (f"some contexts were cut to fit seq_len ({cut})", cut > 0),
        (f"scored at {[r['step'] for r in scored]}, the last step among them", bool(scored) and scored[-1] is rows[-1]),
        (f"no near-ties between the best two endings ({ties}): the accuracies are determined", ties == 0),
        # The metrics file prints 10 significant digits: compare the counts of correct examples.
        (f"choice_acc_norm {last.get('choice_acc_norm')} == torch's {correct_norm}/{len(examples)}",
         round(last.get("choice_acc_norm", -1) * len(examples), 6) == correct_norm),
        (f"choice_acc {last.get('choice_acc')} == torch's {correct_sum}/{len(examples)}",
         round(last.get("choice_acc", -1) * len(examples), 6) == correct_sum),
        (f"the two rules pick differently on {differ} examples (both are checked)", differ > 0),
    ]
    sys.exit(report(checks))


if __name__ == "__main__":
    main()
