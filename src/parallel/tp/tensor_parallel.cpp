// Tensor-parallel helpers: vocab-parallel loss, global views of split
// parameters (host collectives), the layout-independent gradient norm.
#include "parallel/tp/tensor_parallel.hpp"

#include <algorithm>
#include <climits>

#include "comm/comm.hpp"
#include "comm/host.hpp"
#include "core/error.hpp"

namespace pentad {

bool is_tp_split(const ParamInfo& p) { return p.local_shape != p.shape; }

void vocab_parallel_xent(Backend& be, Comm* tp, float* dlogits, float* losses, const float* logits,
                         float* rowmax, float* sumexp_target, const int32_t* targets,
                         float grad_scale, int n, int V_local, int ld, int vocab_start) {
  const bool split = tp && tp->size() > 1;
  float* sumexp = sumexp_target;
  float* target_logit = sumexp_target + n;
  be.xent_rowmax(rowmax, logits, n, V_local, ld);
  if (split) tp->allreduce_max(rowmax, size_t(n));  // global row maxima
  be.xent_sumexp(sumexp, target_logit, logits, rowmax, targets, n, V_local, ld, vocab_start);
  // Exactly one rank holds each target's logit, the others contribute 0.
  if (split) tp->allreduce_sum(sumexp_target, 2 * size_t(n));
  be.xent_bwd(dlogits, losses, logits, rowmax, sumexp, target_logit, targets, grad_scale, n, V_local, ld,
              vocab_start);
}

bool split_over_tp(const ParamInfo& p) {
  return p.tp_dim >= 0 && p.local_shape[size_t(p.tp_dim)] != p.shape[size_t(p.tp_dim)];
}

void gather_global(Comm* tp, const ParamInfo& p, const float* local, std::vector<float>& global) {
  gather_global(std::vector<Comm*>{tp}, p, local, global);
}

void gather_global(const std::vector<Comm*>& groups, const ParamInfo& p, const float* local,
                   std::vector<float>& global) {
  const size_t n_local = p.numel();
  if (!is_tp_split(p)) {
    global.assign(local, local + n_local);
    global.resize(size_t(p.global_numel()));  // vocabulary padding rows dropped
    return;
  }
  const size_t nd = p.shape.size();
  // Every block and its origin (all blocks have this rank's local shape),
  // gathered over each group in turn.
  std::vector<int64_t> starts(p.local_start);
  std::vector<float> all(local, local + n_local);
  if (std::none_of(groups.begin(), groups.end(), [](Comm* g) { return g && g->size() > 1; }))
    PENTAD_FATAL("gather_global: " + p.name + " is split but there is no group to gather it over");
  for (Comm* g : groups) {
    if (!g || g->size() == 1) continue;
    if (all.size() > size_t(INT_MAX)) PENTAD_FATAL("gather_global: " + p.name + " blocks too large for MPI");
    const int n_ranks = g->size();
    std::vector<int64_t> s(starts.size() * size_t(n_ranks));
    host::allgather(g->mpi(), starts.data(), int(starts.size()), s.data());
    std::vector<float> a(all.size() * size_t(n_ranks));
    host::allgather(g->mpi(), all.data(), int(all.size()), a.data());
    starts = std::move(s);
    all = std::move(a);
  }
  int64_t n_global = 1;  // the padded shape; its padding rows are dropped below
  for (int64_t d : p.shape) n_global *= d;
  global.assign(size_t(n_global), 0.0f);
  for (size_t q = 0; q < all.size() / n_local; ++q) {
    const int64_t* start = starts.data() + q * nd;
    const float* blk = all.data() + q * n_local;
    for (size_t e = 0; e < n_local; ++e) {
      // Local row-major index -> global row-major index.
      size_t rest = e, gi = 0, stride = 1;
      for (size_t d = nd; d-- > 0;) {
        const size_t li = rest % size_t(p.local_shape[d]);
        rest /= size_t(p.local_shape[d]);
        gi += (size_t(start[d]) + li) * stride;
        stride *= size_t(p.shape[d]);
      }
      global[gi] = blk[e];
    }
  }
  global.resize(size_t(p.global_numel()));  // padding rows: a row-major suffix
}

std::vector<Comm*> holder_groups(const ParamInfo& p, bool expert, Comm* tp, Comm* ep) {
  if (!expert) return {tp};
  if (split_over_tp(p)) return {ep, tp};
  return {ep};
}

double tp_sum_squares(const ParamStore& params, Backend& be, const float* flat, size_t lo, size_t hi,
                      int tp_rank, int tp_size) {
  const bool copies = std::any_of(params.infos().begin(), params.infos().end(),
                                  [](const ParamInfo& p) { return p.stage_copy; });
  if (tp_size == 1 && !copies) return hi > lo ? be.sum_squares(flat, hi - lo) : 0.0;
  double s = 0;
  for (const ParamInfo& p : params.infos()) {
    if (p.stage_copy || p.tp_copy != 0 || (!split_over_tp(p) && tp_rank != 0)) continue;
    const size_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.numel());
    if (a < b) s += be.sum_squares(flat + (a - lo), b - a);
  }
  return s;
}

}  // namespace pentad
