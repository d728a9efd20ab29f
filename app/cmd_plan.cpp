// `pentad plan DECK --ranks N ...`: enumerates layouts for a rank count,
// drops those that do not fit, ranks the rest by predicted step time
// (planner.hpp). Every candidate layout is a set of --set overrides checked
// by the deck parser itself (parse_config), so a layout the planner prints
// is one `pentad train` accepts for that rank count.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "commands.hpp"
#include "config/config.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/text.hpp"
#include "plan/planner.hpp"

namespace pentad {
namespace {

// The parsed command line, as text until checked (in the hand-written
// parser's words).
struct PlanArgs {
  std::string deck, ranks, gpu_mem, gpus_per_node, machine, layout, top, moe_load;
  bool explain = false, json = false;
  std::vector<std::string> sets;
};

// PlanArgs checked, and what they name loaded.
struct PlanInputs {
  std::string deck, text, layout;
  int ranks = 0, gpn = 0, top = 10;
  std::optional<double> moe_load;  // dropless MoE: received rows over the balanced share (planner.hpp)
  bool explain = false, json = false;
  std::vector<std::string> sets;
  Machine mach;
  Config base;       // the deck on one rank (the model and batch are valid)
  int b_global = 0;  // sequences per step
};

std::string bytes(double b) { return format_bytes(b, 2, true); }

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
                                          "parallel.sp=false", "parallel.expert_tp=false", "parallel.zero=0",
                                          "parallel.stage_layers=\"\""};

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

// --layout k=v,... -> deck overrides. Keys: dp tp pp cp ep zero sp etp v
// schedule mb accum recompute.
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
      {"sp", "parallel.sp"},           {"etp", "parallel.expert_tp"},  {"v", "parallel.virtual_stages"},
      {"schedule", "parallel.schedule"},
      {"mb", "train.micro_batch"},     {"accum", "train.grad_accum"}, {"recompute", "train.recompute"}};
  std::vector<std::string> out;
  for (const auto& [k, v] : kv) {
    auto it = keys.find(k);
    if (it == keys.end())
      throw CliUsageError("--layout: unknown key '" + k +
                          "' (known: dp tp pp cp ep zero sp etp v schedule mb accum recompute)");
    std::string val = v;
    if (k == "recompute" || k == "schedule") val = "\"" + v + "\"";
    if (k == "sp" || k == "etp") val = (v == "1" || v == "true") ? "true" : (v == "0" || v == "false") ? "false" : v;
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

using Json = nlohmann::ordered_json;  // keys in insertion order

// Whole numbers (bytes, element counts) as JSON integers, as they always
// were printed; nlohmann-json would write 1024.0.
Json json_number(double x) {
  if (x == std::floor(x) && std::fabs(x) < 0x1p53) return Json(static_cast<int64_t>(x));
  return Json(x);
}

// Machine-readable prediction (tests, scripts): per stage bytes by category
// and comm bytes per group, and the step-time terms. One line of JSON.
std::string prediction_json(const Config& cfg, const Prediction& pr) {
  Json j;
  j["layout"] = describe_layout(cfg);
  // Dropless MoE with ep > 1: the receive load the MoE buffers are for.
  j["moe_load"] = pr.mem.moe_load > 0 ? json_number(pr.mem.moe_load) : Json(nullptr);
  Json stages = Json::array();
  for (size_t s = 0; s < pr.mem.stages.size(); ++s) {
    const StageMemory& m = pr.mem.stages[s];
    const StageComm& c = pr.comm[s];
    Json st;
    for (int k = 0; k < kMemCategories; ++k) st[mem_name(Mem(k))] = json_number(m.bytes[size_t(k)]);
    st["total"] = json_number(m.total);
    st["slot_bytes"] = json_number(m.slot_bytes);
    st["param_elems"] = json_number(m.param_elems);
    st["shard_elems"] = json_number(m.shard_elems);
    st["dp_bytes"] = json_number(c.dp_bytes);
    st["tp_bytes"] = json_number(c.tp_bytes);
    st["pp_bytes"] = json_number(c.pp_bytes);
    st["cp_bytes"] = json_number(c.cp_bytes);
    st["ep_bytes"] = json_number(c.ep_bytes);
    st["expert_dp_bytes"] = json_number(c.edp_bytes);
    stages.push_back(std::move(st));
  }
  j["stages"] = std::move(stages);
  const TimeEstimate& t = pr.time;
  const std::pair<const char*, double> terms[] = {
      {"step_s", t.step_s}, {"compute_s", t.compute_s},       {"bubble", t.bubble},
      {"tp_s", t.tp_s},     {"dp_exposed_s", t.dp_exposed_s}, {"pp_s", t.pp_s},
      {"cp_s", t.cp_s},     {"ep_s", t.ep_s},                 {"tokens_per_s", t.tokens_per_s},
      {"mfu", t.mfu}};
  for (const auto& [k, v] : terms) j[k] = json_number(v);
  j["worst_total"] = json_number(pr.mem.worst_total());
  return j.dump() + "\n";
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
              bytes(c.pred.mem.worst_total()).c_str(), t.step_s * 1e3, t.tokens_per_s, 100 * t.mfu, t.bubble,
              bytes(dp).c_str(), bytes(tp).c_str(), bytes(pp).c_str());
}


