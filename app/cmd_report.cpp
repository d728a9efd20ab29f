// `pentad report RUN_DIR_OR_CSV... [--machine FILE.toml] [--one-node]
// [--csv OUT.csv] [--plot OUT.png]`: measured runs beside the planner's
// predictions (plan/report.hpp). The plot is scripts/plot_report.py of the
// source tree the binary was built from, run on the points as a CSV.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "plan/planner.hpp"
#include "plan/report.hpp"

namespace pentad {
namespace {

struct ReportArgs {
  std::vector<std::string> inputs;
  std::string csv, png, machine;
  bool one_node = false;
};

// scripts/plot_report.py: under PENTAD_SOURCE_DIR when the build defines it,
// else next to the binary (an install) or in the parent of its directory
// (build/ and build-cuda/ sit in the source tree).
std::string plot_script() {
  std::vector<std::string> tried;
#ifdef PENTAD_SOURCE_DIR
  tried.push_back(std::string(PENTAD_SOURCE_DIR) + "/scripts/plot_report.py");
#endif
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    const std::string dir = parent_dir(std::string(exe, size_t(n)));
    tried.push_back(dir + "/plot_report.py");
    tried.push_back(parent_dir(dir) + "/scripts/plot_report.py");
  }
  std::string list;
  for (const auto& p : tried) {
    if (::access(p.c_str(), R_OK) == 0) return p;
    list += (list.empty() ? "" : ", ") + p;
  }
  throw InputError("report: --plot: cannot find scripts/plot_report.py (looked for " + list + ")");
}

// Runs the plotting script on the points, through a CSV next to the PNG.
void plot(const std::vector<ReportPoint>& pts, const std::string& png) {
  const std::string script = plot_script();
  const std::string csv = png + ".data.csv";
  write_report_csv(csv, pts);
  const char* env = std::getenv("PENTAD_PYTHON");
  const std::string python = env && *env ? env : (::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3");
  const std::string cmd = "'" + python + "' '" + script + "' '" + csv + "' '" + png + "'";
  const int rc = std::system(cmd.c_str());
  std::remove(csv.c_str());
  if (rc != 0)
    throw InputError("report: --plot: the plotting script failed (" + python +
                     " with matplotlib is needed: apt-get install python3-matplotlib)");
}

int report(const CLI::App& cmd, const ReportArgs& a) {
  for (const auto& in : a.inputs)
    if (looks_like_option(in)) throw CliUsageError("report: unknown option '" + in + "'");
  if (const std::string x = first_extra(cmd); !x.empty()) throw CliUsageError("report: unknown option '" + x + "'");
  if (a.inputs.empty()) throw CliUsageError("report: no run directory or CSV given");
  Machine mach;
  mach.name = "built-in defaults";
  if (!a.machine.empty()) mach = load_machine(a.machine);
  std::vector<ReportPoint> pts;
  for (const auto& in : a.inputs) {
    std::vector<ReportPoint> p = read_report_input(in, mach, a.one_node);
    pts.insert(pts.end(), p.begin(), p.end());
  }
  sort_report_points(pts);
  std::fputs(report_table(pts).c_str(), stdout);
  if (!a.csv.empty()) {
    write_report_csv(a.csv, pts);
    std::printf("csv written to %s\n", a.csv.c_str());
  }
  if (!a.png.empty()) {
    plot(pts, a.png);
    std::printf("plot written to %s\n", a.png.c_str());
  }
  return 0;
}

}  // namespace

Command add_report(CLI::App& pentad) {
  auto a = std::make_shared<ReportArgs>();
  CLI::App* cmd = add_command(pentad, "report", "scaling efficiency, prediction beside measurement");
  cmd->add_option("inputs", a->inputs, "run directories and report CSVs");
  cmd->add_option("--machine", a->machine, "machine file (input/machines/*.toml)");
  cmd->add_flag("--one-node", a->one_node, "every rank of a run on one node");
  cmd->add_option("--csv", a->csv, "write the points as CSV");
  cmd->add_option("--plot", a->png, "write the plot (PNG, matplotlib)");
  Command c{cmd, [cmd, a] { return report(*cmd, *a); },
            [](const std::string& opt) { return "report: " + opt + " needs a value"; }};
  c.root_only = true;
  return c;
}

}  // namespace pentad
