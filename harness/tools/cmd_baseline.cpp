// perfgate baseline update: see docs/statistics.md.
#include <stdexcept>

#include "commands.hpp"

namespace perfgate {

void add_baseline_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("baseline", "manage stored baselines");
  cmd->callback([&exit_code] {
    exit_code = 2;
    throw std::runtime_error("perfgate baseline: being written (helper stats)");
  });
}

}  // namespace perfgate
