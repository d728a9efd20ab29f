// The boundaries of the tensor-parallel regions (Megatron-LM's f and g,
// mappings.py), the sequence-parallel norm gradients and the gradients of
// key/value heads held by several tp ranks. A block enters a
// column-parallel region (every tp rank needs all token rows of its input)
// and leaves it through a row-parallel layer (every rank holds partial sums
// over its heads / MLP columns); sp keeps 1/tp of the rows between regions.
#pragma once

#include <cstddef>
#include <initializer_list>

#include "backend/backend.hpp"
#include "model/params.hpp"

namespace pentad {

class Comm;

// The four mappings, on (rows, width) activations; N = all token rows of
// the micro-batch, Nl = this rank's (N/tp with sp, N otherwise):
//   enter  forward: "copy to tp region" (identity) without sp, "gather from
//          sp region" (all-gather Nl -> N rows) with sp;
//          backward: all-reduce (N rows) / reduce-scatter (N -> Nl rows).
//   leave  forward: "reduce from tp region" (all-reduce) without sp,
//          "reduce-scatter to sp region" (N -> Nl rows) with sp;
//          backward: identity / all-gather (Nl -> N rows).
// enter_fwd and leave_bwd are one operation, as are enter_bwd and leave_fwd;
// the names say where in the block each call stands. Each returns where the
// result is (the input itself when the mapping is the identity, or an
// all-reduce in place). Without tp every mapping is the identity.
class TpRegions {
 public:
  TpRegions() = default;  // no tp group: the serial model
  TpRegions(Comm* tp, bool sp, int n_rows, int width);

  int size() const { return size_; }
  int rank() const { return rank_; }
  bool split() const { return size_ > 1; }
  bool sp() const { return sp_; }
  Comm* comm() const { return comm_; }
  int n_rows() const { return n_rows_; }              // N
  int n_rows_local() const { return n_rows_local_; }  // Nl
  // The first of this rank's rows among all N rows (0 without sp).
  int first_row() const { return sp_ ? rank_ * n_rows_local_ : 0; }

  // x (Nl, width) -> (N, width); `full` (N, width) receives the gathered
  // rows with sp. Collective over tp with sp.
  const float* enter_fwd(const float* x_local, float* full) const { return all_rows(x_local, full); }
  // Partial sums dx (N, width) -> this rank's rows of the sum (Nl, width),
  // in `local` with sp, in place otherwise. Collective over tp.
  const float* enter_bwd(float* dx_partial, float* local) const { return sum_rows(dx_partial, local); }
  // Partial sums y (N, width) -> this rank's rows of the sum (Nl, width).
  // Collective over tp.
  const float* leave_fwd(float* y_partial, float* local) const { return sum_rows(y_partial, local); }
  // dy (Nl, width) -> (N, width). Collective over tp with sp.
  const float* leave_bwd(const float* dy_local, float* full) const { return all_rows(dy_local, full); }

 private:
  const float* all_rows(const float* local, float* full) const;
  const float* sum_rows(float* partial, float* local) const;

  Comm* comm_ = nullptr;
  int size_ = 1, rank_ = 0;
  bool sp_ = false;
  int n_rows_ = 0, n_rows_local_ = 0, width_ = 0;
};

// Weights replicated over tp whose gradients each rank sees only part of.
// With sp the norms see only this rank's 1/tp of the token rows; the q/k
// norms (Qwen3's, one weight shared by every head) see only this rank's
// heads whenever tp > 1 (`heads`). Their weight gradients are partial sums:
// a unit's norms write them to a staging buffer, (slots, width): up to
// `slots` vectors, in slots the caller numbers; sync() sums the stage over tp
// once per unit and micro-batch (accumulated gradients are never summed
// twice) and adds it to each rank's gradient. When the gradient is whole
// (no sp; one tp rank) the norms write their gradients directly.
class SpNormGrads {
 public:
  SpNormGrads() = default;
  SpNormGrads(const TpRegions& tp, ParamStore& params, Backend& be, float* stage, int width, int slots = 4,
              bool heads = false);
  // Where the gradient of norm tensor `p`, staging slot `slot`, goes.
  float* grad(ParamId p, int slot) const;
  // Sums the stage over tp and adds slot i to the gradient of ids[i] (those
  // held); clears the stage. Collective over tp (when partial; otherwise nothing).
  void sync(std::initializer_list<ParamId> ids) const;

 private:
  bool partial() const { return heads_ ? tp_->split() : tp_->sp(); }
  const TpRegions* tp_ = nullptr;
  ParamStore* params_ = nullptr;
  Backend* be_ = nullptr;
  float* stage_ = nullptr;  // (slots, width), when partial
  int width_ = 0, slots_ = 4;
  bool heads_ = false;
};

// The key/value heads with fewer heads than tp ranks: each head is held
// whole by `copies` = tp/n_kv_heads ranks, each of which attends with its own
// query heads only, so its dK and dV (this rank's one head, N rows each) are
// partial sums over the copies. sum() adds them up over the copies before the
// weight gradients (and B's copies for a deferred W) read them; the input
// gradient, taken from the partial dK and dV before, is summed over tp as
// any column-parallel input gradient. The sum runs over the copies alone:
// the whole tp group with one head, else the group of the ranks holding
// this rank's head (Topology::kv_copies). Without copies (tp divides
// n_kv_heads) nothing happens.
class KvCopies {
 public:
  KvCopies() = default;
  // kv_heads: the model's key/value heads; group: the ranks holding this
  // rank's head, needed where tp > kv_heads > 1; n = N*D, the elements of
  // this rank's dK (and of its dV, right after it).
  KvCopies(const TpRegions& tp, Comm* group, int kv_heads, size_t n);
  int copies() const { return copies_; }
  // dkv: this rank's dK then dV (2n), partial -> summed over the copies.
  // Collective over the copies (when copies > 1).
  void sum(float* dkv) const;

 private:
  Comm* group_ = nullptr;
  int copies_ = 1;
  size_t n_ = 0;
};

}  // namespace pentad
