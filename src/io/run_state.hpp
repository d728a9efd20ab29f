// What a checkpoint holds for this run: every parameter and both AdamW
// moments as blocks of global tensors (whatever the layout), and the model
// signature that a loading run must match.
#pragma once

#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "config/config.hpp"
#include "parallel/dp/data_parallel.hpp"
#include "model/params.hpp"
#include "comm/topology.hpp"

namespace pentad {

// "gpt2 L=2 C=32 H=4 Hkv=4 F=128 V=256 T=16 tied=1"
std::string model_signature(const ModelConfig& m);

// One parameter tensor of the whole model and the pipeline stage that owns it.
struct GlobalTensor {
  std::string name;
  std::vector<int64_t> shape;
  int unit = 0;
  int stage = 0;
  bool expert = false;  // an MoE expert tensor: split over ep along dim 0 (expert store)
};

// Every parameter tensor of the model, in unit order, whichever stage holds
// it (a stage's copy of a tied tensor is listed once, under its owner).
// Collective over the pp group.
// experts: the MoE expert store (nullptr: none).
std::vector<GlobalTensor> global_tensors(const ParamStore& params, const ParamStore* experts, MPI_Comm pp);

// Tensors "model/<name>", "optim/m/model/<name>", "optim/v/model/<name>" for
// every tensor of `all` (the same list on every rank). Exactly one rank
// writes each block: dp rank 0 of the owning stage, and for a tensor every
// tp rank holds whole (replicated), tp rank 0 only. A rank without the
// tensor passes an empty block; a stage copy is read but not written.
// Expert tensors (experts/edpar) are blocks over ep along dim 0, written by
// the ranks with dp/ep index 0 (one per block).
std::vector<CkptTensor> checkpoint_tensors(ParamStore& params, DataParallel& dpar, ParamStore* experts,
                                           DataParallel* edpar, const Topology& topo,
                                           const std::vector<GlobalTensor>& all);

}  // namespace pentad
