// The launch configurations of cuda/*.cu (cuda/launch.hpp) against the device
// limits of sm_90 (and sm_80, the other architecture built) for every shipped
// deck (input/*.toml, read by the config loader) and the benchmark shapes of
// bench/cuda_mfu.cpp (GPT-2 124M and 350M, Llama ~1.1B at T = 1024): at most
// 1024 threads a block, block (1024, 1024, 64), grid.x <= 2^31 - 1, grid.y
// and grid.z <= 65535, dynamic shared memory <= 48 KiB unless the kernel opts
// in (then <= 227 KiB on sm_90, 163 KiB on sm_80); every grid also covers its
// work. Registers are checked by the ptxas test (tests/gpu/ptxas_spills.cmake).
// Op sizes are each op's largest on a rank of the shape (local T = T/cp, the
// head dims /tp); every limit is monotone in them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../../cuda/attention_tc_plan.hpp"
#include "../../cuda/launch.hpp"
#include "config/bench_shapes.hpp"
#include "config/config.hpp"
#include "model/param_list.hpp"
#include "model/params.hpp"

namespace {

namespace cd = pentad::cuda_detail;
using cd::LaunchConfig;

struct DeviceLimits {
  const char* arch;
  int64_t max_threads = 1024;
  int64_t max_block_x = 1024, max_block_y = 1024, max_block_z = 64;
  int64_t max_grid_x = 2147483647, max_grid_y = 65535, max_grid_z = 65535;
  size_t max_smem_without_opt_in_bytes = 48 * 1024;
  size_t max_smem_opt_in_bytes;
};
const DeviceLimits kSm90{.arch = "sm_90", .max_smem_opt_in_bytes = 227 * 1024};
const DeviceLimits kSm80{.arch = "sm_80", .max_smem_opt_in_bytes = 163 * 1024};

struct Launch {
  std::string kernel;
  LaunchConfig cfg;
  bool opts_in = false;  // calls cudaFuncSetAttribute when needs_smem_opt_in (attention.cu)
  bool covers = true;    // the grid reaches every row / element / column of the op
};

// What is wrong with one launch on one device; empty when it fits.
std::vector<std::string> violations(const Launch& l, const DeviceLimits& d) {
  std::vector<std::string> v;
  const auto& g = l.cfg.grid;
  const auto& b = l.cfg.block;
  const int64_t threads = b.x * b.y * b.z;
  if (threads < 1 || threads > d.max_threads) v.push_back("threads per block " + std::to_string(threads));
  if (b.x < 1 || b.x > d.max_block_x || b.y < 1 || b.y > d.max_block_y || b.z < 1 || b.z > d.max_block_z)
    v.push_back("block dims");
  if (g.x < 1 || g.x > d.max_grid_x) v.push_back("grid.x " + std::to_string(g.x));
  if (g.y < 1 || g.y > d.max_grid_y) v.push_back("grid.y " + std::to_string(g.y));
  if (g.z < 1 || g.z > d.max_grid_z) v.push_back("grid.z " + std::to_string(g.z));
  const size_t smem_max = l.opts_in ? d.max_smem_opt_in_bytes : d.max_smem_without_opt_in_bytes;
  if (l.cfg.smem_bytes > smem_max)
    v.push_back("dynamic shared memory " + std::to_string(l.cfg.smem_bytes) + " B > " +
                std::to_string(smem_max) + (l.opts_in ? " (opt-in)" : " (no opt-in)"));
  if (!l.covers) v.push_back("grid does not cover the op");
  return v;
}

struct ShapeSizes {
  std::string name;
  pentad::ModelConfig m;
  int micro_batch = 1, tp = 1, cp = 1;
};

size_t n_params(const pentad::ModelConfig& m, int tp) {
  pentad::ParamRank r;
  r.tp = tp;
  size_t n = 0;
  for (const auto& spec : pentad::model_param_list(m, r)) n += spec.local_numel();
  return n;
}

// Every kernel launch of cuda/ at the op sizes of one rank of the shape.
std::vector<Launch> launches_of(const ShapeSizes& s) {
  const pentad::ModelConfig& m = s.m;
  const int64_t B = s.micro_batch, T = m.seq_len / s.cp, C = m.d_model;
  const int64_t H = m.n_heads / s.tp, Hkv = std::max(1, m.n_kv_heads / s.tp), D = m.head_dim();
  const int64_t F = m.d_ff / s.tp, V = m.padded_vocab(s.tp) / s.tp, N = B * T;
  // Tokens an expert's MLP sees: every routed choice (dropless; with a
  // capacity, at most this).
  const int64_t R = m.n_experts > 0 ? N * m.top_k : 0;
  const size_t P = n_params(m, s.tp);
  std::vector<Launch> out;
  auto elementwise = [&](const std::string& what, int64_t n) {
    const LaunchConfig c = cd::elementwise_launch(size_t(n));
    out.push_back({"elementwise " + what, c, false, c.grid.x * c.block.x >= n});
  };
  elementwise("residual (N*C)", N * C);
  elementwise("mlp activation (N*F)", N * F);
  elementwise("qkv bias add (N*(H+2Hkv)*D)", N * (H + 2 * Hkv) * D);
  elementwise("adamw/fill/scale (params)", int64_t(P));
  if (R > 0) elementwise("expert activation (R*F)", R * F);
  elementwise("embedding_fwd (B*T*C)", B * T * C);
  elementwise("embedding_dwpe (T*C)", T * C);
  elementwise("rope q (B*T*H*D/2)", B * T * H * (D / 2));

  const int64_t operand = std::max({N * C, N * F, N * V, V * C, C * F, 3 * C * C});
  out.push_back({"to_bf16 (largest gemm operand)", cd::bf16_convert_launch(size_t(operand))});

  const LaunchConfig sq = cd::sum_squares_chunks_launch(P);
  out.push_back({"sum_squares_chunks (params)", sq, false, sq.grid.x * cd::kSumChunk >= int64_t(P)});
  out.push_back({"sum_partials", cd::sum_partials_launch()});

  for (int64_t cols : {C, F, (H + 2 * Hkv) * D}) {
    const LaunchConfig c = cd::column_sum_launch(int(N), int(cols));
    out.push_back({"column_sum C=" + std::to_string(cols), c, false,
                   c.grid.x * cd::kColumnsPerBlock >= cols && c.grid.y * cd::column_slab_rows(int(N), c.grid.y) >= N});
    const LaunchConfig p = cd::column_partials_launch(int(cols));
    out.push_back({"column_partials C=" + std::to_string(cols), p, false, p.grid.x * p.block.x >= cols});
  }
  const LaunchConfig rows = cd::norm_rows_launch(int(N));
  out.push_back({"norm rows (N)", rows, false, rows.grid.x * rows.block.y >= N});
  if (R > 0) {  // moe_rows.cu: the dispatched rows (at most R), the combined tokens (N)
    elementwise("moe gather_rows (R*C)", R * C);
    elementwise("moe combine_rows (N*C)", N * C);
    const LaunchConfig bwd = cd::norm_rows_launch(int(R));
    out.push_back({"moe combine_rows_bwd rows (R)", bwd, false, bwd.grid.x * bwd.block.y >= R});
  }
  const LaunchConfig xent = cd::xent_rows_launch(int(N));
  out.push_back({"xent rows (N)", xent, false, xent.grid.x == N});
  const LaunchConfig dwte = cd::embedding_dwte_launch(int(C), int(V));
  out.push_back({"embedding_dwte", dwte, false, dwte.grid.x * dwte.block.x >= C && dwte.grid.y <= V});

  const LaunchConfig fwd = cd::attn_fwd_launch(int(B), int(T), int(H), int(D));
  out.push_back({"attn_fwd", fwd, true, fwd.grid.x * cd::kAttnWarps >= T && fwd.grid.y == B * H});
  const LaunchConfig probs = cd::attn_probs_launch(int(B), int(T), int(H));
  out.push_back({"attn_probs", probs, false, probs.grid.x == T && probs.grid.y == B * H});
  const LaunchConfig delta = cd::attn_delta_launch(int(B), int(T), int(H));
  out.push_back({"attn_delta", delta, false, delta.grid.x * cd::kAttnWarps >= B * T * H});
  const LaunchConfig dq = cd::attn_dq_launch(int(B), int(T), int(H), int(D));
  out.push_back({"attn_dq", dq, true, dq.grid.x * cd::kAttnWarps >= T && dq.grid.y == B * H});
  const LaunchConfig dkv = cd::attn_dkv_launch(int(B), int(T), int(Hkv), int(D));
  out.push_back({"attn_dkv", dkv, true, dkv.grid.x * cd::kAttnWarps >= T && dkv.grid.y == B * Hkv});
  // The tensor-core attention (bf16): pointer arrays and the row kernels of a block of query rows.
  const cd::AttnTcDims tc{int(B), int(T), int(T), int(H), int(Hkv), int(D)};
  const int tc_rows = std::min<int>(cd::attn_tc_block_rows(tc), int(T));
  const LaunchConfig ptrs = cd::attn_tc_ptrs_launch(int(B * H));
  out.push_back({"attn_tc ptrs", ptrs, false, ptrs.grid.x * ptrs.block.x >= B * H});
  const LaunchConfig tc_rows_l = cd::attn_tc_rows_launch(tc_rows, int(B * H));
  out.push_back({"attn_tc rows", tc_rows_l, false, tc_rows_l.grid.x == tc_rows && tc_rows_l.grid.y == B * H});
  return out;
}

// input/*.toml through the config loader, then bench/cuda_mfu.cpp's shapes
// (its default batches).
std::vector<ShapeSizes> shipped_shapes() {
  std::vector<ShapeSizes> shapes;
  const char* src = std::getenv("PENTAD_SOURCE_DIR");
  if (src == nullptr) {
    ADD_FAILURE() << "PENTAD_SOURCE_DIR is not set";
    return shapes;
  }
  std::vector<std::filesystem::path> decks;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(src) / "input"))
    if (e.is_regular_file() && e.path().extension() == ".toml") decks.push_back(e.path());
  std::sort(decks.begin(), decks.end());
  for (const auto& path : decks) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const pentad::Config cfg = pentad::parse_config(text.str(), path.string(), {}, 1);
    shapes.push_back({path.filename().string(), cfg.model, cfg.train.micro_batch, cfg.parallel.tp,
                      cfg.parallel.cp});
  }
  for (const pentad::BenchShape& b : pentad::gpu_bench_shapes())
    shapes.push_back({std::string("cuda_mfu ") + b.name, b.m, b.batch});
  return shapes;
}

