// Forward and backward of the GPT-2 / Llama decoder, written out layer by
// layer over the backend's coarse ops. The loss head fuses the logits
// matmul, the softmax cross-entropy and its backward chunk by chunk of rows,
// so the full (B*T, V) logits are never held at once.
#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace pentad {

struct Model::LayerIdx {
  int attn_norm_w = -1, attn_norm_b = -1;
  int wq = -1, wk = -1, wv = -1, wo = -1, bq = -1, bk = -1, bv = -1, bo = -1;
  int mlp_norm_w = -1, mlp_norm_b = -1;
  int w_gate = -1, w_up = -1, b_up = -1, w_down = -1, b_down = -1;
};

struct Model::Acts {
  float* ln1 = nullptr;       // (B,T,C)
  float* ln1_mean = nullptr;  // (B,T)
  float* ln1_rstd = nullptr;  // (B,T)
  float* q = nullptr;         // (B,T,H*D), after RoPE
  float* k = nullptr;         // (B,T,Hkv*D), after RoPE
  float* v = nullptr;         // (B,T,Hkv*D)
  float* att = nullptr;       // (B,T,H*D)
  float* lse = nullptr;       // (B,H,T)
  float* probs = nullptr;     // (B,H,T,T), only with recompute = none
  float* res_mid = nullptr;   // (B,T,C) residual after attention
  float* ln2 = nullptr;       // (B,T,C)
  float* ln2_mean = nullptr;  // (B,T)
  float* ln2_rstd = nullptr;  // (B,T)
  float* fc_pre = nullptr;    // (B,T,F) GELU input, or SwiGLU gate
  float* fc_up = nullptr;     // (B,T,F) SwiGLU up (llama)
  float* fc_act = nullptr;    // (B,T,F) MLP activation (kept only with none)
};

struct Model::Scratch {
  float* dres = nullptr;      // (B,T,C) gradient of the residual stream
  float* d_ln = nullptr;      // (B,T,C)
  float* d_att = nullptr;     // (B,T,H*D)
  float* dq = nullptr;        // (B,T,H*D)
  float* dk = nullptr;        // (B,T,Hkv*D)
  float* dv = nullptr;        // (B,T,Hkv*D)
  float* d_fc_act = nullptr;  // (B,T,F)
  float* d_fc_pre = nullptr;  // (B,T,F)
  float* d_up = nullptr;      // (B,T,F) llama
  float* d_lnf = nullptr;     // (B,T,C)
  float* fc_act = nullptr;    // (B,T,F) recomputed MLP activation (selective/full)
};

Model::Model(const ModelConfig& cfg, Recompute recompute, int micro_batch, Backend& backend,
             ModelParallel par)
    : cfg_(cfg), recompute_(recompute), par_(par), be_(backend), params_(backend) {
  B_ = micro_batch;
  T_ = cfg.seq_len;
  C_ = cfg.d_model;
  H_ = cfg.n_heads;
  Hkv_ = cfg.n_kv_heads;
  D_ = cfg.head_dim();
  F_ = cfg.d_ff;
  V_ = cfg.vocab_size;
  L_ = cfg.n_layers;
  gpt2_ = cfg.family == Family::gpt2;
  build_params();
  alloc_activations();
}

Model::~Model() {
  for (void* p : owned_) be_.free_bytes(p);
  delete scratch_;
}

