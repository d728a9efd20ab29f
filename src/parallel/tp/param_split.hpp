// How each parameter of the dense model is split over tp: one table, by the
// tensor's name inside its unit, read by Model::build_params. Column-parallel
// matrices, their biases and the vocabulary matrices are split along dim 0
// (output features / vocabulary rows), row-parallel matrices along dim 1
// (input features); norms, positions and row-parallel biases are replicated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/params.hpp"

namespace pentad {

// One row of the table: `name` is the tensor's name after "model/" or
// "model/layers/<l>/"; dim is the split dimension, -1 for replicated.
struct TpParamSplit {
  const char* name;
  int dim;
};

// Every dense-model tensor (the MoE layer registers its own, replicated
// over tp). Throws std::logic_error for a name not in the table.
int tp_split_dim(const std::string& name);

// Tp rank `rank` of `size`'s block of the tensor prefix + name of global
// `shape` (unit 0, dense store: the caller sets unit). Pure.
ParamSpec tp_param_spec(const std::string& prefix, const std::string& name, std::vector<int64_t> shape, Init init,
                        float std, bool decay, int rank, int size);

// Registers tp rank `rank` of `size`'s part of the tensor prefix + name of
// global `shape`: part r of `size` equal parts of the table's split
// dimension, the whole tensor if replicated. Local.
ParamId add_tp_param(ParamStore& params, const std::string& prefix, const std::string& name,
                     std::vector<int64_t> shape, Init init, float std, bool decay, int rank, int size);

}  // namespace pentad