TEST(CudaLaunch, EveryShippedShapeFitsTheDevice) {
  const std::vector<ShapeSizes> shapes = shipped_shapes();
  ASSERT_GE(shapes.size(), 4u);  // the decks of input/ were found
  int n_launches = 0;
  for (const ShapeSizes& s : shapes) {
    const pentad::ModelConfig& m = s.m;
    std::printf("%s: B=%d T=%d C=%d H=%d Hkv=%d D=%d F=%d V=%d tp=%d cp=%d\n", s.name.c_str(),
                s.micro_batch, m.seq_len, m.d_model, m.n_heads, m.n_kv_heads, m.head_dim(), m.d_ff,
                m.vocab_size, s.tp, s.cp);
    // What attention.cu's make_shape refuses.
    EXPECT_TRUE(cd::attention_head_dim_supported(m.head_dim())) << s.name << ": head dim " << m.head_dim();
    EXPECT_EQ(m.n_heads % m.n_kv_heads, 0) << s.name;
    for (const Launch& l : launches_of(s)) {
      ++n_launches;
      const auto& c = l.cfg;
      std::printf("  %-40s grid (%lld, %lld, %lld) block (%lld, %lld, %lld) smem %zu B%s\n",
                  l.kernel.c_str(), (long long)c.grid.x, (long long)c.grid.y, (long long)c.grid.z,
                  (long long)c.block.x, (long long)c.block.y, (long long)c.block.z, c.smem_bytes,
                  l.opts_in && cd::needs_smem_opt_in(c.smem_bytes) ? " (opt-in)" : "");
      for (const DeviceLimits* d : {&kSm90, &kSm80})
        for (const std::string& v : violations(l, *d))
          ADD_FAILURE() << s.name << " " << l.kernel << " on " << d->arch << ": " << v;
    }
  }
  std::printf("%zu shapes, %d launches checked\n", shapes.size(), n_launches);
}

