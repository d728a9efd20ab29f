// The pentad <-> Hugging Face rules (src/io/hf_map.*): export then import is
// the identity, bitwise, for GPT-2, Llama (GQA), Qwen2 and Mixtral; the q/k
// row permutation (of the weights and of Qwen2's biases) turns pentad's
// interleaved-pair RoPE into rotate_half's half-split RoPE (computed here on
// both sides in double precision); the
// GPT-2 c_attn is the transposed concatenation; config.json round trips
// through its own check and a changed size is named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/error.hpp"
#include "io/hf_map.hpp"

namespace {

using pentad::Family;
using pentad::ModelConfig;
namespace hf = pentad::hf;

ModelConfig tiny(Family f, int n_experts) {
  ModelConfig m;
  m.family = f;
  m.n_layers = 2;
  m.d_model = 16;
  m.n_heads = 4;
  m.n_kv_heads = f == Family::gpt2 ? 4 : 2;
  m.d_head = 4;  // resolved, as a parsed deck's
  m.d_ff = 24;
  m.vocab_size = 11;
  m.seq_len = 5;
  m.tied_embeddings = f == Family::gpt2 ? 1 : 0;
  m.qkv_bias = f == Family::gpt2 ? 1 : 0;
  m.n_experts = n_experts;
  m.top_k = 2;
  m.renormalize_top_k = 1;  // resolved (top_k 2), as a parsed deck's
  m.dropless = true;
  return m;
}

// The tiny Llama with Qwen2's q/k/v biases (Qwen2ForCausalLM).
ModelConfig qwen2_tiny() {
  ModelConfig m = tiny(Family::llama, 0);
  m.qkv_bias = 1;
  m.tied_embeddings = 1;
  return m;
}

// The tiny Llama with Qwen3's q/k norms and heads of their own width (8 in a
// 16-wide model of 4 heads), tied (Qwen3ForCausalLM).
ModelConfig qwen3_tiny() {
  ModelConfig m = tiny(Family::llama, 0);
  m.qk_norm = true;
  m.d_head = 8;
  m.tied_embeddings = 1;
  return m;
}

// That Qwen3 as a mixture of 3 experts, top-2, untied (Qwen3MoeForCausalLM).
ModelConfig qwen3moe_tiny() {
  ModelConfig m = qwen3_tiny();
  m.n_experts = 3;
  m.tied_embeddings = 0;
  return m;
}

// That Qwen2 as a mixture of 3 experts, top-2 by their probabilities, with
// a gated shared expert 20 wide, untied (Qwen2MoeForCausalLM).
ModelConfig qwen2moe_tiny() {
  ModelConfig m = qwen2_tiny();
  m.n_experts = 3;
  m.renormalize_top_k = 0;
  m.shared_expert_ffn = 20;
  m.shared_expert_gate = true;
  m.tied_embeddings = 0;
  return m;
}

// The sizes of a published config.json as pentad reads them (a tied Llama).
struct Published {
  int n_layers, d_model, head_dim, n_kv_heads, seq_len;
  float rope_theta;
};
void expect_published(const ModelConfig& m, const Published& p) {
  EXPECT_EQ(m.family, Family::llama);
  EXPECT_TRUE(m.tied());
  EXPECT_EQ(m.n_layers, p.n_layers);
  EXPECT_EQ(m.d_model, p.d_model);
  EXPECT_EQ(m.head_dim(), p.head_dim);
  EXPECT_EQ(m.n_kv_heads, p.n_kv_heads);
  EXPECT_EQ(m.seq_len, p.seq_len);
  EXPECT_FLOAT_EQ(m.rope_theta, p.rope_theta);
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Random pentad tensors for every rule's pentad tensor.
std::map<std::string, std::vector<float>> random_pentad(const std::vector<hf::Rule>& rs) {
  std::mt19937 gen(7);
  std::normal_distribution<float> nd;
  std::map<std::string, std::vector<float>> p;
  for (const hf::Rule& r : rs)
    if (!p.count(r.pentad)) {
      std::vector<float> v(size_t(numel(r.pentad_shape)));
      for (float& x : v) x = nd(gen);
      p[r.pentad] = v;
    }
  return p;
}

TEST(HfMap, ExportThenImportIsTheIdentity) {
  for (const auto& [m, arch] : {std::pair{tiny(Family::gpt2, 0), hf::Arch::gpt2},
                                std::pair{tiny(Family::llama, 0), hf::Arch::llama},
                                std::pair{qwen2_tiny(), hf::Arch::qwen2},
                                std::pair{tiny(Family::llama, 3), hf::Arch::mixtral},
                                std::pair{qwen3moe_tiny(), hf::Arch::qwen3_moe},
                                std::pair{qwen2moe_tiny(), hf::Arch::qwen2_moe},
                                std::pair{tiny(Family::llama, 0), hf::Arch::phi3}}) {
    const auto rs = hf::rules(m, arch);
    const auto pen = random_pentad(rs);
    std::map<std::string, std::vector<float>> h;
    for (const std::string& n : hf::hf_names(rs))
      h[n] = hf::build_hf(rs, n, [&](const std::string& x) -> const std::vector<float>& { return pen.at(x); });
    for (const auto& [name, want] : pen) {
      const auto got =
          hf::build_pentad(rs, name, [&](const std::string& x) -> const std::vector<float>& { return h.at(x); });
      ASSERT_EQ(got.size(), want.size()) << hf::arch_class(arch) << " " << name;
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << hf::arch_class(arch) << " " << name;
    }
    // Every Hugging Face element is written exactly once: no tensor keeps a zero
    // that random data would not have.
    for (const auto& [n, v] : h)
      for (float x : v) ASSERT_NE(x, 0.0f) << hf::arch_class(arch) << " " << n;
  }
}

TEST(HfMap, Gpt2CAttnIsTheTransposedConcatenation) {
  const ModelConfig m = tiny(Family::gpt2, 0);
  const auto rs = hf::rules(m, hf::Arch::gpt2);
  const auto pen = random_pentad(rs);
  const auto w = hf::build_hf(rs, "transformer.h.1.attn.c_attn.weight",
                              [&](const std::string& x) -> const std::vector<float>& { return pen.at(x); });
  const int64_t C = m.d_model;
  const char* parts[3] = {"wq", "wk", "wv"};
  for (int k = 0; k < 3; ++k) {
    const auto& p = pen.at(std::string("model/layers/1/attn/") + parts[k]);  // (C out, C in)
    for (int64_t o = 0; o < C; ++o)
      for (int64_t i = 0; i < C; ++i) ASSERT_EQ(w[size_t(i * 3 * C + k * C + o)], p[size_t(o * C + i)]) << parts[k];
  }
}

// q (or k) of one position rotated as pentad does: pairs (2i, 2i+1).
std::vector<double> rope_interleaved(const std::vector<double>& x, int heads, int D, int pos, double theta) {
  std::vector<double> y = x;
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < D / 2; ++i) {
      const double a = pos * std::pow(theta, -2.0 * i / D), c = std::cos(a), s = std::sin(a);
      const double x0 = x[size_t(h * D + 2 * i)], x1 = x[size_t(h * D + 2 * i + 1)];
      y[size_t(h * D + 2 * i)] = x0 * c - x1 * s;
      y[size_t(h * D + 2 * i + 1)] = x0 * s + x1 * c;
    }
  return y;
}

// As Hugging Face's Llama does: x * cos + rotate_half(x) * sin, pairs (i, i + D/2).
std::vector<double> rope_half(const std::vector<double>& x, int heads, int D, int pos, double theta) {
  std::vector<double> y = x;
  for (int h = 0; h < heads; ++h)
    for (int j = 0; j < D; ++j) {
      const int i = j % (D / 2);
      const double a = pos * std::pow(theta, -2.0 * i / D);
      const double rot = j < D / 2 ? -x[size_t(h * D + j + D / 2)] : x[size_t(h * D + j - D / 2)];
      y[size_t(h * D + j)] = x[size_t(h * D + j)] * std::cos(a) + rot * std::sin(a);
    }
  return y;
}

TEST(HfMap, PermutedRowsTurnInterleavedRopeIntoRotateHalf) {
  const ModelConfig m = tiny(Family::llama, 0);
  const auto rs = hf::rules(m, hf::Arch::llama);
  const auto pen = random_pentad(rs);
  const int D = m.head_dim(), C = m.d_model;
  std::vector<double> x(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c) x[size_t(c)] = std::sin(0.7 * c + 0.3);
  double worst_scores = 0, moved = 0;
  for (const char* which : {"wq", "wk"}) {
    const int heads = std::string(which) == "wq" ? m.n_heads : m.n_kv_heads;
    const std::string pname = std::string("model/layers/0/attn/") + which;
    const std::string hname = std::string("model.layers.0.self_attn.") + (which[1] == 'q' ? "q" : "k") + "_proj.weight";
    const auto w_hf = hf::build_hf(rs, hname, [&](const std::string& n) -> const std::vector<float>& { return pen.at(n); });
    const auto& w_pen = pen.at(pname);
    auto matvec = [&](const std::vector<float>& w) {
      std::vector<double> y(size_t(heads * D), 0.0);
      for (int r = 0; r < heads * D; ++r)
        for (int c = 0; c < C; ++c) y[size_t(r)] += double(w[size_t(r * C + c)]) * x[size_t(c)];
      return y;
    };
    const auto y_pen = matvec(w_pen), y_hf = matvec(w_hf);
    for (int pos : {0, 3, 11}) {
      const auto a = rope_interleaved(y_pen, heads, D, pos, m.rope_theta);
      const auto b = rope_half(y_hf, heads, D, pos, m.rope_theta);
      const auto u = rope_half(y_pen, heads, D, pos, m.rope_theta);  // the unpermuted weights
      // Per head, the same multiset of rotated values: pentad's row h*D + 2i is
      // Hugging Face's h*D + i, row h*D + 2i + 1 is h*D + i + D/2.
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < D / 2; ++i) {
          worst_scores = std::max(worst_scores, std::abs(a[size_t(h * D + 2 * i)] - b[size_t(h * D + i)]));
          worst_scores = std::max(worst_scores, std::abs(a[size_t(h * D + 2 * i + 1)] - b[size_t(h * D + i + D / 2)]));
        }
      for (int h = 0; h < heads && pos > 0; ++h)
        for (int i = 0; i < D / 2; ++i)
          moved = std::max(moved, std::abs(a[size_t(h * D + 2 * i)] - u[size_t(h * D + i)]));
    }
  }
  std::printf("rope: worst |interleaved - rotate_half| %.3e; unpermuted rows differ by up to %.3e\n", worst_scores,
              moved);
  EXPECT_LE(worst_scores, 1e-12);
  EXPECT_GT(moved, 1e-3);
}

