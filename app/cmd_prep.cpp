// `pentad prep --out DIR [--val-fraction F] FILE...`: rank 0 turns text
// files into byte-level token files (io/prep.hpp); every rank
// agrees on the outcome.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "comm/host.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "io/prep.hpp"

namespace pentad {
namespace {

struct PrepArgs {
  std::string out, val_fraction;
  std::vector<std::string> files;
};

std::string unknown(const std::string& arg) { return "prep: unknown or incomplete option '" + arg + "'"; }

// Collective over MPI_COMM_WORLD (rank 0 writes, every rank agrees).
int prep(const CLI::App& cmd, const PrepArgs& a, Job job) {
  for (const auto& f : a.files)
    if (looks_like_option(f)) throw CliUsageError(unknown(f));
  if (const std::string x = first_extra(cmd); !x.empty()) throw CliUsageError(unknown(x));
  double val_fraction = 0.1;
  if (!a.val_fraction.empty()) {
    char* end = nullptr;
    val_fraction = std::strtod(a.val_fraction.c_str(), &end);
    if (*end != '\0' || !(val_fraction >= 0 && val_fraction < 1))
      throw CliUsageError("--val-fraction must be a number in [0, 1)");
  }
  if (a.out.empty()) throw CliUsageError("prep: --out DIR is required");
  std::string summary, err;
  if (job.rank == 0) {
    try {
      summary = prep_bytes(a.files, a.out, val_fraction);
    } catch (const InputError& e) {
      err = e.what();
    }
  }
  agree_or_throw(err.empty(), err, MPI_COMM_WORLD);
  if (job.rank == 0) std::printf("%s\n", summary.c_str());
  return 0;
}

}  // namespace

Command add_prep(CLI::App& pentad, Job job) {
  auto a = std::make_shared<PrepArgs>();
  CLI::App* cmd = add_command(pentad, "prep", "text files -> byte token files");
  cmd->add_option("--out", a->out, "output directory");
  cmd->add_option("--val-fraction", a->val_fraction, "fraction of the bytes for validation (default 0.1)");
  cmd->add_option("files", a->files, "text files");
  return {cmd, [cmd, a, job] { return prep(*cmd, *a, job); }, unknown};
}

}  // namespace pentad
