#!/usr/bin/env bash
# `pentad prep` streams: its peak memory does not grow with the corpus. Two
# corpora of plain text, N and 4N bytes (N = 48 MiB), are prep'd with the
# byte tokenizer into shards; the 4N run's peak resident memory (wait4's
# ru_maxrss) may exceed the N run's by at most N/4, where a prep that holds
# the corpus grows by at least 3N. The 4N run's shards, read back in order,
# are the corpus byte for byte, and no staging file is left; the N corpus
# through a pipe (/dev/stdin) gives the same files as from its file.
#   prep_stream.sh      (env: PENTAD, PENTAD_PYTHON, PENTAD_SOURCE_DIR)
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PENTAD_PYTHON" - "$tmp" "$PENTAD" <<'PY'
import filecmp, glob, os, random, subprocess, sys
import numpy as np
sys.path.insert(0, os.path.join(os.environ["PENTAD_SOURCE_DIR"], "tests", "lib"))
from report import report
tmp, pentad = sys.argv[1], sys.argv[2]
random.seed(7)
words = ["alpha", "beta", "the", "of", "and", "tensor", "pipe-line", "x=1;", "(ok)", "caf\u00e9"]
block = ("\n".join(" ".join(random.choice(words) for _ in range(random.randint(0, 14)))
                   for _ in range(20000)) + "\n").encode()
N = 48 << 20

def corpus(name, size):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        for i in range(size // len(block) + 1):
            f.write(block[i % 97:] if i % 3 == 0 else block)
    return path

def prep(src, out, stdin=None):
    p = subprocess.Popen([pentad, "prep", "--out", out, "--shard-tokens", "50000000", src],
                         stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log = p.stdout.read().decode()
    _, status, usage = os.wait4(p.pid, 0)
    print(log.strip())
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024

small, large = corpus("small.txt", N), corpus("large.txt", 4 * N)
rc_s, rss_s = prep(small, os.path.join(tmp, "s"))
rc_l, rss_l = prep(large, os.path.join(tmp, "l"))
# After the measured runs: a forked child's peak includes this process's
# memory until it execs, so nothing large is read here before them.
with subprocess.Popen(["cat", small], stdout=subprocess.PIPE) as cat:  # the same text through a pipe
    rc_p, _ = prep("/dev/stdin", os.path.join(tmp, "p"), stdin=cat.stdout)
names = sorted(os.listdir(os.path.join(tmp, "s")))
piped_same = rc_p == 0 and names == sorted(os.listdir(os.path.join(tmp, "p"))) and all(
    filecmp.cmp(os.path.join(tmp, "s", n), os.path.join(tmp, "p", n), shallow=False) for n in names)
os.remove(small)
print(f"peak resident memory: {rss_s / 2**20:.1f} MiB for {N >> 20} MiB, {rss_l / 2**20:.1f} MiB for {4 * N >> 20} MiB")
out = os.path.join(tmp, "l")
files = sorted(glob.glob(out + "/train_*.bin")) + sorted(glob.glob(out + "/val_*.bin"))
ids = np.concatenate([np.fromfile(f, dtype=np.uint16, offset=1024) for f in files]) if files else np.zeros(0)
text = np.fromfile(large, dtype=np.uint8)
checks = [
    ("both preps succeed", rc_s == 0 and rc_l == 0),
    (f"peak memory grows by {(rss_l - rss_s) / 2**20:.1f} MiB <= N/4 = {N / 4 / 2**20:.0f} MiB for 3N more text",
     rss_l - rss_s <= N // 4),
    (f"{len(files)} shards read back in order are the {len(text)} bytes of the corpus",
     len(ids) == len(text) and bool((ids == text).all())),
    ("the 48 MiB corpus through a pipe (/dev/stdin) gives the same token files", piped_same),
    ("only token files are left in the output directory",
     sorted(os.listdir(out)) == sorted(os.path.basename(f) for f in files)),
]
sys.exit(report(checks))
PY