// Qwen2's q and k biases are added before RoPE, so their rows are permuted
// as the weights' rows: pentad's interleaved RoPE of W x + b equals
// rotate_half's of the exported W x + b; unpermuted biases would differ.
TEST(HfMap, Qwen2BiasesTurnWithTheirRows) {
  const ModelConfig m = qwen2_tiny();
  const auto rs = hf::rules(m, hf::Arch::qwen2);
  const auto pen = random_pentad(rs);
  auto hf_of = [&](const std::string& n) {
    return hf::build_hf(rs, n, [&](const std::string& x) -> const std::vector<float>& { return pen.at(x); });
  };
  const int D = m.head_dim(), C = m.d_model;
  std::vector<double> x(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c) x[size_t(c)] = std::cos(0.9 * c - 0.2);
  double worst = 0, moved = 0;
  for (const char* which : {"q", "k"}) {
    const int heads = which[0] == 'q' ? m.n_heads : m.n_kv_heads;
    const std::string pw = std::string("model/layers/1/attn/w") + which, pb = std::string("model/layers/1/attn/b") + which;
    const std::string hn = std::string("model.layers.1.self_attn.") + which + "_proj.";
    const auto w_hf = hf_of(hn + "weight"), b_hf = hf_of(hn + "bias");
    ASSERT_EQ(b_hf.size(), size_t(heads * D));
    auto affine = [&](const std::vector<float>& w, const std::vector<float>& b) {
      std::vector<double> y(size_t(heads * D));
      for (int r = 0; r < heads * D; ++r) {
        y[size_t(r)] = double(b[size_t(r)]);
        for (int c = 0; c < C; ++c) y[size_t(r)] += double(w[size_t(r * C + c)]) * x[size_t(c)];
      }
      return y;
    };
    const auto y_pen = affine(pen.at(pw), pen.at(pb)), y_hf = affine(w_hf, b_hf);
    const auto y_unpermuted_bias = affine(w_hf, pen.at(pb));
    for (int pos : {0, 5, 13}) {
      const auto a = rope_interleaved(y_pen, heads, D, pos, m.rope_theta);
      const auto b = rope_half(y_hf, heads, D, pos, m.rope_theta);
      const auto u = rope_half(y_unpermuted_bias, heads, D, pos, m.rope_theta);
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < D / 2; ++i) {
          worst = std::max(worst, std::abs(a[size_t(h * D + 2 * i)] - b[size_t(h * D + i)]));
          worst = std::max(worst, std::abs(a[size_t(h * D + 2 * i + 1)] - b[size_t(h * D + i + D / 2)]));
          moved = std::max(moved, std::abs(a[size_t(h * D + 2 * i + 1)] - u[size_t(h * D + i + D / 2)]));
        }
    }
  }
  // v's bias is not turned: copied as it is.
  EXPECT_EQ(hf_of("model.layers.1.self_attn.v_proj.bias"), pen.at("model/layers/1/attn/bv"));
  std::printf("qwen2 rope with biases: worst %.3e; unpermuted biases differ by up to %.3e\n", worst, moved);
  EXPECT_LE(worst, 1e-12);
  EXPECT_GT(moved, 1e-3);
}

TEST(HfMap, ConfigJsonChecksItself) {
  for (const auto& [m, arch] : {std::pair{tiny(Family::gpt2, 0), hf::Arch::gpt2},
                                std::pair{tiny(Family::llama, 0), hf::Arch::llama},
                                std::pair{qwen2_tiny(), hf::Arch::qwen2},
                                std::pair{tiny(Family::llama, 3), hf::Arch::mixtral},
                                std::pair{qwen3moe_tiny(), hf::Arch::qwen3_moe},
                                std::pair{qwen2moe_tiny(), hf::Arch::qwen2_moe},
                                std::pair{tiny(Family::llama, 0), hf::Arch::phi3}}) {
    const std::string text = hf::config_json(m, arch, "float32");
    EXPECT_EQ(hf::check_config_json(text, "cfg", m, arch), "") << text;
    ModelConfig other = m;
    other.d_ff = 32;
    const std::string err = hf::check_config_json(text, "cfg", other, arch);
    EXPECT_NE(err.find("model.d_ff"), std::string::npos) << err;
    EXPECT_NE(err.find("24"), std::string::npos) << err;
    EXPECT_NE(err.find("32"), std::string::npos) << err;
  }
  auto j = nlohmann::json::parse(hf::config_json(tiny(Family::llama, 0), hf::Arch::llama, "float32"));
  j["architectures"] = {"BertForMaskedLM"};
  const std::string err = hf::check_config_json(j.dump(), "cfg", tiny(Family::llama, 0), hf::Arch::llama);
  EXPECT_NE(err.find("BertForMaskedLM"), std::string::npos) << err;
}

// config.json -> ModelConfig (`pentad sample HF_DIR`): what config_json
// writes reads back as the same model.
TEST(HfMap, ConfigJsonReadsBackAsTheModel) {
  std::vector<std::pair<ModelConfig, hf::Arch>> cases;
  ModelConfig g = tiny(Family::gpt2, 0);
  g.dropless = false;
  g.norm_eps = 1e-6f;
  cases.emplace_back(g, hf::Arch::gpt2);
  ModelConfig l = tiny(Family::llama, 0);
  l.dropless = false;
  l.rope_theta = 500000.0f;
  cases.emplace_back(l, hf::Arch::llama);
  l.tied_embeddings = 1;
  l.rope_scaling = pentad::RopeScaling::llama3;
  l.rope_scaling_factor = 32.0f;
  l.rope_original_context = 8192;
  cases.emplace_back(l, hf::Arch::llama);
  cases.emplace_back(tiny(Family::llama, 3), hf::Arch::mixtral);
  ModelConfig q = qwen2_tiny();
  q.dropless = false;
  q.rope_theta = 1e6f;
  cases.emplace_back(q, hf::Arch::qwen2);
  ModelConfig q3 = qwen3_tiny();
  q3.dropless = false;
  q3.rope_theta = 1e6f;
  cases.emplace_back(q3, hf::Arch::qwen3);
  q3.rope_scaling = pentad::RopeScaling::yarn;  // YaRN as Qwen3 documents it (at a tiny context)
  q3.rope_scaling_factor = 4.0f;
  q3.rope_original_context = q3.seq_len / 4;  // (config.json's max_position_embeddings: factor x this)
  cases.emplace_back(q3, hf::Arch::qwen3);
  q3.rope_beta_fast = 16.0f;  // every YaRN key away from its default
  q3.rope_beta_slow = 2.0f;
  q3.rope_attention_factor = 1.5f;
  q3.rope_truncate = false;
  cases.emplace_back(q3, hf::Arch::qwen3);
  ModelConfig lin = tiny(Family::llama, 0);  // linear scaling (DeepSeek-Coder's: a Llama, factor 4)
  lin.dropless = false;
  lin.rope_scaling = pentad::RopeScaling::linear;
  lin.rope_scaling_factor = 4.0f;
  cases.emplace_back(lin, hf::Arch::llama);
  ModelConfig q3m = qwen3moe_tiny();  // every block MoE, top-2
  cases.emplace_back(q3m, hf::Arch::qwen3_moe);
  q3m.moe_every = 2;  // a dense block 0 (decoder_sparse_step 2), one expert per token
  q3m.top_k = 1;
  q3m.renormalize_top_k = 0;
  cases.emplace_back(q3m, hf::Arch::qwen3_moe);
  q3m.top_k = 2;  // two experts weighed by their probabilities (norm_topk_prob false)
  cases.emplace_back(q3m, hf::Arch::qwen3_moe);
  ModelConfig q2m = qwen2moe_tiny();  // every block MoE, top-2 by the probabilities, the gated shared expert
  cases.emplace_back(q2m, hf::Arch::qwen2_moe);
  q2m.moe_every = 2;  // a dense block 0 (decoder_sparse_step 2), the top 2 renormalised
  q2m.renormalize_top_k = 1;
  cases.emplace_back(q2m, hf::Arch::qwen2_moe);
  ModelConfig mix1 = tiny(Family::llama, 3);  // Mixtral routing to one expert, its weight renormalised to 1
  mix1.dropless = true;
  mix1.top_k = 1;
  cases.emplace_back(mix1, hf::Arch::mixtral);
  ModelConfig phi3 = tiny(Family::llama, 0);  // Phi3ForCausalLM (--class), GQA, tied
  phi3.dropless = false;
  phi3.tied_embeddings = 1;
  phi3.rope_theta = 250000.0f;
  cases.emplace_back(phi3, hf::Arch::phi3);
  for (hf::Arch a : {hf::Arch::llama, hf::Arch::qwen2}) {  // a head dimension of its own
    ModelConfig h = a == hf::Arch::qwen2 ? q : l;
    h.d_head = 8;
    cases.emplace_back(h, a);
  }
  for (const auto& [m, arch] : cases) {
    const std::string text = hf::config_json(m, arch, "bfloat16");
    const ModelConfig back = hf::model_of_config_json(text, "cfg");
    EXPECT_TRUE(back == m) << text;
  }
}

// The keys a config.json may leave out take the class's defaults.
TEST(HfMap, ConfigJsonDefaultsAreTheClasses) {
  ModelConfig g = hf::model_of_config_json(
      R"({"architectures": ["GPT2LMHeadModel"], "n_layer": 2, "n_embd": 16, "n_head": 4, "vocab_size": 300})", "g");
  EXPECT_EQ(g.family, Family::gpt2);
  EXPECT_EQ(g.d_ff, 64);
  EXPECT_EQ(g.seq_len, 1024);
  EXPECT_FLOAT_EQ(g.norm_eps, 1e-5f);
  EXPECT_TRUE(g.tied());
  ModelConfig l = hf::model_of_config_json(
      R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 16,
          "num_attention_heads": 4, "intermediate_size": 40, "vocab_size": 300})", "l");
  EXPECT_EQ(l.family, Family::llama);
  EXPECT_EQ(l.n_kv_heads, 4);
  EXPECT_EQ(l.seq_len, 2048);
  EXPECT_FLOAT_EQ(l.norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(l.rope_theta, 10000.0f);
  EXPECT_FALSE(l.tied());
  EXPECT_EQ(l.rope_scaling, pentad::RopeScaling::none);
}

// MistralForCausalLM is Llama with MistralConfig's defaults, its positions
// cut to the sliding window (a null window: none); init_from's check refuses
// a deck longer than the window.
TEST(HfMap, MistralConfigIsLlamaWithinItsWindow) {
  const std::string base = R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral",
      "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 16, "intermediate_size": 40,
      "vocab_size": 300, "rope_theta": 1000000.0)";
  ModelConfig v1 = hf::model_of_config_json(base + R"(, "max_position_embeddings": 32768, "sliding_window": 4096})", "v1");
  EXPECT_EQ(v1.family, Family::llama);
  EXPECT_EQ(v1.seq_len, 4096);
  EXPECT_EQ(v1.n_kv_heads, 8);  // MistralConfig's default, not num_attention_heads
  EXPECT_FLOAT_EQ(v1.rope_theta, 1e6f);
  EXPECT_FALSE(v1.tied());
  ModelConfig v3 = hf::model_of_config_json(base + R"(, "max_position_embeddings": 32768, "sliding_window": null})", "v3");
  EXPECT_EQ(v3.seq_len, 32768);
  ModelConfig defaults = hf::model_of_config_json(base + "}", "d");
  EXPECT_EQ(defaults.seq_len, 4096);  // the default window of the default 131072 positions
  EXPECT_EQ(defaults.n_kv_heads, 8);
  EXPECT_EQ(hf::model_of_config_json(base + R"(, "num_key_value_heads": null})", "n").n_kv_heads, 16);  // as MistralConfig
  // init_from: the deck's model (Llama) against the Mistral file.
  const std::string file = base + R"(, "num_key_value_heads": 8, "sliding_window": 4096})";
  ModelConfig deck = v1;
  EXPECT_EQ(hf::check_config_json(file, "f", deck, hf::Arch::llama), "");
  deck.seq_len = 8192;
  EXPECT_NE(hf::check_config_json(file, "f", deck, hf::Arch::llama)
                .find("\"sliding_window\" = 4096 is shorter than the deck's model.seq_len = 8192"),
            std::string::npos);
  EXPECT_NE(hf::check_config_json(file, "f", deck, hf::Arch::gpt2).find("architecture \"MistralForCausalLM\""),
            std::string::npos);
}

