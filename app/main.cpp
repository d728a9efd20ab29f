// pentad: one SPMD program. main() owns MPI_Init/Finalize and the two error
// paths: an InputError (every rank agrees) is printed once by rank 0 and every
// rank exits 1; a local failure aborts the job from where it happened.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/checkpoint.hpp"
#include "config/config.hpp"
#include "io/data.hpp"
#include "comm/host.hpp"
#include "core/error.hpp"
#include "commands.hpp"
#include "parallel/pp/schedule.hpp"
#include "runtime.hpp"
#include "train/train.hpp"

namespace {

const char* kUsage =
    "usage:\n"
    "  pentad train DECK.toml [--set section.key=value]...   train a model\n"
    "  pentad prep --out DIR [--val-fraction F] FILE...       text files -> byte token files\n"
    "  pentad ckpt info SPEC                                  summarise and verify a checkpoint\n"
    "  pentad ckpt export SPEC --to DIR                       global weights (+ llm.c GPT-2 .bin)\n"
    "  pentad schedule --pp P --m M [--schedule afab|1f1b|interleaved] [--v V]\n"
    "                                                         print and check a pipeline schedule\n"
    "  pentad plan DECK --ranks N [--gpu-mem 80GiB] [--gpus-per-node G] [--machine FILE.toml]\n"
    "              [--layout dp=2,tp=2,pp=2,...|deck] [--explain|--json] [--top K] [--moe-load F] [--set k=v]...\n"
    "                                                         rank the layouts that fit by predicted step time\n"
    "  pentad report RUN_DIR_OR_CSV... [--machine FILE.toml] [--one-node] [--csv OUT.csv] [--plot OUT.png]\n"
    "                                                         scaling efficiency, prediction beside measurement\n"
    "    SPEC: a checkpoint file, a checkpoint directory (its latest), or latest (ckpt/latest)\n"
    "    F: dropless MoE, rows one ep rank receives per call over the balanced share (default 1;\n"
    "       a run's metrics log it as moe_recv_load_max)\n"
    "  pentad --help | --version\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Rank 0 reads the deck; every rank gets its text (or the reason it failed).
std::string read_deck(const std::string& path, int rank) {
  std::string text, err;
  if (rank == 0) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      err = "cannot read input deck '" + path + "'";
    } else {
      std::ostringstream ss;
      ss << f.rdbuf();
      text = ss.str();
    }
  }
  pentad::agree_or_throw(err.empty(), err, MPI_COMM_WORLD);
  long n = long(text.size());
  MPI_CHECK(MPI_Bcast(&n, 1, MPI_LONG, 0, MPI_COMM_WORLD));
  text.resize(size_t(n));
  if (n > 0) MPI_CHECK(MPI_Bcast(text.data(), int(n), MPI_CHAR, 0, MPI_COMM_WORLD));
  return text;
}

int cmd_train(const std::vector<std::string>& args, int rank, int size) {
  std::string deck;
  std::vector<std::string> sets;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--set") {
      if (i + 1 >= args.size()) throw UsageError("--set needs section.key=value");
      sets.push_back(args[++i]);
    } else if (a.rfind("--set=", 0) == 0) {
      sets.push_back(a.substr(6));
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("unknown option '" + a + "'");
    } else if (deck.empty()) {
      deck = a;
    } else {
      throw UsageError("more than one deck given ('" + deck + "' and '" + a + "')");
    }
  }
  if (deck.empty()) throw UsageError("train: no input deck given");
  const std::string text = read_deck(deck, rank);
  const pentad::Config cfg = pentad::parse_config(text, deck, sets, size);
  auto be = pentad::make_backend(cfg, MPI_COMM_WORLD);
  const pentad::CommFactory comms = [&](MPI_Comm c, std::string name) {
    return pentad::make_comm(cfg, *be, c, std::move(name));
  };
  return pentad::run_train(cfg, MPI_COMM_WORLD, *be, comms);
}

int cmd_prep(const std::vector<std::string>& args, int rank) {
  std::string out;
  double val_fraction = 0.1;
  std::vector<std::string> files;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--out" && i + 1 < args.size()) {
      out = args[++i];
    } else if (a == "--val-fraction" && i + 1 < args.size()) {
      char* end = nullptr;
      val_fraction = std::strtod(args[++i].c_str(), &end);
      if (*end != '\0' || !(val_fraction >= 0 && val_fraction < 1))
        throw UsageError("--val-fraction must be a number in [0, 1)");
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("prep: unknown or incomplete option '" + a + "'");
    } else {
      files.push_back(a);
    }
  }
  if (out.empty()) throw UsageError("prep: --out DIR is required");
  std::string summary, err;
  if (rank == 0) {
    try {
      summary = pentad::prep_bytes(files, out, val_fraction);
    } catch (const pentad::InputError& e) {
      err = e.what();
    }
  }
  pentad::agree_or_throw(err.empty(), err, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s\n", summary.c_str());
  return 0;
}

