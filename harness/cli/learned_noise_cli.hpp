#pragma once
// The learned-noise flags of `perfgate compare` and `perfgate run` (--history, --noise, --no-learned-noise),
// the one place that reads PERFGATE_HISTORY for them, and the snapshot writer of `perfgate baseline update
// --history`.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "perfgate/learned_noise.hpp"
#include "perfgate/session.hpp"

namespace perfgate::cli {

struct LearnedNoiseFlags {
  std::string history;   // --history URL (else PERFGATE_HISTORY)
  std::string snapshot;  // --noise FILE (compare only)
  bool off = false;      // --no-learned-noise
  std::size_t window = 30;
  std::size_t min_sessions = 5;
};

void add_learned_noise_flags(CLI::App* cmd, LearnedNoiseFlags& f, bool with_snapshot_flag);

// The history URL of a command: `flag` (--db, --history), else PERFGATE_HISTORY, else "". The one place the CLI
// reads that variable.
std::string history_url_or_env(const std::string& flag);
// The same, but an InputError naming --db when neither is given.
std::string required_history_url(const std::string& flag);

// --db URL and --machine-class CLASS of the `perfgate history` subcommands; `class_help` says what the class
// selects there.
void add_history_selection(CLI::App* cmd, std::string& db, std::string& machine_class, const std::string& class_help);

// --history, else PERFGATE_HISTORY, else ""; "" with --no-learned-noise.
std::string history_url(const LearnedNoiseFlags& f);

// The table of one history class learned from the history at `url` (nullptr when the history has no session
// of that class). Throws history::HistoryError for a bad URL or database.
std::shared_ptr<const LearnedNoiseTable> learn_from_history(const std::string& url, const std::string& history_class,
                                                            std::size_t window, std::size_t min_sessions);

// GateOptions::learned_noise for `perfgate run`: the history (once per class, cached), or nothing.
std::function<std::shared_ptr<const LearnedNoiseTable>(const std::string&)> history_noise_source(
    const LearnedNoiseFlags& f);

// Where the snapshot of a history class goes under the baselines root: <root>/<class>/<generation>/noise.json
// when that folder exists or the class level holds another generation's baselines, else <root>/<class>/noise.json.
std::filesystem::path snapshot_path(const std::filesystem::path& root, const std::string& history_class);

// `perfgate baseline update --history URL`: writes the snapshot of every class of the history (or of
// `only_class`); returns the files written.
std::vector<std::string> write_noise_snapshots(const std::string& url, const std::filesystem::path& root,
                                               const std::string& only_class, std::size_t window,
                                               std::size_t min_sessions);

}  // namespace perfgate::cli
