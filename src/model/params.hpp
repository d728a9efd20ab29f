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

#include "backend/backend.hpp"

namespace pentad {

enum class Init { normal, zeros, ones };

// A typed handle to one tensor of a ParamStore (its index). The default
// handle names no tensor: the model's layers hold one for every optional
// tensor (a bias of GPT-2 only, a block on another pipeline stage).
struct ParamId {
  int index = -1;
  bool held() const { return index >= 0; }
};

struct ParamInfo {
  std::string name;                   // e.g. "model/layers/0/attn/wq"
  std::vector<int64_t> shape;         // global shape over the tp group (padded rows included)
  std::vector<int64_t> local_shape;   // this rank's slice
  std::vector<int64_t> local_start;   // where the slice starts, per dimension
  size_t offset = 0;                  // into the flat local buffers (elements)
  int unit = 0;                       // model unit: 0 embedding, 1..L blocks, L+1 head
  Init init = Init::normal;
  float std = 0.02f;
  bool decay = true;                  // AdamW weight decay (matrices, embeddings)
  // A copy of a tensor another pipeline stage owns (the last stage's wte
  // with tied embeddings): kept identical by summing the two stages'
  // gradients; counted once in the gradient norm and written once.
  bool stage_copy = false;
  int tp_dim = -1;                    // the dimension split over tp (ParamSpec::tp_dim); -1: none
  // Which of the tp ranks holding this same block this rank is (ParamSpec::tp_copy):
  // 0 but for the copies of a key/value head held by several tp ranks.
  int tp_copy = 0;
  // The tensor's own rows: shape[0] but for the vocabulary matrices, whose
  // rows [saved_rows, shape[0]) are padding (ModelConfig::pad_vocab_to):
  // zero, never trained, not in checkpoints. -1: shape[0].
  int64_t saved_rows = -1;

  size_t numel() const;          // local elements (padding included)
  // The tensor without its padding rows: what a checkpoint holds.
  std::vector<int64_t> saved_shape() const;
  int64_t global_numel() const;  // elements of saved_shape()
};

// Every tensor is padded to a multiple of 16 elements (64 bytes) inside the
// flat buffers; the planner sums the same padded sizes.
constexpr size_t padded_numel(size_t n) { return (n + 15) / 16 * 16; }

// One tensor as a rank registers it: the entries of model/param_list.hpp
// (the model's list, which Model::build_params registers and the planner
// sums) and of the MoE layer's moe_param_specs.
struct ParamSpec {
  std::string name;                  // e.g. "model/layers/0/attn/wq"
  std::vector<int64_t> shape;        // global shape
  std::vector<int64_t> local_start;  // this rank's block: where it starts, per dimension
  std::vector<int64_t> local_shape;  //   and its shape
  int tp_dim = -1;                   // the dimension split over tp; -1: replicated
  // 0, or with fewer key/value heads than tp ranks, which of the
  // tp/n_kv_heads ranks holding this head's block this one is (kv_part):
  // copy 0 counts the block in the gradient norm and writes it.
  int tp_copy = 0;
  int unit = 0;                      // 0 embedding, 1..L blocks, L+1 head
  Init init = Init::normal;
  float std = 0;
  bool decay = true;
  bool expert = false;               // the expert store (split over ep); else the dense one
  bool stage_copy = false;           // the last stage's copy of a tied wte
  int64_t saved_rows = -1;           // ParamInfo::saved_rows
  size_t local_numel() const;        // padding included
  std::vector<int64_t> saved_shape() const;  // as ParamInfo's: without the padding rows
  int64_t global_numel() const;              // elements of saved_shape()
};

class ParamStore {
 public:
  explicit ParamStore(Backend& backend) : backend_(backend) {}
  ~ParamStore();
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // Tensors are grouped in units (the embedding, each block, the head) that
  // are contiguous in the flat buffers; add() puts a tensor in the current unit.
  void begin_unit(int unit);
  int n_units() const { return int(unit_offset_.size()); }
  size_t unit_offset(int u) const { return unit_offset_[size_t(u)]; }
  size_t unit_numel(int u) const { return unit_numel_[size_t(u)]; }

  // Register a tensor held whole by this rank; returns its index.
  int add(const std::string& name, std::vector<int64_t> shape, Init init, float std, bool decay);
  // Register this rank's block [local_start, local_start + local_shape) of a
  // tensor of global `shape` (tensor-parallel slices).
  int add_block(const std::string& name, std::vector<int64_t> shape, std::vector<int64_t> local_start,
                std::vector<int64_t> local_shape, Init init, float std, bool decay);
  void mark_stage_copy(int i) { infos_[size_t(i)].stage_copy = true; }
  // Register s in the current unit (add_block, and mark_stage_copy when s
  // is one); returns its index.
  int add_spec(const ParamSpec& s);
  // Allocate full params and grads (zeroed) and draw the initial values.
  void allocate_and_init(uint64_t seed);
  // Allocate `capacity` (>= numel(), e.g. padded to a multiple of the dp
  // size) elements of params and/or grads; a buffer not allocated is left
  // null and its units must be pointed at windows (ZeRO-2/3).
  void allocate(size_t capacity, bool params_full, bool grads_full);
  // Draw the initial values of the flat range [lo, hi) into dst (backend
  // memory, hi - lo elements); padding between tensors is zero.
  void init_range(uint64_t seed, size_t lo, size_t hi, float* dst) const;

  const std::vector<ParamInfo>& infos() const { return infos_; }
  const ParamInfo& info(int i) const { return infos_[size_t(i)]; }
  int find(const std::string& name) const;  // -1 if absent
  size_t numel() const { return numel_; }   // local elements
  int64_t global_numel() const;             // parameters of the whole model

  float* params() { return params_; }
  float* grads() { return grads_; }
  // Where a tensor's values / gradient live now. By default inside the flat
  // buffers; ZeRO-3 (parameters) and ZeRO-2/3 (gradients) point a unit at a
  // temporary gathered buffer while it is in use (set_unit_*_base).
  float* param(int i) { return i < 0 ? nullptr : address(param_base_, i); }
  float* grad(int i) { return i < 0 ? nullptr : address(grad_base_, i); }
  float* param(ParamId p) { return param(p.index); }  // nullptr where not held
  float* grad(ParamId p) { return grad(p.index); }
  void set_unit_param_base(int u, float* base) { param_base_[size_t(u)] = base; }
  void set_unit_grad_base(int u, float* base) { grad_base_[size_t(u)] = base; }
  void reset_unit_bases();
  void zero_grads();

 private:
  float* address(const std::vector<float*>& base, int i) const {
    const ParamInfo& p = infos_[size_t(i)];
    return base[size_t(p.unit)] + (p.offset - unit_offset_[size_t(p.unit)]);
  }

  Backend& backend_;
  std::vector<ParamInfo> infos_;
  std::vector<size_t> unit_offset_, unit_numel_;
  std::vector<float*> param_base_, grad_base_;
  int cur_unit_ = 0;
  size_t numel_ = 0;
  float* params_ = nullptr;
  float* grads_ = nullptr;
};

}  // namespace pentad
