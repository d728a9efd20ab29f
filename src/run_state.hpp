// What a checkpoint holds for this run: every parameter and both AdamW
// moments as blocks of global tensors (whatever the layout), and the model
// signature that a loading run must match.
#pragma once

#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "config.hpp"
#include "data_parallel.hpp"
#include "params.hpp"
#include "topology.hpp"

namespace pentad {

// "gpt2 L=2 C=32 H=4 Hkv=4 F=128 V=256 T=16 tied=1"
std::string model_signature(const ModelConfig& m);

// Tensors "model/<name>", "optim/m/model/<name>", "optim/v/model/<name>".
// Exactly one rank writes each block: dp rank 0, and for a tensor every tp
// rank holds whole (replicated), tp rank 0 only.
std::vector<CkptTensor> checkpoint_tensors(ParamStore& params, DataParallel& dpar,
                                           const Topology& topo);

}  // namespace pentad
