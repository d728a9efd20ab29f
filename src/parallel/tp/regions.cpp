// The tp region boundaries as Comm collectives, the staged sum of the
// sequence-parallel norm gradients and of the copied key/value heads' dK, dV.
#include "parallel/tp/regions.hpp"

#include "comm/comm.hpp"
#include "parallel/tp/param_split.hpp"

namespace pentad {

TpRegions::TpRegions(Comm* tp, bool sp, int n_rows, int width)
    : comm_(tp), n_rows_(n_rows), n_rows_local_(n_rows), width_(width) {
  if (tp) {
    size_ = tp->size();
    rank_ = tp->rank();
  }
  sp_ = sp && size_ > 1;
  if (sp_) n_rows_local_ = n_rows / size_;
}

const float* TpRegions::all_rows(const float* local, float* full) const {
  if (!sp_) return local;
  comm_->allgather(local, full, size_t(n_rows_local_) * width_);
  return full;
}

const float* TpRegions::sum_rows(float* partial, float* local) const {
  if (size_ == 1) return partial;
  if (sp_) {
    comm_->reduce_scatter_sum(partial, local, size_t(n_rows_local_) * width_);
    return local;
  }
  comm_->allreduce_sum(partial, size_t(n_rows_) * width_);
  return partial;
}

SpNormGrads::SpNormGrads(const TpRegions& tp, ParamStore& params, Backend& be, float* stage, int width, int slots,
                         bool heads)
    : tp_(&tp), params_(&params), be_(&be), stage_(stage), width_(width), slots_(slots), heads_(heads) {}

float* SpNormGrads::grad(ParamId p, int slot) const {
  return partial() ? stage_ + size_t(slot) * width_ : params_->grad(p);
}

void SpNormGrads::sync(std::initializer_list<ParamId> ids) const {
  if (!partial()) return;
  tp_->comm()->allreduce_sum(stage_, ids.size() * size_t(width_));
  size_t slot = 0;
  for (ParamId p : ids) {
    if (p.held()) be_->add(params_->grad(p), params_->grad(p), stage_ + slot * width_, size_t(width_));
    ++slot;
  }
  be_->fill(stage_, 0.0f, size_t(slots_) * size_t(width_));
}

KvCopies::KvCopies(const TpRegions& tp, Comm* group, int kv_heads, size_t n) : n_(n) {
  if (tp.size() <= kv_heads) return;
  copies_ = tp.size() / kv_heads;
  group_ = kv_heads == 1 ? tp.comm() : group;
  if (group_ == nullptr || group_->size() != copies_)
    throw std::invalid_argument("KvCopies: " + std::to_string(kv_heads) + " key/value heads on " +
                                std::to_string(tp.size()) + " tp ranks need the group of each head's " +
                                std::to_string(copies_) + " copies");
}

void KvCopies::sum(float* dkv) const {
  if (copies_ > 1) group_->allreduce_sum(dkv, 2 * n_);
}

}  // namespace pentad
