// Flat parameter/gradient storage and the layout-independent initialisation.
#include "params.hpp"

#include <stdexcept>

#include "rng.hpp"

namespace pentad {

size_t ParamInfo::numel() const {
  size_t n = 1;
  for (int64_t d : local_shape) n *= size_t(d);
  return n;
}

int64_t ParamInfo::global_numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ParamStore::~ParamStore() {
  if (params_) backend_.free_bytes(params_);
  if (grads_) backend_.free_bytes(grads_);
}

int ParamStore::add(const std::string& name, std::vector<int64_t> shape, Init init, float std,
                    bool decay) {
  if (params_) throw std::logic_error("ParamStore::add after allocation");
  ParamInfo p;
  p.name = name;
  p.shape = shape;
  p.local_shape = shape;
  p.local_start.assign(shape.size(), 0);
  p.offset = numel_;
  p.init = init;
  p.std = std;
  p.decay = decay;
  // Keep every tensor 16-element aligned inside the flat buffer (64 bytes).
  numel_ += (p.numel() + 15) / 16 * 16;
  infos_.push_back(std::move(p));
  return int(infos_.size()) - 1;
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

void ParamStore::allocate_and_init(uint64_t seed) {
  params_ = backend_.alloc(numel_, Mem::params);
  grads_ = backend_.alloc(numel_, Mem::grads);
  std::vector<float> host;
  for (const auto& p : infos_) {
    host.assign(p.numel(), 0.0f);
    if (p.init == Init::ones) {
      host.assign(p.numel(), 1.0f);
    } else if (p.init == Init::normal) {
      const CounterRng rng{seed, fnv1a64(p.name)};
      // Local element -> global flat index (row-major), so a slice draws the
      // same numbers as the full tensor.
      const size_t nd = p.shape.size();
      std::vector<int64_t> idx(nd, 0);
      for (size_t e = 0; e < host.size(); ++e) {
        int64_t g = 0;
        for (size_t d = 0; d < nd; ++d) g = g * p.shape[d] + (p.local_start[d] + idx[d]);
        host[e] = float(p.std * rng.normal(uint64_t(g)));
        for (size_t d = nd; d-- > 0;) {
          if (++idx[d] < p.local_shape[d]) break;
          idx[d] = 0;
        }
      }
    }
    backend_.from_host(params_ + p.offset, host.data(), host.size() * sizeof(float));
  }
}

void ParamStore::zero_grads() { backend_.fill(grads_, 0.0f, numel_); }

}  // namespace pentad
