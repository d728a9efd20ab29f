// BPE encoding throughput: tokenizer.encode() on one thread, and
// encode_documents (what `pentad prep` runs) on OMP_NUM_THREADS threads, over
// one corpus. The rank file and the corpus come from the environment
// (PENTAD_TOK_RANKS, PENTAD_TOK_CORPUS, PENTAD_TOK_PATTERN optional);
// bench/tokenizer_throughput.sh makes them and runs js-tiktoken beside it.
// And the time to load a Hugging Face tokenizer.json (PENTAD_TOK_JSON: the
// file or its folder), what `pentad sample --tokenizer` and `prep` pay
// before the first token: reading, checking and indexing the vocabulary
// and the merges.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "tok/bpe.hpp"
#include "tok/parallel.hpp"
#include "tok/tokenizer.hpp"

namespace {

struct Setup {
  std::unique_ptr<pentad::Tokenizer> tok;
  std::string text;
  std::string error;
};

const Setup& setup() {
  static const Setup s = [] {
    Setup r;
    const char* ranks = std::getenv("PENTAD_TOK_RANKS");
    const char* corpus = std::getenv("PENTAD_TOK_CORPUS");
    const char* pattern = std::getenv("PENTAD_TOK_PATTERN");
    if (ranks == nullptr || corpus == nullptr) {
      r.error = "set PENTAD_TOK_RANKS and PENTAD_TOK_CORPUS (bench/tokenizer_throughput.sh does)";
      return r;
    }
    r.tok = pentad::load_tiktoken(ranks, pattern ? pattern : "");
    std::ifstream f(corpus, std::ios::binary);
    r.text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (r.text.empty()) r.error = std::string("empty or unreadable corpus ") + corpus;
    return r;
  }();
  return s;
}

void BM_encode_1thread(benchmark::State& state) {
  const Setup& s = setup();
  if (!s.error.empty()) return state.SkipWithError(s.error.c_str());
  size_t n_ids = 0;
  for (auto _ : state) n_ids = s.tok->encode(s.text).size();
  state.SetBytesProcessed(int64_t(state.iterations() * s.text.size()));
  state.counters["ids"] = double(n_ids);
  state.counters["threads"] = 1;
}

void BM_encode_all_threads(benchmark::State& state) {
  const Setup& s = setup();
  if (!s.error.empty()) return state.SkipWithError(s.error.c_str());
  size_t n_ids = 0;
  for (auto _ : state) n_ids = pentad::encode_documents(*s.tok, {s.text})[0].size();
  state.SetBytesProcessed(int64_t(state.iterations() * s.text.size()));
  state.counters["ids"] = double(n_ids);
  state.counters["threads"] = omp_get_max_threads();
}

void BM_load_tokenizer_json(benchmark::State& state) {
  const char* path = std::getenv("PENTAD_TOK_JSON");
  if (path == nullptr) return state.SkipWithError("set PENTAD_TOK_JSON to a tokenizer.json or its folder");
  int64_t n = 0;
  for (auto _ : state) n = pentad::load_tokenizer(path, "")->vocab_size();
  state.counters["vocab"] = double(n);
}

}  // namespace

BENCHMARK(BM_load_tokenizer_json)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5)->Repetitions(3);
BENCHMARK(BM_encode_1thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_encode_all_threads)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
