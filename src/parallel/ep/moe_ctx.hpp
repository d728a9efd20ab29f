// Internal to the MoE layer (src/parallel/ep/*.cpp, not for other folders):
// what one forward keeps for its backward (MoeCtx), and the scope timer the
// layer charges its comm / expert / routing seconds with. router.cpp,
// dispatch.cpp, experts.cpp and moe_layer.cpp all read and fill one MoeCtx.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "backend/backend.hpp"

namespace pentad {

// Adds the wall time of a scope to a counter (the backend is synchronised
// at the end, so device work is charged to the scope that queued it).
struct MoeTimer {
  MoeTimer(Backend& be, double& acc) : be_(be), acc_(acc), t0_(std::chrono::steady_clock::now()) {}
  ~MoeTimer() {
    be_.synchronize();
    acc_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  MoeTimer(const MoeTimer&) = delete;
  MoeTimer& operator=(const MoeTimer&) = delete;
  Backend& be_;
  double& acc_;
  std::chrono::steady_clock::time_point t0_;
};

// A host list on the backend, kept (activations) until the context's free_dev.
template <class T>
T* upload_kept(Backend& be, const std::vector<T>& v) {
  void* p = be.alloc_bytes(std::max<size_t>(v.size(), 1) * sizeof(T), Mem::activations);
  if (!v.empty()) be.from_host(p, v.data(), v.size() * sizeof(T));
  return static_cast<T*>(p);
}

struct MoeCtx {
  Backend* be = nullptr;
  int N = 0, M = 0, R = 0;          // tokens, dispatched rows (sent), received rows
  // Routing (router.cpp).
  std::vector<float> probs;         // (N, E) softmax of the router logits
  std::vector<float> lse;           // (N)
  std::vector<int> idx;             // (N, k) chosen experts
  std::vector<float> w;             // (N, k) combine weights
  std::vector<float> z;             // (N) sum of the chosen probabilities (renormalised weights), else 1
  std::vector<float> f;             // (n_seq, E) choice fraction per (whole) sequence
  std::vector<int> seq;             // (N) sequence of each token row
  // Dispatch (dispatch.cpp).
  std::vector<int> row;             // (N, k) dispatched row of a choice, -1 if dropped
  std::vector<int> row_token;       // (M) token of each dispatched row
  std::vector<int> row_choice;      // (M) t*k + j of each dispatched row
  std::vector<int> send_counts, recv_counts;  // per ep rank, elements (rows * C)
  std::vector<int> recv_seg;        // (ep, E_local) rows received per source and local expert
  // The lists above and the weights on the backend, for its row ops.
  int32_t* d_row_token = nullptr;   // (M)
  int32_t* d_row_choice = nullptr;  // (M)
  int32_t* d_row = nullptr;         // (N, k)
  float* d_w = nullptr;             // (N, k)
  float* yb = nullptr;              // (M, C) expert outputs back in dispatch order
  // Experts (experts.cpp), on the backend.
  float* xr = nullptr;              // (R, C) received rows
  float* h = nullptr;               // (R, F) GELU input / SwiGLU gate
  float* u = nullptr;               // (R, F) SwiGLU up
  float* a = nullptr;               // (R, F) activation
  float* y = nullptr;               // (R, C) expert outputs
  // The shared expert (experts.cpp), on the backend: over all N rows.
  float* sh = nullptr;              // (N, Fs) GELU input / gate
  float* su = nullptr;              // (N, Fs) up (gated unit)
  float* sa = nullptr;              // (N, Fs) activation
  float* sy = nullptr;              // (N, C) its output, kept when gated (the gate's gradient reads it)
  std::vector<float> sg;            // (N) gated: sigmoid(x . w) per row (host)
  float* d_sg = nullptr;            // (N) the same on the backend
  int32_t* d_iota = nullptr;        // (N) 0, 1, ..., N-1: the row lists of the gate's combine
  void free_dev() {
    for (float** p : {&xr, &h, &u, &a, &y, &yb, &d_w, &sh, &su, &sa, &sy, &d_sg}) {
      if (*p) be->free_bytes(*p);
      *p = nullptr;
    }
    for (int32_t** p : {&d_row_token, &d_row_choice, &d_row, &d_iota}) {
      if (*p) be->free_bytes(*p);
      *p = nullptr;
    }
  }
};

}  // namespace pentad
