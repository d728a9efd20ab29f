// The causal mask's bounds as cuda/attention.cu's kernels use them, callable
// on the host too (tests/unit/test_cuda_attention_bounds.cpp brute-forces
// them). The mask: key j of the block (global position k_offset + j) is
// visible to query row i (global position q_offset + i) iff !causal or
// k_offset + j <= q_offset + i. Offsets are those of ring / zig-zag context
// parallelism: the key block may lie wholly before, after or across the
// queries.
#pragma once

#include "core/host_device.hpp"

namespace pentad {

// The keys query row i sees are the prefix [0, n_visible) of the block's Tk
// keys (n_visible may be 0). Non-decreasing in i.
PENTAD_HD inline int n_visible(int i, int Tk, int q_offset, int k_offset, bool causal) {
  if (!causal) return Tk;
  const int n = q_offset + i - k_offset + 1;
  return n < 0 ? 0 : (n > Tk ? Tk : n);
}

// The key loop bound of the block of query rows [i0, min(i0 + rows, Tq)),
// i0 < Tq: every key any of them sees is below it, and key k_end - 1 is seen
// by one of them (the last), so key tiles starting at or past it can be
// skipped and none before it.
PENTAD_HD inline int block_k_end(int i0, int rows, int Tq, int Tk, int q_offset, int k_offset,
                                 bool causal) {
  const int i_last = (i0 + rows > Tq ? Tq : i0 + rows) - 1;
  return n_visible(i_last, Tk, q_offset, k_offset, causal);
}

// The first query row that sees key j_first, and so any key at or after
// j_first: rows before it see none of them. May be >= Tq (no row sees them).
PENTAD_HD inline int block_i_begin(int j_first, int q_offset, int k_offset, bool causal) {
  if (!causal) return 0;
  const int i = k_offset + j_first - q_offset;
  return i > 0 ? i : 0;
}

}  // namespace pentad
