// The inference engine (see engine.hpp): the decoder's forward over n new
// rows against the key/value cache, written in the backend's ops. Per block,
// as model/model.cpp's block_fwd on one rank: norm; q, k, v (k and v written
// straight into the cache at rows [pos, pos + n)); RoPE at global positions
// (Llama); attention of the n queries over the pos + n cached keys; the
// output projection onto the residual; norm; the MLP (dense, or the MoE
// layer: router softmax and top-k on the host; the rows gathered per
// expert, the chosen experts' MLPs and the weighted sum in choice order on
// the backend: gather_rows, combine_rows).
#include "infer/engine.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "parallel/ep/moe.hpp"

namespace pentad {

// One block's weights (device, global shapes) and its cache.
struct InferenceEngine::Layer {
  const float *attn_w = nullptr, *attn_b = nullptr, *mlp_w = nullptr, *mlp_b = nullptr;  // (C)
  const float *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr;  // (HD, C), (KD, C) x2, (C, HD)
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr;  // GPT-2's and Qwen2's biases
  const float* bo = nullptr;                                  // GPT-2's
  const float *q_norm = nullptr, *k_norm = nullptr;           // (D) Qwen3's (model.qk_norm)
  const float *w_gate = nullptr, *w_up = nullptr, *w_down = nullptr;      // (F, C), (F, C), (C, F); MoE: (E, ...)
  const float *b_up = nullptr, *b_down = nullptr;                          // GPT-2 (F), (C); MoE: (E, ...)
  const float* router = nullptr;                                           // (E, C), MoE blocks
  // The shared expert (model.shared_expert_ffn): (Fs, C) x2, (C, Fs); GPT-2 (Fs), (C); the gate (1, C).
  const float *s_gate = nullptr, *s_up = nullptr, *s_down = nullptr, *s_b_up = nullptr, *s_b_down = nullptr;
  const float* s_w = nullptr;
  bool moe = false;
  float *k_cache = nullptr, *v_cache = nullptr;                            // (T, KD) each
};

InferenceEngine::InferenceEngine(const ModelWeights& w, Backend& be) : cfg_(w.cfg), be_(be) {
  try {
    build(w);
  } catch (...) {  // a missing tensor: release what was allocated (no destructor runs)
    for (void* p : owned_) be_.free_bytes(p);
    throw;
  }
}

void InferenceEngine::build(const ModelWeights& w) {
  gpt2_ = cfg_.family == Family::gpt2;
  C_ = cfg_.d_model;
  H_ = cfg_.n_heads;
  Hkv_ = cfg_.n_kv_heads;
  D_ = cfg_.head_dim();
  F_ = cfg_.d_ff;
  V_ = cfg_.vocab_size;
  L_ = cfg_.n_layers;
  T_ = cfg_.seq_len;
  const size_t T = size_t(T_), HD = size_t(H_) * D_, KD = size_t(Hkv_) * D_;
  auto buf = [&](size_t n) {
    float* p = be_.alloc(std::max<size_t>(n, 1), Mem::activations);
    owned_.push_back(p);
    return p;
  };
  wte_ = upload(w, "model/wte");
  if (gpt2_) wpe_ = upload(w, "model/wpe");
  for (int l = 0; l < L_; ++l) {
    auto ly = std::make_unique<Layer>();
    const std::string p = "model/layers/" + std::to_string(l) + "/";
    auto opt = [&](const std::string& leaf) { return gpt2_ ? upload(w, p + leaf) : nullptr; };
    ly->attn_w = upload(w, p + "attn_norm/w");
    ly->attn_b = opt("attn_norm/b");
    ly->wq = upload(w, p + "attn/wq");
    ly->wk = upload(w, p + "attn/wk");
    ly->wv = upload(w, p + "attn/wv");
    ly->wo = upload(w, p + "attn/wo");
    if (cfg_.has_qkv_bias()) {
      ly->bq = upload(w, p + "attn/bq");
      ly->bk = upload(w, p + "attn/bk");
      ly->bv = upload(w, p + "attn/bv");
    }
    if (cfg_.qk_norm) {
      ly->q_norm = upload(w, p + "attn/q_norm");
      ly->k_norm = upload(w, p + "attn/k_norm");
    }
    ly->bo = opt("attn/bo");
    ly->mlp_w = upload(w, p + "mlp_norm/w");
    ly->mlp_b = opt("mlp_norm/b");
    ly->moe = cfg_.is_moe_block(l);
    const std::string m = ly->moe ? p + "mlp/experts/" : p + "mlp/";
    if (ly->moe) ly->router = upload(w, p + "mlp/router/w");
    if (!gpt2_) ly->w_gate = upload(w, m + "w_gate");
    ly->w_up = upload(w, m + "w_up");
    ly->w_down = upload(w, m + "w_down");
    ly->b_up = opt(m.substr(p.size()) + "b_up");
    ly->b_down = opt(m.substr(p.size()) + "b_down");
    if (ly->moe && cfg_.shared_expert_ffn > 0) {
      const std::string s = p + "mlp/shared/";
      if (!gpt2_) ly->s_gate = upload(w, s + "w_gate");
      ly->s_up = upload(w, s + "w_up");
      ly->s_down = upload(w, s + "w_down");
      ly->s_b_up = opt("mlp/shared/b_up");
      ly->s_b_down = opt("mlp/shared/b_down");
      if (cfg_.shared_expert_gate) ly->s_w = upload(w, s + "gate");
    }
    ly->k_cache = buf(T * KD);
    ly->v_cache = buf(T * KD);
    layers_.push_back(std::move(ly));
  }
  lnf_w_ = upload(w, "model/final_norm/w");
  if (gpt2_) lnf_b_ = upload(w, "model/final_norm/b");
  head_w_ = cfg_.tied() ? wte_ : upload(w, "model/lm_head");

  tok_ = static_cast<int32_t*>(be_.alloc_bytes(T * sizeof(int32_t), Mem::activations));
  owned_.push_back(tok_);
  x_ = buf(T * C_);
  ln_ = buf(T * C_);
  mean_ = buf(T);
  rstd_ = buf(T);
  if (cfg_.qk_norm) qk_rstd_ = buf(T * size_t(H_));
  q_ = buf(T * HD);
  att_ = buf(T * HD);
  lse_ = buf(size_t(H_) * T);
  const size_t F_or_shared = size_t(std::max(F_, cfg_.n_experts > 0 ? cfg_.shared_expert_ffn : 0));
  fc_ = buf(T * F_or_shared);
  up_ = buf(T * F_or_shared);
  act_ = buf(T * F_or_shared);
  // The logits of at most ~16M floats at a time (a few rows of a large vocabulary).
  head_rows_ = int(std::clamp<int64_t>((int64_t{16} << 20) / V_, 1, T_));
  logits_ = buf(size_t(head_rows_) * V_);
  if (cfg_.n_experts > 0) {
    const size_t Tk = T * size_t(cfg_.top_k);
    router_ = buf(T * cfg_.n_experts);
    xe_ = buf(Tk * C_);
    ye_ = buf(Tk * C_);
    moe_w_ = buf(Tk);
    for (int32_t** p : {&moe_row_, &moe_token_}) {
      *p = be_.alloc_i32(Tk, Mem::activations);
      owned_.push_back(*p);
    }
  }
}

InferenceEngine::~InferenceEngine() {
  for (void* p : owned_) be_.free_bytes(p);
}

float* InferenceEngine::upload(const ModelWeights& w, const std::string& name) {
  const auto it = w.tensors.find(name);
  if (it == w.tensors.end()) throw InputError("weights '" + w.source + "' have no tensor '" + name + "'");
  const std::vector<float>& h = it->second.data;
  float* p = be_.alloc(std::max<size_t>(h.size(), 1), Mem::params);
  owned_.push_back(p);
  be_.from_host(p, h.data(), h.size() * sizeof(float));
  return p;
}

void InferenceEngine::norm(float* out, const float* x, const float* w, const float* b, int n) {
  if (gpt2_)
    be_.layernorm_fwd(out, mean_, rstd_, x, w, b, n, C_, cfg_.norm_eps);
  else
    be_.rmsnorm_fwd(out, rstd_, x, w, n, C_, cfg_.norm_eps, cfg_.norm_offset());
}

void InferenceEngine::forward(const int32_t* tokens, int n, std::vector<float>& logits, bool all_positions) {
  if (n < 1) throw std::logic_error("InferenceEngine::forward: no tokens");
  if (pos_ + n > T_)
    throw InputError("the sequence would have " + std::to_string(pos_ + n) + " tokens, more than model.seq_len=" +
                     std::to_string(T_));
  for (int i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= V_)
      throw InputError("token id " + std::to_string(tokens[i]) + " is outside the model's vocabulary (model.vocab_size=" +
                       std::to_string(V_) + ")");
  be_.from_host(tok_, tokens, size_t(n) * sizeof(int32_t));
  // x(n, C) = wte[tok] (+ wpe[pos + t]).
  be_.embedding_fwd(x_, tok_, wte_, wpe_, 1, n, C_, 0, V_, pos_);
  if (cfg_.embed_scale) be_.scale(x_, cfg_.embedding_multiplier(), size_t(n) * C_);
  for (int l = 0; l < L_; ++l) block(l, n);
  const int row0 = all_positions ? 0 : n - 1, rows = n - row0;
  logits.resize(size_t(rows) * V_);
  head(row0, rows, logits.data());
  pos_ += n;
}

void InferenceEngine::block(int l, int n) {
  const Layer& y = *layers_[size_t(l)];
  const int HD = H_ * D_, KD = Hkv_ * D_;
  float* kc = y.k_cache + size_t(pos_) * KD;  // this call's rows of the cache
  float* vc = y.v_cache + size_t(pos_) * KD;
  norm(ln_, x_, y.attn_w, y.attn_b, n);
  // The linear layers through linear_fwd (Q, K and V through linear_fwd_group,
  // which reads ln once): with their bias (and GELU) in the GEMM's epilogue
  // on CUDA, the same ops in turn on the CPU.
  const LinearPart qkv[3] = {{q_, y.wq, y.bq, HD}, {kc, y.wk, y.bk, KD}, {vc, y.wv, y.bv, KD}};
  be_.linear_fwd_group(qkv, 3, ln_, n, C_);
  if (cfg_.qk_norm) {  // each head of q and k, in place, before RoPE
    be_.rmsnorm_fwd(q_, qk_rstd_, q_, y.q_norm, n * H_, D_, cfg_.norm_eps, cfg_.norm_offset());
    be_.rmsnorm_fwd(kc, qk_rstd_, kc, y.k_norm, n * Hkv_, D_, cfg_.norm_eps, cfg_.norm_offset());
  }
  if (!gpt2_) {  // (the call's context, pos + n, picks longrope's factors, as Hugging Face's per call)
    const Rope rope = cfg_.rope(pos_ + n);
    be_.rope_fwd(q_, 1, n, H_, D_, pos_, rope);
    be_.rope_fwd(kc, 1, n, Hkv_, D_, pos_, rope);
  }
  // n queries at global positions pos..pos+n-1 over the pos + n cached keys.
  be_.attention_fwd(att_, lse_, nullptr, q_, y.k_cache, y.v_cache, 1, n, pos_ + n, H_, Hkv_, D_, pos_, 0, true);
  be_.linear_fwd(x_, att_, y.wo, gpt2_ ? y.bo : nullptr, n, C_, HD, 1.0f, nullptr);  // x += att wo^T + bo
  norm(ln_, x_, y.mlp_w, y.mlp_b, n);
  if (y.moe) {
    moe_mlp(l, n);
    return;
  }
  const size_t nF = size_t(n) * F_;
  if (gpt2_) {
    be_.linear_fwd(fc_, ln_, y.w_up, y.b_up, n, F_, C_, 0.0f, act_);  // act = GELU(fc)
  } else {
    const LinearPart gate_up[2] = {{fc_, y.w_gate, nullptr, F_}, {up_, y.w_up, nullptr, F_}};
    be_.linear_fwd_group(gate_up, 2, ln_, n, C_);
    be_.glu_fwd(act_, fc_, up_, nF, cfg_.mlp_act);
  }
  be_.linear_fwd(x_, act_, y.w_down, gpt2_ ? y.b_down : nullptr, n, C_, F_, 1.0f, nullptr);  // x += act w_down^T + b
}

// The MoE MLP on ln_ (n, C), added to x_: the router's softmax over the
// experts and its top_k (larger probability first, the lower expert on
// ties; weights renormalised over the k chosen or not, renormalizes_top_k): training's own
// softmax_rows and top_k_rows (parallel/ep/moe.hpp), every choice served.
void InferenceEngine::moe_mlp(int l, int n) {
  const Layer& y = *layers_[size_t(l)];
  const int E = cfg_.n_experts, k = cfg_.top_k, C = C_, F = F_;
  be_.gemm(false, true, n, E, C, 1.0f, ln_, C, y.router, C, 0.0f, router_, E);
  std::vector<float> pr(size_t(n) * E);
  be_.to_host(pr.data(), router_, pr.size() * sizeof(float));
  std::vector<int> idx(size_t(n) * k);
  std::vector<float> wt(size_t(n) * k), lse(static_cast<size_t>(n)), z(static_cast<size_t>(n));
  softmax_rows(pr.data(), lse.data(), n, E);
  top_k_rows(pr.data(), n, E, k, cfg_.renormalizes_top_k(), idx.data(), wt.data(), z.data());
  // Each expert's rows in one block (experts in order, a block's rows in
  // (t, j) order), gathered on the backend; its MLP; then the outputs
  // combined per token in choice order (combine_rows).
  std::vector<int> row(size_t(n) * k), token, first(size_t(E) + 1);
  token.reserve(size_t(n) * k);
  for (int e = 0; e < E; ++e) {
    first[size_t(e)] = int(token.size());
    for (int s = 0; s < n * k; ++s)
      if (idx[size_t(s)] == e) {
        row[size_t(s)] = int(token.size());
        token.push_back(s / k);
      }
  }
  first[size_t(E)] = n * k;
  be_.from_host(moe_row_, row.data(), row.size() * sizeof(int32_t));
  be_.from_host(moe_token_, token.data(), token.size() * sizeof(int32_t));
  be_.from_host(moe_w_, wt.data(), wt.size() * sizeof(float));
  be_.gather_rows(xe_, ln_, moe_token_, n * k, C);
  const size_t FC = size_t(F) * C;
  for (int e = 0; e < E; ++e) {
    const int m = first[size_t(e) + 1] - first[size_t(e)];
    if (m == 0) continue;
    const float* xin = xe_ + size_t(first[size_t(e)]) * C;
    float* yout = ye_ + size_t(first[size_t(e)]) * C;
    if (gpt2_) {
      be_.gemm(false, true, m, F, C, 1.0f, xin, C, y.w_up + e * FC, C, 0.0f, fc_, F);
      be_.bias_add(fc_, y.b_up + size_t(e) * F, m, F);
      be_.gelu_fwd(act_, fc_, size_t(m) * F);
    } else {
      be_.gemm(false, true, m, F, C, 1.0f, xin, C, y.w_gate + e * FC, C, 0.0f, fc_, F);
      be_.gemm(false, true, m, F, C, 1.0f, xin, C, y.w_up + e * FC, C, 0.0f, up_, F);
      be_.glu_fwd(act_, fc_, up_, size_t(m) * F, cfg_.mlp_act);
    }
    be_.gemm(false, true, m, C, F, 1.0f, act_, F, y.w_down + e * FC, F, 0.0f, yout, C);
    if (gpt2_) be_.bias_add(yout, y.b_down + size_t(e) * C, m, C);
  }
  be_.combine_rows(xe_, ye_, moe_row_, moe_w_, n, k, C);  // (n, C): sum_j w_j y_j
  be_.add(x_, x_, xe_, size_t(n) * C);
  if (y.s_up) shared_mlp(y, n);
}

// The shared expert on ln_ (n, C), added to x_ (scaled per row by
// sigmoid(x . w) when gated), in the training layer's order of operations
// (parallel/ep/experts.cpp's shared_fwd): its output into ye_, the gate's
// logits into router_, the scaled rows (combine_rows, k = 1) into xe_.
void InferenceEngine::shared_mlp(const Layer& y, int n) {
  const int C = C_, Fs = cfg_.shared_expert_ffn;
  const size_t nF = size_t(n) * Fs, nC = size_t(n) * C;
  if (gpt2_) {
    be_.linear_fwd(fc_, ln_, y.s_up, y.s_b_up, n, Fs, C, 0.0f, act_);
  } else {
    be_.gemm(false, true, n, Fs, C, 1.0f, ln_, C, y.s_gate, C, 0.0f, fc_, Fs);
    be_.gemm(false, true, n, Fs, C, 1.0f, ln_, C, y.s_up, C, 0.0f, up_, Fs);
    be_.glu_fwd(act_, fc_, up_, nF, cfg_.mlp_act);
  }
  be_.gemm(false, true, n, C, Fs, 1.0f, act_, Fs, y.s_down, Fs, 0.0f, ye_, C);
  if (gpt2_) be_.bias_add(ye_, y.s_b_down, n, C);
  if (!y.s_w) {
    be_.add(x_, x_, ye_, nC);
    return;
  }
  be_.gemm(false, true, n, 1, C, 1.0f, ln_, C, y.s_w, C, 0.0f, router_, 1);
  std::vector<float> g(static_cast<size_t>(n));
  be_.to_host(g.data(), router_, g.size() * sizeof(float));
  for (float& v : g) v = float(1.0 / (1.0 + std::exp(-double(v))));
  std::vector<int32_t> iota(static_cast<size_t>(n));
  std::iota(iota.begin(), iota.end(), 0);
  be_.from_host(moe_w_, g.data(), g.size() * sizeof(float));
  be_.from_host(moe_row_, iota.data(), iota.size() * sizeof(int32_t));
  be_.combine_rows(xe_, ye_, moe_row_, moe_w_, n, 1, C);
  be_.add(x_, x_, xe_, nC);
}

// Final norm and logits of rows [row0, row0 + n) of x_, a few rows at a time.
void InferenceEngine::head(int row0, int n, float* logits_host) {
  for (int r = 0; r < n; r += head_rows_) {
    const int m = std::min(head_rows_, n - r);
    norm(ln_, x_ + size_t(row0 + r) * C_, lnf_w_, lnf_b_, m);
    be_.gemm(false, true, m, V_, C_, 1.0f, ln_, C_, head_w_, C_, 0.0f, logits_, V_);
    be_.to_host(logits_host + size_t(r) * V_, logits_, size_t(m) * V_ * sizeof(float));
  }
}

}  // namespace pentad
