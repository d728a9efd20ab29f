// Every CUDA backend op against the CPU backend op on the same inputs,
// forward and backward: |cuda - cpu| <= atol + rtol*|cpu| per element, the
// worst element printed for every comparison. fp32 tolerances cover
// reduction-order differences (warp trees vs OpenMP loops, cuBLAS vs
// OpenBLAS); the bf16 GEMM is compared with the CPU's bf16 emulation (the
// same rounded operands, fp32 accumulation), so it gets the fp32 tolerance.
// Without a usable GPU every test is skipped with the reason (label gpu).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu.hpp"
#include "cuda.hpp"
#include "backend/backend.hpp"

namespace {

using pentad::Backend;
using Vec = std::vector<float>;
using IVec = std::vector<int32_t>;

constexpr double kAtol = 1e-5, kRtol = 1e-4;  // fp32, O(1) values, short sums

Vec randn(size_t n, uint32_t seed, float sd = 1.0f, float mean = 0.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(mean, sd);
  Vec v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

void compare(const std::string& what, const Vec& got, const Vec& ref, double atol = kAtol,
             double rtol = kRtol) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double worst_excess = -1e300, worst_err = 0;
  size_t wi = 0;
  bool bad = false;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = got[i], r = ref[i];
    double err, excess;
    if (std::isinf(r) || std::isinf(g)) {
      err = g == r ? 0.0 : INFINITY;
      excess = g == r ? -1.0 : INFINITY;
    } else {
      err = std::isnan(g) || std::isnan(r) ? INFINITY : std::fabs(g - r);
      excess = err - (atol + rtol * std::fabs(r));
    }
    if (excess > worst_excess) {
      worst_excess = excess;
      worst_err = err;
      wi = i;
    }
    bad = bad || excess > 0;
  }
  std::printf("%-40s n=%-8zu worst |err| %.3g at %zu (cuda %.8g cpu %.8g; atol %g rtol %g)\n",
              what.c_str(), ref.size(), worst_err, wi, double(got[wi]), double(ref[wi]), atol, rtol);
  EXPECT_FALSE(bad) << what << ": worst mismatch at " << wi << ": cuda " << got[wi] << " cpu "
                    << ref[wi] << " |err| " << worst_err;
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!pentad::cuda_device_available(&why)) GTEST_SKIP() << "no GPU: " << why;
    if (!gpu_) gpu_ = pentad::make_cuda_backend(0);
    if (!cpu_) cpu_ = pentad::make_cpu_backend(2);
    gpu_->set_compute_dtype(pentad::Dtype::fp32);
    cpu_->set_compute_dtype(pentad::Dtype::fp32);
  }
  void TearDown() override {
    if (!gpu_) return;
    for (void* p : owned_) gpu_->free_bytes(p);
    owned_.clear();
  }

  float* up(const Vec& h) {
    float* d = gpu_->alloc(h.size(), pentad::Mem::scratch);
    gpu_->from_host(d, h.data(), h.size() * sizeof(float));
    owned_.push_back(d);
    return d;
  }
  int32_t* up(const IVec& h) {
    int32_t* d = gpu_->alloc_i32(h.size(), pentad::Mem::scratch);
    gpu_->from_host(d, h.data(), h.size() * sizeof(int32_t));
    owned_.push_back(d);
    return d;
  }
  Vec down(const float* d, size_t n) {
    Vec h(n);
    gpu_->to_host(h.data(), d, n * sizeof(float));
    return h;
  }

  static std::unique_ptr<Backend> gpu_, cpu_;
  std::vector<void*> owned_;
};
std::unique_ptr<Backend> CudaOps::gpu_, CudaOps::cpu_;

// ---------------------------------------------------------------- memory ----

TEST_F(CudaOps, MemoryZeroedTrackedAndFill) {
  const size_t before = gpu_->mem_stats().cur_bytes[int(pentad::Mem::activations)];
  float* p = gpu_->alloc(1001, pentad::Mem::activations);
  EXPECT_EQ(gpu_->mem_stats().cur_bytes[int(pentad::Mem::activations)], before + 1001 * sizeof(float));
  compare("alloc zero-filled", down(p, 1001), Vec(1001, 0.0f), 0, 0);
  gpu_->fill(p, 2.5f, 1001);
  compare("fill", down(p, 1001), Vec(1001, 2.5f), 0, 0);
  float* q = gpu_->alloc(1001, pentad::Mem::activations);
  gpu_->copy_bytes(q, p, 1001 * sizeof(float));
  compare("copy_bytes", down(q, 1001), Vec(1001, 2.5f), 0, 0);
  gpu_->free_bytes(p);
  gpu_->free_bytes(q);
  EXPECT_EQ(gpu_->mem_stats().cur_bytes[int(pentad::Mem::activations)], before);
}