// Qwen2ForCausalLM is Llama with model.qkv_bias and Qwen2Config's defaults
// (32 key/value heads, 32768 positions); its sliding window counts only with
// "use_sliding_window" (then as Mistral's: the positions cut to it).
TEST(HfMap, Qwen2ConfigIsLlamaWithQkvBiases) {
  // Qwen2.5-0.5B's config.json, as published.
  const std::string q25 = R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
      "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896,
      "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 32768,
      "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
      "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 32768,
      "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
      "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";
  const ModelConfig m = hf::model_of_config_json(q25, "q25");
  EXPECT_TRUE(m.has_qkv_bias());
  expect_published(m, {.n_layers = 24, .d_model = 896, .head_dim = 64, .n_kv_heads = 2, .seq_len = 32768,
                       .rope_theta = 1e6f});
  EXPECT_EQ(hf::arch_of(m, "x", nullptr), hf::Arch::qwen2);
  EXPECT_EQ(hf::check_config_json(q25, "q25", m, hf::Arch::qwen2), "");
  // The same file for a deck without the biases: another class.
  ModelConfig plain = m;
  plain.qkv_bias = 0;
  EXPECT_NE(hf::check_config_json(q25, "q25", plain, hf::arch_of(plain, "x", nullptr))
                .find("architecture \"Qwen2ForCausalLM\", but the deck's model is a LlamaForCausalLM"),
            std::string::npos);
  const std::string base = R"({"architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 32, "intermediate_size": 40, "vocab_size": 300)";
  const ModelConfig d = hf::model_of_config_json(base + "}", "d");
  EXPECT_EQ(d.n_kv_heads, 32);  // Qwen2Config's default
  EXPECT_EQ(d.seq_len, 32768);
  EXPECT_FALSE(d.tied());
  EXPECT_FLOAT_EQ(d.norm_eps, 1e-6f);
  EXPECT_EQ(hf::model_of_config_json(base + R"(, "use_sliding_window": true, "sliding_window": 1024})", "w").seq_len,
            1024);
  EXPECT_EQ(hf::model_of_config_json(base + R"(, "use_sliding_window": true})", "w").seq_len, 4096);
  ModelConfig deck = d;
  deck.seq_len = 2048;
  EXPECT_NE(hf::check_config_json(base + R"(, "use_sliding_window": true, "sliding_window": 1024})", "w", deck,
                                  hf::Arch::qwen2)
                .find("\"sliding_window\" = 1024 is shorter than the deck's model.seq_len = 2048"),
            std::string::npos);
  // config_json writes the class, its model_type and the window off.
  const auto j = nlohmann::json::parse(hf::config_json(qwen2_tiny(), hf::Arch::qwen2, "float32"));
  EXPECT_EQ(j["architectures"][0], "Qwen2ForCausalLM");
  EXPECT_EQ(j["model_type"], "qwen2");
  EXPECT_EQ(j["use_sliding_window"], false);
  EXPECT_FALSE(j.contains("attention_bias"));
}

// Each base + tail is refused by model_of_config_json with a message that
// holds its want.
template <size_t N>
void expect_refused(const std::string& base, const std::pair<const char*, std::string> (&refused)[N]) {
  for (const auto& [tail, want] : refused) {
    try {
      hf::model_of_config_json(base + tail, "cfg");
      ADD_FAILURE() << tail << ": not refused";
    } catch (const pentad::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << tail << ": " << e.what();
    }
  }
}

// The message f() throws as an InputError, or "(accepted)".
template <class F>
std::string refusal_of(F&& f) {
  try {
    f();
  } catch (const pentad::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

// config.json `base` with `key` set to `value` (null: removed) must be
// refused by model_of_config_json with a message containing `want`.
void expect_config_refused(const std::string& base, const std::string& key, const nlohmann::json& value,
                           const std::string& want) {
  auto j = nlohmann::json::parse(base);
  if (value.is_null())
    j.erase(key);
  else
    j[key] = value;
  const std::string got = refusal_of([&] { hf::model_of_config_json(j.dump(), "cfg"); });
  EXPECT_NE(got.find(want), std::string::npos) << key << " = " << value.dump() << ": " << got;
}

// Phi3ForCausalLM stores the Llama fused: qkv_proj's rows are q_proj's,
// k_proj's, v_proj's (each as the Llama's, RoPE's permutation included),
// gate_up_proj's gate_proj's then up_proj's; every other tensor is the
// Llama's. An import of a Llama deck takes it when config.json (or, without
// one, the files' fused tensor) says so; an export when --class names it.
TEST(HfMap, Phi3FusesTheLlamasProjections) {
  const ModelConfig m = tiny(Family::llama, 0);
  const auto llama = hf::rules(m, hf::Arch::llama), phi3 = hf::rules(m, hf::Arch::phi3);
  const auto pen = random_pentad(llama);
  const auto get = [&](const std::string& n) -> const std::vector<float>& { return pen.at(n); };
  const auto of = [&](const std::vector<hf::Rule>& rs, const std::string& n) { return hf::build_hf(rs, n, get); };
  for (int l = 0; l < m.n_layers; ++l) {
    const std::string h = "model.layers." + std::to_string(l) + ".";
    std::vector<float> qkv = of(llama, h + "self_attn.q_proj.weight"), gate_up = of(llama, h + "mlp.gate_proj.weight");
    for (const char* x : {"k_proj", "v_proj"}) {
      const auto part = of(llama, h + "self_attn." + x + ".weight");
      qkv.insert(qkv.end(), part.begin(), part.end());
    }
    const auto up = of(llama, h + "mlp.up_proj.weight");
    gate_up.insert(gate_up.end(), up.begin(), up.end());
    EXPECT_EQ(of(phi3, h + "self_attn.qkv_proj.weight"), qkv) << h;
    EXPECT_EQ(of(phi3, h + "mlp.gate_up_proj.weight"), gate_up) << h;
    for (const char* x : {"self_attn.o_proj.weight", "mlp.down_proj.weight", "input_layernorm.weight"})
      EXPECT_EQ(of(phi3, h + x), of(llama, h + x)) << h << x;
  }
  const auto names = hf::hf_names(phi3);
  EXPECT_EQ(names.size(), size_t(3 + 6 * m.n_layers));  // embed, norm, head; 2 norms, qkv, o, gate_up, down
  EXPECT_EQ(std::string(hf::arch_class(hf::Arch::phi3)), "Phi3ForCausalLM");
  // Which rules an import reads for the deck's class.
  const auto none = [](const std::string&) { return false; };
  const auto fused = [](const std::string& n) { return n == "model.layers.0.self_attn.qkv_proj.weight"; };
  const std::string phi3_cfg = R"({"architectures": ["Phi3ForCausalLM"]})";
  EXPECT_EQ(hf::import_arch(hf::Arch::llama, phi3_cfg, none), hf::Arch::phi3);
  EXPECT_EQ(hf::import_arch(hf::Arch::llama, R"({"architectures": ["LlamaForCausalLM"]})", fused), hf::Arch::llama);
  EXPECT_EQ(hf::import_arch(hf::Arch::llama, "", fused), hf::Arch::phi3);
  EXPECT_EQ(hf::import_arch(hf::Arch::llama, "", none), hf::Arch::llama);
  EXPECT_EQ(hf::import_arch(hf::Arch::qwen2, phi3_cfg, fused), hf::Arch::qwen2);  // then check_config_json refuses
  EXPECT_EQ(hf::import_arch(hf::Arch::llama, "{not json", fused), hf::Arch::llama);
  // Which class an export writes: the deck's, or Phi-3's for a plain Llama.
  EXPECT_EQ(hf::export_arch(m, "", "w", nullptr), hf::Arch::llama);
  EXPECT_EQ(hf::export_arch(m, "LlamaForCausalLM", "w", nullptr), hf::Arch::llama);
  EXPECT_EQ(hf::export_arch(m, "Phi3ForCausalLM", "w", nullptr), hf::Arch::phi3);
  const auto refusal = [](const ModelConfig& x, const std::string& cls) {
    try {
      hf::export_arch(x, cls, "w", nullptr);
    } catch (const pentad::InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(refusal(m, "MistralForCausalLM").find("this model is written as LlamaForCausalLM or Phi3ForCausalLM"),
            std::string::npos);
  EXPECT_NE(refusal(qwen2_tiny(), "Phi3ForCausalLM").find("this model is written as Qwen2ForCausalLM"),
            std::string::npos);
  ModelConfig scaled = m;
  scaled.rope_scaling = pentad::RopeScaling::linear;
  scaled.rope_scaling_factor = 4.0f;
  EXPECT_NE(refusal(scaled, "Phi3ForCausalLM").find("model.rope_scaling = \"linear\" has no Phi-3 form"),
            std::string::npos);
}

// Phi3ForCausalLM's config.json: Phi3Config's defaults (key/value heads =
// heads, 4096 positions, rms_norm_eps 1e-5, no window); a window cuts the
// positions (Phi-3-mini-4k's 2047 of 4096); a scaled RoPE other than
// LongRoPE, LongRoPE lists of the wrong length and a partial rotary factor
// that turns no whole pair refused.
TEST(HfMap, Phi3ConfigIsLlamaWithinItsWindow) {
  // Phi-3-mini-4k-instruct's sizes and keys.
  const std::string mini = R"({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3",
      "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "silu", "max_position_embeddings": 4096,
      "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "rope_scaling": null,
      "sliding_window": 2047, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 32000,
      "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attention_dropout": 0.0)";
  const ModelConfig m = hf::model_of_config_json(mini + "}", "mini");
  EXPECT_EQ(m.family, Family::llama);
  EXPECT_EQ(m.seq_len, 2047);
  EXPECT_EQ(m.n_kv_heads, 32);
  EXPECT_EQ(m.head_dim(), 96);
  EXPECT_EQ(m.d_ff, 8192);
  EXPECT_FLOAT_EQ(m.norm_eps, 1e-5f);
  EXPECT_FALSE(m.tied());
  EXPECT_EQ(m.rope_scaling, pentad::RopeScaling::none);
  EXPECT_EQ(hf::check_config_json(mini + "}", "mini", m, hf::Arch::phi3), "");
  // The file's class is Phi-3's: a Llama's rules do not read it.
  EXPECT_NE(hf::check_config_json(mini + "}", "mini", m, hf::Arch::llama).find("architecture \"Phi3ForCausalLM\""),
            std::string::npos);
  ModelConfig longer = m;
  longer.seq_len = 4096;
  EXPECT_NE(hf::check_config_json(mini + "}", "mini", longer, hf::Arch::phi3)
                .find("\"sliding_window\" = 2047 is shorter than the deck's model.seq_len = 4096"),
            std::string::npos);
  // Phi-4's: GQA, a 16k context without a window, its own theta.
  const std::string phi4 = R"({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "vocab_size": 100352,
      "hidden_size": 5120, "intermediate_size": 17920, "num_hidden_layers": 40, "num_attention_heads": 40,
      "num_key_value_heads": 10, "max_position_embeddings": 16384, "original_max_position_embeddings": 16384,
      "rms_norm_eps": 1e-05, "rope_theta": 250000, "rope_scaling": null, "sliding_window": null})";
  const ModelConfig p4 = hf::model_of_config_json(phi4, "phi4");
  EXPECT_EQ(p4.seq_len, 16384);
  EXPECT_EQ(p4.n_kv_heads, 10);
  EXPECT_FLOAT_EQ(p4.rope_theta, 250000.0f);
  // Phi3Config's defaults for missing keys.
  const ModelConfig d = hf::model_of_config_json(R"({"architectures": ["Phi3ForCausalLM"], "vocab_size": 300,
      "hidden_size": 64, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 4})", "d");
  EXPECT_EQ(d.seq_len, 4096);
  EXPECT_EQ(d.n_kv_heads, 4);
  EXPECT_FLOAT_EQ(d.norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(d.rope_theta, 10000.0f);
  EXPECT_FALSE(d.tied());
  const std::string lists = "model.rope_short_factor has 1 number but rope_scaling = \"longrope\" needs one per pair "
                            "of a head's channels RoPE turns: model.head_dim=96 / 2 = 48";
  const std::pair<const char*, std::string> refused[] = {
      {R"(, "rope_scaling": {"type": "longrope", "short_factor": [1], "long_factor": [2]}})", lists},
      {R"(, "rope_scaling": {"type": "su", "short_factor": [1], "long_factor": [2]}})", lists},
      // Phi-3's "yarn" is LongRoPE: its lists are required.
      {R"(, "rope_scaling": {"type": "yarn", "factor": 4}})", "has no list of numbers \"short_factor\""},
      {R"(, "rope_scaling": {"type": "longrope", "short_factor": [1, -1], "long_factor": [2]}})",
       "\"short_factor\" holds -1, not a number > 0"},
      {R"(, "rope_scaling": {"rope_type": "linear", "factor": 4}})",
       "of type \"linear\": Phi3ForCausalLM's scaled RoPE is LongRoPE"},
      {R"(, "partial_rotary_factor": 0.01})", "\"partial_rotary_factor\" = 0.01 turns 0 of a head's 96 channels"},
      {R"(, "partial_rotary_factor": 1.5})", "\"partial_rotary_factor\" = 1.5 is not a number in (0, 1]"},
      {R"(, "partial_rotary_factor": 0.5, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
          "partial_rotary_factor": 0.75}})", "\"partial_rotary_factor\" = 0.5 but \"rope_parameters\" has 0.75"},
      {R"(, "hidden_act": "gelu"})", "\"hidden_act\" = \"gelu\""},
  };
  const std::string base = mini.substr(0, mini.find(R"(, "rope_scaling": null)")) + R"(, "sliding_window": 2047)";
  expect_refused(base, refused);
  EXPECT_EQ(hf::model_of_config_json(base + R"(, "rope_scaling": {"type": "default"}})", "b").seq_len, 2047);
}

