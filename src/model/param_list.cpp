// The model's parameter list (see param_list.hpp). The dense tensors' tp
// splits come from parallel/tp/param_split's table, the MoE block's tensors
// from parallel/ep's moe_param_specs.
#include "model/param_list.hpp"

#include <cmath>
#include <string>

#include "parallel/ep/moe.hpp"
#include "parallel/tp/param_split.hpp"

namespace pentad {
namespace {

// Appends the tensors of block l (unit l + 1), in the order of the flat buffers.
void add_block_specs(const ModelConfig& cfg, const ParamRank& r, int l, float std, float std_out,
                     const ParamSink& emit) {
  const bool gpt2 = cfg.family == Family::gpt2;
  const int64_t C = cfg.d_model, HD = int64_t(cfg.n_heads) * cfg.head_dim(),
                KD = int64_t(cfg.n_kv_heads) * cfg.head_dim(), F = cfg.d_ff;  // global sizes
  const std::string prefix = "model/layers/" + std::to_string(l) + "/";
  auto add = [&](const char* name, std::vector<int64_t> shape, Init init, float s, bool decay) {
    ParamSpec spec = tp_param_spec(prefix, name, std::move(shape), init, s, decay, r.tp_rank, r.tp, cfg.n_kv_heads);
    spec.unit = l + 1;
    emit(std::move(spec));
  };
  auto matrix = [&](const char* name, int64_t rows, int64_t cols, float s) {
    add(name, {rows, cols}, Init::normal, s, true);
  };
  // Norm weights and biases: no decay. A norm's weight is drawn as 1, or as 0
  // where it is stored as its difference from 1 (model.norm_plus_one).
  auto vec = [&](const char* name, int64_t len, Init init) { add(name, {len}, init, 0, false); };
  const Init unit = cfg.norm_plus_one ? Init::zeros : Init::ones;
  vec("attn_norm/w", C, unit);
  if (gpt2) vec("attn_norm/b", C, Init::zeros);
  matrix("attn/wq", HD, C, std);
  matrix("attn/wk", KD, C, std);
  matrix("attn/wv", KD, C, std);
  matrix("attn/wo", C, HD, std_out);
  if (cfg.has_qkv_bias()) {  // gpt2; a llama with model.qkv_bias (Qwen2)
    vec("attn/bq", HD, Init::zeros);
    vec("attn/bk", KD, Init::zeros);
    vec("attn/bv", KD, Init::zeros);
  }
  if (cfg.qk_norm) {  // Qwen3: one RMSNorm weight over every head of q, one of k
    vec("attn/q_norm", cfg.head_dim(), unit);
    vec("attn/k_norm", cfg.head_dim(), unit);
  }
  if (gpt2) vec("attn/bo", C, Init::zeros);
  vec("mlp_norm/w", C, unit);
  if (gpt2) vec("mlp_norm/b", C, Init::zeros);
  if (cfg.is_moe_block(l)) {
    const int etp = r.expert_tp ? r.tp : 1;
    for (ParamSpec& s : moe_param_specs(cfg, prefix + "mlp/", {r.ep_rank, r.ep, r.expert_tp ? r.tp_rank : 0, etp}, std,
                                        std_out)) {
      s.unit = l + 1;
      emit(std::move(s));
    }
    return;
  }
  if (!gpt2) matrix("mlp/w_gate", F, C, std);
  matrix("mlp/w_up", F, C, std);
  if (gpt2) vec("mlp/b_up", F, Init::zeros);
  matrix("mlp/w_down", C, F, std_out);
  if (gpt2) vec("mlp/b_down", C, Init::zeros);
}

}  // namespace

std::vector<ParamSpec> model_param_list(const ModelConfig& cfg, const ParamRank& r) {
  std::vector<ParamSpec> out;
  for_each_param_spec(cfg, r, [&](ParamSpec&& s) { out.push_back(std::move(s)); });
  return out;
}

void for_each_param_spec(const ModelConfig& cfg, const ParamRank& r, const ParamSink& emit) {
  const int L = cfg.n_layers;
  const std::vector<int> cb = r.chunk_blocks.empty() ? std::vector<int>{0, L} : r.chunk_blocks;
  const int G = int(cb.size()) - 1;
  auto owns = [&](int g) { return chunk_owner(r.placement, r.pp_size, g) == r.pp_rank; };
  const bool gpt2 = cfg.family == Family::gpt2, has_embedding = owns(0), has_head = owns(G - 1);
  const float std = cfg.init_std;
  // Output projections of the residual branches are scaled by 1/sqrt(2L)
  // (GPT-2), so the residual stream's variance does not grow with depth.
  const float std_out = std / std::sqrt(2.0f * float(L));
  // Global sizes; the vocabulary matrices hold Vp rows, the last Vp - V of
  // them padding (ModelConfig::pad_vocab_to).
  const int64_t C = cfg.d_model, V = cfg.vocab_size, Vp = cfg.padded_vocab(r.tp);
  auto add = [&](const char* name, std::vector<int64_t> shape, Init init, float s, bool decay, int unit,
                 bool stage_copy = false, int64_t saved_rows = -1) {
    ParamSpec spec = tp_param_spec("model/", name, std::move(shape), init, s, decay, r.tp_rank, r.tp, cfg.n_kv_heads);
    spec.unit = unit;
    spec.stage_copy = stage_copy;
    spec.saved_rows = saved_rows;
    emit(std::move(spec));
  };
  auto vocab_matrix = [&](const char* name, int unit, bool stage_copy = false) {
    add(name, {Vp, C}, Init::normal, std, true, unit, stage_copy, Vp != V ? V : -1);
  };
  if (has_embedding) {
    vocab_matrix("wte", 0);
    if (gpt2) add("wpe", {int64_t(cfg.seq_len), C}, Init::normal, std, true, 0);
  }
  for (int g = 0; g < G; ++g)
    if (owns(g))
      for (int l = cb[size_t(g)]; l < cb[size_t(g) + 1]; ++l) add_block_specs(cfg, r, l, std, std_out, emit);
  if (!has_head) return;
  add("final_norm/w", {C}, cfg.norm_plus_one ? Init::zeros : Init::ones, 0, false, L + 1);
  if (gpt2) add("final_norm/b", {C}, Init::zeros, 0, false, L + 1);
  if (!cfg.tied()) {
    vocab_matrix("lm_head", L + 1);
  } else if (!has_embedding) {
    // Tied embeddings across pipeline stages: the last stage holds a copy of
    // wte (drawn with the same values); the two stages sum their gradients
    // before the optimizer, so the copies stay identical.
    vocab_matrix("wte", L + 1, true);
  }
}

}  // namespace pentad
