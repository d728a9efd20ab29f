// Launch configurations (grid, block, dynamic shared memory) of every kernel
// of cuda/*.cu as pure host functions of the op's sizes, with the block-shape
// constants the kernels are written for. Plain structs, no CUDA types: the
// .cu files launch with exactly these values (to_dim3 in cuda_backend.hpp)
// and tests/unit/test_cuda_launch.cpp checks them against the device limits
// for every shipped deck and benchmark shape. Sizes are 64-bit here, so a
// configuration past a limit shows as such instead of wrapping.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pentad::cuda_detail {

struct Dim3 {
  int64_t x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid, block;
  size_t smem_bytes = 0;  // dynamic shared memory
};

// Dynamic shared memory a kernel may use without opting in
// (cudaFuncAttributeMaxDynamicSharedMemorySize).
constexpr size_t kSmemWithoutOptInBytes = 48 * 1024;
inline bool needs_smem_opt_in(size_t smem_bytes) { return smem_bytes > kSmemWithoutOptInBytes; }

inline int64_t ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }

// ---- one thread per element (activation, adamw, elementwise, embedding,
// rope): grid.x * kThreads >= n.
constexpr int kThreads = 256;
inline LaunchConfig elementwise_launch(size_t n) {
  return {{ceil_div(int64_t(n), kThreads)}, {kThreads}, 0};
}

// ---- gemm.cu: fp32 -> bf16 operand conversion, a grid-stride loop.
constexpr int64_t kConvertMaxBlocks = 65535 * 8;
inline LaunchConfig bf16_convert_launch(size_t n) {
  const int64_t blocks = ceil_div(int64_t(n), kThreads);
  return {{blocks < kConvertMaxBlocks ? blocks : kConvertMaxBlocks}, {kThreads}, 0};
}

// ---- elementwise.cu: sum_squares over fixed chunks (a block each), then
// one block over the chunk partials; both blocks are kThreads wide.
constexpr int kSumChunk = 4096;
inline size_t sum_squares_n_chunks(size_t n) { return (n + kSumChunk - 1) / kSumChunk; }
inline LaunchConfig sum_squares_chunks_launch(size_t n) {
  return {{int64_t(sum_squares_n_chunks(n))}, {kThreads}, 0};
}
inline LaunchConfig sum_partials_launch() { return {{1}, {kThreads}, 0}; }

// ---- column sums of an (N, C) matrix (elementwise.cu bias_bwd, norm.cu
// dw/db): blocks of (kColumnsPerBlock, kColumnRowThreads) threads, grid
// (column blocks, slabs of rows). C/32 blocks alone would leave most of a
// GPU idle (24 for C = 768 on 132 SMs), so the rows are cut into slabs until
// there are about kColumnTargetBlocks blocks, each slab at least
// kColumnMinSlabRows rows. With one slab the kernel adds into the output;
// with more, each writes its partial sums (scratch) and
// column_partials_launch's kernel adds the slabs' partials in slab order.
// Two passes, no atomics: the order depends on (N, C) only, so a run
// repeats bitwise.
constexpr int kColumnsPerBlock = 32;
constexpr int kColumnRowThreads = 8;
constexpr int64_t kColumnTargetBlocks = 528;  // 4 per SM on an H100/H200's 132
constexpr int64_t kColumnMinSlabRows = 64;
inline int64_t column_slabs(int N, int C) {
  const int64_t want = ceil_div(kColumnTargetBlocks, ceil_div(C, kColumnsPerBlock));
  const int64_t most = ceil_div(N, kColumnMinSlabRows);
  return want < most ? want : (most > 1 ? most : 1);
}
// Rows per slab: slab s sums rows [s * rows, min(N, (s + 1) * rows)).
inline int64_t column_slab_rows(int N, int64_t slabs) { return ceil_div(N, slabs); }
inline LaunchConfig column_sum_launch(int N, int C) {
  return {{ceil_div(C, kColumnsPerBlock), column_slabs(N, C)}, {kColumnsPerBlock, kColumnRowThreads}, 0};
}
// The second pass: a thread per column over the slabs' partials.
inline LaunchConfig column_partials_launch(int C) { return {{ceil_div(C, kThreads)}, {kThreads}, 0}; }

