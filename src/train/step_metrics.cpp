// The metrics row and console line of a training step (see step_metrics.hpp).
#include "train/step_metrics.hpp"

#include <algorithm>
#include <cstdio>

#include "core/text.hpp"
#include "parallel/cp/cp_report.hpp"

namespace pentad {
namespace {

// Per pipeline stage (pp<q>_*), then the worst bubble.
void append_stage_fields(const StepRecord& r, std::vector<std::pair<std::string, double>>& row) {
  const std::vector<double>& stats = *r.stage_stats;
  const int n_pp = int(stats.size()) / kStageStats;
  double worst_bubble = 0;
  for (int q = 0; q < n_pp; ++q) {
    const double* st = stats.data() + size_t(q) * kStageStats;
    const std::string k = "pp" + std::to_string(q) + "_";
    row.emplace_back(k + "bubble", st[0]);
    row.emplace_back(k + "inflight", st[1]);
    row.emplace_back(k + "act_peak_bytes", st[2]);
    row.emplace_back(k + "slot_bytes", st[3]);
    row.emplace_back(k + "deferred_w", st[4]);
    row.emplace_back(k + "deferred_w_bytes", st[5]);
    worst_bubble = std::max(worst_bubble, st[0]);
  }
  row.emplace_back("pp_bubble", worst_bubble);
}

void append_moe_fields(const StepRecord& r, std::vector<std::pair<std::string, double>>& row) {
  const MoeStep& m = *r.moe;
  row.emplace_back("aux_loss", m.aux_loss);
  row.emplace_back("moe_balance", m.balance);
  row.emplace_back("moe_tokens_per_expert_min", m.tok_min);
  row.emplace_back("moe_tokens_per_expert_max", m.tok_max);
  row.emplace_back("moe_tokens_per_expert_mean", m.tok_mean);
  row.emplace_back("moe_dropped_fraction", m.dropped);
  row.emplace_back("moe_recv_load", m.recv_load_root);
  row.emplace_back("moe_recv_load_max", m.recv_load_max);
  row.emplace_back("ep_bytes_sent", r.ep.bytes_sent);
  row.emplace_back("ep_blocked_ms", r.ep.blocked_ms);
  row.emplace_back("expert_dp_bytes_sent", r.expert_dp.bytes_sent);
  row.emplace_back("moe_comm_ms", r.moe_times.comm_s * 1e3);
  row.emplace_back("moe_expert_ms", r.moe_times.expert_s * 1e3);
  row.emplace_back("moe_route_ms", r.moe_times.route_s * 1e3);
}

}  // namespace

namespace {

// The evaluation's fields of a metrics row: val_loss (and per source), the
// multiple-choice accuracies.
void append_eval_fields(const StepRecord& r, std::vector<std::pair<std::string, double>>& row) {
  if (r.has_val) row.emplace_back("val_loss", r.val_loss);
  if (r.has_val)
    for (size_t k = 0; k < r.val_sources.size(); ++k) row.emplace_back("val_loss_" + std::to_string(k), r.val_sources[k]);
  if (r.has_choice) {
    row.emplace_back("choice_acc_norm", r.choice_acc_norm);
    row.emplace_back("choice_acc", r.choice_acc);
  }
  if (r.has_val || r.has_choice) row.emplace_back("eval_s", r.eval_s);
}

// " | val loss 2.1 [0: 2.0, 1: 2.2] | choice acc_norm 0.2955 acc 0.2859" (what was evaluated).
std::string eval_text(const StepRecord& r) {
  std::string val;
  if (r.has_val) {
    val = " | val loss " + std::to_string(r.val_loss);
    for (size_t k = 0; k < r.val_sources.size(); ++k)
      val += (k == 0 ? " [" : ", ") + std::to_string(k) + ": " + std::to_string(r.val_sources[k]) +
             (k + 1 == r.val_sources.size() ? "]" : "");
  }
  if (r.has_choice) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " | choice acc_norm %.4f acc %.4f", r.choice_acc_norm, r.choice_acc);
    val += buf;
  }
  if (r.has_val || r.has_choice) {
    char buf[48];
    std::snprintf(buf, sizeof buf, " (eval %.2f s)", r.eval_s);
    val += buf;
  }
  return val;
}

}  // namespace

