// Builds the checkpoint's tensor list from the parameter store (see run_state.hpp).
#include "run_state.hpp"

namespace pentad {

std::string model_signature(const ModelConfig& m) {
  return std::string(m.family == Family::gpt2 ? "gpt2" : "llama") + " L=" + std::to_string(m.n_layers) +
         " C=" + std::to_string(m.d_model) + " H=" + std::to_string(m.n_heads) +
         " Hkv=" + std::to_string(m.n_kv_heads) + " F=" + std::to_string(m.d_ff) +
         " V=" + std::to_string(m.vocab_size) + " T=" + std::to_string(m.seq_len) +
         " tied=" + std::to_string(m.tied() ? 1 : 0);
}

std::vector<CkptTensor> checkpoint_tensors(ParamStore& params, DataParallel& dpar,
                                           const Topology& topo) {
  std::vector<CkptTensor> out;
  for (int i = 0; i < int(params.infos().size()); ++i) {
    const ParamInfo& p = params.info(i);
    const bool replicated_over_tp = p.local_shape == p.shape && topo.shape.tp > 1;
    const bool writer = topo.dp_rank() == 0 && topo.me.cp == 0 && (!replicated_over_tp || topo.me.tp == 0);
    auto make = [&](const std::string& prefix) {
      CkptTensor t;
      t.name = prefix + p.name;
      t.shape = p.shape;
      t.local_start = p.local_start;
      t.local_shape = p.local_shape;
      t.writer = writer;
      return t;
    };
    CkptTensor w = make("");
    w.get = [&dpar, i](float* h) { dpar.get_param(i, h); };
    w.set = [&dpar, i](const float* h) { dpar.set_param(i, h); };
    out.push_back(std::move(w));
    for (int which = 0; which < 2; ++which) {
      CkptTensor m = make(which == 0 ? "optim/m/" : "optim/v/");
      m.get = [&dpar, i, which](float* h) { dpar.get_moment(which, i, h); };
      m.set = [&dpar, i, which](const float* h) { dpar.set_moment(which, i, h); };
      out.push_back(std::move(m));
    }
  }
  return out;
}

}  // namespace pentad