// ------------------------------------------------------------------ gemm ----

TEST_F(CudaOps, GemmAllTransposesBetaStridesBatches) {
  for (pentad::Dtype dt : {pentad::Dtype::fp32, pentad::Dtype::bf16}) {
    cpu_->set_compute_dtype(dt);
    gpu_->set_compute_dtype(dt);
    for (int batch : {1, 3})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          const int M = 37, N = 29, K = 70;
          const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 1;
          const long sa = long(ta ? K : M) * lda, sb = long(tb ? N : K) * ldb, sc = long(M) * ldc;
          const Vec A = randn(size_t(sa) * batch, 1), B = randn(size_t(sb) * batch, 2);
          const Vec C0 = randn(size_t(sc) * batch, 3);
          Vec Cc = C0;
          float* dC = up(C0);
          if (batch == 1) {
            cpu_->gemm(ta, tb, M, N, K, 0.7f, A.data(), lda, B.data(), ldb, 0.5f, Cc.data(), ldc);
            gpu_->gemm(ta, tb, M, N, K, 0.7f, up(A), lda, up(B), ldb, 0.5f, dC, ldc);
          } else {
            cpu_->gemm_batched(ta, tb, M, N, K, 0.7f, A.data(), lda, sa, B.data(), ldb, sb, 0.5f,
                               Cc.data(), ldc, sc, batch);
            gpu_->gemm_batched(ta, tb, M, N, K, 0.7f, up(A), lda, sa, up(B), ldb, sb, 0.5f, dC, ldc,
                               sc, batch);
          }
          const std::string name = std::string(dt == pentad::Dtype::bf16 ? "bf16 " : "fp32 ") +
                                   (batch > 1 ? "gemm_batched" : "gemm") + " ta=" +
                                   std::to_string(ta) + " tb=" + std::to_string(tb);
          // K = 70 products of N(0,1) values: sums of size ~8; fp32 order error ~K u.
          compare(name, down(dC, Cc.size()), Cc, 1e-4, 1e-4);
        }
  }
}

// ----------------------------------------------------------- elementwise ----

TEST_F(CudaOps, Elementwise) {
  const size_t n = 100003;
  const Vec a = randn(n, 4), b = randn(n, 5);
  Vec out(n);
  cpu_->add(out.data(), a.data(), b.data(), n);
  float* d = up(Vec(n));
  gpu_->add(d, up(a), up(b), n);
  compare("add", down(d, n), out, 0, 0);
  Vec x = a;
  cpu_->scale(x.data(), 0.3f, n);
  float* dx = up(a);
  gpu_->scale(dx, 0.3f, n);
  compare("scale", down(dx, n), x, 0, 0);
  const double ss_cpu = cpu_->sum_squares(a.data(), n), ss_gpu = gpu_->sum_squares(up(a), n);
  std::printf("sum_squares cpu %.17g cuda %.17g\n", ss_cpu, ss_gpu);
  EXPECT_NEAR(ss_gpu, ss_cpu, 1e-12 * ss_cpu);
  EXPECT_EQ(gpu_->sum_squares(up(a), n), ss_gpu) << "sum_squares must repeat bitwise";
  const int N = 301, C = 97;
  const Vec xb = randn(size_t(N) * C, 6), bias = randn(C, 7);
  Vec yb = xb;
  cpu_->bias_add(yb.data(), bias.data(), N, C);
  float* dyb = up(xb);
  gpu_->bias_add(dyb, up(bias), N, C);
  compare("bias_add", down(dyb, yb.size()), yb, 0, 0);
  Vec db = randn(C, 8);
  float* ddb = up(db);
  cpu_->bias_bwd(db.data(), xb.data(), N, C);
  gpu_->bias_bwd(ddb, up(xb), N, C);
  compare("bias_bwd (accumulates)", down(ddb, C), db, 1e-4, 1e-4);
}

// ----------------------------------------------------------------- norms ----

