// perfgate baseline update --suite NAME --from RUN.json [RUN2.json ...]: store baselines/<class>/<suite>.json.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "environment.hpp"
#include "learned_noise_cli.hpp"
#include "perfgate/baseline_store.hpp"
#include "perfgate/compare.hpp"
#include "perfgate/context_keys.hpp"
#include "perfgate/host_identity.hpp"
#include "perfgate/loader.hpp"
#include "perfgate/machine_class.hpp"
#include "perfgate/runner.hpp"
#include "perfgate/suites.hpp"

namespace perfgate {
namespace {

struct BaselineArgs {
  std::string suite;
  std::vector<std::string> from;
  std::string dir = "baselines";
  std::string machine_class;
  std::string commit;
  bool append = false;
  bool allow_failed = false;
  std::string history;  // refresh the learned-noise snapshot(s) from this history
  std::size_t window = 30;
  std::size_t min_sessions = 5;
};

// --history: baselines/<class>[/<generation>]/noise.json of every class of the history (or --machine-class).
int run_noise_update(const BaselineArgs& a) {
  for (const auto& file : cli::write_noise_snapshots(a.history, a.dir, a.machine_class, a.window, a.min_sessions)) {
    const LearnedNoiseTable t = load_noise_snapshot(file);
    std::printf("perfgate: wrote %s (class %s, %zu series, %zu with enough sessions to replace the prior)\n",
                file.c_str(), t.machine_class.c_str(), t.bands.size(), t.usable_count());
  }
  return 0;
}

// The runs of one suite out of the given files, as reports file them (split_by_suite: a plain binary's runs under the
// binary's name); InputError naming the suites present when there are none.
ResultSet suite_runs(const std::vector<std::string>& files, const std::string& suite) {
  const ResultSet loaded = load_results(files);
  auto suites = split_by_suite(loaded);
  const auto it = suites.find(suite);
  if (it != suites.end() && !it->second.benchmarks.empty()) return std::move(it->second);
  std::set<std::string> present;
  for (const auto& [name, rs] : suites) present.insert(name);
  std::string have;
  for (const auto& name : present) have += (have.empty() ? "" : ", ") + name;
  throw InputError(files.front(), "", "benchmarks",
                   fmt::format("no benchmark of suite '{}' in the given runs (suites present: {})", suite,
                               have.empty() ? "none" : have));
}

// Names each failed benchmark on stderr; returns how many failed.
int report_failed(const ResultSet& runs) {
  int failed = 0;
  for (const auto& b : runs.benchmarks) {
    if (!b.error) continue;
    std::fprintf(stderr, "perfgate: benchmark '%s' failed: %s\n", b.name.c_str(), b.error->c_str());
    ++failed;
  }
  return failed;
}

// Why a plain binary's run written on another host cannot be filed here, and what to do instead.
std::string other_host_advice(const std::string& why) {
  return why +
         ", by a binary that records no CPU facts (a plain Google Benchmark binary's own JSON): its machine class "
         "cannot be known on this host. Give --machine-class CLASS (the class `perfgate run` names on the host that "
         "wrote it), or record the baseline there with `perfgate run --bench BINARY --update-baseline`";
}

// A plain Google Benchmark binary's own JSON records no CPU facts. Written on this host (its host name, CPU count
// and caches), its runs get this host's, as `perfgate run` gives them, so that the baseline is filed under the class
// `perfgate run` looks in here; written elsewhere, InputError. Returns the files that got them.
std::vector<std::string> add_this_hosts_cpu_facts(ResultSet& runs) {
  const HostIdentity here = this_host();
  const RunEnvironment env = cli::run_environment();
  std::vector<std::string> files;
  for (RunContext& run : runs.contexts) {
    const auto given = cli::give_this_hosts_cpu_facts(run, here, env, "perfgate baseline update");
    if (given.outcome == cli::PlainRunFacts::written_elsewhere)
      throw InputError(run.source_file, "", given.elsewhere->field, other_host_advice(given.elsewhere->message));
    if (given.outcome == cli::PlainRunFacts::this_host_unknown)
      throw InputError(run.source_file, "", "context",
                       "records no CPU facts, and this host's /proc/cpuinfo names no CPU: give --machine-class");
    if (given.outcome == cli::PlainRunFacts::added) files.push_back(run.source_file);
  }
  return files;
}

// Says on stdout which files got this host's CPU facts (add_this_hosts_cpu_facts), and which CPU that is.
void print_added_cpu_facts(const std::vector<std::string>& files, const ResultSet& runs) {
  if (files.empty()) return;
  const RunContext& first = runs.contexts.front();
  const std::string which =
      files.size() == 1 ? files.front() : fmt::format("{} and {} more files", files.front(), files.size() - 1);
  fmt::print(
      "perfgate: {} {} no CPU facts (a plain Google Benchmark binary's own JSON), written on this host: recorded "
      "with this host's CPU, {} ({})\n",
      which, files.size() == 1 ? "records" : "record", first.get(context_keys::kCpuModel),
      first.get(context_keys::kCpuSignature));
}

int run_update(const BaselineArgs& a, const std::string& command_line) {
  if (a.from.empty() && !a.history.empty()) return run_noise_update(a);
  if (a.from.empty())
    throw InputError("", "", "--from", "no run files given (or --history URL to refresh the learned noise)");
  if (a.suite.empty()) throw InputError("", "", "--suite", "which suite's baseline to store");
  ResultSet runs = suite_runs(split_comma_lists(a.from), a.suite);
  const int failed = report_failed(runs);
  if (failed && !a.allow_failed) {
    std::fprintf(stderr, "perfgate: not storing a baseline with %d failed benchmark%s (--allow-failed overrides)\n",
                 failed, failed == 1 ? "" : "s");
    return 3;
  }
  if (a.machine_class.empty() && machine_class_override().empty())
    print_added_cpu_facts(add_this_hosts_cpu_facts(runs), runs);
  BaselineInfo info;
  info.machine_class = a.machine_class.empty() ? machine_class(runs) : a.machine_class;
  validate_machine_class(info.machine_class, "--machine-class");
  info.commit = a.commit.empty()
                    ? first_context_value(runs, {context_keys::kGitCommit, context_keys::kLegacyCommit, "git_commit"})
                    : a.commit;
  info.command = command_line;
  // Runs of another CPU generation than the class level's go beside it, as perfgate run --update-baseline puts them.
  info.generation = new_baseline_generation(a.dir, info.machine_class,
                                            first_context_value(runs, {context_keys::kCpuSignature}), a.suite);
  const auto path = baseline_file(a.dir, a.suite, info);
  std::error_code ec;
  if (a.append && std::filesystem::exists(path, ec)) {
    ResultSet stored = load_result_file(path.string());
    merge_results(stored, std::move(runs));
    runs = std::move(stored);
  }
  const auto written = write_baseline(a.dir, a.suite, runs, info);
  std::printf("perfgate: wrote %s (%zu benchmarks, %d process run%s, machine class %s)\n", written.string().c_str(),
              runs.benchmarks.size(), runs.process_runs(), runs.process_runs() == 1 ? "" : "s",
              info.machine_class.c_str());
  if (a.history.empty()) return 0;
  BaselineArgs every_class = a;  // the baseline's class name carries no CPU generation; refresh them all
  every_class.machine_class.clear();
  return run_noise_update(every_class);
}

}  // namespace

void add_baseline_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("baseline", "manage stored baselines (baselines/<machine-class>/<suite>.json)");
  cmd->require_subcommand(1);
  auto args = std::make_shared<BaselineArgs>();
  auto* update = cmd->add_subcommand("update", "store the given runs as the suite's baseline (atomic write)");
  update->add_option(
      "--suite", args->suite,
      "suite name: a perfgate suite's (the first part of its benchmark names), or a plain Google Benchmark "
      "binary's file name");
  update->add_option("--from", args->from, "Google Benchmark JSON of one or more process runs")->expected(1, -1);
  update->add_option(
      "--history", args->history,
      "results history: (re)write <class>[/<generation>]/noise.json, the learned-noise snapshot the gate "
      "uses without database access, for every class of the history or --machine-class");
  update->add_option("--noise-window", args->window, "most recent sessions the noise is learned from (default 30)")
      ->check(CLI::Range(3, 100000));
  update
      ->add_option("--noise-min-sessions", args->min_sessions,
                   "sessions a band needs before it replaces the prior (default 5)")
      ->check(CLI::Range(2, 100000));
  update->add_option("--baseline-dir", args->dir, "root of the baselines (default: baselines)");
  update->add_option("--machine-class", args->machine_class,
                     "machine class (default: PERFGATE_MACHINE_CLASS, else derived from the context)");
  update->add_option("--commit", args->commit, "commit to record (default: from the runs' context)");
  update->add_flag("--append", args->append,
                   "add the runs to the stored baseline's process runs instead of replacing it");
  update->add_flag("--allow-failed", args->allow_failed, "store even when a benchmark failed");
  update->callback([args, &exit_code] {
    std::string command_line = "perfgate baseline update --suite " + args->suite;
    for (const auto& f : args->from) command_line += " --from " + f;
    if (!args->machine_class.empty()) command_line += " --machine-class " + args->machine_class;
    exit_code = 2;  // until it succeeds
    exit_code = run_update(*args, command_line);
  });
}

}  // namespace perfgate
