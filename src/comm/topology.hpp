// The 5-D process grid (pp, dp/ep, ep, cp, tp), tp varying fastest so a TP
// group stays inside a node, and one named communicator per parallel axis
// (ARCHITECTURE.md section 2). The rank <-> coordinate math is pure and
// matches MPI_Cart_create's row-major order with reorder = 0.
#pragma once

#include <mpi.h>

#include <array>
#include <string>

#include "config/config.hpp"

namespace pentad {

struct GridShape {
  int pp = 1, dp = 1, ep = 1, cp = 1, tp = 1;
  int dp_outer() const { return dp / ep; }
  int size() const { return pp * dp * cp * tp; }
  // Dimensions in grid order: pp, dp/ep, ep, cp, tp.
  std::array<int, 5> dims() const { return {pp, dp_outer(), ep, cp, tp}; }
};

struct GridCoords {
  int pp = 0, dp_outer = 0, ep = 0, cp = 0, tp = 0;
  int dp(const GridShape& s) const { return dp_outer * s.ep + ep; }  // index in the dp group
  bool operator==(const GridCoords&) const = default;
};

GridShape grid_shape(const ParallelConfig& p);
int rank_of(const GridShape& s, const GridCoords& c);
GridCoords coords_of(const GridShape& s, int rank);

// The MPI side: built once from the job's communicator; everything else asks
// this object for a group, never builds one.
class Topology {
 public:
  // kv_heads: the model's key/value heads; with more tp ranks than heads
  // (and more than one head) the ranks holding each head form kv_copies.
  Topology(MPI_Comm job, const ParallelConfig& p, int kv_heads = 0);  // collective over job
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  GridShape shape;
  GridCoords me;
  int rank = 0;  // in the job (== cart rank)
  int size = 1;

  MPI_Comm job = MPI_COMM_NULL;   // the whole job, for job-wide agreement and logging
  MPI_Comm cart = MPI_COMM_NULL;
  MPI_Comm tp = MPI_COMM_NULL;         // remain: tp
  MPI_Comm cp = MPI_COMM_NULL;         // remain: cp (periodic ring)
  MPI_Comm ep = MPI_COMM_NULL;         // remain: ep
  MPI_Comm dp = MPI_COMM_NULL;         // remain: dp/ep, ep
  MPI_Comm dp_cp = MPI_COMM_NULL;      // remain: dp/ep, ep, cp
  MPI_Comm expert_dp = MPI_COMM_NULL;  // remain: dp/ep, cp
  MPI_Comm pp = MPI_COMM_NULL;         // remain: pp (periodic)
  // The tp ranks holding the same copied key/value head (KvCopies): tp /
  // kv_heads consecutive tp ranks, where tp > kv_heads > 1; else
  // MPI_COMM_NULL (one head: the copies are the whole tp group).
  MPI_Comm kv_copies = MPI_COMM_NULL;
  // The stage of the first chunk (0) and the stage of the last (the head:
  // pp - 1, or 0 with zbv's V), where a tied embedding lives twice (pp > 1
  // and the two stages differ; MPI_COMM_NULL elsewhere).
  MPI_Comm pp_ends = MPI_COMM_NULL;
  int head_stage = 0;  // the pp rank holding the last chunk (final norm, head, loss)

  int dp_rank() const { return me.dp(shape); }
  bool is_root() const { return rank == 0; }
  bool is_first_stage() const { return me.pp == 0; }
  bool holds_head() const { return me.pp == head_stage; }
  bool ends_apart() const { return head_stage != 0; }  // the first and last chunk on different stages
  std::string describe() const;  // "pp=1 dp=2 (ep=1) cp=1 tp=1"
};

}  // namespace pentad
