// pentad's subcommands, one per app/cmd_*.cpp. Each add_* declares its
// arguments on the CLI11 app and returns a Command: what runs once argv is
// parsed. Command-line errors keep the wording of the hand-written parsers
// they replace (tests and scripts grep it), so CLI11 collects unknown
// arguments instead of rejecting them and each command words the problem.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

namespace pentad {

// Bad command line: main prints the message and the usage, and exits 2.
struct CliUsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// This process in the job (MPI_COMM_WORLD).
struct Job {
  int rank = 0, size = 1;
};

struct Command {
  CLI::App* cli = nullptr;    // the CLI11 subcommand (owned by the pentad app)
  std::function<int()> run;   // checks what was parsed, then works; the exit code
  // The message when `option` ends the command line without its value.
  std::function<std::string(const std::string& option)> missing_value;
  bool root_only = false;     // a serial tool: rank 0 runs it, the others get its exit code
};

Command add_train(CLI::App& pentad, Job job);
Command add_prep(CLI::App& pentad, Job job);
Command add_ckpt(CLI::App& pentad);
Command add_schedule(CLI::App& pentad, Job job);
Command add_plan(CLI::App& pentad);
Command add_report(CLI::App& pentad);
Command add_sample(CLI::App& pentad, Job job);

// --- shared by the add_* functions (cli.cpp) ---

// A subcommand of `parent` set up as every pentad command is: no help flag
// (`pentad train --help` stays an unknown option), unknown arguments kept
// for the command to word, at most one nested subcommand, and a repeated
// option keeps its last value.
CLI::App* add_command(CLI::App& parent, const std::string& name, const std::string& about);

// The first argument CLI11 could not place (an unknown option or a surplus
// positional), in command-line order; "" when there is none.
std::string first_extra(const CLI::App& cmd);

// The hand-written parsers took every argument starting with '-' for an
// option; CLI11 takes "-" and "-5" for positionals. Commands check their
// positionals with this to keep reporting them as unknown options.
bool looks_like_option(const std::string& arg);

}  // namespace pentad
