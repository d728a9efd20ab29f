// What one training step reports: the numbers of the metrics row (one
// JSON-lines object per step, field names documented in the README) and the
// console line. Filled by the Trainer on the root; nothing here communicates.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "comm/comm.hpp"
#include "parallel/ep/moe.hpp"
#include "parallel/ep/moe_stats.hpp"

namespace pentad {

// One group's traffic over the step (Comm::bytes_sent, seconds_blocked).
struct GroupTraffic {
  double bytes_sent = 0, blocked_ms = 0;
  static GroupTraffic of(const Comm& c) { return {c.bytes_sent(), c.seconds_blocked() * 1e3}; }
  GroupTraffic& operator+=(const GroupTraffic& o) {
    bytes_sent += o.bytes_sent;
    blocked_ms += o.blocked_ms;
    return *this;
  }
};

// Per pipeline stage, gathered over pp: bubble, peak in-flight activation
// slots, activation peak bytes, slot bytes, and for a split backward (zbh1,
// zbv) the most W actions pending at once and the most bytes their kept
// matmul gradients (and, with full recompute, inputs) held at once.
constexpr int kStageStats = 6;

struct StepRecord {
  int step = 0, steps = 0;  // this step, of `steps`
  double loss = 0, lr = 0, grad_norm = 0, step_s = 0;
  double trained_targets = -1;  // with a loss mask in data.train: the global batch's trained targets; -1 none
  double tokens_per_s = 0, tflops = 0, mfu = 0;
  const MemStats* mem = nullptr;  // the root's backend
  GroupTraffic dp_cp, tp, pp, cp, ep, expert_dp;
  double pp_bubble_formula = 0;  // 0 without pipeline parallelism
  double dp_reductions = 0, dp_buckets = 0, dp_comm_hidden = 0;
  double param_elems = 0, shard_elems = 0;
  const std::vector<double>* stage_stats = nullptr;  // (pp, kStageStats)
  const MoeStep* moe = nullptr;  // nullptr: not an MoE model
  MoeLayer::Times moe_times;     // the root's
  bool has_val = false;          // evaluated at this step
  double val_loss = 0;
  const double* cp_attn = nullptr;  // the 4 values of cp_attention_stats; nullptr: no ring attention
  std::vector<double> val_sources;  // per data.val entry when it has several: its own val loss
  bool has_choice = false;          // data.choice_eval scored at this step
  double choice_acc_norm = 0, choice_acc = 0;  // least mean / least summed loss per token picks the label
  double eval_s = 0;  // seconds of this step's evaluations (validation and multiple choice)
  std::vector<double> data_epochs;  // per data source: epochs read after this step (BatchSampler::epochs_read)
};

// The metrics row, in the file's field order.
std::vector<std::pair<std::string, double>> metrics_row(const StepRecord& r);
// The console line (and the MoE line under it) on stdout.
void print_step_line(const StepRecord& r);
// An evaluation with no step (train.steps = 0, or a checkpoint already at
// train.steps): its metrics row (step and the evaluation's fields) and its
// console line, "eval at step N (no step run) | val loss ... | choice ...".
std::vector<std::pair<std::string, double>> eval_row(const StepRecord& r);
void print_eval_line(const StepRecord& r);

}  // namespace pentad
