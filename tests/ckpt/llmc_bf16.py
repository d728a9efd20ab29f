#!/usr/bin/python3
"""llm.c gpt2_model.bin helpers for tests/ckpt/init_from.sh.
  to-v5 IN.bin OUT.bin      version 3 (float32) -> version 5 (bfloat16, round to nearest even)
  same-as-bf16 V3.bin X.bin X (version 3) holds exactly V3's parameters rounded to bfloat16
"""
import sys

import numpy as np


def read(path):
    raw = open(path, "rb").read()
    return np.frombuffer(raw[:1024], dtype="<i4").copy(), raw[1024:]


def round_bf16(f32):
    u = f32.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("to-v5", "same-as-bf16"):
        sys.exit(__doc__)
    h, body = read(sys.argv[2])
    assert h[0] == 20240326 and h[1] == 3, f"{sys.argv[2]}: not an llm.c version 3 file"
    p = np.frombuffer(body, dtype="<f4")
    if sys.argv[1] == "to-v5":
        h[1] = 5
        with open(sys.argv[3], "wb") as f:
            f.write(h.tobytes())
            f.write(round_bf16(p).tobytes())
        return True
    h2, body2 = read(sys.argv[3])
    want = (round_bf16(p).astype(np.uint32) << 16).view(np.float32)
    got = np.frombuffer(body2, dtype="<f4")
    ok = bool((h2 == h).all()) and got.shape == want.shape and bool((got.view(np.uint32) == want.view(np.uint32)).all())
    n_bad = int((got.view(np.uint32) != want.view(np.uint32)).sum()) if got.shape == want.shape else -1
    print(f"{'ok  ' if ok else 'FAIL'} {got.size} parameters of {sys.argv[3]} equal {sys.argv[2]} rounded to bf16 "
          f"({n_bad} differ; {int((want != p).sum())} changed by the rounding)")
    return ok


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