// Phi-4-mini's partial rotary (partial_rotary_factor 0.75 of 128: the first
// 96 channels of each head turn, with LongRoPE over them): read as
// model.rotary_dim, checked against a deck, written back only as Phi-3; a
// Llama's refused.
TEST(HfMap, Phi4MiniPartialRotaryIsReadCheckedAndWritten) {
  nlohmann::json c = {{"architectures", {"Phi3ForCausalLM"}}, {"vocab_size", 200064}, {"hidden_size", 3072},
                      {"intermediate_size", 8192}, {"num_hidden_layers", 32}, {"num_attention_heads", 24},
                      {"num_key_value_heads", 8}, {"max_position_embeddings", 131072},
                      {"original_max_position_embeddings", 4096}, {"partial_rotary_factor", 0.75},
                      {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"tie_word_embeddings", true},
                      {"sliding_window", 262144}};
  c["rope_scaling"] = {{"type", "longrope"},
                       {"short_factor", std::vector<double>(48, 1.0)},
                       {"long_factor", std::vector<double>(48, 2.0)}};
  const ModelConfig m = hf::model_of_config_json(c.dump(), "phi4mini");
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.rotary_dim, 96);
  EXPECT_EQ(m.rotary_channels(), 96);
  EXPECT_EQ(m.rope_short_factor.size(), 48u);
  EXPECT_EQ(m.rope().rotary_dim, 96);
  EXPECT_EQ(hf::check_config_json(c.dump(), "phi4mini", m, hf::Arch::phi3), "");
  ModelConfig whole = m;
  whole.rotary_dim = 0;
  whole.rope_scaling = pentad::RopeScaling::none;
  EXPECT_NE(hf::check_config_json(c.dump(), "f", whole, hf::Arch::phi3)
                .find("RoPE turns 96 of a head's 128 channels (\"partial_rotary_factor\") but the deck's "
                      "model.rotary_dim = 0 (all 128)"),
            std::string::npos);
  nlohmann::json bad = c;
  bad["rope_scaling"]["short_factor"] = std::vector<double>(64, 1.0);  // one per pair of the whole head: wrong
  EXPECT_NE(refusal_of([&] { hf::model_of_config_json(bad.dump(), "b"); })
                .find("needs one per pair of a head's channels RoPE turns: model.rotary_dim=96 / 2 = 48"),
            std::string::npos);
  nlohmann::json llama = c;
  llama["architectures"] = {"LlamaForCausalLM"};
  llama.erase("sliding_window");
  llama.erase("rope_scaling");
  EXPECT_NE(refusal_of([&] { hf::model_of_config_json(llama.dump(), "l"); })
                .find("pentad turns part of a head as Phi3ForCausalLM only, not as LlamaForCausalLM"),
            std::string::npos);
  // Written back as Phi-3 only, the factor exact.
  const auto j = nlohmann::json::parse(hf::config_json(m, hf::Arch::phi3, "bfloat16"));
  EXPECT_EQ(j["partial_rotary_factor"], 0.75);
  EXPECT_EQ(hf::model_of_config_json(j.dump(), "back").rotary_dim, 96);
  ModelConfig plain = m;
  plain.rope_scaling = pentad::RopeScaling::none;
  EXPECT_EQ(hf::export_arch(plain, "Phi3ForCausalLM", "w", nullptr), hf::Arch::phi3);
  EXPECT_NE(refusal_of([&] { hf::export_arch(plain, "", "w", nullptr); })
                .find("model.rotary_dim = 96 (RoPE on part of a head) is written as Phi3ForCausalLM only"),
            std::string::npos);
  ModelConfig third = plain;  // 30 of 44: 44 * (30 / 44.0) = 29.99...: no exact factor
  third.d_head = 44;
  third.rotary_dim = 30;
  EXPECT_NE(refusal_of([&] { hf::export_arch(third, "Phi3ForCausalLM", "w", nullptr); })
                .find("has no exact partial_rotary_factor"),
            std::string::npos);
}

// With a partial rotary the permutation leaves a head's unturned rows in
// place: q . k of every head, pentad's interleaved pairs over the first R
// channels of its weights against Phi-3's rotate_half over the first R of
// the exported ones (the rest passed through), agree at every pair of
// positions; the whole-head permutation would not.
TEST(HfMap, PartialRotaryRowsKeepTheUnturnedChannels) {
  ModelConfig m = tiny(Family::llama, 0);
  m.d_model = 32;
  m.d_head = 8;
  m.rotary_dim = 4;
  const int D = 8, R = 4, C = 32;
  const double theta = m.rope_theta;
  const auto rs = hf::rules(m, hf::Arch::phi3);
  const auto pen = random_pentad(rs);
  std::vector<double> x(static_cast<size_t>(C)), y(static_cast<size_t>(C));
  for (int c = 0; c < C; ++c) {
    x[size_t(c)] = std::sin(0.7 * c + 0.3);
    y[size_t(c)] = std::cos(0.4 * c - 0.2);
  }
  const auto rows = [&](const std::vector<float>& w, int row0, int heads, const std::vector<double>& v) {
    std::vector<double> out(size_t(heads * D), 0.0);
    for (int r = 0; r < heads * D; ++r)
      for (int c = 0; c < C; ++c) out[size_t(r)] += double(w[size_t((row0 + r) * C + c)]) * v[size_t(c)];
    return out;
  };
  // pentad: pairs (2i, 2i+1) for i < R/2 turn; Phi-3: (i, i + R/2) for i < R/2, rows from R on pass.
  const auto turn_pentad = [&](std::vector<double> v, int pos) {
    for (size_t h = 0; h < v.size() / D; ++h)
      for (int i = 0; i < R / 2; ++i) {
        const double a = pos * std::pow(theta, -2.0 * i / R), x0 = v[h * D + 2 * i], x1 = v[h * D + 2 * i + 1];
        v[h * D + 2 * i] = x0 * std::cos(a) - x1 * std::sin(a);
        v[h * D + 2 * i + 1] = x0 * std::sin(a) + x1 * std::cos(a);
      }
    return v;
  };
  const auto turn_phi3 = [&](std::vector<double> v, int pos) {
    for (size_t h = 0; h < v.size() / D; ++h)
      for (int i = 0; i < R / 2; ++i) {
        const double a = pos * std::pow(theta, -2.0 * i / R), x0 = v[h * D + i], x1 = v[h * D + i + R / 2];
        v[h * D + i] = x0 * std::cos(a) - x1 * std::sin(a);
        v[h * D + i + R / 2] = x1 * std::cos(a) + x0 * std::sin(a);
      }
    return v;
  };
  const auto get = [&](const std::string& n) -> const std::vector<float>& { return pen.at(n); };
  const auto qkv = hf::build_hf(rs, "model.layers.0.self_attn.qkv_proj.weight", get);
  const int H = m.n_heads, K = m.n_kv_heads;
  double worst = 0;
  for (int pq : {0, 2, 9})
    for (int pk : {0, 5}) {
      const auto qa = turn_pentad(rows(pen.at("model/layers/0/attn/wq"), 0, H, x), pq);
      const auto ka = turn_pentad(rows(pen.at("model/layers/0/attn/wk"), 0, K, y), pk);
      const auto qb = turn_phi3(rows(qkv, 0, H, x), pq), kb = turn_phi3(rows(qkv, H * D, K, y), pk);
      for (int h = 0; h < H; ++h) {
        const int g = h / (H / K);
        double sa = 0, sb = 0;
        for (int d = 0; d < D; ++d) {
          sa += qa[size_t(h * D + d)] * ka[size_t(g * D + d)];
          sb += qb[size_t(h * D + d)] * kb[size_t(g * D + d)];
        }
        worst = std::max(worst, std::abs(sa - sb));
      }
    }
  EXPECT_LE(worst, 1e-12);
  // Row 5 of a head (unturned) stays row 5; row 1 (pair 0's second) is Phi-3's row R/2 = 2.
  const auto& wq = pen.at("model/layers/0/attn/wq");
  for (int c = 0; c < C; ++c) {
    EXPECT_EQ(qkv[size_t(5 * C + c)], wq[size_t(5 * C + c)]);
    EXPECT_EQ(qkv[size_t(2 * C + c)], wq[size_t(1 * C + c)]);
  }
}

