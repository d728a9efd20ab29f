// Forward and backward of the GPT-2 / Llama decoder, written out layer by
// layer over the backend's coarse ops. The loss head fuses the logits
// matmul, the softmax cross-entropy and its backward chunk by chunk of rows,
// so the full (B*T, V) logits are never held at once.
// Tensor parallelism (the layers and regions of parallel/tp/): each block has
// two tp regions, entered (tp_.enter_fwd) before the column-parallel Q/K/V
// and the MLP's gate/up, and left through the row-parallel wo and down
// projections. Without sp the activations outside the regions are replicated
// (all rows on every tp rank); with sp each rank keeps a contiguous range of
// the flattened (B*T) token rows (the regions all-gather and reduce-scatter).
#include "model/model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "comm/comm.hpp"
#include "parallel/tp/layers.hpp"
#include "model/param_list.hpp"

namespace pentad {

// One block's layers; H, Hkv, F are this rank's heads, KV heads and MLP width.
struct Model::Block {
  Norm attn_norm;
  ParamId q_norm, k_norm;       // (D) each, model.qk_norm (Qwen3); not held otherwise
  ColumnParallelGroup qkv;      // wq (H*D, C), wk and wv (Hkv*D, C): one group op each way
  RowParallelLinear wo;         // (C, H*D)
  Norm mlp_norm;
  ColumnParallelLinear w_up;    // (F, C), GPT-2 (with the GELU in its linear_fwd)
  ColumnParallelGroup gate_up;  // w_gate and w_up (F, C), Llama
  RowParallelLinear w_down;     // (C, F); dense blocks only (the MoE layer has its own)
};

// Shapes are local: T = seq_len/cp tokens per sequence (chunk-major rows with
// cp > 1), Nl = this rank's token rows (B*T/tp with sp, else B*T),
// N = B*T, H, Hkv, F = this rank's heads, KV heads and MLP width.
struct Model::Acts {
  float* ln1 = nullptr;       // (Nl,C)
  float* ln1_mean = nullptr;  // (Nl)
  float* ln1_rstd = nullptr;  // (Nl)
  float* q = nullptr;         // (B,T,H*D), after RoPE
  float* k = nullptr;         // (B,T,Hkv*D), after RoPE
  float* v = nullptr;         // (B,T,Hkv*D)
  float* q_raw = nullptr;     // (B,T,H*D) q before its norm (qk_norm)
  float* k_raw = nullptr;     // (B,T,Hkv*D) k before its norm (qk_norm)
  float* q_rstd = nullptr;    // (B,T,H) 1/rms of each head of q (qk_norm)
  float* k_rstd = nullptr;    // (B,T,Hkv) (qk_norm)
  float* att = nullptr;       // (B,T,H*D)
  float* lse = nullptr;       // (B,H,T)
  float* probs = nullptr;     // (B,H,T,T), only with recompute = none and cp = 1
  float* res_mid = nullptr;   // (Nl,C) residual after attention
  float* ln2 = nullptr;       // (Nl,C)
  float* ln2_mean = nullptr;  // (Nl)
  float* ln2_rstd = nullptr;  // (Nl)
  float* fc_pre = nullptr;    // (B,T,F) GELU input, or SwiGLU gate
  float* fc_up = nullptr;     // (B,T,F) SwiGLU up (llama)
  float* fc_act = nullptr;    // (B,T,F) MLP activation (kept only with none)
};

struct Model::Scratch {
  float* dres = nullptr;      // (Nl,C) gradient of the residual stream
  float* d_ln = nullptr;      // (Nl,C)
  float* d_att = nullptr;     // (B,T,H*D)
  float* dq = nullptr;        // (B,T,H*D)
  float* dk = nullptr;        // (B,T,Hkv*D)
  float* dv = nullptr;        // (B,T,Hkv*D)
  float* d_fc_act = nullptr;  // (B,T,F)
  float* d_fc_pre = nullptr;  // (B,T,F)
  float* d_up = nullptr;      // (B,T,F) llama
  float* d_lnf = nullptr;     // (B,T,C) (partial sums over the vocab slice with tp)
  float* fc_act = nullptr;    // (B,T,F) recomputed MLP activation (selective/full)
  float* part = nullptr;      // (B,T,C) partial sums of a row-parallel output (tp > 1)
  float* gath_x = nullptr;    // (B,T,C) all-gathered norm output (sp)
  float* gath_dy = nullptr;   // (B,T,C) all-gathered residual gradient (sp)
  float* rep_grad = nullptr;  // (4,C) staged norm gradients of one unit (sp)
  float* qk_norm_grad = nullptr;  // (2,D) staged q/k norm gradients of one unit (qk_norm, tp > 1)
  float* logits_all = nullptr;  // (tp, chunk, V/tp) all-gathered logits for debug dumps
};

// One micro-batch's activations through chunk g = blocks [l0, l1).
struct Model::Slot {
  int chunk = -1;
  bool busy = false;
  int32_t* tokens = nullptr;   // (B*T) first chunk
  int32_t* targets = nullptr;  // (B*T) last chunk
  std::vector<float*> res;     // residual stream (Nl,C) at l0..l1 (global index, null elsewhere)
  std::vector<Acts> acts;      // per block l0..l1-1 (none/selective; global index)
  float* lnf = nullptr;        // last chunk: (Nl,C) final norm output
  float* lnf_mean = nullptr;   // (Nl)
  float* lnf_rstd = nullptr;   // (Nl)
  float* losses = nullptr;     // (B*T)
  std::vector<void*> owned;
  size_t bytes = 0;
  std::vector<WStash> wstash;  // per block l0..l1-1 (global index); allocated at the first B
  size_t w_bytes = 0;
};

Model::Model(const ModelConfig& cfg, Recompute recompute, int micro_batch, Backend& backend,
             ModelParallel par)
    : cfg_(cfg), recompute_(recompute), par_(par), be_(backend), params_(backend), expert_params_(backend) {
  if (par_.tp) {
    tp_size_ = par_.tp->size();
    tp_rank_ = par_.tp->rank();
  }
  sp_ = par_.sp && tp_size_ > 1;
  const int n_cp = par_.cp ? par_.cp->size() : 1;
  cp_rank_ = par_.cp ? par_.cp->rank() : 0;
  // One chunk without cp: every call below is then the serial one.
  cp_split_ = CpSplit{cfg.seq_len, n_cp, par_.cp_layout};
  if (cfg.seq_len % (n_cp * cp_split_.n_chunks()) != 0)
    throw std::invalid_argument("Model: seq_len=" + std::to_string(cfg.seq_len) +
                                " is not divisible by " + std::to_string(n_cp * cp_split_.n_chunks()) +
                                " (cp chunks)");
  const int n = tp_size_;
  auto need = [&](int v, const char* what) {
    if (v % n != 0)
      throw std::invalid_argument(std::string("Model: ") + what + "=" + std::to_string(v) +
                                  " is not divisible by tp=" + std::to_string(n));
  };
  need(cfg.n_heads, "n_heads");
  if (cfg.n_kv_heads % n != 0 && n % cfg.n_kv_heads != 0)
    throw std::invalid_argument("Model: n_kv_heads=" + std::to_string(cfg.n_kv_heads) + " and tp=" +
                                std::to_string(n) + " do not divide");
  need(cfg.d_ff, "d_ff");
  if (sp_) need(micro_batch * cp_split_.local_len(), "micro_batch*seq_len/cp");
  B_ = micro_batch;
  T_ = cp_split_.local_len();
  C_ = cfg.d_model;
  H_ = cfg.n_heads / n;
  Hkv_ = n > cfg.n_kv_heads ? 1 : cfg.n_kv_heads / n;  // fewer heads than tp ranks: one, copied (KvCopies)
  D_ = cfg.head_dim();
  F_ = cfg.d_ff / n;
  V_ = cfg.padded_vocab(n) / n;  // this slice's rows, vocabulary padding included
  L_ = cfg.n_layers;
  gpt2_ = cfg.family == Family::gpt2;
  N_ = B_ * T_;
  Nl_ = sp_ ? N_ / n : N_;
  tp_ = TpRegions(par_.tp, sp_, N_, C_);
  pp_rank_ = par_.pp_rank;
  pp_size_ = par_.pp_size;
  chunk_begin_ = par_.chunk_blocks.empty() ? std::vector<int>{0, L_} : par_.chunk_blocks;
  const int G = n_chunks();
  if (G < 1 || G % pp_size_ != 0 || chunk_begin_.front() != 0 || chunk_begin_.back() != L_ ||
      !std::is_sorted(chunk_begin_.begin(), chunk_begin_.end()))
    throw std::invalid_argument("Model: bad pipeline partition");
  has_embedding_ = owns_chunk(0);
  has_head_ = owns_chunk(G - 1);
  if (cfg.n_experts > 0) {
    // With tp every tp rank routes the same rows (all-gathered over tp with
    // sp) through the same experts and keeps its own rows of the output; the
    // experts are replicated over tp, or with parallel.expert_tp each one's
    // d_ff is split over tp and the layer sums the parts. With cp each cp
    // rank routes its tokens.
    moe_ = std::make_unique<MoeLayer>(cfg, backend, params_, expert_params_, par_.ep, par_.cp, par_.cp_layout,
                                      par_.expert_tp ? par_.tp : nullptr);
  }
  moe_stats_.reset(L_, cfg.n_experts);
  build_params();
  alloc_shared();
  sp_norm_grads_ = SpNormGrads(tp_, params_, be_, scratch_->rep_grad, C_);
  qk_norm_grads_ = SpNormGrads(tp_, params_, be_, scratch_->qk_norm_grad, D_, 2, true);
  kv_copies_ = KvCopies(tp_, par_.kv_copies, cfg.n_kv_heads, size_t(N_) * Hkv_ * D_);
  if (n_cp > 1) ring_ = std::make_unique<RingAttention>(be_, *par_.cp, cp_split_, B_, H_, Hkv_, D_);
}

Model::~Model() {
  for (auto& sl : slots_)
    for (void* p : sl->owned) be_.free_bytes(p);
  for (void* p : owned_) be_.free_bytes(p);
  delete shared_acts_;
  delete scratch_;
}

// Registers model_param_list's tensors (every rank opens every unit of both
// stores, so unit numbers are global; a pipeline stage fills only the units
// of its chunks) and binds the layers to them.
void Model::build_params() {
  ParamRank r{tp_rank_, tp_size_, par_.ep ? par_.ep->rank() : 0, par_.ep ? par_.ep->size() : 1,
              par_.expert_tp, pp_rank_, pp_size_, chunk_begin_, par_.placement};
  const std::vector<ParamSpec> list = model_param_list(cfg_, r);
  std::unordered_map<std::string, int> index;  // name -> index in its store
  size_t i = 0;
  for (int u = 0; u < L_ + 2; ++u) {
    params_.begin_unit(u);
    expert_params_.begin_unit(u);
    for (; i < list.size() && list[i].unit == u; ++i)
      index[list[i].name] = (list[i].expert ? expert_params_ : params_).add_spec(list[i]);
  }
  if (i != list.size()) throw std::logic_error("Model: the parameter list is not in unit order");
  const ParamLookup id = [&](const std::string& name) {
    const auto it = index.find(name);
    return it == index.end() ? ParamId{} : ParamId{it->second};
  };
  auto& P = params_;
  if (has_embedding_)
    embedding_ = VocabParallelEmbedding(P, be_, tp_, id("model/wte"), id("model/wpe"), C_, V_, B_, cp_split_, cp_rank_,
                                        cfg_.embedding_multiplier());
  blocks_.resize(size_t(L_));
  moe_p_.resize(size_t(L_));
  for (int g = 0; g < n_chunks(); ++g)
    if (owns_chunk(g))
      for (int l = chunk_first_block(g); l < chunk_end_block(g); ++l) bind_block(l, id);
  if (!has_head_) return;
  final_norm_.w = id("model/final_norm/w");
  final_norm_.b = id("model/final_norm/b");
  // The head's matrix: lm_head, or the tied wte (this stage's, or its stage copy).
  const ParamId w = cfg_.tied() ? (has_embedding_ ? embedding_.wte() : id("model/wte")) : id("model/lm_head");
  lm_head_ = VocabParallelHead(P, be_, tp_, w, C_, V_, cfg_.vocab_size);
}

// Block l's layers over its registered tensors (ParamId{} for the ones the
// family does not have: GPT-2's biases, Llama's gate).
void Model::bind_block(int l, const ParamLookup& id) {
  const std::string prefix = "model/layers/" + std::to_string(l) + "/";
  auto p = [&](const char* name) { return id(prefix + name); };
  Block& b = blocks_[size_t(l)];
  b.attn_norm = Norm{p("attn_norm/w"), p("attn_norm/b")};
  b.q_norm = p("attn/q_norm");
  b.k_norm = p("attn/k_norm");
  b.qkv = ColumnParallelGroup({ColumnParallelLinear(params_, be_, tp_, p("attn/wq"), p("attn/bq"), H_ * D_, C_),
                               ColumnParallelLinear(params_, be_, tp_, p("attn/wk"), p("attn/bk"), Hkv_ * D_, C_),
                               ColumnParallelLinear(params_, be_, tp_, p("attn/wv"), p("attn/bv"), Hkv_ * D_, C_)});
  b.wo = RowParallelLinear(params_, be_, tp_, p("attn/wo"), p("attn/bo"), C_, H_ * D_);
  b.mlp_norm = Norm{p("mlp_norm/w"), p("mlp_norm/b")};
  if (cfg_.is_moe_block(l)) {
    MoeParams& m = moe_p_[size_t(l)];
    for (const char* leaf : {"router/w", "experts/w_gate", "experts/w_up", "experts/b_up", "experts/w_down",
                             "experts/b_down", "shared/w_gate", "shared/w_up", "shared/b_up", "shared/w_down",
                             "shared/b_down", "shared/gate"})
      set_moe_param(m, leaf, p((std::string("mlp/") + leaf).c_str()).index);
    return;
  }
  if (gpt2_)
    b.w_up = ColumnParallelLinear(params_, be_, tp_, p("mlp/w_up"), p("mlp/b_up"), F_, C_);
  else
    b.gate_up = ColumnParallelGroup({ColumnParallelLinear(params_, be_, tp_, p("mlp/w_gate"), {}, F_, C_),
                                     ColumnParallelLinear(params_, be_, tp_, p("mlp/w_up"), {}, F_, C_)});
  b.w_down = RowParallelLinear(params_, be_, tp_, p("mlp/w_down"), p("mlp/b_down"), C_, F_);
}

// Where each planned buffer goes: a field of the shared Scratch, of a block's
// Acts (a slot's, or the shared full-recompute set) or of the slot.
// One block's deferred W: the output gradients of its matmuls, kept by B
// (all rows N, local widths); with full recompute also the matmul inputs B
// recomputed (the shared set is overwritten by the next block). MoE blocks
// run their MLP's whole backward in B and keep only the attention's.
struct Model::WStash {
  float* dy_mlp = nullptr;    // (N,C) gradient at w_down's output
  float* d_fc_pre = nullptr;  // (N,F) at w_up's (GPT-2) or w_gate's (Llama) output
  float* d_up = nullptr;      // (N,F) at w_up's output (Llama)
  float* dy_att = nullptr;    // (N,C) at wo's output
  float* dq = nullptr;        // (N,H*D) after RoPE's backward
  float* dk = nullptr;        // (N,Hkv*D)
  float* dv = nullptr;        // (N,Hkv*D)
  float* ln1 = nullptr;       // (Nl,C) full recompute only
  float* att = nullptr;       // (N,H*D)
  float* ln2 = nullptr;       // (Nl,C)
  float* fc_act = nullptr;    // (N,F)
};

void Model::bind(const BufSpec& b, void* p, Slot* s) {
  float* f = static_cast<float*>(p);
  // Read only by GEMMs, the bf16 attention or the MLP activation: kept in bf16 (MemoryPlan::holds).
  if (b.gemm_form) be_.hold_gemm_form(f, b.elems);
  if (is_acts_buf(b.buf)) {
    Acts& a = b.block >= 0 ? s->acts[size_t(b.block)] : *shared_acts_;
    switch (b.buf) {
      case Buf::ln1: a.ln1 = f; return;
      case Buf::ln1_mean: a.ln1_mean = f; return;
      case Buf::ln1_rstd: a.ln1_rstd = f; return;
      case Buf::q: a.q = f; return;
      case Buf::k: a.k = f; return;
      case Buf::v: a.v = f; return;
      case Buf::q_raw: a.q_raw = f; return;
      case Buf::k_raw: a.k_raw = f; return;
      case Buf::q_rstd: a.q_rstd = f; return;
      case Buf::k_rstd: a.k_rstd = f; return;
      case Buf::att: a.att = f; return;
      case Buf::lse: a.lse = f; return;
      case Buf::probs: a.probs = f; return;
      case Buf::res_mid: a.res_mid = f; return;
      case Buf::ln2: a.ln2 = f; return;
      case Buf::ln2_mean: a.ln2_mean = f; return;
      case Buf::ln2_rstd: a.ln2_rstd = f; return;
      case Buf::fc_pre: a.fc_pre = f; return;
      case Buf::fc_up: a.fc_up = f; return;
      case Buf::fc_act: a.fc_act = f; return;
      default: break;
    }
  }
  Scratch& x = *scratch_;
  switch (b.buf) {
    case Buf::dres: x.dres = f; return;
    case Buf::d_ln: x.d_ln = f; return;
    case Buf::d_att: x.d_att = f; return;
    case Buf::dq: x.dq = f; return;
    case Buf::dk: x.dk = f; return;
    case Buf::dv: x.dv = f; return;
    case Buf::d_fc_act: x.d_fc_act = f; return;
    case Buf::d_fc_pre: x.d_fc_pre = f; return;
    case Buf::d_up: x.d_up = f; return;
    case Buf::d_lnf: x.d_lnf = f; return;
    case Buf::scratch_fc_act: x.fc_act = f; return;
    case Buf::part: x.part = f; return;
    case Buf::gath_x: x.gath_x = f; return;
    case Buf::gath_dy: x.gath_dy = f; return;
    case Buf::rep_grad: x.rep_grad = f; return;
    case Buf::qk_norm_grad: x.qk_norm_grad = f; return;
    case Buf::logits_all: x.logits_all = f; return;
    case Buf::logits: logits_ = f; return;
    case Buf::xent_rowmax: xent_rowmax_ = f; return;
    case Buf::xent_sumexp: xent_sumexp_ = f; return;
    case Buf::tokens: s->tokens = static_cast<int32_t*>(p); return;
    case Buf::targets: s->targets = static_cast<int32_t*>(p); return;
    case Buf::res: s->res[size_t(b.block)] = f; return;
    case Buf::lnf: s->lnf = f; return;
    case Buf::lnf_mean: s->lnf_mean = f; return;
    case Buf::lnf_rstd: s->lnf_rstd = f; return;
    case Buf::losses: s->losses = f; return;
    default: break;
  }
  throw std::logic_error("Model: a planned buffer has no field");
}

// One backend block per planned buffer, or per run of buffers the plan joins
// (BufSpec::with_next), cut in plan order; each block's pointer goes to owned.
void Model::alloc_planned(const std::vector<BufSpec>& bufs, std::vector<void*>& owned,
                          const std::function<void(const BufSpec&, void*)>& place) {
  std::vector<size_t> block_bytes;
  const std::vector<BufPlace> at = place_buffers(bufs, block_bytes);
  std::vector<char*> blocks;
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (at[i].block == blocks.size()) {  // a block's first buffer: allocate the block
      blocks.push_back(static_cast<char*>(be_.alloc_bytes(block_bytes[at[i].block], bufs[i].mem)));
      owned.push_back(blocks.back());
    }
    place(bufs[i], blocks[at[i].block] + at[i].offset);
  }
}

