#!/usr/bin/env python3
"""Plot of a `pentad report` CSV: throughput per sweep group against ranks
(measured and predicted) and predicted against measured peak memory.

usage: plot_report.py REPORT.csv OUT.png   (matplotlib: apt-get install python3-matplotlib)
`pentad report ... --plot OUT.png` runs it on the points it read.
"""
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
groups = {}
for r in rows:
    groups.setdefault(r["group"], []).append(r)
fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
for i, (g, rs) in enumerate(sorted(groups.items())):
    rs.sort(key=lambda r: int(r["ranks"]))
    x = [int(r["ranks"]) for r in rs]
    c = "C%d" % (i % 10)
    ax[0].plot(x, [float(r["tokens_per_s"]) for r in rs], "o-", color=c, label=g + " measured")
    ax[0].plot(x, [float(r["pred_tokens_per_s"]) for r in rs], "x--", color=c, label=g + " predicted")
    for r in rs:
        if int(r["oversubscribed"]):
            ax[0].annotate("oversub.", (int(r["ranks"]), float(r["tokens_per_s"])), fontsize=7, color=c)
    ax[1].plot([float(r["peak_mem_bytes"]) / 2**20 for r in rs], [float(r["pred_mem_bytes"]) / 2**20 for r in rs],
               "o", color=c, label=g)
ax[0].set_xlabel("ranks"); ax[0].set_ylabel("tokens/s"); ax[0].set_xscale("log", base=2)
ax[0].set_title("throughput: measured (o) vs planner (x)"); ax[0].legend(fontsize=6)
lim = [0, max([float(r["peak_mem_bytes"]) / 2**20 for r in rows] + [float(r["pred_mem_bytes"]) / 2**20 for r in rows]) * 1.1]
ax[1].plot(lim, lim, "k:", lw=1)
ax[1].set_xlabel("measured peak MiB (root rank)"); ax[1].set_ylabel("predicted MiB")
ax[1].set_title("memory: prediction vs measurement"); ax[1].legend(fontsize=6)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=80)
