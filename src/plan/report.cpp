// `pentad report`'s library (report.hpp): run directories and report CSVs
// read into points, the points' table and the CSV writer. The medians skip
// the first step, which warms up (allocations, first touches).
#include "plan/report.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "config/config.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/text.hpp"

namespace pentad {
namespace {

const char* kColumns[] = {"group", "ranks", "layout", "oversubscribed", "steps", "tokens_per_s",
                          "pred_tokens_per_s", "step_ms", "pred_step_ms", "mfu", "pred_mfu", "peak_mem_bytes",
                          "pred_mem_bytes", "dp_bytes", "pred_dp_bytes", "tp_bytes", "pred_tp_bytes", "pp_bytes",
                          "pred_pp_bytes", "bubble", "pred_bubble"};

// The numeric columns after kColumns[4], in order.
std::vector<double*> numbers(ReportPoint& p) {
  return {&p.tokens_per_s, &p.pred_tokens_per_s, &p.step_ms, &p.pred_step_ms, &p.mfu, &p.pred_mfu,
          &p.peak_mem, &p.pred_mem, &p.dp_bytes, &p.pred_dp_bytes, &p.tp_bytes, &p.pred_tp_bytes,
          &p.pp_bytes, &p.pred_pp_bytes, &p.bubble, &p.pred_bubble};
}

bool is_dir(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string slurp(const std::string& path) {
  std::optional<std::string> text = read_text(path);
  if (!text) throw InputError("report: cannot read '" + path + "'");
  return std::move(*text);
}

// printf onto a string.
[[gnu::format(printf, 2, 3)]] void appendf(std::string& out, const char* fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  const size_t at = out.size();
  out.resize(at + size_t(n) + 1);
  std::vsnprintf(out.data() + at, size_t(n) + 1, fmt, ap2);
  va_end(ap2);
  out.resize(at + size_t(n));
}

// One metrics row: its numbers by key (null, booleans and other non-numbers
// read as NaN; strings are left out).
using MetricsRow = std::map<std::string, double>;

MetricsRow parse_metrics_line(const std::string& line, const std::string& where) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw InputError("report: " + where + ": not a JSON object");
  MetricsRow row;
  for (const auto& [key, v] : j.items()) {
    if (v.is_string()) continue;
    row[key] = v.is_number() ? v.get<double>() : double(NAN);
  }
  return row;
}

// Every metrics*.jsonl of the directory in name order (a requeued job
// writes several), one row per line.
std::vector<MetricsRow> read_metrics(const std::string& dir) {
  std::vector<std::string> files;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind("metrics", 0) == 0 && n.size() > 6 && n.substr(n.size() - 6) == ".jsonl") files.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  std::vector<MetricsRow> rows;
  for (const auto& f : files) {
    std::istringstream in(slurp(dir + "/" + f));
    std::string line;
    for (int n = 1; std::getline(in, line); ++n)
      if (line.size() > 2) rows.push_back(parse_metrics_line(line, dir + "/" + f + ":" + std::to_string(n)));
  }
  return rows;
}

// The median of the finite values (the upper one); NaN if none.
double finite_median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  return median_of(std::move(v));
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

// The resolved deck train.log printed, parsed for the layout of the run.
Config run_config(const std::string& dir) {
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
  return parse_config(deck, dir + "/train.log", {}, ranks);
}

// The most ranks on one node, from the "placement: N rank(s) on K node(s):
// host (c) ..." line of train.log (the last run's); 0 when there is none.
// The node count goes to *nodes (0 when there is no such line).
int ranks_per_node_of(const std::string& dir, int* nodes) {
  std::istringstream in(slurp(dir + "/train.log"));
  std::string line;
  int most = 0;
  *nodes = 0;
  static const std::regex count(R"( \(([0-9]+)\))");
  while (std::getline(in, line)) {
    if (line.rfind("placement: ", 0) != 0) continue;
    most = 0;
    *nodes = 0;
    const std::string hosts = line.substr(line.find(':', 11) + 1);
    for (auto it = std::sregex_iterator(hosts.begin(), hosts.end(), count); it != std::sregex_iterator(); ++it) {
      most = std::max(most, std::stoi((*it)[1]));
      ++*nodes;
    }
  }
  return most;
}

// The measured side of a point: medians over the steps after the first,
// peak memory over all, bytes sent in the last step.
void measure(ReportPoint& p, std::vector<MetricsRow>& rows, bool pipelined) {
  p.steps = int(rows.size());
  std::vector<double> tps, ms, mfu, bub;
  for (size_t i = rows.size() > 1 ? 1 : 0; i < rows.size(); ++i) {
    tps.push_back(rows[i]["tokens_per_s"]);
    ms.push_back(rows[i]["step_ms"]);
    mfu.push_back(rows[i]["mfu"]);
    bub.push_back(rows[i].count("pp_bubble") ? rows[i]["pp_bubble"] : NAN);
  }
  p.tokens_per_s = finite_median(tps);
  p.step_ms = finite_median(ms);
  p.mfu = finite_median(mfu);
  p.bubble = pipelined ? finite_median(bub) : 0.0;
  p.peak_mem = 0;
  for (auto& r : rows) p.peak_mem = std::max(p.peak_mem, r["peak_mem_bytes"]);
  auto& last = rows.back();
  p.dp_bytes = last["dp_bytes_sent"];
  p.tp_bytes = last["tp_bytes_sent"];
  p.pp_bytes = last["pp_bytes_sent"];
}

ReportPoint read_run_dir(const std::string& dir, const Machine& mach, bool one_node) {
  ReportPoint p;
  p.source = dir;
  p.group = group_of(dir);
  const Config cfg = run_config(dir);
  const int ranks = cfg.parallel.dp * cfg.parallel.tp * cfg.parallel.pp * cfg.parallel.cp;
  p.ranks = ranks;
  p.layout = describe_layout(cfg);
  std::vector<MetricsRow> rows = read_metrics(dir);
  if (rows.empty()) throw InputError("report: " + dir + " has no metrics*.jsonl rows (set log.metrics)");
  measure(p, rows, cfg.parallel.pp > 1);
  // Dropless MoE: the run's own receive load (the root's, as the peak is the
  // root's), an input of the memory model like the batch size.
  double moe_load = 1.0;
  if (cfg.model.n_experts > 0 && cfg.model.dropless) {
    double root_load = 0;
    for (auto& r : rows) root_load = std::max(root_load, r.count("moe_recv_load") ? r["moe_recv_load"] : 0.0);
    if (root_load > 0) moe_load = root_load;
  }
  // Ranks per node: what the run's placement line says (`pentad train`
  // prints it), unless --one-node; without one, the machine file's devices.
  int nodes = 0;
  const int placed_rpn = ranks_per_node_of(dir, &nodes);
  const int rpn = one_node ? ranks : placed_rpn;
  if (nodes > 1) p.layout += ",nodes=" + std::to_string(nodes);
  const Prediction pr = predict(cfg, mach, 0, rpn, moe_load);
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

// One data row of a report CSV (`at` = path:line for messages).
ReportPoint csv_point(const std::vector<std::string>& f, std::map<std::string, size_t>& col, const std::string& at) {
  ReportPoint p;
  p.group = f[col["group"]];
  p.layout = f[col["layout"]];
  auto num = [&](const char* c) {
    const std::string& s = f[col[c]];
    if (s.empty() || s == "nan") return double(NAN);
    char* end = nullptr;
    const double x = std::strtod(s.c_str(), &end);
    if (*end != '\0') throw InputError("report: " + at + ": column " + c + ": not a number ('" + s + "')");
    return x;
  };
  p.ranks = int(num("ranks"));
  p.oversubscribed = int(num("oversubscribed"));
  p.steps = int(num("steps"));
  std::vector<double*> v = numbers(p);
  for (size_t i = 0; i < v.size(); ++i) *v[i] = num(kColumns[5 + i]);
  return p;
}

std::vector<ReportPoint> read_csv(const std::string& path) {
  std::istringstream in(slurp(path));
  std::string line;
  if (!std::getline(in, line)) throw InputError("report: " + path + " is empty");
  const std::vector<std::string> head = split_csv(line);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < head.size(); ++i) col[head[i]] = i;
  for (const char* c : kColumns)
    if (!col.count(c)) throw InputError("report: " + path + ": missing column '" + c + "' (not a pentad report CSV?)");
  std::vector<ReportPoint> pts;
  int n = 1;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    const std::vector<std::string> f = split_csv(line);
    const std::string at = path + ":" + std::to_string(n);
    if (f.size() != head.size())
      throw InputError("report: " + at + ": " + std::to_string(f.size()) + " fields, the header has " +
                       std::to_string(head.size()));
    pts.push_back(csv_point(f, col, at));
    pts.back().source = path;
  }
  return pts;
}