// The plan is built from the sizes this constructor computed; they must be
// the ones the model's kernels use, or a buffer would be mis-sized.
void Model::alloc_shared() {
  plan_ = MemoryPlan(cfg_, recompute_, B_,
                     RankLayout{tp_size_, sp_, cp_split_, pp_rank_, pp_size_, par_.placement, chunk_begin_,
                                be_.attention_bwd_reads_probs(), int(be_.bf16_activation_bytes())});
  const LocalDims& d = plan_.dims();
  if (d.N != N_ || d.Nl != Nl_ || d.T != T_ || d.C != C_ || d.H != H_ || d.Hkv != Hkv_ || d.D != D_ ||
      d.F != F_ || d.V != V_ || plan_.has_head() != has_head_)
    throw std::logic_error("Model: the memory plan's sizes differ from the model's");
  scratch_ = new Scratch;
  if (recompute_ == Recompute::full) shared_acts_ = new Acts;
  alloc_planned(plan_.shared_buffers(), owned_, [&](const BufSpec& b, void* p) { bind(b, p, nullptr); });
  if (shared_acts_) shared_acts_->fc_act = scratch_->fc_act;
  chunk_rows_ = plan_.head_rows();
}

int Model::acquire_slot(int chunk) {
  if (!owns_chunk(chunk)) throw std::logic_error("Model: chunk " + std::to_string(chunk) + " is not on this rank");
  for (size_t i = 0; i < slots_.size(); ++i)
    if (!slots_[i]->busy && slots_[i]->chunk == chunk) {
      slots_[i]->busy = true;
      return int(i);
    }
  auto sl = std::make_unique<Slot>();
  Slot& S = *sl;
  S.chunk = chunk;
  S.busy = true;
  S.res.assign(size_t(L_) + 1, nullptr);
  if (recompute_ != Recompute::full) S.acts.resize(size_t(L_));
  alloc_planned(plan_.slot_buffers(chunk), S.owned, [&](const BufSpec& b, void* p) {
    S.bytes += b.bytes();
    bind(b, p, &S);
  });
  // Selective recompute rebuilds the MLP activation in scratch.
  if (recompute_ != Recompute::full)
    for (int l = chunk_first_block(chunk); l < chunk_end_block(chunk); ++l)
      if (!S.acts[size_t(l)].fc_act) S.acts[size_t(l)].fc_act = scratch_->fc_act;
  slots_.push_back(std::move(sl));
  moe_ctx_.emplace_back(size_t(L_));
  return int(slots_.size()) - 1;
}

