// The inference engine against the training model, and the sampler.
// KV cache: the engine's logits at every position of a sequence, computed
// incrementally (a prefill of a prefix, then one position per forward, and
// one position per forward from the start), equal the logits of the
// training Model's full forward over the sequence (causal: row t is the
// forward of the prefix [0, t]) within 1e-5 of max|logit|, for GPT-2, Llama
// with grouped-query attention, and MoE with nothing dropped in training.
// Sampler: greedy ties, top-k = 1 and a tiny top-p are greedy, a seed
// repeats, and the draws follow softmax(logits / T) over the kept tokens.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../lib/close.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "cpu.hpp"
#include "infer/engine.hpp"
#include "infer/sampler.hpp"
#include "tok/utf8.hpp"
#include "model/model.hpp"

namespace {

using namespace pentad;

ModelConfig tiny(Family f) {
  ModelConfig m;
  m.family = f;
  m.n_layers = 2;
  m.d_model = 32;
  m.n_heads = 4;
  m.n_kv_heads = f == Family::llama ? 2 : 4;
  m.d_ff = f == Family::llama ? 96 : 128;
  m.vocab_size = 64;
  m.seq_len = 16;
  m.tied_embeddings = f == Family::gpt2 ? 1 : 0;
  m.init_std = 0.2f;  // logits of order 1, attention far from uniform
  return m;
}

// The model's weights as global host tensors (one rank holds them whole).
ModelWeights weights_of(Model& model, Backend& be) {
  ModelWeights w;
  w.cfg = model.config();
  w.source = "test model";
  for (ParamStore* s : {&model.params(), &model.expert_params()})
    for (int i = 0; i < int(s->infos().size()); ++i) {
      const ParamInfo& p = s->info(i);
      HostTensor& t = w.tensors[p.name];
      t.shape = p.shape;
      t.data.resize(p.numel());
      be.to_host(t.data.data(), s->param(i), t.data.size() * sizeof(float));
    }
  return w;
}

// A tiny model of family f with random weights (seed) and its inference engine.
struct TinyEngine {
  std::unique_ptr<Backend> be;
  ModelConfig mc;
  Model model;
  InferenceEngine engine;
  TinyEngine(Family f, uint64_t seed)
      : be(make_cpu_backend(1)),
        mc(tiny(f)),
        model(mc, Recompute::none, 1, *be),
        engine((model.params().allocate_and_init(seed), weights_of(model, *be)), *be) {}
};

// The logits of a full forward over seq from an empty cache (its last position).
std::vector<float> full_forward(InferenceEngine& engine, const std::vector<int32_t>& seq) {
  engine.reset();
  std::vector<float> logits;
  engine.forward(seq.data(), int(seq.size()), logits);
  return logits;
}

void check_cache_matches_full_forward(const ModelConfig& mc, const std::string& what) {
  auto be = make_cpu_backend(1);
  Model model(mc, Recompute::none, 1, *be);
  model.params().allocate_and_init(77);
  if (model.expert_params().numel() > 0) model.expert_params().allocate_and_init(77);
  const int T = mc.seq_len, V = mc.vocab_size;
  std::vector<int32_t> in(static_cast<size_t>(T)), tg(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) {
    in[size_t(t)] = (t * 37 + 11) % V;
    tg[size_t(t)] = (t * 5 + 2) % V;
  }
  std::vector<float> full(size_t(T) * V);  // (T, V)
  model.forward_backward(in.data(), tg.data(), 1.0f / float(T), full.data());
  if (mc.n_experts > 0) {
    ASSERT_EQ(model.moe_stats().dropped, 0.0) << what << ": training dropped choices";
  }

  InferenceEngine engine(weights_of(model, *be), *be);
  const test::Close tol{1e-5, 0, test::Close::Scale::of_max_ref, true};
  // A prefill of the first 5 positions, then one position per forward.
  {
    std::vector<float> got, step;
    engine.forward(in.data(), 5, got, true);
    for (int t = 5; t < T; ++t) {
      engine.forward(&in[size_t(t)], 1, step);
      got.insert(got.end(), step.begin(), step.end());
    }
    EXPECT_TRUE(test::all_close(got, full, tol)) << what << ": prefill 5, then one at a time";
    EXPECT_THROW(engine.forward(in.data(), 1, step), InputError) << what << ": past model.seq_len";
  }
  // One position per forward from an empty cache.
  {
    engine.reset();
    std::vector<float> got, step;
    for (int t = 0; t < T; ++t) {
      engine.forward(&in[size_t(t)], 1, step);
      got.insert(got.end(), step.begin(), step.end());
    }
    EXPECT_TRUE(test::all_close(got, full, tol)) << what << ": one position at a time";
  }
  // The whole sequence in one forward, last position only.
  {
    engine.reset();
    std::vector<float> last;
    engine.forward(in.data(), T, last);
    const std::vector<float> ref(full.end() - V, full.end());
    EXPECT_TRUE(test::all_close(last, ref, tol)) << what << ": one prefill, the last position";
  }
}

TEST(KvCache, Gpt2MatchesFullForward) { check_cache_matches_full_forward(tiny(Family::gpt2), "gpt2"); }

TEST(KvCache, LlamaGqaMatchesFullForward) { check_cache_matches_full_forward(tiny(Family::llama), "llama gqa"); }

TEST(KvCache, MoeGpt2MatchesFullForward) {
  ModelConfig m = tiny(Family::gpt2);
  m.n_experts = 4;
  m.top_k = 2;
  m.dropless = true;
  check_cache_matches_full_forward(m, "moe gpt2 dropless");
}

TEST(KvCache, MoeLlamaMatchesFullForward) {
  ModelConfig m = tiny(Family::llama);
  m.n_experts = 4;
  m.top_k = 2;
  m.moe_every = 2;                       // block 1 only
  m.capacity_factor = float(m.n_experts);  // capacity T * top_k: nothing dropped
  check_cache_matches_full_forward(m, "moe llama every 2");
}

TEST(KvCache, MoeTopOneMatchesFullForward) {
  ModelConfig m = tiny(Family::llama);
  m.n_experts = 4;
  m.top_k = 1;
  m.dropless = true;
  check_cache_matches_full_forward(m, "moe llama top-1");
}

TEST(KvCache, MoeTopTwoByRawProbabilitiesMatchesFullForward) {
  ModelConfig m = tiny(Family::llama);
  m.n_experts = 4;
  m.top_k = 2;
  m.renormalize_top_k = 0;  // Qwen2-MoE's rule
  m.dropless = true;
  check_cache_matches_full_forward(m, "moe llama top-2 raw probabilities");
}

// A shared expert beside the routed ones: GPT-2's (biases, GELU) ungated,
// a Llama's gated by sigmoid(x . w) (Qwen2-MoE's).
TEST(KvCache, MoeSharedExpertMatchesFullForward) {
  ModelConfig g = tiny(Family::gpt2);
  g.n_experts = 4;
  g.top_k = 2;
  g.dropless = true;
  g.shared_expert_ffn = 24;
  check_cache_matches_full_forward(g, "moe gpt2 shared expert");
  ModelConfig l = tiny(Family::llama);
  l.n_experts = 4;
  l.top_k = 2;
  l.renormalize_top_k = 0;
  l.dropless = true;
  l.shared_expert_ffn = 40;
  l.shared_expert_gate = true;
  check_cache_matches_full_forward(l, "moe llama gated shared expert");
}

// generate: the tokens are greedy from the cache's logits; an end-of-text
// token ends the generation (not included); the sequence stops at seq_len.
TEST(Generate, GreedyStopsAtEotAndAtSeqLen) {
  TinyEngine t(Family::llama, 5);
  const ModelConfig& mc = t.mc;
  InferenceEngine& engine = t.engine;
  SampleParams greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = {3, 9, 27};
  const Generation g = generate(engine, prompt, 100, greedy, -1);
  EXPECT_EQ(g.stop, StopReason::seq_len);
  ASSERT_EQ(g.ids.size(), size_t(mc.seq_len) - prompt.size());
  // Each token is the argmax of a full forward over its prefix (one prefill).
  std::vector<int32_t> seq = prompt;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(g.ids[i], sample_token(full_forward(engine, seq).data(), mc.vocab_size, greedy, 0)) << "token " << i;
    seq.push_back(g.ids[i]);
  }
  // The same run with its third token as end-of-text stops before it,
  // unless that token came earlier.
  const int32_t eot = g.ids[2];
  const Generation e = generate(engine, prompt, 100, greedy, eot);
  EXPECT_EQ(e.stop, StopReason::eot);
  const size_t first = size_t(std::find(g.ids.begin(), g.ids.end(), eot) - g.ids.begin());
  EXPECT_EQ(e.ids, std::vector<int32_t>(g.ids.begin(), g.ids.begin() + long(first)));
  EXPECT_EQ(e.stop_id, eot);
  // Several stop tokens (generation_config.json's eos_token_id list): the
  // first of them sampled ends it; here the fifth token beside one never sampled.
  const int32_t fifth = g.ids[4];
  const Generation f = generate(engine, prompt, 100, greedy, std::vector<int64_t>{int64_t(mc.vocab_size) + 7, fifth});
  const size_t at = size_t(std::find(g.ids.begin(), g.ids.end(), fifth) - g.ids.begin());
  EXPECT_EQ(f.stop, StopReason::eot);
  EXPECT_EQ(f.stop_id, fifth);
  EXPECT_EQ(f.ids, std::vector<int32_t>(g.ids.begin(), g.ids.begin() + long(at)));
  EXPECT_THROW(generate(engine, std::vector<int32_t>(size_t(mc.seq_len) + 1, 1), 1, greedy, -1), InputError);
  EXPECT_THROW(generate(engine, {}, 1, greedy, -1), InputError);
}