// ---- norm.cu forward and dx (and moe_rows.cu's combine backward): a warp
// per row, kRowsPerBlock rows a block.
constexpr int kRowsPerBlock = 8;
inline LaunchConfig norm_rows_launch(int N) {
  return {{ceil_div(N, kRowsPerBlock)}, {32, kRowsPerBlock}, 0};
}

// ---- xent.cu: a block of kXentThreads per row (tree reductions over it).
constexpr int kXentThreads = 256;
inline LaunchConfig xent_rows_launch(int N) { return {{N}, {kXentThreads}, 0}; }

// ---- embedding.cu dwte: a thread per channel (grid.x), the vocabulary
// split into at most kVocabBlocks ranges (grid.y).
constexpr int kVocabBlocks = 64;
constexpr int kDwteThreads = 128;
inline LaunchConfig embedding_dwte_launch(int C, int V) {
  const int ranges = V > 1 ? V : 1;
  return {{ceil_div(C, kDwteThreads), ranges < kVocabBlocks ? ranges : kVocabBlocks}, {kDwteThreads}, 0};
}

// ---- attention.cu: kAttnWarps rows (query or key) per block, a warp each;
// key (or query) tiles of kAttnTile rows in shared memory, padded to D + 1
// floats where read across lanes; head dim up to 32 * kAttnMaxPerLane.
constexpr int kAttnWarps = 8;
constexpr int kAttnTile = 32;
constexpr int kAttnMaxPerLane = 8;
inline bool attention_head_dim_supported(int D) { return D <= 32 * kAttnMaxPerLane && D % 2 == 0; }

// Block (i-tile, b*H + h): Q rows (kAttnWarps, D), K tile (kAttnTile, D+1), V tile (kAttnTile, D).
inline LaunchConfig attn_fwd_launch(int B, int Tq, int H, int D) {
  const size_t smem = sizeof(float) * (size_t(kAttnWarps) * D + size_t(kAttnTile) * (D + 1) +
                                       size_t(kAttnTile) * D);
  return {{ceil_div(Tq, kAttnWarps), int64_t(B) * H}, {kAttnWarps * 32}, smem};
}
// Block (i, b*H + h), threads striding the keys.
inline LaunchConfig attn_probs_launch(int B, int Tq, int H) { return {{Tq, int64_t(B) * H}, {128}, 0}; }
// A warp per (b, t, h) row.
inline LaunchConfig attn_delta_launch(int B, int Tq, int H) {
  return {{ceil_div(int64_t(B) * Tq * H, kAttnWarps)}, {kAttnWarps * 32}, 0};
}
// Block (i-tile, b*H + h): Q and dO rows (kAttnWarps, D) each, K and V tiles (kAttnTile, D+1) each.
inline LaunchConfig attn_dq_launch(int B, int Tq, int H, int D) {
  const size_t smem = sizeof(float) * (2 * size_t(kAttnWarps) * D + 2 * size_t(kAttnTile) * (D + 1));
  return {{ceil_div(Tq, kAttnWarps), int64_t(B) * H}, {kAttnWarps * 32}, smem};
}
// Block (j-tile, b*Hkv + kvh): the dq layout with Q/dO tiles, plus lse and delta (kAttnTile) each.
inline LaunchConfig attn_dkv_launch(int B, int Tk, int Hkv, int D) {
  const size_t smem = sizeof(float) * (2 * size_t(kAttnWarps) * D + 2 * size_t(kAttnTile) * (D + 1)) +
                      sizeof(float) * 2 * kAttnTile;
  return {{ceil_div(Tk, kAttnWarps), int64_t(B) * Hkv}, {kAttnWarps * 32}, smem};
}

// ---- attention_tc.cu (train.dtype = bf16; plan in attention_tc_plan.hpp):
// the pointer arrays of a batched product, a thread per entry; the row
// kernels (softmax, dS), a block of kAttnTcRowThreads per (row, b*H + h)
// of a block of query rows; the bf16 copies of q, k, v, dO as gemm.cu's.
constexpr int kAttnTcRowThreads = 128;
inline LaunchConfig attn_tc_ptrs_launch(int entries) { return {{ceil_div(entries, kThreads)}, {kThreads}, 0}; }
inline LaunchConfig attn_tc_rows_launch(int rows, int BH) { return {{rows, BH}, {kAttnTcRowThreads}, 0}; }

}  // namespace pentad::cuda_detail
