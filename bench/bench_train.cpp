// Whole-step throughput of the serial model (forward, backward, AdamW) at a
// given shape, beside the machine's sgemm rate measured in the same run.
// Counters: tokens/s and GFLOP/s with FLOPs per token = 6N + 12*L*C*T.
// Shape from the environment (defaults: GPT-2 124M, B=4, T=256):
//   PENTAD_BENCH_LAYERS, _DMODEL, _HEADS, _VOCAB, _SEQ, _BATCH, _FAMILY (gpt2|llama)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cpu.hpp"
#include "backend/backend.hpp"
#include "train/metrics.hpp"
#include "model/model.hpp"
#include "parallel/dp/optimizer.hpp"
#include "core/rng.hpp"

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

void BM_sgemm(benchmark::State& state) {
  const int n = int(state.range(0));
  auto be = pentad::make_cpu_backend(0);
  float* a = be->alloc(size_t(n) * n, pentad::Mem::scratch);
  float* b = be->alloc(size_t(n) * n, pentad::Mem::scratch);
  float* c = be->alloc(size_t(n) * n, pentad::Mem::scratch);
  be->fill(a, 0.5f, size_t(n) * n);
  be->fill(b, 0.25f, size_t(n) * n);
  for (auto _ : state) {
    be->gemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    benchmark::DoNotOptimize(c);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * double(n) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  be->free_bytes(a);
  be->free_bytes(b);
  be->free_bytes(c);
}
BENCHMARK(BM_sgemm)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_train_step(benchmark::State& state) {
  pentad::ModelConfig m;
  m.family = std::string(std::getenv("PENTAD_BENCH_FAMILY") ? std::getenv("PENTAD_BENCH_FAMILY") : "gpt2") == "llama"
                 ? pentad::Family::llama
                 : pentad::Family::gpt2;
  m.n_layers = env_int("PENTAD_BENCH_LAYERS", 12);
  m.d_model = env_int("PENTAD_BENCH_DMODEL", 768);
  m.n_heads = env_int("PENTAD_BENCH_HEADS", 12);
  m.n_kv_heads = m.n_heads;
  m.d_ff = m.family == pentad::Family::gpt2 ? 4 * m.d_model : (8 * m.d_model / 3 + 31) / 32 * 32;
  m.vocab_size = env_int("PENTAD_BENCH_VOCAB", 50257);
  m.seq_len = env_int("PENTAD_BENCH_SEQ", 256);
  m.tied_embeddings = m.family == pentad::Family::gpt2 ? 1 : 0;
  const int B = env_int("PENTAD_BENCH_BATCH", 4);
  pentad::TrainConfig t;
  auto be = pentad::make_cpu_backend(0);
  pentad::Model model(m, pentad::Recompute(state.range(0)), B, *be);
  model.params().allocate_and_init(1);
  pentad::AdamW opt(model.params(), *be, t);
  const size_t n = size_t(B) * m.seq_len;
  std::vector<int32_t> in(n), tg(n);
  const pentad::CounterRng rng{7, 7};
  for (size_t i = 0; i < n; ++i) {
    in[i] = int32_t(rng.u64(2 * i) % uint64_t(m.vocab_size));
    tg[i] = int32_t(rng.u64(2 * i + 1) % uint64_t(m.vocab_size));
  }
  int step = 0;
  auto train_step = [&] {
    model.params().zero_grads();
    const double loss = model.forward_backward(in.data(), tg.data(), float(1.0 / double(n)));
    const double norm = std::sqrt(be->sum_squares(model.params().grads(), model.params().numel()));
    opt.step(++step, 1e-4f, pentad::clip_scale(norm, 1.0f));
    benchmark::DoNotOptimize(loss);
  };
  // One untimed step first, as bench/torch_peer.py does: it touches every
  // activation, gradient and moment page for the first time, which costs
  // ~2 s at this shape on a VM whose first-touch page faults run at
  // ~0.4 GB/s (docs/benchmarks.md).
  train_step();
  for (auto _ : state) train_step();
  const double fpt = pentad::flops_per_token(m, double(model.params().global_numel()));
  state.counters["tokens/s"] = benchmark::Counter(double(n) * state.iterations(), benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(double(n) * fpt * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["params_M"] = double(model.params().global_numel()) / 1e6;
  state.counters["act_MiB"] = double(model.activation_bytes()) / (1 << 20);
}
// Arg: recompute policy (0 none, 1 selective, 2 full).
BENCHMARK(BM_train_step)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

}  // namespace

BENCHMARK_MAIN();
