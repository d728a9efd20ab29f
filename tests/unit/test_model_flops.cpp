// The two FLOP counts behind MFU (src/train/metrics.hpp): pentad's own,
// 6N + 12LCT over every parameter, and the standard model-FLOPs count,
// 6 x non-embedding parameters + 6LCT (causal). The parameter totals come
// from pentad's parameter list; the non-embedding counts are checked against
// the published architectures: GPT-2 small has 124,439,808 parameters, of
// which 85,056,000 outside wte (50257 x 768) and wpe (1024 x 768); the
// untied Llama shape's blocks and final norm are counted by hand.
#include <gtest/gtest.h>

#include "config/bench_shapes.hpp"
#include "config/config.hpp"
#include "model/param_list.hpp"
#include "train/metrics.hpp"

namespace {

// The vocabulary matrices' padding rows (ModelConfig::pad_vocab_to) are not
// parameters: global_numel counts the saved shape.
double total_params(const pentad::ModelConfig& m) {
  double n = 0;
  for (const auto& p : pentad::model_param_list(m, pentad::ParamRank{})) n += double(p.global_numel());
  return n;
}

TEST(ModelFlops, Gpt2SmallMatchesThePublishedCounts) {
  const auto m = pentad::gpt2_shape(12, 768, 12);
  const double n = total_params(m);
  EXPECT_EQ(n, 124439808.0);
  EXPECT_EQ(pentad::non_embedding_params(m, n), 85056000.0);
  EXPECT_EQ(pentad::flops_per_token(m, n), 6.0 * 124439808 + 12.0 * 12 * 768 * 1024);
  EXPECT_EQ(pentad::standard_flops_per_token(m, n), 6.0 * 85056000 + 6.0 * 12 * 768 * 1024);
  // The family default (-1) is tied for GPT-2: the same count.
  auto d = m;
  d.tied_embeddings = -1;
  EXPECT_EQ(pentad::non_embedding_params(d, n), 85056000.0);
}

TEST(ModelFlops, UntiedLlamaLeavesOutBothEmbeddings) {
  pentad::ModelConfig m;
  m.family = pentad::Family::llama;
  m.n_layers = 4;
  m.d_model = 256;
  m.n_heads = 8;
  m.n_kv_heads = 2;
  m.d_ff = 704;
  m.vocab_size = 1000;
  m.seq_len = 128;
  m.tied_embeddings = 0;
  const double n = total_params(m);
  const double C = 256, F = 704, kv = 2.0 * 256 / 8 * 2;  // k and v: 2 heads of 32
  // Per block: two RMSNorm weights, wq and wo (C x C), wk and wv (kv x C in
  // all), the SwiGLU's three matrices (C x F each); then the final norm.
  const double blocks = 4 * (2 * C + 2 * C * C + kv * C + 3 * C * F) + C;
  EXPECT_EQ(n, blocks + 2 * 1000 * C);
  EXPECT_EQ(pentad::non_embedding_params(m, n), blocks);
  EXPECT_EQ(pentad::standard_flops_per_token(m, n), 6 * blocks + 6.0 * 4 * 256 * 128);
}

}  // namespace
