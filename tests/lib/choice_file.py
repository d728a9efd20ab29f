#!/usr/bin/python3
"""llm.c's multiple-choice eval format, written and read here independently of
pentad (src/io/choice_eval.cpp), from the layout its data scripts document:
a 256 x int32 header (20240522, version 1, examples, longest example in
bytes), then per example the uint16 stream 65535, its size in bytes, index,
label, number of endings, context length + tokens, each ending's length +
tokens.

  choice_file.py write OUT N SEED   byte-token examples cut from tests/data/corpus.txt:
                                    2 to 5 distinct endings, contexts of 1 to 14 bytes
                                    and endings of 2 to 10, so that with seq_len 16 some
                                    rows need their context cut
"""
import os
import random
import struct
import sys

MAGIC, VERSION, START = 20240522, 1, 65535


def write(path, examples):
    """examples: (label, context, [ending, ...]) with token lists."""
    stream, longest = [], 0
    for idx, (label, ctx, ends) in enumerate(examples):
        ex = [START, 0, idx, label, len(ends), len(ctx)] + list(ctx)
        for e in ends:
            ex += [len(e)] + list(e)
        ex[1] = 2 * len(ex)
        longest = max(longest, ex[1])
        stream += ex
    header = [MAGIC, VERSION, len(examples), longest] + [0] * 252
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header) + struct.pack(f"<{len(stream)}H", *stream))


def read(path):
    """[(label, context, [ending, ...])], checking the layout."""
    data = open(path, "rb").read()
    header = struct.unpack("<256i", data[:1024])
    assert header[:2] == (MAGIC, VERSION), header[:2]
    words = struct.unpack(f"<{(len(data) - 1024) // 2}H", data[1024:])
    out, pos = [], 0
    for _ in range(header[2]):
        assert words[pos] == START
        end = pos + words[pos + 1] // 2
        label, n_end = words[pos + 3], words[pos + 4]
        pos += 5
        parts = []
        for _ in range(n_end + 1):
            n = words[pos]
            parts.append(list(words[pos + 1:pos + 1 + n]))
            pos += 1 + n
        assert pos == end
        out.append((label, parts[0], parts[1:]))
    assert pos == len(words)
    return out


def corpus_examples(n, seed):
    rng = random.Random(seed)
    here = os.path.dirname(os.path.abspath(__file__))
    words = open(os.path.join(here, "..", "data", "corpus.txt"), "rb").read().split()
    def text(k, limit):
        return list(b" ".join(rng.choice(words) for _ in range(k)))[:limit]
    out = []
    for _ in range(n):
        ctx = text(rng.randint(1, 4), rng.randint(1, 14))
        n_end = rng.randint(2, 5)
        ends = []
        while len(ends) < n_end:  # distinct endings: equal ones tie
            e = list(b" ") + text(rng.randint(1, 2), rng.randint(1, 9))
            if e not in ends:
                ends.append(e)
        out.append((rng.randrange(n_end), ctx, ends))
    return out


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "write":
        sys.exit(__doc__)
    write(sys.argv[2], corpus_examples(int(sys.argv[3]), int(sys.argv[4])))