void Model::build_params() {
  const float std = cfg_.init_std;
  // Output projections of the residual branches are scaled by 1/sqrt(2L)
  // (GPT-2), so the residual stream's variance does not grow with depth.
  const float std_out = std / std::sqrt(2.0f * float(L_));
  const int64_t C = C_, HD = int64_t(H_) * D_, KD = int64_t(Hkv_) * D_, F = F_, V = V_;
  auto& P = params_;
  P.begin_unit(0);
  wte_ = P.add("model/wte", {V, C}, Init::normal, std, true);
  if (gpt2_) wpe_ = P.add("model/wpe", {int64_t(T_), C}, Init::normal, std, true);
  layers_.resize(size_t(L_));
  for (int l = 0; l < L_; ++l) {
    const std::string p = "model/layers/" + std::to_string(l) + "/";
    P.begin_unit(l + 1);
    LayerIdx& x = layers_[size_t(l)];
    x.attn_norm_w = P.add(p + "attn_norm/w", {C}, Init::ones, 0, false);
    if (gpt2_) x.attn_norm_b = P.add(p + "attn_norm/b", {C}, Init::zeros, 0, false);
    x.wq = P.add(p + "attn/wq", {HD, C}, Init::normal, std, true);
    x.wk = P.add(p + "attn/wk", {KD, C}, Init::normal, std, true);
    x.wv = P.add(p + "attn/wv", {KD, C}, Init::normal, std, true);
    x.wo = P.add(p + "attn/wo", {C, HD}, Init::normal, std_out, true);
    if (gpt2_) {
      x.bq = P.add(p + "attn/bq", {HD}, Init::zeros, 0, false);
      x.bk = P.add(p + "attn/bk", {KD}, Init::zeros, 0, false);
      x.bv = P.add(p + "attn/bv", {KD}, Init::zeros, 0, false);
      x.bo = P.add(p + "attn/bo", {C}, Init::zeros, 0, false);
    }
    x.mlp_norm_w = P.add(p + "mlp_norm/w", {C}, Init::ones, 0, false);
    if (gpt2_) x.mlp_norm_b = P.add(p + "mlp_norm/b", {C}, Init::zeros, 0, false);
    if (!gpt2_) x.w_gate = P.add(p + "mlp/w_gate", {F, C}, Init::normal, std, true);
    x.w_up = P.add(p + "mlp/w_up", {F, C}, Init::normal, std, true);
    if (gpt2_) x.b_up = P.add(p + "mlp/b_up", {F}, Init::zeros, 0, false);
    x.w_down = P.add(p + "mlp/w_down", {C, F}, Init::normal, std_out, true);
    if (gpt2_) x.b_down = P.add(p + "mlp/b_down", {C}, Init::zeros, 0, false);
  }
  P.begin_unit(L_ + 1);
  lnf_w_ = P.add("model/final_norm/w", {C}, Init::ones, 0, false);
  if (gpt2_) lnf_b_ = P.add("model/final_norm/b", {C}, Init::zeros, 0, false);
  if (!cfg_.tied()) lm_head_ = P.add("model/lm_head", {V, C}, Init::normal, std, true);
}

void Model::alloc_activations() {
  const size_t BT = size_t(B_) * T_, BTC = BT * C_, HD = size_t(H_) * D_, KD = size_t(Hkv_) * D_;
  auto take = [&](size_t n, Mem cat) {
    float* p = be_.alloc(n, cat);
    owned_.push_back(p);
    if (cat == Mem::activations) act_bytes_ += n * sizeof(float);
    return p;
  };
  tokens_dev_ = be_.alloc_i32(BT, Mem::activations);
  targets_dev_ = be_.alloc_i32(BT, Mem::activations);
  owned_.push_back(tokens_dev_);
  owned_.push_back(targets_dev_);
  act_bytes_ += 2 * BT * sizeof(int32_t);

  res_.resize(size_t(L_) + 1);
  for (int l = 0; l <= L_; ++l) {
    // With full recompute only the block inputs are kept; the last residual
    // feeds the head and is needed too.
    res_[size_t(l)] = take(BTC, Mem::activations);
  }

  scratch_ = new Scratch;
  Scratch& s = *scratch_;
  s.dres = take(BTC, Mem::scratch);
  s.d_ln = take(BTC, Mem::scratch);
  s.d_att = take(BT * HD, Mem::scratch);
  s.dq = take(BT * HD, Mem::scratch);
  s.dk = take(BT * KD, Mem::scratch);
  s.dv = take(BT * KD, Mem::scratch);
  s.d_fc_act = take(BT * F_, Mem::scratch);
  s.d_fc_pre = take(BT * F_, Mem::scratch);
  if (!gpt2_) s.d_up = take(BT * F_, Mem::scratch);
  s.d_lnf = take(BTC, Mem::scratch);
  if (recompute_ != Recompute::none) s.fc_act = take(BT * F_, Mem::scratch);

  // Per-block activations: one set per layer, or one shared set (full).
  const bool shared = recompute_ == Recompute::full;
  const int n_sets = shared ? 1 : L_;
  const Mem cat = shared ? Mem::scratch : Mem::activations;
  acts_.resize(size_t(n_sets));
  for (Acts& a : acts_) {
    a.ln1 = take(BTC, cat);
    a.ln1_mean = take(BT, cat);
    a.ln1_rstd = take(BT, cat);
    a.q = take(BT * HD, cat);
    a.k = take(BT * KD, cat);
    a.v = take(BT * KD, cat);
    a.att = take(BT * HD, cat);
    a.lse = take(size_t(B_) * H_ * T_, cat);
    if (recompute_ == Recompute::none) a.probs = take(size_t(B_) * H_ * T_ * T_, cat);
    a.res_mid = take(BTC, cat);
    a.ln2 = take(BTC, cat);
    a.ln2_mean = take(BT, cat);
    a.ln2_rstd = take(BT, cat);
    a.fc_pre = take(BT * F_, cat);
    if (!gpt2_) a.fc_up = take(BT * F_, cat);
    a.fc_act = recompute_ == Recompute::none ? take(BT * F_, cat) : s.fc_act;
  }

  lnf_ = take(BTC, Mem::activations);
  lnf_mean_ = take(BT, Mem::activations);
  lnf_rstd_ = take(BT, Mem::activations);
  losses_ = take(BT, Mem::activations);
  // Logits are processed in chunks of rows of at most ~64 MiB.
  chunk_rows_ = int(std::clamp<size_t>((size_t(16) << 20) / size_t(V_), 1, BT));
  logits_ = take(size_t(chunk_rows_) * V_, Mem::scratch);
  xent_rowmax_ = take(size_t(chunk_rows_), Mem::scratch);
  xent_sumexp_ = take(size_t(chunk_rows_), Mem::scratch);
  xent_target_ = take(size_t(chunk_rows_), Mem::scratch);
}

