// The global weights of a training run, on the root: every parameter tensor
// read from the rank blocks that hold it (ZeRO-3 gathers its shards over
// dp), assembled over tp (or over ep for the MoE experts) and sent from a
// later pipeline stage to the root, as the debug dump assembles them
// (io/dump.cpp). What `train.sample_every` builds its engine from.
#pragma once

#include "comm/topology.hpp"
#include "config/config.hpp"
#include "infer/weights.hpp"
#include "io/dump.hpp"

namespace pentad {

// On the root: every tensor of the model (src.tensors) as a global host
// tensor; elsewhere an empty tensor map. Collective over the job.
ModelWeights gather_model_weights(const ModelConfig& cfg, const Topology& topo, const DumpSources& src);

}  // namespace pentad