TEST(Generate, VocabLimitNeverYieldsPaddingIds) {
  // A tokenizer smaller than the model's (padded) vocabulary: the ids it
  // lacks are never candidates, so the greedy tokens are the argmax over the
  // first `vocab` logits.
  TinyEngine t(Family::gpt2, 11);
  InferenceEngine& engine = t.engine;
  SampleParams greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = {1, 2};
  const Generation full = generate(engine, prompt, 12, greedy, -1);
  // The limit: one below the largest id the unlimited run chose, so at least
  // one of its tokens is no longer a candidate.
  const int32_t top = *std::max_element(full.ids.begin(), full.ids.end());
  ASSERT_GT(top, 0);
  SampleParams limited = greedy;
  limited.vocab = top;
  const Generation g = generate(engine, prompt, 12, limited, -1);
  ASSERT_EQ(g.ids.size(), full.ids.size());
  std::vector<int32_t> seq = prompt;
  for (size_t i = 0; i < g.ids.size(); ++i) {
    EXPECT_LT(g.ids[i], top) << "token " << i;
    EXPECT_EQ(g.ids[i], sample_token(full_forward(engine, seq).data(), top, greedy, 0)) << "token " << i;
    seq.push_back(g.ids[i]);
  }
}

TEST(Engine, MissingTensorIsAnInputErrorAndFreesWhatItTook) {
  auto be = make_cpu_backend(1);
  const ModelConfig mc = tiny(Family::gpt2);
  Model model(mc, Recompute::none, 1, *be);
  model.params().allocate_and_init(5);
  ModelWeights w = weights_of(model, *be);
  w.tensors.erase("model/layers/1/mlp/w_down");
  const size_t before = be->mem_stats().total_cur_bytes;
  EXPECT_THROW(InferenceEngine(w, *be), InputError);
  EXPECT_EQ(be->mem_stats().total_cur_bytes, before);
}

