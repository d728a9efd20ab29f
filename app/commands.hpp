// The `pentad plan` and `pentad report` subcommands (serial: rank 0 does the
// work). plan enumerates layouts for a rank count, drops those that do not
// fit, ranks the rest by predicted step time; report reads measured runs
// (run directories or scaling CSVs) and prints prediction beside measurement.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace pentad {

// Bad command line (main prints the usage and exits 2).
struct CliUsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int cmd_plan(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);

}  // namespace pentad