std::vector<std::pair<std::string, double>> metrics_row(const StepRecord& r) {
  const MemStats& ms = *r.mem;
  std::vector<std::pair<std::string, double>> row = {
      {"step", r.step}, {"loss", r.loss}, {"lr", r.lr}, {"grad_norm", r.grad_norm},
      {"tokens_per_s", r.tokens_per_s}, {"tflops", r.tflops}, {"mfu", r.mfu},
      {"peak_mem_bytes", double(ms.total_peak_bytes)}, {"step_ms", r.step_s * 1e3},
      {"dp_bytes_sent", r.dp_cp.bytes_sent}, {"tp_bytes_sent", r.tp.bytes_sent},
      {"dp_blocked_ms", r.dp_cp.blocked_ms}, {"tp_blocked_ms", r.tp.blocked_ms},
      {"pp_bytes_sent", r.pp.bytes_sent}, {"pp_blocked_ms", r.pp.blocked_ms},
      {"pp_bubble_formula", r.pp_bubble_formula},
      {"cp_bytes_sent", r.cp.bytes_sent}, {"cp_blocked_ms", r.cp.blocked_ms},
      {"dp_reductions", r.dp_reductions},
      {"dp_buckets", r.dp_buckets}, {"dp_comm_hidden", r.dp_comm_hidden},
      {"param_elems", r.param_elems}, {"shard_elems", r.shard_elems}};
  for (int c = 0; c < int(Mem::count); ++c)
    row.emplace_back(std::string("peak_mem_") + mem_name(Mem(c)), double(ms.peak_bytes[size_t(c)]));
  if (r.trained_targets >= 0) row.emplace_back("trained_targets", r.trained_targets);
  append_stage_fields(r, row);
  if (r.moe) append_moe_fields(r, row);
  append_eval_fields(r, row);
  if (r.cp_attn)
    for (int i = 0; i < 4; ++i) row.emplace_back(kCpAttnKeys[i], r.cp_attn[i]);
  if (r.data_epochs.size() == 1) row.emplace_back("data_epochs", r.data_epochs[0]);
  if (r.data_epochs.size() > 1)
    for (size_t k = 0; k < r.data_epochs.size(); ++k)
      row.emplace_back("data_epochs_" + std::to_string(k), r.data_epochs[k]);
  return row;
}

void print_step_line(const StepRecord& r) {
  const std::string val = eval_text(r);
  // With a loss mask: the targets the loss is the mean over.
  const std::string trained = r.trained_targets >= 0 ? " | " + std::to_string(int64_t(r.trained_targets)) + " trained" : "";
  std::printf("step %5d/%d | loss %.4f | lr %.3e | grad norm %.4f | %.0f tok/s | "
              "%.3f TFLOP/s | MFU %.1f%% | mem %s | %.1f ms%s%s\n",
              r.step, r.steps, r.loss, r.lr, r.grad_norm, r.tokens_per_s, r.tflops, 100 * r.mfu,
              format_bytes(double(r.mem->total_peak_bytes), 1).c_str(), r.step_s * 1e3, trained.c_str(),
              val.c_str());
  if (r.moe) {
    const MoeStep& m = *r.moe;
    std::printf("           moe | aux loss %.5f | balance %.4f | tokens/expert min %.0f max %.0f mean %.1f | "
                "dropped %.2f%% | ep %s sent\n",
                m.aux_loss, m.balance, m.tok_min, m.tok_max, m.tok_mean, 100 * m.dropped,
                format_bytes(r.ep.bytes_sent, 1).c_str());
  }
  std::fflush(stdout);
}

std::vector<std::pair<std::string, double>> eval_row(const StepRecord& r) {
  std::vector<std::pair<std::string, double>> row = {{"step", double(r.step)}};
  append_eval_fields(r, row);
  return row;
}

void print_eval_line(const StepRecord& r) {
  std::printf("eval at step %d (no step run)%s\n", r.step, eval_text(r).c_str());
  std::fflush(stdout);
}

}  // namespace pentad