// ---- the sampler ----

std::vector<float> some_logits(int V) {
  std::vector<float> l(static_cast<size_t>(V));
  for (int v = 0; v < V; ++v) l[size_t(v)] = float(std::sin(0.7 * v + 0.3)) * 2.0f;
  return l;
}

TEST(Sampler, GreedyTiesGoToTheLowerId) {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  SampleParams g;
  g.temperature = 0;
  EXPECT_EQ(sample_token(l.data(), 5, g, 0), 1);
  SampleParams k1;
  k1.top_k = 1;
  EXPECT_EQ(sample_token(l.data(), 5, k1, 0), 1);
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  const int V = 50;
  const std::vector<float> l = some_logits(V);
  SampleParams greedy;
  greedy.temperature = 0;
  const int32_t best = sample_token(l.data(), V, greedy, 0);
  for (uint64_t i = 0; i < 200; ++i) {
    SampleParams k1{1.3, 1, 1.0, 5};
    SampleParams p0{1.3, 0, 1e-9, 5};
    EXPECT_EQ(sample_token(l.data(), V, k1, i), best);
    EXPECT_EQ(sample_token(l.data(), V, p0, i), best);
  }
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  const int V = 50;
  const std::vector<float> l = some_logits(V);
  std::vector<int32_t> a, b, c;
  for (uint64_t i = 0; i < 64; ++i) {
    a.push_back(sample_token(l.data(), V, SampleParams{1.0, 0, 1.0, 42}, i));
    b.push_back(sample_token(l.data(), V, SampleParams{1.0, 0, 1.0, 42}, i));
    c.push_back(sample_token(l.data(), V, SampleParams{1.0, 0, 1.0, 43}, i));
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);  // 64 draws among ~20 likely tokens: equal by chance with probability < 1e-30
}

