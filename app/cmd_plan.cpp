// `pentad plan` (see planner_cli.hpp). Every candidate layout is a set of
// --set overrides checked by the deck parser itself (parse_config), so a
// layout the planner prints is one `pentad train` accepts for that rank count.
#include "commands.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <toml++/toml.h>

#include "config/config.hpp"
#include "core/error.hpp"
#include "plan/planner.hpp"

namespace pentad {
namespace {

std::string read_text(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(what + ": cannot read '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int positive_int(const std::string& flag, const std::string& s) {
  try {
    size_t used = 0;
    const long x = std::stol(s, &used);
    if (used == s.size() && x >= 1 && x <= 1 << 20) return int(x);
  } catch (const std::exception&) {
  }
  throw CliUsageError(flag + " needs a positive integer (got '" + s + "')");
}

// --moe-load F: a positive, finite number.
double positive_number(const std::string& flag, const std::string& s) {
  try {
    size_t used = 0;
    const double x = std::stod(s, &used);
    if (used == s.size() && std::isfinite(x) && x > 0) return x;
  } catch (const std::exception&) {
  }
  throw CliUsageError(flag + " needs a positive number (got '" + s + "')");
}

// The deck's parallel.dp (deck, then the last --set), for the global batch.
int deck_dp(const std::string& text, const std::string& path, const std::vector<std::string>& sets) {
  int dp = 1;
  try {
    const toml::table root = toml::parse(std::string_view(text), std::string_view(path));
    if (auto v = root["parallel"]["dp"].value<int64_t>()) dp = int(*v);
  } catch (const toml::parse_error&) {
    // parse_config reports syntax errors with the line.
  }
  for (const auto& s : sets)
    if (s.rfind("parallel.dp=", 0) == 0) dp = positive_int("--set parallel.dp", s.substr(12));
  return dp;
}

const std::vector<std::string> kSingle = {"parallel.dp=1", "parallel.tp=1", "parallel.pp=1",
                                          "parallel.cp=1", "parallel.ep=1", "parallel.virtual_stages=1",
                                          "parallel.sp=false", "parallel.zero=0", "parallel.stage_layers=\"\""};

struct Candidate {
  Config cfg;
  Prediction pred;
  std::vector<std::string> sets;
};

std::string sets_text(const std::vector<std::string>& sets) {
  std::string s;
  // Shell-quoted, so the printed command can be pasted (TOML strings keep their quotes).
  for (const auto& x : sets) s += " --set " + (x.find_first_of("\"' $") == std::string::npos ? x : "'" + x + "'");
  return s;
}

// --layout k=v,... -> deck overrides. Keys: dp tp pp cp ep zero sp v schedule
// mb accum recompute.
std::vector<std::string> layout_sets(const std::string& spec, int b_global, int deck_mb) {
  std::map<std::string, std::string> kv;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw CliUsageError("--layout: expected key=value items separated by commas (got '" + item + "')");
    kv[item.substr(0, eq)] = item.substr(eq + 1);
  }
  static const std::map<std::string, std::string> keys = {
      {"dp", "parallel.dp"},           {"tp", "parallel.tp"},         {"pp", "parallel.pp"},
      {"cp", "parallel.cp"},           {"ep", "parallel.ep"},         {"zero", "parallel.zero"},
      {"sp", "parallel.sp"},           {"v", "parallel.virtual_stages"}, {"schedule", "parallel.schedule"},
      {"mb", "train.micro_batch"},     {"accum", "train.grad_accum"}, {"recompute", "train.recompute"}};
  std::vector<std::string> out;
  for (const auto& [k, v] : kv) {
    auto it = keys.find(k);
    if (it == keys.end())
      throw CliUsageError("--layout: unknown key '" + k + "' (known: dp tp pp cp ep zero sp v schedule mb accum recompute)");
    std::string val = v;
    if (k == "recompute" || k == "schedule") val = "\"" + v + "\"";
    if (k == "sp") val = (v == "1" || v == "true") ? "true" : (v == "0" || v == "false") ? "false" : v;
    out.push_back(it->second + "=" + val);
  }
  // Keep the deck's global batch: grad_accum follows dp and the micro-batch.
  // Without mb=, the largest micro-batch up to the deck's that divides the
  // per-dp batch and gives the pipeline at least pp micro-batches.
  if (!kv.count("accum")) {
    const int dp = kv.count("dp") ? positive_int("--layout dp", kv["dp"]) : 1;
    const int pp = kv.count("pp") ? positive_int("--layout pp", kv["pp"]) : 1;
    if (b_global % dp != 0)
      throw InputError("--layout: the deck's global batch of " + std::to_string(b_global) +
                       " sequences does not split over dp=" + std::to_string(dp));
    const int per_dp = b_global / dp;
    int mb = 0;
    if (kv.count("mb")) {
      mb = positive_int("--layout mb", kv["mb"]);
    } else {
      for (int c = std::min(deck_mb, per_dp); c >= 1 && mb == 0; --c)
        if (per_dp % c == 0 && per_dp / c >= pp) mb = c;
      for (int c = std::min(deck_mb, per_dp); c >= 1 && mb == 0; --c)
        if (per_dp % c == 0) mb = c;
      out.push_back("train.micro_batch=" + std::to_string(mb));
    }
    if (per_dp % mb != 0)
      throw InputError("--layout: the deck's global batch of " + std::to_string(b_global) +
                       " sequences does not split into dp=" + std::to_string(dp) + " x micro_batch=" +
                       std::to_string(mb) + " (give accum= or another mb=)");
    out.push_back("train.grad_accum=" + std::to_string(per_dp / mb));
  }
  return out;
}

// Machine-readable prediction (tests, scripts): per stage bytes by category
// and comm bytes per group, and the step-time terms.
std::string prediction_json(const Config& cfg, const Prediction& pr) {
  std::ostringstream o;
  o.precision(17);
  o << "{\"layout\":\"" << describe_layout(cfg) << "\",\"moe_load\":";
  if (pr.mem.moe_load > 0)
    o << pr.mem.moe_load;  // dropless MoE with ep > 1: the receive load the MoE buffers are for
  else
    o << "null";
  o << ",\"stages\":[";
  for (size_t s = 0; s < pr.mem.stages.size(); ++s) {
    const StageMemory& m = pr.mem.stages[s];
    const StageComm& c = pr.comm[s];
    o << (s ? "," : "") << "{";
    for (int k = 0; k < kMemCategories; ++k) o << "\"" << mem_name(Mem(k)) << "\":" << m.bytes[size_t(k)] << ",";
    o << "\"total\":" << m.total << ",\"slot_bytes\":" << m.slot_bytes << ",\"param_elems\":" << m.param_elems
      << ",\"shard_elems\":" << m.shard_elems << ",\"dp_bytes\":" << c.dp_bytes << ",\"tp_bytes\":" << c.tp_bytes
      << ",\"pp_bytes\":" << c.pp_bytes << ",\"cp_bytes\":" << c.cp_bytes << ",\"ep_bytes\":" << c.ep_bytes
      << ",\"expert_dp_bytes\":" << c.edp_bytes << "}";
  }
  const TimeEstimate& t = pr.time;
  o << "],\"step_s\":" << t.step_s << ",\"compute_s\":" << t.compute_s << ",\"bubble\":" << t.bubble
    << ",\"tp_s\":" << t.tp_s << ",\"dp_exposed_s\":" << t.dp_exposed_s << ",\"pp_s\":" << t.pp_s
    << ",\"cp_s\":" << t.cp_s << ",\"ep_s\":" << t.ep_s
    << ",\"tokens_per_s\":" << t.tokens_per_s << ",\"mfu\":" << t.mfu << ",\"worst_total\":" << pr.mem.worst_total()
    << "}\n";
  return o.str();
}

void print_row(int i, const Candidate& c) {
  const TimeEstimate& t = c.pred.time;
  double dp = 0, tp = 0, pp = 0;
  for (const StageComm& s : c.pred.comm) {
    dp = std::max(dp, s.dp_bytes);
    tp = std::max(tp, s.tp_bytes);
    pp = std::max(pp, s.pp_bytes);
  }
  std::printf("%4d  %-58s %11s %10.4g %11.4g %6.1f%% %6.3f %10s %10s %10s\n", i, describe_layout(c.cfg).c_str(),
              format_bytes(c.pred.mem.worst_total()).c_str(), t.step_s * 1e3, t.tokens_per_s, 100 * t.mfu,
              t.bubble, format_bytes(dp).c_str(), format_bytes(tp).c_str(), format_bytes(pp).c_str());
}

}  // namespace

int cmd_plan(const std::vector<std::string>& args) {
  std::string deck, machine_path, layout, gpu_mem;
  int ranks = 0, gpn = 0, top = 10;
  std::optional<double> moe_load;  // dropless MoE: received rows over the balanced share (planner.hpp)
  bool explain = false, json = false;
  std::vector<std::string> sets;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw CliUsageError("plan: " + a + " needs a value");
      return args[++i];
    };
    if (a == "--ranks") ranks = positive_int("--ranks", value());
    else if (a == "--gpu-mem") gpu_mem = value();
    else if (a == "--gpus-per-node") gpn = positive_int("--gpus-per-node", value());
    else if (a == "--machine") machine_path = value();
    else if (a == "--layout") layout = value();
    else if (a == "--top") top = positive_int("--top", value());
    else if (a == "--moe-load") moe_load = positive_number("--moe-load", value());
    else if (a == "--explain") explain = true;
    else if (a == "--json") json = true;
    else if (a == "--set") sets.push_back(value());
    else if (!a.empty() && a[0] == '-') throw CliUsageError("plan: unknown option '" + a + "'");
    else if (deck.empty()) deck = a;
    else throw CliUsageError("plan: more than one deck given ('" + deck + "' and '" + a + "')");
  }
  if (deck.empty()) throw CliUsageError("plan: no input deck given");
  if (ranks == 0) throw CliUsageError("plan: --ranks N is required");
  Machine mach;
  mach.name = "built-in defaults (8xH100-like; see input/machines/h100-node.toml)";
  if (!machine_path.empty()) mach = load_machine(machine_path);
  if (!gpu_mem.empty()) mach.memory_bytes = parse_bytes(gpu_mem, "--gpu-mem");
  if (gpn > 0) mach.devices_per_node = gpn;

  const std::string text = read_text(deck, "plan");
  std::vector<std::string> base_sets = sets;
  base_sets.insert(base_sets.end(), kSingle.begin(), kSingle.end());
  const Config base = parse_config(text, deck, base_sets, 1);  // the model and batch are valid
  if (moe_load && base.model.n_experts == 0)
    throw InputError("--moe-load: the deck has no MoE blocks (model.n_experts = 0)");
  if (moe_load && !base.model.dropless) {
    std::ostringstream cf;
    cf << base.model.capacity_factor;
    throw InputError("--moe-load: applies to dropless routing (model.dropless = true); with model.capacity_factor=" +
                     cf.str() + " the rows are modelled as uniform routing under the capacity");
  }
  const int dp0 = deck_dp(text, deck, sets);
  const int b_global = base.train.micro_batch * base.train.grad_accum * dp0;
  if (!json)
    std::printf("plan: %s on %d ranks | global batch %d x %d tokens | machine %s: %.3g TFLOP/s peak x %.0f%%, "
              "%s per device, %d per node, %.3g/%.3g GB/s intra/inter-node\n",
              deck.c_str(), ranks, b_global, base.model.seq_len, mach.name.c_str(), mach.peak_tflops,
              100 * mach.compute_efficiency, format_bytes(mach.memory_bytes).c_str(), mach.devices_per_node,
              mach.intra_node_gbs, mach.inter_node_gbs);

  if (!layout.empty()) {
    std::vector<std::string> s = sets;
    if (layout != "deck") {  // "deck": the deck's own layout (after --set)
      const std::vector<std::string> ls = layout_sets(layout, b_global, base.train.micro_batch);
      s.insert(s.end(), ls.begin(), ls.end());
    }
    const Config cfg = parse_config(text, deck, s, ranks);
    const Prediction pr = predict(cfg, mach, gpn, 0, moe_load.value_or(1.0));
    const double need = pr.mem.worst_total();
    if (json) {
      std::fputs(prediction_json(cfg, pr).c_str(), stdout);
      return 0;
    }
    if (explain) std::fputs(explain_prediction(cfg, pr, mach).c_str(), stdout);
    else
      std::printf("layout %s: %s per rank (worst stage %d), predicted step %.4g ms, %.4g tokens/s, MFU %.1f%%\n",
                  describe_layout(cfg).c_str(), format_bytes(need).c_str(), pr.mem.worst_stage, pr.time.step_s * 1e3,
                  pr.time.tokens_per_s, 100 * pr.time.mfu);
    std::printf("fits: %s (%s of %s per device)\n", need <= mach.memory_bytes ? "yes" : "NO",
                format_bytes(need).c_str(), format_bytes(mach.memory_bytes).c_str());
    std::printf("run: pentad train %s%s\n", deck.c_str(), sets_text(s).c_str());
    return need <= mach.memory_bytes ? 0 : 3;
  }

  // Enumerate: dp x cp x tp x pp = ranks, ep | dp for MoE decks, sp,
  // schedule, ZeRO stage, recompute and micro-batch, keeping the global batch.
  // The deck's checks decide validity (seq_len divisible by cp or 2*cp,
  // ep | n_experts, MoE refuses sp and cp, ...).
  std::vector<Candidate> fit;
  int n_tried = 0, n_invalid = 0, n_oom = 0;
  std::map<std::string, int> why_invalid;
  const char* rcs[] = {"none", "selective", "full"};
  const bool moe = base.model.n_experts > 0;
  for (int dp = 1; dp <= ranks; ++dp) {
    if (ranks % dp || b_global % dp) continue;
    for (int cp = 1; cp <= ranks / dp; ++cp) {
    if ((ranks / dp) % cp) continue;
    for (int tp = 1; tp <= ranks / dp / cp; ++tp) {
      if ((ranks / dp / cp) % tp) continue;
      const int pp = ranks / dp / cp / tp;
      for (int ep = 1; ep <= (moe ? dp : 1); ++ep) {
      if (dp % ep) continue;
      for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp)
        for (const char* sched_c : {"1f1b", "interleaved"}) {
          const std::string sched = sched_c;
          if (sched == "interleaved" && pp == 1) continue;
          for (int zero = 0; zero <= 3; ++zero)
            for (const char* rc : rcs)
              for (int mb = 1; mb <= b_global / dp; ++mb) {
                if ((b_global / dp) % mb) continue;
                std::vector<std::string> s = sets;
                const std::vector<std::string> ls = {
                    "parallel.dp=" + std::to_string(dp), "parallel.tp=" + std::to_string(tp),
                    "parallel.pp=" + std::to_string(pp), "parallel.cp=" + std::to_string(cp),
                    "parallel.ep=" + std::to_string(ep), "parallel.sp=" + std::string(sp ? "true" : "false"),
                    "parallel.schedule=\"" + sched + "\"",
                    "parallel.virtual_stages=" + std::string(sched == "interleaved" ? "2" : "1"),
                    "parallel.zero=" + std::to_string(zero), "train.recompute=\"" + std::string(rc) + "\"",
                    "train.micro_batch=" + std::to_string(mb),
                    "train.grad_accum=" + std::to_string(b_global / dp / mb)};
                s.insert(s.end(), ls.begin(), ls.end());
                ++n_tried;
                Config cfg;
                try {
                  cfg = parse_config(text, deck, s, ranks);
                } catch (const InputError& e) {
                  ++n_invalid;
                  std::string w = e.what();
                  const auto colon = w.find(": ");
                  w = colon == std::string::npos ? w : w.substr(colon + 2);
                  why_invalid[w.substr(0, w.find(' '))]++;
                  continue;
                }
                Candidate c{cfg, predict(cfg, mach, gpn, 0, moe_load.value_or(1.0)), ls};
                if (c.pred.mem.worst_total() > mach.memory_bytes) {
                  ++n_oom;
                  continue;
                }
                fit.push_back(std::move(c));
              }
        }
      }
    }
    }
  }
  std::sort(fit.begin(), fit.end(), [](const Candidate& a, const Candidate& b) {
    if (a.pred.time.step_s != b.pred.time.step_s) return a.pred.time.step_s < b.pred.time.step_s;
    return a.pred.mem.worst_total() < b.pred.mem.worst_total();
  });
  std::printf("%d layouts tried: %d rejected by the deck's checks, %d do not fit in %s, %zu fit\n", n_tried,
              n_invalid, n_oom, format_bytes(mach.memory_bytes).c_str(), fit.size());
  if (n_invalid > 0) {
    std::printf("  rejections by first key named:");
    for (const auto& [k, n] : why_invalid) std::printf(" %s (%d)", k.c_str(), n);
    std::printf("\n");
  }
  std::printf("  not enumerated: afab (same bubble as 1f1b, more memory), cp_layout (kept at the deck's), "
              "virtual_stages > 2, bucket_mb (kept at the deck's)\n");
  if (fit.empty() && n_oom == 0) {
    std::printf("no valid layout for %d ranks: every candidate breaks a deck check above (a larger global "
                "batch, e.g. --set train.grad_accum=..., gives dp and pp more room)\n", ranks);
    return 3;
  }
  if (fit.empty()) {
    std::printf("no layout fits: raise --gpu-mem, add ranks, or shrink the micro-batch/sequence\n");
    return 3;
  }
  std::printf("%4s  %-58s %11s %10s %11s %7s %6s %10s %10s %10s\n", "rank", "layout", "mem/rank", "step ms",
              "tokens/s", "MFU", "bubble", "dp/step", "tp/step", "pp/step");
  for (int i = 0; i < std::min<int>(top, int(fit.size())); ++i) print_row(i + 1, fit[size_t(i)]);
  const Candidate& w = fit.front();
  std::printf("\nwinner: %s\n", describe_layout(w.cfg).c_str());
  std::fputs(explain_prediction(w.cfg, w.pred, mach).c_str(), stdout);
  // Why: against the best layout of each other (dp, tp, pp) shape.
  std::printf("why: the predicted step is the sum above; the best layout of each other dp/tp/pp shape:\n");
  std::map<std::string, const Candidate*> best_shape;
  for (const Candidate& c : fit) {
    const std::string k = "dp=" + std::to_string(c.cfg.parallel.dp) + ",tp=" + std::to_string(c.cfg.parallel.tp) +
                          ",pp=" + std::to_string(c.cfg.parallel.pp) + ",cp=" + std::to_string(c.cfg.parallel.cp) +
                          ",ep=" + std::to_string(c.cfg.parallel.ep);
    if (!best_shape.count(k)) best_shape[k] = &c;
  }
  for (const auto& [k, c] : best_shape) {
    if (c == &w) continue;
    const TimeEstimate& a = c->pred.time;
    const TimeEstimate& b = w.pred.time;
    std::printf("  %-58s %+8.3g ms: compute %+.3g, bubble %+.3g, tp %+.3g, dp exposed %+.3g, pp %+.3g\n",
                describe_layout(c->cfg).c_str(), (a.step_s - b.step_s) * 1e3, (a.compute_s - b.compute_s) * 1e3,
                (a.bubble_s - b.bubble_s) * 1e3, (a.tp_s - b.tp_s) * 1e3, (a.dp_exposed_s - b.dp_exposed_s) * 1e3,
                (a.pp_s - b.pp_s) * 1e3);
  }
  // The user's --set, less the keys the layout sets, then the layout.
  std::vector<std::string> run_sets;
  auto key_of = [](const std::string& x) { return x.substr(0, x.find('=')); };
  for (const auto& x : sets)
    if (std::none_of(w.sets.begin(), w.sets.end(), [&](const std::string& y) { return key_of(y) == key_of(x); }))
      run_sets.push_back(x);
  run_sets.insert(run_sets.end(), w.sets.begin(), w.sets.end());
  std::printf("run: pentad train %s%s\n", deck.c_str(), sets_text(run_sets).c_str());
  return 0;
}

}  // namespace pentad
