// `pentad train DECK [--set section.key=value]...`: rank 0 reads the deck,
// every rank parses it (config.hpp) and runs the trainer (train.hpp) on the
// backend and comms the runtime picks.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "comm/host.hpp"
#include "comm/placement.hpp"
#include "comm/watchdog.hpp"
#include "commands.hpp"
#include "config/config.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "runtime.hpp"
#include "train/train.hpp"

namespace pentad {
namespace {

struct TrainArgs {
  std::string deck;
  std::vector<std::string> sets;
};

// Rank 0 reads the deck; every rank gets its text (or the reason it failed).
// Collective over MPI_COMM_WORLD.
std::string read_deck(const std::string& path, int rank) {
  std::string text, err;
  if (rank == 0) {
    // A directory opens and reads as empty text, which would parse as a deck
    // without data.train: say what it is instead.
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) err = "cannot read input deck '" + path + "': is a directory";
    else if (std::optional<std::string> t = read_text(path)) text = std::move(*t);
    else err = "cannot read input deck '" + path + "'";
  }
  agree_or_throw(err.empty(), err, MPI_COMM_WORLD);
  return host::bcast_string(MPI_COMM_WORLD, text, 0);
}

// Collective over MPI_COMM_WORLD (every rank trains its shard).
int train(const CLI::App& cmd, const TrainArgs& a, Job job) {
  if (looks_like_option(a.deck)) throw CliUsageError("unknown option '" + a.deck + "'");
  if (const std::string x = first_extra(cmd); !x.empty())
    throw CliUsageError(looks_like_option(x) ? "unknown option '" + x + "'"
                                             : "more than one deck given ('" + a.deck + "' and '" + x + "')");
  if (a.deck.empty()) throw CliUsageError("train: no input deck given");
  const std::string text = read_deck(a.deck, job.rank);
  const Config cfg = parse_config(text, a.deck, a.sets, job.size);
  // From here every blocking MPI call is watched: a rank that cannot reach
  // another blocks in the first exchange below and the job ends after
  // parallel.comm_timeout_s instead of hanging.
  start_comm_watchdog(cfg.parallel.comm_timeout_s);
  // Number the ranks node by node, so the grid's fast axes (tp, then cp)
  // stay inside a node; refuse a tp group that would cross nodes.
  const Placement placement = discover_placement(MPI_COMM_WORLD);
  if (const std::string why = tp_placement_problem(placement, cfg.parallel); !why.empty())
    throw InputError(cfg.source + ": " + why);
  MPI_Comm ordered = node_ordered(MPI_COMM_WORLD, placement);
  auto be = make_backend(cfg, ordered);
  const CommFactory comms = [&](MPI_Comm c, std::string name) { return make_comm(cfg, *be, c, std::move(name)); };
  const int rc = run_train(cfg, ordered, node_ordered(placement), *be, comms);
  MPI_Comm_free(&ordered);
  return rc;
}

}  // namespace

Command add_train(CLI::App& pentad, Job job) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = add_command(pentad, "train", "train a model");
  cmd->add_option("deck", a->deck, "input deck (TOML)");
  // One value per --set, so `--set k=v DECK` leaves DECK a positional.
  cmd->add_option("--set", a->sets, "section.key=value, over the deck (repeatable)")->allow_extra_args(false);
  return {cmd, [cmd, a, job] { return train(*cmd, *a, job); },
          [](const std::string&) { return std::string("--set needs section.key=value"); }};
}

}  // namespace pentad
