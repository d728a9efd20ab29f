// Bucketed, overlapped gradient reduction and ZeRO-1/2/3 (see data_parallel.hpp).
#include "parallel/dp/data_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/error.hpp"
#include "model/memory_plan.hpp"
#include "parallel/tp/tensor_parallel.hpp"

namespace pentad {

using Clock = std::chrono::steady_clock;

DataParallel::DataParallel(ParamStore& params, Backend& be, Comm& dp, const TrainConfig& tc, int zero,
                           double bucket_mb)
    : params_(params), be_(be), dp_(dp), tc_(tc), zero_(zero) {
  N_ = params.numel();
  S_ = zero_shard_elems(N_, dp.size());
  own_lo_ = std::min(N_, size_t(dp.rank()) * S_);
  own_hi_ = std::min(N_, own_lo_ + S_);

  // The bucket layout is model/memory_plan.hpp's, which the planner evaluates too.
  const int U = params.n_units();
  std::vector<size_t> unit_elems(static_cast<size_t>(U));
  for (int u = 0; u < U; ++u) unit_elems[size_t(u)] = params.unit_numel(u);
  bucket_of_unit_.assign(size_t(U), -1);
  for (const UnitBucket& ub : grad_buckets(unit_elems, bucket_mb)) {
    Bucket b;
    b.unit_first = ub.unit_first;
    b.unit_last = ub.unit_last;
    b.units = ub.units;
    for (int u = b.unit_first; u <= b.unit_last; ++u)
      if (params.unit_numel(u) > 0) bucket_of_unit_[size_t(u)] = int(buckets_.size());
    b.lo = params.unit_offset(b.unit_first);
    b.hi = params.unit_offset(b.unit_last) + params.unit_numel(b.unit_last);
    buckets_.push_back(b);
  }
  pwin_.resize(size_t(U));
  held_.assign(size_t(U), false);
}

DataParallel::~DataParallel() {
  for (Bucket& b : buckets_)
    if (b.window) be_.free_bytes(b.window);
  for (ParamWindow& w : pwin_)
    if (w.buf) be_.free_bytes(w.buf);
  for (float* p : {p_shard_, g_shard_, rs_tmp_})
    if (p) be_.free_bytes(p);
}

void DataParallel::init(uint64_t seed) {
  const size_t capacity = S_ * size_t(dp_.size());
  params_.allocate(capacity, /*params_full=*/zero_ < 3, /*grads_full=*/zero_ < 2);
  if (zero_ < 3) {
    params_.init_range(seed, 0, N_, params_.params());
  } else {
    p_shard_ = be_.alloc(S_, Mem::params);
    params_.init_range(seed, own_lo_, own_hi_, p_shard_);
  }
  if (zero_ >= 2) g_shard_ = be_.alloc(S_, Mem::grads);
  if (zero_ >= 1) rs_tmp_ = be_.alloc(S_, Mem::comm);
  opt_ = zero_ == 0 ? std::make_unique<AdamW>(params_, be_, tc_, 0, N_)
                    : std::make_unique<AdamW>(params_, be_, tc_, own_lo_, own_hi_);
}

std::vector<int> DataParallel::counts_for(size_t lo, size_t hi) const {
  std::vector<int> c(size_t(dp_.size()));
  for (int q = 0; q < dp_.size(); ++q) {
    const size_t a = std::max(lo, std::min(N_, size_t(q) * S_));
    const size_t b = std::min(hi, std::min(N_, size_t(q + 1) * S_));
    c[size_t(q)] = b > a ? int(b - a) : 0;
  }
  return c;
}

void DataParallel::begin_step() {
  if (partner_) partner_->begin_step();
  params_.zero_grads();
  if (g_shard_) be_.fill(g_shard_, 0.0f, S_);
  n_reductions_ = 0;
  for (Bucket& b : buckets_) {
    b.done_seen = false;
    b.pending = b.units;
    b.pending_mb.clear();
  }
}

void DataParallel::begin_micro_batch(int mb, int n_mb) {
  if (partner_) partner_->begin_micro_batch(mb, n_mb);
  last_mb_ = mb == n_mb - 1;
  mb_ = mb;
  // Zero 0/1 count only the last micro-batch's grads_ready. ZeRO-2/3 reduce
  // a bucket's window each time all its units are ready for one micro-batch;
  // counted per micro-batch, since a pipeline interleaves them (a B and a W
  // apart, a bucket over two chunks of a rank). The window may then hold
  // other micro-batches' partial gradients as well: the reduction is linear,
  // and every gradient lands in exactly one reduced window (each unit's
  // gradients are written before its grads_ready).
  if (zero_ >= 2)
    for (Bucket& b : buckets_)
      if (b.pending_mb.empty()) b.pending_mb.assign(size_t(n_mb), b.units);
}

void DataParallel::hold_unit(int unit) { held_[size_t(unit)] = true; }

void DataParallel::release_held(int unit) {
  // The unit stays held for the next steps. Zero 0/1: this counts its
  // grads_ready now. ZeRO-2/3: the held unit never counted down, so its
  // bucket's window has gathered every micro-batch: reduce it once.
  Bucket& b = buckets_[size_t(bucket_of_unit_[size_t(unit)])];
  if (zero_ >= 2 || --b.pending == 0) launch(b);
}

// ---- hooks -----------------------------------------------------------------

void DataParallel::open_grad_window(Bucket& b) {
  if (b.window) return;
  b.window = be_.alloc(b.hi - b.lo, Mem::grads);  // zero-filled
  for (int u = b.unit_first; u <= b.unit_last; ++u)
    params_.set_unit_grad_base(u, b.window + (params_.unit_offset(u) - b.lo));
}

void DataParallel::start_gather(int unit) {
  ParamWindow& w = pwin_[size_t(unit)];
  if (w.buf || params_.unit_numel(unit) == 0) return;  // a unit without parameters here
  const size_t lo = params_.unit_offset(unit), hi = lo + params_.unit_numel(unit);
  w.buf = be_.alloc(hi - lo, Mem::params);
  const size_t a = std::clamp(own_lo_, lo, hi);
  w.request = dp_.iallgatherv(p_shard_ + (a - own_lo_), w.buf, counts_for(lo, hi));
}

void DataParallel::acquire(int unit, UnitUse use) {
  if (partner_) partner_->acquire(unit, use);
  poll();
  // A split backward's W (weight_grads) reads no parameters: nothing to gather.
  if (zero_ >= 3 && use != UnitUse::weight_grads && params_.unit_numel(unit) > 0) {
    start_gather(unit);
    ParamWindow& w = pwin_[size_t(unit)];
    if (w.request >= 0) {
      dp_.wait(w.request);
      w.request = -1;
    }
    params_.set_unit_param_base(unit, w.buf);
    // bf16: the unit's GEMMs read one copy of the gathered window (dropped
    // when release frees it).
    be_.keep_weight_copy(w.buf, params_.unit_numel(unit));
    // Prefetch the unit that runs next (forward: up; backward: down).
    const int last = params_.n_units() - 1;
    const bool backward = use == UnitUse::backward;
    const int next = backward ? (unit == last ? last - 1 : unit - 1) : unit + 1;
    if (next >= 0 && next <= last && next != unit) start_gather(next);
  }
  if (zero_ >= 2 && use != UnitUse::forward && bucket_of_unit_[size_t(unit)] >= 0)
    open_grad_window(buckets_[size_t(bucket_of_unit_[size_t(unit)])]);
}

void DataParallel::release(int unit, UnitUse use) {
  if (partner_) partner_->release(unit, use);
  poll();
  if (zero_ >= 3 && use != UnitUse::weight_grads) free_param_window(unit);
}

void DataParallel::free_param_window(int unit) {
  ParamWindow& w = pwin_[size_t(unit)];
  if (w.request >= 0) {
    dp_.wait(w.request);
    w.request = -1;
  }
  if (w.buf) be_.free_bytes(w.buf);
  w.buf = nullptr;
  params_.set_unit_param_base(unit, nullptr);
}

void DataParallel::check_no_param_windows() const {
  for (const ParamWindow& w : pwin_)
    if (w.buf)
      throw std::logic_error("DataParallel: a gathered ZeRO-3 unit outlived the step (it would keep the old values)");
}

void DataParallel::grads_ready(int unit) {
  if (partner_) partner_->grads_ready(unit);
  if (!held_[size_t(unit)] && bucket_of_unit_[size_t(unit)] >= 0) {
    Bucket& b = buckets_[size_t(bucket_of_unit_[size_t(unit)])];
    if (zero_ >= 2) {
      if (--b.pending_mb.at(size_t(mb_)) == 0) launch(b);
    } else if (last_mb_ && --b.pending == 0) {
      launch(b);
    }
  }
  poll();
}

void DataParallel::launch(Bucket& b) {
  b.t_launch = Clock::now();
  b.done_seen = false;
  ++n_reductions_;
  if (dp_.size() == 1 && zero_ < 2) return;  // nothing to reduce
  b.launched = true;
  const std::vector<int> counts = counts_for(b.lo, b.hi);
  const size_t a = std::clamp(own_lo_, b.lo, b.hi);  // my piece starts here
  if (zero_ == 0) {
    b.request = dp_.iallreduce_sum(params_.grads() + b.lo, b.hi - b.lo);
  } else if (zero_ == 1) {
    b.request = dp_.ireduce_scatter_sum(params_.grads() + b.lo, rs_tmp_ + (a - own_lo_), counts);
  } else {
    b.request = dp_.ireduce_scatter_sum(b.window, rs_tmp_ + (a - own_lo_), counts);
    in_flight_.push_back(int(&b - buckets_.data()));
    // Bound the gradient windows alive at once: finish the oldest.
    while (in_flight_.size() > 2) {
      complete(buckets_[size_t(in_flight_.front())]);
      in_flight_.erase(in_flight_.begin());
    }
  }
}

void DataParallel::complete(Bucket& b) {
  if (b.request >= 0) {
    dp_.wait(b.request);
    b.request = -1;
  }
  if (!b.done_seen) {
    b.t_done = Clock::now();
    b.done_seen = true;
  }
  if (!b.launched) return;
  b.launched = false;
  if (zero_ >= 2 && b.window) {
    // Accumulate this micro-batch's reduced piece into the owned gradient shard.
    const size_t a = std::clamp(own_lo_, b.lo, b.hi), e = std::clamp(own_hi_, b.lo, b.hi);
    if (e > a) be_.add(g_shard_ + (a - own_lo_), g_shard_ + (a - own_lo_), rs_tmp_ + (a - own_lo_), e - a);
    be_.free_bytes(b.window);
    b.window = nullptr;
    for (int u = b.unit_first; u <= b.unit_last; ++u) params_.set_unit_grad_base(u, nullptr);
  }
}

void DataParallel::poll() {
  dp_.progress();
  const auto now = Clock::now();
  for (Bucket& b : buckets_) {
    if (b.request >= 0 && !b.done_seen && dp_.test(b.request)) {
      b.t_done = now;
      b.done_seen = true;
    }
  }
}

void DataParallel::end_micro_batch() {
  if (partner_) partner_->end_micro_batch();
  if (zero_ < 2) return;
  for (int i : in_flight_) complete(buckets_[size_t(i)]);
  in_flight_.clear();
}

void DataParallel::finish_backward() {
  if (partner_) partner_->finish_backward();
  t_bwd_end_ = Clock::now();
  for (Bucket& b : buckets_) complete(b);
  in_flight_.clear();
  for (const Bucket& b : buckets_)
    if (b.window)
      throw std::logic_error("DataParallel: a gradient window was never reduced (a unit missed a grads_ready)");
  // (One rank: nothing was reduced, the full buffer already holds it.)
  if (zero_ == 1 && own_hi_ > own_lo_ && dp_.size() > 1) {
    // The reduced shard lands in the owned range of the full gradient buffer.
    be_.copy_bytes(params_.grads() + own_lo_, rs_tmp_, (own_hi_ - own_lo_) * sizeof(float));
  }
}

double DataParallel::hidden_fraction() const {
  double total = 0, hidden = 0;
  for (const Bucket& b : buckets_) {
    if (!b.done_seen) continue;
    const double t = std::chrono::duration<double>(b.t_done - b.t_launch).count();
    const double h = std::chrono::duration<double>(std::min(b.t_done, t_bwd_end_) - b.t_launch).count();
    total += t;
    hidden += std::max(0.0, h);
  }
  return total > 0 ? hidden / total : NAN;
}

// ---- optimizer --------------------------------------------------------------

const float* DataParallel::reduced_grad_shard() const {
  return zero_ >= 2 ? g_shard_ : params_.grads() + own_lo_;
}

double DataParallel::grad_sum_squares(Comm* tp) {
  // Tensor-parallel blocks count on every tp rank, replicated tensors on tp
  // rank 0 only (tp_sum_squares), then the shards (dp) and tp ranks are
  // summed (a stage's copy of a tied tensor not counted).
  const int tp_rank = tp ? tp->rank() : 0, tp_size = tp ? tp->size() : 1;
  double s = 0;
  if (zero_ == 0) {
    if (N_ > 0) s = tp_sum_squares(params_, be_, params_.grads(), 0, N_, tp_rank, tp_size);
  } else {
    if (own_hi_ > own_lo_)
      s = tp_sum_squares(params_, be_, reduced_grad_shard(), own_lo_, own_hi_, tp_rank, tp_size);
    dp_.allreduce_sum_host(&s, 1);
  }
  if (tp_size > 1) tp->allreduce_sum_host(&s, 1);
  return s;
}

double DataParallel::grad_norm(Comm* tp, Comm* pp, Comm* ep) {
  double s = grad_sum_squares(tp);
  if (partner_) {
    // Expert tensors are split over ep (every ep rank adds its own experts);
    // over tp as any tensor (split_over_tp: with expert tp their d_ff cuts
    // count on every tp rank, the rest on tp rank 0, summed over tp).
    double e = partner_->grad_sum_squares(tp);
    if (ep && ep->size() > 1) ep->allreduce_sum_host(&e, 1);
    s += e;
  }
  if (pp && pp->size() > 1) pp->allreduce_sum_host(&s, 1);
  return std::sqrt(s);
}

void DataParallel::optimizer_step(int step, float lr, float grad_scale) {
  if (partner_) partner_->optimizer_step(step, lr, grad_scale);
  if (zero_ == 0) {
    opt_->step(params_.params(), params_.grads(), step, lr, grad_scale);
    return;
  }
  // ZeRO-3: every gathered unit was used and freed (a prefetch left over
  // would keep the old values into the next step).
  if (zero_ >= 3) check_no_param_windows();
  float* p = zero_ >= 3 ? p_shard_ : params_.params() + own_lo_;
  if (own_hi_ > own_lo_) opt_->step(p, reduced_grad_shard(), step, lr, grad_scale);
  if (zero_ <= 2 && dp_.size() > 1) {
    // Every rank gets the updated shards back (in place).
    const std::vector<int> counts(size_t(dp_.size()), int(S_));
    dp_.wait(dp_.iallgatherv(nullptr, params_.params(), counts));
    be_.weights_written(params_.params(), size_t(dp_.size()) * S_ * sizeof(float));
  }
}

// ---- host access (dumps, checkpoints) -------------------------------------------

void DataParallel::gather_range(size_t lo, size_t hi, const float* shard, float* dst) {
  const size_t a = std::clamp(own_lo_, lo, hi);
  dp_.wait(dp_.iallgatherv(shard + (a - own_lo_), dst, counts_for(lo, hi)));
}

void DataParallel::get_param(int i, float* host) {
  const ParamInfo& t = params_.info(i);
  if (zero_ < 3) {
    be_.to_host(host, params_.params() + t.offset, t.numel() * sizeof(float));
    return;
  }
  float* tmp = be_.alloc(t.numel(), Mem::comm);
  gather_range(t.offset, t.offset + t.numel(), p_shard_, tmp);
  be_.to_host(host, tmp, t.numel() * sizeof(float));
  be_.free_bytes(tmp);
}

void DataParallel::set_param(int i, const float* host) {
  const ParamInfo& t = params_.info(i);
  if (zero_ < 3) {
    be_.from_host(params_.params() + t.offset, host, t.numel() * sizeof(float));
    return;
  }
  const size_t a = std::clamp(own_lo_, t.offset, t.offset + t.numel());
  const size_t e = std::clamp(own_hi_, t.offset, t.offset + t.numel());
  if (e > a) be_.from_host(p_shard_ + (a - own_lo_), host + (a - t.offset), (e - a) * sizeof(float));
}

void DataParallel::get_grad(int i, float* host) {
  const ParamInfo& t = params_.info(i);
  if (zero_ == 0) {
    be_.to_host(host, params_.grads() + t.offset, t.numel() * sizeof(float));
    return;
  }
  float* tmp = be_.alloc(t.numel(), Mem::comm);
  gather_range(t.offset, t.offset + t.numel(), reduced_grad_shard(), tmp);
  be_.to_host(host, tmp, t.numel() * sizeof(float));
  be_.free_bytes(tmp);
}

void DataParallel::get_moment(int which, int i, float* host) {
  const ParamInfo& t = params_.info(i);
  const float* m = which == 0 ? opt_->m() : opt_->v();
  if (zero_ == 0) {
    be_.to_host(host, m + t.offset, t.numel() * sizeof(float));
    return;
  }
  float* tmp = be_.alloc(t.numel(), Mem::comm);
  gather_range(t.offset, t.offset + t.numel(), m, tmp);
  be_.to_host(host, tmp, t.numel() * sizeof(float));
  be_.free_bytes(tmp);
}

void DataParallel::set_moment(int which, int i, const float* host) {
  const ParamInfo& t = params_.info(i);
  float* m = which == 0 ? opt_->m() : opt_->v();
  const size_t lo = zero_ == 0 ? 0 : own_lo_, hi = zero_ == 0 ? N_ : own_hi_;
  const size_t a = std::clamp(lo, t.offset, t.offset + t.numel());
  const size_t e = std::clamp(hi, t.offset, t.offset + t.numel());
  if (e > a) be_.from_host(m + (a - lo), host + (a - t.offset), (e - a) * sizeof(float));
}

}  // namespace pentad
