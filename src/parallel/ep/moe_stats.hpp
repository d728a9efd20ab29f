// One training step's MoE routing summary over the global batch: the
// auxiliary loss (Switch Transformer's load balancing plus ST-MoE's router
// z-loss), the balance of the router and the spread of kept tokens per
// expert, from the per-rank MoeStats the MoE layers accumulate.
#pragma once

#include "comm/comm.hpp"
#include "config/config.hpp"
#include "parallel/ep/moe.hpp"

namespace pentad {

struct MoeStep {
  double aux_loss = 0;      // aux_loss_coef * mean_seq aux_s + z_loss_coef * mean_tok lse^2, summed over blocks
  double balance = 0;       // mean over blocks and sequences of E sum_e f_e P_e (1 = uniform)
  double tok_min = 0, tok_max = 0, tok_mean = 0;  // kept assignments per (block, expert)
  double dropped = 0;       // fraction of assignments over capacity
  // Receive load (MoeStats::recv_load_max): rows received in one MoE call
  // over the uniform share, the most over this step's calls: the root's
  // (beside its peak_mem_*) and the busiest rank's (what to plan with).
  double recv_load_root = 0, recv_load_max = 0;
};

// Sums the model's routing statistics over dp x cp (each rank's tokens) and
// pp (each stage's blocks); tp ranks hold the same (the receive load: the
// maximum). seqs and tokens: of the global batch. Collective over dp_cp and pp.
MoeStep moe_step(const MoeStats& st, const ModelConfig& mc, Comm& dp_cp, Comm& pp, double seqs, double tokens);

}  // namespace pentad