// ---- building blocks --------------------------------------------------------

void Model::norm_fwd(float* out, float* mean, float* rstd, const float* x, int w, int b) {
  const int N = B_ * T_;
  if (gpt2_)
    be_.layernorm_fwd(out, mean, rstd, x, params_.param(w), params_.param(b), N, C_, cfg_.norm_eps);
  else
    be_.rmsnorm_fwd(out, rstd, x, params_.param(w), N, C_, cfg_.norm_eps);
}

void Model::norm_bwd(float* dx, const float* dout, const float* x, int w, int b, const float* mean,
                     const float* rstd) {
  const int N = B_ * T_;
  if (gpt2_)
    be_.layernorm_bwd(dx, params_.grad(w), params_.grad(b), dout, x, params_.param(w), mean, rstd,
                      N, C_);
  else
    be_.rmsnorm_bwd(dx, params_.grad(w), dout, x, params_.param(w), rstd, N, C_);
}

void Model::linear_fwd(float* y, const float* x, int w, int b, int n_out, int n_in, float beta) {
  const int N = B_ * T_;
  be_.gemm(false, true, N, n_out, n_in, 1.0f, x, n_in, params_.param(w), n_in, beta, y, n_out);
  if (b >= 0) be_.bias_add(y, params_.param(b), N, n_out);
}

void Model::linear_bwd(float* dx, const float* dy, const float* x, int w, int b, int n_out, int n_in,
                       float dx_beta) {
  const int N = B_ * T_;
  if (dx) be_.gemm(false, false, N, n_in, n_out, 1.0f, dy, n_out, params_.param(w), n_in, dx_beta, dx, n_in);
  be_.gemm(true, false, n_out, n_in, N, 1.0f, dy, n_out, x, n_in, 1.0f, params_.grad(w), n_in);
  if (b >= 0) be_.bias_bwd(params_.grad(b), dy, N, n_out);
}

void Model::mlp_act_fwd(Acts& a) {
  const size_t n = size_t(B_) * T_ * F_;
  if (gpt2_)
    be_.gelu_fwd(a.fc_act, a.fc_pre, n);
  else
    be_.swiglu_fwd(a.fc_act, a.fc_pre, a.fc_up, n);
}

void Model::embed(const int32_t* tokens) {
  be_.embedding_fwd(res_[0], tokens, params_.param(wte_), gpt2_ ? params_.param(wpe_) : nullptr, B_,
                    T_, C_, 0, V_, 0);
}

// ---- one transformer block -----------------------------------------------------

void Model::block_fwd(int l, Acts& a, bool keep_probs) {
  const LayerIdx& x = layers_[size_t(l)];
  const int HD = H_ * D_, KD = Hkv_ * D_;
  const float* in = res_[size_t(l)];
  norm_fwd(a.ln1, a.ln1_mean, a.ln1_rstd, in, x.attn_norm_w, x.attn_norm_b);
  linear_fwd(a.q, a.ln1, x.wq, x.bq, HD, C_);
  linear_fwd(a.k, a.ln1, x.wk, x.bk, KD, C_);
  linear_fwd(a.v, a.ln1, x.wv, x.bv, KD, C_);
  if (!gpt2_) {
    be_.rope_fwd(a.q, B_, T_, H_, D_, 0, cfg_.rope_theta);
    be_.rope_fwd(a.k, B_, T_, Hkv_, D_, 0, cfg_.rope_theta);
  }
  be_.attention_fwd(a.att, a.lse, keep_probs ? a.probs : nullptr, a.q, a.k, a.v, B_, T_, T_, H_, Hkv_,
                    D_, 0, 0, true);
  const size_t BTC = size_t(B_) * T_ * C_;
  be_.copy_bytes(a.res_mid, in, BTC * sizeof(float));
  linear_fwd(a.res_mid, a.att, x.wo, x.bo, C_, HD, 1.0f);
  norm_fwd(a.ln2, a.ln2_mean, a.ln2_rstd, a.res_mid, x.mlp_norm_w, x.mlp_norm_b);
  if (gpt2_) {
    linear_fwd(a.fc_pre, a.ln2, x.w_up, x.b_up, F_, C_);
  } else {
    linear_fwd(a.fc_pre, a.ln2, x.w_gate, -1, F_, C_);
    linear_fwd(a.fc_up, a.ln2, x.w_up, -1, F_, C_);
  }
  mlp_act_fwd(a);
}

