// The model's parameter tensors as a pure function of the model and this
// rank's cut of it (tp rank, ep rank, pipeline stage): names, global and
// local shapes, units, init and the store each goes to. Model::build_params
// registers exactly this list, in its order (the init RNG is keyed by name
// and global index), and the planner sums its padded sizes per unit.
#pragma once

#include <functional>
#include <vector>

#include "config/config.hpp"
#include "model/params.hpp"
#include "parallel/pp/schedule.hpp"

namespace pentad {

// Which part of the model a rank holds, as far as parameters go.
struct ParamRank {
  int tp_rank = 0, tp = 1;
  int ep_rank = 0, ep = 1;
  bool expert_tp = false;  // the experts' d_ff split over tp (parallel.expert_tp); else replicated over tp
  int pp_rank = 0, pp_size = 1;
  std::vector<int> chunk_blocks;  // n_chunks + 1 block boundaries; empty: one chunk
  ChunkPlacement placement = ChunkPlacement::round_robin;  // which stage holds which chunk
};

// In registration order, units ascending: the embedding (wte; wpe for
// GPT-2) on the first chunk's stage; each held block's norms, attention and
// MLP (a MoE block: the router in the dense store, this ep rank's experts in
// the expert store); on the last chunk's stage the final norm and the head's
// matrix (lm_head; with tied embeddings none where the stage holds wte, else
// a stage copy of wte). Output projections get std/sqrt(2L) (GPT-2).
std::vector<ParamSpec> model_param_list(const ModelConfig& cfg, const ParamRank& r);

// The same tensors, in the same order, handed to `emit` one at a time
// instead of held in a list: the planner sums the sizes of decks far too
// deep to list (the memory refusal of model.n_layers = 1e6 held 12 million
// specs, GiBs, for tens of seconds, before refusing).
using ParamSink = std::function<void(ParamSpec&&)>;
void for_each_param_spec(const ModelConfig& cfg, const ParamRank& r, const ParamSink& emit);

}  // namespace pentad
