#pragma once
// Subcommands of the `perfgate` CLI. Each module registers its own subcommand on the app and, from the
// subcommand's callback, stores the process exit code in `exit_code` (docs/architecture.md: 0 no regression,
// 1 regression, 2 bad input/usage, 3 bench failed, 77 skipped). perfgate_main.cpp calls every one.
// A perfgate::InputError escaping a callback is printed as one line by main and exits 2.
#include <glob.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>

#include "perfgate/errors.hpp"

namespace perfgate {

// cli/cmd_compare.cpp: perfgate compare BASELINE CURRENT ...
void add_compare_command(CLI::App& app, int& exit_code);
// cli/cmd_baseline.cpp: perfgate baseline update --suite NAME --from RUN.json ...
void add_baseline_command(CLI::App& app, int& exit_code);
// cli/cmd_history.cpp: perfgate history record|list|changes|noise --db URL ...
void add_history_command(CLI::App& app, int& exit_code);
// cli/cmd_history_fleet.cpp: perfgate history report|shard|merge (the dashboard and the fleet), added
// under the `history` subcommand.
void add_history_fleet_commands(CLI::App& history, int& exit_code);

// ---- "runner" adds its declarations below (cli/cmd_run.cpp, cli/cmd_ab.cpp) ----
void add_run_command(CLI::App& app, int& exit_code);
void add_ab_command(CLI::App& app, int& exit_code);
// cli/cmd_bisect.cpp: perfgate bisect --good REV --bad REV --bench NAME ...
void add_bisect_command(CLI::App& app, int& exit_code);
// cli/cmd_timeline.cpp: perfgate timeline BEFORE.json AFTER.json [--ranges R,...] [--svg-dir DIR]
void add_timeline_command(CLI::App& app, int& exit_code);

// Runs `run` as the subcommand's action: the exit code is 2 until it returns (an exception escapes to main,
// which prints it and exits 2), then what it returned.
template <class Run>
void on_run(CLI::App* cmd, int& exit_code, Run run) {
  cmd->callback([run, &exit_code] {
    exit_code = 2;
    exit_code = run();
  });
}

// An item that names no file but holds a shell pattern ('runs/before*.json', quoted so that the shell left it, as CI
// definitions often do) becomes the files it matches, in name order; one that matches none is an input error.
inline void add_file_or_matches(std::vector<std::string>& files, const std::string& item) {
  std::error_code ec;
  if (item.find_first_of("*?[") == std::string::npos || std::filesystem::exists(item, ec)) {
    files.push_back(item);
    return;
  }
  glob_t matches{};
  const int rc = ::glob(item.c_str(), 0, nullptr, &matches);
  if (rc == 0)
    for (std::size_t i = 0; i < matches.gl_pathc; ++i) files.emplace_back(matches.gl_pathv[i]);
  ::globfree(&matches);
  if (rc != 0) throw InputError(item, "", "", "no file matches this pattern");
}

// File arguments that may each be a comma list ("a.json,b.json") or a pattern, as one list of files; empty items are
// dropped.
inline std::vector<std::string> split_comma_lists(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  for (const auto& arg : args) {
    std::string cur;
    for (char c : arg + ",") {
      if (c != ',') {
        cur += c;
      } else if (!cur.empty()) {
        add_file_or_matches(files, cur);
        cur.clear();
      }
    }
  }
  return files;
}

// NO_COLOR (no-color.org): set and not empty, no terminal report is coloured (ReportOptions::color).
inline bool color_allowed_by_environment() {
  const char* no_color = std::getenv("NO_COLOR");
  return no_color == nullptr || *no_color == '\0';
}

}  // namespace perfgate
