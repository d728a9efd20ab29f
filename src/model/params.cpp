// Flat parameter/gradient storage and the layout-independent initialisation.
#include "model/params.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/rng.hpp"

namespace pentad {

namespace {

// The global shape without the vocabulary padding rows (saved_rows < 0: none).
std::vector<int64_t> without_padding(std::vector<int64_t> shape, int64_t saved_rows) {
  if (saved_rows >= 0 && !shape.empty()) shape[0] = saved_rows;
  return shape;
}

template <class T>
T product(const std::vector<int64_t>& dims) {
  T n = 1;
  for (int64_t d : dims) n *= T(d);
  return n;
}

}  // namespace

size_t ParamInfo::numel() const { return product<size_t>(local_shape); }
std::vector<int64_t> ParamInfo::saved_shape() const { return without_padding(shape, saved_rows); }
int64_t ParamInfo::global_numel() const { return product<int64_t>(saved_shape()); }

size_t ParamSpec::local_numel() const { return product<size_t>(local_shape); }
std::vector<int64_t> ParamSpec::saved_shape() const { return without_padding(shape, saved_rows); }
int64_t ParamSpec::global_numel() const { return product<int64_t>(saved_shape()); }

ParamStore::~ParamStore() {
  if (params_) backend_.free_bytes(params_);
  if (grads_) backend_.free_bytes(grads_);
}

void ParamStore::begin_unit(int unit) {
  if (unit != int(unit_offset_.size())) throw std::logic_error("ParamStore: units must be added in order");
  cur_unit_ = unit;
  unit_offset_.push_back(numel_);
  unit_numel_.push_back(0);
}

int ParamStore::add(const std::string& name, std::vector<int64_t> shape, Init init, float std,
                    bool decay) {
  std::vector<int64_t> start(shape.size(), 0);
  return add_block(name, shape, start, shape, init, std, decay);
}

int ParamStore::add_block(const std::string& name, std::vector<int64_t> shape,
                          std::vector<int64_t> local_start, std::vector<int64_t> local_shape,
                          Init init, float std, bool decay) {
  if (params_) throw std::logic_error("ParamStore::add after allocation");
  if (unit_offset_.empty()) begin_unit(0);
  ParamInfo p;
  p.name = name;
  p.shape = std::move(shape);
  p.local_shape = std::move(local_shape);
  p.local_start = std::move(local_start);
  p.unit = cur_unit_;
  p.offset = numel_;
  p.init = init;
  p.std = std;
  p.decay = decay;
  // Keep every tensor 16-element aligned inside the flat buffer (64 bytes).
  const size_t padded = padded_numel(p.numel());
  numel_ += padded;
  unit_numel_.back() += padded;
  infos_.push_back(std::move(p));
  return int(infos_.size()) - 1;
}

int ParamStore::add_spec(const ParamSpec& s) {
  const int i = add_block(s.name, s.shape, s.local_start, s.local_shape, s.init, s.std, s.decay);
  if (s.stage_copy) mark_stage_copy(i);
  infos_[size_t(i)].saved_rows = s.saved_rows;
  infos_[size_t(i)].tp_dim = s.tp_dim;
  infos_[size_t(i)].tp_copy = s.tp_copy;
  return i;
}

int ParamStore::find(const std::string& name) const {
  for (size_t i = 0; i < infos_.size(); ++i)
    if (infos_[i].name == name) return int(i);
  return -1;
}

int64_t ParamStore::global_numel() const {
  int64_t n = 0;
  for (const auto& p : infos_) n += p.global_numel();
  return n;
}

void ParamStore::reset_unit_bases() {
  param_base_.assign(unit_offset_.size(), nullptr);
  grad_base_.assign(unit_offset_.size(), nullptr);
  for (size_t u = 0; u < unit_offset_.size(); ++u) {
    if (params_) param_base_[u] = params_ + unit_offset_[u];
    if (grads_) grad_base_[u] = grads_ + unit_offset_[u];
  }
}

void ParamStore::allocate(size_t capacity, bool params_full, bool grads_full) {
  if (capacity < numel_) throw std::logic_error("ParamStore::allocate: capacity below numel");
  if (params_full) {
    params_ = backend_.alloc(capacity, Mem::params);
    backend_.keep_weight_copy(params_, capacity);  // train.dtype = bf16: the GEMMs' copy
  }
  if (grads_full) grads_ = backend_.alloc(capacity, Mem::grads);
  reset_unit_bases();
}

void ParamStore::allocate_and_init(uint64_t seed) {
  allocate(numel_, true, true);
  init_range(seed, 0, numel_, params_);
}

void ParamStore::init_range(uint64_t seed, size_t lo, size_t hi, float* dst) const {
  std::vector<float> host;
  for (const auto& p : infos_) {
    // Intersection of this tensor's flat range with [lo, hi).
    const size_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.numel());
    if (a >= b) continue;
    host.assign(b - a, 0.0f);
    if (p.init == Init::ones) {
      host.assign(b - a, 1.0f);
    } else if (p.init == Init::normal) {
      const CounterRng rng{seed, fnv1a64(p.name)};
      // Local element -> global flat index (row-major), so a block draws the
      // same numbers as the full tensor.
      // Padding rows (past saved_rows, a row-major suffix) stay zero.
      const int nd = int(p.shape.size());
      const int64_t first = int64_t(a - p.offset), n = int64_t(b - a), saved = p.global_numel();
#pragma omp parallel for schedule(static)
      for (int64_t e = 0; e < n; ++e) {
        int64_t rest = first + e, g = 0, stride = 1;
        for (int d = nd - 1; d >= 0; --d) {
          const int64_t i = rest % p.local_shape[size_t(d)];
          rest /= p.local_shape[size_t(d)];
          g += (p.local_start[size_t(d)] + i) * stride;
          stride *= p.shape[size_t(d)];
        }
        if (g < saved) host[size_t(e)] = float(p.std * rng.normal(uint64_t(g)));
      }
    }
    backend_.from_host(dst + (a - lo), host.data(), host.size() * sizeof(float));
  }
}

void ParamStore::zero_grads() {
  if (grads_) backend_.fill(grads_, 0.0f, numel_);
}

}  // namespace pentad