// The candidates' order over a large vocabulary (the radix sort for all or
// most ids, the partial sort for a few): the same draws as a comparison
// sort by (logit descending, id ascending), with ties, -0 beside +0 and
// -inf among the logits, for top-k on either side of the switch.
TEST(Sampler, LargeVocabulariesDrawAsTheComparisonSortOrders) {
  const int V = 5000;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> l(static_cast<size_t>(V));
  for (float& x : l) x = normal(rng);
  for (int j = 0; j < 400; ++j) l[rng() % V] = l[rng() % V];  // ties
  for (int j = 0; j < 50; ++j) l[rng() % V] = (j % 2) ? 0.0f : -0.0f;
  for (int j = 0; j < 20; ++j) l[rng() % V] = -std::numeric_limits<float>::infinity();
  l[17] = l[4000] = 9.5f;  // the largest, tied
  const auto reference = [&](const SampleParams& p, uint64_t i) {
    std::vector<int> ids(static_cast<size_t>(V));
    std::iota(ids.begin(), ids.end(), 0);
    std::sort(ids.begin(), ids.end(), [&](int a, int b) {
      return l[size_t(a)] > l[size_t(b)] || (l[size_t(a)] == l[size_t(b)] && a < b);
    });
    if (p.top_k > 0) ids.resize(size_t(p.top_k));
    std::vector<double> w(ids.size());
    double sum = 0;
    for (size_t j = 0; j < ids.size(); ++j) sum += w[j] = std::exp((double(l[size_t(ids[j])]) - 9.5) / p.temperature);
    size_t n = ids.size();
    if (p.top_p < 1) {
      double mass = 0;
      for (n = 0; n < ids.size();) {
        mass += w[n++] / sum;
        if (mass >= p.top_p) break;
      }
      sum = std::accumulate(w.begin(), w.begin() + long(n), 0.0);
    }
    const double u = double(pentad::CounterRng{p.seed, 0x73616d706c65ull}.u64(i) >> 11) * 0x1.0p-53;
    double acc = 0;
    for (size_t j = 0; j < n; ++j) {
      acc += w[j] / sum;
      if (u < acc) return ids[j];
    }
    return ids[n - 1];
  };
  for (const int k : {0, 3, V / 16 - 1, V / 16, V / 2, V}) {
    for (const double top_p : {1.0, 0.9}) {
      const SampleParams p{1.7, k, top_p, 21};
      for (uint64_t i = 0; i < 300; ++i)
        ASSERT_EQ(sample_token(l.data(), V, p, i), reference(p, i)) << "top_k " << k << " top_p " << top_p << " draw " << i;
    }
  }
  SampleParams spread{50.0, 0, 1.0, 3};  // a high temperature: draws reach the ties, the zeros and the tail
  std::set<int32_t> seen;
  for (uint64_t i = 0; i < 2000; ++i) {
    const int32_t t = sample_token(l.data(), V, spread, i);
    ASSERT_EQ(t, reference(spread, i)) << "draw " << i;
    seen.insert(t);
  }
  EXPECT_GT(seen.size(), 1000u);
}