// LongRoPE as Phi-3-mini-128k's config.json gives it (type "longrope"; the
// older "su" and "yarn" read the same): the two lists, the original context,
// the extension 131072 / 4096 = 32 (its attention factor sqrt(1 + ln 32 /
// ln 4096)); checked against a deck list by list; written back as Phi3Config
// holds it (three keys, the extension as max_position_embeddings).
TEST(HfMap, Phi3LongRopeIsReadCheckedAndWritten) {
  std::vector<double> short_f, long_f;
  for (int i = 0; i < 48; ++i) {
    short_f.push_back(1.0 + 0.01 * i);
    long_f.push_back(1.0 + 0.5 * i);
  }
  const auto config = [&](const char* type, const std::string& extra) {
    nlohmann::json rs = {{"type", type}, {"short_factor", short_f}, {"long_factor", long_f}};
    return std::string(R"({"architectures": ["Phi3ForCausalLM"], "vocab_size": 32064, "hidden_size": 3072,
      "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
      "max_position_embeddings": 131072, "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
      "rope_theta": 10000.0, "sliding_window": 262144, "rope_scaling": )") + rs.dump() + extra + "}";
  };
  for (const char* type : {"longrope", "su", "yarn"}) {
    SCOPED_TRACE(type);
    const ModelConfig m = hf::model_of_config_json(config(type, ""), "mini128k");
    EXPECT_EQ(m.rope_scaling, pentad::RopeScaling::longrope);
    EXPECT_EQ(m.rope_original_context, 4096);
    EXPECT_EQ(m.rope_scaling_factor, 32.0f);
    EXPECT_EQ(m.rope_attention_factor, 0.0f);
    EXPECT_EQ(m.rope_short_factor, short_f);
    EXPECT_EQ(m.rope_long_factor, long_f);
    EXPECT_EQ(m.seq_len, 131072);
    EXPECT_NEAR(pentad::rope_attention_factor(m.rope()), std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)), 1e-12);
    EXPECT_EQ(hf::check_config_json(config(type, ""), "mini128k", m, hf::Arch::phi3), "");
  }
  const ModelConfig m = hf::model_of_config_json(config("longrope", ""), "mini128k");
  ModelConfig other = m;
  other.rope_long_factor[7] = 9.0;
  EXPECT_NE(hf::check_config_json(config("longrope", ""), "f", other, hf::Arch::phi3)
                .find("\"rope_scaling\" has \"long_factor\"[7] = 4.5 but the deck's model.rope_long_factor has 9.0"),
            std::string::npos);
  other = m;
  other.rope_original_context = 2048;
  EXPECT_NE(hf::check_config_json(config("longrope", ""), "f", other, hf::Arch::phi3)
                .find("\"original_max_position_embeddings\" = 4096.0 but the deck has model.rope_original_context"),
            std::string::npos);
  other = m;
  other.rope_scaling = pentad::RopeScaling::none;
  EXPECT_NE(hf::check_config_json(config("longrope", ""), "f", other, hf::Arch::phi3).find("but the deck has "
                                                                                          "model.rope_scaling = \"none\""),
            std::string::npos);
  // An attention factor of the file's own is kept; a Llama's "longrope" is not read.
  nlohmann::json with_att = nlohmann::json::parse(config("longrope", ""));
  with_att["rope_scaling"]["attention_factor"] = 1.5;
  EXPECT_EQ(hf::model_of_config_json(with_att.dump(), "a").rope_attention_factor, 1.5f);
  nlohmann::json llama = nlohmann::json::parse(config("longrope", ""));
  llama["architectures"] = {"LlamaForCausalLM"};
  llama.erase("sliding_window");
  EXPECT_NE(refusal_of([&] { hf::model_of_config_json(llama.dump(), "l"); })
                .find("(and as \"longrope\" in a Phi3ForCausalLM)"),
            std::string::npos);
  // Written back: only as Phi3ForCausalLM, in Phi3Config's form.
  EXPECT_EQ(hf::export_arch(m, "Phi3ForCausalLM", "w", nullptr), hf::Arch::phi3);
  const auto refusal = [](const ModelConfig& x, const std::string& cls) {
    return refusal_of([&] { hf::export_arch(x, cls, "w", nullptr); });
  };
  EXPECT_NE(refusal(m, "").find("model.rope_scaling = \"longrope\" is written as Phi3ForCausalLM only "
                                "(--class Phi3ForCausalLM), not as LlamaForCausalLM"),
            std::string::npos);
  EXPECT_NE(refusal(m, "LlamaForCausalLM").find("written as Phi3ForCausalLM only"), std::string::npos);
  ModelConfig own = m;
  own.rope_attention_factor = 1.5f;  // not sqrt(1 + ln 32 / ln 4096): Phi3Config cannot hold it
  EXPECT_NE(refusal(own, "Phi3ForCausalLM").find("its rope_scaling has no attention factor"), std::string::npos);
  own.rope_attention_factor = float(std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)));  // the derived one: fine
  EXPECT_EQ(refusal(own, "Phi3ForCausalLM"), "(accepted)");
  const auto j = nlohmann::json::parse(hf::config_json(m, hf::Arch::phi3, "bfloat16"));
  EXPECT_EQ(j["rope_scaling"].size(), 3u);
  EXPECT_EQ(j["rope_scaling"]["type"], "longrope");
  EXPECT_EQ(j["rope_scaling"]["short_factor"].get<std::vector<double>>(), short_f);
  EXPECT_EQ(j["rope_scaling"]["long_factor"].get<std::vector<double>>(), long_f);
  EXPECT_EQ(j["original_max_position_embeddings"], 4096);
  EXPECT_EQ(j["max_position_embeddings"], 131072);
  const ModelConfig back = hf::model_of_config_json(j.dump(), "back");
  EXPECT_EQ(back.rope_short_factor, short_f);
  EXPECT_EQ(back.rope_long_factor, long_f);
  EXPECT_EQ(back.rope_scaling_factor, 32.0f);
  EXPECT_EQ(back.rope_original_context, 4096);
}

// transformers 5's "rope_parameters" is read as "rope_theta" and
// "rope_scaling" (never the default theta in its place); spellings that
// differ, RoPE per layer type and a partial rotary factor are refused.
TEST(HfMap, RopeParametersAreReadAsRopeThetaAndScaling) {
  const std::string base = R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 16,
      "num_attention_heads": 4, "intermediate_size": 40, "vocab_size": 300, )";
  ModelConfig v5 = hf::model_of_config_json(base + R"("rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}})", "a");
  EXPECT_FLOAT_EQ(v5.rope_theta, 5e5f);
  EXPECT_EQ(v5.rope_scaling, pentad::RopeScaling::none);
  ModelConfig l3 = hf::model_of_config_json(
      base + R"("max_position_embeddings": 131072, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3",
          "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})", "b");
  EXPECT_EQ(l3.rope_scaling, pentad::RopeScaling::llama3);
  EXPECT_FLOAT_EQ(l3.rope_scaling_factor, 32.0f);
  EXPECT_EQ(l3.rope_original_context, 8192);
  ModelConfig deck = v5;
  EXPECT_EQ(hf::check_config_json(base + R"("rope_parameters": {"rope_theta": 500000.0}})", "c", deck, hf::Arch::llama), "");
  EXPECT_NE(hf::check_config_json(base + R"("rope_parameters": {"rope_theta": 10000.0}})", "c", deck, hf::Arch::llama)
                .find("\"rope_theta\" = 10000.0 but the deck has model.rope_theta"),
            std::string::npos);
  const std::pair<const char*, std::string> refused[] = {
      {R"("rope_theta": 10000.0, "rope_parameters": {"rope_theta": 500000.0}})",
       "\"rope_theta\" = 10000.0 but \"rope_parameters\" has 500000.0"},
      {R"("rope_parameters": {"full_attention": {"rope_theta": 1e6}, "sliding_attention": {"rope_theta": 1e4}}})",
       "\"rope_parameters\" has no number \"rope_theta\""},
      {R"("rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.5}})", "\"partial_rotary_factor\" = 0.5"},
      {R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0}, "rope_parameters": {"rope_theta": 1e4}})",
       "\"rope_scaling\" is of type \"llama3\" but \"rope_parameters\" of \"default\""},
      {R"("rope_parameters": {"rope_theta": 1e4, "rope_type": "longrope", "factor": 4.0}})",
       "pentad's RoPE scales as \"linear\", \"llama3\" or \"yarn\" only"},
  };
  expect_refused(base, refused);
}

