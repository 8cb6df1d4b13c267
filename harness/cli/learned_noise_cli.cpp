#include "learned_noise_cli.hpp"

#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "environment.hpp"
#include "perfgate/baseline_store.hpp"
#include "perfgate/change_points.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/history.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/report.hpp"
#include "run_common.hpp"

namespace perfgate::cli {

void add_learned_noise_flags(CLI::App* cmd, LearnedNoiseFlags& f, bool with_snapshot_flag) {
  const std::size_t first = cmd->get_options().size();
  cmd->add_option("--history", f.history,
                  "results history (SQLite path or postgresql:// URL; default PERFGATE_HISTORY): gate with the "
                  "between-session noise learned from it (docs/history.md)");
  if (with_snapshot_flag)
    cmd->add_option("--noise", f.snapshot, "learned-noise snapshot (default: noise.json next to the baseline)");
  cmd->add_flag("--no-learned-noise", f.off, "judge with the class prior only: no history, no noise.json");
  cmd->add_option("--noise-window", f.window, "most recent sessions the noise is learned from (default 30)")
      ->check(CLI::Range(3, 100000));
  cmd->add_option("--noise-min-sessions", f.min_sessions,
                  "sessions since the last change point a band needs before it replaces the prior (default 5)")
      ->check(CLI::Range(2, 100000));
  name_option_group(cmd, first, kBaselinesGroup);
}

std::string history_url_or_env(const std::string& flag) {
  if (!flag.empty()) return flag;
  return env_var("PERFGATE_HISTORY").value_or("");
}

std::string required_history_url(const std::string& flag) {
  std::string url = history_url_or_env(flag);
  if (url.empty()) throw InputError("", "", "--db", "no history given: pass --db URL or set PERFGATE_HISTORY");
  return url;
}

void add_history_selection(CLI::App* cmd, std::string& db, std::string& machine_class, const std::string& class_help) {
  // --history too: the name run, ab and compare give the same URL.
  cmd->add_option("--db,--history", db,
                  "history URL: PATH, sqlite:PATH or postgresql://... (default: $PERFGATE_HISTORY)");
  cmd->add_option("--machine-class", machine_class, class_help);
}

std::string history_url(const LearnedNoiseFlags& f) { return f.off ? std::string() : history_url_or_env(f.history); }

namespace {

std::shared_ptr<const LearnedNoiseTable> learn_from_store(history::Store& store, const std::string& history_class,
                                                          std::size_t window, std::size_t min_sessions) {
  history::NoiseOptions options;
  options.window = window;
  options.min_sessions = min_sessions;
  const history::ClassHistory h = store.class_history(history_class, window);
  if (h.sessions.empty()) return nullptr;
  return std::make_shared<const LearnedNoiseTable>(
      history::learned_noise_table(h, options, "history " + store.url().display));
}

}  // namespace

std::shared_ptr<const LearnedNoiseTable> learn_from_history(const std::string& url, const std::string& history_class,
                                                            std::size_t window, std::size_t min_sessions) {
  const history::HistoryUrl parsed = history::parse_history_url(url);
  std::error_code ec;
  if (parsed.backend == history::Backend::sqlite && !std::filesystem::exists(parsed.target, ec))
    return nullptr;  // no session recorded yet (the first run of a new history): the prior judges
  auto store = history::open_store(url, history::OpenMode::existing_only);
  return learn_from_store(*store, history_class, window, min_sessions);
}

std::function<std::shared_ptr<const LearnedNoiseTable>(const std::string&)> history_noise_source(
    const LearnedNoiseFlags& f) {
  const std::string url = history_url(f);
  if (url.empty()) return {};
  // A bad URL or an unreadable database is reported now, before minutes of measurement, not after them.
  const history::HistoryUrl parsed = history::parse_history_url(url);
  std::error_code ec;
  if (parsed.backend != history::Backend::sqlite || std::filesystem::exists(parsed.target, ec))
    history::open_store(url, history::OpenMode::existing_only);
  auto cache = std::make_shared<std::map<std::string, std::shared_ptr<const LearnedNoiseTable>>>();
  const std::size_t window = f.window, min_sessions = f.min_sessions;
  return [url, cache, window, min_sessions](const std::string& history_class) {
    const auto it = cache->find(history_class);
    if (it != cache->end()) return it->second;
    auto table = learn_from_history(url, history_class, window, min_sessions);
    cache->emplace(history_class, table);
    return table;
  };
}

namespace {

// "cpu-epyc-avx512-2c.amd-family25-model17" -> {"cpu-epyc-avx512-2c", "amd-family25-model17"}.
std::pair<std::string, std::string> split_history_class(const std::string& history_class) {
  const auto dot = history_class.rfind('.');
  if (history_class.rfind("cpu-", 0) != 0 || dot == std::string::npos) return {history_class, ""};
  return {history_class.substr(0, dot), history_class.substr(dot + 1)};
}

// Does the class folder hold a baseline recorded on a CPU generation other than `generation`?
bool class_level_holds_other_generation(const std::filesystem::path& folder, const std::string& generation) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) return false;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const auto& p = entry.path();
    if (!entry.is_regular_file() || p.extension() != ".json" || p.filename() == "thresholds.json" ||
        p.filename() == kNoiseSnapshotFile)
      continue;
    const ResultSet stored = load_result_file(p.string());
    for (const auto& c : stored.contexts) {
      const std::string key = cpu_generation_key(c.get(context_keys::kCpuSignature));
      if (!key.empty() && key != generation) return true;
    }
  }
  return false;
}

}  // namespace

std::filesystem::path snapshot_path(const std::filesystem::path& root, const std::string& history_class) {
  const auto [cls, generation] = split_history_class(history_class);
  const auto class_folder = root / cls;
  if (generation.empty()) return class_folder / kNoiseSnapshotFile;
  std::error_code ec;
  if (std::filesystem::is_directory(class_folder / generation, ec) ||
      class_level_holds_other_generation(class_folder, generation))
    return class_folder / generation / kNoiseSnapshotFile;
  return class_folder / kNoiseSnapshotFile;
}

std::vector<std::string> write_noise_snapshots(const std::string& url, const std::filesystem::path& root,
                                               const std::string& only_class, std::size_t window,
                                               std::size_t min_sessions) {
  auto store = history::open_store(url, history::OpenMode::existing_only);
  std::vector<std::string> classes =
      only_class.empty() ? store->machine_classes() : std::vector<std::string>{only_class};
  std::vector<std::string> written;
  for (const auto& cls : classes) {
    const auto table = learn_from_store(*store, cls, window, min_sessions);
    if (!table)
      throw InputError(store->url().display, "", "--machine-class",
                       fmt::format("no session of class {} in the history", cls));
    const auto path = snapshot_path(root, cls);
    std::filesystem::create_directories(path.parent_path());
    write_file_atomically(path.string(), noise_snapshot_json(*table));
    written.push_back(path.string());
  }
  return written;
}

}  // namespace perfgate::cli