// The command line checked (CliUsageError) and what it names loaded: the
// machine, the deck on one rank, its global batch.
PlanInputs load_inputs(const CLI::App& cmd, const PlanArgs& a) {
  if (looks_like_option(a.deck)) throw CliUsageError("plan: unknown option '" + a.deck + "'");
  if (const std::string x = first_extra(cmd); !x.empty())
    throw CliUsageError(looks_like_option(x) ? "plan: unknown option '" + x + "'"
                                             : "plan: more than one deck given ('" + a.deck + "' and '" + x + "')");
  PlanInputs in;
  if (!a.ranks.empty()) in.ranks = positive_int("--ranks", a.ranks);
  if (!a.gpus_per_node.empty()) in.gpn = positive_int("--gpus-per-node", a.gpus_per_node);
  if (!a.top.empty()) in.top = positive_int("--top", a.top);
  if (!a.moe_load.empty()) in.moe_load = positive_number("--moe-load", a.moe_load);
  if (a.deck.empty()) throw CliUsageError("plan: no input deck given");
  if (in.ranks == 0) throw CliUsageError("plan: --ranks N is required");
  in.deck = a.deck;
  in.layout = a.layout;
  in.explain = a.explain;
  in.json = a.json;
  in.sets = a.sets;
  in.mach.name = "built-in defaults (8xH100-like; see input/machines/h100-node.toml)";
  if (!a.machine.empty()) in.mach = load_machine(a.machine);
  if (!a.gpu_mem.empty()) in.mach.memory_bytes = parse_bytes(a.gpu_mem, "--gpu-mem");
  if (in.gpn > 0) in.mach.devices_per_node = in.gpn;

  std::optional<std::string> text = read_text(in.deck);
  if (!text) throw InputError("plan: cannot read '" + in.deck + "'");
  in.text = std::move(*text);
  std::vector<std::string> base_sets = in.sets;
  base_sets.insert(base_sets.end(), kSingle.begin(), kSingle.end());
  in.base = parse_config(in.text, in.deck, base_sets, 1);
  if (in.moe_load && in.base.model.n_experts == 0)
    throw InputError("--moe-load: the deck has no MoE blocks (model.n_experts = 0)");
  if (in.moe_load && !in.base.model.dropless) {
    std::ostringstream cf;
    cf << in.base.model.capacity_factor;
    throw InputError("--moe-load: applies to dropless routing (model.dropless = true); with model.capacity_factor=" +
                     cf.str() + " the rows are modelled as uniform routing under the capacity");
  }
  in.b_global = in.base.train.micro_batch * in.base.train.grad_accum * deck_dp(in.text, in.deck, in.sets);
  return in;
}

// --layout: the prediction of one layout, and whether it fits (exit 0 or 3).
int plan_layout(const PlanInputs& in) {
  std::vector<std::string> s = in.sets;
  if (in.layout != "deck") {  // "deck": the deck's own layout (after --set)
    const std::vector<std::string> ls = layout_sets(in.layout, in.b_global, in.base.train.micro_batch);
    s.insert(s.end(), ls.begin(), ls.end());
  }
  const Config cfg = parse_config(in.text, in.deck, s, in.ranks);
  const Prediction pr = predict(cfg, in.mach, in.gpn, 0, in.moe_load.value_or(1.0));
  const double need = pr.mem.worst_total();
  if (in.json) {
    std::fputs(prediction_json(cfg, pr).c_str(), stdout);
    return 0;
  }
  if (in.explain) std::fputs(explain_prediction(cfg, pr, in.mach).c_str(), stdout);
  else
    std::printf("layout %s: %s per rank (worst stage %d), predicted step %.4g ms, %.4g tokens/s, MFU %.1f%%\n",
                describe_layout(cfg).c_str(), bytes(need).c_str(), pr.mem.worst_stage, pr.time.step_s * 1e3,
                pr.time.tokens_per_s, 100 * pr.time.mfu);
  std::printf("fits: %s (%s of %s per device)\n", need <= in.mach.memory_bytes ? "yes" : "NO", bytes(need).c_str(),
              bytes(in.mach.memory_bytes).c_str());
  std::printf("run: pentad train %s%s\n", in.deck.c_str(), sets_text(s).c_str());
  return need <= in.mach.memory_bytes ? 0 : 3;
}

