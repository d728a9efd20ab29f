// The CPU backend's kernels, op family by op family, forward and backward,
// at one model shape, each with its rate beside the machine's in the same run: GEMMs in
// GFLOP/s against sgemm at the same shape's forward (the NT product a Linear
// runs), memory-bound ops in GB/s against a STREAM-like copy. Every call is
// the one the model makes (parallel/tp/layers.cpp, vocab.cpp, model.cpp),
// with the same operand layouts:
//   forward      y(N, out) = x(N, in) W(out, in)^T        gemm(N,T)
//   input grad   dx(N, in) = dy(N, out) W(out, in)        gemm(N,N)
//   weight grad  dW(out, in) += dy(N, out)^T x(N, in)     gemm(T,N), beta 1
// The head runs in chunks of head_rows() rows (memory_plan.cpp), exactly as
// the model cuts it; its weight gradient is the tied embedding's.
// Shape from the environment, as bench_train (defaults: GPT-2 124M, B=4,
// T=256): PENTAD_BENCH_LAYERS (unused here), _DMODEL, _HEADS, _VOCAB, _SEQ,
// _BATCH, _FAMILY (gpt2|llama).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu.hpp"
#include "backend/backend.hpp"
#include "model/memory_plan.hpp"

namespace {

using pentad::Backend;
using pentad::Mem;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

struct Shape {
  bool gpt2 = true;
  int B = 4, T = 256, C = 768, H = 12, D = 64, F = 3072, V = 50257;
  int Vp = 50304;     // V padded as the model holds it (model.pad_vocab_to)
  int N() const { return B * T; }
  int head_rows = 0;  // the model's chunk of the head
};

const Shape& shape() {
  static const Shape s = [] {
    Shape x;
    const char* fam = std::getenv("PENTAD_BENCH_FAMILY");
    x.gpt2 = !(fam && std::string(fam) == "llama");
    x.C = env_int("PENTAD_BENCH_DMODEL", 768);
    x.H = env_int("PENTAD_BENCH_HEADS", 12);
    x.D = x.C / x.H;
    x.F = x.gpt2 ? 4 * x.C : (8 * x.C / 3 + 31) / 32 * 32;
    x.V = env_int("PENTAD_BENCH_VOCAB", 50257);
    x.T = env_int("PENTAD_BENCH_SEQ", 256);
    x.B = env_int("PENTAD_BENCH_BATCH", 4);
    pentad::ModelConfig m;
    m.family = x.gpt2 ? pentad::Family::gpt2 : pentad::Family::llama;
    m.n_layers = 1;
    m.d_model = x.C;
    m.n_heads = x.H;
    m.n_kv_heads = x.H;
    m.d_ff = x.F;
    m.vocab_size = x.V;
    m.seq_len = x.T;
    pentad::RankLayout one_rank;
    one_rank.cp.seq_len = x.T;  // whole sequences on one rank
    const pentad::MemoryPlan plan(m, pentad::Recompute::none, x.B, one_rank);
    x.head_rows = plan.head_rows();
    x.Vp = m.padded_vocab(1);
    return x;
  }();
  return s;
}

Backend& backend() {
  static std::unique_ptr<Backend> be = pentad::make_cpu_backend(0);
  return *be;
}

// A backend buffer of n floats, uniform in [-sd, sd) (a cheap generator:
// the head's buffers hold tens of millions of values, and the values do not
// change the speed of any kernel here).
struct Buf {
  float* p;
  size_t n;
  explicit Buf(size_t n_, float sd = 1.0f, uint32_t seed = 1) : p(backend().alloc(n_, Mem::scratch)), n(n_) {
    std::vector<float> h(n);
    uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (auto& v : h) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v = sd * (float(x >> 40) * (2.0f / 16777216.0f) - 1.0f);
    }
    backend().from_host(p, h.data(), n * sizeof(float));
  }
  ~Buf() { backend().free_bytes(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

// n token ids, uniform below vocab, in backend memory.
struct Tokens {
  int32_t* p;
  Tokens(size_t n, int vocab, uint32_t seed) : p(backend().alloc_i32(n, Mem::scratch)) {
    std::mt19937 gen(seed);
    std::vector<int32_t> h(n);
    for (auto& t : h) t = int32_t(gen() % uint32_t(vocab));
    backend().from_host(p, h.data(), n * sizeof(int32_t));
  }
  ~Tokens() { backend().free_bytes(p); }
  Tokens(const Tokens&) = delete;
  Tokens& operator=(const Tokens&) = delete;
};

// Each benchmark runs untimed for this long first. On the development VM
// (2026-12-02) freshly allocated buffers stay slow for a while: the first
// pass over memory after a large free() ran ~30x slower than the next, and
// the head's GEMMs over their new 154 MB operands took ~1 s to reach their
// steady rate, so one-iteration samples measured the VM, not the op.
constexpr double kWarmUp = 1.0;

// Every benchmark's timing: wall clock, after the warm-up.
void timed(benchmark::internal::Benchmark* b) { b->UseRealTime()->MinWarmUpTime(kWarmUp); }

void flops(benchmark::State& state, double per_iter) {
  state.counters["GFLOP/s"] = benchmark::Counter(per_iter * double(state.iterations()) * 1e-9,
                                                 benchmark::Counter::kIsRate);
}
void bytes(benchmark::State& state, double per_iter) {
  state.counters["GB/s"] = benchmark::Counter(per_iter * double(state.iterations()) * 1e-9,
                                              benchmark::Counter::kIsRate);
}

// ---- the machine's reference rates --------------------------------------------------

void BM_ref_sgemm_2048(benchmark::State& state) {
  const int n = 2048;
  Buf a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
  for (auto _ : state) {
    backend().gemm(false, false, n, n, n, 1.0f, a.p, n, b.p, n, 0.0f, c.p, n);
    benchmark::ClobberMemory();
  }
  flops(state, 2.0 * n * n * double(n));
}
BENCHMARK(BM_ref_sgemm_2048)->Unit(benchmark::kMillisecond)->Apply(timed);

// STREAM-like copy of 64 MiB (beyond the caches): read + write bytes.
void BM_ref_copy(benchmark::State& state) {
  const size_t n = size_t(16) << 20;
  Buf a(n), b(n);
  for (auto _ : state) {
    backend().copy_bytes(b.p, a.p, n * sizeof(float));
    benchmark::ClobberMemory();
  }
  bytes(state, 2.0 * double(n) * sizeof(float));
}
BENCHMARK(BM_ref_copy)->Unit(benchmark::kMillisecond)->Apply(timed);

// ---- linear layers: forward, input gradient, weight gradient ---------------------------

// Arg 0: which linear (0 q/k/v/o (C,C), 1 MLP up (F,C), 2 MLP down (C,F));
// arg 1: 0 forward, 1 input grad, 2 weight grad.
void BM_linear(benchmark::State& state) {
  const Shape& s = shape();
  const int which = int(state.range(0)), pass = int(state.range(1));
  const int n_out = which == 1 ? s.F : s.C, n_in = which == 2 ? s.F : s.C, N = s.N();
  Buf x(size_t(N) * n_in), W(size_t(n_out) * n_in, 0.02f), y(size_t(N) * n_out), dW(size_t(n_out) * n_in);
  Backend& be = backend();
  for (auto _ : state) {
    if (pass == 0) be.gemm(false, true, N, n_out, n_in, 1.0f, x.p, n_in, W.p, n_in, 0.0f, y.p, n_out);
    if (pass == 1) be.gemm(false, false, N, n_in, n_out, 1.0f, y.p, n_out, W.p, n_in, 0.0f, x.p, n_in);
    if (pass == 2) be.gemm(true, false, n_out, n_in, N, 1.0f, y.p, n_out, x.p, n_in, 1.0f, dW.p, n_in);
    benchmark::ClobberMemory();
  }
  flops(state, 2.0 * N * double(n_out) * n_in);
}
BENCHMARK(BM_linear)
    ->ArgNames({"linear", "pass"})
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->Apply(timed);

// The head over all N rows in the model's chunks: arg 0 forward (logits),
// 1 input grad, 2 weight grad (the tied embedding's (V, C) gradient).
void BM_head(benchmark::State& state) {
  const Shape& s = shape();
  const int pass = int(state.range(0)), N = s.N(), rows = s.head_rows;
  Buf x(size_t(N) * s.C), W(size_t(s.Vp) * s.C, 0.02f), logits(size_t(rows) * s.Vp), dx(size_t(N) * s.C),
      dW(size_t(s.Vp) * s.C);
  Backend& be = backend();
  for (auto _ : state) {
    for (int r0 = 0; r0 < N; r0 += rows) {
      const int n = std::min(rows, N - r0);
      const float* xr = x.p + size_t(r0) * s.C;
      if (pass == 0) be.gemm(false, true, n, s.Vp, s.C, 1.0f, xr, s.C, W.p, s.C, 0.0f, logits.p, s.Vp);
      if (pass == 1)
        be.gemm(false, false, n, s.C, s.Vp, 1.0f, logits.p, s.Vp, W.p, s.C, 0.0f, dx.p + size_t(r0) * s.C, s.C);
      if (pass == 2) be.gemm(true, false, s.Vp, s.C, n, 1.0f, logits.p, s.Vp, xr, s.C, 1.0f, dW.p, s.C);
    }
    benchmark::ClobberMemory();
  }
  flops(state, 2.0 * N * double(s.Vp) * s.C);  // the padded rows are computed too
  state.counters["chunks"] = double((N + rows - 1) / rows);
}
BENCHMARK(BM_head)->ArgName("pass")->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->Apply(timed);

// ---- attention ------------------------------------------------------------------------

// Causal FLOPs: forward QK^T and PV over the visible half, 2 x 2BHT^2D/2;
// backward recomputes P and runs dV, dP, dQ, dK: 5 x 2BHT^2D/2.
void BM_attention(benchmark::State& state) {
  const Shape& s = shape();
  const bool bwd = state.range(0) != 0;
  const size_t nq = size_t(s.N()) * s.H * s.D;
  Buf q(nq), k(nq), v(nq), out(nq), lse(size_t(s.B) * s.H * s.T), dout(nq), dq(nq), dk(nq), dv(nq);
  Backend& be = backend();
  be.attention_fwd(out.p, lse.p, nullptr, q.p, k.p, v.p, s.B, s.T, s.T, s.H, s.H, s.D, 0, 0, true);
  for (auto _ : state) {
    if (bwd)
      be.attention_bwd(dq.p, dk.p, dv.p, dout.p, out.p, lse.p, nullptr, q.p, k.p, v.p, s.B, s.T, s.T, s.H, s.H, s.D,
                       0, 0, true);
    else
      be.attention_fwd(out.p, lse.p, nullptr, q.p, k.p, v.p, s.B, s.T, s.T, s.H, s.H, s.D, 0, 0, true);
    benchmark::ClobberMemory();
  }
  const double half = double(s.B) * s.H * double(s.T) * s.T * s.D;  // 2BHT^2D / 2
  flops(state, (bwd ? 5.0 : 2.0) * half);
}
BENCHMARK(BM_attention)->ArgName("bwd")->DenseRange(0, 1)->Unit(benchmark::kMillisecond)->Apply(timed);

// ---- memory-bound ops (bytes read + written, fp32) ---------------------------------------

// LayerNorm (GPT-2) or RMSNorm (Llama) over (N, C): forward reads x, writes
// out; backward reads dout and x, writes dx (the weight gradients are C-sized).
void BM_norm(benchmark::State& state) {
  const Shape& s = shape();
  const bool bwd = state.range(0) != 0;
  const size_t n = size_t(s.N()) * s.C;
  Buf x(n), out(n), dout(n), dx(n), w(size_t(s.C)), b(size_t(s.C)), dw(size_t(s.C)), db(size_t(s.C)),
      mean(size_t(s.N())), rstd(size_t(s.N()));
  Backend& be = backend();
  if (s.gpt2)
    be.layernorm_fwd(out.p, mean.p, rstd.p, x.p, w.p, b.p, s.N(), s.C, 1e-5f);
  else
    be.rmsnorm_fwd(out.p, rstd.p, x.p, w.p, s.N(), s.C, 1e-5f, 0.0f);
  for (auto _ : state) {
    if (s.gpt2 && bwd) be.layernorm_bwd(dx.p, dw.p, db.p, dout.p, x.p, w.p, mean.p, rstd.p, s.N(), s.C);
    if (s.gpt2 && !bwd) be.layernorm_fwd(out.p, mean.p, rstd.p, x.p, w.p, b.p, s.N(), s.C, 1e-5f);
    if (!s.gpt2 && bwd) be.rmsnorm_bwd(dx.p, dw.p, dout.p, x.p, w.p, rstd.p, s.N(), s.C, 0.0f);
    if (!s.gpt2 && !bwd) be.rmsnorm_fwd(out.p, rstd.p, x.p, w.p, s.N(), s.C, 1e-5f, 0.0f);
    benchmark::ClobberMemory();
  }
  bytes(state, (bwd ? 3.0 : 2.0) * double(n) * sizeof(float));
}
BENCHMARK(BM_norm)->ArgName("bwd")->DenseRange(0, 1)->Unit(benchmark::kMicrosecond)->Apply(timed);

// GELU (GPT-2) or SwiGLU (Llama) over (N, F): forward reads 1 (2) and writes
// 1 array; backward reads 2 (3) and writes 1 (2).
void BM_mlp_act(benchmark::State& state) {
  const Shape& s = shape();
  const bool bwd = state.range(0) != 0;
  const size_t n = size_t(s.N()) * s.F;
  Buf a(n), b(n), c(n), d(n), e(n);
  Backend& be = backend();
  for (auto _ : state) {
    if (s.gpt2 && bwd) be.gelu_bwd(c.p, b.p, a.p, n);
    if (s.gpt2 && !bwd) be.gelu_fwd(b.p, a.p, n);
    if (!s.gpt2 && bwd) be.glu_bwd(d.p, e.p, c.p, a.p, b.p, n, pentad::GateAct::silu);
    if (!s.gpt2 && !bwd) be.glu_fwd(c.p, a.p, b.p, n, pentad::GateAct::silu);
    benchmark::ClobberMemory();
  }
  const double arrays = s.gpt2 ? (bwd ? 3.0 : 2.0) : (bwd ? 5.0 : 3.0);
  bytes(state, arrays * double(n) * sizeof(float));
}
BENCHMARK(BM_mlp_act)->ArgName("bwd")->DenseRange(0, 1)->Unit(benchmark::kMicrosecond)->Apply(timed);

// Bias gradient of the widest bias (the MLP's up, (N, F) -> F): reads N x F.
void BM_bias_bwd(benchmark::State& state) {
  const Shape& s = shape();
  const size_t n = size_t(s.N()) * s.F;
  Buf dout(n), db(size_t(s.F));
  for (auto _ : state) {
    backend().bias_bwd(db.p, dout.p, s.N(), s.F);
    benchmark::ClobberMemory();
  }
  bytes(state, double(n) * sizeof(float));
}
BENCHMARK(BM_bias_bwd)->Unit(benchmark::kMicrosecond)->Apply(timed);

// Embedding backward: N rows of dout added into their tokens' rows of dwte
// (and dwpe for GPT-2): reads N x C, reads and writes N x C of dwte.
void BM_embedding_bwd(benchmark::State& state) {
  const Shape& s = shape();
  const size_t n = size_t(s.N()) * s.C;
  Buf dout(n), dwte(size_t(s.V) * s.C), dwpe(size_t(s.T) * s.C);
  Tokens tok(size_t(s.N()), s.V, 3);
  for (auto _ : state) {
    backend().embedding_bwd(dwte.p, s.gpt2 ? dwpe.p : nullptr, dout.p, tok.p, s.B, s.T, s.C, 0, s.V, 0);
    benchmark::ClobberMemory();
  }
  bytes(state, 3.0 * double(n) * sizeof(float));
}
BENCHMARK(BM_embedding_bwd)->Unit(benchmark::kMicrosecond)->Apply(timed);

// Cross-entropy over the head's chunks: row max, sum of exp, then the loss
// and dlogits in place (reads the logits three times, writes them once).
void BM_xent(benchmark::State& state) {
  const Shape& s = shape();
  const int rows = s.head_rows, N = s.N();
  Buf logits(size_t(rows) * s.Vp), rowmax(static_cast<size_t>(rows)), sumexp(size_t(2) * rows),
      losses(static_cast<size_t>(N));
  Tokens tg(static_cast<size_t>(N), s.V, 5);
  Backend& be = backend();
  for (auto _ : state) {
    for (int r0 = 0; r0 < N; r0 += rows) {
      const int n = std::min(rows, N - r0);
      be.xent_rowmax(rowmax.p, logits.p, n, s.V, s.Vp);
      be.xent_sumexp(sumexp.p, sumexp.p + rows, logits.p, rowmax.p, tg.p + r0, n, s.V, s.Vp, 0);
      be.xent_bwd(logits.p, losses.p + r0, logits.p, rowmax.p, sumexp.p, sumexp.p + rows, tg.p + r0,
                  1e-3f, n, s.V, s.Vp, 0);
    }
    benchmark::ClobberMemory();
  }
  bytes(state, 4.0 * double(N) * s.V * sizeof(float));
}
BENCHMARK(BM_xent)->Unit(benchmark::kMillisecond)->Apply(timed);

// AdamW over the head-sized (V, C) tensor: reads p, g, m, v; writes p, m, v.
void BM_adamw(benchmark::State& state) {
  const Shape& s = shape();
  const size_t n = size_t(s.V) * s.C;
  Buf p(n), g(n), m(n, 0.0f), v(n, 0.0f);
  backend().fill(m.p, 0.0f, n);
  backend().fill(v.p, 0.0f, n);
  int step = 0;
  for (auto _ : state) {
    backend().adamw(p.p, g.p, m.p, v.p, n, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, ++step);
    benchmark::ClobberMemory();
  }
  bytes(state, 7.0 * double(n) * sizeof(float));
}
BENCHMARK(BM_adamw)->Unit(benchmark::kMillisecond)->Apply(timed);

}  // namespace

BENCHMARK_MAIN();
