// perfgate history report|shard|merge: the dashboard and the fleet (docs/history.md, "Dashboard" and
// "Sharding").
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "learned_noise_cli.hpp"
#include "perfgate/baseline_store.hpp"
#include "perfgate/dashboard.hpp"
#include "perfgate/fleet.hpp"
#include "perfgate/history.hpp"

namespace perfgate {
namespace {

struct FleetArgs {
  std::string db, machine_class;
  // report
  std::string out, commit_url, baseline_dir = "baselines", chartjs = "/usr/share/javascript/chart.js/chart.min.js";
  std::size_t last = 0;
  // shard
  std::string shard, list, filter_out, names_out, relative_list, relative_filter_out, plan_json, costs_until;
  // merge
  std::string commit, markdown, junit, json;
  int shards = 0;
  bool quiet = false;
};

int run_report(const FleetArgs& a) {
  auto store = history::open_store(cli::required_history_url(a.db), history::OpenMode::existing_only);
  history::DashboardOptions o;
  o.out_dir = a.out;
  o.machine_class = a.machine_class;
  o.last_sessions = a.last;
  o.commit_url = a.commit_url;
  o.baseline_dir = a.baseline_dir;
  o.chartjs = a.chartjs;
  const auto t0 = std::chrono::steady_clock::now();
  const auto s = history::write_dashboard(*store, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.quiet)
    std::printf(
        "perfgate: dashboard %s/index.html: %zu class%s, %zu session%s, %zu series (%zu with a stored baseline), "
        "%zu point%s, %zu change point%s; %zu data chunk%s, %.1f MB, %.1f s\n",
        a.out.c_str(), s.classes, s.classes == 1 ? "" : "es", s.sessions, s.sessions == 1 ? "" : "s", s.series,
        s.baselines, s.points, s.points == 1 ? "" : "s", s.change_points, s.change_points == 1 ? "" : "s", s.chunks,
        s.chunks == 1 ? "" : "s", static_cast<double>(s.bytes) / 1e6, seconds);
  return 0;
}

std::vector<std::string> read_lines(const std::string& file, const std::string& option) {
  std::ifstream in(file);
  if (!in) throw InputError(file, "", option, "cannot read the list of benchmarks");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

void write_text(const std::string& file, const std::string& text) { write_file_atomically(file, text); }

// The measured costs, or none (then the plan splits by name) when no history is given or it cannot be
// read: a fleet's first run has no history yet, and planning must not stop it.
std::map<std::string, double> costs_from_history(const FleetArgs& a) {
  const std::string url = cli::history_url_or_env(a.db);
  if (url.empty()) return {};
  try {
    const double until = a.costs_until.empty()
                             ? std::numeric_limits<double>::infinity()
                             : history::iso8601_to_unix(history::normalise_iso8601(a.costs_until, "--costs-until"));
    auto store = history::open_store(url, history::OpenMode::existing_only);
    return store->benchmark_costs(a.machine_class, until);
  } catch (const history::HistoryError& e) {
    std::fprintf(stderr, "perfgate: history shard: no costs from the history (%s); splitting by name\n", e.what());
    return {};
  }
}

int run_shard(const FleetArgs& a) {
  const auto spec = history::parse_shard(a.shard);
  const auto all = read_lines(a.list, "--list");
  const auto costs = costs_from_history(a);
  const auto plan = history::plan_shards(all, costs, spec.count);
  const auto& mine = plan.shards[static_cast<std::size_t>(spec.index - 1)];
  if (!a.filter_out.empty()) write_text(a.filter_out, history::exact_filter(mine) + "\n");
  if (!a.names_out.empty()) {
    std::string text;
    for (const auto& n : mine) text += n + "\n";
    write_text(a.names_out, text);
  }
  if (!a.relative_list.empty()) {
    // The relative gate's benchmarks are a subset of the list: each stays in the shard the plan gave it.
    const std::set<std::string> in_shard(mine.begin(), mine.end());
    std::vector<std::string> relative;
    for (const auto& n : read_lines(a.relative_list, "--relative-list"))
      if (in_shard.count(n)) relative.push_back(n);
    // An empty alternative matches no benchmark name: the shard has no benchmark for the relative gate.
    if (!a.relative_filter_out.empty())
      write_text(a.relative_filter_out,
                 (relative.empty() ? std::string("^$") : history::exact_filter(relative)) + "\n");
  }
  if (!a.plan_json.empty()) {
    nlohmann::json shards = nlohmann::json::array();
    for (std::size_t i = 0; i < plan.shards.size(); ++i)
      shards.push_back({{"shard", i + 1}, {"benchmarks", plan.shards[i]}, {"cost_seconds", plan.seconds[i]}});
    write_text(a.plan_json, nlohmann::json{{"balanced_by_cost", plan.balanced_by_cost},
                                           {"costed", plan.costed},
                                           {"benchmarks", all.size()},
                                           {"shards", shards}}
                                    .dump(2) +
                                "\n");
  }
  if (!a.quiet && plan.balanced_by_cost)
    std::printf(
        "perfgate: shard %d/%d: %zu of %zu benchmarks, balanced by the history's measured costs (%zu of them "
        "measured); planned seconds per process run: %s\n",
        spec.index, spec.count, mine.size(), all.size(), plan.costed,
        fmt::format("{:.2f}", fmt::join(plan.seconds, " / ")).c_str());
  else if (!a.quiet)
    std::printf("perfgate: shard %d/%d: %zu of %zu benchmarks, split by name (no cost in the history)\n", spec.index,
                spec.count, mine.size(), all.size());
  return 0;
}

int run_merge(const FleetArgs& a) {
  auto store = history::open_store(cli::required_history_url(a.db), history::OpenMode::existing_only);
  const auto merged = history::merge_shards(*store, a.commit, a.shards, a.machine_class);
  const std::string md = history::merge_markdown(merged, store->url().display);
  if (!a.markdown.empty()) write_text(a.markdown, md);
  if (!a.junit.empty()) write_text(a.junit, history::merge_junit(merged));
  if (!a.json.empty()) write_text(a.json, history::merge_json(merged).dump(2) + "\n");
  if (!a.quiet) {
    std::printf("%s", md.substr(0, md.find('\n') + 1).c_str());
    for (const auto& p : merged.problems) std::printf("perfgate: merge: %s\n", p.c_str());
  }
  return merged.exit_code;
}

}  // namespace

void add_history_fleet_commands(CLI::App& history, int& exit_code) {
  auto args = std::make_shared<FleetArgs>();

  auto* report = history.add_subcommand("report", "write the static dashboard: trend plots of every series, from disk");
  cli::add_history_selection(report, args->db, args->machine_class, "only this class (default: every class)");
  report->add_option("--out", args->out, "output folder (index.html, data/, vendor/)")->required();
  report->add_option(
      "--commit-url", args->commit_url,
      "link of a commit, {commit} replaced by its sha (e.g. https://github.com/ORG/REPO/commit/{commit})");
  report->add_option("--baseline-dir", args->baseline_dir, "root of baselines/<class>/<suite>.json: the stored levels")
      ->capture_default_str();
  report->add_option("--chartjs", args->chartjs, "Chart.js to vendor (Debian's libjs-chart.js)")->capture_default_str();
  report->add_option("--last", args->last, "only the most recent N sessions of each class (default: all)");
  report->add_flag("--quiet,-q", args->quiet, "no summary line");
  on_run(report, exit_code, [args] { return run_report(*args); });

  auto* shard = history.add_subcommand("shard", "pick this shard's benchmarks, balanced by their measured cost");
  cli::add_history_selection(shard, args->db, args->machine_class,
                             "costs of this class only (default: the latest of any)");
  shard->add_option("--shard", args->shard, "this shard, I/N")->required();
  shard->add_option("--list", args->list, "every benchmark to split, one name a line (--benchmark_list_tests)")
      ->required();
  shard->add_option("--filter-out", args->filter_out, "write this shard's --benchmark_filter regex here");
  shard->add_option("--names-out", args->names_out, "write this shard's benchmark names here");
  shard->add_option("--relative-list", args->relative_list, "benchmarks of the relative gate (a subset of --list)");
  shard->add_option("--relative-filter-out", args->relative_filter_out, "write the shard's relative-gate regex here");
  shard->add_option("--plan-json", args->plan_json, "write every shard's benchmarks and planned cost here");
  shard->add_option("--costs-until", args->costs_until,
                    "ISO-8601: use only sessions recorded up to then, so that every shard plans alike (ci/perf.sh: the "
                    "commit's time)");
  shard->add_flag("--quiet,-q", args->quiet, "no summary line");
  on_run(shard, exit_code, [args] { return run_shard(*args); });

  auto* merge = history.add_subcommand("merge", "merge the shards of a commit into one report and one exit code");
  cli::add_history_selection(merge, args->db, args->machine_class, "only sessions of this class");
  merge->add_option("--commit", args->commit, "the commit the shards measured")->required();
  merge->add_option("--shards", args->shards, "how many shards the run had")->required()->check(CLI::Range(1, 10000));
  merge->add_option("--markdown", args->markdown, "write the merged Markdown report here");
  merge->add_option("--junit", args->junit,
                    "write JUnit XML here (one test case per benchmark, one per shard problem)");
  merge->add_option("--json", args->json, "write the merged report as JSON here");
  merge->add_flag("--quiet,-q", args->quiet, "no terminal lines");
  on_run(merge, exit_code, [args] { return run_merge(*args); });
}

}  // namespace perfgate