// "rope_scaling" of rope_type "yarn" as transformers reads it: the missing
// keys' defaults, null as missing, a mscale pair's attention factor, the
// original context from max_position_embeddings when missing; init_from's
// check compares every value with the deck, the attention factor as what
// it comes to.
TEST(HfMap, YarnRopeScalingIsReadAndChecked) {
  const std::string base = R"({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2, "hidden_size": 16,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "intermediate_size": 40,
      "vocab_size": 300, "max_position_embeddings": 40960, )";
  // Qwen3's model card: {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}.
  const ModelConfig q = hf::model_of_config_json(
      base + R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0,
          "original_max_position_embeddings": 32768}})", "q");
  EXPECT_EQ(q.rope_scaling, pentad::RopeScaling::yarn);
  EXPECT_EQ(q.rope_scaling_factor, 4.0f);
  EXPECT_EQ(q.rope_original_context, 32768);
  EXPECT_EQ(q.rope_beta_fast, 32.0f);
  EXPECT_EQ(q.rope_beta_slow, 1.0f);
  EXPECT_EQ(q.rope_attention_factor, 0.0f);
  EXPECT_TRUE(q.rope_truncate);
  EXPECT_EQ(q.seq_len, 40960);
  // The older spelling "type", nulls as missing, no original context (max_position_embeddings),
  // and DeepSeek's mscale pair: attention factor (0.1 * 1 * ln 40 + 1) / (0.1 * 0.5 * ln 40 + 1).
  const ModelConfig d = hf::model_of_config_json(
      base + R"("rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": null, "beta_slow": null,
          "mscale": 1.0, "mscale_all_dim": 0.5, "truncate": false}})", "d");
  EXPECT_EQ(d.rope_original_context, 40960);
  EXPECT_EQ(d.rope_beta_fast, 32.0f);
  EXPECT_EQ(d.rope_beta_slow, 1.0f);
  EXPECT_FALSE(d.rope_truncate);
  EXPECT_FLOAT_EQ(d.rope_attention_factor, float((0.1 * std::log(40.0) + 1) / (0.05 * std::log(40.0) + 1)));
  const std::pair<const char*, std::string> refused[] = {
      {R"("rope_scaling": {"rope_type": "yarn"}})", "\"rope_scaling\" has no number \"factor\""},
      {R"("rope_scaling": {"rope_type": "yarn", "factor": 4, "beta_fast": "32"}})",
       "\"rope_scaling\" has \"beta_fast\" = \"32\", not a number"},
      {R"("rope_scaling": {"rope_type": "yarn", "factor": 4, "truncate": 0}})",
       "\"rope_scaling\" has \"truncate\" = 0, not true or false"},
      {R"("rope_scaling": {"rope_type": "dynamic", "factor": 4}})",
       "scales as \"linear\", \"llama3\" or \"yarn\" only"},
  };
  expect_refused(base, refused);
  // init_from's check: each key against the deck.
  const std::string qwen = base + R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0,
      "original_max_position_embeddings": 32768}})";
  EXPECT_EQ(hf::check_config_json(qwen, "c", q, hf::Arch::qwen3), "");
  ModelConfig deck = q;
  deck.rope_attention_factor = float(0.1 * std::log(4.0) + 1.0);  // given as what it comes to: the same
  EXPECT_EQ(hf::check_config_json(qwen, "c", deck, hf::Arch::qwen3), "");
  const auto differs = [&](void (*edit)(ModelConfig&), const std::string& want) {
    ModelConfig m = q;
    edit(m);
    const std::string e = hf::check_config_json(qwen, "c", m, hf::Arch::qwen3);
    EXPECT_NE(e.find(want), std::string::npos) << e;
  };
  differs([](ModelConfig& m) { m.rope_scaling = pentad::RopeScaling::none; },
          "but the deck has model.rope_scaling = \"none\"");
  differs([](ModelConfig& m) { m.rope_scaling = pentad::RopeScaling::llama3; },
          "but the deck has model.rope_scaling = \"llama3\"");
  differs([](ModelConfig& m) { m.rope_scaling_factor = 8.0f; },
          "\"rope_scaling\" comes to \"factor\" = 4.0 but the deck has model.rope_scaling_factor = 8.0");
  differs([](ModelConfig& m) { m.rope_original_context = 4096; }, "model.rope_original_context = 4096");
  differs([](ModelConfig& m) { m.rope_beta_fast = 16.0f; }, "model.rope_beta_fast = 16.0");
  differs([](ModelConfig& m) { m.rope_beta_slow = 2.0f; }, "model.rope_beta_slow = 2.0");
  differs([](ModelConfig& m) { m.rope_attention_factor = 1.0f; }, "model.rope_attention_factor");
  differs([](ModelConfig& m) { m.rope_truncate = false; }, "model.rope_truncate (1: true) = 0.0");
  // config_json writes every key and YaRN's context as max_position_embeddings.
  ModelConfig w = q;
  w.seq_len = 64;
  const auto j = nlohmann::json::parse(hf::config_json(w, hf::Arch::qwen3, "float32"));
  EXPECT_EQ(j["max_position_embeddings"], 131072);
  EXPECT_EQ(j["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(j["rope_scaling"]["factor"], 4.0);
  EXPECT_EQ(j["rope_scaling"]["original_max_position_embeddings"], 32768);
  EXPECT_EQ(j["rope_scaling"]["beta_fast"], 32.0);
  EXPECT_EQ(j["rope_scaling"]["beta_slow"], 1.0);
  EXPECT_EQ(j["rope_scaling"]["truncate"], true);
  EXPECT_FALSE(j["rope_scaling"].contains("attention_factor"));  // derived by the reader as by pentad
}

// "rope_scaling" of type "linear" (DeepSeek-Coder's Llamas: {"type":
// "linear", "factor": 4.0}): the factor read, written and checked.
TEST(HfMap, LinearRopeScalingIsReadAndChecked) {
  const std::string cfg = R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 16,
      "num_attention_heads": 4, "intermediate_size": 40, "vocab_size": 300, "max_position_embeddings": 16384,
      "rope_theta": 100000, "rope_scaling": {"type": "linear", "factor": 4.0}})";
  const ModelConfig m = hf::model_of_config_json(cfg, "c");
  EXPECT_EQ(m.rope_scaling, pentad::RopeScaling::linear);
  EXPECT_EQ(m.rope_scaling_factor, 4.0f);
  EXPECT_EQ(hf::check_config_json(cfg, "c", m, hf::Arch::llama), "");
  ModelConfig other = m;
  other.rope_scaling_factor = 2.0f;
  EXPECT_NE(hf::check_config_json(cfg, "c", other, hf::Arch::llama)
                .find("\"rope_scaling\" comes to \"factor\" = 4.0 but the deck has model.rope_scaling_factor = 2.0"),
            std::string::npos);
  other = m;
  other.rope_original_context = 4096;  // not a key of linear scaling
  EXPECT_EQ(hf::check_config_json(cfg, "c", other, hf::Arch::llama), "");
  const auto j = nlohmann::json::parse(hf::config_json(m, hf::Arch::llama, "float32"));
  EXPECT_EQ(j["rope_scaling"], nlohmann::json::parse(R"({"rope_type": "linear", "factor": 4.0})"));
  EXPECT_EQ(j["max_position_embeddings"], 16384);
  try {
    hf::model_of_config_json(R"({"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2, "hidden_size": 16,
        "num_attention_heads": 4, "intermediate_size": 40, "vocab_size": 300, "rope_scaling": {"type": "linear"}})",
                             "c");
    ADD_FAILURE() << "linear without a factor: not refused";
  } catch (const pentad::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"rope_scaling\" has no number \"factor\""), std::string::npos) << e.what();
  }
}

// What pentad's models do not have is refused, naming the key.
// config.json's head_dim (Mistral Nemo's, Qwen3's): read as model.head_dim,
// checked both ways, a missing one being hidden_size / num_attention_heads.
TEST(HfMap, HeadDimOfItsOwnIsReadAndChecked) {
  // Mistral-Nemo-Base-2407's shape: 32 heads of 128 in a 5120-wide model.
  const std::string nemo = R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral",
      "hidden_size": 5120, "head_dim": 128, "num_attention_heads": 32, "num_key_value_heads": 8,
      "num_hidden_layers": 40, "intermediate_size": 14336, "max_position_embeddings": 1024000,
      "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false,
      "vocab_size": 131072})";
  const ModelConfig m = hf::model_of_config_json(nemo, "nemo");
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.d_model, 5120);
  EXPECT_EQ(hf::check_config_json(nemo, "nemo", m, hf::Arch::llama), "");
  // The exported config.json says so, and reads back.
  const auto out = nlohmann::json::parse(hf::config_json(m, hf::Arch::llama, "bfloat16"));
  EXPECT_EQ(out["head_dim"], 128);
  EXPECT_EQ(hf::model_of_config_json(out.dump(), "out").head_dim(), 128);
  // A deck whose heads differ from the file's, either way.
  ModelConfig deck = m;
  deck.d_head = 160;  // 5120 / 32
  EXPECT_NE(hf::check_config_json(nemo, "nemo", deck, hf::Arch::llama)
                .find("\"head_dim\" = 128 but the deck has model.head_dim = 160"),
            std::string::npos);
  auto no_hd = nlohmann::json::parse(nemo);
  no_hd.erase("head_dim");
  EXPECT_NE(hf::check_config_json(no_hd.dump(), "nemo", m, hf::Arch::llama)
                .find("\"head_dim\" = (missing: hidden_size / num_attention_heads) but the deck has "
                      "model.head_dim = 128"),
            std::string::npos);
  EXPECT_EQ(hf::check_config_json(no_hd.dump(), "nemo", deck, hf::Arch::llama), "");
  EXPECT_EQ(hf::model_of_config_json(no_hd.dump(), "nemo").head_dim(), 160);
}

TEST(HfMap, ConfigJsonRefusesOtherModels) {
  const auto llama = nlohmann::json::parse(hf::config_json(tiny(Family::llama, 0), hf::Arch::llama, "float32"));
  const std::pair<const char*, std::string> cases[] = {
      {R"({"sliding_window": 4096})", "\"sliding_window\" = 4096"},
      {R"({"hidden_act": "gelu"})", "\"hidden_act\" = \"gelu\""},
      {R"({"head_dim": 7})", "model.head_dim=7"},  // odd: no RoPE pairs
      {R"({"head_dim": "8"})", "\"head_dim\" = \"8\" is not a number"},
      {R"({"attention_bias": true})", "\"attention_bias\" = true"},
      {R"({"rope_scaling": {"rope_type": "dynamic", "factor": 4.0}})",
       "pentad's RoPE scales as \"linear\", \"llama3\" or \"yarn\" only"},
      {R"({"num_key_value_heads": 3})", "pentad has no such model"},
      {R"({"hidden_size": "16"})", "\"hidden_size\" = \"16\" is not a number"},
      {R"({"vocab_size": 0})", "\"vocab_size\" = 0 is not a positive integer"},
  };
  // A Mixtral's window, as a Llama's, is refused (Mistral's and Qwen2's are read).
  auto mixtral = nlohmann::json::parse(hf::config_json(tiny(Family::llama, 3), hf::Arch::mixtral, "float32"));
  mixtral["sliding_window"] = 4096;
  try {
    hf::model_of_config_json(mixtral.dump(), "cfg");
    ADD_FAILURE() << "a Mixtral sliding_window was not refused";
  } catch (const pentad::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"sliding_window\" = 4096"), std::string::npos) << e.what();
  }
  for (const auto& [patch, want] : cases) {
    nlohmann::json j = llama;
    j.merge_patch(nlohmann::json::parse(patch));
    try {
      hf::model_of_config_json(j.dump(), "cfg");
      ADD_FAILURE() << patch << ": not refused";
    } catch (const pentad::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << patch << ": " << e.what();
    }
  }
}

// Qwen3ForCausalLM is Llama with model.qk_norm (self_attn.q_norm, k_norm)
// and Qwen3Config's defaults (head_dim 128, 32 key/value heads, 32768
// positions); the norms' weights are permuted as one head's rows.
TEST(HfMap, Qwen3ConfigIsLlamaWithQkNorms) {
  // Qwen3-0.6B's config.json, as published.
  const std::string q3 = R"({"architectures": ["Qwen3ForCausalLM"], "attention_bias": false,
      "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128,
      "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
      "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16,
      "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null,
      "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
      "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";
  const ModelConfig m = hf::model_of_config_json(q3, "q3");
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(m.has_qkv_bias());
  expect_published(m, {.n_layers = 28, .d_model = 1024, .head_dim = 128, .n_kv_heads = 8, .seq_len = 40960,
                       .rope_theta = 1e6f});
  EXPECT_EQ(hf::arch_of(m, "x", nullptr), hf::Arch::qwen3);
  EXPECT_EQ(hf::check_config_json(q3, "q3", m, hf::Arch::qwen3), "");
  // The same file for a deck without the norms: another class.
  ModelConfig plain = m;
  plain.qk_norm = false;
  EXPECT_NE(hf::check_config_json(q3, "q3", plain, hf::arch_of(plain, "x", nullptr))
                .find("architecture \"Qwen3ForCausalLM\", but the deck's model is a LlamaForCausalLM"),
            std::string::npos);
  // Qwen3Config's defaults: head_dim 128 whatever the width, 32 kv heads.
  const std::string base = R"({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 40, "vocab_size": 300)";
  const ModelConfig d = hf::model_of_config_json(R"({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2,
      "hidden_size": 64, "num_attention_heads": 32, "intermediate_size": 40, "vocab_size": 300})", "d");
  EXPECT_EQ(d.head_dim(), 128);
  EXPECT_EQ(d.n_kv_heads, 32);
  EXPECT_EQ(d.seq_len, 32768);
  const ModelConfig narrow = hf::model_of_config_json(base + R"(, "head_dim": 8})", "n");
  EXPECT_EQ(narrow.head_dim(), 8);
  EXPECT_NE(hf::check_config_json(base + "}", "d", narrow, hf::Arch::qwen3)
                .find("\"head_dim\" = (missing: 128) but the deck has model.head_dim = 8"),
            std::string::npos);
  // Its attention_bias (every projection) is refused.
  try {
    hf::model_of_config_json(base + R"(, "head_dim": 16, "attention_bias": true})", "b");
    ADD_FAILURE() << "a Qwen3 attention_bias was not refused";
  } catch (const pentad::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("\"attention_bias\" = true"), std::string::npos) << e.what();
  }
  // config_json writes the class, its model_type, head_dim, no biases, the window off.
  const auto j = nlohmann::json::parse(hf::config_json(qwen3_tiny(), hf::Arch::qwen3, "float32"));
  EXPECT_EQ(j["architectures"][0], "Qwen3ForCausalLM");
  EXPECT_EQ(j["model_type"], "qwen3");
  EXPECT_EQ(j["head_dim"], 8);
  EXPECT_EQ(j["attention_bias"], false);
  EXPECT_EQ(j["use_sliding_window"], false);
  // The norm weights: a head's D rows, permuted as RoPE's pairs (pentad's
  // (2i, 2i+1) is Hugging Face's (i, i + D/2)).
  const std::vector<hf::Rule> rs = hf::rules(qwen3_tiny(), hf::Arch::qwen3);
  std::vector<float> w(8);
  for (int i = 0; i < 8; ++i) w[size_t(i)] = float(i);
  const std::vector<float> out = hf::build_hf(rs, "model.layers.1.self_attn.k_norm.weight",
                                              [&](const std::string&) -> const std::vector<float>& { return w; });
  EXPECT_EQ(out, (std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7}));
}

