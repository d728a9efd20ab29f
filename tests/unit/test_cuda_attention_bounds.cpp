// The causal-mask bounds of cuda/attention.cu (cuda/attention_bounds.hpp),
// brute-forced on the host against the mask's definition: key j (global
// position k_offset + j) is visible to query i (global position q_offset + i)
// iff !causal or k_offset + j <= q_offset + i. Over a grid of (Tq, Tk,
// q_offset, k_offset) that holds ring-attention key blocks wholly in the
// future, wholly in the past and overlapping, and zig-zag-like offsets:
//   n_visible(i)       the count of keys i sees, and they are a prefix;
//   block_k_end(i0)    exactly one past the last key any query of the block
//                      [i0, i0 + rows) sees (the forward and dQ key loops);
//   block_i_begin(j0)  queries before it see no key >= j0; it sees key j0
//                      (the dK/dV query loop).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "../../cuda/attention_bounds.hpp"
#include "../../cuda/launch.hpp"

namespace {

struct Grid {
  int Tq, Tk, q_offset, k_offset;
  bool causal;
};

bool visible(const Grid& g, int i, int j) { return !g.causal || g.k_offset + j <= g.q_offset + i; }

std::string name_of(const Grid& g) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "Tq=%d Tk=%d q_offset=%d k_offset=%d causal=%d", g.Tq, g.Tk,
                g.q_offset, g.k_offset, g.causal);
  return buf;
}

// Every grid point, in a fixed order.
template <class F>
void for_each_grid(F&& f) {
  const int Ts[] = {1, 5, 8, 31, 32, 33, 64};
  const int offsets[] = {0, 1, 7, 31, 32, 33, 64, 95, 128, 200};
  for (int causal = 0; causal < 2; ++causal)
    for (int Tq : Ts)
      for (int Tk : Ts)
        for (int q_offset : offsets)
          for (int k_offset : offsets) f(Grid{Tq, Tk, q_offset, k_offset, causal == 1});
}

TEST(CudaAttentionBounds, NVisibleCountsAPrefix) {
  int n_grids = 0, n_future = 0, n_past = 0, n_partial = 0;
  for_each_grid([&](const Grid& g) {
    ++n_grids;
    int total = 0;
    for (int i = 0; i < g.Tq; ++i) {
      const int n = pentad::n_visible(i, g.Tk, g.q_offset, g.k_offset, g.causal);
      int count = 0;
      for (int j = 0; j < g.Tk; ++j) {
        count += visible(g, i, j);
        // The visible set is the prefix [0, n).
        if (visible(g, i, j) != (j < n)) {
          ADD_FAILURE() << name_of(g) << " i=" << i << " j=" << j << ": n_visible " << n
                        << " but visible=" << visible(g, i, j);
          return;
        }
      }
      EXPECT_EQ(n, count) << name_of(g) << " i=" << i;
      total += count;
    }
    if (!g.causal) return;
    // The ring cases the grid must hold: the key block wholly after every
    // query, wholly before (or at) every query, and straddling them.
    if (total == 0) ++n_future;
    else if (total == g.Tq * g.Tk) ++n_past;
    else ++n_partial;
  });
  std::printf("n_visible: %d grids; causal key blocks wholly future %d, wholly past %d, partial %d\n",
              n_grids, n_future, n_past, n_partial);
  EXPECT_GT(n_future, 0);
  EXPECT_GT(n_past, 0);
  EXPECT_GT(n_partial, 0);
}

// The forward and dQ kernels visit key tiles j0 = 0, kTile, ... < k_end for
// the block of query rows [i0, min(i0 + rows, Tq)).
TEST(CudaAttentionBounds, BlockKEndIsTheLastVisibleKeyOfTheBlock) {
  int n_blocks = 0;
  for (int rows : {pentad::cuda_detail::kAttnWarps, 1, 3, 32})
    for_each_grid([&](const Grid& g) {
      for (int i0 = 0; i0 < g.Tq; i0 += rows) {
        ++n_blocks;
        const int k_end = pentad::block_k_end(i0, rows, g.Tq, g.Tk, g.q_offset, g.k_offset, g.causal);
        int last_seen = -1;  // the largest key any query of the block sees
        for (int i = i0; i < std::min(i0 + rows, g.Tq); ++i)
          for (int j = 0; j < g.Tk; ++j)
            if (visible(g, i, j)) last_seen = std::max(last_seen, j);
        // Every visible key is below k_end (covered), and key k_end - 1 is
        // seen, so the last tile visited is needed and none past it is.
        EXPECT_EQ(k_end, last_seen + 1) << name_of(g) << " rows=" << rows << " i0=" << i0;
      }
    });
  std::printf("block_k_end: %d query blocks\n", n_blocks);
}

// The dK/dV kernel starts its query loop for the key rows [j_first,
// min(j_first + rows, Tk)) at block_i_begin.
TEST(CudaAttentionBounds, BlockIBeginIsTheFirstQuerySeeingTheBlock) {
  int n_blocks = 0, n_seen = 0;
  for (int rows : {pentad::cuda_detail::kAttnWarps, 1, 3, 32})
    for_each_grid([&](const Grid& g) {
      for (int j_first = 0; j_first < g.Tk; j_first += rows) {
        ++n_blocks;
        const int j_last = std::min(j_first + rows, g.Tk) - 1;
        const int i_begin = pentad::block_i_begin(j_first, g.q_offset, g.k_offset, g.causal);
        EXPECT_GE(i_begin, 0) << name_of(g) << " j_first=" << j_first;
        // Queries before i_begin see none of the block's keys.
        for (int i = 0; i < std::min(i_begin, g.Tq); ++i)
          for (int j = j_first; j <= j_last; ++j)
            EXPECT_FALSE(visible(g, i, j)) << name_of(g) << " rows=" << rows << " j_first=" << j_first
                                           << " i_begin=" << i_begin << " but query " << i
                                           << " sees key " << j;
        // Query i_begin sees at least one (j_first itself), when it exists.
        if (i_begin < g.Tq) {
          ++n_seen;
          EXPECT_TRUE(visible(g, i_begin, j_first))
              << name_of(g) << " rows=" << rows << " j_first=" << j_first << " i_begin=" << i_begin;
        }
      }
    });
  std::printf("block_i_begin: %d key blocks, %d seen by some query\n", n_blocks, n_seen);
  EXPECT_GT(n_seen, 0);
  EXPECT_LT(n_seen, n_blocks);  // the grid also holds key blocks no query sees
}

}  // namespace
