// `pentad schedule --pp P --m M [--schedule afab|1f1b|interleaved|zbh1|zbv] [--v V] [--groups]`:
// prints a pipeline schedule's per-rank lists and what the checker finds:
// validity, activation (and deferred-W) high-water marks per rank (replayed
// and expected) and the bubble of a timed replay (t_b = 2 t_f, a split
// backward t_B = t_W = t_f) beside the formula; then the replay of its
// grouped message plan (parallel.pp_p2p = grouped, NCCL's), and with
// --groups the plan itself. No MPI work.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.hpp"
#include "config/config.hpp"
#include "core/error.hpp"
#include "parallel/pp/p2p_plan.hpp"
#include "parallel/pp/schedule.hpp"

namespace pentad {
namespace {

struct ScheduleArgs {
  std::string kind = "1f1b", pp, m, v;
  bool groups = false;
};

// An integer >= 1; "" (not given) is 0.
int number(const std::string& flag, const std::string& s) {
  if (s.empty()) return 0;
  try {
    size_t used = 0;
    const int x = std::stoi(s, &used);
    if (used == s.size() && x >= 1) return x;
  } catch (const std::exception&) {
  }
  throw CliUsageError("schedule: " + flag + " needs a positive integer (got '" + s + "')");
}

int grouped(const Schedule& s, const ScheduleCheck& eager, bool print_plan);

int schedule(const CLI::App& cmd, const ScheduleArgs& a, Job job) {
  if (const std::string x = first_extra(cmd); !x.empty()) throw CliUsageError("schedule: unknown option '" + x + "'");
  const int pp = number("--pp", a.pp), m = number("--m", a.m);
  if (pp == 0 || m == 0) throw CliUsageError("schedule: --pp and --m are required");
  // The deck's spellings (config.hpp's DeckNames), one list for both.
  const auto& names = DeckNames<ScheduleKind>::names;
  if (std::ranges::find(names, a.kind) == names.end()) {
    std::string known;
    for (const char* n : names) known += std::string(known.empty() ? "" : ", ") + n;
    throw CliUsageError("schedule: --schedule must be one of " + known + " (got '" + a.kind + "')");
  }
  const ScheduleKind k = parse_schedule_kind(a.kind);
  const int v = a.v.empty() ? (k == ScheduleKind::zbv ? 2 : 1) : number("--v", a.v);
  if (const std::string p = schedule_problem(k, pp, v, m); !p.empty()) throw InputError(p);
  const Schedule s = make_schedule(k, pp, v, m);
  const ScheduleCheck c = check_schedule(s);
  if (job.rank != 0) return c.ok() ? 0 : 1;
  std::printf("%s pp=%d v=%d m=%d\n%s", a.kind.c_str(), pp, v, m, describe_schedule(s).c_str());
  if (!c.ok()) {
    std::printf("check: FAILED: %s\n", c.error.c_str());
    return 1;
  }
  std::printf("check: ok (every send has its receive, no deadlock)\n");
  for (int r = 0; r < pp; ++r) {
    std::printf("rank %d: peak in-flight %d (expected %d)", r, c.peak_inflight[size_t(r)],
                expected_inflight(k, pp, v, m, r));
    if (splits_backward(k))
      std::printf(" | deferred W %d (%s %d)", c.peak_deferred_w[size_t(r)],
                  deferred_w_exact(k) ? "expected" : "at most", expected_deferred_w(k, pp, v, m, r));
    std::printf(" | replayed bubble %.4f\n", c.sim_bubble[size_t(r)]);
  }
  std::printf("bubble formula: %.4f\n", bubble_formula(k, pp, v, m));
  return grouped(s, c, a.groups);
}

// The grouped plan's replay beside the eager one (same costs).
int grouped(const Schedule& s, const ScheduleCheck& eager, bool print_plan) {
  P2pPlan plan;
  try {
    plan = make_p2p_plan(s);
  } catch (const std::invalid_argument& e) {
    std::printf("grouped messages (parallel.pp_p2p = grouped): FAILED: %s\n", e.what());
    return 1;
  }
  const P2pCheck g = check_p2p_plan(s, plan);
  double worst = 0;
  for (double b : g.sim_bubble) worst = std::max(worst, b);
  std::printf("grouped messages (parallel.pp_p2p = grouped): ok | replayed makespan %.0f (eager %.0f) | "
              "worst replayed bubble %.4f\n",
              g.sim_makespan, eager.sim_makespan, worst);
  if (print_plan) std::printf("%s", describe_p2p_plan(s, plan).c_str());
  return 0;
}

}  // namespace

Command add_schedule(CLI::App& pentad, Job job) {
  auto a = std::make_shared<ScheduleArgs>();
  CLI::App* cmd = add_command(pentad, "schedule", "print and check a pipeline schedule");
  cmd->add_option("--schedule", a->kind, "afab | 1f1b | interleaved | zbh1 | zbv (default 1f1b)");
  cmd->add_option("--pp", a->pp, "pipeline stages");
  cmd->add_option("--m", a->m, "micro-batches");
  cmd->add_option("--v", a->v, "model chunks per stage (interleaved; zbv: 2, its default; else 1)");
  cmd->add_flag("--groups", a->groups, "also print the grouped message plan (parallel.pp_p2p = grouped)");
  return {cmd, [cmd, a, job] { return schedule(*cmd, *a, job); },
          [](const std::string& opt) { return "schedule: " + opt + " needs a value"; }};
}

}  // namespace pentad