void Model::release_slot(int s) { slot(s).busy = false; }

void Model::alloc_wstash(Slot& S) {
  if (!S.wstash.empty()) return;
  S.wstash.resize(size_t(L_));
  const bool full = recompute_ == Recompute::full;
  auto take = [&](float*& p, size_t n, size_t value_bytes = sizeof(float)) {
    p = static_cast<float*>(be_.alloc_bytes(n * value_bytes, Mem::activations));
    S.owned.push_back(p);
    S.w_bytes += n * value_bytes;
  };
  // A copy of the shared set's activation b, in its form (bf16_activations).
  auto take_held = [&](float*& p, Buf b, size_t n) {
    take(p, n, plan_.value_bytes(b, -1));
    if (plan_.holds(b, -1)) be_.hold_gemm_form(p, n);
  };
  const size_t N = size_t(N_), Nl = size_t(Nl_), C = size_t(C_);
  for (int l = chunk_first_block(S.chunk); l < chunk_end_block(S.chunk); ++l) {
    WStash& w = S.wstash[size_t(l)];
    if (!cfg_.is_moe_block(l)) {
      take(w.dy_mlp, N * C);
      take(w.d_fc_pre, N * F_ * (gpt2_ ? 1 : 2));  // Llama: with d_up, one block (the gate_up group)
      if (!gpt2_) w.d_up = w.d_fc_pre + N * F_;
      if (full) take_held(w.fc_act, Buf::fc_act, N * F_);
    }
    take(w.dy_att, N * C);
    take(w.dq, N * (H_ + 2 * Hkv_) * D_);  // dq, dk, dv: one block (the qkv group)
    w.dk = w.dq + N * H_ * D_;
    w.dv = w.dk + N * Hkv_ * D_;
    if (full) {
      take_held(w.ln1, Buf::ln1, Nl * C);
      take_held(w.att, Buf::att, N * H_ * D_);
      take_held(w.ln2, Buf::ln2, Nl * C);
    }
  }
  if (S.w_bytes != plan_.wstash_bytes(S.chunk))
    throw std::logic_error("Model: the deferred-W buffers differ from the memory plan's");
}

