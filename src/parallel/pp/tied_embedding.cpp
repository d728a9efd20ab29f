// The tied embedding pair over the first and last pipeline stage (see
// tied_embedding.hpp).
#include "parallel/pp/tied_embedding.hpp"

namespace pentad {

TiedEmbedding::TiedEmbedding(const ModelConfig& mc, const Topology& topo, ParamStore& params,
                             DataParallel& dpar, const CommFactory& make_comm)
    : params_(params), dpar_(dpar), unit_(topo.is_first_stage() ? 0 : mc.n_layers + 1) {
  const bool in_pair = mc.tied() && topo.ends_apart() && (topo.is_first_stage() || topo.holds_head());
  if (!in_pair) return;
  emb_ = make_comm(topo.pp_ends, "emb");
  dpar_.hold_unit(unit_);
}

void TiedEmbedding::sum_grads() {
  if (!emb_) return;
  const int i = params_.find("model/wte");
  emb_->allreduce_sum(params_.grad(i), params_.info(i).numel());  // (V/tp, C) on both stages
  dpar_.release_held(unit_);
}

}  // namespace pentad
