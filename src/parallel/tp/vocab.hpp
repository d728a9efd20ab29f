// The vocabulary-parallel ends of the model (Megatron-LM): tp rank r holds
// rows [r*V/tp, (r+1)*V/tp) of the embedding and of the head's matrix. The
// embedding's partial rows (zero for tokens outside the slice) leave a tp
// region; the head computes this slice's logits and the softmax
// cross-entropy over the whole vocabulary with two small all-reduces.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "model/params.hpp"
#include "parallel/cp/context_parallel.hpp"
#include "parallel/tp/regions.hpp"

namespace pentad {

// Token (and, GPT-2, learned position) embedding of this rank's token rows.
// Rows are B sequences of T = seq_len/cp tokens, cp chunk by chunk (one chunk
// without cp), each chunk at its global positions.
class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding() = default;  // not held on this rank
  // wte: (V/tp, C); wpe: (seq_len, C), replicated, or none (RoPE models).
  // multiplier: the token rows scaled by it (Gemma's sqrt(C); 1 = none).
  VocabParallelEmbedding(ParamStore& params, Backend& be, const TpRegions& tp, ParamId wte, ParamId wpe,
                         int n_embd, int vocab_local, int micro_batch, const CpSplit& cp_split, int cp_rank,
                         float multiplier = 1.0f);

  ParamId wte() const { return wte_; }

  // out (Nl, C) = multiplier wte[tokens] + wpe[positions] (the multiplier
  // with RoPE models only, which have no wpe); tokens: (N) ids on the
  // device; part: (N, C) scratch (tp > 1). The positions are added by tp
  // rank 0 only, so the reduction adds them once. Collective over tp.
  void fwd(float* out, const int32_t* tokens, float* part) const;
  // dwte, dwpe += scatter of dy (Nl, C) over the tokens (and positions).
  // All rows are needed: the vocab slice needs every token's gradient, and
  // the replicated positions get the same gradient on every tp rank.
  // dy_full: (N, C) scratch (sp). dy_local is scaled in place by the
  // multiplier first. Collective over tp with sp.
  void bwd(float* dy_local, float* dy_full, const int32_t* tokens) const;

 private:
  ParamStore* params_ = nullptr;
  Backend* be_ = nullptr;
  const TpRegions* tp_ = nullptr;
  ParamId wte_, wpe_;
  int C_ = 0, V_ = 0, B_ = 0, vocab_start_ = 0, cp_rank_ = 0;
  float multiplier_ = 1.0f;
  CpSplit cp_split_;
};

// Scratch of the loss head, which runs chunk_rows token rows at a time so the
// full (N, V) logits are never held.
struct HeadBuffers {
  float* logits = nullptr;         // (chunk_rows, Vp/tp); dlogits in backward
  float* rowmax = nullptr;         // (chunk_rows)
  float* sumexp_target = nullptr;  // (2*chunk_rows)
  float* logits_all = nullptr;     // (tp, chunk_rows, Vp/tp), debug dumps with tp > 1
  int chunk_rows = 0;
};

// logits = x W^T over this rank's vocabulary slice, then the vocab-parallel
// softmax cross-entropy and, in backward, its gradients.
class VocabParallelHead {
 public:
  VocabParallelHead() = default;  // not held on this rank
  // w: (Vp/tp, C): lm_head, wte, or (tied, pp > 1) this stage's copy of wte;
  // vocab_local = Vp/tp rows per rank, of which the global rows >= vocab
  // (ModelConfig::vocab_size) are padding.
  VocabParallelHead(ParamStore& params, Backend& be, const TpRegions& tp, ParamId w, int n_embd,
                    int vocab_local, int vocab);

  ParamId weight() const { return w_; }

  // losses (N) = per-token cross-entropy of x (N, C) (all rows, after
  // enter_fwd) against targets (N). With dx (N, C) non-null also backward:
  // dx = this slice's share of the input gradient (partial sums over the
  // vocabulary slices until enter_bwd), dW += dlogits^T x, the gradients
  // scaled by loss_scale. logits_out, if not null: the (N, V) logits on the
  // host (debug dumps). Collective over tp.
  void fwd_bwd(float* losses, float* dx, const float* x, const int32_t* targets, float loss_scale,
               float* logits_out, const HeadBuffers& buf) const;

 private:
  ParamStore* params_ = nullptr;
  Backend* be_ = nullptr;
  const TpRegions* tp_ = nullptr;
  ParamId w_;
  int C_ = 0, V_ = 0, vocab_start_ = 0;
  int V_real_ = 0;   // this slice's rows below ModelConfig::vocab_size (the rest: padding)
  int V_global_ = 0; // ModelConfig::vocab_size
};

}  // namespace pentad
