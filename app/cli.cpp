// CLI11 set-up shared by pentad's subcommands (commands.hpp): each command
// is configured the same way, and what CLI11 leaves over is handed back in
// command-line order so the command can report it in its own words.
#include "commands.hpp"

namespace pentad {

CLI::App* add_command(CLI::App& parent, const std::string& name, const std::string& about) {
  CLI::App* cmd = parent.add_subcommand(name, about);
  cmd->set_help_flag();
  cmd->allow_extras();
  cmd->require_subcommand(0, 1);
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  return cmd;
}

std::string first_extra(const CLI::App& cmd) {
  const std::vector<std::string> left = cmd.remaining();
  return left.empty() ? std::string() : left.front();
}

bool looks_like_option(const std::string& arg) { return !arg.empty() && arg[0] == '-'; }

}  // namespace pentad
