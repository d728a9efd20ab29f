// The grouped linear ops (ops.def: linear_fwd_group, linear_bwd_input_group,
// linear_bwd_weight_group) without a GPU:
// - their definition, the single-layer ops on each part in turn (what the
//   CPU runs), against double-precision sums;
// - how CUDA cuts a group into batched matmuls (linear_group_runs) and when
//   it stacks the parts into one GEMM (parts_stacked), on hand-made layouts;
// - that the model's own layout gives CUDA one matmul for Q, K and V (two
//   with grouped-query heads) and one stacked GEMM each way in the backward:
//   the parameters (ParamStore offsets of model_param_list) and the
//   activations and gradients (MemoryPlan's buffers placed as Model places
//   them, place_buffers), for GPT-2 and Llama, with and without grouped-query
//   heads, tp 1 and 2, every recompute mode.
// The CUDA calls themselves: tests/backend_ops (OpsVsCpu.LinearGroups).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../../cuda/gemm_args.hpp"  // linear_group_runs, parts_stacked (header-only, no CUDA)
#include "cpu.hpp"
#include "model/memory_plan.hpp"
#include "model/param_list.hpp"
#include "model/params.hpp"

namespace {

using namespace pentad;

std::vector<float> random_vec(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& e : v) e = u(rng);
  return v;
}

void expect_close(const std::string& tag, const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size()) << tag;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::fabs(want[i]))) << tag << " [" << i << "]";
}

// Three parts of widths 6, 4, 4 (Q and grouped K, V) on x (N, n_in); the
// second part has no bias, so the bias handling is seen both ways.
TEST(LinearGroup, EachPartInTurnIsTheLinearLayer) {
  auto be = make_cpu_backend(1);
  const int N = 5, n_in = 7, widths[3] = {6, 4, 4};
  const std::vector<float> x = random_vec(size_t(N) * n_in, 1);
  std::vector<std::vector<float>> w, b, y, dy, dw, db;
  for (int i = 0; i < 3; ++i) {
    w.push_back(random_vec(size_t(widths[i]) * n_in, 10 + i));
    b.push_back(random_vec(size_t(widths[i]), 20 + i));
    y.push_back(std::vector<float>(size_t(N) * widths[i], 99.0f));  // overwritten
    dy.push_back(random_vec(size_t(N) * widths[i], 30 + i));
    dw.push_back(random_vec(size_t(widths[i]) * n_in, 40 + i));  // accumulated onto
    db.push_back(random_vec(size_t(widths[i]), 50 + i));
  }
  const auto has_bias = [](int i) { return i != 1; };
  std::vector<LinearPart> parts;
  std::vector<LinearGradPart> grads;
  for (int i = 0; i < 3; ++i) {
    parts.push_back({y[i].data(), w[i].data(), has_bias(i) ? b[i].data() : nullptr, widths[i]});
    grads.push_back({dy[i].data(), w[i].data(), dw[i].data(), has_bias(i) ? db[i].data() : nullptr, widths[i]});
  }
  const std::vector<std::vector<float>> dw0 = dw, db0 = db;
  const float beta = 0.5f;
  std::vector<float> dx = random_vec(size_t(N) * n_in, 60);
  const std::vector<float> dx0 = dx;
  be->linear_fwd_group(parts.data(), 3, x.data(), N, n_in);
  be->linear_bwd_input_group(dx.data(), grads.data(), 3, N, n_in, beta);
  be->linear_bwd_weight_group(grads.data(), 3, x.data(), N, n_in);
  std::vector<double> want_dx(dx0.begin(), dx0.end());
  for (double& v : want_dx) v *= beta;
  for (int i = 0; i < 3; ++i) {
    const int W = widths[i];
    std::vector<double> want_y(size_t(N) * W), want_dw(dw0[i].begin(), dw0[i].end()),
        want_db(db0[i].begin(), db0[i].end());
    for (int r = 0; r < N; ++r)
      for (int o = 0; o < W; ++o) {
        double s = has_bias(i) ? b[i][size_t(o)] : 0.0;
        for (int c = 0; c < n_in; ++c) s += double(x[size_t(r) * n_in + c]) * w[i][size_t(o) * n_in + c];
        want_y[size_t(r) * W + o] = s;
        const double g = dy[i][size_t(r) * W + o];
        for (int c = 0; c < n_in; ++c) {
          want_dx[size_t(r) * n_in + c] += g * w[i][size_t(o) * n_in + c];
          want_dw[size_t(o) * n_in + c] += g * x[size_t(r) * n_in + c];
        }
        if (has_bias(i)) want_db[size_t(o)] += g;
      }
    const std::string tag = "part " + std::to_string(i);
    expect_close(tag + " y", y[i], want_y);
    expect_close(tag + " dw", dw[i], want_dw);
    if (has_bias(i)) {
      expect_close(tag + " db", db[i], want_db);
    } else {
      EXPECT_EQ(db[i], db0[i]) << tag << ": a part without bias has no bias gradient";
    }
  }
  expect_close("dx", dx, want_dx);
}

