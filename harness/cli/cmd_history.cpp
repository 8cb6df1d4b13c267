// perfgate history record|list|changes|noise: the results history (docs/history.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "learned_noise_cli.hpp"
#include "perfgate/baseline_store.hpp"
#include "perfgate/change_points.hpp"
#include "perfgate/fleet.hpp"
#include "perfgate/history.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/report.hpp"

#ifndef PERFGATE_VERSION_STRING
#define PERFGATE_VERSION_STRING "unknown"
#endif

namespace perfgate {
namespace {

struct HistoryArgs {
  std::string db;
  // record
  std::string commit, branch, time, machine_class;
  std::vector<std::string> files;
  std::string shard, report;  // a shard of a sharded run: "I/N", its JSON report
  int run_exit_code = -1;
  // list / changes
  std::string json, markdown;
  std::size_t limit = 0;
  double max_p = 0.001;
  double min_change = 0;
  bool no_common_mode = false;
  bool quiet = false;
  // noise
  std::size_t window = 30;
  std::size_t min_sessions = 5;
  bool common_mode = false;
};

std::string history_url(const HistoryArgs& a) { return cli::required_history_url(a.db); }

// The run's JSON report, kept with the session for `history merge`: it must be a perfgate report.
std::string read_report_json(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file, "", "--report", "cannot read the report");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("schema", "") != "perfgate.report/1")
    throw InputError(file, "", "--report", "not a perfgate JSON report (perfgate run --report-dir writes one)");
  return text;
}

// The files of one recording grouped by the class their runs belong to (history::history_class): one `perfgate
// run` of CPU and GPU suites on a GPU host spans two classes, and each class gets its own session. With
// --machine-class every file goes to that class.
std::map<std::string, std::vector<std::string>> files_by_class(const std::vector<std::string>& files,
                                                               const std::string& forced_class) {
  std::map<std::string, std::vector<std::string>> groups;
  if (!forced_class.empty()) {
    groups[forced_class] = files;
    return groups;
  }
  for (const auto& f : files) groups[history::history_class(load_results({f}))].push_back(f);
  return groups;
}

int run_record(const HistoryArgs& a) {
  const std::string url = history_url(a);
  history::parse_history_url(url);  // a bad URL is reported before the files are read
  const auto groups = files_by_class(split_comma_lists(a.files), a.machine_class);
  // Every group is read and checked before anything is written: bad input writes nothing.
  std::vector<history::SessionRecord> records;
  for (const auto& [cls, files] : groups) {
    history::SessionInfo info;
    info.machine_class = cls;
    info.commit = a.commit;
    info.branch = a.branch;
    info.time = a.time;
    info.perfgate_version = PERFGATE_VERSION_STRING;
    info.exit_code = a.run_exit_code;
    if (!a.shard.empty()) {
      const auto shard = history::parse_shard(a.shard);
      info.shard_index = shard.index;
      info.shard_count = shard.count;
    }
    records.push_back(history::make_session_record(load_results(files), info));
    // A shard's report covers its whole run: every class's session of it carries the report.
    if (!a.report.empty()) records.back().report = read_report_json(a.report);
  }
  auto store = history::open_store(url, history::OpenMode::create);
  for (const auto& record : records) {
    const std::int64_t id = store->record(record);
    std::printf("perfgate: recorded session %lld into %s (class %s, commit %s, %s, %zu series, %zu process run%s)\n",
                static_cast<long long>(id), store->url().display.c_str(), record.info.machine_class.c_str(),
                record.info.commit.c_str(), record.info.time.c_str(), record.series.size(), record.process_runs.size(),
                record.process_runs.size() == 1 ? "" : "s");
  }
  return 0;
}

