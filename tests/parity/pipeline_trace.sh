#!/usr/bin/env bash
# The pipeline trace and bubble report: pp 2, 1f1b, 4 micro-batches with
# log.trace. The trace must be Chrome-trace JSON (what Perfetto and
# chrome://tracing open) with, for every traced step and stage, one forward
# and one backward per micro-batch that never overlap on a rank, in the
# schedule's order; the run must print the measured bubble per stage beside
# the formula.
# env: PENTAD, MPIEXEC, PENTAD_SOURCE_DIR, PENTAD_PYTHON
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
deck=$PENTAD_SOURCE_DIR/tests/parity/gpt2.toml
"$PENTAD" prep --out "$tmp/data" "$PENTAD_SOURCE_DIR"/tests/data/corpus.txt > /dev/null
"$PENTAD" schedule --schedule 1f1b --pp 2 --m 4 > "$tmp/sched.txt"
"$MPIEXEC" -n 2 "$PENTAD" train "$deck" --set data.train="$tmp/data/train.bin" --set parallel.pp=2 \
  --set train.grad_accum=4 --set train.steps=3 --set log.trace="$tmp/out/trace.json" \
  > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; exit 1; }
grep -E "^pipeline:" "$tmp/run.log"
"$PENTAD_PYTHON" - "$tmp" <<'PY'
import json, re, sys
sys.path.insert(0, __import__("os").environ["PENTAD_SOURCE_DIR"] + "/tests/lib")
from report import report
tmp = sys.argv[1]
trace = json.load(open(f"{tmp}/out/trace.json"))
ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
checks = [("trace is JSON with traceEvents and a named process per rank", len(names) == 2 and len(ev) > 0)]
order = {}
for line in open(f"{tmp}/sched.txt"):
    m = re.match(r"rank (\d+): (.*)", line)
    if m and "peak" not in line:
        order[int(m.group(1))] = m.group(2).split()
for step in (1, 2, 3):
    for pid in (0, 1):
        comp = sorted((e for e in ev if e["pid"] == pid and e["args"]["step"] == step and e["cat"] == "compute"),
                      key=lambda e: e["ts"])
        got = [("F" if e["args"]["op"] == "forward" else "B") + re.search(r"mb(\d+) c(\d+)", e["name"]).expand(r"\1.\2")
               for e in comp]
        checks.append((f"step {step} rank {pid}: compute in schedule order {' '.join(got)}", got == order[pid]))
        overlap = any(a["ts"] + a["dur"] > b["ts"] + 1e-3 for a, b in zip(comp, comp[1:]))
        checks.append((f"step {step} rank {pid}: no overlapping compute", not overlap))
log = open(f"{tmp}/run.log").read()
m = re.search(r"bubble \(idle/busy, median\) per stage \[([0-9., ]+)\] \| formula \(pp-1\)/m = ([0-9.]+)", log)
checks.append(("bubble per stage reported beside the formula 0.250", bool(m) and m.group(2) == "0.250"
               and len(m.group(1).split(",")) == 2))
sys.exit(report(checks))
PY
