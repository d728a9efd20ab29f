// When a step's loss or gradient norm is not finite: find what went
// non-finite first, in the order the step computes it (the loss; then the
// gradients, last unit first as backward reaches them; then the norm), and
// on which ranks, for the one error message every rank throws.
#pragma once

#include <string>

#include "comm/topology.hpp"
#include "model/params.hpp"
#include "parallel/dp/data_parallel.hpp"

namespace pentad {

struct NonFiniteStep {
  int step = 0;
  double loss = 0, grad_norm = 0;  // the step's global values
  double local_loss_sum = 0;       // this rank's loss sum before the reduction (0 off the last stage)
  ParamStore* dense = nullptr;     // this rank's parameters, reduced over dp x cp by dense_dp
  DataParallel* dense_dp = nullptr;
  ParamStore* experts = nullptr;   // the MoE experts and their DataParallel (nullptr: none here)
  DataParallel* experts_dp = nullptr;
};

// The message: the step, both values, the first non-finite quantity and the
// ranks that hold it. Only called when the step is not finite (every rank
// agrees: both values are global). Collective over the job (the gradient
// scan copies every gradient to the host: slow, but this is the way out).
std::string describe_non_finite(const NonFiniteStep& s, const Topology& topo);

}  // namespace pentad