nlohmann::json session_json(const history::SessionSummary& s) {
  return {{"id", s.id},
          {"commit", s.info.commit},
          {"machine_class", s.info.machine_class},
          {"time", s.info.time},
          {"branch", s.info.branch},
          {"host", s.info.host},
          {"perfgate_version", s.info.perfgate_version},
          {"process_runs", s.process_runs},
          {"series", s.series},
          {"shard_index", s.info.shard_index},
          {"shard_count", s.info.shard_count},
          {"exit_code", s.info.exit_code}};
}

int run_list(const HistoryArgs& a) {
  auto store = history::open_store(history_url(a), history::OpenMode::existing_only);
  const auto sessions = store->list_sessions({a.machine_class, "", a.limit});
  if (!a.quiet) {
    // Columns as wide as their longest entry: a class with its CPU generation runs to 40 characters and more.
    std::size_t cls = std::string("machine class").size(), branch = 6, host = 4;
    for (const auto& s : sessions) {
      cls = std::max(cls, s.info.machine_class.size());
      branch = std::max(branch, s.info.branch.size());
      host = std::max(host, s.info.host.size());
    }
    fmt::print("{:<6}  {:<27}  {:<{}}  {:<12}  {:<{}}  {:<{}}  {:>5}  {:>7}\n", "id", "time", "machine class", cls,
               "commit", "branch", branch, "host", host, "runs", "series");
    for (const auto& s : sessions)
      fmt::print("{:<6}  {:<27}  {:<{}}  {:<12.12}  {:<{}}  {:<{}}  {:>5}  {:>7}\n", s.id, s.info.time,
                 s.info.machine_class, cls, s.info.commit, s.info.branch, branch, s.info.host, host, s.process_runs,
                 s.series);
    std::printf("%zu session%s\n", sessions.size(), sessions.size() == 1 ? "" : "s");
  }
  if (!a.json.empty()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : sessions) out.push_back(session_json(s));
    write_file_atomically(a.json, out.dump(2) + "\n");
  }
  return 0;
}

std::string percent(double relative) { return fmt::format("{:+.2f}%", 100 * relative); }

nlohmann::json change_json(const history::SeriesChange& c) {
  return {{"machine_class", c.key.machine_class},
          {"benchmark", c.key.benchmark},
          {"metric", c.key.metric},
          {"kind", metric_kind_name(c.key.kind)},
          {"commit", c.commit},
          {"previous_commit", c.previous_commit},
          {"commit_range", c.previous_commit + ".." + c.commit},
          {"time", c.time},
          {"session_id", c.session_id},
          {"change", c.step},
          {"cumulative_change", c.cumulative},
          {"confidence", c.confidence},
          {"p_value", c.p_value},
          {"sessions_before", c.sessions_before},
          {"sessions_after", c.sessions_after},
          {"common_mode_removed", c.common_mode_removed}};
}

std::string changes_markdown(const std::vector<history::SeriesChange>& changes, const std::string& url) {
  std::string md = fmt::format(
      "## perfgate history changes\n\nHistory: `{}`. {} change point{}; change is relative "
      "slowness (+ = slower), cumulative from the first level of the series.\n\n",
      url, changes.size(), changes.size() == 1 ? "" : "s");
  if (changes.empty()) return md;
  md += "| class | benchmark | metric | commit range | time | change | cumulative | confidence |\n";
  md += "|---|---|---|---|---|---:|---:|---:|\n";
  for (const auto& c : changes)
    md += fmt::format("| {} | {} | {} | `{}..{}` | {} | {} | {} | {:.4f} |\n", escape_markdown(c.key.machine_class),
                      escape_markdown(c.key.benchmark), escape_markdown(c.key.metric), c.previous_commit, c.commit,
                      c.time, percent(c.step), percent(c.cumulative), c.confidence);
  return md;
}