// The column sums (bias and norm-weight gradients) fill the GPU: C/32
// blocks alone are 24 at C = 768, on 132 SMs. At every benchmark shape they
// reach at least 2 blocks per SM, every slab but the last has the same rows
// and at least kColumnMinSlabRows of them, and the slabs cover the rows.
TEST(CudaLaunch, ColumnSumsFillTheGpu) {
  int checked = 0;
  for (const pentad::BenchShape& b : pentad::gpu_bench_shapes()) {
    const int N = b.batch * b.m.seq_len;
    for (int C : {b.m.d_model, b.m.d_ff}) {
      const LaunchConfig l = cd::column_sum_launch(N, C);
      const int64_t blocks = l.grid.x * l.grid.y, rows = cd::column_slab_rows(N, l.grid.y);
      std::printf("%s N=%d C=%d: %lld column blocks x %lld slabs of %lld rows = %lld blocks\n", b.name, N, C,
                  (long long)l.grid.x, (long long)l.grid.y, (long long)rows, (long long)blocks);
      EXPECT_GE(blocks, 2 * 132) << b.name << " C=" << C;
      EXPECT_GE(rows, cd::kColumnMinSlabRows) << b.name << " C=" << C;
      EXPECT_GE(l.grid.y * rows, N) << b.name << " C=" << C;
      EXPECT_LT((l.grid.y - 1) * rows, N) << b.name << " C=" << C << ": an empty last slab";
      ++checked;
    }
  }
  EXPECT_GE(checked, 6);
  // Few rows: one slab, the single-pass kernel that adds into the output.
  EXPECT_EQ(cd::column_sum_launch(64, 768).grid.y, 1);
  EXPECT_EQ(cd::column_sum_launch(0, 768).grid.y, 1);
  EXPECT_EQ(cd::column_sum_launch(130, 768).grid.y, 3);
}

