// Parameters and gradients live in two flat buffers (one allocation each), so
// that reductions, clipping and the optimizer run over a few large ranges.
// Each tensor is described by its global name and shape and by the slice this
// rank holds; the initial values are drawn by a counter-based RNG keyed on
// (seed, name, global element index), so any shard gets the values the full
// tensor would have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend.hpp"

namespace pentad {

enum class Init { normal, zeros, ones };

struct ParamInfo {
  std::string name;                   // e.g. "model/layers/0/attn/wq"
  std::vector<int64_t> shape;         // global shape
  std::vector<int64_t> local_shape;   // this rank's slice
  std::vector<int64_t> local_start;   // where the slice starts, per dimension
  size_t offset = 0;                  // into the flat local buffers (elements)
  Init init = Init::normal;
  float std = 0.02f;
  bool decay = true;                  // AdamW weight decay (matrices, embeddings)

  size_t numel() const;          // local elements
  int64_t global_numel() const;
};

class ParamStore {
 public:
  explicit ParamStore(Backend& backend) : backend_(backend) {}
  ~ParamStore();
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // Register a tensor held whole by this rank; returns its index.
  int add(const std::string& name, std::vector<int64_t> shape, Init init, float std, bool decay);
  // Allocate params and grads (zeroed) and draw the initial values.
  void allocate_and_init(uint64_t seed);

  const std::vector<ParamInfo>& infos() const { return infos_; }
  const ParamInfo& info(int i) const { return infos_[size_t(i)]; }
  int find(const std::string& name) const;  // -1 if absent
  size_t numel() const { return numel_; }   // local elements
  int64_t global_numel() const;             // parameters of the whole model

  float* params() { return params_; }
  float* grads() { return grads_; }
  float* param(int i) { return i < 0 ? nullptr : params_ + infos_[size_t(i)].offset; }
  float* grad(int i) { return i < 0 ? nullptr : grads_ + infos_[size_t(i)].offset; }
  void zero_grads();

 private:
  Backend& backend_;
  std::vector<ParamInfo> infos_;
  size_t numel_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
};

}  // namespace pentad
