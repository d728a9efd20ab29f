// `pentad report` (see planner_cli.hpp): measured runs beside the planner's
// predictions. A run directory holds the root rank's stdout (train.log, with
// the resolved deck between "---- resolved deck" and "---- end of deck ----")
// and its metrics (metrics*.jsonl) — what bench/scaling.sh and
// jobscripts/train.sbatch both write. A CSV is one this command wrote
// (--csv), read back as it is. Efficiency is throughput per rank relative to
// the smallest rank count of the same sweep group (weak and strong alike).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <toml++/toml.h>

#include "config/config.hpp"
#include "core/error.hpp"
#include "plan/planner.hpp"
#include "commands.hpp"

namespace pentad {
namespace {

struct Point {
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

const char* kColumns[] = {"group", "ranks", "layout", "oversubscribed", "steps", "tokens_per_s",
                          "pred_tokens_per_s", "step_ms", "pred_step_ms", "mfu", "pred_mfu", "peak_mem_bytes",
                          "pred_mem_bytes", "dp_bytes", "pred_dp_bytes", "tp_bytes", "pred_tp_bytes", "pp_bytes",
                          "pred_pp_bytes", "bubble", "pred_bubble"};

std::vector<double*> numbers(Point& p) {
  return {&p.tokens_per_s, &p.pred_tokens_per_s, &p.step_ms, &p.pred_step_ms, &p.mfu, &p.pred_mfu,
          &p.peak_mem, &p.pred_mem, &p.dp_bytes, &p.pred_dp_bytes, &p.tp_bytes, &p.pred_tp_bytes,
          &p.pp_bytes, &p.pred_pp_bytes, &p.bubble, &p.pred_bubble};
}

bool is_dir(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError("report: cannot read '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// One flat JSON object of numbers (and strings, skipped) -> key -> value.
std::map<std::string, double> parse_json_line(const std::string& line) {
  std::map<std::string, double> out;
  size_t i = 0;
  while ((i = line.find('"', i)) != std::string::npos) {
    const size_t e = line.find('"', i + 1);
    if (e == std::string::npos) break;
    const std::string key = line.substr(i + 1, e - i - 1);
    size_t v = e + 1;
    if (v >= line.size() || line[v] != ':') {
      i = e + 1;
      continue;
    }
    ++v;
    if (line[v] == '"') {  // a string value: skip it
      size_t q = v + 1;
      while (q < line.size() && line[q] != '"') q += line[q] == '\\' ? 2 : 1;
      i = q + 1;
      continue;
    }
    char* end = nullptr;
    const double x = std::strtod(line.c_str() + v, &end);
    out[key] = end == line.c_str() + v ? NAN : x;  // null -> NaN
    i = v;
  }
  return out;
}

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string base_name(std::string p) {
  while (!p.empty() && p.back() == '/') p.pop_back();
  const auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// runs/<group>-ranks<R>[-<job id>] or <group>-nodes<N>[-<job id>] -> group.
std::string group_of(const std::string& dir) {
  const std::string b = base_name(dir);
  static const std::regex re("^(.*)-(ranks|nodes)[0-9]+(-.*)?$");
  std::smatch m;
  if (std::regex_match(b, m, re)) return m[1];
  return b;
}

Point read_run_dir(const std::string& dir, const Machine& mach, bool one_node) {
  Point p;
  p.source = dir;
  p.group = group_of(dir);
  const std::string log = slurp(dir + "/train.log");
  const auto a = log.find("---- resolved deck");
  const auto b = log.find("---- end of deck ----");
  if (a == std::string::npos || b == std::string::npos || b < a)
    throw InputError("report: " + dir + "/train.log holds no resolved deck (not a pentad train log?)");
  const std::string deck = log.substr(log.find('\n', a) + 1, b - log.find('\n', a) - 1);
  int ranks = 1;
  try {
    const toml::table t = toml::parse(std::string_view(deck), std::string_view(dir));
    for (const char* k : {"dp", "tp", "pp", "cp"}) ranks *= int(t["parallel"][k].value_or(int64_t(1)));
  } catch (const toml::parse_error& e) {
    throw InputError("report: " + dir + "/train.log: the resolved deck does not parse: " +
                     std::string(e.description()));
  }
  const Config cfg = parse_config(deck, dir + "/train.log", {}, ranks);
  p.ranks = ranks;
  p.layout = describe_layout(cfg);
  // Metrics: every metrics*.jsonl of the directory (a requeued job writes several).
  std::vector<std::map<std::string, double>> rows;
  if (DIR* d = ::opendir(dir.c_str())) {
    std::vector<std::string> files;
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind("metrics", 0) == 0 && n.size() > 6 && n.substr(n.size() - 6) == ".jsonl") files.push_back(n);
    }
    ::closedir(d);
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::istringstream in(slurp(dir + "/" + f));
      std::string line;
      while (std::getline(in, line))
        if (line.size() > 2) rows.push_back(parse_json_line(line));
    }
  }
  if (rows.empty()) throw InputError("report: " + dir + " has no metrics*.jsonl rows (set log.metrics)");
  p.steps = int(rows.size());
  // The first step warms up (allocations, first touches): medians over the rest.
  std::vector<double> tps, ms, mfu, bub;
  for (size_t i = rows.size() > 1 ? 1 : 0; i < rows.size(); ++i) {
    tps.push_back(rows[i]["tokens_per_s"]);
    ms.push_back(rows[i]["step_ms"]);
    mfu.push_back(rows[i]["mfu"]);
    bub.push_back(rows[i].count("pp_bubble") ? rows[i]["pp_bubble"] : NAN);
  }
  p.tokens_per_s = median(tps);
  p.step_ms = median(ms);
  p.mfu = median(mfu);
  p.bubble = cfg.parallel.pp > 1 ? median(bub) : 0.0;
  p.peak_mem = 0;
  for (auto& r : rows) p.peak_mem = std::max(p.peak_mem, r["peak_mem_bytes"]);
  auto& last = rows.back();
  p.dp_bytes = last["dp_bytes_sent"];
  p.tp_bytes = last["tp_bytes_sent"];
  p.pp_bytes = last["pp_bytes_sent"];
  // Dropless MoE: the run's own receive load (the root's, as the peak is the
  // root's), an input of the memory model like the batch size.
  double moe_load = 1.0;
  if (cfg.model.n_experts > 0 && cfg.model.dropless) {
    double root_load = 0;
    for (auto& r : rows) root_load = std::max(root_load, r.count("moe_recv_load") ? r["moe_recv_load"] : 0.0);
    if (root_load > 0) moe_load = root_load;
  }
  const Prediction pr = predict(cfg, mach, 0, one_node ? ranks : 0, moe_load);
  p.oversubscribed = pr.time.oversubscription > 1 ? 1 : 0;
  p.pred_tokens_per_s = pr.time.tokens_per_s;
  p.pred_step_ms = pr.time.step_s * 1e3;
  p.pred_mfu = pr.time.mfu;
  p.pred_mem = pr.mem.stages[0].total;  // the root rank's stage, as measured
  p.pred_dp_bytes = pr.comm[0].dp_bytes;
  p.pred_tp_bytes = pr.comm[0].tp_bytes;
  p.pred_pp_bytes = pr.comm[0].pp_bytes;
  p.pred_bubble = pr.time.bubble;
  return p;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool q = false;
  for (char c : line) {
    if (c == '"') q = !q;
    else if (c == ',' && !q) {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') cur += c;
  }
  out.push_back(cur);
  return out;
}

std::vector<Point> read_csv(const std::string& path) {
  std::istringstream in(slurp(path));
  std::string line;
  if (!std::getline(in, line)) throw InputError("report: " + path + " is empty");
  const std::vector<std::string> head = split_csv(line);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < head.size(); ++i) col[head[i]] = i;
  for (const char* c : kColumns)
    if (!col.count(c)) throw InputError("report: " + path + ": missing column '" + c + "' (not a pentad report CSV?)");
  std::vector<Point> pts;
  int n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    const std::vector<std::string> f = split_csv(line);
    if (f.size() != head.size())
      throw InputError("report: " + path + ":" + std::to_string(n) + ": " + std::to_string(f.size()) +
                       " fields, the header has " + std::to_string(head.size()));
    Point p;
    p.source = path;
    p.group = f[col["group"]];
    p.layout = f[col["layout"]];
    auto num = [&](const char* c) {
      const std::string& s = f[col[c]];
      if (s.empty() || s == "nan") return double(NAN);
      char* end = nullptr;
      const double x = std::strtod(s.c_str(), &end);
      if (*end != '\0') throw InputError("report: " + path + ":" + std::to_string(n) + ": column " + c + ": not a number ('" + s + "')");
      return x;
    };
    p.ranks = int(num("ranks"));
    p.oversubscribed = int(num("oversubscribed"));
    p.steps = int(num("steps"));
    std::vector<double*> v = numbers(p);
    for (size_t i = 0; i < v.size(); ++i) *v[i] = num(kColumns[5 + i]);
    pts.push_back(p);
  }
  return pts;
}

void write_csv(const std::string& path, const std::vector<Point>& pts) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw InputError("report: --csv: cannot write '" + path + "'");
  for (size_t i = 0; i < std::size(kColumns); ++i) std::fprintf(f, "%s%s", i ? "," : "", kColumns[i]);
  std::fputc('\n', f);
  for (Point p : pts) {
    std::fprintf(f, "%s,%d,\"%s\",%d,%d", p.group.c_str(), p.ranks, p.layout.c_str(), p.oversubscribed, p.steps);
    for (double* x : numbers(p)) std::fprintf(f, ",%.6g", *x);
    std::fputc('\n', f);
  }
  if (std::fclose(f) != 0) throw InputError("report: --csv: writing '" + path + "' failed");
}

double err_pct(double pred, double meas) { return 100.0 * (pred - meas) / meas; }

// The plot: throughput per sweep group against ranks (measured and
// predicted), and predicted against measured peak memory. matplotlib (Debian
// python3-matplotlib), driven by a script written next to the PNG.
const char* kPlotScript = R"PY(
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1])))
groups = {}
for r in rows:
    groups.setdefault(r["group"], []).append(r)
fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
for i, (g, rs) in enumerate(sorted(groups.items())):
    rs.sort(key=lambda r: int(r["ranks"]))
    x = [int(r["ranks"]) for r in rs]
    c = "C%d" % (i % 10)
    ax[0].plot(x, [float(r["tokens_per_s"]) for r in rs], "o-", color=c, label=g + " measured")
    ax[0].plot(x, [float(r["pred_tokens_per_s"]) for r in rs], "x--", color=c, label=g + " predicted")
    for r in rs:
        if int(r["oversubscribed"]):
            ax[0].annotate("oversub.", (int(r["ranks"]), float(r["tokens_per_s"])), fontsize=7, color=c)
    ax[1].plot([float(r["peak_mem_bytes"]) / 2**20 for r in rs], [float(r["pred_mem_bytes"]) / 2**20 for r in rs],
               "o", color=c, label=g)
ax[0].set_xlabel("ranks"); ax[0].set_ylabel("tokens/s"); ax[0].set_xscale("log", base=2)
ax[0].set_title("throughput: measured (o) vs planner (x)"); ax[0].legend(fontsize=6)
lim = [0, max([float(r["peak_mem_bytes"]) / 2**20 for r in rows] + [float(r["pred_mem_bytes"]) / 2**20 for r in rows]) * 1.1]
ax[1].plot(lim, lim, "k:", lw=1)
ax[1].set_xlabel("measured peak MiB (root rank)"); ax[1].set_ylabel("predicted MiB")
ax[1].set_title("memory: prediction vs measurement"); ax[1].legend(fontsize=6)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=80)
)PY";

