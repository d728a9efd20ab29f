// What context parallelism reports about itself: the causal-attention work
// per cp rank of both layouts (printed at start), the ring attention's work
// and kernel time per step (metrics), and the step-1 logits of a cp group
// reassembled in global token order (debug dump).
#pragma once

#include <mpi.h>

#include <vector>

#include "comm/comm.hpp"
#include "parallel/cp/context_parallel.hpp"

namespace pentad {

// Prints (local, the caller is the root) the max/min ratio of causal
// attention pairs over the cp ranks for the zigzag and contiguous layouts.
void print_cp_balance(const CpSplit& s);

// Metric names of cp_attention_stats's four values, in order.
constexpr const char* kCpAttnKeys[4] = {"cp_attn_gflop_max", "cp_attn_gflop_min", "cp_attn_ms_max",
                                        "cp_attn_ms_min"};
// GFLOP of this rank's ring attention (max, min over cp) and its kernel time
// in ms (max, min). Collective over cp.
void cp_attention_stats(const RingAttention& ring, Comm& cp, double out[4]);

// logits (A*b*T/cp, V) in cp_slice order on every cp rank -> (A*b, T, V) in
// global token order on cp rank 0 (unchanged elsewhere, and with cp = 1).
// Collective over cp.
void gather_cp_logits(const CpSplit& s, MPI_Comm cp, int cp_rank, int A, int b, int V,
                      std::vector<float>& logits);

}  // namespace pentad