// What the enumeration found: the layouts that fit, and why the others not.
struct Enumeration {
  std::vector<Candidate> fit;
  int n_tried = 0, n_invalid = 0, n_oom = 0;
  std::map<std::string, int> why_invalid;  // rejections by the first key the deck's check names
};

// One candidate: the deck's checks decide validity, the prediction whether it fits.
void try_layout(const PlanInputs& in, const std::vector<std::string>& ls, Enumeration& e) {
  std::vector<std::string> s = in.sets;
  s.insert(s.end(), ls.begin(), ls.end());
  ++e.n_tried;
  Config cfg;
  try {
    cfg = parse_config(in.text, in.deck, s, in.ranks);
  } catch (const InputError& err) {
    ++e.n_invalid;
    std::string w = err.what();
    const auto colon = w.find(": ");
    w = colon == std::string::npos ? w : w.substr(colon + 2);
    e.why_invalid[w.substr(0, w.find(' '))]++;
    return;
  }
  Candidate c{cfg, predict(cfg, in.mach, in.gpn, 0, in.moe_load.value_or(1.0)), ls};
  if (c.pred.mem.worst_total() > in.mach.memory_bytes) {
    ++e.n_oom;
    return;
  }
  e.fit.push_back(std::move(c));
}

// dp x cp x tp x pp = ranks, ep | dp for MoE decks, sp, schedule, ZeRO
// stage, recompute and micro-batch, keeping the global batch. The deck's
// checks decide validity (seq_len divisible by cp or 2*cp, ep | n_experts,
// MoE refuses sp and cp, ...). Sorted by predicted step time, then memory.
Enumeration enumerate_layouts(const PlanInputs& in) {
  Enumeration e;
  const int ranks = in.ranks, b_global = in.b_global;
  const bool moe = in.base.model.n_experts > 0;
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
          for (int etp = 0; etp <= (moe && tp > 1 ? 1 : 0); ++etp)  // expert tp: MoE decks only
            for (const ScheduleKind sched : {ScheduleKind::one_f_one_b, ScheduleKind::interleaved, ScheduleKind::zbh1,
                                             ScheduleKind::zbv}) {
              // Two chunks per stage for interleaved and zbv's V.
              const bool two_chunks = sched == ScheduleKind::interleaved || sched == ScheduleKind::zbv;
              if (sched != ScheduleKind::one_f_one_b && pp == 1) continue;
              for (int zero = 0; zero <= 3; ++zero)
                for (const char* rc : DeckNames<Recompute>::names)
                  for (int mb = 1; mb <= b_global / dp; ++mb) {
                    if ((b_global / dp) % mb) continue;
                    try_layout(in,
                               {"parallel.dp=" + std::to_string(dp), "parallel.tp=" + std::to_string(tp),
                                "parallel.pp=" + std::to_string(pp), "parallel.cp=" + std::to_string(cp),
                                "parallel.ep=" + std::to_string(ep), "parallel.sp=" + std::string(sp ? "true" : "false"),
                                "parallel.expert_tp=" + std::string(etp ? "true" : "false"),
                                "parallel.schedule=\"" + std::string(deck_name(sched)) + "\"",
                                "parallel.virtual_stages=" + std::string(two_chunks ? "2" : "1"),
                                "parallel.zero=" + std::to_string(zero), "train.recompute=\"" + std::string(rc) + "\"",
                                "train.micro_batch=" + std::to_string(mb),
                                "train.grad_accum=" + std::to_string(b_global / dp / mb)},
                               e);
                  }
            }
        }
      }
    }
  }
  std::sort(e.fit.begin(), e.fit.end(), [](const Candidate& a, const Candidate& b) {
    if (a.pred.time.step_s != b.pred.time.step_s) return a.pred.time.step_s < b.pred.time.step_s;
    return a.pred.mem.worst_total() < b.pred.mem.worst_total();
  });
  return e;
}