void plot(const std::vector<Point>& pts, const std::string& png) {
  const std::string csv = png + ".data.csv", py = png + ".plot.py";
  write_csv(csv, pts);
  {
    std::ofstream f(py);
    f << kPlotScript;
    if (!f) throw InputError("report: --plot: cannot write '" + py + "'");
  }
  const char* env = std::getenv("PENTAD_PYTHON");
  const std::string python = env && *env ? env : (::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3");
  const std::string cmd = "'" + python + "' '" + py + "' '" + csv + "' '" + png + "'";
  const int rc = std::system(cmd.c_str());
  std::remove(py.c_str());
  std::remove(csv.c_str());
  if (rc != 0)
    throw InputError("report: --plot: the plotting script failed (" + python +
                     " with matplotlib is needed: apt-get install python3-matplotlib)");
}

}  // namespace

int cmd_report(const std::vector<std::string>& args) {
  std::vector<std::string> inputs;
  std::string csv_out, png, machine_path;
  bool one_node = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw CliUsageError("report: " + a + " needs a value");
      return args[++i];
    };
    if (a == "--csv") csv_out = value();
    else if (a == "--plot") png = value();
    else if (a == "--machine") machine_path = value();
    else if (a == "--one-node") {
      one_node = true;
    } else if (!a.empty() && a[0] == '-') throw CliUsageError("report: unknown option '" + a + "'");
    else inputs.push_back(a);
  }
  if (inputs.empty()) throw CliUsageError("report: no run directory or CSV given");
  Machine mach;
  mach.name = "built-in defaults";
  if (!machine_path.empty()) mach = load_machine(machine_path);
  std::vector<Point> pts;
  for (const auto& in : inputs) {
    if (is_dir(in)) {
      pts.push_back(read_run_dir(in, mach, one_node));
    } else {
      std::vector<Point> c = read_csv(in);
      pts.insert(pts.end(), c.begin(), c.end());
    }
  }
  std::stable_sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) {
    return a.group != b.group ? a.group < b.group : a.ranks < b.ranks;
  });
  // Efficiency per group: (tokens/s per rank) / (the same at the group's smallest rank count).
  std::map<std::string, const Point*> base;
  for (const Point& p : pts)
    if (!base.count(p.group)) base[p.group] = &p;
  std::printf("%-16s %5s %-52s %10s %10s %7s %9s %9s %7s %10s %10s %7s %6s %6s %7s %7s\n", "group", "ranks",
              "layout", "tok/s", "pred", "err", "step ms", "pred", "err", "mem", "pred", "err", "eff", "pred",
              "bubble", "pred");
  double worst_mem = 0, worst_time = 0;
  for (const Point& p : pts) {
    const Point& b = *base[p.group];
    const double eff = (p.tokens_per_s / p.ranks) / (b.tokens_per_s / b.ranks);
    const double peff = (p.pred_tokens_per_s / p.ranks) / (b.pred_tokens_per_s / b.ranks);
    std::printf("%-16s %5d %-52s %10.4g %10.4g %+6.1f%% %9.4g %9.4g %+6.1f%% %10s %10s %+6.1f%% %6.2f %6.2f %7.3f %7.3f%s\n",
                p.group.c_str(), p.ranks, p.layout.c_str(), p.tokens_per_s, p.pred_tokens_per_s,
                err_pct(p.pred_tokens_per_s, p.tokens_per_s), p.step_ms, p.pred_step_ms,
                err_pct(p.pred_step_ms, p.step_ms), format_bytes(p.peak_mem).c_str(),
                format_bytes(p.pred_mem).c_str(), err_pct(p.pred_mem, p.peak_mem), eff, peff, p.bubble,
                p.pred_bubble, p.oversubscribed ? "  (oversubscribed)" : "");
    worst_mem = std::max(worst_mem, std::fabs(err_pct(p.pred_mem, p.peak_mem)));
    worst_time = std::max(worst_time, std::fabs(err_pct(p.pred_step_ms, p.step_ms)));
  }
  std::printf("communication per step (root rank, bytes sent): measured / predicted\n");
  for (const Point& p : pts)
    std::printf("  %-16s %5d %-52s dp %s / %s | tp %s / %s | pp %s / %s\n", p.group.c_str(), p.ranks,
                p.layout.c_str(), format_bytes(p.dp_bytes).c_str(), format_bytes(p.pred_dp_bytes).c_str(),
                format_bytes(p.tp_bytes).c_str(), format_bytes(p.pred_tp_bytes).c_str(),
                format_bytes(p.pp_bytes).c_str(), format_bytes(p.pred_pp_bytes).c_str());
  std::printf("%zu points | worst memory error %.1f%% | worst step-time error %.1f%%\n", pts.size(), worst_mem,
              worst_time);
  if (!csv_out.empty()) {
    write_csv(csv_out, pts);
    std::printf("csv written to %s\n", csv_out.c_str());
  }
  if (!png.empty()) {
    plot(pts, png);
    std::printf("plot written to %s\n", png.c_str());
  }
  return 0;
}

}  // namespace pentad
