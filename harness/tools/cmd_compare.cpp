// perfgate compare: see docs/statistics.md.
#include <stdexcept>

#include "commands.hpp"

namespace perfgate {

void add_compare_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("compare", "compare a current run against a baseline");
  cmd->callback([&exit_code] {
    exit_code = 2;
    throw std::runtime_error("perfgate compare: being written (helper stats)");
  });
}

}  // namespace perfgate