// Why a history too short for the permutation test can show no change point, however large: "" when its longest
// series is long enough to reach the test's max_p.
std::string too_short_note(std::size_t longest, const history::ChangePointOptions& test) {
  if (longest == 0) return "";
  const std::size_t needed = history::sessions_for_a_change_point(test);
  if (needed != 0 && longest >= needed) return "";
  return fmt::format(
      "the longest series holds {} session{}; at --max-p {:g} a change point needs about {} sessions or more (a "
      "permutation test of fewer can hardly give a p-value that small, however large the step): record more "
      "sessions, or raise --max-p",
      longest, longest == 1 ? "" : "s", test.max_p, needed == 0 ? std::string("more than 64") : std::to_string(needed));
}

int run_changes(const HistoryArgs& a) {
  auto store = history::open_store(history_url(a), history::OpenMode::existing_only);
  history::ChangeOptions o;
  o.test.max_p = a.max_p;
  // The smallest p-value a permutation test can give is 1 / (permutations + 1).
  o.test.max_permutations = std::max(o.test.max_permutations, static_cast<int>(std::ceil(1.0 / a.max_p)) - 1);
  o.min_change = a.min_change;
  o.remove_common_mode = !a.no_common_mode;
  std::vector<std::string> classes =
      a.machine_class.empty() ? store->machine_classes() : std::vector<std::string>{a.machine_class};
  std::vector<history::SeriesChange> changes;
  std::size_t longest = 0;  // sessions in the longest series of any class
  for (const auto& c : classes) {
    const history::ClassHistory h = store->class_history(c);
    for (const auto& series : h.series) longest = std::max(longest, series.points.size());
    auto found = history::find_changes(h, o);
    changes.insert(changes.end(), std::make_move_iterator(found.begin()), std::make_move_iterator(found.end()));
  }
  const std::string too_short = too_short_note(longest, o.test);
  if (!a.quiet) {
    for (const auto& c : changes)
      std::printf("%s  %s %s [%s]: %s (cumulative %s) at %s..%s, confidence %.4f\n", c.time.c_str(),
                  c.key.benchmark.c_str(), c.key.metric.c_str(), c.key.machine_class.c_str(), percent(c.step).c_str(),
                  percent(c.cumulative).c_str(), c.previous_commit.c_str(), c.commit.c_str(), c.confidence);
    std::printf("%zu change point%s in %zu machine class%s\n", changes.size(), changes.size() == 1 ? "" : "s",
                classes.size(), classes.size() == 1 ? "" : "es");
    if (!too_short.empty()) std::printf("note: %s\n", too_short.c_str());
  }
  if (!a.json.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& c : changes) list.push_back(change_json(c));
    write_file_atomically(a.json, nlohmann::json{{"changes", list}}.dump(2) + "\n");
  }
  if (!a.markdown.empty())
    write_file_atomically(a.markdown, changes_markdown(changes, store->url().display) +
                                          (too_short.empty() ? "" : "\nNote: " + escape_markdown(too_short) + "\n"));
  return 0;
}

nlohmann::json noise_json(const history::SeriesKey& key, const history::LearnedNoise& n) {
  return {{"machine_class", key.machine_class},
          {"benchmark", key.benchmark},
          {"metric", key.metric},
          {"kind", metric_kind_name(key.kind)},
          {"relative_sd", n.relative_sd},
          {"degrees_of_freedom", n.degrees_of_freedom},
          {"sessions_used", n.sessions_used},
          {"sufficient", n.sufficient}};
}

// The learned between-session noise of every series (what the gate will use; docs/history.md).
int run_noise(const HistoryArgs& a) {
  auto store = history::open_store(history_url(a), history::OpenMode::existing_only);
  history::NoiseOptions o;
  o.window = a.window;
  o.min_sessions = a.min_sessions;
  o.remove_common_mode = a.common_mode;
  const std::vector<std::string> classes =
      a.machine_class.empty() ? store->machine_classes() : std::vector<std::string>{a.machine_class};
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : classes) {
    for (const auto& [key, n] : history::learned_noise(store->class_history(c, a.window), o)) {
      if (!a.quiet)
        std::printf("%-24s  %-60s  %-20s  %7.3f%%  d.f. %3d%s\n", key.machine_class.c_str(), key.benchmark.c_str(),
                    key.metric.c_str(), 100 * n.relative_sd, n.degrees_of_freedom,
                    n.sufficient ? "" : "  (too few sessions)");
      list.push_back(noise_json(key, n));
    }
  }
  if (!a.json.empty())
    write_file_atomically(a.json, nlohmann::json{{"window", a.window}, {"noise", list}}.dump(2) + "\n");
  return 0;
}

}  // namespace