size_t Model::slot_w_bytes(int s) { return slot(s).w_bytes; }

size_t Model::slot_bytes(int g) {
  for (const auto& sl : slots_)
    if (sl->chunk == g) return sl->bytes;
  // Not allocated yet: allocate one (it stays in the pool) and measure it.
  const int s = acquire_slot(g);
  release_slot(s);
  return slots_[size_t(s)]->bytes;
}

size_t Model::activation_bytes() {
  size_t n = 0;
  for (int g = 0; g < n_chunks(); ++g)
    if (owns_chunk(g)) n += slot_bytes(g);
  return n;
}

float* Model::slot_input(int s) { return slot(s).res[size_t(chunk_first_block(slot(s).chunk))]; }
const float* Model::slot_output(int s) { return slot(s).res[size_t(chunk_end_block(slot(s).chunk))]; }
float* Model::boundary_grad() { return scratch_->dres; }

// ---- building blocks --------------------------------------------------------

void Model::norm_fwd(const Norm& n, float* out, float* mean, float* rstd, const float* x) {
  const int N = Nl_;
  if (gpt2_)
    be_.layernorm_fwd(out, mean, rstd, x, params_.param(n.w), params_.param(n.b), N, C_, cfg_.norm_eps);
  else
    be_.rmsnorm_fwd(out, rstd, x, params_.param(n.w), N, C_, cfg_.norm_eps, cfg_.norm_offset());
}