// Hand-made layouts in one arena: runs join equal shapes evenly spaced.
TEST(LinearGroup, RunsJoinOneShapeEvenlySpaced) {
  const int N = 4, n_in = 8;
  std::vector<float> arena(1 << 16);
  float* a = arena.data();
  auto part = [&](size_t y, size_t w, long bias, int n_out) {
    return LinearPart{a + y, a + w, bias < 0 ? nullptr : a + bias, n_out};
  };
  struct Case {
    const char* what;
    std::vector<LinearPart> parts;
    std::vector<int> run_sizes;
  };
  const int q = 16, kv = 8;  // widths
  const size_t Y = 20000, W = 40000, B = 60000;
  const std::vector<Case> cases = {
      {"MHA adjacent, biases", {part(Y, W, B, q), part(Y + N * q, W + q * n_in, B + q, q),
                                part(Y + 2 * N * q, W + 2 * q * n_in, B + 2 * q, q)}, {3}},
      {"GQA adjacent", {part(Y, W, -1, q), part(Y + N * q, W + q * n_in, -1, kv),
                        part(Y + N * q + N * kv, W + q * n_in + kv * n_in, -1, kv)}, {1, 2}},
      {"evenly spaced with gaps", {part(Y, W, -1, q), part(Y + 1000, W + 3000, -1, q),
                                   part(Y + 2000, W + 6000, -1, q)}, {3}},
      {"uneven spacing", {part(Y, W, -1, q), part(Y + 1000, W + 3000, -1, q),
                          part(Y + 2500, W + 6000, -1, q)}, {2, 1}},
      {"outputs overlapping", {part(Y, W, -1, q), part(Y + N * q - 1, W + q * n_in, -1, q)}, {1, 1}},
      {"weights overlapping", {part(Y, W, -1, q), part(Y + N * q, W + q * n_in - 8, -1, q)}, {1, 1}},
      {"backwards in memory", {part(Y + N * q, W + q * n_in, -1, q), part(Y, W, -1, q)}, {1, 1}},
      {"bias on one only", {part(Y, W, B, q), part(Y + N * q, W + q * n_in, -1, q)}, {1, 1}},
      {"biases overlapping", {part(Y, W, B, q), part(Y + N * q, W + q * n_in, B + q - 1, q)}, {1, 1}},
      {"one part", {part(Y, W, B, q)}, {1}},
  };
  for (const Case& c : cases) {
    const std::vector<LinearRun> runs = linear_group_runs(c.parts.data(), int(c.parts.size()), N, n_in);
    std::vector<int> sizes;
    int next = 0;
    for (const LinearRun& r : runs) {
      sizes.push_back(r.count);
      EXPECT_EQ(r.first, next) << c.what;
      next += r.count;
      if (r.count > 1) {  // the strides reproduce every part of the run
        for (int i = r.first; i < r.first + r.count; ++i) {
          EXPECT_EQ(c.parts[size_t(i)].y, c.parts[size_t(r.first)].y + (i - r.first) * r.stride_y) << c.what;
          EXPECT_EQ(c.parts[size_t(i)].w, c.parts[size_t(r.first)].w + (i - r.first) * r.stride_w) << c.what;
          if (c.parts[size_t(i)].bias) {
            EXPECT_EQ(c.parts[size_t(i)].bias, c.parts[size_t(r.first)].bias + (i - r.first) * r.stride_bias)
                << c.what;
          }
        }
      }
    }
    EXPECT_EQ(sizes, c.run_sizes) << c.what;
  }
  // Stacked: each matrix right after the previous one.
  const std::vector<LinearPart> stacked = {part(Y, W, -1, q), part(Y, W + q * n_in, -1, kv),
                                           part(Y, W + q * n_in + kv * n_in, -1, kv)};
  const auto w_of = [](const LinearPart& p) { return p.w; };
  EXPECT_TRUE(parts_stacked(stacked.data(), 3, n_in, w_of));
  const std::vector<LinearPart> gap = {part(Y, W, -1, q), part(Y, W + q * n_in + 16, -1, kv)};
  EXPECT_FALSE(parts_stacked(gap.data(), 2, n_in, w_of));
  EXPECT_FALSE(parts_stacked(stacked.data(), 0, n_in, w_of));
}

