// Context parallelism: every sequence is cut over the cp group and attention
// runs as ring attention (Liu et al. 2023, "Ring Attention with Blockwise
// Transformers"): each rank keeps its queries, the K/V blocks travel around
// the periodic cp ring, and partial results are merged exactly with their
// log-sum-exp (online softmax, Milakov & Gimelshein 2018). The zig-zag layout
// (as in Megatron-LM's context parallelism) cuts a sequence into 2*cp chunks
// and gives rank r chunks r and 2*cp-1-r, so causal work is equal per rank.
// Local token order is chunk-major: a micro-batch of B sequences is held as
// (n_chunks, B, chunk_len) rows, so every chunk is a contiguous (B, m, ...)
// tensor the attention kernel takes directly.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "config/config.hpp"  // CpLayout: the deck's parallel.cp_layout

namespace pentad {

class Comm;

// Which global positions of a sequence of seq_len tokens each cp rank holds.
struct CpSplit {
  int seq_len = 0;  // T, global
  int cp = 1;
  CpLayout layout = CpLayout::contiguous;

  // Zig-zag over one rank is the contiguous layout (one chunk).
  int n_chunks() const { return layout == CpLayout::zigzag && cp > 1 ? 2 : 1; }
  int chunk_len() const { return seq_len / (cp * n_chunks()); }  // m
  int local_len() const { return seq_len / cp; }                  // T/cp
  // Global position of the first token of chunk c (< n_chunks) of cp rank r.
  int chunk_start(int r, int c) const;
  // Causal (query, key) pairs with key <= query whose query rank r holds:
  // the attention work of one (sequence, head), in multiply-adds / (2D).
  int64_t causal_pairs(int r) const;
};

// Host token rows of n_mb micro-batches of n_seq sequences: global
// (n_mb, n_seq, T) -> this rank's (n_mb, n_chunks, n_seq, m).
void cp_slice(const CpSplit& s, int rank, const int32_t* global, int n_mb, int n_seq, int32_t* local);
// The inverse for rows of `width` values, from every rank's local rows
// concatenated in cp-rank order: (cp, n_mb, n_chunks, n_seq, m, width) ->
// global (n_mb, n_seq, T, width).
void cp_unslice(const CpSplit& s, const float* all_ranks, int n_mb, int n_seq, int width,
                float* global);

// Ring attention over the cp group for one micro-batch of B sequences: q
// (n_chunks, B, m, H*D) chunk-major rows, k, v (n_chunks, B, m, Hkv*D), out
// like q, lse (n_chunks, B, H, m). Causal, in global positions. Blocks whose
// keys all lie after their queries are skipped. Backward recomputes the
// probabilities from q, k and the merged lse (there is no kept probs tensor),
// so every recompute policy gives the same bits.
// The buffers RingAttention allocates (scratch), in elements, for a split
// and this rank's local shapes (H, Hkv: this tp rank's heads). The planner
// evaluates the same function.
struct RingBuffers {
  static constexpr int n_kv = 2, n_dkv = 3;  // K/V ring buffers; dK/dV accumulators in flight
  size_t kv = 0;        // one of them: K plus V, (2, nc, B, m, Hkv*D)
  size_t o_part = 0;    // (B, m, H*D) one query chunk's partial output
  size_t lse_part = 0;  // (B, H, m) and its log-sum-exp
  size_t elems() const { return size_t(n_kv + n_dkv) * kv + o_part + lse_part; }
};
RingBuffers ring_buffers(const CpSplit& split, int B, int H, int Hkv, int D);

class RingAttention {
 public:
  // Allocates the ring buffers (scratch). Local shapes: H, Hkv this tp rank's heads.
  RingAttention(Backend& be, Comm& cp, const CpSplit& split, int B, int H, int Hkv, int D);
  ~RingAttention();
  RingAttention(const RingAttention&) = delete;
  RingAttention& operator=(const RingAttention&) = delete;

  // out, lse WRITTEN. Collective over cp.
  void forward(float* out, float* lse, const float* q, const float* k, const float* v);
  // dq, dk, dv ACCUMULATE; out/lse from forward. Collective over cp.
  void backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                const float* lse, const float* q, const float* k, const float* v);

  // Accounting since the last reset: FLOPs of the visible (query, key) pairs
  // this rank computed (forward 4*D per pair and head, backward 8*D: the
  // recomputed scores and the four products of the gradient) and host wall
  // time spent in the attention kernels (not in the ring transfers).
  double flops() const { return flops_; }
  double compute_ms() const { return compute_s_ * 1e3; }
  void reset_stats() { flops_ = compute_s_ = 0; }

 private:
  // Does the query chunk (start qs) see any key of the chunk starting at ks?
  bool visible(int qs, int ks) const { return ks <= qs + m_ - 1; }
  int64_t visible_pairs(int qs, int ks) const;
  void copy_kv(float* kv, const float* k, const float* v);
  // Hop s of the K/V ring (both directions use it): the block this rank
  // holds (in kv_[cur]) and, before the last hop, its transfer on to the
  // next rank while the hop computes. Collective over cp.
  struct KvHop;
  KvHop start_hop(int s, int cur);
  void finish_hop(const KvHop& h);
  // Calls fn(qc, kc, qs, ks) for every (query chunk, key chunk) pair of this
  // rank's queries and the keys of rank src that has a visible key, timing
  // it and counting flops_per_pair * D * H * B FLOPs per visible pair.
  template <class Fn>
  void for_visible_blocks(int src, double flops_per_pair, Fn&& fn);

  Backend& be_;
  Comm& cp_;
  CpSplit split_;
  int B_, H_, Hkv_, D_, m_, nc_, rank_, next_, prev_;
  size_t n_q_chunk_, n_kv_;  // elements of one q chunk (B,m,H*D); of k plus v (2,nc,B,m,Hkv*D)
  float* kv_[RingBuffers::n_kv] = {};                  // (2, nc, B, m, Hkv*D) ring buffers
  float* dkv_[RingBuffers::n_dkv] = {};                // dK/dV accumulators in flight
  float* o_part_ = nullptr;                            // (B, m, H*D)
  float* lse_part_ = nullptr;                          // (B, H, m)
  double flops_ = 0, compute_s_ = 0;
};

}  // namespace pentad