// GemmaForCausalLM is the Llama with Gemma's three keys (GeGLU, RMSNorms
// scaling by 1 + w, scaled embeddings), its tensors named as the Llama's.
TEST(HfMap, GemmaConfigIsLlamaWithItsThreeKeys) {
  // Gemma 2B's config.json: "hidden_act": "gelu", no "hidden_activation".
  const std::string g = R"({"architectures": ["GemmaForCausalLM"], "attention_bias": false,
      "attention_dropout": 0.0, "bos_token_id": 2, "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu",
      "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 16384, "max_position_embeddings": 8192,
      "model_type": "gemma", "num_attention_heads": 8, "num_hidden_layers": 18, "num_key_value_heads": 1,
      "pad_token_id": 0, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 10000.0,
      "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 256000})";
  const ModelConfig m = hf::model_of_config_json(g, "g");
  EXPECT_EQ(m.mlp_act, pentad::GateAct::gelu_tanh);
  EXPECT_TRUE(m.norm_plus_one);
  EXPECT_TRUE(m.embed_scale);
  EXPECT_FLOAT_EQ(m.embedding_multiplier(), std::sqrt(2048.0f));
  EXPECT_EQ(m.d_ff, 16384);
  EXPECT_EQ(m.vocab_size, 256000);
  EXPECT_FLOAT_EQ(m.norm_eps, 1e-6f);
  expect_published(m, {.n_layers = 18, .d_model = 2048, .head_dim = 256, .n_kv_heads = 1, .seq_len = 8192,
                       .rope_theta = 10000.0f});
  EXPECT_EQ(hf::arch_of(m, "x", nullptr), hf::Arch::gemma);
  EXPECT_EQ(hf::check_config_json(g, "g", m, hf::Arch::gemma), "");
  // GemmaConfig's defaults: heads of 256, 8192 positions, tied, the tanh GELU.
  const ModelConfig d = hf::model_of_config_json(R"({"architectures": ["GemmaForCausalLM"], "num_hidden_layers": 2,
      "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 40, "vocab_size": 300})", "d");
  EXPECT_EQ(d.head_dim(), 256);
  EXPECT_EQ(d.seq_len, 8192);
  EXPECT_TRUE(d.tied());
  EXPECT_EQ(d.mlp_act, pentad::GateAct::gelu_tanh);
  // The activation: hidden_activation decides where given; the exact GELU
  // named there, or SiLU anywhere, is refused.
  nlohmann::json j = nlohmann::json::parse(g);
  j["hidden_activation"] = "gelu_pytorch_tanh";
  EXPECT_EQ(hf::model_of_config_json(j.dump(), "a").mlp_act, pentad::GateAct::gelu_tanh);
  j["hidden_activation"] = "gelu";
  EXPECT_NE(refusal_of([&] { hf::model_of_config_json(j.dump(), "a"); })
                .find("a: \"hidden_activation\" = \"gelu\": pentad's Gemma uses the tanh GELU"),
            std::string::npos);
  EXPECT_NE(hf::check_config_json(j.dump(), "a", m, hf::Arch::gemma).find("\"hidden_activation\" = \"gelu\""),
            std::string::npos);
  j.erase("hidden_activation");
  j["hidden_act"] = "silu";
  EXPECT_NE(refusal_of([&] { hf::model_of_config_json(j.dump(), "s"); }).find("\"hidden_act\" = \"silu\""),
            std::string::npos);
  // The same file for a Llama deck: another class.
  ModelConfig plain = m;
  plain.mlp_act = pentad::GateAct::silu;
  plain.norm_plus_one = plain.embed_scale = false;
  EXPECT_NE(hf::check_config_json(g, "g", plain, hf::arch_of(plain, "x", nullptr))
                .find("architecture \"GemmaForCausalLM\", but the deck's model is a LlamaForCausalLM"),
            std::string::npos);
  // config_json writes the class, its model_type and the GELU in both keys.
  const auto c = nlohmann::json::parse(hf::config_json(m, hf::Arch::gemma, "float32"));
  EXPECT_EQ(c["architectures"][0], "GemmaForCausalLM");
  EXPECT_EQ(c["model_type"], "gemma");
  EXPECT_EQ(c["hidden_act"], "gelu_pytorch_tanh");
  EXPECT_EQ(c["hidden_activation"], "gelu_pytorch_tanh");
  EXPECT_EQ(c["head_dim"], 256);
  EXPECT_EQ(c["tie_word_embeddings"], true);
  EXPECT_EQ(hf::model_of_config_json(c.dump(), "c"), m);
  // The Llama's names; tied, so no lm_head; the norms' weights as they are.
  const std::vector<std::string> names = hf::hf_names(hf::rules(d, hf::Arch::gemma));
  EXPECT_EQ(std::count(names.begin(), names.end(), "lm_head.weight"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "model.layers.1.post_attention_layernorm.weight"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "model.layers.1.mlp.gate_proj.weight"), 1);
}

// A Llama with some of Gemma's keys, or Gemma with what its class lacks:
// no Hugging Face class, refused by name.
TEST(HfMap, GemmaMixesAreRefused) {
  ModelConfig m = tiny(Family::llama, 0);
  m.norm_plus_one = true;
  EXPECT_NE(refusal_of([&] { hf::arch_of(m, "w", nullptr); }).find("no Hugging Face class has this mix"),
            std::string::npos);
  m.mlp_act = pentad::GateAct::gelu_tanh;
  m.embed_scale = true;
  EXPECT_EQ(hf::arch_of(m, "w", nullptr), hf::Arch::gemma);
  ModelConfig qk = m;
  qk.qk_norm = true;
  EXPECT_NE(refusal_of([&] { hf::arch_of(qk, "w", nullptr); }).find("GemmaForCausalLM has no model.qk_norm"),
            std::string::npos);
  ModelConfig yarn = m;
  yarn.rope_scaling = pentad::RopeScaling::yarn;
  EXPECT_NE(refusal_of([&] { hf::arch_of(yarn, "w", nullptr); }).find("model.rope_scaling = \"yarn\""),
            std::string::npos);
  ModelConfig moe = m;
  moe.n_experts = 4;
  EXPECT_NE(refusal_of([&] { hf::arch_of(moe, "w", nullptr); }).find("a mixture of experts"), std::string::npos);
}