// The check itself rejects what the device would: past each limit once.
TEST(CudaLaunch, LimitsCheckRejectsOversizedLaunches) {
  // B * H = 4096 * 32 blocks in grid.y.
  EXPECT_FALSE(violations({"attn_fwd", cd::attn_fwd_launch(4096, 64, 32, 64), true}, kSm90).empty());
  EXPECT_TRUE(violations({"attn_fwd", cd::attn_fwd_launch(2047, 64, 32, 64), true}, kSm90).empty());
  // 82 KiB of dynamic shared memory (D = 256) without the opt-in.
  const LaunchConfig dq = cd::attn_dq_launch(1, 64, 1, 256);
  EXPECT_TRUE(cd::needs_smem_opt_in(dq.smem_bytes));
  EXPECT_FALSE(violations({"attn_dq", dq, false}, kSm90).empty());
  EXPECT_TRUE(violations({"attn_dq", dq, true}, kSm90).empty());
  // 2048 threads in a block; a zero grid; a grid that misses rows.
  EXPECT_FALSE(violations({"block", {{1}, {2048}, 0}}, kSm90).empty());
  EXPECT_FALSE(violations({"empty", {{0}, {256}, 0}}, kSm90).empty());
  EXPECT_FALSE(violations({"short", {{1}, {256}, 0}, false, false}, kSm90).empty());
  // More than 2^31 - 1 blocks in grid.x.
  EXPECT_FALSE(violations({"huge", cd::elementwise_launch(size_t(1) << 40)}, kSm90).empty());
}

}  // namespace
