// The tp split table of the dense model's parameters and the registration of
// this rank's block of each (part r of n of a dimension: [r*len/n, (r+1)*len/n)).
#include "parallel/tp/param_split.hpp"

#include <stdexcept>
#include <string>

#include "parallel/tp/tensor_parallel.hpp"

namespace pentad {

namespace {

constexpr TpParamSplit kSplits[] = {
    {"wte", 0},           // (V, C) vocab-parallel embedding
    {"wpe", -1},          // (seq_len, C)
    {"attn_norm/w", -1},  {"attn_norm/b", -1},
    {"attn/wq", 0},       {"attn/wk", 0, true}, {"attn/wv", 0, true},  // (heads*D, C) column-parallel
    {"attn/bq", 0},       {"attn/bk", 0, true}, {"attn/bv", 0, true},
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

const TpParamSplit& split_of(const std::string& name) {
  for (const TpParamSplit& s : kSplits)
    if (name == s.name) return s;
  throw std::logic_error("tp_split_dim: no tp split for parameter " + name);
}

}  // namespace

int tp_split_dim(const std::string& name) { return split_of(name).dim; }

KvPart kv_part(int rank, int size, int kv_heads) {
  if (kv_heads <= 0 || (kv_heads % size != 0 && size % kv_heads != 0))
    throw std::logic_error("kv_part: " + std::to_string(kv_heads) + " key/value heads on " + std::to_string(size) +
                           " tp ranks");
  if (kv_heads >= size) return {rank, size, 0};
  const int copies = size / kv_heads;
  return {rank / copies, kv_heads, rank % copies};
}

ParamSpec tp_param_spec(const std::string& prefix, const std::string& name, std::vector<int64_t> shape, Init init,
                        float std, bool decay, int rank, int size, int kv_heads) {
  const TpParamSplit& t = split_of(name);
  ParamSpec s;
  s.name = prefix + name;
  s.tp_dim = t.dim;
  s.local_start.assign(shape.size(), 0);
  s.local_shape = shape;
  if (s.tp_dim >= 0) {
    const KvPart kv = t.kv ? kv_part(rank, size, kv_heads) : KvPart{rank, size, 0};
    const Split split{shape[size_t(s.tp_dim)], kv.parts};
    s.local_shape[size_t(s.tp_dim)] = split.local();
    s.local_start[size_t(s.tp_dim)] = split.start(kv.part);
    s.tp_copy = kv.copy;
  }
  s.shape = std::move(shape);
  s.init = init;
  s.std = std;
  s.decay = decay;
  return s;
}

}  // namespace pentad