void add_history_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "history", "the results history: record sessions, list them, find change points, learn the noise");
  cmd->require_subcommand(1);
  auto args = std::make_shared<HistoryArgs>();

  auto* record = cmd->add_subcommand("record", "record result files as one session (one transaction)");
  cli::add_history_selection(record, args->db, args->machine_class, "machine class (default: the files' class)");
  record->add_option("--commit", args->commit, "the commit measured")->required();
  record->add_option("--branch", args->branch, "the branch");
  record->add_option("--time", args->time, "ISO-8601 time of the session (default: now); sessions are ordered by it");
  record->add_option("--shard", args->shard, "this session is shard I/N of a sharded run (perfgate history merge)");
  record->add_option("--exit-code", args->run_exit_code, "the exit code of the run that measured the files");
  record->add_option("--report", args->report, "the run's JSON report, kept for perfgate history merge");
  record->add_option("files", args->files, "result files (one process run each, or written by perfgate run)")
      ->required()
      ->expected(1, -1);
  on_run(record, exit_code, [args] { return run_record(*args); });

  add_history_fleet_commands(*cmd, exit_code);

  auto* list = cmd->add_subcommand("list", "list the recorded sessions, oldest first");
  cli::add_history_selection(list, args->db, args->machine_class, "only this class");
  list->add_option("--json", args->json, "write the sessions here as a JSON array");
  list->add_option("--limit", args->limit, "only the most recent N sessions");
  list->add_flag("--quiet,-q", args->quiet, "no terminal table");
  on_run(list, exit_code, [args] { return run_list(*args); });

  auto* changes = cmd->add_subcommand("changes", "change points of every (class, benchmark, metric) series");
  cli::add_history_selection(changes, args->db, args->machine_class, "only this class (default: every class)");
  changes->add_option("--json", args->json, "write {\"changes\": [...]} here");
  changes->add_option("--markdown", args->markdown, "write a Markdown table here");
  changes->add_option("--max-p", args->max_p, "significance of a change point (permutation p-value, default 0.001)")
      ->check(CLI::Range(1e-6, 0.5));
  changes->add_option("--min-change", args->min_change, "report only steps of at least this relative size (default 0)")
      ->check(CLI::Range(0.0, 10.0));
  changes->add_flag("--no-common-mode", args->no_common_mode, "do not remove the suite's common mode first");
  changes->add_flag("--quiet,-q", args->quiet, "no terminal lines");
  on_run(changes, exit_code, [args] { return run_changes(*args); });

  auto* noise =
      cmd->add_subcommand("noise", "learned between-session noise of every series (robust SD of session medians)");
  cli::add_history_selection(noise, args->db, args->machine_class, "only this class (default: every class)");
  noise->add_option("--window", args->window, "the most recent sessions considered (default 30)")
      ->check(CLI::Range(2, 100000));
  noise->add_option("--min-sessions", args->min_sessions, "sessions needed to replace the prior (default 5)")
      ->check(CLI::Range(2, 100000));
  noise->add_flag("--common-mode", args->common_mode, "subtract the suite's common mode first");
  noise->add_option("--json", args->json, "write {\"window\": N, \"noise\": [...]} here");
  noise->add_flag("--quiet,-q", args->quiet, "no terminal lines");
  on_run(noise, exit_code, [args] { return run_noise(*args); });
}

}  // namespace perfgate
