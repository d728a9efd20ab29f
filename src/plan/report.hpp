// Measured runs beside the planner's predictions (`pentad report`). A run
// directory holds the root rank's stdout (train.log, with the resolved deck
// between "---- resolved deck" and "---- end of deck ----") and its metrics
// (metrics*.jsonl), as bench/scaling.sh and jobscripts/train.sbatch write
// them; a CSV is one write_report_csv wrote. Efficiency is throughput per
// rank relative to the smallest rank count of the same sweep group.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "plan/planner.hpp"

namespace pentad {

// One run: medians of its measured steps and the planner's prediction.
struct ReportPoint {
  std::string group, layout, source;
  int ranks = 0;
  int oversubscribed = 0;  // ranks per core > 1 on the node
  int steps = 0;
  double tokens_per_s = NAN, pred_tokens_per_s = NAN, step_ms = NAN, pred_step_ms = NAN;
  double mfu = NAN, pred_mfu = NAN, peak_mem = NAN, pred_mem = NAN;
  double dp_bytes = NAN, pred_dp_bytes = NAN, tp_bytes = NAN, pred_tp_bytes = NAN, pp_bytes = NAN,
         pred_pp_bytes = NAN;
  double bubble = NAN, pred_bubble = NAN;
};

// A run directory (one point, predicted on `mach`; one_node: every rank on
// one node) or a report CSV (its points, as written). Throws InputError.
std::vector<ReportPoint> read_report_input(const std::string& path, const Machine& mach, bool one_node);

// By group, then rank count (stable): the order of the table and the CSV.
void sort_report_points(std::vector<ReportPoint>& pts);

// The comparison table (measured, predicted, error), the bytes per step and
// the worst errors, as printed by `pentad report`.
std::string report_table(const std::vector<ReportPoint>& pts);

// Every column of ReportPoint but `source`; read_report_input reads it back.
void write_report_csv(const std::string& path, const std::vector<ReportPoint>& pts);

}  // namespace pentad