double err_pct(double pred, double meas) { return 100.0 * (pred - meas) / meas; }

std::string bytes(double b) { return format_bytes(b, 2, true); }

}  // namespace

std::vector<ReportPoint> read_report_input(const std::string& path, const Machine& mach, bool one_node) {
  if (is_dir(path)) return {read_run_dir(path, mach, one_node)};
  return read_csv(path);
}

void sort_report_points(std::vector<ReportPoint>& pts) {
  std::stable_sort(pts.begin(), pts.end(), [](const ReportPoint& a, const ReportPoint& b) {
    return a.group != b.group ? a.group < b.group : a.ranks < b.ranks;
  });
}

std::string report_table(const std::vector<ReportPoint>& pts) {
  // Efficiency per group: (tokens/s per rank) / (the same at the group's smallest rank count).
  std::map<std::string, const ReportPoint*> base;
  for (const ReportPoint& p : pts)
    if (!base.count(p.group)) base[p.group] = &p;
  std::string out;
  appendf(out, "%-16s %5s %-52s %10s %10s %7s %9s %9s %7s %10s %10s %7s %6s %6s %7s %7s\n", "group", "ranks",
          "layout", "tok/s", "pred", "err", "step ms", "pred", "err", "mem", "pred", "err", "eff", "pred", "bubble",
          "pred");
  double worst_mem = 0, worst_time = 0;
  for (const ReportPoint& p : pts) {
    const ReportPoint& b = *base[p.group];
    const double eff = (p.tokens_per_s / p.ranks) / (b.tokens_per_s / b.ranks);
    const double peff = (p.pred_tokens_per_s / p.ranks) / (b.pred_tokens_per_s / b.ranks);
    appendf(out,
            "%-16s %5d %-52s %10.4g %10.4g %+6.1f%% %9.4g %9.4g %+6.1f%% %10s %10s %+6.1f%% %6.2f %6.2f %7.3f %7.3f%s\n",
            p.group.c_str(), p.ranks, p.layout.c_str(), p.tokens_per_s, p.pred_tokens_per_s,
            err_pct(p.pred_tokens_per_s, p.tokens_per_s), p.step_ms, p.pred_step_ms,
            err_pct(p.pred_step_ms, p.step_ms), bytes(p.peak_mem).c_str(), bytes(p.pred_mem).c_str(),
            err_pct(p.pred_mem, p.peak_mem), eff, peff, p.bubble, p.pred_bubble,
            p.oversubscribed ? "  (oversubscribed)" : "");
    worst_mem = std::max(worst_mem, std::fabs(err_pct(p.pred_mem, p.peak_mem)));
    worst_time = std::max(worst_time, std::fabs(err_pct(p.pred_step_ms, p.step_ms)));
  }
  appendf(out, "communication per step (root rank, bytes sent): measured / predicted\n");
  for (const ReportPoint& p : pts)
    appendf(out, "  %-16s %5d %-52s dp %s / %s | tp %s / %s | pp %s / %s\n", p.group.c_str(), p.ranks,
            p.layout.c_str(), bytes(p.dp_bytes).c_str(), bytes(p.pred_dp_bytes).c_str(), bytes(p.tp_bytes).c_str(),
            bytes(p.pred_tp_bytes).c_str(), bytes(p.pp_bytes).c_str(), bytes(p.pred_pp_bytes).c_str());
  appendf(out, "%zu points | worst memory error %.1f%% | worst step-time error %.1f%%\n", pts.size(), worst_mem,
          worst_time);
  return out;
}

void write_report_csv(const std::string& path, const std::vector<ReportPoint>& pts) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw InputError("report: --csv: cannot write '" + path + "'");
  for (size_t i = 0; i < std::size(kColumns); ++i) std::fprintf(f, "%s%s", i ? "," : "", kColumns[i]);
  std::fputc('\n', f);
  for (ReportPoint p : pts) {
    std::fprintf(f, "%s,%d,\"%s\",%d,%d", p.group.c_str(), p.ranks, p.layout.c_str(), p.oversubscribed, p.steps);
    for (double* x : numbers(p)) std::fprintf(f, ",%.6g", *x);
    std::fputc('\n', f);
  }
  if (std::fclose(f) != 0) throw InputError("report: --csv: writing '" + path + "' failed");
}

}  // namespace pentad