void Model::block_bwd(int l, Acts& a) {
  const LayerIdx& x = layers_[size_t(l)];
  Scratch& s = *scratch_;
  const int HD = H_ * D_, KD = Hkv_ * D_;
  if (recompute_ == Recompute::full)
    block_fwd(l, a, false);  // the shared set now holds this block's activations
  else if (recompute_ == Recompute::selective)
    mlp_act_fwd(a);  // fc_act is shared scratch

  // MLP branch. s.dres holds dL/d(block output) = dL/d(res_mid) through the skip.
  linear_bwd(s.d_fc_act, s.dres, a.fc_act, x.w_down, x.b_down, C_, F_, 0.0f);
  const size_t BTF = size_t(B_) * T_ * F_;
  if (gpt2_) {
    be_.gelu_bwd(s.d_fc_pre, s.d_fc_act, a.fc_pre, BTF);
    linear_bwd(s.d_ln, s.d_fc_pre, a.ln2, x.w_up, x.b_up, F_, C_, 0.0f);
  } else {
    be_.swiglu_bwd(s.d_fc_pre, s.d_up, s.d_fc_act, a.fc_pre, a.fc_up, BTF);
    linear_bwd(s.d_ln, s.d_fc_pre, a.ln2, x.w_gate, -1, F_, C_, 0.0f);
    linear_bwd(s.d_ln, s.d_up, a.ln2, x.w_up, -1, F_, C_, 1.0f);
  }
  norm_bwd(s.dres, s.d_ln, a.res_mid, x.mlp_norm_w, x.mlp_norm_b, a.ln2_mean, a.ln2_rstd);

  // Attention branch. s.dres now holds dL/d(res_mid) = dL/d(block input) via the skip.
  linear_bwd(s.d_att, s.dres, a.att, x.wo, x.bo, C_, HD, 0.0f);
  const size_t BT = size_t(B_) * T_;
  be_.fill(s.dq, 0.0f, BT * HD);
  be_.fill(s.dk, 0.0f, BT * KD);
  be_.fill(s.dv, 0.0f, BT * KD);
  be_.attention_bwd(s.dq, s.dk, s.dv, s.d_att, a.att, a.lse, a.probs, a.q, a.k, a.v, B_, T_, T_, H_,
                    Hkv_, D_, 0, 0, true);
  if (!gpt2_) {
    be_.rope_bwd(s.dq, B_, T_, H_, D_, 0, cfg_.rope_theta);
    be_.rope_bwd(s.dk, B_, T_, Hkv_, D_, 0, cfg_.rope_theta);
  }
  linear_bwd(s.d_ln, s.dq, a.ln1, x.wq, x.bq, HD, C_, 0.0f);
  linear_bwd(s.d_ln, s.dk, a.ln1, x.wk, x.bk, KD, C_, 1.0f);
  linear_bwd(s.d_ln, s.dv, a.ln1, x.wv, x.bv, KD, C_, 1.0f);
  norm_bwd(s.dres, s.d_ln, res_[size_t(l)], x.attn_norm_w, x.attn_norm_b, a.ln1_mean, a.ln1_rstd);
}

// ---- loss head --------------------------------------------------------------------