void Model::norm_bwd(const Norm& n, float* dx, const float* dout, const float* x, const float* mean,
                     const float* rstd, int slot) {
  const int N = Nl_;
  float* dw = sp_norm_grads_.grad(n.w, slot);
  float* db = sp_norm_grads_.grad(n.b, slot + 1);
  if (gpt2_)
    be_.layernorm_bwd(dx, dw, db, dout, x, params_.param(n.w), mean, rstd, N, C_);
  else
    be_.rmsnorm_bwd(dx, dw, dout, x, params_.param(n.w), rstd, N, C_, cfg_.norm_offset());
}

void Model::mlp_act_fwd(Acts& a) {
  const size_t n = size_t(N_) * F_;
  if (gpt2_)
    be_.gelu_fwd(a.fc_act, a.fc_pre, n);
  else
    be_.glu_fwd(a.fc_act, a.fc_pre, a.fc_up, n, cfg_.mlp_act);
}

// q and k are normalized in place, their projections' outputs kept (raw)
// for the backward; each head's D values are one row of the norm.
void Model::qk_norm_fwd(const Block& b, Acts& a, float* q, float* k) {
  const size_t nq = size_t(N_) * H_ * D_, nk = size_t(N_) * Hkv_ * D_;
  be_.copy_bytes(a.q_raw, q, nq * sizeof(float));
  be_.copy_bytes(a.k_raw, k, nk * sizeof(float));
  be_.rmsnorm_fwd(q, a.q_rstd, a.q_raw, params_.param(b.q_norm), N_ * H_, D_, cfg_.norm_eps, cfg_.norm_offset());
  be_.rmsnorm_fwd(k, a.k_rstd, a.k_raw, params_.param(b.k_norm), N_ * Hkv_, D_, cfg_.norm_eps,
                  cfg_.norm_offset());
}

// dq, dk hold the gradients of the normalized q and k (RoPE's backward done);
// they become the gradients of the raw projections' outputs. The input
// gradients accumulate, so they are built in d_att (free after the
// attention's backward) and copied back.
void Model::qk_norm_bwd(const Block& b, Acts& a) {
  Scratch& s = *scratch_;
  const size_t nq = size_t(N_) * H_ * D_, nk = size_t(N_) * Hkv_ * D_;
  be_.fill(s.d_att, 0.0f, nq);
  be_.rmsnorm_bwd(s.d_att, qk_norm_grads_.grad(b.q_norm, 0), s.dq, a.q_raw, params_.param(b.q_norm), a.q_rstd,
                  N_ * H_, D_, cfg_.norm_offset());
  be_.copy_bytes(s.dq, s.d_att, nq * sizeof(float));
  be_.fill(s.d_att, 0.0f, nk);
  be_.rmsnorm_bwd(s.d_att, qk_norm_grads_.grad(b.k_norm, 1), s.dk, a.k_raw, params_.param(b.k_norm), a.k_rstd,
                  N_ * Hkv_, D_, cfg_.norm_offset());
  be_.copy_bytes(s.dk, s.d_att, nk * sizeof(float));
  qk_norm_grads_.sync({b.q_norm, b.k_norm});
}

// ---- attention and positions ---------------------------------------------------

void Model::attention_fwd(Acts& a, bool keep_probs) {
  if (ring_) {
    ring_->forward(a.att, a.lse, a.q, a.k, a.v);
    return;
  }
  be_.attention_fwd(a.att, a.lse, keep_probs ? a.probs : nullptr, a.q, a.k, a.v, B_, T_, T_, H_, Hkv_,
                    D_, 0, 0, true);
}

void Model::attention_bwd(Acts& a) {
  Scratch& s = *scratch_;
  const size_t BT = size_t(N_);
  be_.fill(s.dq, 0.0f, BT * H_ * D_);
  be_.fill(s.dk, 0.0f, BT * Hkv_ * D_);
  be_.fill(s.dv, 0.0f, BT * Hkv_ * D_);
  if (ring_) {
    ring_->backward(s.dq, s.dk, s.dv, s.d_att, a.att, a.lse, a.q, a.k, a.v);
    return;
  }
  be_.attention_bwd(s.dq, s.dk, s.dv, s.d_att, a.att, a.lse, a.probs, a.q, a.k, a.v, B_, T_, T_, H_,
                    Hkv_, D_, 0, 0, true);
}

void Model::rope(float* x, int n_heads, bool backward) {
  const int m = cp_split_.chunk_len();
  for (int c = 0; c < cp_split_.n_chunks(); ++c) {
    float* xc = x + size_t(c) * B_ * m * n_heads * D_;
    const int pos = cp_split_.chunk_start(cp_rank_, c);
    if (backward)
      be_.rope_bwd(xc, B_, m, n_heads, D_, pos, cfg_.rope());
    else
      be_.rope_fwd(xc, B_, m, n_heads, D_, pos, cfg_.rope());
  }
}

// ---- one transformer block -----------------------------------------------------

