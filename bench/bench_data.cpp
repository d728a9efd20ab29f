// The batch sampler's cost (io/dataset.hpp): BatchSampler::fill for one
// rank's share of a global batch, T = 1024, over 8 shards of 4 Mi tokens
// (64 MiB, made once in $TMPDIR), in random and epoch order and as a 3:1
// blend, beside its peer: copying the same number of tokens from one
// contiguous run of the same files (the widening uint16 -> int32 copy any
// loader must do). The ratio is what choosing sequences costs.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/data.hpp"
#include "io/dataset.hpp"

namespace {

constexpr int kT = 1024;
constexpr int kShards = 8;
constexpr int kShardTokens = 4 << 20;

struct Files {
  std::string dir, spec_all, spec_blend;
};

const Files& files() {
  static const Files f = [] {
    Files r;
    std::string tmpl = (std::filesystem::temp_directory_path() / "pentad_bench_data_XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) return r;
    r.dir = tmpl;
    std::vector<uint16_t> tok(kShardTokens);
    for (int s = 0; s < kShards; ++s) {
      for (int i = 0; i < kShardTokens; ++i) tok[size_t(i)] = uint16_t((i * 2654435761u + s) % 50257);
      const std::string p = r.dir + "/shard_" + std::to_string(s) + ".bin";
      pentad::write_token_file(p, tok);
      r.spec_all += (s ? "," : "") + p;
    }
    r.spec_blend = r.dir + "/shard_[0-6].bin," + r.dir + "/shard_7.bin";  // two sources
    std::atexit([] { std::filesystem::remove_all(files().dir); });
    return r;
  }();
  return f;
}

// One rank's sequences of the batch (range(0) of them) for successive steps.
void run_fill(benchmark::State& state, pentad::DataOrder order, bool blend) {
  const Files& f = files();
  const int n_seq = int(state.range(0));
  const std::vector<double> w = blend ? std::vector<double>{3.0, 1.0} : std::vector<double>{};
  const pentad::TokenDataset data("data.train", blend ? f.spec_blend : f.spec_all, w, 65536, kT);
  const pentad::BatchSampler batches(data, order, 1234, int64_t(n_seq) * 8);  // as rank 0 of dp 8
  std::vector<int32_t> in(size_t(n_seq) * kT), tg(size_t(n_seq) * kT);
  int64_t step = 1;
  for (auto _ : state) {
    batches.fill(step++, 0, n_seq, in.data(), tg.data());
    benchmark::DoNotOptimize(in.data());
  }
  state.SetItemsProcessed(state.iterations() * int64_t(n_seq) * kT);
}

void BM_fill_random(benchmark::State& state) { run_fill(state, pentad::DataOrder::random, false); }
void BM_fill_epoch(benchmark::State& state) { run_fill(state, pentad::DataOrder::epoch, false); }
void BM_fill_blend_epoch(benchmark::State& state) { run_fill(state, pentad::DataOrder::epoch, true); }

// The peer: the same tokens' worth copied from one contiguous run, moving
// through the files step by step (no choice of sequence at all).
void BM_contiguous_copy(benchmark::State& state) {
  const Files& f = files();
  const int n_seq = int(state.range(0));
  const pentad::TokenDataset data("data.train", f.spec_all, {}, 65536, kT);
  const pentad::TokenShards& all = data.all();
  std::vector<int32_t> in(size_t(n_seq) * kT), tg(size_t(n_seq) * kT);
  int64_t w = 0;
  for (auto _ : state) {
    for (int s = 0; s < n_seq; ++s, ++w) all.read_window(w % all.window_count(), &in[size_t(s) * kT], &tg[size_t(s) * kT]);
    benchmark::DoNotOptimize(in.data());
  }
  state.SetItemsProcessed(state.iterations() * int64_t(n_seq) * kT);
}

}  // namespace

BENCHMARK(BM_contiguous_copy)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_fill_random)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_fill_epoch)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_fill_blend_epoch)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