// Frequencies of 40000 draws against softmax(l / T) renormalised over the
// top-k and top-p set; each within 5 standard deviations of its probability.
TEST(Sampler, DrawsFollowTheRenormalisedSoftmax) {
  const int V = 12, n = 40000;
  const std::vector<float> l = some_logits(V);
  struct Case {
    double T;
    int k;
    double p;
    double min_p = 0;
  };
  for (const Case cs : {Case{1.0, 0, 1.0}, Case{0.7, 5, 1.0}, Case{1.5, 0, 0.8}, Case{1.0, 6, 0.6},
                        Case{1.0, 0, 1.0, 0.2}, Case{1.5, 0, 0.9, 0.05}, Case{0.7, 4, 1.0, 0.5}}) {
    // The reference: sorted by logit, top-k, softmax, nucleus prefix, renormalised.
    std::vector<int> ids(static_cast<size_t>(V));
    for (int v = 0; v < V; ++v) ids[size_t(v)] = v;
    std::sort(ids.begin(), ids.end(), [&](int a, int b) { return l[size_t(a)] > l[size_t(b)]; });
    if (cs.k > 0) ids.resize(size_t(cs.k));
    std::vector<double> pr;
    double s = 0;
    for (int v : ids) s += std::exp(l[size_t(v)] / cs.T);
    for (int v : ids) pr.push_back(std::exp(l[size_t(v)] / cs.T) / s);
    size_t keep = pr.size();
    double mass = 0;
    for (size_t j = 0; j < pr.size(); ++j) {
      mass += pr[j];
      if (mass >= cs.p) {
        keep = j + 1;
        break;
      }
    }
    // Min-p: of those, the ones at least min_p times as likely as the first.
    while (keep > 1 && pr[keep - 1] < cs.min_p * pr[0]) --keep;
    double kept = 0;
    for (size_t j = 0; j < keep; ++j) kept += pr[j];
    std::vector<double> want(static_cast<size_t>(V), 0.0);
    for (size_t j = 0; j < keep; ++j) want[size_t(ids[j])] = pr[j] / kept;
    std::vector<int> count(static_cast<size_t>(V), 0);
    SampleParams sp{cs.T, cs.k, cs.p, 9};
    sp.min_p = cs.min_p;
    for (int i = 0; i < n; ++i) ++count[size_t(sample_token(l.data(), V, sp, uint64_t(i)))];
    for (int v = 0; v < V; ++v) {
      const double q = want[size_t(v)], f = double(count[size_t(v)]) / n;
      const double sd = std::sqrt(std::max(q * (1 - q), 1e-12) / n);
      if (q == 0)
        EXPECT_EQ(count[size_t(v)], 0) << "T=" << cs.T << " k=" << cs.k << " p=" << cs.p << " min_p=" << cs.min_p
                                       << ": token " << v;
      else
        EXPECT_LE(std::fabs(f - q), 5 * sd) << "T=" << cs.T << " k=" << cs.k << " p=" << cs.p << " min_p=" << cs.min_p
                                            << ": token " << v
                                            << " frequency " << f << ", probability " << q;
    }
  }
}

TEST(Sampler, RejectsBadNumbers) {
  EXPECT_THROW(check_sample_params(SampleParams{-0.1, 0, 1.0, 0}), InputError);
  EXPECT_THROW(check_sample_params(SampleParams{1.0, -1, 1.0, 0}), InputError);
  EXPECT_THROW(check_sample_params(SampleParams{1.0, 0, 0.0, 0}), InputError);
  EXPECT_THROW(check_sample_params(SampleParams{1.0, 0, 1.01, 0}), InputError);
  EXPECT_NO_THROW(check_sample_params(SampleParams{0.0, 0, 1.0, 0}));
  for (double m : {-0.1, 1.5}) {
    SampleParams p;
    p.min_p = m;
    EXPECT_THROW(check_sample_params(p), InputError) << m;
  }
  SampleParams one;
  one.min_p = 1.0;
  EXPECT_NO_THROW(check_sample_params(one));
}