ModelConfig model_of(Family f, int n_kv_heads) {
  ModelConfig m;
  m.family = f;
  m.n_layers = 2;
  m.d_model = 64;
  m.n_heads = 4;
  m.n_kv_heads = n_kv_heads;
  m.d_ff = f == Family::llama ? 160 : 256;
  m.vocab_size = 96;
  m.seq_len = 16;
  m.tied_embeddings = f == Family::gpt2 ? 1 : 0;
  return m;
}

// The model's layout as CUDA sees it: Q, K, V in one run (two with
// grouped-query heads), Llama's gate and up in one, and every group's
// weights, weight gradients and output gradients stacked.
TEST(LinearGroup, ModelLayoutBatchesQkvAndGateUp) {
  struct Model_ {
    const char* name;
    ModelConfig cfg;
    int qkv_runs;
  };
  const std::vector<Model_> models = {{"gpt2", model_of(Family::gpt2, 4), 1},
                                      {"llama mha", model_of(Family::llama, 4), 1},
                                      {"llama gqa", model_of(Family::llama, 2), 2}};
  auto be = make_cpu_backend(1);
  for (const Model_& m : models)
    for (int tp : {1, 2})
      for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
        const std::string tag = std::string(m.name) + " tp=" + std::to_string(tp) +
                                " recompute=" + std::to_string(int(rc));
        const bool gpt2 = m.cfg.family == Family::gpt2;
        // The parameters: wq, wk, wv (and w_gate, w_up) one after another.
        ParamRank pr;
        pr.tp = tp;
        ParamStore store(*be);
        std::vector<ParamSpec> specs = model_param_list(m.cfg, pr);
        int unit = -1;
        for (const ParamSpec& s : specs) {
          while (unit < s.unit) store.begin_unit(++unit);
          store.add_spec(s);
        }
        store.allocate_and_init(1);
        const int B = 2, N = B * m.cfg.seq_len, C = m.cfg.d_model, D = C / m.cfg.n_heads;
        const int H = m.cfg.n_heads / tp, Hkv = m.cfg.n_kv_heads / tp, F = m.cfg.d_ff / tp;
        auto param = [&](const std::string& name) { return store.param(store.find("model/layers/0/" + name)); };
        auto grad = [&](const std::string& name) { return store.grad(store.find("model/layers/0/" + name)); };
        // The activations and gradients, placed as Model places them.
        RankLayout layout;
        layout.tp = tp;
        layout.cp.seq_len = m.cfg.seq_len;
        const MemoryPlan plan(m.cfg, rc, B, layout);
        std::vector<float> arena;
        auto placed = [&](const std::vector<BufSpec>& bufs, Buf which, int block) -> float* {
          std::vector<size_t> block_bytes;
          const std::vector<BufPlace> at = place_buffers(bufs, block_bytes);
          size_t base = 0;  // blocks 4 KiB apart in one arena
          std::vector<size_t> block_start;
          for (size_t bb : block_bytes) {
            block_start.push_back(base);
            base += (bb / sizeof(float) + 1024) / 1024 * 1024;
          }
          if (arena.size() < base) arena.resize(base);
          for (size_t i = 0; i < bufs.size(); ++i)
            if (bufs[i].buf == which && bufs[i].block == block)
              return arena.data() + block_start[at[i].block] + at[i].offset / sizeof(float);
          return nullptr;
        };
        const bool full = rc == Recompute::full;
        const std::vector<BufSpec> acts = full ? plan.shared_buffers() : plan.slot_buffers(0);
        const std::vector<BufSpec> shared = plan.shared_buffers();
        const int blk = full ? -1 : 0;
        // Find every buffer first (placed() may grow the arena), then take the pointers.
        placed(acts, Buf::q, blk);
        placed(shared, Buf::dq, -1);
        float *q = placed(acts, Buf::q, blk), *k = placed(acts, Buf::k, blk), *v = placed(acts, Buf::v, blk);
        ASSERT_TRUE(q && k && v) << tag;
        const LinearPart qkv[3] = {{q, param("attn/wq"), gpt2 ? param("attn/bq") : nullptr, H * D},
                                   {k, param("attn/wk"), gpt2 ? param("attn/bk") : nullptr, Hkv * D},
                                   {v, param("attn/wv"), gpt2 ? param("attn/bv") : nullptr, Hkv * D}};
        EXPECT_EQ(linear_group_runs(qkv, 3, N, C).size(), size_t(m.qkv_runs)) << tag << ": Q, K, V forward";
        EXPECT_TRUE(parts_stacked(qkv, 3, C, [](const LinearPart& p) { return p.w; })) << tag << ": wq, wk, wv";
        float *dq = placed(shared, Buf::dq, -1), *dk = placed(shared, Buf::dk, -1), *dv = placed(shared, Buf::dv, -1);
        ASSERT_TRUE(dq && dk && dv) << tag;
        const LinearGradPart dqkv[3] = {{dq, nullptr, grad("attn/wq"), nullptr, H * D},
                                        {dk, nullptr, grad("attn/wk"), nullptr, Hkv * D},
                                        {dv, nullptr, grad("attn/wv"), nullptr, Hkv * D}};
        EXPECT_TRUE(parts_stacked(dqkv, 3, C, [](const LinearGradPart& p) { return static_cast<const float*>(p.dw); }))
            << tag << ": the weight gradients";
        // The output gradients side by side in the plan (the deferred-W copies are one block by construction).
        EXPECT_EQ(dk, dq + size_t(N) * H * D) << tag;
        EXPECT_EQ(dv, dk + size_t(N) * Hkv * D) << tag;
        if (gpt2) continue;
        float *gate = placed(acts, Buf::fc_pre, blk), *up = placed(acts, Buf::fc_up, blk);
        const LinearPart gate_up[2] = {{gate, param("mlp/w_gate"), nullptr, F}, {up, param("mlp/w_up"), nullptr, F}};
        EXPECT_EQ(linear_group_runs(gate_up, 2, N, C).size(), 1u) << tag << ": gate and up forward";
        EXPECT_TRUE(parts_stacked(gate_up, 2, C, [](const LinearPart& p) { return p.w; })) << tag;
        const LinearGradPart dgu[2] = {{nullptr, nullptr, grad("mlp/w_gate"), nullptr, F},
                                       {nullptr, nullptr, grad("mlp/w_up"), nullptr, F}};
        EXPECT_TRUE(parts_stacked(dgu, 2, C, [](const LinearGradPart& p) { return static_cast<const float*>(p.dw); }))
            << tag;
        EXPECT_EQ(placed(shared, Buf::d_up, -1), placed(shared, Buf::d_fc_pre, -1) + size_t(N) * F) << tag;
      }
}

}  // namespace
