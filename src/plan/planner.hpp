// The layout planner's models (no MPI): per-rank memory by category, bytes
// per step per group and a roofline step time, for a deck and a layout.
// Activation and scratch memory are the model's own buffer lists
// (model/memory_plan.hpp, which Model allocates from), the parameter stores
// its parameter list (model/param_list.hpp, which Model registers, padded as
// params.hpp pads), the gradient buckets and ZeRO shards DataParallel's
// (memory_plan.hpp), ring attention's and the MoE layer's buffers their
// ring_buffers and moe_buffers. Counted here: ZeRO windows and pipeline
// boundary buffers (walking the schedule lists of schedule.hpp for the
// in-flight high-water marks). The communication
// model counts bytes the way Comm does (ring algorithms); the time model is
// stated in planner.cpp and in docs/planner.md.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"

namespace pentad {

// A machine: what one rank ("device": a GPU, or one CPU core) can do and how
// fast its links are. input/machines/*.toml; see parse_machine.
struct Machine {
  std::string name, source;
  int devices_per_node = 8;
  double memory_bytes = 80.0 * (1ull << 30);  // per device
  double peak_tflops = 989;                   // per device, the training dtype
  double compute_efficiency = 0.4;            // fraction of peak the model's compute reaches
  double intra_node_gbs = 400;                // collective bus bandwidth inside a node, GB/s
  double inter_node_gbs = 50;                 // across nodes, GB/s per rank
  double intra_node_latency_us = 5;           // per collective call / message
  double inter_node_latency_us = 10;
  double p2p_gbs = 0;                         // point-to-point; 0 = the bus bandwidth
};

// Strict: unknown keys, wrong types and out-of-range values are InputErrors
// naming path:line and the key.
Machine parse_machine(const std::string& text, const std::string& path);
Machine load_machine(const std::string& path);

constexpr int kMemCategories = static_cast<int>(Mem::count);
using MemBytes = std::array<double, kMemCategories>;

// One pipeline stage's rank (tp rank 0, dp rank 0 of that stage).
struct StageMemory {
  MemBytes bytes{};             // per category, the peak the backend would record
  double total = 0;             // sum of the category peaks (an upper bound of the total peak)
  double param_elems = 0;       // N: this rank's flat parameter buffer (padded tensors)
  double shard_elems = 0;       // S
  double expert_elems = 0;      // NE: this rank's expert store (its ep share of the MoE blocks' experts)
  double expert_shard_elems = 0;  // SE: its ZeRO shard over expert_dp
  double slot_bytes = 0;        // one in-flight activation set through every chunk it holds
  std::vector<int> slots;       // per chunk this stage holds: pooled slots (in-flight high-water)
  int boundary_buffers = 0;     // pipeline receive/send buffers alive at once
};

struct MemoryEstimate {
  std::vector<StageMemory> stages;  // [pp stage]; stage 0 holds the job's root rank
  int worst_stage = 0;
  double worst_total() const { return stages[size_t(worst_stage)].total; }
  std::vector<std::string> notes;   // what is approximated or ignored
  double moe_load = 0;              // the receive load applied (dropless MoE with ep > 1: min(moe_load, ep)), else 0
};

// moe_load: dropless MoE only (model.dropless = true). The rows one rank
// receives in one MoE call over the uniform share N*top_k (N = B*seq_len);
// 1 = balanced routing. The MoE buffers of R = min(moe_load, ep)*N*top_k
// received rows are modelled (R <= ep*N*top_k: every rank sends it all).
// A run logs it per step: moe_recv_load (the root's), moe_recv_load_max
// (the busiest rank's). With a capacity it is not used (uniform routing
// under the capacity, see moe_rows in planner.cpp).
MemoryEstimate estimate_memory(const Config& cfg, double moe_load = 1.0);

// Bytes this rank sends per optimizer step, per group, as Comm counts them,
// and the number of calls (for the latency term).
struct StageComm {
  double dp_bytes = 0, tp_bytes = 0, pp_bytes = 0;
  double dp_calls = 0, tp_calls = 0, pp_msgs = 0;
  double dp_exposed_bytes = 0;  // the part not overlapped with backward (last bucket, ZeRO all-gather)
  double cp_bytes = 0, cp_msgs = 0;  // ring attention (K/V and dK/dV hops)
  double ep_bytes = 0, ep_calls = 0;  // MoE all-to-alls (an upper bound: dropped tokens are not sent)
  double edp_bytes = 0, edp_calls = 0, edp_exposed_bytes = 0;  // the expert store's DataParallel (expert_dp)
};

struct TimeEstimate {
  double compute_s = 0;     // busiest stage, all micro-batches, at efficiency x peak
  double bubble = 0;        // schedule.hpp bubble_formula, or the grouped plan's replay (NCCL); 0 without pp
  double bubble_s = 0;
  double tp_s = 0;          // not overlapped
  double dp_s = 0;          // total dp time, and the exposed part
  double dp_exposed_s = 0;
  double pp_s = 0;          // exposed point-to-point time (fill and drain)
  double cp_s = 0;          // ring attention transfers beyond the attention compute they overlap
  double ep_s = 0;          // MoE all-to-alls and the expert_dp reduction (not overlapped)
  double step_s = 0;
  double tokens_per_s = 0;
  double flops_per_step = 0;  // model FLOPs (6N + 12 L C T per token), as the trainer counts MFU
  double mfu = 0;
  double oversubscription = 1;  // ranks per device on a node (> 1: sharing cores)
  bool dp_intra = true, tp_intra = true, pp_intra = true, cp_intra = true, ep_intra = true;
};

struct Prediction {
  MemoryEstimate mem;
  std::vector<StageComm> comm;  // [pp stage]
  TimeEstimate time;
};

// gpus_per_node overrides machine.devices_per_node when > 0. ranks_per_node:
// ranks placed on one node (0 = one per device); more ranks than devices
// share them (oversubscription: compute slows by ranks / devices).
// moe_load: as for estimate_memory (memory only; comm and time keep balanced routing).
Prediction predict(const Config& cfg, const Machine& m, int gpus_per_node = 0, int ranks_per_node = 0,
                   double moe_load = 1.0);

// "dp=2,tp=2,pp=2" style description of cfg's layout (and the knobs the planner varies).
std::string describe_layout(const Config& cfg);

// The text of --explain: memory by category per stage, comm per group, time terms.
std::string explain_prediction(const Config& cfg, const Prediction& p, const Machine& m);

// format_bytes(b, 2, true) of core/text.hpp: "1.50 KiB", "512 B".
std::string format_bytes(double b);
// "80GiB", "512MiB", "1.5e9" -> bytes; throws InputError naming `what`.
double parse_bytes(const std::string& s, const std::string& what);

}  // namespace pentad