// Min-p keeps the tokens at least min_p times as likely as the first: with
// logits 0, -1, -2, -3 (probabilities in the ratios 1 : 0.368 : 0.135 :
// 0.050), min-p 0.2 draws ids 0 and 1 only, 0.1 ids 0 to 2, 0.03 all four;
// at temperature 2 the ratios are their square roots (0.607, 0.368, 0.223),
// so min-p 0.2 draws all four.
TEST(Sampler, MinPKeepsTheTokensAtLeastThatLikely) {
  const std::vector<float> l = {0.0f, -1.0f, -2.0f, -3.0f};
  for (const auto& [T, m, drawn] : {std::tuple{1.0, 0.2, 2}, std::tuple{1.0, 0.1, 3}, std::tuple{1.0, 0.03, 4},
                                    std::tuple{2.0, 0.2, 4}, std::tuple{2.0, 0.3, 3}}) {
    SampleParams p{T, 0, 1.0, 11};
    p.min_p = m;
    std::vector<int> seen(4, 0);
    for (uint64_t i = 0; i < 4000; ++i) ++seen[size_t(sample_token(l.data(), 4, p, i))];
    for (int v = 0; v < 4; ++v)
      EXPECT_EQ(seen[size_t(v)] > 0, v < drawn) << "T=" << T << " min_p=" << m << ": id " << v << " drawn "
                                                << seen[size_t(v)] << " times";
  }
}

// The repetition penalty divides a seen id's positive logit and multiplies
// a negative one; unseen ids keep theirs. generate() applies it to every
// step's logits with the prompt's and the generated ids: greedy decoding
// with it is the argmax of the penalised full-forward logits.
TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  std::vector<float> l = {2.0f, -1.0f, 0.5f, -0.25f, 0.0f};
  apply_repetition_penalty(l.data(), {1, 1, 0, 1, 1}, 2.0);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -2.0f, 0.5f, -0.5f, 0.0f}));
  SampleParams bad;
  bad.repetition_penalty = 0;
  EXPECT_THROW(check_sample_params(bad), InputError);
  bad.repetition_penalty = -1;
  EXPECT_THROW(check_sample_params(bad), InputError);

  TinyEngine t(Family::llama, 5);
  InferenceEngine& engine = t.engine;
  SampleParams greedy;
  greedy.temperature = 0;
  const std::vector<int32_t> prompt = {3, 9, 27};
  const Generation plain = generate(engine, prompt, 6, greedy, -1);
  // 3: seen ids pushed down; 0.01: seen ids with a positive logit pulled up
  // a hundredfold, so the choice leaves plain greedy decoding.
  for (const double r : {3.0, 0.01}) {
    greedy.repetition_penalty = r;
    const Generation g = generate(engine, prompt, 6, greedy, -1);
    ASSERT_EQ(g.ids.size(), 6u);
    std::vector<int32_t> seq = prompt;
    for (size_t i = 0; i < g.ids.size(); ++i) {
      std::vector<float> logits = full_forward(engine, seq);
      std::vector<uint8_t> seen(size_t(t.mc.vocab_size), 0);
      for (int32_t id : seq) seen[size_t(id)] = 1;
      apply_repetition_penalty(logits.data(), seen, r);
      EXPECT_EQ(g.ids[i], sample_token(logits.data(), t.mc.vocab_size, greedy, 0)) << "penalty " << r << " token " << i;
      seq.push_back(g.ids[i]);
    }
    if (r < 1) {
      EXPECT_NE(g.ids, plain.ids);
    }
  }
}

TEST(Utf8, InvalidSequencesAreReplaced) {
  EXPECT_EQ(utf8_replace("a\xC3\xA9z"), "a\xC3\xA9z");                 // é stays
  EXPECT_EQ(utf8_replace("a\xC3"), "a\xEF\xBF\xBD");                   // cut character
  EXPECT_EQ(utf8_replace("\xFF" "b"), "\xEF\xBF\xBD" "b");             // never valid
  EXPECT_EQ(utf8_replace("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8_replace("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");     // emoji stays
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