// Attention: norm, enter the tp region, Q/K/V column-parallel (this rank's
// heads), attention, leave through the row-parallel wo onto the residual.
// MLP: norm, enter, the column-parallel up (and gate) matrices, activation;
// the row-parallel down projection runs in forward_chunk (full recompute
// re-runs block_fwd in backward, where the block output is not needed).
void Model::block_fwd(int l, Acts& a, const float* in, bool keep_probs) {
  const Block& b = blocks_[size_t(l)];
  Scratch& s = *scratch_;
  norm_fwd(b.attn_norm, a.ln1, a.ln1_mean, a.ln1_rstd, in);
  const float* x1 = tp_.enter_fwd(a.ln1, s.gath_x);  // (N,C)
  // Held q, k, v (bf16_activations) are stored rounded after the rotation:
  // the products and RoPE run in fp32 in the gradient scratch of the same
  // shapes, free until this block's backward, then to_gemm_form stores them.
  const bool held = plan_.holds(Buf::q, l);
  float *q = held ? s.dq : a.q, *k = held ? s.dk : a.k, *v = held ? s.dv : a.v;
  b.qkv.fwd({q, k, v}, x1);
  if (cfg_.qk_norm) qk_norm_fwd(b, a, q, k);
  if (!gpt2_) {
    rope(q, H_, false);
    rope(k, Hkv_, false);
  }
  if (held) {
    be_.to_gemm_form(a.q, q, size_t(N_) * H_ * D_);
    be_.to_gemm_form(a.k, k, size_t(N_) * Hkv_ * D_);
    be_.to_gemm_form(a.v, v, size_t(N_) * Hkv_ * D_);
  }
  attention_fwd(a, keep_probs);
  b.wo.fwd(a.res_mid, in, a.att, s.part);  // in + leave(att wo^T) + bo: (Nl,C)
  norm_fwd(b.mlp_norm, a.ln2, a.ln2_mean, a.ln2_rstd, a.res_mid);
  if (cfg_.is_moe_block(l)) return;  // the MoE layer runs in forward_chunk / block_bwd
  const float* x2 = tp_.enter_fwd(a.ln2, s.gath_x);  // (N,C)
  // A held MLP input (bf16_activations) is staged like q, k, v: the product
  // in fp32 in its gradient scratch, stored rounded, then the activation
  // reads it (in a bf16 run the activation reads its input rounded anyway).
  const size_t BTF = size_t(N_) * F_;
  if (plan_.holds(Buf::fc_pre, l)) {
    if (gpt2_) {
      b.w_up.fwd(s.d_fc_pre, x2);
    } else {
      b.gate_up.fwd({s.d_fc_pre, s.d_up}, x2);
      be_.to_gemm_form(a.fc_up, s.d_up, BTF);
    }
    be_.to_gemm_form(a.fc_pre, s.d_fc_pre, BTF);
    mlp_act_fwd(a);
  } else if (gpt2_) {
    b.w_up.fwd(a.fc_pre, x2, a.fc_act);  // the GELU with the GEMM (mlp_act_fwd's result)
  } else {
    b.gate_up.fwd({a.fc_pre, a.fc_up}, x2);
    mlp_act_fwd(a);
  }
}

// The conjugates in reverse: each region's output gradient enters through
// leave_bwd (all rows), the column-parallel input gradients are partial sums
// over this rank's heads / MLP columns until enter_bwd.
void Model::block_bwd(int l, Acts& a, const float* in, WStash* w) {
  const Block& b = blocks_[size_t(l)];
  Scratch& s = *scratch_;
  const bool moe = cfg_.is_moe_block(l);
  MoeCtxPtr& mctx = moe ? moe_ctx_[size_t(cur_slot_)][size_t(l)] : moe_ctx_[size_t(cur_slot_)][0];
  const size_t NC = size_t(N_) * C_;
  // B keeps a copy of what W reads (the scratch is reused by the next block).
  auto keep = [&](float* dst, const float* src, size_t n) { be_.copy_bytes(dst, src, n * sizeof(float)); };
  if (recompute_ == Recompute::full) {
    block_fwd(l, a, in, false);  // the shared set now holds this block's activations
    // The MoE layer's saved state was dropped after forward: run it again
    // (its output is not needed; d_ln is free until the MoE backward).
    if (moe) moe_fwd(mctx, l, s.d_ln, a, nullptr);
    if (w) {  // the shared set's activations, each in its form
      auto keep_as = [&](float* dst, const float* src, Buf buf, size_t n) {
        be_.copy_bytes(dst, src, n * plan_.value_bytes(buf, -1));
      };
      keep_as(w->ln1, a.ln1, Buf::ln1, size_t(Nl_) * C_);
      keep_as(w->att, a.att, Buf::att, size_t(N_) * H_ * D_);
      keep_as(w->ln2, a.ln2, Buf::ln2, size_t(Nl_) * C_);
      if (!moe) keep_as(w->fc_act, a.fc_act, Buf::fc_act, size_t(N_) * F_);
    }
  } else if (recompute_ == Recompute::selective && !moe) {
    mlp_act_fwd(a);  // fc_act is shared scratch
  }
  float* d_part = tp_.split() ? s.part : s.d_ln;  // (N,C)

  // MLP branch. s.dres holds dL/d(block output) = dL/d(res_mid) through the skip.
  const float* dy = tp_.leave_bwd(s.dres, s.gath_dy);  // (N,C)
  const size_t BTF = size_t(N_) * F_;
  const float* x2 = tp_.enter_fwd(a.ln2, s.gath_x);  // (N,C) the region's input again
  if (moe) {
    moe_->backward(mctx, moe_p_[size_t(l)], d_part, dy, x2, cur_loss_scale_);
  } else if (w) {  // B: the input gradients the fused path computes, in its order
    keep(w->dy_mlp, dy, NC);
    if (gpt2_) {
      b.w_down.bwd_input_gelu(s.d_fc_pre, dy, a.fc_pre);  // through the GELU: no d_fc_act
      b.w_up.bwd_input(d_part, s.d_fc_pre, 0.0f);
    } else {
      b.w_down.bwd_input(s.d_fc_act, dy);
      be_.glu_bwd(s.d_fc_pre, s.d_up, s.d_fc_act, a.fc_pre, a.fc_up, BTF, cfg_.mlp_act);
      b.gate_up.bwd_input(d_part, {s.d_fc_pre, s.d_up}, 0.0f);
      keep(w->d_up, s.d_up, BTF);
    }
    keep(w->d_fc_pre, s.d_fc_pre, BTF);
  } else if (gpt2_) {
    b.w_down.bwd_input_gelu(s.d_fc_pre, dy, a.fc_pre);  // dL/d(GELU input) in one op
    b.w_down.bwd_weight(dy, a.fc_act);
    b.w_up.bwd(d_part, s.d_fc_pre, x2, 0.0f);
  } else {
    b.w_down.bwd(s.d_fc_act, dy, a.fc_act);
    be_.glu_bwd(s.d_fc_pre, s.d_up, s.d_fc_act, a.fc_pre, a.fc_up, BTF, cfg_.mlp_act);
    b.gate_up.bwd(d_part, {s.d_fc_pre, s.d_up}, x2, 0.0f);
  }
  // The MoE layer's input gradient is whole on every tp rank (replicated
  // experts, or expert tp's parts summed inside the layer): nothing to
  // reduce here; with sp this rank takes its rows.
  const float* d_ln2 = moe ? d_part + size_t(tp_.first_row()) * C_ : tp_.enter_bwd(d_part, s.d_ln);
  norm_bwd(b.mlp_norm, s.dres, d_ln2, a.res_mid, a.ln2_mean, a.ln2_rstd, 2);

  // Attention branch. s.dres now holds dL/d(res_mid) = dL/d(block input) via the skip.
  dy = tp_.leave_bwd(s.dres, s.gath_dy);  // (N,C)
  if (w) {
    b.wo.bwd_input(s.d_att, dy);
    keep(w->dy_att, dy, NC);
  } else {
    b.wo.bwd(s.d_att, dy, a.att);
  }
  attention_bwd(a);
  if (!gpt2_) {
    rope(s.dq, H_, true);
    rope(s.dk, Hkv_, true);
  }
  if (cfg_.qk_norm) qk_norm_bwd(b, a);
  const float* x1 = tp_.enter_fwd(a.ln1, s.gath_x);  // (N,C)
  if (kv_copies_.copies() > 1) {
    // A copied key/value head: the input gradient from this rank's partial
    // dK, dV, the weight gradients from their sum over the copies.
    b.qkv.bwd_input(d_part, {s.dq, s.dk, s.dv}, 0.0f);
    kv_copies_.sum(s.dk);  // dK, then dV
    if (!w) b.qkv.bwd_weight({s.dq, s.dk, s.dv}, x1);
  } else if (w) {
    b.qkv.bwd_input(d_part, {s.dq, s.dk, s.dv}, 0.0f);
  } else {
    b.qkv.bwd(d_part, {s.dq, s.dk, s.dv}, x1, 0.0f);
  }
  if (w) {
    keep(w->dq, s.dq, size_t(N_) * H_ * D_);
    keep(w->dk, s.dk, size_t(N_) * Hkv_ * D_);
    keep(w->dv, s.dv, size_t(N_) * Hkv_ * D_);
  }
  norm_bwd(b.attn_norm, s.dres, tp_.enter_bwd(d_part, s.d_ln), in, a.ln1_mean, a.ln1_rstd, 0);
  sp_norm_grads_.sync({b.attn_norm.w, b.attn_norm.b, b.mlp_norm.w, b.mlp_norm.b});
}

