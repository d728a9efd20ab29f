// Ring attention and the cp index math (see context_parallel.hpp).
// Forward, on rank r of P: at step s it holds the K/V of rank r-s, sends it
// on to r+1 and receives r-s-1's while computing (non-blocking, overlapped);
// each visible (query chunk, key chunk) pair gives a partial (out, lse) that
// is merged into the running result. Backward circulates K/V the same way
// plus a dK/dV accumulator that follows its K/V one hop behind and, after P
// hops, arrives back at the owner: each rank adds its contribution for the
// block it holds (computed while the accumulator is in flight) and passes it on.
#include "parallel/cp/context_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "comm/comm.hpp"
#include "core/error.hpp"

namespace pentad {
namespace {

constexpr int kTagKv = 61, kTagDkv = 62;

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int CpSplit::chunk_start(int r, int c) const {
  const int m = chunk_len();
  if (layout == CpLayout::contiguous) return r * m;
  return (c == 0 ? r : 2 * cp - 1 - r) * m;
}

int64_t CpSplit::causal_pairs(int r) const {
  const int64_t m = chunk_len();
  int64_t n = 0;
  // Query at global position p sees keys 0..p: sum of (p + 1) over the chunk.
  for (int c = 0; c < n_chunks(); ++c) n += m * chunk_start(r, c) + m * (m + 1) / 2;
  return n;
}

void cp_slice(const CpSplit& s, int rank, const int32_t* global, int n_mb, int n_seq, int32_t* local) {
  const int T = s.seq_len, m = s.chunk_len(), nc = s.n_chunks();
  for (int mb = 0; mb < n_mb; ++mb)
    for (int c = 0; c < nc; ++c)
      for (int b = 0; b < n_seq; ++b) {
        const int32_t* src = global + (size_t(mb) * n_seq + b) * T + s.chunk_start(rank, c);
        std::copy_n(src, m, local + ((size_t(mb) * nc + c) * n_seq + b) * m);
      }
}

void cp_unslice(const CpSplit& s, const float* all_ranks, int n_mb, int n_seq, int width,
                float* global) {
  const int T = s.seq_len, m = s.chunk_len(), nc = s.n_chunks();
  const size_t per_rank = size_t(n_mb) * nc * n_seq * m * width;
  for (int r = 0; r < s.cp; ++r)
    for (int mb = 0; mb < n_mb; ++mb)
      for (int c = 0; c < nc; ++c)
        for (int b = 0; b < n_seq; ++b) {
          const float* src = all_ranks + r * per_rank + ((size_t(mb) * nc + c) * n_seq + b) * m * width;
          float* dst = global + ((size_t(mb) * n_seq + b) * T + s.chunk_start(r, c)) * width;
          std::copy_n(src, size_t(m) * width, dst);
        }
}

// ---- ring attention ----------------------------------------------------------

RingBuffers ring_buffers(const CpSplit& split, int B, int H, int Hkv, int D) {
  const size_t m = size_t(split.chunk_len());
  RingBuffers b;
  b.kv = 2 * size_t(split.n_chunks()) * size_t(B) * m * size_t(Hkv) * size_t(D);
  b.o_part = size_t(B) * m * size_t(H) * size_t(D);
  b.lse_part = size_t(B) * size_t(H) * m;
  return b;
}

RingAttention::RingAttention(Backend& be, Comm& cp, const CpSplit& split, int B, int H, int Hkv, int D)
    : be_(be), cp_(cp), split_(split), B_(B), H_(H), Hkv_(Hkv), D_(D) {
  if (cp.size() != split.cp) PENTAD_FATAL("RingAttention: the cp group does not match the split");
  m_ = split.chunk_len();
  nc_ = split.n_chunks();
  rank_ = cp.rank();
  next_ = (rank_ + 1) % cp.size();
  prev_ = (rank_ + cp.size() - 1) % cp.size();
  const RingBuffers sizes = ring_buffers(split, B, H, Hkv, D);
  n_q_chunk_ = sizes.o_part;
  n_kv_ = sizes.kv;
  for (float*& p : kv_) p = be.alloc(n_kv_, Mem::scratch);
  for (float*& p : dkv_) p = be.alloc(n_kv_, Mem::scratch);
  o_part_ = be.alloc(n_q_chunk_, Mem::scratch);
  lse_part_ = be.alloc(sizes.lse_part, Mem::scratch);
}

RingAttention::~RingAttention() {
  for (float* p : kv_) be_.free_bytes(p);
  for (float* p : dkv_) be_.free_bytes(p);
  be_.free_bytes(o_part_);
  be_.free_bytes(lse_part_);
}

int64_t RingAttention::visible_pairs(int qs, int ks) const {
  int64_t n = 0;
  for (int i = 0; i < m_; ++i) n += std::clamp(qs + i - ks + 1, 0, m_);
  return n;
}

void RingAttention::copy_kv(float* kv, const float* k, const float* v) {
  be_.copy_bytes(kv, k, n_kv_ / 2 * sizeof(float));
  be_.copy_bytes(kv + n_kv_ / 2, v, n_kv_ / 2 * sizeof(float));
}

struct RingAttention::KvHop {
  int src;                // whose K/V this rank holds now
  const float* k;         // (nc, B, m, Hkv*D)
  const float* v;         // (nc, B, m, Hkv*D)
  Comm::Exchange hop;      // the send on to the next rank and the receive from the previous
};

RingAttention::KvHop RingAttention::start_hop(int s, int cur) {
  const int P = cp_.size();
  KvHop h{(rank_ - s + P) % P, kv_[cur], kv_[cur] + n_kv_ / 2, {}};
  if (s < P - 1) {
    h.hop = cp_.isendrecv(kv_[cur], kv_[1 - cur], n_kv_, next_, prev_, kTagKv);
  }
  return h;
}

void RingAttention::finish_hop(const KvHop& h) {
  cp_.wait_exchange(h.hop);
}

template <class Fn>
void RingAttention::for_visible_blocks(int src, double flops_per_pair, Fn&& fn) {
  for (int qc = 0; qc < nc_; ++qc)
    for (int kc = 0; kc < nc_; ++kc) {
      const int qs = split_.chunk_start(rank_, qc), ks = split_.chunk_start(src, kc);
      if (!visible(qs, ks)) continue;  // every key after every query: skip the block
      const auto t0 = Clock::now();
      fn(qc, kc, qs, ks);
      compute_s_ += seconds_since(t0);
      flops_ += flops_per_pair * D_ * H_ * B_ * double(visible_pairs(qs, ks));
      cp_.progress();  // let MPI move the ring transfer along between blocks
    }
}

void RingAttention::forward(float* out, float* lse, const float* q, const float* k, const float* v) {
  const int P = cp_.size();
  const size_t n_lse = size_t(B_) * H_ * m_, n_kv_chunk = size_t(B_) * m_ * Hkv_ * D_;
  be_.fill(out, 0.0f, size_t(nc_) * n_q_chunk_);
  be_.fill(lse, -std::numeric_limits<float>::infinity(), size_t(nc_) * n_lse);
  copy_kv(kv_[0], k, v);
  int cur = 0;
  for (int s = 0; s < P; ++s) {
    const KvHop h = start_hop(s, cur);
    for_visible_blocks(h.src, 4.0, [&](int qc, int kc, int qs, int ks) {
      be_.attention_fwd(o_part_, lse_part_, nullptr, q + qc * n_q_chunk_, h.k + kc * n_kv_chunk,
                        h.v + kc * n_kv_chunk, B_, m_, m_, H_, Hkv_, D_, qs, ks, true);
      be_.attention_merge(out + qc * n_q_chunk_, lse + qc * n_lse, o_part_, lse_part_, B_, m_, H_, D_);
    });
    finish_hop(h);
    cur = 1 - cur;
  }
}

void RingAttention::backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                             const float* lse, const float* q, const float* k, const float* v) {
  const int P = cp_.size();
  const size_t n_lse = size_t(B_) * H_ * m_, n_kv_chunk = size_t(B_) * m_ * Hkv_ * D_;
  copy_kv(kv_[0], k, v);
  float* acc = dkv_[0];       // this step's dK/dV contribution, then the running sum
  float* sending = dkv_[1];   // the running sum on its way to the next rank
  float* incoming = dkv_[2];  // the running sum of the block this rank holds next
  Comm::Exchange dkv_hop;  // the running sums' hop (none before the first step)
  bool dkv_started = false;
  int cur = 0;
  for (int s = 0; s < P; ++s) {
    const KvHop h = start_hop(s, cur);
    be_.fill(acc, 0.0f, n_kv_);
    for_visible_blocks(h.src, 10.0, [&](int qc, int kc, int qs, int ks) {
      const size_t oq = qc * n_q_chunk_, ok = kc * n_kv_chunk;
      be_.attention_bwd(dq + oq, acc + ok, acc + n_kv_ / 2 + ok, dout + oq, out + oq, lse + qc * n_lse,
                        nullptr, q + oq, h.k + ok, h.v + ok, B_, m_, m_, H_, Hkv_, D_, qs, ks, true);
    });
    // Add what the ranks before this one computed for the same keys.
    if (dkv_started) {
      cp_.wait_exchange(dkv_hop);
      be_.add(acc, acc, incoming, n_kv_);
    }
    std::swap(acc, sending);
    dkv_hop = cp_.isendrecv(sending, incoming, n_kv_, next_, prev_, kTagDkv);
    dkv_started = true;
    finish_hop(h);
    cur = 1 - cur;
  }
  // After P hops the accumulator of this rank's own keys is back.
  cp_.wait_exchange(dkv_hop);
  be_.add(dk, dk, incoming, n_kv_ / 2);
  be_.add(dv, dv, incoming + n_kv_ / 2, n_kv_ / 2);
}

}  // namespace pentad