double Model::head(const int32_t* targets, float loss_scale, bool backward, float* logits_out) {
  const int N = B_ * T_;
  const float* xL = res_[size_t(L_)];
  norm_fwd(lnf_, lnf_mean_, lnf_rstd_, xL, lnf_w_, lnf_b_);
  const int w = cfg_.tied() ? wte_ : lm_head_;
  const float* W = params_.param(w);  // (V, C)
  float* dW = params_.grad(w);
  for (int r0 = 0; r0 < N; r0 += chunk_rows_) {
    const int n = std::min(chunk_rows_, N - r0);
    be_.gemm(false, true, n, V_, C_, 1.0f, lnf_ + size_t(r0) * C_, C_, W, C_, 0.0f, logits_, V_);
    if (logits_out) be_.to_host(logits_out + size_t(r0) * V_, logits_, size_t(n) * V_ * sizeof(float));
    be_.xent_rowmax(xent_rowmax_, logits_, n, V_);
    be_.xent_sumexp(xent_sumexp_, xent_target_, logits_, xent_rowmax_, targets + r0, n, V_, 0);
    be_.xent_bwd(backward ? logits_ : nullptr, losses_ + r0, logits_, xent_rowmax_, xent_sumexp_,
                 xent_target_, targets + r0, loss_scale, n, V_, 0);
    if (backward) {
      // logits_ now holds dlogits (n, V).
      be_.gemm(false, false, n, C_, V_, 1.0f, logits_, V_, W, C_, 0.0f, scratch_->d_lnf + size_t(r0) * C_, C_);
      be_.gemm(true, false, V_, C_, n, 1.0f, logits_, V_, lnf_ + size_t(r0) * C_, C_, 1.0f, dW, C_);
    }
  }
  std::vector<float> losses(static_cast<size_t>(N));
  be_.to_host(losses.data(), losses_, losses.size() * sizeof(float));
  double sum = 0;
  for (float v : losses) sum += v;
  if (backward) {
    be_.fill(scratch_->dres, 0.0f, size_t(N) * C_);
    norm_bwd(scratch_->dres, scratch_->d_lnf, xL, lnf_w_, lnf_b_, lnf_mean_, lnf_rstd_);
  }
  return sum;
}

// ---- whole model ---------------------------------------------------------------------

void Model::forward_blocks(const int32_t* inputs, const int32_t* targets, bool keep_probs) {
  const size_t BT = size_t(B_) * T_;
  be_.from_host(tokens_dev_, inputs, BT * sizeof(int32_t));
  be_.from_host(targets_dev_, targets, BT * sizeof(int32_t));
  hooks_->acquire(0, false);
  embed(tokens_dev_);
  hooks_->release(0, false);
  for (int l = 0; l < L_; ++l) {
    Acts& a = acts_for(l);
    hooks_->acquire(l + 1, false);
    block_fwd(l, a, keep_probs);
    // Block output = post-attention residual + MLP branch.
    const LayerIdx& x = layers_[size_t(l)];
    float* out = res_[size_t(l) + 1];
    be_.copy_bytes(out, a.res_mid, BT * C_ * sizeof(float));
    linear_fwd(out, a.fc_act, x.w_down, x.b_down, C_, F_, 1.0f);
    hooks_->release(l + 1, false);
  }
}

Model::Acts& Model::acts_for(int l) {
  return acts_[recompute_ == Recompute::full ? 0 : size_t(l)];
}

double Model::forward_backward(const int32_t* inputs, const int32_t* targets, float loss_scale,
                               float* logits_out) {
  forward_blocks(inputs, targets, recompute_ == Recompute::none);
  const bool tied = cfg_.tied();
  hooks_->acquire(L_ + 1, false);
  if (tied) hooks_->acquire(0, false);
  const double loss = head(targets_dev_, loss_scale, true, logits_out);
  if (tied) hooks_->release(0, false);
  hooks_->grads_ready(L_ + 1);
  hooks_->release(L_ + 1, false);
  for (int l = L_ - 1; l >= 0; --l) {
    hooks_->acquire(l + 1, true);
    block_bwd(l, acts_for(l));
    hooks_->grads_ready(l + 1);
    hooks_->release(l + 1, true);
  }
  hooks_->acquire(0, true);
  be_.embedding_bwd(params_.grad(wte_), gpt2_ ? params_.grad(wpe_) : nullptr, scratch_->dres,
                    tokens_dev_, B_, T_, C_, 0, V_, 0);
  hooks_->grads_ready(0);
  hooks_->release(0, true);
  return loss;
}

double Model::forward_loss(const int32_t* inputs, const int32_t* targets) {
  forward_blocks(inputs, targets, false);
  const bool tied = cfg_.tied();
  hooks_->acquire(L_ + 1, false);
  if (tied) hooks_->acquire(0, false);
  const double loss = head(targets_dev_, 0.0f, false, nullptr);
  if (tied) hooks_->release(0, false);
  hooks_->release(L_ + 1, false);
  return loss;
}

}  // namespace pentad
