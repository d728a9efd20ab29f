// One token drawn from a vocabulary's logits (infer/sampler.hpp), what
// `pentad sample` pays per generated token besides the forward: the
// candidates ordered by logit, the softmax, the nucleus, the draw. Args:
// the vocabulary (GPT-2's, Llama 3's, Gemma's) and top-k (0: all).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "infer/sampler.hpp"

namespace {

void BM_sample_token(benchmark::State& state) {
  const int V = int(state.range(0));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(V));
  for (float& x : logits) x = normal(rng);
  const pentad::SampleParams p{0.8, int(state.range(1)), 0.95, 1};
  uint64_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(pentad::sample_token(logits.data(), V, p, i++));
}

}  // namespace

BENCHMARK(BM_sample_token)
    ->ArgNames({"vocab", "top_k"})
    ->ArgsProduct({{50257, 128256, 256000}, {0, 50}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
