// The tp split table of the dense model's parameters and the registration of
// this rank's block of each (part r of n of a dimension: [r*len/n, (r+1)*len/n)).
#include "parallel/tp/param_split.hpp"

#include <stdexcept>

#include "parallel/tp/tensor_parallel.hpp"

namespace pentad {

namespace {

constexpr TpParamSplit kSplits[] = {
    {"wte", 0},           // (V, C) vocab-parallel embedding
    {"wpe", -1},          // (seq_len, C)
    {"attn_norm/w", -1},  {"attn_norm/b", -1},
    {"attn/wq", 0},       {"attn/wk", 0},       {"attn/wv", 0},  // (heads*D, C) column-parallel
    {"attn/bq", 0},       {"attn/bk", 0},       {"attn/bv", 0},
    {"attn/q_norm", -1},  {"attn/k_norm", -1},  // (D) one weight for every head: replicated
    {"attn/wo", 1},       // (C, heads*D) row-parallel
    {"attn/bo", -1},
    {"mlp_norm/w", -1},   {"mlp_norm/b", -1},
    {"mlp/w_gate", 0},    {"mlp/w_up", 0},      {"mlp/b_up", 0},  // (d_ff, C) column-parallel
    {"mlp/w_down", 1},    // (C, d_ff) row-parallel
    {"mlp/b_down", -1},
    {"final_norm/w", -1}, {"final_norm/b", -1},
    {"lm_head", 0},       // (V, C) vocab-parallel head
};

}  // namespace

int tp_split_dim(const std::string& name) {
  for (const TpParamSplit& s : kSplits)
    if (name == s.name) return s.dim;
  throw std::logic_error("tp_split_dim: no tp split for parameter " + name);
}

ParamSpec tp_param_spec(const std::string& prefix, const std::string& name, std::vector<int64_t> shape, Init init,
                        float std, bool decay, int rank, int size) {
  ParamSpec s;
  s.name = prefix + name;
  s.tp_dim = tp_split_dim(name);
  s.local_start.assign(shape.size(), 0);
  s.local_shape = shape;
  if (s.tp_dim >= 0) {
    const Split split{shape[size_t(s.tp_dim)], size};
    s.local_shape[size_t(s.tp_dim)] = split.local();
    s.local_start[size_t(s.tp_dim)] = split.start(rank);
  }
  s.shape = std::move(shape);
  s.init = init;
  s.std = std;
  s.decay = decay;
  return s;
}

ParamId add_tp_param(ParamStore& params, const std::string& prefix, const std::string& name,
                     std::vector<int64_t> shape, Init init, float std, bool decay, int rank, int size) {
  return ParamId{params.add_spec(tp_param_spec(prefix, name, std::move(shape), init, std, decay, rank, size))};
}

}  // namespace pentad