// W of block l: the matmuls' weight and bias gradients from what B kept and
// the saved inputs (the slot's, or B's copies with full recompute; selective
// rebuilds the MLP activation again, bitwise as B did). Under sp the inputs
// are all-gathered again: collective over tp.
void Model::block_wgrad(int l, Acts& a, const WStash& w) {
  const Block& b = blocks_[size_t(l)];
  Scratch& s = *scratch_;
  const bool full = recompute_ == Recompute::full;
  if (!cfg_.is_moe_block(l)) {
    if (recompute_ == Recompute::selective) mlp_act_fwd(a);  // fc_act is shared scratch
    b.w_down.bwd_weight(w.dy_mlp, full ? w.fc_act : a.fc_act);
    const float* x2 = tp_.enter_fwd(full ? w.ln2 : a.ln2, s.gath_x);  // (N,C)
    if (gpt2_) {
      b.w_up.bwd_weight(w.d_fc_pre, x2);
    } else {
      b.gate_up.bwd_weight({w.d_fc_pre, w.d_up}, x2);
    }
  }
  b.wo.bwd_weight(w.dy_att, full ? w.att : a.att);
  const float* x1 = tp_.enter_fwd(full ? w.ln1 : a.ln1, s.gath_x);  // (N,C)
  b.qkv.bwd_weight({w.dq, w.dk, w.dv}, x1);
}

// out(Nl, C) = res_mid + the MoE layer of block l on ln2 (all-gathered over
// tp with sp; this rank keeps its rows of the output).
void Model::moe_fwd(MoeCtxPtr& ctx, int l, float* out, Acts& a, MoeStats* stats) {
  const float* x = tp_.enter_fwd(a.ln2, scratch_->gath_x);  // (N,C)
  moe_->forward(ctx, moe_p_[size_t(l)], l, out, a.res_mid, x, N_, stats, tp_.first_row(), Nl_);
}

// ---- loss head --------------------------------------------------------------------

double Model::head(Slot& S, float loss_scale, bool backward, float* logits_out, double* row_losses) {
  Scratch& s = *scratch_;
  const float* xL = S.res[size_t(L_)];  // (Nl,C)
  norm_fwd(final_norm_, S.lnf, S.lnf_mean, S.lnf_rstd, xL);
  const float* xf = tp_.enter_fwd(S.lnf, s.gath_x);  // (N,C)
  if (logits_out && tp_size_ > 1 && !s.logits_all) {
    s.logits_all = be_.alloc(plan_.dump_logits().elems, plan_.dump_logits().mem);
    owned_.push_back(s.logits_all);
  }
  const HeadBuffers buf{logits_, xent_rowmax_, xent_sumexp_, s.logits_all, chunk_rows_};
  // d_lnf: (N,C) partial sums over the vocabulary slices.
  lm_head_.fwd_bwd(S.losses, backward ? s.d_lnf : nullptr, xf, S.targets, loss_scale, logits_out, buf);
  std::vector<float> losses(static_cast<size_t>(N_));
  be_.to_host(losses.data(), S.losses, losses.size() * sizeof(float));
  double sum = 0;
  for (float v : losses) sum += v;
  if (row_losses) {  // this rank's tokens are (n_chunks, B, m) under cp (cp_slice), else (B, T)
    const size_t n_chunks = size_t(cp_split_.n_chunks()), m = size_t(cp_split_.chunk_len());
    for (size_t b = 0; b < size_t(B_); ++b) {
      double row = 0;
      for (size_t c = 0; c < n_chunks; ++c)
        for (size_t t = 0; t < m; ++t) row += losses[(c * size_t(B_) + b) * m + t];
      row_losses[b] = row;
    }
  }
  if (backward) {
    be_.fill(s.dres, 0.0f, size_t(Nl_) * C_);
    norm_bwd(final_norm_, s.dres, tp_.enter_bwd(s.d_lnf, s.d_ln), xL, S.lnf_mean, S.lnf_rstd, 0);
    sp_norm_grads_.sync({final_norm_.w, final_norm_.b});
  }
  return sum;
}

// ---- one chunk, and the whole model -------------------------------------------