int cmd_ckpt(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("ckpt: expected 'info SPEC' or 'export SPEC --to DIR'");
  const std::string& sub = args[0];
  std::string spec, to;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (sub == "export" && a == "--to" && i + 1 < args.size()) {
      to = args[++i];
    } else if (!a.empty() && a[0] == '-') {
      throw UsageError("ckpt " + sub + ": unknown or incomplete option '" + a + "'");
    } else if (spec.empty()) {
      spec = a;
    } else {
      throw UsageError("ckpt " + sub + ": more than one checkpoint given ('" + spec + "' and '" + a + "')");
    }
  }
  if (sub != "info" && sub != "export") throw UsageError("ckpt: unknown subcommand '" + sub + "'");
  if (spec.empty()) throw UsageError("ckpt " + sub + ": no checkpoint given");
  if (sub == "info") return pentad::ckpt_info(spec, MPI_COMM_WORLD);
  if (to.empty()) throw UsageError("ckpt export: --to DIR is required");
  return pentad::ckpt_export(spec, to, MPI_COMM_WORLD);
}
// Prints a pipeline schedule's per-rank lists and what the checker finds:
// validity, activation high-water mark per rank (replayed and expected) and
// the bubble of a timed replay (t_b = 2 t_f) beside the formula. No MPI work.
int cmd_schedule(const std::vector<std::string>& args, int rank) {
  std::string kind = "1f1b";
  int pp = 0, m = 0, v = 1;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError("schedule: " + a + " needs a value");
      return args[++i];
    };
    auto number = [&]() {
      const std::string s = value();
      try {
        size_t used = 0;
        const int x = std::stoi(s, &used);
        if (used == s.size() && x >= 1) return x;
      } catch (const std::exception&) {
      }
      throw UsageError("schedule: " + a + " needs a positive integer (got '" + s + "')");
    };
    if (a == "--schedule") kind = value();
    else if (a == "--pp") pp = number();
    else if (a == "--m") m = number();
    else if (a == "--v") v = number();
    else throw UsageError("schedule: unknown option '" + a + "'");
  }
  if (pp == 0 || m == 0) throw UsageError("schedule: --pp and --m are required");
  if (kind != "afab" && kind != "1f1b" && kind != "interleaved")
    throw UsageError("schedule: --schedule must be afab, 1f1b or interleaved (got '" + kind + "')");
  const pentad::ScheduleKind k = pentad::parse_schedule_kind(kind);
  if (const std::string p = pentad::schedule_problem(k, pp, v, m); !p.empty()) throw pentad::InputError(p);
  const pentad::Schedule s = pentad::make_schedule(k, pp, v, m);
  const pentad::ScheduleCheck c = pentad::check_schedule(s);
  if (rank != 0) return c.ok() ? 0 : 1;
  std::printf("%s pp=%d v=%d m=%d\n%s", kind.c_str(), pp, v, m, pentad::describe_schedule(s).c_str());
  if (!c.ok()) {
    std::printf("check: FAILED: %s\n", c.error.c_str());
    return 1;
  }
  std::printf("check: ok (every send has its receive, no deadlock)\n");
  for (int r = 0; r < pp; ++r)
    std::printf("rank %d: peak in-flight %d (expected %d) | replayed bubble %.4f\n", r,
                c.peak_inflight[size_t(r)], pentad::expected_inflight(k, pp, v, m, r), c.sim_bubble[size_t(r)]);
  std::printf("bubble formula: %.4f\n", pentad::bubble_formula(k, pp, v, m));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  pentad::set_job_comm(MPI_COMM_WORLD);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<std::string> args(argv + 1, argv + argc);
  int rc = 0;
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
      if (rank == 0) std::fputs(kUsage, args.empty() ? stderr : stdout);
      rc = args.empty() ? 2 : 0;
    } else if (args[0] == "--version") {
      if (rank == 0) std::printf("pentad 0.1.0\n");
    } else if (args[0] == "train") {
      rc = cmd_train({args.begin() + 1, args.end()}, rank, size);
    } else if (args[0] == "prep") {
      rc = cmd_prep({args.begin() + 1, args.end()}, rank);
    } else if (args[0] == "ckpt") {
      rc = cmd_ckpt({args.begin() + 1, args.end()});
    } else if (args[0] == "schedule") {
      rc = cmd_schedule({args.begin() + 1, args.end()}, rank);
    } else if (args[0] == "plan" || args[0] == "report") {
      // Serial tools: rank 0 works, the others wait for its exit code.
      std::string err;
      int code = 0;
      if (rank == 0) {
        try {
          code = args[0] == "plan" ? pentad::cmd_plan({args.begin() + 1, args.end()})
                                   : pentad::cmd_report({args.begin() + 1, args.end()});
        } catch (const pentad::CliUsageError& e) {
          err = e.what();
          code = -2;
        } catch (const std::exception& e) {  // InputError, or a model/schedule check
          err = e.what();
          code = -1;
        }
      }
      MPI_CHECK(MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD));
      if (code == -2) throw UsageError(err);
      if (code == -1) throw pentad::InputError(err);
      rc = code;
    } else {
      throw UsageError("unknown command '" + args[0] + "'");
    }
  } catch (const UsageError& e) {
    // Every rank parses the same argv, so every rank is here.
    if (rank == 0) std::fprintf(stderr, "pentad: %s\n%s", e.what(), kUsage);
    rc = 2;
  } catch (const pentad::InputError& e) {
    if (rank == 0) std::fprintf(stderr, "pentad: error: %s\n", e.what());
    rc = 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Finalize();
  return rc;
}
