// CPU backend kernels at the GPT-2 124M shapes (B=4, T=256, C=768, H=12,
// D=64, F=3072, V=50257): sgemm in GFLOP/s, the rest in time per call, to be
// read side by side with the same ops in PyTorch on the same machine.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "cpu.hpp"
#include "backend/backend.hpp"

namespace {

using pentad::Backend;
using pentad::Mem;

Backend& backend() {
  static std::unique_ptr<Backend> be = pentad::make_cpu_backend(0);
  return *be;
}

// A backend buffer of n floats filled with N(0, sd^2) values.
struct Buf {
  float* p;
  size_t n;
  Buf(size_t n_, float sd = 1.0f, uint32_t seed = 1) : p(backend().alloc(n_, Mem::scratch)), n(n_) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, sd);
    std::vector<float> h(n);
    for (auto& x : h) x = dist(gen);
    backend().from_host(p, h.data(), n * sizeof(float));
  }
  ~Buf() { backend().free_bytes(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

constexpr int kB = 4, kT = 256, kC = 768, kH = 12, kD = 64, kV = 50257;
constexpr int kN = kB * kT;

// Forward-pass product shapes: C(M,N) = A(M,K) B(N,K)^T, as a Linear layer.
void BM_sgemm(benchmark::State& state) {
  const int M = kN, N = int(state.range(0)), K = int(state.range(1));
  Buf a(size_t(M) * K), b(size_t(N) * K), c(size_t(M) * N);
  for (auto _ : state) {
    backend().gemm(false, true, M, N, K, 1.0f, a.p, K, b.p, K, 0.0f, c.p, N);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * N * K * state.iterations() * 1e-9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_sgemm)->Args({768, 768})->Args({3072, 768})->Args({768, 3072})->Args({kV, 768})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_attention_fwd(benchmark::State& state) {
  const size_t nq = size_t(kB) * kT * kH * kD;
  Buf q(nq), k(nq), v(nq), out(nq), lse(size_t(kB) * kH * kT);
  for (auto _ : state) {
    backend().attention_fwd(out.p, lse.p, nullptr, q.p, k.p, v.p, kB, kT, kT, kH, kH, kD, 0, 0,
                            true);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_attention_fwd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_attention_bwd(benchmark::State& state) {
  const size_t nq = size_t(kB) * kT * kH * kD;
  Buf q(nq), k(nq), v(nq), out(nq), lse(size_t(kB) * kH * kT), dout(nq), dq(nq), dk(nq), dv(nq);
  backend().attention_fwd(out.p, lse.p, nullptr, q.p, k.p, v.p, kB, kT, kT, kH, kH, kD, 0, 0,
                          true);
  for (auto _ : state) {
    backend().attention_bwd(dq.p, dk.p, dv.p, dout.p, out.p, lse.p, nullptr, q.p, k.p, v.p, kB,
                            kT, kT, kH, kH, kD, 0, 0, true);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_attention_bwd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_layernorm_fwd(benchmark::State& state) {
  Buf x(size_t(kN) * kC), w(kC), b(kC), out(size_t(kN) * kC), mean(kN), rstd(kN);
  for (auto _ : state) {
    backend().layernorm_fwd(out.p, mean.p, rstd.p, x.p, w.p, b.p, kN, kC, 1e-5f);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_layernorm_fwd)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_layernorm_bwd(benchmark::State& state) {
  Buf x(size_t(kN) * kC), w(kC), b(kC), out(size_t(kN) * kC), mean(kN), rstd(kN);
  Buf dout(size_t(kN) * kC), dx(size_t(kN) * kC), dw(kC), db(kC);
  backend().layernorm_fwd(out.p, mean.p, rstd.p, x.p, w.p, b.p, kN, kC, 1e-5f);
  for (auto _ : state) {
    backend().layernorm_bwd(dx.p, dw.p, db.p, dout.p, x.p, w.p, mean.p, rstd.p, kN, kC);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_layernorm_bwd)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_rmsnorm_fwd(benchmark::State& state) {
  Buf x(size_t(kN) * kC), w(kC), out(size_t(kN) * kC), rstd(kN);
  for (auto _ : state) {
    backend().rmsnorm_fwd(out.p, rstd.p, x.p, w.p, kN, kC, 1e-5f);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_rmsnorm_fwd)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_rmsnorm_bwd(benchmark::State& state) {
  Buf x(size_t(kN) * kC), w(kC), out(size_t(kN) * kC), rstd(kN);
  Buf dout(size_t(kN) * kC), dx(size_t(kN) * kC), dw(kC);
  backend().rmsnorm_fwd(out.p, rstd.p, x.p, w.p, kN, kC, 1e-5f);
  for (auto _ : state) {
    backend().rmsnorm_bwd(dx.p, dw.p, dout.p, x.p, w.p, rstd.p, kN, kC);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_rmsnorm_bwd)->Unit(benchmark::kMicrosecond)->UseRealTime();

// GELU over the MLP hidden activation (B*T, 4C).
void BM_gelu_fwd(benchmark::State& state) {
  const size_t n = size_t(kN) * 4 * kC;
  Buf x(n), out(n);
  for (auto _ : state) {
    backend().gelu_fwd(out.p, x.p, n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 8);
}
BENCHMARK(BM_gelu_fwd)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_gelu_bwd(benchmark::State& state) {
  const size_t n = size_t(kN) * 4 * kC;
  Buf x(n), dout(n), dx(n);
  for (auto _ : state) {
    backend().gelu_bwd(dx.p, dout.p, x.p, n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 12);
}
BENCHMARK(BM_gelu_bwd)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_adamw(benchmark::State& state) {
  const size_t n = 10'000'000;
  Buf p(n), g(n), m(n, 0.0f), v(n, 0.0f);
  int step = 0;
  for (auto _ : state) {
    backend().adamw(p.p, g.p, m.p, v.p, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, ++step);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 28);
}
BENCHMARK(BM_adamw)->Unit(benchmark::kMillisecond)->UseRealTime();

// The three cross-entropy steps over full-vocabulary logits (B*T, V).
void BM_xent(benchmark::State& state) {
  const size_t n = size_t(kN) * kV;
  Buf logits(n, 2.0f), dlogits(n), rowmax(kN), sumexp(kN), tl(kN), losses(kN);
  int32_t* targets = backend().alloc_i32(kN, Mem::scratch);
  std::vector<int32_t> h(kN);
  for (int i = 0; i < kN; ++i) h[i] = (i * 7919) % kV;
  backend().from_host(targets, h.data(), kN * sizeof(int32_t));
  for (auto _ : state) {
    backend().xent_rowmax(rowmax.p, logits.p, kN, kV);
    backend().xent_sumexp(sumexp.p, tl.p, logits.p, rowmax.p, targets, kN, kV, 0);
    backend().xent_bwd(dlogits.p, losses.p, logits.p, rowmax.p, sumexp.p, tl.p, targets,
                       1.0f / kN, kN, kV, 0);
    benchmark::ClobberMemory();
  }
  backend().free_bytes(targets);
}
BENCHMARK(BM_xent)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