// Qwen3MoeForCausalLM is Qwen3 with experts in mlp.gate and
// mlp.experts.{e}.{gate,up,down}_proj, and Qwen3MoeConfig's defaults.
TEST(HfMap, Qwen3MoeConfigIsQwen3WithExperts) {
  // Qwen3-30B-A3B's config.json, from its published configuration.
  const std::string a3b = R"({"architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false,
      "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645,
      "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
      "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [],
      "model_type": "qwen3_moe", "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32,
      "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
      "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000.0,
      "router_aux_loss_coef": 0.001, "sliding_window": null, "tie_word_embeddings": false,
      "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true, "use_sliding_window": false,
      "vocab_size": 151936})";
  const ModelConfig m = hf::model_of_config_json(a3b, "a3b");
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(m.tied());
  EXPECT_EQ(m.n_layers, 48);
  EXPECT_EQ(m.d_model, 2048);
  EXPECT_EQ(m.n_heads, 32);
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.n_kv_heads, 4);
  EXPECT_EQ(m.d_ff, 768);  // the experts' width
  EXPECT_EQ(m.n_experts, 128);
  EXPECT_EQ(m.top_k, 8);
  EXPECT_EQ(m.moe_every, 1);
  EXPECT_TRUE(m.dropless);
  EXPECT_EQ(m.seq_len, 40960);
  EXPECT_EQ(hf::arch_of(m, "x", nullptr), hf::Arch::qwen3_moe);
  EXPECT_EQ(hf::check_config_json(a3b, "a3b", m, hf::Arch::qwen3_moe), "");
  // The routing rule: norm_topk_prob is model.renormalize_top_k, false
  // (Qwen3MoeConfig's default) where it is missing.
  for (const nlohmann::json& norm : {nlohmann::json(false), nlohmann::json()}) {
    auto j = nlohmann::json::parse(a3b);
    if (norm.is_null())
      j.erase("norm_topk_prob");
    else
      j["norm_topk_prob"] = norm;
    const ModelConfig raw = hf::model_of_config_json(j.dump(), "raw");
    EXPECT_EQ(raw.top_k, 8);
    EXPECT_FALSE(raw.renormalizes_top_k()) << norm.dump();
    EXPECT_EQ(hf::check_config_json(j.dump(), "raw", raw, hf::Arch::qwen3_moe), "");
    // A deck renormalising the top 8 does not read this file.
    EXPECT_NE(hf::check_config_json(j.dump(), "raw", m, hf::Arch::qwen3_moe)
                  .find("\"norm_topk_prob\" = false" +
                        std::string(norm.is_null() ? " (missing: the class's default)" : "") +
                        " but the deck's model.renormalize_top_k = true"),
              std::string::npos);
  }
  EXPECT_TRUE(m.renormalizes_top_k());
  // A list of dense blocks is not pentad's.
  const auto refused = [&](const std::string& key, const nlohmann::json& value, const std::string& want) {
    expect_config_refused(a3b, key, value, want);
  };
  refused("norm_topk_prob", 1, "\"norm_topk_prob\" = 1 is not true or false");
  refused("mlp_only_layers", {0, 47}, "\"mlp_only_layers\" = [0,47]");
  refused("attention_bias", true, "\"attention_bias\" = true");
  // Dense blocks (decoder_sparse_step 2) must be as wide as the experts.
  refused("decoder_sparse_step", 2, "\"intermediate_size\" = 6144 but the deck has model.d_ff = 768");
  // Qwen3MoeConfig's defaults: 4 kv heads, head_dim hidden / heads (not
  // Qwen3's 128), 128 experts, top 8, 768 wide.
  const ModelConfig d = hf::model_of_config_json(R"({"architectures": ["Qwen3MoeForCausalLM"],
      "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 8, "intermediate_size": 40,
      "norm_topk_prob": true, "vocab_size": 300})", "d");
  EXPECT_EQ(d.n_kv_heads, 4);
  EXPECT_EQ(d.head_dim(), 8);
  EXPECT_EQ(d.n_experts, 128);
  EXPECT_EQ(d.top_k, 8);
  EXPECT_EQ(d.d_ff, 768);
  EXPECT_EQ(d.seq_len, 32768);
  // config_json writes the class, the experts and the routing rule.
  ModelConfig one = qwen3moe_tiny();
  one.top_k = 1;
  one.renormalize_top_k = 0;
  one.moe_every = 2;
  const auto j = nlohmann::json::parse(hf::config_json(one, hf::Arch::qwen3_moe, "float32"));
  EXPECT_EQ(j["architectures"][0], "Qwen3MoeForCausalLM");
  EXPECT_EQ(j["model_type"], "qwen3_moe");
  EXPECT_EQ(j["num_experts"], 3);
  EXPECT_EQ(j["num_experts_per_tok"], 1);
  EXPECT_EQ(j["moe_intermediate_size"], 24);
  EXPECT_EQ(j["intermediate_size"], 24);
  EXPECT_EQ(j["decoder_sparse_step"], 2);
  EXPECT_EQ(j["norm_topk_prob"], false);
  EXPECT_EQ(j["mlp_only_layers"], nlohmann::json::array());
  ModelConfig raw2 = qwen3moe_tiny();  // top-2 by the raw probabilities
  raw2.renormalize_top_k = 0;
  EXPECT_EQ(nlohmann::json::parse(hf::config_json(raw2, hf::Arch::qwen3_moe, "float32"))["norm_topk_prob"], false);
  EXPECT_EQ(nlohmann::json::parse(hf::config_json(qwen3moe_tiny(), hf::Arch::qwen3_moe, "float32"))["norm_topk_prob"],
            true);
  // The tensors: block 0 dense (mlp.gate_proj), block 1 the experts' names.
  const std::vector<std::string> names = hf::hf_names(hf::rules(one, hf::Arch::qwen3_moe));
  for (const char* n : {"model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
                        "model.layers.1.mlp.experts.2.gate_proj.weight", "model.layers.1.mlp.experts.2.up_proj.weight",
                        "model.layers.1.mlp.experts.2.down_proj.weight", "model.layers.1.self_attn.q_norm.weight"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(std::find(names.begin(), names.end(), "model.layers.0.mlp.gate.weight"), names.end());
}

// Qwen2MoeForCausalLM is Qwen2 (q/k/v biases) with Qwen3-MoE's expert names
// and a shared expert in every MoE block, mlp.shared_expert.{gate,up,down}_proj
// scaled by sigmoid(mlp.shared_expert_gate x); Qwen2MoeConfig's defaults.
TEST(HfMap, Qwen2MoeConfigIsQwen2WithExpertsAndASharedExpert) {
  // A config.json with Qwen1.5-MoE-A2.7B's sizes, as transformers writes the class.
  const std::string a27b = R"({"architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0,
      "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151643, "hidden_act": "silu",
      "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5632, "max_position_embeddings": 32768,
      "max_window_layers": 21, "model_type": "qwen2_moe", "moe_intermediate_size": 1408, "norm_topk_prob": false,
      "num_attention_heads": 16, "num_experts": 60, "num_experts_per_tok": 4, "num_hidden_layers": 24,
      "num_key_value_heads": 16, "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
      "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 5632, "sliding_window": 32768,
      "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false,
      "vocab_size": 151936})";
  const ModelConfig m = hf::model_of_config_json(a27b, "a27b");
  EXPECT_TRUE(m.has_qkv_bias());
  EXPECT_FALSE(m.qk_norm);
  EXPECT_FALSE(m.tied());
  EXPECT_EQ(m.n_layers, 24);
  EXPECT_EQ(m.d_model, 2048);
  EXPECT_EQ(m.n_heads, 16);
  EXPECT_EQ(m.n_kv_heads, 16);
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_EQ(m.d_ff, 1408);  // the experts' width
  EXPECT_EQ(m.shared_expert_ffn, 5632);
  EXPECT_TRUE(m.shared_expert_gate);
  EXPECT_EQ(m.n_experts, 60);
  EXPECT_EQ(m.top_k, 4);
  EXPECT_FALSE(m.renormalizes_top_k());
  EXPECT_EQ(m.moe_every, 1);
  EXPECT_TRUE(m.dropless);
  EXPECT_EQ(m.seq_len, 32768);
  EXPECT_EQ(hf::arch_of(m, "x", nullptr), hf::Arch::qwen2_moe);
  EXPECT_EQ(hf::check_config_json(a27b, "a27b", m, hf::Arch::qwen2_moe), "");
  // A deck whose shared expert is of another width does not read this file.
  ModelConfig narrow = m;
  narrow.shared_expert_ffn = 2816;
  EXPECT_NE(hf::check_config_json(a27b, "a27b", narrow, hf::Arch::qwen2_moe)
                .find("\"shared_expert_intermediate_size\" = 5632 but the deck has model.shared_expert_ffn = 2816"),
            std::string::npos);
  const auto refused = [&](const std::string& key, const nlohmann::json& value, const std::string& want) {
    expect_config_refused(a27b, key, value, want);
  };
  refused("qkv_bias", false, "\"qkv_bias\" = false");
  refused("mlp_only_layers", {0}, "\"mlp_only_layers\" = [0]");
  // Dense blocks (decoder_sparse_step 2) must be as wide as the experts.
  refused("decoder_sparse_step", 2, "\"intermediate_size\" = 5632 but the deck has model.d_ff = 1408");
  // Qwen2MoeConfig's defaults: 16 kv heads, 60 experts, top 4, 1408 wide, a
  // shared expert 5632 wide, norm_topk_prob false.
  const ModelConfig d = hf::model_of_config_json(R"({"architectures": ["Qwen2MoeForCausalLM"],
      "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 16, "vocab_size": 300})", "d");
  EXPECT_EQ(d.n_kv_heads, 16);
  EXPECT_EQ(d.n_experts, 60);
  EXPECT_EQ(d.top_k, 4);
  EXPECT_EQ(d.d_ff, 1408);
  EXPECT_EQ(d.shared_expert_ffn, 5632);
  EXPECT_FALSE(d.renormalizes_top_k());
  EXPECT_EQ(d.seq_len, 32768);
  // config_json writes the class, the experts, the shared expert and the biases.
  ModelConfig two = qwen2moe_tiny();
  two.moe_every = 2;
  const auto j = nlohmann::json::parse(hf::config_json(two, hf::Arch::qwen2_moe, "float32"));
  EXPECT_EQ(j["architectures"][0], "Qwen2MoeForCausalLM");
  EXPECT_EQ(j["model_type"], "qwen2_moe");
  EXPECT_EQ(j["num_experts"], 3);
  EXPECT_EQ(j["moe_intermediate_size"], 24);
  EXPECT_EQ(j["intermediate_size"], 24);
  EXPECT_EQ(j["shared_expert_intermediate_size"], 20);
  EXPECT_EQ(j["decoder_sparse_step"], 2);
  EXPECT_EQ(j["norm_topk_prob"], false);
  EXPECT_EQ(j["qkv_bias"], true);
  EXPECT_EQ(j.count("attention_bias"), 0u);
  // The tensors: block 0 dense, block 1 the experts, the shared expert and its gate.
  const auto rs = hf::rules(two, hf::Arch::qwen2_moe);
  const std::vector<std::string> names = hf::hf_names(rs);
  for (const char* n : {"model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.gate.weight",
                        "model.layers.1.mlp.experts.2.down_proj.weight", "model.layers.1.self_attn.q_proj.bias",
                        "model.layers.1.mlp.shared_expert.gate_proj.weight",
                        "model.layers.1.mlp.shared_expert.up_proj.weight",
                        "model.layers.1.mlp.shared_expert.down_proj.weight", "model.layers.1.mlp.shared_expert_gate.weight"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  EXPECT_EQ(std::find(names.begin(), names.end(), "model.layers.0.mlp.shared_expert_gate.weight"), names.end());
  for (const hf::Rule& r : rs)
    if (r.hf == "model.layers.1.mlp.shared_expert_gate.weight") {
      EXPECT_EQ(r.pentad, "model/layers/1/mlp/shared/gate");
      EXPECT_EQ(r.hf_shape, (std::vector<int64_t>{1, 16}));
    }
}

TEST(HfMap, ModelsWithoutAClassAreRefused) {
  ModelConfig m = tiny(Family::gpt2, 3);
  EXPECT_THROW(hf::arch_of(m, "x", nullptr), pentad::InputError);
  m = tiny(Family::llama, 3);
  m.moe_every = 2;
  EXPECT_THROW(hf::arch_of(m, "x", nullptr), pentad::InputError);
  m.moe_every = 1;
  m.top_k = 1;  // weighed by its probability (renormalize_top_k false): Mixtral renormalises
  m.renormalize_top_k = 0;
  EXPECT_NE(refusal_of([&] { hf::arch_of(m, "x", nullptr); }).find("model.renormalize_top_k = false"),
            std::string::npos);
  m.top_k = 2;
  EXPECT_NE(refusal_of([&] { hf::arch_of(m, "x", nullptr); }).find("model.renormalize_top_k = false"),
            std::string::npos);
  m.renormalize_top_k = 1;
  m.qkv_bias = 1;  // Mixtral's attention has no biases
  try {
    hf::arch_of(m, "x", nullptr);
    ADD_FAILURE() << "a Mixtral with q/k/v biases was not refused";
  } catch (const pentad::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("model.qkv_bias = true"), std::string::npos) << e.what();
  }
  m.qkv_bias = 0;
  // Qwen3-MoE places dense blocks by decoder_sparse_step and routes to one
  // expert without renormalising: both have a class.
  ModelConfig q3m = qwen3moe_tiny();
  q3m.moe_every = 2;
  q3m.top_k = 1;
  q3m.renormalize_top_k = 0;
  q3m.dropless = false;
  q3m.z_loss_coef = 1e-3f;
  std::vector<std::string> q3m_notes;
  EXPECT_EQ(hf::arch_of(q3m, "x", &q3m_notes), hf::Arch::qwen3_moe);
  ASSERT_EQ(q3m_notes.size(), 2u);
  EXPECT_NE(q3m_notes[0].find("Qwen3MoeForCausalLM serves every choice"), std::string::npos) << q3m_notes[0];
  EXPECT_NE(q3m_notes[1].find("norm_topk_prob = false"), std::string::npos) << q3m_notes[1];
  EXPECT_NE(q3m_notes[1].find("z-loss has no Qwen3-MoE counterpart"), std::string::npos) << q3m_notes[1];
  ModelConfig both = qwen3_tiny();
  both.qkv_bias = 1;  // Qwen3's attention_bias is on every projection
  EXPECT_THROW(hf::arch_of(both, "x", nullptr), pentad::InputError);
  m.qk_norm = false;
  // A shared expert: Qwen2-MoE's, gated and beside q/k/v biases; not with
  // Qwen3's q/k norms.
  ModelConfig shared = qwen2moe_tiny();
  std::vector<std::string> shared_notes;
  EXPECT_EQ(hf::arch_of(shared, "x", &shared_notes), hf::Arch::qwen2_moe);
  ASSERT_EQ(shared_notes.size(), 1u);  // dropless: no capacity note
  EXPECT_NE(shared_notes[0].find("plus the gated shared expert"), std::string::npos) << shared_notes[0];
  shared.shared_expert_gate = false;
  EXPECT_NE(refusal_of([&] { hf::arch_of(shared, "x", nullptr); }).find("without model.shared_expert_gate"),
            std::string::npos);
  shared.shared_expert_gate = true;
  shared.qkv_bias = 0;
  EXPECT_NE(refusal_of([&] { hf::arch_of(shared, "x", nullptr); }).find("without model.qkv_bias"), std::string::npos);
  shared.qkv_bias = 1;
  ModelConfig q3_shared = qwen3moe_tiny();
  q3_shared.shared_expert_ffn = 20;
  q3_shared.shared_expert_gate = true;
  EXPECT_NE(refusal_of([&] { hf::arch_of(q3_shared, "x", nullptr); }).find("model.qk_norm with a shared expert"),
            std::string::npos);
  m.dropless = false;
  std::vector<std::string> notes;
  EXPECT_EQ(hf::arch_of(m, "x", &notes), hf::Arch::mixtral);
  ASSERT_FALSE(notes.empty());
  EXPECT_NE(notes[0].find("capacity"), std::string::npos) << notes[0];
}

}  // namespace
