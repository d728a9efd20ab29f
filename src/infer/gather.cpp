// Gathering the run's weights on the root (see gather.hpp).
#include "infer/gather.hpp"

#include <functional>
#include <numeric>

#include "comm/host.hpp"
#include "parallel/tp/tensor_parallel.hpp"

namespace pentad {
namespace {
constexpr int kTagSampleTensor = 9;  // one tensor from a later stage to the root, over pp
}  // namespace

ModelWeights gather_model_weights(const ModelConfig& cfg, const Topology& topo, const DumpSources& src) {
  ModelWeights w;
  w.cfg = cfg;
  w.source = "the training run";
  const bool root = topo.is_root();
  // A later stage's holder with the root's dp, tp and cp coordinates sends.
  const bool sender = topo.dp_rank() == 0 && topo.me.tp == 0 && topo.me.cp == 0;
  std::vector<float> local, global;
  for (const GlobalTensor& g : *src.tensors) {
    global.resize(size_t(std::accumulate(g.shape.begin(), g.shape.end(), int64_t(1), std::multiplies<>())));
    if (topo.me.pp == g.stage) {
      ParamStore& store = g.expert ? *src.experts : *src.params;
      DataParallel& dp = g.expert ? *src.edpar : *src.dpar;
      const int i = store.find(g.name);
      const ParamInfo& p = store.info(i);
      local.resize(p.numel());
      dp.get_param(i, local.data());                                // collective over dp (ZeRO-3)
      gather_global(holder_groups(p, g.expert, src.tp, src.ep), p, local.data(), global);  // collective over tp / ep
      if (g.stage != 0 && sender) host::send(topo.pp, global.data(), int(global.size()), 0, kTagSampleTensor);
    } else if (root) {
      host::recv(topo.pp, global.data(), int(global.size()), g.stage, kTagSampleTensor);
    }
    if (root) w.tensors[g.name] = HostTensor{g.shape, global};
  }
  return w;
}

}  // namespace pentad
