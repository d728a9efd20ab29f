// Tied input/output embeddings over pipeline stages: the first stage holds
// wte for the embedding lookup, the last stage a copy for the output
// projection. Their gradients are summed over the pair before the dp
// reduction (which then yields the same sum on both), so the two copies take
// the same optimizer steps and stay bitwise identical.
#pragma once

#include <memory>

#include "comm/comm.hpp"
#include "comm/topology.hpp"
#include "config/config.hpp"
#include "model/params.hpp"
#include "parallel/dp/data_parallel.hpp"

namespace pentad {

class TiedEmbedding {
 public:
  // Active on the first and the head's stage when the model ties its
  // embeddings and they are different stages (pp > 1, not zbv): builds the pair's Comm ("emb", over topo.pp_ends) and holds
  // back the dp reduction of the embedding's unit every step. Collective over
  // topo.pp_ends (nothing elsewhere).
  TiedEmbedding(const ModelConfig& mc, const Topology& topo, ParamStore& params, DataParallel& dpar,
                const CommFactory& make_comm);
  bool active() const { return emb_ != nullptr; }
  // After the step's last backward: wte's gradient (this stage's copy) summed
  // over the pair, then the held dp reduction released. Collective over the
  // pair; a no-op where inactive.
  void sum_grads();

 private:
  ParamStore& params_;
  DataParallel& dpar_;
  int unit_ = 0;  // the embedding's unit: 0 on the first stage, n_layers + 1 (the head) on the last
  std::unique_ptr<Comm> emb_;
};

}  // namespace pentad
