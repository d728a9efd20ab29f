// How each parameter of the dense model is split over tp: one table, by the
// tensor's name inside its unit, read by Model::build_params. Column-parallel
// matrices, their biases and the vocabulary matrices are split along dim 0
// (output features / vocabulary rows), row-parallel matrices along dim 1
// (input features); norms, positions and row-parallel biases are replicated.
// The key/value matrices and biases are cut by key/value head: with fewer
// heads than tp ranks, each head is held whole by tp/n_kv_heads ranks (its
// copies; ParamSpec::tp_copy numbers them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/params.hpp"

namespace pentad {

// One row of the table: `name` is the tensor's name after "model/" or
// "model/layers/<l>/"; dim is the split dimension, -1 for replicated; kv:
// cut by key/value head (dim 0 holds n_kv_heads heads).
struct TpParamSplit {
  const char* name;
  int dim;
  bool kv = false;
};

// Which block of a kv tensor tp rank `rank` of `size` holds: part `part`
// of `parts` equal parts of its heads, and which copy of that part it is
// (0 .. size/parts - 1). tp divides kv_heads: the heads split over tp, one
// copy each; kv_heads divides tp: one head per part, tp/kv_heads copies.
struct KvPart {
  int part = 0, parts = 1, copy = 0;
};
KvPart kv_part(int rank, int size, int kv_heads);

// Every dense-model tensor (the MoE layer registers its own, replicated
// over tp). Throws std::logic_error for a name not in the table.
int tp_split_dim(const std::string& name);

// Tp rank `rank` of `size`'s block of the tensor prefix + name of global
// `shape` (unit 0, dense store: the caller sets unit); kv_heads: the
// model's key/value heads (the kv tensors' cut, kv_part). Pure.
ParamSpec tp_param_spec(const std::string& prefix, const std::string& name, std::vector<int64_t> shape, Init init,
                        float std, bool decay, int rank, int size, int kv_heads);


}  // namespace pentad
