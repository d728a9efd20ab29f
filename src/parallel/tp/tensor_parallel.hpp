// Tensor- and sequence-parallel helpers (Megatron-LM: Shoeybi et al. 2019;
// sequence parallelism: Korthikanti et al. 2022). How a tensor or the token
// rows are split over the tp group, the vocab-parallel softmax cross-entropy,
// the global view of tp-split parameters (debug dumps, weights files) and the
// layout-independent gradient norm. The split rule everywhere: part r of n
// equal parts of a dimension is [r*len/n, (r+1)*len/n). The layers are in
// layers.hpp and vocab.hpp, the region boundaries in regions.hpp, the split
// of each parameter in param_split.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "model/params.hpp"

namespace pentad {

class Comm;

// One dimension of length `len` cut in `parts` equal parts (len % parts == 0).
struct Split {
  int64_t len = 0;
  int parts = 1;
  int64_t local() const { return len / parts; }
  int64_t start(int part) const { return int64_t(part) * local(); }
};

// A tensor some of whose dimensions differ between its global and local shape
// is split (over tp for a dense tensor, over ep, and with expert tp over tp
// too, for an expert one); the others are whole on every rank.
bool is_tp_split(const ParamInfo& p);

// The tensor is split over tp: cut along its tp_dim (ParamSpec::tp_dim).
// A dense tensor is exactly when is_tp_split; an expert tensor only with
// parallel.expert_tp, and its b_down never.
bool split_over_tp(const ParamInfo& p);

// Softmax cross-entropy of logits (n, ld) whose first V_local columns are
// the vocabulary columns [vocab_start, vocab_start + V_local) and the rest
// vocabulary padding (Backend::xent_rowmax); collective over tp (nullptr or
// size 1: the whole vocabulary is here). rowmax: (n) scratch; sumexp_target:
// (2n) scratch, the sum of exp and the target logit side by side so that one
// all-reduce carries both. losses (n) and dlogits (n, ld, may alias logits)
// as Backend::xent_bwd; either may be null.
void vocab_parallel_xent(Backend& be, Comm* tp, float* dlogits, float* losses, const float* logits,
                         float* rowmax, float* sumexp_target, const int32_t* targets,
                         float grad_scale, int n, int V_local, int ld, int vocab_start);

// The global tensor `p` assembled from the blocks of every tp rank: `local`
// (host, p.local_shape) -> `global` (host, p.saved_shape(), row-major: the
// vocabulary padding rows dropped), on every rank
// of the group. Collective over tp (host MPI; nullptr or a replicated tensor:
// a copy). Every rank must call it for the same tensors in the same order.
void gather_global(Comm* tp, const ParamInfo& p, const float* local, std::vector<float>& global);
// The same over several groups whose ranks hold disjoint blocks of one shape
// (an expert tensor over ep, and over tp with expert tp): the blocks are
// gathered over each group in turn. Collective over each (nullptr or size 1:
// skipped).
void gather_global(const std::vector<Comm*>& groups, const ParamInfo& p, const float* local,
                   std::vector<float>& global);
// The groups a tensor's blocks are spread over: {tp} for a dense tensor,
// {ep} for an expert one, {ep, tp} for an expert one split over tp too.
std::vector<Comm*> holder_groups(const ParamInfo& p, bool expert, Comm* tp, Comm* ep);

// This rank's share of the squared L2 norm of a flat buffer laid out like the
// parameters: `flat` holds the flat elements [lo, hi). Elements of tensors
// split over tp (split_over_tp) count on every tp rank (a key/value block
// held by several: on its copy 0), the others on tp rank 0 only, so summing the shares over the tp group (and over disjoint ranges,
// e.g. ZeRO shards over dp) gives the norm of the global model; a pipeline
// stage's copy of a tied tensor counts on its owner stage only. Local.
double tp_sum_squares(const ParamStore& params, Backend& be, const float* flat, size_t lo, size_t hi,
                      int tp_rank, int tp_size);

}  // namespace pentad