// The winner against the best layout of each other (dp, tp, pp, cp, ep) shape.
void print_why(const Enumeration& e) {
  const Candidate& w = e.fit.front();
  std::printf("why: the predicted step is the sum above; the best layout of each other dp/tp/pp shape:\n");
  std::map<std::string, const Candidate*> best_shape;
  for (const Candidate& c : e.fit) {
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
}

// The ranking: counts, the table of the top layouts, the winner explained,
// and its `pentad train` line. 3 when nothing fits.
int print_ranking(const PlanInputs& in, const Enumeration& e) {
  std::printf("%d layouts tried: %d rejected by the deck's checks, %d do not fit in %s, %zu fit\n", e.n_tried,
              e.n_invalid, e.n_oom, bytes(in.mach.memory_bytes).c_str(), e.fit.size());
  if (e.n_invalid > 0) {
    std::printf("  rejections by first key named:");
    for (const auto& [k, n] : e.why_invalid) std::printf(" %s (%d)", k.c_str(), n);
    std::printf("\n");
  }
  std::printf("  not enumerated: afab (same bubble as 1f1b, more memory), cp_layout (kept at the deck's), "
              "virtual_stages > 2, bucket_mb (kept at the deck's)\n");
  if (e.fit.empty() && e.n_oom == 0) {
    std::printf("no valid layout for %d ranks: every candidate breaks a deck check above (a larger global "
                "batch, e.g. --set train.grad_accum=..., gives dp and pp more room)\n", in.ranks);
    return 3;
  }
  if (e.fit.empty()) {
    std::printf("no layout fits: raise --gpu-mem, add ranks, or shrink the micro-batch/sequence\n");
    return 3;
  }
  std::printf("%4s  %-58s %11s %10s %11s %7s %6s %10s %10s %10s\n", "rank", "layout", "mem/rank", "step ms",
              "tokens/s", "MFU", "bubble", "dp/step", "tp/step", "pp/step");
  for (int i = 0; i < std::min<int>(in.top, int(e.fit.size())); ++i) print_row(i + 1, e.fit[size_t(i)]);
  const Candidate& w = e.fit.front();
  std::printf("\nwinner: %s\n", describe_layout(w.cfg).c_str());
  std::fputs(explain_prediction(w.cfg, w.pred, in.mach).c_str(), stdout);
  print_why(e);
  // The user's --set, less the keys the layout sets, then the layout.
  std::vector<std::string> run_sets;
  auto key_of = [](const std::string& x) { return x.substr(0, x.find('=')); };
  for (const auto& x : in.sets)
    if (std::none_of(w.sets.begin(), w.sets.end(), [&](const std::string& y) { return key_of(y) == key_of(x); }))
      run_sets.push_back(x);
  run_sets.insert(run_sets.end(), w.sets.begin(), w.sets.end());
  std::printf("run: pentad train %s%s\n", in.deck.c_str(), sets_text(run_sets).c_str());
  return 0;
}

int plan(const CLI::App& cmd, const PlanArgs& a) {
  const PlanInputs in = load_inputs(cmd, a);
  const Machine& mach = in.mach;
  if (!in.json)
    std::printf("plan: %s on %d ranks | global batch %d x %d tokens | machine %s: %.3g TFLOP/s peak x %.0f%%, "
                "%s per device, %d per node, %.3g/%.3g GB/s intra/inter-node\n",
                in.deck.c_str(), in.ranks, in.b_global, in.base.model.seq_len, mach.name.c_str(), mach.peak_tflops,
                100 * mach.compute_efficiency, bytes(mach.memory_bytes).c_str(), mach.devices_per_node,
                mach.intra_node_gbs, mach.inter_node_gbs);
  if (!in.layout.empty()) return plan_layout(in);
  return print_ranking(in, enumerate_layouts(in));
}

}  // namespace

Command add_plan(CLI::App& pentad) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = add_command(pentad, "plan", "rank the layouts that fit by predicted step time");
  cmd->add_option("deck", a->deck, "input deck (TOML)");
  cmd->add_option("--ranks", a->ranks, "rank count");
  cmd->add_option("--gpu-mem", a->gpu_mem, "memory per device (80GiB)");
  cmd->add_option("--gpus-per-node", a->gpus_per_node, "devices per node");
  cmd->add_option("--machine", a->machine, "machine file (input/machines/*.toml)");
  cmd->add_option("--layout", a->layout, "one layout (dp=2,tp=2,...) or deck");
  cmd->add_option("--top", a->top, "rows of the ranking (default 10)");
  cmd->add_option("--moe-load", a->moe_load, "dropless MoE receive load (default 1)");
  cmd->add_flag("--explain", a->explain, "the prediction's terms (with --layout)");
  cmd->add_flag("--json", a->json, "the prediction as JSON (with --layout)");
  cmd->add_option("--set", a->sets, "section.key=value, over the deck (repeatable)")->allow_extra_args(false);
  Command c{cmd, [cmd, a] { return plan(*cmd, *a); },
            [](const std::string& opt) { return "plan: " + opt + " needs a value"; }};
  c.root_only = true;
  return c;
}

}  // namespace pentad