TEST_F(CudaOps, LayerNormAndRmsNorm) {
  for (int C : {64, 97, 768}) {
    const int N = 203;
    const Vec x = randn(size_t(N) * C, 9, 2.0f, 0.5f), w = randn(C, 10, 0.5f, 1.0f),
              b = randn(C, 11), dout = randn(size_t(N) * C, 12);
    const std::string tag = " C=" + std::to_string(C);
    Vec out(size_t(N) * C), mean(N), rstd(N);
    cpu_->layernorm_fwd(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    float *d_out = up(Vec(out.size())), *d_mean = up(Vec(N)), *d_rstd = up(Vec(N));
    float *d_x = up(x), *d_w = up(w), *d_b = up(b), *d_g = up(dout);
    gpu_->layernorm_fwd(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C, 1e-5f);
    compare("layernorm_fwd out" + tag, down(d_out, out.size()), out);
    compare("layernorm_fwd mean" + tag, down(d_mean, N), mean);
    compare("layernorm_fwd rstd" + tag, down(d_rstd, N), rstd);
    Vec dx = randn(out.size(), 13), dw = randn(C, 14), dbb = randn(C, 15);
    float *d_dx = up(dx), *d_dw = up(dw), *d_db = up(dbb);
    cpu_->layernorm_bwd(dx.data(), dw.data(), dbb.data(), dout.data(), x.data(), w.data(), mean.data(),
                        rstd.data(), N, C);
    gpu_->layernorm_bwd(d_dx, d_dw, d_db, d_g, d_x, d_w, d_mean, d_rstd, N, C);
    compare("layernorm_bwd dx" + tag, down(d_dx, dx.size()), dx);
    compare("layernorm_bwd dw" + tag, down(d_dw, C), dw, 1e-4, 1e-4);
    compare("layernorm_bwd db" + tag, down(d_db, C), dbb, 1e-4, 1e-4);

    cpu_->rmsnorm_fwd(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    gpu_->rmsnorm_fwd(d_out, d_rstd, d_x, d_w, N, C, 1e-5f);
    compare("rmsnorm_fwd out" + tag, down(d_out, out.size()), out);
    compare("rmsnorm_fwd rstd" + tag, down(d_rstd, N), rstd);
    cpu_->rmsnorm_bwd(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
    gpu_->rmsnorm_bwd(d_dx, d_dw, d_g, d_x, d_w, d_rstd, N, C);
    compare("rmsnorm_bwd dx" + tag, down(d_dx, dx.size()), dx);
    compare("rmsnorm_bwd dw" + tag, down(d_dw, C), dw, 1e-4, 1e-4);
  }
}

// ----------------------------------------------------------- activations ----

TEST_F(CudaOps, GeluAndSwiglu) {
  const size_t n = 50001;
  const Vec x = randn(n, 16, 3.0f), up_ = randn(n, 17), g = randn(n, 18);
  Vec out(n), dx(n), dup(n);
  float *d_out = up(Vec(n)), *d_dx = up(Vec(n)), *d_dup = up(Vec(n));
  float *d_x = up(x), *d_up = up(up_), *d_g = up(g);
  cpu_->gelu_fwd(out.data(), x.data(), n);
  gpu_->gelu_fwd(d_out, d_x, n);
  compare("gelu_fwd", down(d_out, n), out, 1e-6, 1e-5);
  cpu_->gelu_bwd(dx.data(), g.data(), x.data(), n);
  gpu_->gelu_bwd(d_dx, d_g, d_x, n);
  compare("gelu_bwd", down(d_dx, n), dx, 1e-6, 1e-5);
  cpu_->swiglu_fwd(out.data(), x.data(), up_.data(), n);
  gpu_->swiglu_fwd(d_out, d_x, d_up, n);
  compare("swiglu_fwd", down(d_out, n), out, 1e-6, 1e-5);
  cpu_->swiglu_bwd(dx.data(), dup.data(), g.data(), x.data(), up_.data(), n);
  gpu_->swiglu_bwd(d_dx, d_dup, d_g, d_x, d_up, n);
  compare("swiglu_bwd dgate", down(d_dx, n), dx, 1e-6, 1e-5);
  compare("swiglu_bwd dup", down(d_dup, n), dup, 1e-6, 1e-5);
}

// ------------------------------------------------------------------ rope ----

TEST_F(CudaOps, Rope) {
  const int B = 2, T = 33, H = 3, D = 64, pos = 100;
  Vec x = randn(size_t(B) * T * H * D, 19);
  float* d = up(x);
  cpu_->rope_fwd(x.data(), B, T, H, D, pos, 10000.0f);
  gpu_->rope_fwd(d, B, T, H, D, pos, 10000.0f);
  compare("rope_fwd", down(d, x.size()), x, 1e-6, 1e-5);
  cpu_->rope_bwd(x.data(), B, T, H, D, pos, 10000.0f);
  gpu_->rope_bwd(d, B, T, H, D, pos, 10000.0f);
  compare("rope_bwd", down(d, x.size()), x, 1e-6, 1e-5);
}

// ------------------------------------------------------------- embedding ----

TEST_F(CudaOps, EmbeddingVocabSlice) {
  for (int V : {50, 1000}) {  // fewer and more vocabulary rows than dwte's 64 row ranges
    const int B = 3, T = 17, C = 40, vocab_start = V / 2, pos = 5;
    std::mt19937 gen(20);
    IVec tok(size_t(B) * T);
    for (auto& t : tok) t = int32_t(gen() % uint32_t(2 * V));  // about half outside the slice
    const Vec wte = randn(size_t(V) * C, 21), wpe = randn(size_t(T + pos) * C, 22),
              dout = randn(size_t(B) * T * C, 23);
    Vec out(size_t(B) * T * C);
    float* d_out = up(out);
    int32_t* d_tok = up(tok);
    for (bool with_pos : {false, true}) {
      cpu_->embedding_fwd(out.data(), tok.data(), wte.data(), with_pos ? wpe.data() : nullptr, B, T, C,
                          vocab_start, V, pos);
      gpu_->embedding_fwd(d_out, d_tok, up(wte), with_pos ? up(wpe) : nullptr, B, T, C, vocab_start, V, pos);
      compare(with_pos ? "embedding_fwd +wpe" : "embedding_fwd", down(d_out, out.size()), out, 0, 0);
    }
    Vec dwte = randn(wte.size(), 24), dwpe = randn(wpe.size(), 25);
    float *d_dwte = up(dwte), *d_dwpe = up(dwpe);
    cpu_->embedding_bwd(dwte.data(), dwpe.data(), dout.data(), tok.data(), B, T, C, vocab_start, V, pos);
    gpu_->embedding_bwd(d_dwte, d_dwpe, up(dout), d_tok, B, T, C, vocab_start, V, pos);
    compare("embedding_bwd dwte V=" + std::to_string(V), down(d_dwte, dwte.size()), dwte);
    compare("embedding_bwd dwpe V=" + std::to_string(V), down(d_dwpe, dwpe.size()), dwpe);
  }
}

// ------------------------------------------------------------- attention ----

struct AttnCase {
  const char* name;
  int B, Tq, Tk, H, Hkv, D, q_offset, k_offset;
  bool causal;
};

TEST_F(CudaOps, AttentionForwardBackward) {
  const AttnCase cases[] = {
      {"causal gqa D16", 2, 37, 37, 4, 2, 16, 0, 0, true},
      {"causal D64", 1, 70, 70, 2, 2, 64, 0, 0, true},
      {"ring block past keys", 2, 20, 45, 4, 1, 32, 50, 10, true},
      {"ring block, masked rows", 1, 40, 24, 2, 2, 32, 0, 30, true},
      {"non-causal D128", 1, 33, 50, 2, 1, 128, 0, 0, false},
      {"causal D256 (large smem)", 1, 40, 40, 2, 2, 256, 0, 0, true},
  };
  for (const AttnCase& c : cases) {
    const size_t nq = size_t(c.B) * c.Tq * c.H * c.D, nk = size_t(c.B) * c.Tk * c.Hkv * c.D;
    const size_t nl = size_t(c.B) * c.H * c.Tq, np = nl * c.Tk;
    const Vec q = randn(nq, 26), k = randn(nk, 27), v = randn(nk, 28), dout = randn(nq, 29);
    Vec out(nq), lse(nl), probs(np);
    cpu_->attention_fwd(out.data(), lse.data(), probs.data(), q.data(), k.data(), v.data(), c.B, c.Tq,
                        c.Tk, c.H, c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    float *d_q = up(q), *d_k = up(k), *d_v = up(v), *d_out = up(Vec(nq)), *d_lse = up(Vec(nl)),
          *d_probs = up(Vec(np));
    gpu_->attention_fwd(d_out, d_lse, d_probs, d_q, d_k, d_v, c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D,
                        c.q_offset, c.k_offset, c.causal);
    const std::string tag = std::string(" [") + c.name + "]";
    compare("attention_fwd out" + tag, down(d_out, nq), out);
    compare("attention_fwd lse" + tag, down(d_lse, nl), lse);
    compare("attention_fwd probs" + tag, down(d_probs, np), probs, 1e-6, 1e-4);
    Vec dq = randn(nq, 30), dk = randn(nk, 31), dv = randn(nk, 32);
    float *d_dq = up(dq), *d_dk = up(dk), *d_dv = up(dv);
    cpu_->attention_bwd(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), nullptr,
                        q.data(), k.data(), v.data(), c.B, c.Tq, c.Tk, c.H, c.Hkv, c.D, c.q_offset,
                        c.k_offset, c.causal);
    gpu_->attention_bwd(d_dq, d_dk, d_dv, up(dout), d_out, d_lse, d_probs, d_q, d_k, d_v, c.B, c.Tq,
                        c.Tk, c.H, c.Hkv, c.D, c.q_offset, c.k_offset, c.causal);
    compare("attention_bwd dq" + tag, down(d_dq, nq), dq, 1e-4, 1e-4);
    compare("attention_bwd dk" + tag, down(d_dk, nk), dk, 1e-4, 1e-4);
    compare("attention_bwd dv" + tag, down(d_dv, nk), dv, 1e-4, 1e-4);
  }
}

// ---------------------------------------------------------- cross-entropy ----

TEST_F(CudaOps, CrossEntropyVocabSlice) {
  const int N = 19, V = 300, vocab_start = 100;
  const Vec logits = randn(size_t(N) * V, 33, 3.0f);
  std::mt19937 gen(34);
  IVec tg(N);
  for (auto& t : tg) t = int32_t(gen() % 600);
  tg[3] = -1;  // ignored row
  Vec rowmax(N), st(2 * size_t(N)), losses(N), dl(logits.size());
  float *d_log = up(logits), *d_rowmax = up(Vec(N)), *d_st = up(Vec(2 * size_t(N))),
        *d_losses = up(Vec(N)), *d_dl = up(Vec(logits.size()));
  int32_t* d_tg = up(tg);
  cpu_->xent_rowmax(rowmax.data(), logits.data(), N, V);
  gpu_->xent_rowmax(d_rowmax, d_log, N, V);
  compare("xent_rowmax", down(d_rowmax, N), rowmax, 0, 0);
  cpu_->xent_sumexp(st.data(), st.data() + N, logits.data(), rowmax.data(), tg.data(), N, V, vocab_start);
  gpu_->xent_sumexp(d_st, d_st + N, d_log, d_rowmax, d_tg, N, V, vocab_start);
  compare("xent_sumexp / target logit", down(d_st, st.size()), st, 1e-5, 1e-5);
  cpu_->xent_bwd(dl.data(), losses.data(), logits.data(), rowmax.data(), st.data(), st.data() + N,
                 tg.data(), 0.25f, N, V, vocab_start);
  gpu_->xent_bwd(d_dl, d_losses, d_log, d_rowmax, d_st, d_st + N, d_tg, 0.25f, N, V, vocab_start);
  compare("xent_bwd losses", down(d_losses, N), losses);
  compare("xent_bwd dlogits", down(d_dl, dl.size()), dl, 1e-7, 1e-5);
  // In place (dlogits aliasing logits), as the model calls it.
  gpu_->xent_bwd(d_log, nullptr, d_log, d_rowmax, d_st, d_st + N, d_tg, 0.25f, N, V, vocab_start);
  compare("xent_bwd dlogits in place", down(d_log, dl.size()), dl, 1e-7, 1e-5);
}

// ----------------------------------------------------------------- adamw ----

TEST_F(CudaOps, AdamW) {
  const size_t n = 10007;
  Vec p = randn(n, 35), g = randn(n, 36), m = randn(n, 37, 0.1f), v = randn(n, 38, 0.1f);
  for (auto& x : v) x = std::fabs(x);
  float *d_p = up(p), *d_g = up(g), *d_m = up(m), *d_v = up(v);
  for (int step = 1; step <= 3; ++step) {
    cpu_->adamw(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, step);
    gpu_->adamw(d_p, d_g, d_m, d_v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, step);
  }
  compare("adamw p", down(d_p, n), p, 1e-6, 1e-5);
  compare("adamw m", down(d_m, n), m, 1e-7, 1e-5);
  compare("adamw v", down(d_v, n), v, 1e-7, 1e-5);
}

}  // namespace