Model::Acts& Model::acts_for(Slot& S, int l) {
  return recompute_ == Recompute::full ? *shared_acts_ : S.acts[size_t(l)];
}

void Model::forward_chunk(int s, const int32_t* inputs, const int32_t* targets, bool train) {
  Slot& S = slot(s);
  const int G = n_chunks(), g = S.chunk;
  const size_t BT = size_t(N_);
  if (g == G - 1) be_.from_host(S.targets, targets, BT * sizeof(int32_t));
  if (g == 0) {
    be_.from_host(S.tokens, inputs, BT * sizeof(int32_t));
    hooks_->acquire(0, UnitUse::forward);
    embedding_.fwd(S.res[0], S.tokens, scratch_->part);
    hooks_->release(0, UnitUse::forward);
  }
  const bool keep_probs = train && recompute_ == Recompute::none;
  for (int l = chunk_first_block(g); l < chunk_end_block(g); ++l) {
    Acts& a = acts_for(S, l);
    hooks_->acquire(l + 1, UnitUse::forward);
    block_fwd(l, a, S.res[size_t(l)], keep_probs);
    // Block output = post-attention residual + MLP branch.
    if (cfg_.is_moe_block(l)) {
      MoeCtxPtr& mctx = moe_ctx_[size_t(s)][size_t(l)];
      moe_fwd(mctx, l, S.res[size_t(l) + 1], a, train ? &moe_stats_ : nullptr);
      // Full recompute runs it again in backward; evaluation has no backward.
      if (!train || recompute_ == Recompute::full) mctx.reset();
    } else {
      blocks_[size_t(l)].w_down.fwd(S.res[size_t(l) + 1], a.res_mid, a.fc_act, scratch_->part);
    }
    hooks_->release(l + 1, UnitUse::forward);
  }
}

double Model::chunk_backward_head(Slot& S, float loss_scale, float* logits_out) {
  if (S.chunk != n_chunks() - 1) return 0;
  // The head runs its forward and backward together: acquire it (and a
  // tied embedding held by this stage) as a backward unit, since it
  // produces gradients.
  const bool tied_here = cfg_.tied() && has_embedding_;
  hooks_->acquire(L_ + 1, UnitUse::backward);
  if (tied_here) hooks_->acquire(0, UnitUse::backward);
  const double loss = head(S, loss_scale, true, logits_out);
  if (tied_here) hooks_->release(0, UnitUse::backward);
  hooks_->grads_ready(L_ + 1);
  hooks_->release(L_ + 1, UnitUse::backward);
  return loss;
}

void Model::chunk_backward_embedding(Slot& S) {
  if (S.chunk != 0) return;
  hooks_->acquire(0, UnitUse::backward);
  embedding_.bwd(scratch_->dres, scratch_->gath_dy, S.tokens);
  hooks_->grads_ready(0);
  hooks_->release(0, UnitUse::backward);
}

double Model::backward_chunk(int s, float loss_scale, float* logits_out) {
  Slot& S = slot(s);
  cur_slot_ = s;
  cur_loss_scale_ = routing_loss_scale_ > 0 ? routing_loss_scale_ : loss_scale;
  const int g = S.chunk;
  const double loss = chunk_backward_head(S, loss_scale, logits_out);
  for (int l = chunk_end_block(g) - 1; l >= chunk_first_block(g); --l) {
    hooks_->acquire(l + 1, UnitUse::backward);
    block_bwd(l, acts_for(S, l), S.res[size_t(l)]);
    hooks_->grads_ready(l + 1);
    hooks_->release(l + 1, UnitUse::backward);
  }
  chunk_backward_embedding(S);
  return loss;
}

double Model::backward_input_chunk(int s, float loss_scale, float* logits_out) {
  Slot& S = slot(s);
  cur_slot_ = s;
  cur_loss_scale_ = routing_loss_scale_ > 0 ? routing_loss_scale_ : loss_scale;
  const int g = S.chunk;
  alloc_wstash(S);
  const double loss = chunk_backward_head(S, loss_scale, logits_out);
  for (int l = chunk_end_block(g) - 1; l >= chunk_first_block(g); --l) {
    hooks_->acquire(l + 1, UnitUse::backward);
    block_bwd(l, acts_for(S, l), S.res[size_t(l)], &S.wstash[size_t(l)]);
    hooks_->release(l + 1, UnitUse::backward);
  }
  // The embedding's gradient needs the boundary gradient now (the next B
  // overwrites it): it stays in B.
  chunk_backward_embedding(S);
  return loss;
}

void Model::backward_weight_chunk(int s) {
  Slot& S = slot(s);
  if (S.wstash.empty()) throw std::logic_error("Model::backward_weight_chunk: W before its B");
  const int g = S.chunk;
  for (int l = chunk_end_block(g) - 1; l >= chunk_first_block(g); --l) {
    hooks_->acquire(l + 1, UnitUse::weight_grads);
    block_wgrad(l, acts_for(S, l), S.wstash[size_t(l)]);
    hooks_->grads_ready(l + 1);
    hooks_->release(l + 1, UnitUse::weight_grads);
  }
}

double Model::loss_chunk(int s, double* row_losses) {
  Slot& S = slot(s);
  const bool tied_here = cfg_.tied() && has_embedding_;
  hooks_->acquire(L_ + 1, UnitUse::forward);
  if (tied_here) hooks_->acquire(0, UnitUse::forward);
  const double loss = head(S, 0.0f, false, nullptr, row_losses);
  if (tied_here) hooks_->release(0, UnitUse::forward);
  hooks_->release(L_ + 1, UnitUse::forward);
  return loss;
}

double Model::forward_backward(const int32_t* inputs, const int32_t* targets, float loss_scale,
                               float* logits_out) {
  if (n_chunks() != 1) throw std::logic_error("Model::forward_backward: the model is cut into pipeline chunks");
  const int s = acquire_slot(0);
  forward_chunk(s, inputs, targets, true);
  const double loss = backward_chunk(s, loss_scale, logits_out);
  release_slot(s);
  return loss;
}

double Model::forward_loss(const int32_t* inputs, const int32_t* targets) {
  if (n_chunks() != 1) throw std::logic_error("Model::forward_loss: the model is cut into pipeline chunks");
  const int s = acquire_slot(0);
  forward_chunk(s, inputs, targets, false);
  const double loss = loss_chunk(s);
  release_slot(s);
  return loss;
}

}  // namespace pentad
